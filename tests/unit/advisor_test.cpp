#include <gtest/gtest.h>

#include <algorithm>

#include "stoke/tune.hpp"

namespace stoke {
namespace {

// A healthy GPU run: device busy 95%, no waiting, a well-used pool.
AdvisorInput healthy_gpu_run() {
  AdvisorInput in;
  in.system.cpu.physical_cores = 8;
  in.system.cpu.logical_cores = 16;
  in.system.cpu.simd = SimdLevel::kAvx2;
  GpuInfo gpu;
  gpu.index = 0;
  gpu.name = "RTX A6000";
  gpu.total_memory = 48ull << 30;
  in.system.cuda.gpus = {gpu};
  in.device.use_gpu = true;
  in.device.gpus = {0};
  in.cpu_threads = 7;
  in.simd = SimdLevel::kAvx2;
  in.batch_size = 64;
  in.max_batch_size = 96;
  auto& p = in.profile;
  p.wall_seconds = 100;
  p.steps = 1000;
  p.images = 64000;
  p.logical_cores = 16;
  p.device_busy_measured = true;
  p.device_busy_seconds = 95;
  p.stages[static_cast<int>(Stage::kDataWait)].seconds = 1;
  p.stages[static_cast<int>(Stage::kHostToDevice)].seconds = 3;
  p.memory = {.device_total = 48ull << 30,
              .pool_cap = 28ull << 30,
              .pool_reserved = 24ull << 30,
              .pool_in_use = 20ull << 30,
              .pool_peak = 22ull << 30,
              .pinned_bytes = 256ull << 20,
              .pinned_fallback = false};
  ConfigLoadOptions options;
  options.environment = std::vector<std::pair<std::string, std::string>>{};
  options.physical_cores = 8;
  in.config = Config::load(options);
  return in;
}

const Advice* find_rule(const std::vector<Advice>& advice, const std::string& rule) {
  const auto it =
      std::find_if(advice.begin(), advice.end(), [&](const Advice& a) { return a.rule == rule; });
  return it == advice.end() ? nullptr : &*it;
}

bool has_export(const Advice& a, const std::string& line) {
  return std::find(a.exports.begin(), a.exports.end(), line) != a.exports.end();
}

void set_stage(AdvisorInput& in, Stage s, double seconds) {
  in.profile.stages[static_cast<int>(s)].seconds = seconds;
}

TEST(Advisor, HealthyRunGetsNoAdvice) {
  const auto advice = advise(healthy_gpu_run());
  EXPECT_TRUE(advice.empty()) << format_advice(advice);
  EXPECT_NE(format_advice(advice).find("no bottleneck found"), std::string::npos);
}

TEST(Advisor, InputBoundRunGetsThreadsCacheAndPrefetch) {
  auto in = healthy_gpu_run();
  in.cpu_threads = 2;
  set_stage(in, Stage::kDataWait, 45);
  set_stage(in, Stage::kDecode, 150);
  in.profile.device_busy_seconds = 50;
  const auto advice = advise(in);
  ASSERT_FALSE(advice.empty());
  EXPECT_EQ(advice.front().rule, "input-bound") << format_advice(advice);
  const auto& a = advice.front();
  EXPECT_NE(a.diagnosis.find("45%"), std::string::npos) << a.diagnosis;
  EXPECT_TRUE(has_export(a, "export STOKE_CPU_THREADS=7"));
  EXPECT_TRUE(has_export(a, "export STOKE_CACHE=ram"));
  EXPECT_TRUE(has_export(a, "export STOKE_PREFETCH_DEPTH=3"));
  // Input-bound low device busy is not blamed on the batch size.
  EXPECT_EQ(find_rule(advice, "batch-too-small"), nullptr);
  EXPECT_NE(find_rule(advice, "too-few-threads"), nullptr);
}

TEST(Advisor, LowDeviceBusyWithHeadroomAsksForALargerBatch) {
  auto in = healthy_gpu_run();
  in.batch_size = 2;
  in.max_batch_size = 48;
  in.profile.device_busy_seconds = 20;
  in.profile.memory.pool_peak = 3ull << 30;
  in.profile.memory.pool_reserved = 4ull << 30;
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "batch-too-small");
  ASSERT_NE(a, nullptr) << format_advice(advice);
  EXPECT_NE(a->diagnosis.find("20%"), std::string::npos);
  ASSERT_FALSE(a->changes.empty());
  EXPECT_NE(a->changes[0].find("batch size 48"), std::string::npos) << a->changes[0];
}

TEST(Advisor, LowDeviceBusyWithoutHeadroomIsNotABatchProblem) {
  auto in = healthy_gpu_run();
  in.max_batch_size = 64;
  in.profile.device_busy_seconds = 20;
  EXPECT_EQ(find_rule(advise(in), "batch-too-small"), nullptr);
}

TEST(Advisor, ReservedFarAbovePeakIsHoarding) {
  auto in = healthy_gpu_run();
  in.profile.memory.pool_reserved = 45ull << 30;
  in.profile.memory.pool_peak = 4ull << 30;
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "pool-hoarding");
  ASSERT_NE(a, nullptr) << format_advice(advice);
  // 1.5 x 4 GiB of 48 GiB = 12.5% -> 13.
  EXPECT_TRUE(has_export(*a, "export STOKE_GPU_MEM_PERCENT=13")) << format_advice(advice);
}

