// int8 inference convolutions (Precision::kInt8, lib/backend/cpu/conv2d_int8.hpp):
// the backend's int8 program against the naive int8 reference (quantize,
// int32 sums, dequantize) and against the fp32 naive reference within the
// quantization row of the tolerance table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/conv2d_int8.hpp"
#include "stoke/program.hpp"
#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

ActivationRange range_of(const std::vector<float>& v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return {*lo, *hi};
}

// Against the int8 reference: with VNNI the int32 sums are exact and the
// dequantization is the same two float operations (a float sum and product,
// then the residual add) as the reference's, so the outputs agree to a few
// ulp of the output's scale (kElementwise). Without VNNI (oneDNN's AVX2 /
// AVX-512 kernels: vpmaddubsw's 16-bit pair sums saturate and s8 inputs make
// oneDNN halve the weights; u8 inputs use 7 bits so that the pair sums do not
// saturate) only the quantization bound holds.
Tolerance int8_reference_tolerance() {
  return cpu::int8::support() == 2 ? tolerance(Accuracy::kElementwise)
                                   : tolerance(Accuracy::kQuantized, 1, DType::kUInt8);
}

TEST_P(OpSuite, Int8FusedConvolutionMatchesTheInt8AndFp32References) {
  if (be().inference_precision(Precision::kInt8) == PrecisionSupport::kNone)
    GTEST_SKIP() << GetParam().name << " runs no int8 inference on this machine";
  struct Case {
    Shape x, w;
    Conv2dParams p;
    bool residual = false;     // a block: y = relu(conv(x) + b + x)
    bool nonnegative = false;  // x >= 0: u8 inputs
  };
  const std::vector<Case> cases = {
      {{1, 16, 12, 12}, {32, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{2, 32, 9, 7}, {16, 32, 3, 3}, {2, 2, 1, 1, 1, 1, 1}, false, true},  // stride 2, u8
      {{1, 3, 20, 20}, {16, 3, 7, 7}, {2, 2, 3, 3, 1, 1, 1}},  // a stem: the input stays plain
      {{3, 64, 5, 5}, {64, 64, 1, 1}, {}, false, true},        // 1x1, u8
      {{2, 16, 6, 6}, {16, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1}, true, true},  // residual add
      {{1, 40, 7, 9}, {24, 40, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},  // channels not a block's multiple
  };
  std::uint32_t seed = 2800;
  for (const Case& c : cases) {
    const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
    const auto x = both(c.x, ++seed, c.nonnegative ? 0.0f : -1.0f, 1.0f);
    const auto w = both(c.w, ++seed), b = both({c.w[0]}, ++seed);
    const ActivationRange range = range_of(x.ref.to_vector());
    const auto program = [&](Precision precision) {
      InferenceStep step;
      step.kind = c.residual ? InferenceStep::Kind::kBlock : InferenceStep::Kind::kConv;
      step.name = "conv";
      step.chain.push_back(FusedConv{w.dut, b.dut, c.p, Activation::kRelu, range});
      return be().compile_inference({step}, ProgramLayout::kBackend, precision);
    };
    const auto int8 = program(Precision::kInt8);
    const auto fp32 = program(Precision::kFp32);
    const auto got = int8->forward(x.dut).to_vector();
    const auto full = fp32->forward(x.dut).to_vector();
    Tensor want8(ref(), ys), want(ref(), ys);
    cpu::int8::conv2d_reference(x.ref, w.ref, b.ref, c.residual ? &x.ref : nullptr, want8, c.p,
                                true, range, cpu::int8::support() < 2);
    cpu::naive::conv2d_forward(x.ref, w.ref, b.ref, want, c.p);
    if (c.residual) cpu::naive::add(want, x.ref, want);
    cpu::naive::relu_forward(want, want);
    const std::string what = "int8 x" + shape_to_string(c.x) + " w" + shape_to_string(c.w);
    EXPECT_TRUE(close(got, want8.to_vector(), int8_reference_tolerance(), what + " vs int8 ref"));
    EXPECT_TRUE(close(got, want.to_vector(), tolerance(Accuracy::kQuantized, 1, DType::kUInt8),
                      what + " vs fp32 ref"));
    EXPECT_NE(got, full) << what << ": the int8 program gave the fp32 program's bits";
    // oneDNN's int8 kernels, not its reference (which any unsupported layout falls to).
    EXPECT_EQ(int8->implementations().find("ref"), std::string::npos)
        << what << ": " << int8->implementations();
    if (HasFailure()) return;
  }
}

// The reference itself: codes at the ends of the range are the extreme codes,
// a range without negative values quantizes to u8, and a convolution of
// exactly representable values (x on the code grid, weights +-max) is exact.
TEST(Int8Quantization, RulesAndAnExactCase) {
  const auto u = cpu::int8::input_quantization({0.0f, 2.55f});
  EXPECT_TRUE(u.is_unsigned);
  EXPECT_FLOAT_EQ(u.scale, 0.01f);
  EXPECT_EQ(cpu::int8::quantize_u8(2.55f, 1 / u.scale), 255);
  EXPECT_EQ(cpu::int8::quantize_u8(9.0f, 1 / u.scale), 255);  // saturates
  EXPECT_EQ(cpu::int8::quantize_u8(-1.0f, 1 / u.scale), 0);
  const auto s = cpu::int8::input_quantization({-2.54f, 1.0f});
  EXPECT_FALSE(s.is_unsigned);
  EXPECT_FLOAT_EQ(s.scale, 0.02f);
  EXPECT_EQ(cpu::int8::quantize_s8(-9.0f, 1 / s.scale), -127);
  EXPECT_EQ(cpu::int8::input_quantization({0.0f, 0.0f}).scale, 1.0f);
  EXPECT_THROW(cpu::int8::input_quantization({1.0f, 0.0f}), InvalidArgument);
  EXPECT_THROW(cpu::int8::input_quantization({0.0f, NAN}), InvalidArgument);

  Backend& be = cpu_backend();
  Tensor x(be, {1, 1, 1, 2}), w(be, {2, 1, 1, 1}), y(be, {1, 2, 1, 2});
  const std::vector<float> xv{0.5f, -0.25f}, wv{2.0f, -4.0f};
  x.copy_from_host(xv.data());
  w.copy_from_host(wv.data());
  cpu::int8::conv2d_reference(x, w, Tensor(), nullptr, y, {}, false, {-1.27f, 1.27f});
  const std::vector<float> want{1.0f, -0.5f, -2.0f, 1.0f}, got = y.to_vector();
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

// Calibration: the fp32 blocked program records the range of each
// convolution's input (the network input, then the first convolution's ReLU
// output), widened over forwards.
TEST(Int8Calibration, RecordsEachConvolutionsInputRange) {
  Backend& be = cpu_backend();
  if (be.inference_precision(Precision::kInt8) == PrecisionSupport::kNone)
    GTEST_SKIP() << "no int8 inference on this machine";
  const Shape xs{1, 16, 6, 6}, ws{16, 16, 3, 3};
  const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  const auto values = [](const Shape& s, std::uint32_t seed) {
    return random_values(static_cast<std::size_t>(shape_numel(s)), seed, -1.0f, 1.0f);
  };
  const Tensor w1 = upload(be, ws, values(ws, 1)), w2 = upload(be, ws, values(ws, 2));
  const Tensor b = upload(be, {16}, values({16}, 3));
  std::vector<InferenceStep> steps(2);
  for (int i = 0; i < 2; ++i) {
    steps[i].kind = InferenceStep::Kind::kConv;
    steps[i].name = "conv" + std::to_string(i);
    steps[i].chain.push_back(FusedConv{i ? w2 : w1, b, p, Activation::kRelu});
  }
  const auto program = be.compile_inference(steps, ProgramLayout::kBackend, Precision::kFp32);
  std::vector<ActivationRange> ranges;
  ASSERT_TRUE(program->record_conv_input_ranges(&ranges));
  const auto xa = values(xs, 4), xb = values(xs, 5);
  program->forward(upload(be, xs, xa));
  program->forward(upload(be, xs, xb));
  program->record_conv_input_ranges(nullptr);
  ASSERT_EQ(ranges.size(), 2u);
  std::vector<float> both_inputs = xa;
  both_inputs.insert(both_inputs.end(), xb.begin(), xb.end());
  const ActivationRange want0 = range_of(both_inputs);
  EXPECT_EQ(ranges[0].min, want0.min);
  EXPECT_EQ(ranges[0].max, want0.max);
  float hi = 0.0f;  // the first convolution's outputs, naive
  for (const auto* x : {&xa, &xb}) {
    Tensor xt = upload(be, xs, *x), y(be, xs);
    cpu::naive::conv2d_forward(xt, w1, b, y, p);
    for (float v : y.to_vector()) hi = std::max(hi, v);
  }
  EXPECT_EQ(ranges[1].min, 0.0f);  // after the ReLU (and the blocked padding's zeros)
  EXPECT_NEAR(ranges[1].max, hi, 1e-4 * hi);
}

}  // namespace
}  // namespace stoke::testing
