// conv2d on every backend against the naive reference: 240 random shapes
// forward and 240 backward (stride, padding, dilation, groups, odd sizes,
// batch 1, with and without bias, dx and db), the shapes ResNet uses,
// backward against central differences, and the front door's errors.
#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

struct ConvCase {
  Shape x, w;
  Conv2dParams p;
  bool bias = true;
  bool dx = true, db = true;
};

std::string describe(const ConvCase& c) {
  return "x" + shape_to_string(c.x) + " w" + shape_to_string(c.w) + " stride " +
         std::to_string(c.p.stride_h) + "," + std::to_string(c.p.stride_w) + " pad " +
         std::to_string(c.p.pad_h) + "," + std::to_string(c.p.pad_w) + " dil " +
         std::to_string(c.p.dilation_h) + "," + std::to_string(c.p.dilation_w) + " groups " +
         std::to_string(c.p.groups) + (c.bias ? "" : " no-bias") + (c.dx ? "" : " no-dx") +
         (c.db ? "" : " no-db");
}

std::vector<ConvCase> random_cases(int count, std::uint32_t seed) {
  ShapeRng rng(seed);
  std::vector<ConvCase> cases;
  while (static_cast<int>(cases.size()) < count) {
    ConvCase c;
    c.p.groups = rng.pick(0, 3) == 0 ? rng.pick(2, 4) : 1;
    c.p.stride_h = rng.pick(1, 3);
    c.p.stride_w = rng.coin() ? c.p.stride_h : rng.pick(1, 3);
    c.p.dilation_h = rng.pick(0, 3) == 0 ? 2 : 1;
    c.p.dilation_w = rng.pick(0, 3) == 0 ? 2 : 1;
    const int r = rng.pick(1, 5), s = rng.coin() ? r : rng.pick(1, 5);
    c.p.pad_h = rng.pick(0, r / 2 + 1);
    c.p.pad_w = rng.pick(0, s / 2 + 1);
    const int n = rng.pick(0, 2) == 0 ? 1 : rng.pick(2, 4);  // batch 1 a third of the time
    c.x = {n, c.p.groups * rng.pick(1, 3), rng.pick(1, 11), rng.pick(1, 11)};
    c.w = {c.p.groups * rng.pick(1, 3), c.x[1] / c.p.groups, r, s};
    c.bias = rng.pick(0, 3) != 0;
    c.dx = rng.pick(0, 4) != 0;
    c.db = rng.pick(0, 4) != 0;
    if (conv_output_size(c.x[2], r, c.p.stride_h, c.p.pad_h, c.p.dilation_h) <= 0 ||
        conv_output_size(c.x[3], s, c.p.stride_w, c.p.pad_w, c.p.dilation_w) <= 0) {
      continue;
    }
    cases.push_back(c);
  }
  return cases;
}

