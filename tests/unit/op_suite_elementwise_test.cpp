// ReLU, add, accumulate, scale, the finite check and dropout on every backend
// against the naive reference; sizes straddle the SIMD width, the chunking
// threshold and the GPU's grid-stride loop; in-place use; dropout's mask
// statistics.
#include <limits>

#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

std::vector<Shape> shapes(std::uint32_t seed) {
  std::vector<Shape> s = {{1}, {7}, {8}, {9}, {3, 5, 3, 3}, {2, 8, 17, 17}, {1, 70001}};
  ShapeRng rng(seed);
  for (int i = 0; i < 25; ++i)
    s.push_back({rng.pick(1, 3), rng.pick(1, 7), rng.pick(1, 13), rng.pick(1, 13)});
  return s;
}

}  // namespace

TEST_P(OpSuite, ReluForwardBackwardMatchNaive) {
  std::uint32_t seed = 10;
  for (const Shape& s : shapes(1)) {
    const auto x = both(s, ++seed), dy = both(s, ++seed);
    auto y = out(s), dx = out(s);
    be().relu_forward(x.dut, y.dut.tensor);
    be().relu_backward(y.dut.tensor, dy.dut, dx.dut.tensor);
    cpu::naive::relu_forward(x.ref, y.ref);
    cpu::naive::relu_backward(y.ref, dy.ref, dx.ref);
    expect_output(y, tolerance(Accuracy::kExact), "relu y " + shape_to_string(s));
    expect_output(dx, tolerance(Accuracy::kExact), "relu dx " + shape_to_string(s));
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, ReluBackwardMatchesFiniteDifferences) {
  std::vector<float> v(40);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = (static_cast<float>(i) - 19.5f) * 0.1f;  // |x| >= 0.05 > h
  const auto r = random_values(40, 3);
  Tensor x = upload(be(), {40}, v), y(be(), {40}), dx(be(), {40}), dy = upload(be(), {40}, r);
  be().relu_forward(x, y);
  be().relu_backward(y, dy, dx);
  expect_gradient(
      v, dx.to_vector(),
      [&] {
        x.copy_from_host(v.data());
        be().relu_forward(x, y);
        return weighted_sum(y, r);
      },
      "relu");
}

TEST_P(OpSuite, ElementwiseOpsWorkInPlace) {
  auto x = both({1000}, 4);
  Tensor ref_y(ref(), {1000});
  cpu::naive::relu_forward(x.ref, ref_y);
  be().relu_forward(x.dut, x.dut);
  expect_identical(x.dut, ref_y, "relu in place");
  auto a = both({333}, 5), b = both({333}, 6);
  Tensor sum(ref(), {333});
  cpu::naive::add(a.ref, b.ref, sum);
  be().add(a.dut, b.dut, a.dut);
  expect_identical(a.dut, sum, "add into a");
  cpu::naive::accumulate(sum, sum);
  be().accumulate(a.dut, a.dut);
  expect_identical(a.dut, sum, "accumulate into itself");
}

TEST_P(OpSuite, AddAccumulateAndScaleMatchNaive) {
  std::uint32_t seed = 20;
  for (const Shape& s : shapes(2)) {
    const auto a = both(s, ++seed), b = both(s, ++seed);
    auto y = out(s);
    be().add(a.dut, b.dut, y.dut.tensor);
    cpu::naive::add(a.ref, b.ref, y.ref);
    expect_output(y, tolerance(Accuracy::kExact), "add " + shape_to_string(s));
    be().accumulate(y.dut.tensor, a.dut);
    cpu::naive::accumulate(y.ref, a.ref);
    expect_output(y, tolerance(Accuracy::kElementwise), "accumulate " + shape_to_string(s));
    // scale: exactly one multiply per element of what the backend holds.
    y.ref = copy_to(ref(), y.dut.tensor);
    be().scale(y.dut.tensor, -0.375f);
    cpu::naive::scale(y.ref, -0.375f);
    expect_output(y, tolerance(Accuracy::kExact), "scale " + shape_to_string(s));
    if (HasFailure()) return;
  }
}

// One NaN, +inf or -inf anywhere (first, last, in any chunk) clears the
// flag; the largest finite values, subnormals and -0 leave it set. The flag
// is overwritten, not combined with what it held.
TEST_P(OpSuite, AllFiniteFindsEveryNonFiniteValue) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf,
                            -std::numeric_limits<float>::quiet_NaN()};
  std::uint32_t seed = 40;
  for (const Shape& s : shapes(4)) {
    auto values = random_values(static_cast<std::size_t>(shape_numel(s)), ++seed, -1e3f, 1e3f);
    values[0] = std::numeric_limits<float>::max();
    values.back() = -std::numeric_limits<float>::denorm_min();
    if (values.size() > 2) values[1] = -0.0f;
    const auto check = [&](const std::vector<float>& v, const std::string& what) {
      const auto x = both(s, v);
      auto flag = out({1});
      be().fill(flag.dut.tensor, 0.5f);
      be().all_finite(x.dut, flag.dut.tensor);
      cpu::naive::all_finite(x.ref, flag.ref);
      expect_output(flag, tolerance(Accuracy::kExact), what + " " + shape_to_string(s));
    };
    check(values, "finite");
    for (std::size_t at : {std::size_t{0}, values.size() / 2, values.size() - 1}) {
      auto bad = values;
      bad[at] = specials[(at + seed) % 4];
      check(bad, "non-finite at " + std::to_string(at));
    }
    if (HasFailure()) return;
  }
  // The reference itself: 1 for finite, 0 with one infinity.
  using Floats = std::vector<float>;
  Tensor x = upload(ref(), {3}, Floats{1.0f, -2.0f, 3.0f}), flag(ref(), {1});
  cpu::naive::all_finite(x, flag);
  EXPECT_EQ(flag.to_vector()[0], 1.0f);
  x = upload(ref(), {3}, Floats{1.0f, inf, 3.0f});
  cpu::naive::all_finite(x, flag);
  EXPECT_EQ(flag.to_vector()[0], 0.0f);
  Tensor wrong(be(), {2});
  const Tensor three = upload(be(), {3}, Floats{1.0f, 2.0f, 3.0f});
  expect_invalid([&] { be().all_finite(three, wrong); }, "'flag'");
}