TEST(Advisor, PageableStagingAndSerializedCopiesAreTransferBound) {
  auto in = healthy_gpu_run();
  in.config.set("STOKE_HOST_PINNED", "off");
  in.config.set("STOKE_GPU_STREAMS", "off");
  set_stage(in, Stage::kHostToDevice, 30);
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "transfer-bound");
  ASSERT_NE(a, nullptr) << format_advice(advice);
  EXPECT_TRUE(has_export(*a, "export STOKE_HOST_PINNED=on"));
  EXPECT_TRUE(has_export(*a, "export STOKE_GPU_STREAMS=on"));
  EXPECT_NE(a->diagnosis.find("30%"), std::string::npos);
}

TEST(Advisor, PinnedFallbackOverTheCapRaisesTheCap) {
  auto in = healthy_gpu_run();
  in.profile.memory.pinned_fallback = true;
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "transfer-bound");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(has_export(*a, "export STOKE_HOST_PINNED_MAX=1024M"));
}

TEST(Advisor, MoreThreadsThanCoresIsFlagged) {
  auto in = healthy_gpu_run();
  in.cpu_threads = 32;
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "too-many-threads");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(has_export(*a, "export STOKE_CPU_THREADS=7"));
}

TEST(Advisor, CpuBackendRecommendsAllCores) {
  auto in = healthy_gpu_run();
  in.device.use_gpu = false;
  in.device.gpus.clear();
  in.cpu_threads = 4;
  set_stage(in, Stage::kDataWait, 10);
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "too-few-threads");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(has_export(*a, "export STOKE_CPU_THREADS=8"));
}

TEST(Advisor, CpuBackendWithIdleCoresWantsMoreThreads) {
  auto in = healthy_gpu_run();
  in.device.use_gpu = false;
  in.device.gpus.clear();
  in.cpu_threads = 1;
  in.profile.process_cpu_seconds = 0.3 * in.profile.wall_seconds * in.profile.logical_cores;
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "too-few-threads");
  ASSERT_NE(a, nullptr) << format_advice(advice);
  EXPECT_NE(a->diagnosis.find("30% of the CPU"), std::string::npos) << a->diagnosis;
  // Busy cores: no advice.
  in.profile.process_cpu_seconds = 0.95 * in.profile.wall_seconds * in.profile.logical_cores;
  EXPECT_EQ(find_rule(advise(in), "too-few-threads"), nullptr);
}

TEST(Advisor, ForcedScalarSimdAndMissingSimd) {
  auto in = healthy_gpu_run();
  in.simd = SimdLevel::kScalar;
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "simd-forced-off");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(has_export(*a, "export STOKE_CPU_SIMD=auto"));

  in.system.cpu.simd = SimdLevel::kScalar;
  const auto without_simd = advise(in);
  EXPECT_EQ(find_rule(without_simd, "simd-forced-off"), nullptr);
  EXPECT_NE(find_rule(without_simd, "simd-unavailable"), nullptr);
}

TEST(Advisor, IntegratedGpuSelectedWhileDiscreteExists) {
  auto in = healthy_gpu_run();
  GpuInfo igpu;
  igpu.index = 1;
  igpu.name = "Intel UHD 770";
  igpu.integrated = true;
  in.system.cuda.gpus.push_back(igpu);
  in.device.gpus = {1};
  const auto advice = advise(in);
  ASSERT_FALSE(advice.empty());
  EXPECT_EQ(advice.front().rule, "integrated-gpu");
  EXPECT_TRUE(has_export(advice.front(), "export STOKE_GPU_DEVICE=0"));
}

TEST(Advisor, MistypedVariableGetsUnsetAndTheRightName) {
  auto in = healthy_gpu_run();
  ConfigLoadOptions options;
  options.environment =
      std::vector<std::pair<std::string, std::string>>{{"STOKE_GPU_MEM_PERCNT", "70"}};
  options.physical_cores = 8;
  in.config = Config::load(options);
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "unknown-variable");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(has_export(*a, "unset STOKE_GPU_MEM_PERCNT"));
  EXPECT_TRUE(has_export(*a, "export STOKE_GPU_MEM_PERCENT=70"));
}

