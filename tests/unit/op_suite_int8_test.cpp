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

// t quantized as a convolution with input range r reads it, and dequantized:
// what a block's identity shortcut adds in int8 (its input's codes).
Tensor dequantized_codes(const Tensor& t, const ActivationRange& r) {
  const auto q = cpu::int8::input_quantization(r, cpu::int8::support() < 2);
  std::vector<float> v = t.to_vector();
  for (float& e : v) {
    e = q.scale * (q.is_unsigned ? static_cast<float>(cpu::int8::quantize_u8(e, 1 / q.scale))
                                 : static_cast<float>(cpu::int8::quantize_s8(e, 1 / q.scale)));
  }
  Tensor out(t.backend(), t.shape());
  out.copy_from_host(v.data());
  return out;
}

TEST_P(OpSuite, Int8FusedConvolutionMatchesTheInt8AndFp32References) {
  if (be().inference_precision(Precision::kInt8) == PrecisionSupport::kNone)
    GTEST_SKIP() << GetParam().name << " runs no int8 inference on this machine";
  struct Case {
    Shape x, w;
    Conv2dParams p;
    bool residual = false;     // a block: y = relu(conv(x) + b + x), x added as its codes
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
    const Tensor residual8 = dequantized_codes(x.ref, range);
    cpu::int8::conv2d_reference(x.ref, w.ref, b.ref, c.residual ? &residual8 : nullptr, want8, c.p,
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

// A small residual network in one int8 program: a stem, a max pool (and,
// the second time, none), a block with an identity residual, a block with a
// strided 1x1 shortcut and a block of one convolution adding its own input,
// so that every hand-over between layers runs: codes inside a chain and
// between steps (the stem's max pooled as codes), an identity shortcut
// adding its input's codes, a shortcut's fp32 output added to a codes
// output, NHWC and then blocked at the end. Against the int8 reference
// applied layer by layer with the same calibrated ranges (the chained codes
// are quantize_u8 of the fp32 output: equal but for a rounding tie, which
// may move one code by one step), at batch 1 (bands of output rows) and 10
// (parts of one or two images: more images than the 8 parts).
TEST_P(OpSuite, Int8ProgramChainsLayersAsTheReferenceLayerByLayer) {
  if (be().inference_precision(Precision::kInt8) == PrecisionSupport::kNone)
    GTEST_SKIP() << GetParam().name << " runs no int8 inference on this machine";
  const Conv2dParams same{1, 1, 1, 1, 1, 1, 1}, down{2, 2, 1, 1, 1, 1, 1}, one{2, 2, 0, 0, 1, 1, 1};
  std::uint32_t seed = 2900;
  struct Layer {
    Pair w, b;
    Conv2dParams p;
    bool relu;
  };
  const auto layer = [&](const Shape& w, const Conv2dParams& p, bool relu = true) {
    return Layer{both(w, ++seed, -0.3f, 0.3f), both({w[0]}, ++seed, -0.1f, 0.1f), p, relu};
  };
  const Layer stem = layer({16, 3, 3, 3}, same), a1 = layer({16, 16, 3, 3}, same),
              a2 = layer({16, 16, 3, 3}, same), b1 = layer({32, 16, 3, 3}, down),
              b2 = layer({32, 32, 3, 3}, same), bs = layer({32, 16, 1, 1}, one, false),
              c1 = layer({32, 32, 3, 3}, same);
  const auto fused = [](const Layer& l) {
    return FusedConv{l.w.dut, l.b.dut, l.p, l.relu ? Activation::kRelu : Activation::kIdentity};
  };
  for (const bool pooled : {true, false}) {
    SCOPED_TRACE(pooled ? "stem, max pool, blocks" : "stem, blocks");
    std::vector<InferenceStep> steps(5);
    steps[0].kind = InferenceStep::Kind::kConv;
    steps[0].chain = {fused(stem)};
    steps[1].kind = InferenceStep::Kind::kMaxPool;
    steps[1].pool = Pool2dParams{3, 3, 2, 2, 1, 1};
    steps[2].kind = steps[3].kind = steps[4].kind = InferenceStep::Kind::kBlock;
    steps[2].chain = {fused(a1), fused(a2)};
    steps[3].chain = {fused(b1), fused(b2)};
    steps[3].shortcut = fused(bs);
    steps[4].chain = {fused(c1)};
    if (!pooled) steps.erase(steps.begin() + 1);
    const std::size_t a_step = pooled ? 2 : 1;
    for (std::size_t i = 0; i < steps.size(); ++i) steps[i].name = "step" + std::to_string(i);

    // 16 x 16: the strided block's 1x1 shortcut reads 7 of its input's 8 rows
    // (an image's last row unused), and one image splits into two bands of rows.
    const Shape x1{1, 3, 16, 16}, x10{10, 3, 16, 16};
    const auto x = both(x10, ++seed);
    Tensor first(be(), x1);  // image 0 alone
    first.copy_from_host(x.dut.to_vector().data());
    std::vector<ActivationRange> ranges;
    {
      auto fp32 = be().compile_inference(steps, ProgramLayout::kBackend, Precision::kFp32);
      ASSERT_TRUE(fp32->record_conv_input_ranges(&ranges));
      fp32->forward(x.dut);
    }
    ASSERT_EQ(ranges.size(), 7u);  // stem, a1, a2, b1, b2, the shortcut, c1
    steps[0].chain[0].input_range = ranges[0];
    steps[a_step].chain[0].input_range = ranges[1];
    steps[a_step].chain[1].input_range = ranges[2];
    steps[a_step + 1].chain[0].input_range = ranges[3];
    steps[a_step + 1].chain[1].input_range = ranges[4];
    steps[a_step + 1].shortcut->input_range = ranges[5];
    steps[a_step + 2].chain[0].input_range = ranges[6];
    const auto int8 = be().compile_inference(steps, ProgramLayout::kBackend, Precision::kInt8);

    const bool reduce = cpu::int8::support() < 2;
    const auto conv = [&](const Tensor& in, const Layer& l, const ActivationRange& r,
                          const Tensor* residual) {
      Tensor y(ref(), conv2d_output_shape(in.shape(), l.w.ref.shape(), l.p));
      cpu::int8::conv2d_reference(in, l.w.ref, l.b.ref, residual, y, l.p, l.relu || residual, r,
                                  reduce);
      return y;
    };
    // An identity shortcut adds its block's input as the block's first
    // convolution reads it: quantized and dequantized.
    const auto codes = dequantized_codes;
    const auto reference = [&](const Tensor& in) {
      Tensor p = conv(in, stem, ranges[0], nullptr);
      if (pooled) {
        Tensor pool(ref(), step_output_shape(steps[1], p.shape()));
        ref().max_pool2d_forward(p, pool, steps[1].pool);
        p = std::move(pool);
      }
      const Tensor pq = codes(p, ranges[1]);
      const Tensor a = conv(conv(p, a1, ranges[1], nullptr), a2, ranges[2], &pq);
      const Tensor sc = conv(a, bs, ranges[5], nullptr);
      const Tensor b = conv(conv(a, b1, ranges[3], nullptr), b2, ranges[4], &sc);
      const Tensor bq = codes(b, ranges[6]);
      return conv(b, c1, ranges[6], &bq);
    };
    for (const Tensor* in : {static_cast<const Tensor*>(&first), &x.dut}) {
      Tensor in_ref(ref(), in->shape());
      in_ref.copy_from_host(in->to_vector().data());
      const auto want = reference(in_ref).to_vector();
      const auto got = int8->forward(*in).to_vector();
      const std::string what = "int8 program, batch " + std::to_string(in->shape()[0]);
      ASSERT_EQ(got.size(), want.size()) << what;
      // Without VNNI each layer is only within the quantization bound of its
      // reference (the test above), and those errors compound over the six
      // layers in series (stem, a1, a2, b1, b2, c1).
      Tolerance bound = tolerance(Accuracy::kQuantized, 1, DType::kUInt8);
      if (reduce) bound.max_error *= 6;
      EXPECT_TRUE(close(got, want, bound, what));
      if (!reduce) {  // VNNI: exact sums, so all but a rounding tie's few outputs agree closely
        const float scale = *std::max_element(want.begin(), want.end());
        std::size_t far = 0;
        for (std::size_t e = 0; e < got.size(); ++e)
          far += std::fabs(got[e] - want[e]) > 1e-4f * scale;
        EXPECT_LE(far, got.size() / 100) << what << ": " << far << " of " << got.size()
                                         << " outputs differ from the layer-by-layer reference";
      }
    }
    EXPECT_EQ(int8->implementations().find("ref"), std::string::npos) << int8->implementations();
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