TEST_P(OpSuite, DropoutMatchesNaiveOnRandomShapes) {
  std::uint32_t seed = 30;
  for (const Shape& s : shapes(3)) {
    const float p = 0.1f * static_cast<float>(seed % 9);
    const auto x = both(s, ++seed), dy = both(s, ++seed);
    auto y = out(s), mask = out(s), dx = out(s);
    be().dropout_forward(x.dut, y.dut.tensor, mask.dut.tensor, p, seed);
    be().dropout_backward(dy.dut, mask.dut.tensor, dx.dut.tensor);
    cpu::naive::dropout_forward(x.ref, y.ref, mask.ref, p, seed);
    cpu::naive::dropout_backward(dy.ref, mask.ref, dx.ref);
    // The same counter-based uniform and one multiply per element on every backend.
    const std::string what = shape_to_string(s) + " p " + std::to_string(p);
    expect_output(mask, tolerance(Accuracy::kExact), "mask " + what);
    expect_output(y, tolerance(Accuracy::kExact), "y " + what);
    expect_output(dx, tolerance(Accuracy::kExact), "dx " + what);
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, DropoutKeepsTheExpectedFractionAndDependsOnTheSeed) {
  const Shape s{4, 50001};
  Tensor x = random_tensor(be(), s, 7), y(be(), s), mask(be(), s), other(be(), s);
  be().dropout_forward(x, y, mask, 0.3f, 42);
  const auto m = mask.to_vector();
  double kept = 0;
  for (float v : m) kept += v > 0 ? 1 : 0;
  EXPECT_NEAR(kept / static_cast<double>(m.size()), 0.7, 0.005);  // 200k Bernoulli draws: sd 0.001
  be().dropout_forward(x, y, other, 0.3f, 43);
  EXPECT_NE(other.to_vector(), m) << "a different seed draws a different mask";
  expect_invalid([&] { be().dropout_forward(x, y, other, 1.0f, 1); }, "p must be in [0, 1)");
}

TEST_P(OpSuite, ElementwiseFrontDoorNamesTheBadTensor) {
  Tensor x(be(), {4}), y(be(), {5});
  expect_invalid([&] { be().relu_forward(x, y); }, "relu_forward");
  expect_invalid([&] { be().relu_forward(x, y); }, "(5)");
  expect_invalid([&] { be().add(x, x, y); }, "'y'");
  // Partial overlap is refused even where exact aliasing is allowed.
  Tensor block(be(), {8});
  Tensor lo = block.view(0, {4}), hi = block.view(2, {4});
  expect_invalid([&] { be().relu_forward(lo, hi); }, "overlaps");
  Tensor ints(be(), {4}, DType::kInt32);
  EXPECT_THROW(be().relu_forward(ints, x), Unsupported);
}

}  // namespace stoke::testing