TEST(Advisor, NativeBf16SuggestsAutoAndEmulatedBf16SuggestsLeavingIt) {
  auto in = healthy_gpu_run();
  in.bf16 = PrecisionSupport::kEmulated;  // fp32 set: nothing to say
  EXPECT_EQ(find_rule(advise(in), "bf16-inference"), nullptr);
  in.bf16 = PrecisionSupport::kNative;
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "bf16-inference");
  ASSERT_NE(a, nullptr) << format_advice(advice);
  EXPECT_TRUE(has_export(*a, "export STOKE_PRECISION=auto"));

  ConfigLoadOptions options;
  options.environment =
      std::vector<std::pair<std::string, std::string>>{{"STOKE_PRECISION", "bf16"}};
  options.physical_cores = 8;
  in.config = Config::load(options);
  EXPECT_EQ(find_rule(advise(in), "bf16-inference"), nullptr);  // already bf16
  in.bf16 = PrecisionSupport::kEmulated;
  const auto emulated = advise(in);
  const Advice* e = find_rule(emulated, "bf16-emulated");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(has_export(*e, "export STOKE_PRECISION=auto"));
}

// Native kernels measured slower than fp32 (an Intel Xeon with AVX512-BF16 and
// no AMX): no suggestion to switch, and bf16 set is advised back to auto.
TEST(Advisor, NativeBf16MeasuredSlowerIsNotSuggested) {
  auto in = healthy_gpu_run();
  in.bf16 = PrecisionSupport::kNative;
  in.bf16_time_ratio = 0.55;
  const auto faster = advise(in);
  const Advice* a = find_rule(faster, "bf16-inference");
  ASSERT_NE(a, nullptr) << format_advice(faster);
  EXPECT_NE(a->diagnosis.find("0.55x fp32's time"), std::string::npos) << a->diagnosis;
  in.bf16_time_ratio = 2.2;
  EXPECT_EQ(find_rule(advise(in), "bf16-inference"), nullptr);
  EXPECT_EQ(find_rule(advise(in), "bf16-slower"), nullptr);  // fp32 set: nothing to say

  ConfigLoadOptions options;
  options.environment =
      std::vector<std::pair<std::string, std::string>>{{"STOKE_PRECISION", "bf16"}};
  options.physical_cores = 8;
  in.config = Config::load(options);
  const auto slower = advise(in);
  const Advice* s = find_rule(slower, "bf16-slower");
  ASSERT_NE(s, nullptr) << format_advice(slower);
  EXPECT_NE(s->diagnosis.find("2.20x fp32's time"), std::string::npos) << s->diagnosis;
  EXPECT_TRUE(has_export(*s, "export STOKE_PRECISION=auto"));
}

TEST(Advisor, FrequentValidationAndLoggingAreInterruptions) {
  auto in = healthy_gpu_run();
  set_stage(in, Stage::kValidation, 12);
  set_stage(in, Stage::kLogging, 3);
  in.validation_every_epochs = 1;
  in.log_every_steps = 1;
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "interruptions");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->changes.size(), 2u);
  EXPECT_NE(a->changes[0].find("every 4 epochs"), std::string::npos);
  EXPECT_NE(a->changes[1].find("every 10 steps"), std::string::npos);
}

TEST(Advisor, ImagesDecodedFarAboveTheTrainingSize) {
  auto in = healthy_gpu_run();
  in.decoded_pixels_per_image = 2448.0 * 2048.0;
  in.training_pixels_per_image = 224.0 * 224.0;
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "oversized-decode");
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a->diagnosis.find("99.9x"), std::string::npos) << a->diagnosis;
  EXPECT_TRUE(has_export(*a, "export STOKE_CACHE=ram"));
  in.decoded_pixels_per_image = 256.0 * 256.0;
  EXPECT_EQ(find_rule(advise(in), "oversized-decode"), nullptr);
}

TEST(Advisor, AdviceIsOrderedBySeverity) {
  auto in = healthy_gpu_run();
  in.cpu_threads = 32;                    // 0.05
  set_stage(in, Stage::kDataWait, 40);    // 0.40
  set_stage(in, Stage::kValidation, 20);  // 0.20
  const auto advice = advise(in);
  ASSERT_GE(advice.size(), 3u);
  for (std::size_t i = 1; i < advice.size(); ++i) {
    EXPECT_GE(advice[i - 1].severity, advice[i].severity);
  }
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST(Advisor, DataParallelRunWaitingInCollectivesIsCommunicationBound) {
  AdvisorInput in = healthy_gpu_run();
  set_stage(in, Stage::kCommunicate, 10);
  EXPECT_EQ(find_rule(advise(in), "communication-bound"), nullptr) << "10 % is below the threshold";
  set_stage(in, Stage::kCommunicate, 35);
  const auto advice = advise(in);
  const Advice* a = find_rule(advice, "communication-bound");
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a->diagnosis.find("35%"), std::string::npos) << a->diagnosis;
  EXPECT_NE(a->changes.front().find("batch_size"), std::string::npos);
}

}  // namespace
}  // namespace stoke
