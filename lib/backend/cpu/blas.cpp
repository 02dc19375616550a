#include "backend/cpu/blas.hpp"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <string>

#include "backend/cpu/address_space.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

#if STOKE_HAVE_DNNL
#include <dnnl.h>

#include "backend/cpu/conv2d_dnnl_primitive.hpp"
#endif

extern "C" char* openblas_get_corename(void);

namespace stoke::cpu {

namespace {
// One OpenBLAS thread: parallelism comes from the oneTBB arena, each task
// calling sgemm on its own thread (the pthread build locks its buffer
// allocator, so concurrent calls are safe).
const bool kOneBlasThread = [] {
  openblas_set_num_threads(1);
  return true;
}();

// OpenBLAS maps a 128 MiB work buffer (BUFFER_SIZE on x86-64) for each thread
// that calls it at once and retries forever when that fails: twice that
// must be free (address_space.hpp).
constexpr std::size_t kBlasBufferProbe = std::size_t{2} * (128u << 20);

std::string openblas_core() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

struct Route {
  BlasRoute route = BlasRoute::kOpenBlas;
  std::string description;
};

const Route& route() {
  static const Route r = [] {
    Route out;
    const std::string core = openblas_core();
    const bool avx2 = __builtin_cpu_supports("avx2");
    out.description = "OpenBLAS (" + core + " kernels)";
#if STOKE_HAVE_DNNL
    if (blas_detail::core_lags_cpu(core, avx2)) {
      out.route = BlasRoute::kOneDnn;
      out.description = "oneDNN sgemm (OpenBLAS chose its " + core + " kernels on a CPU with " +
                        (__builtin_cpu_supports("avx512f") ? "AVX-512" : "AVX2") +
                        ": a CPU model it does not know)";
      log_info("matrix products: " + out.description);
    }
#endif
    return out;
  }();
  return r;
}
}  // namespace

namespace blas_detail {

bool core_lags_cpu(const std::string& name, bool cpu_has_avx2) {
  // OpenBLAS's x86-64 cores with AVX2 kernels (0.3.21's names, any case).
  static constexpr std::array<const char*, 6> kAvx2Cores = {
      "haswell", "zen", "skylakex", "cooperlake", "sapphirerapids", "excavator"};
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool avx2_core = std::find(kAvx2Cores.begin(), kAvx2Cores.end(), lower) != kAvx2Cores.end();
  return cpu_has_avx2 && !avx2_core;
}

void sgemm_openblas(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                    int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  (void)kOneBlasThread;
  if (address_space_limited())  // the message is built only where it may be needed
    require_address_space(kBlasBufferProbe, "a " + std::to_string(m) + "x" + std::to_string(k) +
                                                " by " + std::to_string(k) + "x" +
                                                std::to_string(n) + " matrix product (BLAS)");
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool sgemm_onednn(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                  int lda, const float* b, int ldb, float beta, float* c, int ldc) {
#if STOKE_HAVE_DNNL
  const dnnl_conv::OneOmpThread one_thread;  // the oneTBB arena owns parallelism
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    const std::string what = "a " + std::to_string(m) + "x" + std::to_string(k) + " by " +
                             std::to_string(k) + "x" + std::to_string(n) +
                             " matrix product (oneDNN sgemm)";
    if (status == dnnl_out_of_memory) throw OutOfMemory("out of memory: " + what, 0, 0, 0);
    throw Unsupported(what + " failed with oneDNN status " +
                      std::to_string(static_cast<int>(status)));
  }
  return true;
#else
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
  (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  return false;
#endif
}

}  // namespace blas_detail

BlasRoute blas_route() {
  return route().route;
}

std::string blas_description() {
  return route().description;
}

void sgemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
           const float* b, int ldb, float beta, float* c, int ldc) {
  if (route().route == BlasRoute::kOneDnn &&
      blas_detail::sgemm_onednn(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    return;
  blas_detail::sgemm_openblas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace stoke::cpu

namespace stoke {

std::string cpu_matrix_route() {
  return cpu::blas_description();
}

}  // namespace stoke
