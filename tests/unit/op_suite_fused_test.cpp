// The fused ops on every backend against their naive references: the
// inference plan's convolution (bias, residual, ReLU in every combination,
// random and ResNet shapes, grouped and dilated), add + ReLU (in place too),
// training batch norm + ReLU forward and backward, and the front doors'
// errors. The references (lib/backend/cpu/fused_naive.cpp) run the plain
// references one after the other.
#include "stoke/program.hpp"
#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

struct FusedCase {
  Shape x, w;
  Conv2dParams p;
  bool bias = true, residual = true;
  Activation activation = Activation::kRelu;
};

std::string describe(const FusedCase& c) {
  return "x" + shape_to_string(c.x) + " w" + shape_to_string(c.w) + " stride " +
         std::to_string(c.p.stride_h) + " pad " + std::to_string(c.p.pad_h) + " dil " +
         std::to_string(c.p.dilation_h) + " groups " + std::to_string(c.p.groups) +
         (c.bias ? "" : " no-bias") + (c.residual ? " residual" : "") +
         (c.activation == Activation::kRelu ? " relu" : " identity");
}

std::vector<FusedCase> cases(int count, std::uint32_t seed) {
  // The shapes the plan fuses in ResNets: stem, 3x3 same and strided, 1x1
  // shortcut, a Winograd-sized 3x3 (AVX-512 CPUs), batch 1.
  std::vector<FusedCase> out = {
      {{2, 3, 32, 32}, {8, 3, 7, 7}, {2, 2, 3, 3, 1, 1, 1}, true, false},
      {{2, 8, 9, 9}, {8, 8, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{1, 16, 9, 9}, {32, 16, 3, 3}, {2, 2, 1, 1, 1, 1, 1}, true, true, Activation::kIdentity},
      {{2, 16, 8, 8}, {32, 16, 1, 1}, {2, 2, 0, 0, 1, 1, 1}, true, false, Activation::kIdentity},
      {{2, 32, 28, 28}, {32, 32, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{1, 64, 14, 14}, {64, 64, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
  };
  ShapeRng rng(seed);
  while (static_cast<int>(out.size()) < count) {
    FusedCase c;
    c.p.groups = rng.pick(0, 3) == 0 ? 2 : 1;
    c.p.stride_h = c.p.stride_w = rng.pick(1, 2);
    c.p.dilation_h = c.p.dilation_w = rng.pick(0, 4) == 0 ? 2 : 1;
    const int r = rng.pick(1, 3) * 2 - 1;
    c.p.pad_h = c.p.pad_w = rng.pick(0, r / 2);
    c.x = {rng.pick(1, 3), c.p.groups * rng.pick(1, 5), rng.pick(3, 12), rng.pick(3, 12)};
    c.w = {c.p.groups * rng.pick(1, 5), c.x[1] / c.p.groups, r, r};
    c.bias = rng.pick(0, 3) != 0;
    c.residual = rng.coin();
    c.activation = rng.coin() ? Activation::kRelu : Activation::kIdentity;
    if (conv_output_size(c.x[2], r, c.p.stride_h, c.p.pad_h, c.p.dilation_h) <= 0 ||
        conv_output_size(c.x[3], r, c.p.stride_w, c.p.pad_w, c.p.dilation_w) <= 0) {
      continue;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

TEST_P(OpSuite, Conv2dFusedForwardMatchesNaiveOnRandomShapes) {
  std::uint32_t seed = 5000;
  for (const FusedCase& c : cases(80, 11)) {
    const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
    const auto x = both(c.x, seed += 4), w = both(c.w, seed + 1), b = both({c.w[0]}, seed + 2);
    const auto r = both(ys, seed + 3, -2.0f, 2.0f);
    auto y = out(ys);
    const Tensor none;
    be().conv2d_fused_forward(x.dut, w.dut, c.bias ? b.dut : none, c.residual ? r.dut : none,
                              y.dut.tensor, c.p, c.activation);
    cpu::naive::conv2d_fused_forward(x.ref, w.ref, c.bias ? b.ref : none, c.residual ? r.ref : none,
                                     y.ref, c.p, c.activation);
    // The convolution's tolerance, plus one rounding of the residual add.
    const auto terms = static_cast<std::size_t>(c.w[1] * c.w[2] * c.w[3]) + 1;
    expect_output(y, tolerance(Accuracy::kConvolution, terms), describe(c));
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, AddReluMatchesNaiveAndWorksInPlace) {
  std::uint32_t seed = 5500;
  for (const Shape& s : std::vector<Shape>{{1}, {9}, {3, 5, 3, 3}, {2, 8, 17, 17}, {1, 70001}}) {
    auto a = both(s, ++seed);
    const auto b = both(s, ++seed);
    auto y = out(s);
    be().add_relu(a.dut, b.dut, y.dut.tensor);
    cpu::naive::add_relu(a.ref, b.ref, y.ref);
    expect_output(y, tolerance(Accuracy::kExact), "add_relu " + shape_to_string(s));
    be().add_relu(a.dut, b.dut, a.dut);  // y = a
    expect_identical(a.dut, y.ref, "add_relu into a " + shape_to_string(s));
  }
}

TEST_P(OpSuite, BatchNormReluMatchesNaiveForwardAndBackward) {
  std::uint32_t seed = 5700;
  for (const Shape& s : std::vector<Shape>{{2, 3, 4, 5}, {4, 1, 3, 3}, {3, 16, 7, 7}}) {
    const std::int64_t c = s[1];
    const auto x = both(s, seed += 8, -2.0f, 3.0f), dy = both(s, seed + 1);
    const auto gamma = both({c}, seed + 2, 0.5f, 1.5f), beta = both({c}, seed + 3);
    auto rm = both({c}, seed + 4), rv = both({c}, seed + 5, 0.5f, 2.0f);
    auto y = out(s), sm = out({c}), si = out({c});
    const BatchNormParams p{0.25f, 0.1f};  // not the default: the backward must take this one
    be().batch_norm_relu_forward_training(x.dut, gamma.dut, beta.dut, y.dut.tensor, rm.dut, rv.dut,
                                          sm.dut.tensor, si.dut.tensor, p);
    cpu::naive::batch_norm_relu_forward_training(x.ref, gamma.ref, beta.ref, y.ref, rm.ref, rv.ref,
                                                 sm.ref, si.ref, p);
    const auto per = static_cast<std::size_t>(s[0] * s[2] * s[3]);
    const Tolerance tol = tolerance(Accuracy::kNormalization, per);
    const std::string what = shape_to_string(s);
    expect_output(y, tol, "y " + what);
    expect_output(sm, tolerance(Accuracy::kReduction, per), "save_mean " + what);
    expect_output(si, tol, "save_invstd " + what);
    EXPECT_TRUE(close(rm.dut, rm.ref, tolerance(Accuracy::kReduction, per), "running_mean"));
    // Backward from the reference's forward on both sides.
    const Tensor y_dut = copy_to(be(), y.ref), sm_dut = copy_to(be(), sm.ref),
                 si_dut = copy_to(be(), si.ref);
    auto dx = out(s), dg = out({c}), db = out({c});
    be().batch_norm_relu_backward(x.dut, y_dut, dy.dut, gamma.dut, sm_dut, si_dut, dx.dut.tensor,
                                  dg.dut.tensor, db.dut.tensor, p);
    cpu::naive::batch_norm_relu_backward(x.ref, y.ref, dy.ref, gamma.ref, sm.ref, si.ref, dx.ref,
                                         dg.ref, db.ref, p);
    expect_output(dx, tol, "dx " + what);
    expect_output(dg, tol, "dgamma " + what);
    expect_output(db, tolerance(Accuracy::kReduction, per), "dbeta " + what);
    if (HasFailure()) return;
  }
}

// The low-precision ops: a fused convolution (bias, ReLU) computed in bf16 by
// the backend's inference program, where it has bf16 kernels, against the
// fp32 naive reference within the bf16 row of the tolerance table; and not
// the fp32 program's bits (it did run in bf16); its profile records each step.
TEST_P(OpSuite, Bf16FusedConvolutionMatchesTheFp32Reference) {
  if (be().inference_precision(Precision::kBf16) == PrecisionSupport::kNone)
    GTEST_SKIP() << GetParam().name << " runs no bf16 inference on this machine";
  struct Case {
    Shape x, w;
    Conv2dParams p;
  };
  const std::vector<Case> cases = {
      {{1, 16, 12, 12}, {32, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{2, 32, 9, 7}, {16, 32, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},
      {{1, 3, 20, 20}, {16, 3, 7, 7}, {2, 2, 3, 3, 1, 1, 1}},  // a stem: the input stays plain
      {{3, 64, 5, 5}, {64, 64, 1, 1}, {}},
  };
  std::uint32_t seed = 1300;
  for (const Case& c : cases) {
    const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
    const auto x = both(c.x, ++seed), w = both(c.w, ++seed), b = both({c.w[0]}, ++seed);
    const auto program = [&](Precision precision) {
      InferenceStep step;
      step.kind = InferenceStep::Kind::kConv;
      step.name = "conv";
      step.chain.push_back(FusedConv{w.dut, b.dut, c.p, Activation::kRelu});
      return be().compile_inference({step}, ProgramLayout::kBackend, precision);
    };
    const auto low = program(Precision::kBf16);
    const auto fp32 = program(Precision::kFp32);
    const auto got = low->forward(x.dut).to_vector();
    const auto full = fp32->forward(x.dut).to_vector();
    Tensor want(ref(), ys);
    cpu::naive::conv2d_forward(x.ref, w.ref, b.ref, want, c.p);
    cpu::naive::relu_forward(want, want);
    const std::string what = "bf16 x" + shape_to_string(c.x) + " w" + shape_to_string(c.w);
    EXPECT_TRUE(close(got, want.to_vector(),
                      tolerance(Accuracy::kRoundedInputs, 1, DType::kBFloat16), what));
    EXPECT_NE(got, full) << what << ": the bf16 program gave the fp32 program's bits";
    low->record_step_times(true);  // the bench's profile reaches through a precision's program
    (void)low->forward(x.dut);
    EXPECT_FALSE(low->step_times().empty()) << what << ": no step times recorded";
    if (HasFailure()) return;
  }
}

TEST_P(OpSuite, FusedFrontDoorsNameTheBadTensor) {
  Tensor x(be(), {1, 4, 6, 6}), w(be(), {8, 4, 3, 3}), b(be(), {8}), y(be(), {1, 8, 4, 4});
  Tensor bad_residual(be(), {1, 8, 5, 5});
  expect_invalid(
      [&] { be().conv2d_fused_forward(x, w, b, bad_residual, y, {}, Activation::kRelu); },
      "'residual'");
  expect_invalid([&] { be().conv2d_fused_forward(x, w, b, y, y, {}, Activation::kRelu); },
                 "overlaps");
  expect_invalid(
      [&] { be().conv2d_fused_forward(x, w, b, Tensor(), y, {}, static_cast<Activation>(9)); },
      "activation");
  Tensor a(be(), {2, 3}), c(be(), {3, 2});
  expect_invalid([&] { be().add_relu(a, c, a); }, "'b'");
  Tensor g(be(), {4}), bad_y(be(), {1, 4, 6, 5}), dx(be(), {1, 4, 6, 6});
  expect_invalid([&] { be().batch_norm_relu_backward(x, bad_y, x, g, g, g, dx, g, g, {}); }, "'y'");
  expect_invalid(
      [&] {
        be().batch_norm_relu_backward(x, x, x, g, g, g, dx, g, g, {0.0f, 0.1f});
      },
      "epsilon");
}

}  // namespace stoke::testing
