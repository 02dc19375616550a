// Max, average and global average pooling on every backend against the naive
// reference on random windows (kernel, stride, padding, odd sizes, batch 1),
// backward against central differences.
#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

struct PoolCase {
  Shape x;
  Pool2dParams p;
};

std::vector<PoolCase> random_cases(int count, std::uint32_t seed) {
  std::vector<PoolCase> cases = {
      {{2, 3, 6, 6}, {2, 2, 2, 2, 0, 0}},   {{1, 2, 7, 5}, {3, 3, 2, 2, 1, 1}},
      {{2, 1, 5, 8}, {3, 2, 1, 2, 1, 0}},   {{3, 4, 9, 9}, {3, 3, 3, 3, 0, 0}},
      {{2, 8, 16, 16}, {3, 3, 2, 2, 1, 1}},  // the ResNet stem's max pool
  };
  ShapeRng rng(seed);
  while (static_cast<int>(cases.size()) < count) {
    PoolCase c;
    c.p.kernel_h = rng.pick(1, 4);
    c.p.kernel_w = rng.coin() ? c.p.kernel_h : rng.pick(1, 4);
    c.p.stride_h = rng.pick(1, 3);
    c.p.stride_w = rng.pick(1, 3);
    c.p.pad_h = rng.pick(0, c.p.kernel_h / 2);
    c.p.pad_w = rng.pick(0, c.p.kernel_w / 2);
    c.x = {rng.pick(0, 2) == 0 ? 1 : rng.pick(2, 3), rng.pick(1, 5), rng.pick(1, 12),
           rng.pick(1, 12)};
    if (conv_output_size(c.x[2], c.p.kernel_h, c.p.stride_h, c.p.pad_h) <= 0 ||
        conv_output_size(c.x[3], c.p.kernel_w, c.p.stride_w, c.p.pad_w) <= 0) {
      continue;
    }
    cases.push_back(c);
  }
  return cases;
}

std::string describe(const PoolCase& c) {
  std::string s = "x";
  return s + shape_to_string(c.x) + " kernel " + std::to_string(c.p.kernel_h) + "x" +
         std::to_string(c.p.kernel_w) + " stride " + std::to_string(c.p.stride_h) + "," +
         std::to_string(c.p.stride_w) + " pad " + std::to_string(c.p.pad_h) + "," +
         std::to_string(c.p.pad_w);
}

}  // namespace