// The layers ResNet builds, the CPU's batched column matrices (several small
// images per product, a partial last group), and a 3x3 layer large enough for
// the CPU's Winograd kernels (conv2d_dnnl_layout.cpp, on AVX-512).
std::vector<ConvCase> model_cases() {
  return {
      {{2, 8, 6, 6}, {4, 8, 1, 1}, {}},                          // 1x1 direct path
      {{2, 4, 9, 9}, {8, 4, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},       // 3x3 same
      {{3, 4, 9, 9}, {8, 4, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},       // 3x3 strided
      {{2, 16, 8, 8}, {32, 16, 1, 1}, {2, 2, 0, 0, 1, 1, 1}},    // projection shortcut
      {{2, 3, 32, 32}, {8, 3, 7, 7}, {2, 2, 3, 3, 1, 1, 1}},     // a 7x7 stem
      {{2, 4, 12, 10}, {6, 2, 3, 3}, {1, 1, 2, 2, 2, 2, 2}},     // grouped and dilated
      {{7, 4, 5, 5}, {6, 4, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},       // several images per product
      {{9, 6, 6, 6}, {4, 3, 3, 3}, {2, 2, 1, 1, 1, 1, 2}},       // ... grouped, partial last group
      {{2, 32, 28, 28}, {40, 32, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},  // 28x28 per image: Winograd
      {{3, 36, 29, 31}, {34, 36, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},  // ... partial tiles and blocks
      {{2, 32, 32, 30}, {32, 32, 3, 3}, {1, 1, 0, 0, 1, 1, 1}, false},  // ... unpadded, no bias
  };
}

void check_forward(OpSuite& t, const ConvCase& c, std::uint32_t seed) {
  const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
  const auto x = t.both(c.x, seed), w = t.both(c.w, seed + 1), b = t.both({c.w[0]}, seed + 2);
  auto y = t.out(ys);
  const Tensor none;
  t.be().conv2d_forward(x.dut, w.dut, c.bias ? b.dut : none, y.dut.tensor, c.p);
  cpu::naive::conv2d_forward(x.ref, w.ref, c.bias ? b.ref : none, y.ref, c.p);
  const auto terms = static_cast<std::size_t>(c.w[1] * c.w[2] * c.w[3]);
  OpSuite::expect_output(y, tolerance(Accuracy::kConvolution, terms), "y " + describe(c));
}

void check_backward(OpSuite& t, const ConvCase& c, std::uint32_t seed) {
  const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
  const auto x = t.both(c.x, seed), w = t.both(c.w, seed + 1), dy = t.both(ys, seed + 2);
  auto dx = t.out(c.x), dw = t.out(c.w), db = t.out({c.w[0]});
  Tensor none_dut, none_ref;
  t.be().conv2d_backward(x.dut, w.dut, dy.dut, c.dx ? dx.dut.tensor : none_dut, dw.dut.tensor,
                         c.db ? db.dut.tensor : none_dut, c.p);
  cpu::naive::conv2d_backward(x.ref, w.ref, dy.ref, c.dx ? dx.ref : none_ref, dw.ref,
                              c.db ? db.ref : none_ref, c.p);
  const auto spatial = static_cast<std::size_t>(c.x[0] * ys[2] * ys[3]);
  const auto taps = static_cast<std::size_t>(c.w[0] / c.p.groups * c.w[2] * c.w[3]);
  if (c.dx)
    OpSuite::expect_output(dx, tolerance(Accuracy::kConvolution, taps), "dx " + describe(c));
  OpSuite::expect_output(dw, tolerance(Accuracy::kConvolution, spatial), "dw " + describe(c));
  if (c.db)
    OpSuite::expect_output(db, tolerance(Accuracy::kReduction, spatial), "db " + describe(c));
}

}  // namespace

TEST_P(OpSuite, Conv2dForwardMatchesNaiveOn240RandomShapes) {
  std::uint32_t seed = 1000;
  for (const ConvCase& c : random_cases(240, 7)) {
    check_forward(*this, c, seed += 3);
    if (HasFailure()) return;  // the first failing shape says enough
  }
}

TEST_P(OpSuite, Conv2dBackwardMatchesNaiveOn240RandomShapes) {
  std::uint32_t seed = 2000;
  for (const ConvCase& c : random_cases(240, 8)) {
    check_backward(*this, c, seed += 3);
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, Conv2dMatchesNaiveOnModelShapes) {
  std::uint32_t seed = 3000;
  for (const ConvCase& c : model_cases()) {
    check_forward(*this, c, seed += 3);
    check_backward(*this, c, seed += 3);
  }
}

TEST_P(OpSuite, Conv2dBackwardMatchesFiniteDifferences) {
  const std::vector<ConvCase> cases = {
      {{2, 2, 5, 5}, {3, 2, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{1, 4, 6, 5}, {4, 2, 3, 2}, {2, 1, 1, 0, 1, 2, 2}},
      {{2, 3, 4, 4}, {2, 3, 1, 1}, {}},
  };
  std::uint32_t seed = 4000;
  for (const ConvCase& c : cases) {
    const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
    auto xv = random_values(static_cast<std::size_t>(shape_numel(c.x)), ++seed);
    auto wv = random_values(static_cast<std::size_t>(shape_numel(c.w)), ++seed);
    auto bv = random_values(static_cast<std::size_t>(c.w[0]), ++seed);
    const auto r = random_values(static_cast<std::size_t>(shape_numel(ys)), ++seed);
    Tensor x = upload(be(), c.x, xv), w = upload(be(), c.w, wv), b = upload(be(), {c.w[0]}, bv);
    Tensor dy = upload(be(), ys, r), dx(be(), c.x), dw(be(), c.w), db(be(), {c.w[0]}), y(be(), ys);
    be().conv2d_backward(x, w, dy, dx, dw, db, c.p);
    auto loss = [&] {
      x.copy_from_host(xv.data());
      w.copy_from_host(wv.data());
      b.copy_from_host(bv.data());
      be().conv2d_forward(x, w, b, y, c.p);
      return weighted_sum(y, r);
    };
    expect_gradient(xv, dx.to_vector(), loss, "dx " + describe(c));
    expect_gradient(wv, dw.to_vector(), loss, "dw " + describe(c));
    expect_gradient(bv, db.to_vector(), loss, "db " + describe(c));
  }
}

TEST_P(OpSuite, Conv2dFrontDoorNamesTheBadTensor) {
  Tensor x(be(), {1, 4, 5, 5}), w(be(), {2, 3, 3, 3}), y(be(), {1, 2, 3, 3}), none;
  expect_invalid([&] { be().conv2d_forward(x, w, none, y, {}); }, "channels");
  Tensor w2(be(), {2, 4, 3, 3}), wrong_y(be(), {1, 2, 4, 4});
  expect_invalid([&] { be().conv2d_forward(x, w2, none, wrong_y, {}); }, "'y'");
  Tensor bias(be(), {3});
  expect_invalid([&] { be().conv2d_forward(x, w2, bias, y, {}); }, "'bias'");
  expect_invalid([&] { be().conv2d_forward(x, w2, none, y, {1, 1, 0, 0, 1, 1, 3}); }, "groups");
  // Tensors of another backend (here the reference's) are refused unless both are host backends.
  if (!be().is_host()) {
    Tensor host_x(ref(), {1, 4, 5, 5});
    expect_invalid([&] { be().conv2d_forward(host_x, w2, none, y, {}); }, "lives on");
  }
  // An output overlapping an input.
  Tensor block(be(), {4 * 25 + 2 * 9});
  Tensor xin = block.view(0, {1, 4, 5, 5}), yout = block.view(90, {1, 2, 3, 3});
  expect_invalid([&] { be().conv2d_forward(xin, w2, none, yout, {}); }, "overlaps");
  Tensor ints(be(), {1, 4, 5, 5}, DType::kInt32);
  EXPECT_THROW(be().conv2d_forward(ints, w2, none, y, {}), Unsupported);
}

}  // namespace stoke::testing
