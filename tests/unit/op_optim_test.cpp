// SGD and Adam/AdamW updates against the naive (PyTorch-semantics) reference
// over several steps; sizes straddle the SIMD width.
#include <cmath>

#include "backend/cpu/naive.hpp"
#include "op_test_util.hpp"
#include "stoke/error.hpp"
#include "stoke/nn.hpp"

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

void expect_invalid(const std::function<void()>& call, const std::string& part) {
  try {
    call();
    ADD_FAILURE() << "no InvalidArgument; expected one saying \"" << part << "\"";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// The per-step values read from a tensor (what a replayed CUDA graph relies
// on) give the same update as the values passed by field; the fields are
// ignored when the tensor is set.
TEST(UpdateScalars, SgdAndAdamReadTheirValuesFromTheTensor) {
  Backend& be = cpu_backend();
  const std::int64_t n = 257;
  Tensor w = random_tensor(be, {n}, 3), rw = random_tensor(be, {n}, 3);
  Tensor v(be, {n}), rv(be, {n});
  be.fill(v, 0.0f);
  be.fill(rv, 0.0f);
  Tensor scalars(be, {4});
  const float rate[] = {0.05f};
  be.write_values(scalars, rate);
  SgdParams by_tensor{1e6f, 0.9f, 1e-3f, false};
  by_tensor.scalars = &scalars;
  const SgdParams by_field{0.05f, 0.9f, 1e-3f, false};
  Tensor g = random_tensor(be, {n}, 4);
  be.sgd_update(w, g, v, by_tensor);
  be.sgd_update(rw, g, rv, by_field);
  EXPECT_EQ(w.to_vector(), rw.to_vector());

  Tensor m(be, {n}), mv(be, {n}), rm(be, {n}), rmv(be, {n});
  for (Tensor* t : {&m, &mv, &rm, &rmv}) be.fill(*t, 0.0f);
  AdamParams field;
  field.lr = 1e-2f;
  field.step = 3;
  AdamParams tensor = field;
  tensor.lr = -1.0f;
  tensor.step = 0;  // invalid as a field: must not be read
  tensor.scalars = &scalars;
  const auto correction = [](float beta) {
    return static_cast<float>(1.0 - std::pow(static_cast<double>(beta), 3.0));
  };
  const float values[] = {1e-2f, correction(field.beta1), correction(field.beta2)};
  be.write_values(scalars, values);
  be.adam_update(w, g, m, mv, tensor);
  be.adam_update(rw, g, rm, rmv, field);
  EXPECT_EQ(w.to_vector(), rw.to_vector());
  EXPECT_EQ(m.to_vector(), rm.to_vector());
}

TEST(UpdateScalars, BadTensorsAreNamed) {
  Backend& be = cpu_backend();
  Tensor w(be, {8}), g(be, {8}), v(be, {8}), m(be, {8});
  for (Tensor* t : {&w, &g, &v, &m}) be.fill(*t, 0.0f);
  Tensor one(be, {1}), ints(be, {4}, DType::kInt32);
  be.fill(one, 0.1f);
  AdamParams adam;
  adam.scalars = &one;
  expect_invalid([&] { be.adam_update(w, g, m, v, adam); }, "holds 1 values, needs 3");
  SgdParams sgd;
  sgd.scalars = &ints;
  expect_invalid([&] { be.sgd_update(w, g, v, sgd); }, "float32");
  auto other = make_cpu_backend(0);
  Tensor elsewhere(*other, {4});
  sgd.scalars = &elsewhere;
  expect_invalid([&] { be.sgd_update(w, g, v, sgd); }, "different backend");
  const float five[] = {1, 2, 3, 4, 5};
  Tensor four(be, {4});
  expect_invalid([&] { be.write_values(four, five); }, "at most 4");
  expect_invalid([&] { be.write_values(one, std::span<const float>(five, 2)); }, "elements");
}

// Optimizer::step == prepare + apply, and apply() uses the values of the
// latest prepare(): the step count advances in prepare, once per step.
TEST(UpdateScalars, OptimizerPrepareThenApplyEqualsStep) {
  Backend& be = cpu_backend();
  nn::ModelSpec spec;
  spec.height = spec.width = 8;
  spec.classes = 3;
  spec.stem_width = 4;
  spec.widths = {4};
  spec.strides = {1};
  spec.blocks_per_stage = 1;
  for (bool adam : {false, true}) {
    auto a = nn::build_model(be, spec, 5), b = nn::build_model(be, spec, 5);
    std::unique_ptr<nn::Optimizer> oa, ob;
    if (adam) {
      oa = std::make_unique<nn::Adam>(*a);
      ob = std::make_unique<nn::Adam>(*b);
    } else {
      oa = std::make_unique<nn::Sgd>(*a);
      ob = std::make_unique<nn::Sgd>(*b);
    }
    for (int s = 0; s < 3; ++s) {
      const float lr = 0.01f * static_cast<float>(s + 1);
      Tensor ga = random_tensor(be, a->gradients().shape(), 30 + static_cast<std::uint32_t>(s));
      a->gradients().copy_from_host(ga.raw());
      b->gradients().copy_from_host(ga.raw());
      oa->step(*a, lr);
      ob->prepare(0.5f);  // superseded before the update is issued
      ob->set_steps(ob->steps() - 1);
      ob->prepare(lr);
      ob->apply(*b);
    }
    EXPECT_EQ(oa->steps(), 3);
    EXPECT_EQ(ob->steps(), 3);
    EXPECT_EQ(a->parameters().to_vector(), b->parameters().to_vector()) << (adam ? "adam" : "sgd");
  }
}

}  // namespace
}  // namespace stoke::test