TEST_P(OpSuite, Pool2dForwardAndBackwardMatchNaiveOnRandomWindows) {
  std::uint32_t seed = 1;
  for (const PoolCase& c : random_cases(120, 5)) {
    const Shape ys = pool2d_output_shape(c.x, c.p);
    const auto x = both(c.x, ++seed), dy = both(ys, ++seed);
    auto ymax = out(ys), yavg = out(ys), dxmax = out(c.x), dxavg = out(c.x);
    be().max_pool2d_forward(x.dut, ymax.dut.tensor, c.p);
    be().avg_pool2d_forward(x.dut, yavg.dut.tensor, c.p);
    // The backward passes take the reference's y: both backends then route
    // the gradient through the same maxima.
    cpu::naive::max_pool2d_forward(x.ref, ymax.ref, c.p);
    const Tensor y_dut = copy_to(be(), ymax.ref);
    be().max_pool2d_backward(x.dut, y_dut, dy.dut, dxmax.dut.tensor, c.p);
    be().avg_pool2d_backward(dy.dut, dxavg.dut.tensor, c.p);
    cpu::naive::avg_pool2d_forward(x.ref, yavg.ref, c.p);
    cpu::naive::max_pool2d_backward(x.ref, ymax.ref, dy.ref, dxmax.ref, c.p);
    cpu::naive::avg_pool2d_backward(dy.ref, dxavg.ref, c.p);
    const auto window = static_cast<std::size_t>(c.p.kernel_h * c.p.kernel_w);
    expect_output(ymax, tolerance(Accuracy::kExact), "max y " + describe(c));
    expect_output(yavg, tolerance(Accuracy::kReduction, window), "avg y " + describe(c));
    expect_output(dxmax, tolerance(Accuracy::kReduction, window), "max dx " + describe(c));
    expect_output(dxavg, tolerance(Accuracy::kReduction, window), "avg dx " + describe(c));
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, Pool2dBackwardMatchesFiniteDifferences) {
  for (const PoolCase& c : random_cases(5, 6)) {
    const Shape ys = pool2d_output_shape(c.x, c.p);
    // Distinct values spaced more than 2h apart so the max does not switch.
    std::vector<float> v(static_cast<std::size_t>(shape_numel(c.x)));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = 0.05f * static_cast<float>((i * 37) % v.size());
    const auto r = random_values(static_cast<std::size_t>(shape_numel(ys)), 9);
    Tensor x = upload(be(), c.x, v), dy = upload(be(), ys, r), y(be(), ys), dx(be(), c.x);
    be().max_pool2d_forward(x, y, c.p);
    be().max_pool2d_backward(x, y, dy, dx, c.p);
    auto max_loss = [&] {
      x.copy_from_host(v.data());
      be().max_pool2d_forward(x, y, c.p);
      return weighted_sum(y, r);
    };
    expect_gradient(v, dx.to_vector(), max_loss, "max " + describe(c));
    be().avg_pool2d_backward(dy, dx, c.p);
    auto avg_loss = [&] {
      x.copy_from_host(v.data());
      be().avg_pool2d_forward(x, y, c.p);
      return weighted_sum(y, r);
    };
    expect_gradient(v, dx.to_vector(), avg_loss, "avg " + describe(c));
  }
}

TEST_P(OpSuite, GlobalAvgPoolMatchesNaiveAndFiniteDifferences) {
  ShapeRng rng(11);
  std::uint32_t seed = 40;
  for (int i = 0; i < 30; ++i) {
    const Shape s{rng.pick(1, 4), rng.pick(1, 9), rng.pick(1, 9), rng.pick(1, 9)};
    const auto x = both(s, ++seed), dy = both({s[0], s[1]}, ++seed);
    auto y = out({s[0], s[1]}), dx = out(s);
    be().global_avg_pool_forward(x.dut, y.dut.tensor);
    be().global_avg_pool_backward(dy.dut, dx.dut.tensor);
    cpu::naive::global_avg_pool_forward(x.ref, y.ref);
    cpu::naive::global_avg_pool_backward(dy.ref, dx.ref);
    expect_output(y, tolerance(Accuracy::kReduction, static_cast<std::size_t>(s[2] * s[3])),
                  "y " + shape_to_string(s));
    expect_output(dx, tolerance(Accuracy::kElementwise), "dx " + shape_to_string(s));
    if (HasFailure()) return;
  }
  const Shape s{3, 5, 4, 6};
  auto xv = random_values(static_cast<std::size_t>(shape_numel(s)), 4);
  const auto r = random_values(15, 5);
  Tensor x = upload(be(), s, xv), dy = upload(be(), {3, 5}, r), y(be(), {3, 5}), dx(be(), s);
  be().global_avg_pool_backward(dy, dx);
  expect_gradient(
      xv, dx.to_vector(),
      [&] {
        x.copy_from_host(xv.data());
        be().global_avg_pool_forward(x, y);
        return weighted_sum(y, r);
      },
      "global average");
}

TEST_P(OpSuite, PoolFrontDoorNamesTheBadWindow) {
  Tensor x(be(), {1, 2, 5, 5}), y(be(), {1, 2, 2, 2}), wrong(be(), {1, 2, 3, 3});
  expect_invalid([&] { be().max_pool2d_forward(x, wrong, {}); }, "'y'");
  expect_invalid([&] { be().avg_pool2d_forward(x, y, {2, 2, 2, 2, 2, 0}); }, "padding");
  Tensor g(be(), {1, 3});
  expect_invalid([&] { be().global_avg_pool_forward(x, g); }, "'y'");
}

}  // namespace stoke::testing
