// SGD and Adam/AdamW updates on every backend against the naive
// (PyTorch-semantics) reference over several steps and random sizes; the
// per-step values read from a tensor of the backend (what a replayed CUDA
// graph relies on); exact plain steps; bad scalars tensors named.
#include <cmath>

#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

std::vector<std::int64_t> sizes() {
  std::vector<std::int64_t> s = {1, 7, 8, 9, 13, 1031, 100003};
  ShapeRng rng(9);
  for (int i = 0; i < 12; ++i) s.push_back(rng.pick(1, 5000));
  return s;
}

}  // namespace

TEST_P(OpSuite, SgdUpdateMatchesNaiveOverSteps) {
  std::uint32_t seed = 1;
  for (bool nesterov : {false, true}) {
    for (std::int64_t n : sizes()) {
      const auto w0 = random_values(static_cast<std::size_t>(n), ++seed);
      Tensor w = upload(be(), {n}, w0), rw = upload(ref(), {n}, w0), v(be(), {n}), rv(ref(), {n});
      be().fill(v, 0.0f);
      ref().fill(rv, 0.0f);
      const SgdParams p{0.05f, 0.9f, 1e-3f, nesterov};
      for (int step = 0; step < 3; ++step) {
        const auto g = both({n}, ++seed);
        be().sgd_update(w, g.dut, v, p);
        cpu::naive::sgd_update(rw, g.ref, rv, p);
      }
      const std::string what = "n " + std::to_string(n) + (nesterov ? " nesterov" : "");
      EXPECT_TRUE(close(w, rw, tolerance(Accuracy::kElementwise), "w " + what));
      EXPECT_TRUE(close(v, rv, tolerance(Accuracy::kElementwise), "velocity " + what));
      if (HasFailure()) return;
    }
  }
}

TEST_P(OpSuite, AdamUpdateMatchesNaiveOverStepsForAdamAndAdamW) {
  std::uint32_t seed = 100;
  for (bool decoupled : {false, true}) {
    for (std::int64_t n : sizes()) {
      const auto w0 = random_values(static_cast<std::size_t>(n), ++seed);
      Tensor w = upload(be(), {n}, w0), rw = upload(ref(), {n}, w0);
      Tensor m(be(), {n}), v(be(), {n}), rm(ref(), {n}), rv(ref(), {n});
      for (Tensor* t : {&m, &v}) be().fill(*t, 0.0f);
      for (Tensor* t : {&rm, &rv}) ref().fill(*t, 0.0f);
      AdamParams p;
      p.lr = 1e-2f;
      p.weight_decay = 0.01f;
      p.decoupled_weight_decay = decoupled;
      for (int step = 1; step <= 4; ++step) {
        p.step = step;
        const auto g = both({n}, ++seed);
        be().adam_update(w, g.dut, m, v, p);
        cpu::naive::adam_update(rw, g.ref, rm, rv, p);
      }
      const std::string what = "n " + std::to_string(n) + (decoupled ? " adamw" : " adam");
      EXPECT_TRUE(close(w, rw, tolerance(Accuracy::kOptimizer), "w " + what));
      EXPECT_TRUE(close(m, rm, tolerance(Accuracy::kElementwise), "m " + what));
      EXPECT_TRUE(close(v, rv, tolerance(Accuracy::kOptimizer), "v " + what));
      if (HasFailure()) return;
    }
  }
}

TEST_P(OpSuite, SgdPlainStepIsExact) {
  Tensor w = upload(be(), {3}, std::vector<float>{1.0f, -2.0f, 0.5f});
  Tensor g = upload(be(), {3}, std::vector<float>{0.5f, 0.25f, -1.0f});
  Tensor v(be(), {3});
  be().fill(v, 0.0f);
  be().sgd_update(w, g, v, {0.5f, 0.0f, 0.0f, false});
  EXPECT_EQ(w.to_vector(), (std::vector<float>{0.75f, -2.125f, 1.0f}));
}

