// Training batch norm with the following ReLU folded in (the fused ops
// batch_norm_relu_forward_training / _backward, run by nn::Sequential) on the
// CPU backend against the unfused ops, and Sequential's fused pair against the
// same two layers run apart; the residual add + ReLU in one pass.
#include "backend/cpu/cpu_backend.hpp"
#include "op_test_util.hpp"
#include "stoke/nn/layers.hpp"
#include "stoke/threads.hpp"

namespace stoke::testing {
namespace {

const Shape kShapes[] = {{4, 5, 7, 9}, {2, 16, 12, 12}, {3, 2, 1, 1}, {1, 8, 5, 3}};

struct Stats {
  Tensor rm, rv, sm, si;
  explicit Stats(Backend& be, std::int64_t c) : rm(be, {c}), rv(be, {c}), sm(be, {c}), si(be, {c}) {
    be.fill(rm, 0.1f);
    be.fill(rv, 0.9f);
  }
};

// Same bits as batch_norm_forward_training + relu_forward and relu_backward +
// batch_norm_backward: the mask and the max are exact, the sums in the same order.
TEST(BatchNormRelu, FusedKernelsMatchTheUnfusedOpsBitForBit) {
  for (int threads : {1, 3}) {
    const int saved = thread_count();
    set_thread_count(threads);
    cpu::CpuBackend be;
    std::uint32_t seed = 7;
    for (const Shape& s : kShapes) {
      const std::string what = shape_to_string(s) + " threads " + std::to_string(threads);
      const std::int64_t c = s[1];
      Tensor x = random_tensor(be, s, ++seed, -2.0f, 3.0f), dy = random_tensor(be, s, ++seed);
      Tensor gamma = random_tensor(be, {c}, ++seed, 0.5f, 1.5f);
      Tensor beta = random_tensor(be, {c}, ++seed);
      Stats fused(be, c), plain(be, c);
      Tensor y(be, s), bn(be, s), want_y(be, s);
      be.batch_norm_relu_forward_training(x, gamma, beta, y, fused.rm, fused.rv, fused.sm, fused.si,
                                          {});
      be.batch_norm_forward_training(x, gamma, beta, bn, plain.rm, plain.rv, plain.sm, plain.si,
                                     {});
      be.relu_forward(bn, want_y);
      expect_identical(y, want_y, "y " + what);
      for (auto [a, b] : {std::pair{&fused.rm, &plain.rm},
                          {&fused.rv, &plain.rv},
                          {&fused.sm, &plain.sm},
                          {&fused.si, &plain.si}}) {
        expect_identical(*a, *b, "statistics " + what);
      }
      Tensor dx(be, s), dg(be, {c}), db(be, {c}), masked(be, s), want_dx(be, s), want_dg(be, {c}),
          want_db(be, {c});
      be.batch_norm_relu_backward(x, y, dy, gamma, fused.sm, fused.si, dx, dg, db, {});
      be.relu_backward(want_y, dy, masked);
      be.batch_norm_backward(x, masked, gamma, plain.sm, plain.si, want_dx, want_dg, want_db, {});
      expect_identical(dx, want_dx, "dx " + what);
      expect_identical(dg, want_dg, "dgamma " + what);
      expect_identical(db, want_db, "dbeta " + what);
    }
    set_thread_count(saved);
  }
}

TEST(BatchNormRelu, AddReluMatchesAddThenReluBitForBit) {
  cpu::CpuBackend be;
  for (const Shape& s : kShapes) {
    Tensor a = random_tensor(be, s, 41), b = random_tensor(be, s, 42), y(be, s), sum(be, s),
           want(be, s);
    be.add_relu(a, b, y);
    be.add(a, b, sum);
    be.relu_forward(sum, want);
    expect_identical(y, want, shape_to_string(s));
  }
  Tensor a = random_tensor(be, {2, 3}, 1), y(be, {3, 2});
  EXPECT_THROW(be.add_relu(a, a, y), InvalidArgument);
}

TEST(BatchNormRelu, FusedRejectsMismatchedShapes) {
  cpu::CpuBackend be;
  Tensor x = random_tensor(be, {2, 3, 4, 4}, 1), y(be, {2, 3, 4, 5}), gamma(be, {3});
  Stats st(be, 3);
  EXPECT_THROW(
      be.batch_norm_relu_forward_training(x, gamma, gamma, y, st.rm, st.rv, st.sm, st.si, {}),
      InvalidArgument);
}

void init_bn(Backend& be, nn::BatchNorm2d& bn, std::uint32_t seed) {
  std::vector<nn::ParamSlot> slots;
  bn.parameters(slots);
  for (nn::ParamSlot& p : slots) {
    *p.value = random_tensor(be, p.shape, ++seed, 0.5f, 1.5f);
    *p.grad = Tensor(be, p.shape);
  }
}

std::vector<float> grads(nn::Layer& l) {
  std::vector<nn::ParamSlot> slots;
  l.parameters(slots);
  std::vector<float> out;
  for (const nn::ParamSlot& p : slots) {
    const std::vector<float> g = p.grad->to_vector();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

// Two training steps (the second reuses every tensor), then eval: the fused
// Sequential gives what BatchNorm2d and Relu give run one after the other.
TEST(BatchNormRelu, SequentialFusesInTrainingAndMatchesTheLayersRunApart) {
  cpu::CpuBackend be;
  const Shape s{3, 6, 5, 7};
  nn::Sequential seq(be, "block");
  seq.add(std::make_unique<nn::BatchNorm2d>(be, "bn", 6));
  seq.add(std::make_unique<nn::Relu>(be, "relu"));
  auto& fused_bn = static_cast<nn::BatchNorm2d&>(*seq.layers()[0]);
  nn::BatchNorm2d bn(be, "bn", 6);
  nn::Relu relu(be, "relu");
  init_bn(be, fused_bn, 3);
  init_bn(be, bn, 3);
  for (int step = 0; step < 2; ++step) {
    const std::string what = "step " + std::to_string(step);
    Tensor x = random_tensor(be, s, 10 + step, -1.0f, 2.0f), dy = random_tensor(be, s, 20 + step);
    const Tensor& y = seq.forward(x, true);
    EXPECT_TRUE(fused_bn.fused_relu());
    const Tensor& want_y = relu.forward(bn.forward(x, true), true);
    expect_identical(y, want_y, "y " + what);
    const Tensor& dx = seq.backward(dy);
    const Tensor& want_dx = bn.backward(relu.backward(dy));
    expect_identical(dx, want_dx, "dx " + what);
    EXPECT_EQ(grads(fused_bn), grads(bn)) << what;
  }
  Tensor x = random_tensor(be, s, 30);
  expect_identical(seq.forward(x, false), relu.forward(bn.forward(x, false), false), "eval");
  EXPECT_FALSE(fused_bn.fused_relu());
}

}  // namespace
}  // namespace stoke::testing
