// FusedInference (batch norm folded, bias + residual + ReLU fused) against the
// model's own eval-mode forward, on ResNet and plain-CNN specs, batch 1 and 3;
// its blocked-layout path (oneDNN's nChw16c / nChw8c kept between layers)
// against its plain path and the eval forward, odd sizes, batch 1 and > 1;
// its bf16 program against fp32 within a tolerance from bf16's epsilon, and
// resolve_precision's choice under the CPU's instruction-set cap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "backend/cpu/conv2d_blocked.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "nn/fused_inference.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/threads.hpp"

namespace stoke::nn {
namespace {

// Non-trivial batch-norm state, so that folding has something to fold.
void randomize_statistics(Model& model, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.5f, 1.5f), c(-0.5f, 0.5f);
  auto fill = [&](const Tensor& t, bool positive) {
    std::vector<float> v(static_cast<std::size_t>(t.numel()));
    for (float& x : v) x = positive ? u(rng) : c(rng);
    Tensor view = t;
    view.copy_from_host(v.data());
  };
  for (const auto& b : model.named_buffers())
    fill(b.tensor, b.name.find("running_var") != std::string::npos);
  for (const auto& p : model.named_parameters()) {
    if (p.name.find(".gamma") != std::string::npos) fill(p.tensor, true);
    if (p.name.find(".beta") != std::string::npos || p.name.find("fc.bias") != std::string::npos)
      fill(p.tensor, false);
  }
}

Tensor random_input(Backend& be, const Shape& s, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(static_cast<std::size_t>(shape_numel(s)));
  for (float& x : v) x = d(rng);
  Tensor t(be, s);
  t.copy_from_host(v.data());
  return t;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float scale = 0.0f;
  for (float v : want) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < got.size(); ++i) {
    // Folding reorders the roundings of conv and batch norm: float32, ~15 layers.
    EXPECT_NEAR(got[i], want[i], 2e-5 * (1.0f + scale)) << "logit " << i << " " << what;
  }
}

void expect_matches(Model& model, FusedInference& fused, std::int64_t batch) {
  Backend& be = model.backend();
  const Tensor x =
      random_input(be, model.input_shape(batch), 7 + static_cast<std::uint32_t>(batch));
  const auto want = model.forward(x, false).to_vector();
  expect_near(fused.forward(x).to_vector(), want, "batch " + std::to_string(batch));
}

ModelSpec small_resnet() {
  ModelSpec spec;
  spec.in_channels = 3;
  spec.height = spec.width = 12;
  spec.stem_width = 8;
  spec.widths = {8, 16};
  spec.strides = {1, 2};
  spec.blocks_per_stage = 2;
  return spec;
}

TEST(FusedInference, ResNetMatchesEvalForward) {
  auto model = build_model(cpu_backend(), small_resnet(), 3);
  randomize_statistics(*model, 11);
  FusedInference fused(model->network());
  // Stem; stage 1 keeps 8 channels at stride 1 (identity shortcuts: 2 each);
  // stage 2 opens with a projection shortcut (3), then an identity block (2).
  EXPECT_EQ(fused.fused_convolutions(), 1 + 2 + 2 + 3 + 2);
  for (std::int64_t batch : {1, 3}) expect_matches(*model, fused, batch);
}

TEST(FusedInference, PlainCnnWithDropoutMatchesEvalForward) {
  ModelSpec spec = small_resnet();
  spec.architecture = Architecture::kPlainCnn;
  spec.dropout = 0.3f;
  auto model = build_model(cpu_backend(), spec, 5);
  randomize_statistics(*model, 13);
  FusedInference fused(model->network());
  EXPECT_EQ(fused.fused_convolutions(), 2);
  for (std::int64_t batch : {1, 3}) expect_matches(*model, fused, batch);
}

TEST(FusedInference, RefoldFollowsChangedStatistics) {
  auto model = build_model(cpu_backend(), small_resnet(), 3);
  FusedInference fused(model->network());
  randomize_statistics(*model, 17);  // stale until refold
  fused.refold();
  expect_matches(*model, fused, 2);
}

TEST(FusedInference, AllocatesNothingAfterTheFirstCall) {
  cpu::CpuBackend be;
  auto model = build_model(be, small_resnet(), 3);
  FusedInference fused(model->network());
  const Tensor x = random_input(be, model->input_shape(2), 1);
  const auto first = fused.forward(x).to_vector();
  const MemoryStats after_first = be.memory_stats();
  const auto second = fused.forward(x).to_vector();
  EXPECT_EQ(be.memory_stats().allocations, after_first.allocations);
  EXPECT_EQ(be.memory_stats().peak_bytes, after_first.peak_bytes);
  EXPECT_EQ(first, second);
}

