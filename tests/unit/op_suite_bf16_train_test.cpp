// The mixed-precision training convolution (Backend::set_training_precision
// bf16) on every backend that runs it: forward, input gradient, weight and
// bias gradient against the fp32 naive reference within the bf16 row of the
// tolerance table, and not the fp32 kernels' bits. Backends without bf16
// training (the im2col build, the fake GPU, a CPU capped at AVX2 by CTest's
// CpuConv.Avx2Fallback) must refuse it with Unsupported. fp16 the same way
// where a backend runs it (CUDA), refused everywhere else.
#include <cstdlib>

#include "unit/op_suite.hpp"

namespace stoke::testing {
namespace {

struct Bf16Case {
  Shape x, w;
  Conv2dParams p;
};

// ResNet's layers: the 7x7 stem, 3x3 same and strided, a 1x1 projection, a
// Winograd-sized 3x3 (fp32 would take Winograd: bf16 must not), batch 1, an
// odd batch that splits into unequal parts, a grouped dilated layer.
std::vector<Bf16Case> bf16_cases() {
  return {
      {{2, 3, 32, 32}, {16, 3, 7, 7}, {2, 2, 3, 3, 1, 1, 1}},
      {{2, 16, 9, 9}, {16, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{3, 16, 9, 9}, {32, 16, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},
      {{2, 16, 8, 8}, {32, 16, 1, 1}, {2, 2, 0, 0, 1, 1, 1}},
      {{2, 32, 28, 28}, {32, 32, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{1, 64, 14, 14}, {64, 64, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{9, 8, 6, 6}, {16, 8, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
      {{2, 8, 12, 10}, {8, 4, 3, 3}, {1, 1, 2, 2, 2, 2, 2}},
  };
}

std::string describe(const Bf16Case& c) {
  return "bf16 x" + shape_to_string(c.x) + " w" + shape_to_string(c.w) + " stride " +
         std::to_string(c.p.stride_h) + " groups " + std::to_string(c.p.groups);
}

// What the backend under test's outputs are, in one precision.
struct Outputs {
  std::vector<float> y, dx, dw, db;
};

Outputs run(OpSuite& t, const Bf16Case& c, const OpSuite::Pair& x, const OpSuite::Pair& w,
            const OpSuite::Pair& b, const OpSuite::Pair& dy, Precision precision) {
  t.be().set_training_precision(precision);
  const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
  Tensor y(t.be(), ys), dx(t.be(), c.x), dw(t.be(), c.w), db(t.be(), {c.w[0]});
  t.be().conv2d_forward(x.dut, w.dut, b.dut, y, c.p);
  t.be().conv2d_backward(x.dut, w.dut, dy.dut, dx, dw, db, c.p);
  t.be().set_training_precision(Precision::kFp32);
  return {y.to_vector(), dx.to_vector(), dw.to_vector(), db.to_vector()};
}

// The cases in `precision` against the naive fp32 reference within the row
// of `dtype` in the tolerance table, and not the fp32 kernels' bits.
void expect_low_precision_matches(OpSuite& t, Precision precision, DType dtype) {
  std::uint32_t seed = 5100;
  for (const Bf16Case& c : bf16_cases()) {
    const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
    const auto x = t.both(c.x, ++seed), w = t.both(c.w, ++seed), b = t.both({c.w[0]}, ++seed);
    const auto dy = t.both(ys, ++seed);
    const Outputs low = run(t, c, x, w, b, dy, precision);
    const Outputs full = run(t, c, x, w, b, dy, Precision::kFp32);
    Tensor y(t.ref(), ys), dx(t.ref(), c.x), dw(t.ref(), c.w), db(t.ref(), {c.w[0]});
    cpu::naive::conv2d_forward(x.ref, w.ref, b.ref, y, c.p);
    cpu::naive::conv2d_backward(x.ref, w.ref, dy.ref, dx, dw, db, c.p);
    // Rounded inputs, fp32 sums: the dtype's row (its error relative to the
    // output's scale does not grow with the reduction length).
    const Tolerance tol = tolerance(Accuracy::kRoundedInputs, 1, dtype);
    const std::string what = std::string(to_string(precision)) + " " + describe(c);
    EXPECT_TRUE(close(low.y, y.to_vector(), tol, "y " + what));
    EXPECT_TRUE(close(low.dx, dx.to_vector(), tol, "dx " + what));
    EXPECT_TRUE(close(low.dw, dw.to_vector(), tol, "dw " + what));
    // db sums dy as oneDNN's bf16 kernel reads it, rounded to bf16: the same row.
    EXPECT_TRUE(close(low.db, db.to_vector(), tol, "db " + what));
    EXPECT_NE(low.y, full.y) << what << ": the low-precision forward gave the fp32 kernel's bits";
    EXPECT_NE(low.dx, full.dx) << what << ": the low-precision input gradient gave fp32's bits";
    EXPECT_NE(low.dw, full.dw) << what << ": the low-precision weight gradient gave fp32's bits";
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace

TEST_P(OpSuite, Bf16TrainingConvolutionMatchesTheFp32Reference) {
  const PrecisionSupport support = be().training_precision_support(Precision::kBf16);
  if (const char* most = std::getenv("STOKE_TEST_BF16_AT_MOST")) {
    if (std::string(most) == "none") {
      EXPECT_EQ(support, PrecisionSupport::kNone);
    } else if (std::string(most) == "emulated") {
      EXPECT_NE(support, PrecisionSupport::kNative);
    }
  }
  if (support == PrecisionSupport::kNone) {
    EXPECT_THROW(be().set_training_precision(Precision::kBf16), Unsupported);
    EXPECT_EQ(be().training_precision(), Precision::kFp32);
    GTEST_SKIP() << GetParam().name << " has no bf16 training convolutions on this machine";
  }
  expect_low_precision_matches(*this, Precision::kBf16, DType::kBFloat16);
}

// fp16 training convolutions: CUDA only (compute capability 7.0 and later);
// every CPU backend refuses them.
TEST_P(OpSuite, Fp16TrainingConvolutionMatchesTheFp32Reference) {
  if (be().training_precision_support(Precision::kFp16) == PrecisionSupport::kNone) {
    EXPECT_THROW(be().set_training_precision(Precision::kFp16), Unsupported);
    EXPECT_EQ(be().training_precision(), Precision::kFp32);
    GTEST_SKIP() << GetParam().name << " has no fp16 training convolutions";
  }
  expect_low_precision_matches(*this, Precision::kFp16, DType::kFloat16);
}

}  // namespace stoke::testing
