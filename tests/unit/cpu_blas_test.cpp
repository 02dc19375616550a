// The CPU backend's matrix product: OpenBLAS, or oneDNN's sgemm where
// OpenBLAS chose kernels older than the CPU (lib/backend/cpu/blas.hpp). Both
// routes against a double-precision reference, whichever one this machine takes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/blas.hpp"

namespace stoke::cpu {
namespace {

TEST(CpuBlas, ACoreWithoutAvx2KernelsLagsAnAvx2Cpu) {
  EXPECT_TRUE(blas_detail::core_lags_cpu("Prescott", true));  // Debian 12's on a 5th-gen Xeon
  EXPECT_TRUE(blas_detail::core_lags_cpu("Sandybridge", true));
  EXPECT_FALSE(blas_detail::core_lags_cpu("Prescott", false));
  for (const char* core :
       {"Haswell", "Zen", "SkylakeX", "SKYLAKEX", "Cooperlake", "SapphireRapids"})
    EXPECT_FALSE(blas_detail::core_lags_cpu(core, true)) << core;
}

struct Case {
  bool ta, tb;
  int m, n, k;
  float alpha, beta;
};

// C = alpha op(A) op(B) + beta C in double, row-major, with leading
// dimensions one wider than needed (strided operands).
std::vector<double> reference(const Case& c, const std::vector<float>& a, int lda,
                              const std::vector<float>& b, int ldb, const std::vector<float>& c0,
                              int ldc) {
  std::vector<double> out(c0.begin(), c0.end());
  for (int i = 0; i < c.m; ++i) {
    for (int j = 0; j < c.n; ++j) {
      double sum = 0;
      for (int p = 0; p < c.k; ++p) {
        const double x = c.ta ? a[p * lda + i] : a[i * lda + p];
        const double y = c.tb ? b[j * ldb + p] : b[p * ldb + j];
        sum += x * y;
      }
      out[i * ldc + j] = c.alpha * sum + c.beta * c0[i * ldc + j];
    }
  }
  return out;
}

TEST(CpuBlas, BothRoutesMatchTheReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  const Case cases[] = {{false, false, 37, 53, 29, 1.0f, 0.0f},
                        {false, true, 64, 48, 384, -2.0f, 1.0f},  // the nearest-patch search's form
                        {true, false, 17, 96, 70, 1.0f, 1.0f},
                        {true, true, 5, 7, 300, 0.5f, -1.0f}};
  for (const Case& c : cases) {
    const int lda = (c.ta ? c.m : c.k) + 1, ldb = (c.tb ? c.k : c.n) + 1, ldc = c.n + 1;
    std::vector<float> a(static_cast<std::size_t>((c.ta ? c.k : c.m) * lda));
    std::vector<float> b(static_cast<std::size_t>((c.tb ? c.n : c.k) * ldb));
    std::vector<float> c0(static_cast<std::size_t>(c.m * ldc));
    for (auto* v : {&a, &b, &c0})
      for (float& x : *v) x = value(rng);
    const std::vector<double> want = reference(c, a, lda, b, ldb, c0, ldc);
    const double bound = 1e-5 * (std::abs(c.alpha) * c.k + std::abs(c.beta));
    const auto check = [&](const std::vector<float>& got, const char* route) {
      for (int i = 0; i < c.m; ++i)
        for (int j = 0; j < c.n; ++j)
          ASSERT_NEAR(got[i * ldc + j], want[i * ldc + j], bound)
              << route << " m=" << c.m << " n=" << c.n << " k=" << c.k << " at " << i << "," << j;
      for (int i = 0; i < c.m; ++i)  // the padding column is not written
        ASSERT_EQ(got[i * ldc + c.n], c0[i * ldc + c.n]) << route;
    };
    std::vector<float> open = c0, dnnl = c0, routed = c0;
    blas_detail::sgemm_openblas(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb,
                                c.beta, open.data(), ldc);
    check(open, "OpenBLAS");
    if (blas_detail::sgemm_onednn(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb,
                                  c.beta, dnnl.data(), ldc))
      check(dnnl, "oneDNN");
    sgemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, routed.data(),
          ldc);
    EXPECT_EQ(routed, blas_route() == BlasRoute::kOneDnn ? dnnl : open)
        << "sgemm takes the route blas_route() names: " << blas_description();
  }
}

}  // namespace
}  // namespace stoke::cpu