// The blocked path against the plain fused path and the eval forward.
void expect_blocked_matches(const ModelSpec& spec, std::uint32_t seed) {
  if (!cpu::blocked::available(cpu_backend())) GTEST_SKIP() << "stoke built without oneDNN";
  auto model = build_model(cpu_backend(), spec, seed);
  randomize_statistics(*model, seed + 1);
  FusedInference blocked(model->network());
  FusedInference plain(model->network(), FusedInference::Layout::kPlain);
  ASSERT_TRUE(blocked.blocked());
  ASSERT_FALSE(plain.blocked());
  for (std::int64_t batch : {1, 2, 5}) {
    const Tensor x = random_input(cpu_backend(), model->input_shape(batch), seed + 2);
    const std::string what = "batch " + std::to_string(batch);
    const auto want = model->forward(x, false).to_vector();
    const auto got = blocked.forward(x).to_vector();
    expect_near(got, plain.forward(x).to_vector(), what + " vs plain fused");
    expect_near(got, want, what + " vs eval forward");
  }
}

TEST(FusedInferenceBlocked, ResNetOddSizeMatchesPlainPath) {
  ModelSpec spec = small_resnet();
  spec.height = 13;
  spec.width = 11;
  spec.widths = {8, 24};  // 24: a partly filled channel block
  expect_blocked_matches(spec, 21);
}

TEST(FusedInferenceBlocked, ResNet18LikeMatchesPlainPath) {
  ModelSpec spec;
  spec.architecture = Architecture::kResNet18;
  spec.width_multiplier = 0.25f;  // 16, 32, 64, 128 channels
  spec.in_channels = 3;
  spec.height = 37;
  spec.width = 35;
  spec.classes = 5;
  expect_blocked_matches(spec, 31);
}

TEST(FusedInferenceBlocked, PlainCnnWithWideInputMatchesPlainPath) {
  ModelSpec spec = small_resnet();
  spec.architecture = Architecture::kPlainCnn;
  spec.in_channels = 20;  // not read plain: reordered into the blocked layout first
  spec.height = 15;
  spec.width = 17;
  expect_blocked_matches(spec, 41);
}

TEST(FusedInferenceBlocked, OneConvolutionBlockReadingItsOwnResidual) {
  if (!cpu::blocked::available(cpu_backend())) GTEST_SKIP() << "stoke built without oneDNN";
  Backend& be = cpu_backend();
  auto net = std::make_unique<Sequential>(be, "net");
  net->add(std::make_unique<Conv2d>(be, "stem", 3, 16, 3, Conv2dParams{1, 1, 1, 1, 1, 1, 1}));
  net->add(std::make_unique<BatchNorm2d>(be, "stem.bn", 16));
  net->add(std::make_unique<Relu>(be, "stem.relu"));
  auto body = std::make_unique<Sequential>(be, "block");
  body->add(
      std::make_unique<Conv2d>(be, "block.conv", 16, 16, 3, Conv2dParams{1, 1, 1, 1, 1, 1, 1}));
  body->add(std::make_unique<BatchNorm2d>(be, "block.bn", 16));
  net->add(std::make_unique<Residual>(be, "block", std::move(body), nullptr));  // identity
  net->add(std::make_unique<GlobalAvgPool>(be, "gap"));
  net->add(std::make_unique<Linear>(be, "fc", 16, 4));
  ModelSpec spec = small_resnet();
  spec.height = spec.width = 9;
  spec.classes = 4;
  Model model(spec, std::move(net), 61);
  randomize_statistics(model, 62);
  FusedInference fused(model.network());
  ASSERT_TRUE(fused.blocked());
  EXPECT_EQ(fused.fused_convolutions(), 2);
  for (std::int64_t batch : {1, 3}) expect_matches(model, fused, batch);
}

TEST(FusedInferenceBlocked, GroupedConvolutionKeepsTheNchwPath) {
  Backend& be = cpu_backend();
  auto net = std::make_unique<Sequential>(be, "net");
  net->add(std::make_unique<Conv2d>(be, "stem", 4, 8, 3, Conv2dParams{1, 1, 1, 1, 1, 1, 2}));
  net->add(std::make_unique<BatchNorm2d>(be, "stem.bn", 8));
  net->add(std::make_unique<Relu>(be, "stem.relu"));
  net->add(std::make_unique<GlobalAvgPool>(be, "gap"));
  net->add(std::make_unique<Linear>(be, "fc", 8, 3));
  ModelSpec spec = small_resnet();
  spec.in_channels = 4;
  spec.height = spec.width = 7;
  spec.classes = 3;
  Model model(spec, std::move(net), 71);
  randomize_statistics(model, 72);
  FusedInference fused(model.network());
  EXPECT_FALSE(fused.blocked());  // the blocked kernels take groups 1 only
  expect_matches(model, fused, 2);
}

