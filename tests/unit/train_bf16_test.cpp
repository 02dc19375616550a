// Mixed-precision training (TrainerOptions::precision bf16, docs/precision.md):
// a small net on a noisy synthetic set, trained in fp32 and in bf16 from the
// same seed, reaches the same validation accuracy within 1 percentage point;
// the bf16 run did compute in bf16 (other losses), its model file is an
// ordinary fp32 one, and the refusals (fp16, no native bf16) name the reason.
// The fixture: unit/bf16_training.hpp (also run on CUDA, tests/gpu).
#include "unit/bf16_training.hpp"

namespace stoke::testing {
namespace {

TEST_F(Bf16Training, ReachesFp32ValidationAccuracyWithinOnePoint) {
  if (cpu_backend().training_precision_support(Precision::kBf16) != PrecisionSupport::kNative)
    GTEST_SKIP() << "this CPU has no native bf16 (AVX512-BF16 or AMX)";
  expect_matches_fp32(cpu_backend(), Precision::kBf16);
}

TEST_F(Bf16Training, RefusesFp16AndBf16WithoutNativeKernels) {
  options_.epochs = 1;
  try {
    fit(Precision::kFp16);
    ADD_FAILURE() << "fp16 training accepted on the CPU";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("fp16"), std::string::npos) << e.what();
  }
  const PrecisionSupport support = cpu_backend().training_precision_support(Precision::kBf16);
  if (support == PrecisionSupport::kNative) {
    EXPECT_EQ(fit(Precision::kAuto).precision, Precision::kFp32);  // auto stays fp32
    GTEST_SKIP() << "native bf16 here: the refusal runs under CpuConv.Avx2Fallback / Bf16Emulated";
  }
  try {
    fit(Precision::kBf16);
    ADD_FAILURE() << "bf16 training accepted without native bf16";
  } catch (const Unsupported& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(support == PrecisionSupport::kEmulated ? "emulated" : "AVX-512"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("fp32"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace stoke::testing