// The per-step values read from a tensor equal the values passed by field;
// the fields are ignored when the tensor is set.
TEST_P(OpSuite, UpdatesReadTheirStepValuesFromATensorOfTheBackend) {
  const std::int64_t n = 4099;
  const auto w0 = random_values(n, 3);
  const Tensor g = random_tensor(be(), {n}, 4);
  Tensor w = upload(be(), {n}, w0), rw = upload(be(), {n}, w0), v(be(), {n}), rv(be(), {n});
  be().fill(v, 0.0f);
  be().fill(rv, 0.0f);
  Tensor scalars(be(), {4});
  const float rate[] = {0.05f};
  be().write_values(scalars, rate);
  SgdParams by_tensor{1e6f, 0.9f, 1e-3f, false};
  by_tensor.scalars = &scalars;
  be().sgd_update(w, g, v, by_tensor);
  be().sgd_update(rw, g, rv, {0.05f, 0.9f, 1e-3f, false});
  // Bit-identical where the update runs on the CPU (cpu, the fake GPU); a GPU
  // kernel reading its values from memory may contract differently.
  const bool on_cpu = be().is_host() || be().name().rfind("fake", 0) == 0;
  const Tolerance same = tolerance(on_cpu ? Accuracy::kExact : Accuracy::kElementwise);
  EXPECT_TRUE(close(w, rw, same, "sgd w, step values in a tensor"));

  Tensor m(be(), {n}), mv(be(), {n}), rm(be(), {n}), rmv(be(), {n});
  for (Tensor* t : {&m, &mv, &rm, &rmv}) be().fill(*t, 0.0f);
  AdamParams field;
  field.lr = 1e-2f;
  AdamParams tensor = field;
  tensor.lr = -1.0f;
  tensor.step = 0;  // invalid as a field: must not be read
  tensor.scalars = &scalars;
  for (field.step = 1; field.step <= 3; ++field.step) {
    const auto correction = [&](float beta) {
      return static_cast<float>(
          1.0 - std::pow(static_cast<double>(beta), static_cast<double>(field.step)));
    };
    const float values[] = {field.lr, correction(field.beta1), correction(field.beta2)};
    be().write_values(scalars, values);
    be().adam_update(w, g, m, mv, tensor);
    be().adam_update(rw, g, rm, rmv, field);
  }
  EXPECT_TRUE(close(w, rw, same, "adam w, step values in a tensor"));
  EXPECT_TRUE(close(m, rm, same, "adam m, step values in a tensor"));
  EXPECT_EQ(scalars.to_vector()[0], 0.01f);
}

TEST_P(OpSuite, UpdateFrontDoorNamesBadScalarsAndStates) {
  Tensor w(be(), {8}), g(be(), {8}), v(be(), {8}), m(be(), {8});
  for (Tensor* t : {&w, &g, &v, &m}) be().fill(*t, 0.0f);
  Tensor one(be(), {1}), ints(be(), {4}, DType::kInt32);
  be().fill(one, 0.1f);
  AdamParams adam;
  adam.scalars = &one;
  expect_invalid([&] { be().adam_update(w, g, m, v, adam); }, "holds 1 values, needs 3");
  SgdParams sgd;
  sgd.scalars = &ints;
  expect_invalid([&] { be().sgd_update(w, g, v, sgd); }, "float32");
  auto other = make_cpu_backend(0);
  Tensor elsewhere(*other, {4});
  sgd.scalars = &elsewhere;
  if (&be() != other.get())
    expect_invalid([&] { be().sgd_update(w, g, v, sgd); }, "different backend");
  const float five[] = {1, 2, 3, 4, 5};
  Tensor four(be(), {4});
  expect_invalid([&] { be().write_values(four, five); }, "at most 4");
  expect_invalid([&] { be().write_values(one, std::span<const float>(five, 2)); }, "elements");
  AdamParams step0;
  step0.step = 0;
  expect_invalid([&] { be().adam_update(w, g, m, v, step0); }, "1-based");
  expect_invalid([&] { be().sgd_update(w, g, w, {}); }, "overlap");
  Tensor short_v(be(), {7});
  expect_invalid([&] { be().sgd_update(w, g, short_v, {}); }, "'velocity'");
}

}  // namespace stoke::testing