// A batch's 3x3 stride-1 convolutions run oneDNN's Winograd kernel where it
// has one (AVX-512, the 16-channel layout); one image only from 64 input
// channels on (split into two halves of the output channels), so a net of
// 32 and 48 channels keeps the direct kernels at batch 1. All match the eval
// forward, and one image gives the same bits at 1, 2 and 3 threads.
TEST(FusedInferenceBlocked, WinogradForABatchAndForOneImageOfManyChannels) {
  if (!cpu::blocked::available(cpu_backend())) GTEST_SKIP() << "stoke built without oneDNN";
  const bool avx512 = cpu::blocked::block_channels() == 16;
  const auto has_winograd = [](const FusedInference& f) {
    return f.implementations().find("wino") != std::string::npos;
  };
  ModelSpec spec = small_resnet();
  spec.widths = {32, 48};
  auto narrow = build_model(cpu_backend(), spec, 61);
  randomize_statistics(*narrow, 62);
  FusedInference fused(narrow->network());
  expect_matches(*narrow, fused, 1);
  EXPECT_FALSE(has_winograd(fused)) << fused.implementations();
  expect_matches(*narrow, fused, 4);
  EXPECT_EQ(has_winograd(fused), avx512) << fused.implementations();

  spec.widths = {32, 64};
  auto wide = build_model(cpu_backend(), spec, 63);
  randomize_statistics(*wide, 64);
  FusedInference one(wide->network());
  expect_matches(*wide, one, 1);
  EXPECT_EQ(has_winograd(one), avx512) << one.implementations();
  const Tensor x = random_input(cpu_backend(), wide->input_shape(1), 65);
  const int saved = thread_count();
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    set_thread_count(threads);
    const auto got = one.forward(x).to_vector();
    if (threads == 1) first = got;
    EXPECT_EQ(got, first) << threads << " threads";
  }
  set_thread_count(saved);
}

TEST(FusedInferenceBlocked, SameBitsForAnyThreadCount) {
  if (!cpu::blocked::available(cpu_backend())) GTEST_SKIP() << "stoke built without oneDNN";
  ModelSpec spec = small_resnet();
  spec.widths = {32, 48};  // several channel blocks: a one-image forward splits over them
  auto model = build_model(cpu_backend(), spec, 51);
  randomize_statistics(*model, 52);
  FusedInference fused(model->network());
  const int saved = thread_count();
  for (std::int64_t batch : {1, 3}) {
    const Tensor x = random_input(cpu_backend(), model->input_shape(batch), 53);
    std::vector<float> first;
    for (int threads : {1, 2, 3}) {
      set_thread_count(threads);
      const auto got = fused.forward(x).to_vector();
      if (threads == 1) first = got;
      EXPECT_EQ(got, first) << threads << " threads, batch " << batch;
    }
  }
  set_thread_count(saved);
}

// bf16 (STOKE_PRECISION=bf16): activations and weights rounded to bf16 before
// every convolution, fp32 accumulation. Each rounding is off by at most half
// of bf16's epsilon (2^-8) relative; the tolerance allows two such errors
// (activation and weight) per convolution, compounding through the net.
double bf16_tolerance(int convolutions, double scale) {
  return 2.0 * convolutions * std::ldexp(1.0, -8) * (1.0 + scale);
}

