// SGD and Adam/AdamW updates against the naive (PyTorch-semantics) reference
// over several steps; sizes straddle the SIMD width.
#include "backend/cpu/naive.hpp"
#include "op_test_util.hpp"

namespace stoke::test {
namespace {

TEST(SgdUpdate, MatchesNaiveOverSteps) {
  Backend& be = cpu_backend();
  for (bool nesterov : {false, true}) {
    for (std::int64_t n : {1, 13, 100003}) {
      Tensor w = random_tensor(be, {n}, 1), rw = random_tensor(be, {n}, 1);
      Tensor v(be, {n}), rv(be, {n});
      be.fill(v, 0.0f);
      be.fill(rv, 0.0f);
      const SgdParams p{0.05f, 0.9f, 1e-3f, nesterov};
      for (int step = 0; step < 3; ++step) {
        Tensor g = random_tensor(be, {n}, 10 + static_cast<std::uint32_t>(step));
        be.sgd_update(w, g, v, p);
        cpu::naive::sgd_update(rw, g, rv, p);
      }
      expect_close(w, rw, {8 * kEpsF32, 8 * kEpsF32, "a few fused multiply-adds per step"}, "w");
      expect_close(v, rv, {8 * kEpsF32, 8 * kEpsF32, "a few fused multiply-adds per step"}, "v");
    }
  }
}

TEST(AdamUpdate, MatchesNaiveOverStepsForAdamAndAdamW) {
  Backend& be = cpu_backend();
  for (bool decoupled : {false, true}) {
    const std::int64_t n = 1031;
    Tensor w = random_tensor(be, {n}, 2), rw = random_tensor(be, {n}, 2);
    Tensor m(be, {n}), v(be, {n}), rm(be, {n}), rv(be, {n});
    for (Tensor* t : {&m, &v, &rm, &rv}) be.fill(*t, 0.0f);
    AdamParams p;
    p.lr = 1e-2f;
    p.weight_decay = 0.01f;
    p.decoupled_weight_decay = decoupled;
    for (int step = 1; step <= 4; ++step) {
      p.step = step;
      Tensor g = random_tensor(be, {n}, 20 + static_cast<std::uint32_t>(step));
      be.adam_update(w, g, m, v, p);
      cpu::naive::adam_update(rw, g, rm, rv, p);
    }
    // The division by sqrt(v) + eps amplifies rounding where v is small.
    expect_close(w, rw, {1e-5, 1e-5, "sqrt and division per step, 4 steps"}, "w");
    expect_close(m, rm, {8 * kEpsF32, 8 * kEpsF32, "fused multiply-adds"}, "m");
  }
}

TEST(SgdUpdate, PlainStepIsExact) {
  Backend& be = cpu_backend();
  const std::vector<float> w0 = {1.0f, -2.0f, 0.5f}, g0 = {0.5f, 0.25f, -1.0f};
  Tensor w(be, {3}), g(be, {3}), v(be, {3});
  w.copy_from_host(w0.data());
  g.copy_from_host(g0.data());
  be.fill(v, 0.0f);
  be.sgd_update(w, g, v, {0.5f, 0.0f, 0.0f, false});
  EXPECT_EQ(w.to_vector(), (std::vector<float>{0.75f, -2.125f, 1.0f}));
}

}  // namespace
}  // namespace stoke::test
