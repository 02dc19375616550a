// ReLU, residual add, accumulate and dropout against the naive reference;
// sizes straddle the SIMD width and the chunking threshold.
#include "backend/cpu/naive.hpp"
#include "op_test_util.hpp"

namespace stoke::test {
namespace {

const std::vector<Shape> kShapes = {{1}, {7}, {3, 5, 3, 3}, {2, 8, 17, 17}, {1, 70001}};

TEST(Relu, ForwardBackwardMatchNaive) {
  Backend& be = cpu_backend();
  for (const Shape& s : kShapes) {
    Tensor x = random_tensor(be, s, 1), dy = random_tensor(be, s, 2);
    Guarded y(be, s), dx(be, s);
    Tensor ry(be, s), rdx(be, s);
    be.relu_forward(x, y.tensor);
    be.relu_backward(y.tensor, dy, dx.tensor);
    cpu::naive::relu_forward(x, ry);
    cpu::naive::relu_backward(ry, dy, rdx);
    expect_identical(y.tensor, ry, "relu y " + shape_to_string(s));
    expect_identical(dx.tensor, rdx, "relu dx " + shape_to_string(s));
    y.check("relu y");
    dx.check("relu dx");
  }
}

TEST(Relu, BackwardMatchesFiniteDifferences) {
  Backend& be = cpu_backend();
  std::vector<float> v(40);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = (static_cast<float>(i) - 19.5f) * 0.1f;  // |x| >= 0.05 > h
  Tensor x(be, {40}), y(be, {40}), dx(be, {40});
  x.copy_from_host(v.data());
  const auto r = random_values(40, 3);
  Tensor dy(be, {40});
  dy.copy_from_host(r.data());
  be.relu_forward(x, y);
  be.relu_backward(y, dy, dx);
  expect_gradient(x, dx, [&] { be.relu_forward(x, y); return weighted_sum(y, r); }, "relu", 1e-2f);
}

TEST(Relu, WorksInPlace) {
  Backend& be = cpu_backend();
  Tensor x = random_tensor(be, {100}, 4);
  Tensor ref(be, {100});
  cpu::naive::relu_forward(x, ref);
  be.relu_forward(x, x);
  expect_identical(x, ref, "in place");
}

TEST(Add, MatchesNaiveAndAccumulates) {
  Backend& be = cpu_backend();
  for (const Shape& s : kShapes) {
    Tensor a = random_tensor(be, s, 5), b = random_tensor(be, s, 6);
    Guarded y(be, s);
    Tensor ry(be, s);
    be.add(a, b, y.tensor);
    cpu::naive::add(a, b, ry);
    expect_identical(y.tensor, ry, "add");
    y.check("add");
    cpu::naive::accumulate(ry, a);
    be.accumulate(y.tensor, a);
    expect_identical(y.tensor, ry, "accumulate");
    y.check("accumulate");
    const std::vector<float> before = y.tensor.to_vector();
    be.scale(y.tensor, -0.375f);
    const std::vector<float> after = y.tensor.to_vector();
    for (std::size_t i = 0; i < before.size(); ++i) ASSERT_EQ(after[i], before[i] * -0.375f) << i;
    y.check("scale");
  }
}

TEST(Dropout, MatchesNaiveAndKeepsExpectedFraction) {
  Backend& be = cpu_backend();
  const Shape s{4, 50001};
  Tensor x = random_tensor(be, s, 7), dy = random_tensor(be, s, 8);
  Guarded y(be, s), mask(be, s), dx(be, s);
  Tensor ry(be, s), rmask(be, s), rdx(be, s);
  be.dropout_forward(x, y.tensor, mask.tensor, 0.3f, 42);
  be.dropout_backward(dy, mask.tensor, dx.tensor);
  cpu::naive::dropout_forward(x, ry, rmask, 0.3f, 42);
  cpu::naive::dropout_backward(dy, rmask, rdx);
  expect_identical(mask.tensor, rmask, "mask");
  expect_identical(y.tensor, ry, "y");
  expect_identical(dx.tensor, rdx, "dx");
  for (auto* g : {&y, &mask, &dx}) g->check("dropout");
  const auto m = mask.tensor.to_vector();
  double kept = 0;
  for (float v : m) kept += v > 0 ? 1 : 0;
  EXPECT_NEAR(kept / static_cast<double>(m.size()), 0.7, 0.005);  // 200k Bernoulli draws: sd 0.001
  Tensor other(be, s), y2(be, s);
  be.dropout_forward(x, y2, other, 0.3f, 43);
  EXPECT_NE(other.to_vector(), m) << "a different seed draws a different mask";
  EXPECT_THROW(be.dropout_forward(x, y2, other, 1.0f, 1), InvalidArgument);
}

}  // namespace
}  // namespace stoke::test