void expect_bf16_close(const ModelSpec& spec, std::uint32_t seed) {
  if (!cpu::blocked::available(cpu_backend())) GTEST_SKIP() << "stoke built without oneDNN";
  if (cpu::blocked::bf16_support() == 0)
    GTEST_SKIP() << "oneDNN has no bf16 convolutions on " << cpu::blocked::isa_name();
  auto model = build_model(cpu_backend(), spec, seed);
  randomize_statistics(*model, seed + 1);
  FusedInference fp32(model->network());
  FusedInference bf16(model->network(), FusedInference::Layout::kAuto, Precision::kBf16);
  EXPECT_EQ(bf16.precision(), Precision::kBf16);
  ASSERT_TRUE(bf16.blocked());
  const std::int64_t classes = spec.classes;
  for (std::int64_t batch : {1, 8}) {
    const Tensor x = random_input(cpu_backend(), model->input_shape(batch), seed + 2);
    const auto want = fp32.forward(x).to_vector();
    const auto got = bf16.forward(x).to_vector();
    ASSERT_EQ(got.size(), want.size());
    float scale = 0.0f;
    for (float v : want) scale = std::max(scale, std::abs(v));
    const double tol = bf16_tolerance(bf16.fused_convolutions(), scale);
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "logit " << i;
      worst = std::max(worst, double(std::abs(got[i] - want[i])));
    }
    EXPECT_LE(worst, tol) << "batch " << batch;
    EXPECT_GT(worst, 0.0) << "batch " << batch
                          << ": bf16 gave fp32's exact bits (not run in bf16?)";
    // Decisions with a clear fp32 margin do not change.
    for (std::int64_t n = 0; n < batch; ++n) {
      const float* a = want.data() + n * classes;
      const float* b = got.data() + n * classes;
      std::vector<float> sorted(a, a + classes);
      std::sort(sorted.rbegin(), sorted.rend());
      if (sorted[0] - sorted[1] <= 2 * tol) continue;
      EXPECT_EQ(std::max_element(a, a + classes) - a, std::max_element(b, b + classes) - b)
          << "image " << n << " of batch " << batch;
    }
  }
}

TEST(FusedInferenceBf16, ResNetOddSizeCloseToFp32) {
  ModelSpec spec = small_resnet();
  spec.height = 13;
  spec.width = 11;
  spec.widths = {8, 24};
  spec.classes = 4;
  expect_bf16_close(spec, 81);
}

TEST(FusedInferenceBf16, ResNet18LikeCloseToFp32) {
  ModelSpec spec;
  spec.architecture = Architecture::kResNet18;
  spec.width_multiplier = 0.25f;
  spec.in_channels = 3;
  spec.height = 37;
  spec.width = 35;
  spec.classes = 5;
  expect_bf16_close(spec, 91);
}

TEST(FusedInferenceBf16, PlainLayoutIsRefused) {
  if (cpu::blocked::bf16_support() == 0) GTEST_SKIP() << "no bf16 convolutions here";
  auto model = build_model(cpu_backend(), small_resnet(), 3);
  EXPECT_THROW(FusedInference(model->network(), FusedInference::Layout::kPlain, Precision::kBf16),
               InvalidArgument);
}

// resolve_precision on the CPU backend under the machine's instruction-set cap
// (CTest runs this file again under ONEDNN_MAX_CPU_ISA=AVX2 and AVX512_CORE,
// with STOKE_TEST_BF16_AT_MOST saying what the cap allows at most).
TEST(Precision, ResolvesByWhatTheCpuRuns) {
  const int support = cpu::blocked::bf16_support();
  if (const char* most = std::getenv("STOKE_TEST_BF16_AT_MOST")) {
    const int at_most = std::string(most) == "none" ? 0 : std::string(most) == "emulated" ? 1 : 2;
    EXPECT_LE(support, at_most) << "oneDNN runs " << cpu::blocked::isa_name();
  }
  Backend& be = cpu_backend();
  EXPECT_EQ(resolve_precision(be, Precision::kFp32), Precision::kFp32);
  // auto: bf16 only where native and measured faster (on an Intel Xeon with
  // AVX512-BF16 but no AMX it is slower: bench/RESULTS.md).
  if (support == 2) {
    const double ratio = measured_time_ratio(be, Precision::kBf16);
    EXPECT_GT(ratio, 0.0);
    EXPECT_LT(ratio, 100.0);
    EXPECT_EQ(measured_time_ratio(be, Precision::kBf16), ratio) << "measured once, remembered";
    EXPECT_EQ(resolve_precision(be, Precision::kAuto),
              ratio <= kAutoTimeRatio ? Precision::kBf16 : Precision::kFp32)
        << "bf16 takes " << ratio << "x fp32's time here";
  } else {
    EXPECT_EQ(resolve_precision(be, Precision::kAuto), Precision::kFp32);
  }
  if (support == 0) {
    try {
      resolve_precision(be, Precision::kBf16);
      ADD_FAILURE() << "bf16 accepted without bf16 kernels";
    } catch (const Unsupported& e) {
      EXPECT_NE(std::string(e.what()).find("STOKE_PRECISION=bf16"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("fp32"), std::string::npos) << e.what();
    }
    auto model = build_model(be, small_resnet(), 3);
    EXPECT_THROW(FusedInference(model->network(), FusedInference::Layout::kAuto, Precision::kBf16),
                 Unsupported);
  } else {
    EXPECT_EQ(resolve_precision(be, Precision::kBf16), Precision::kBf16);
  }
  EXPECT_THROW(resolve_precision(be, Precision::kFp16), Unsupported);  // GPUs only
}

}  // namespace
}  // namespace stoke::nn
