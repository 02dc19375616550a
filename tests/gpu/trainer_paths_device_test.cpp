// Trainer paths on the CUDA backend that no other GPU test runs (label gpu;
// skip with the reason without a device): gradient accumulation, the
// class-weighted loss, fine-tuning with frozen stages, copies on the compute
// stream (STOKE_GPU_STREAMS=off), uint8 upload under CUDA graphs,
// bit-repeatable deterministic steps, a GPU model's checkpoint round trip and
// exact resume, out-of-memory recovery and the automatic batch size against a
// real device's pool. The CPU trainer is the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "gpu/gpu_fixture.hpp"
#include "stoke/cuda.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/train.hpp"
#include "unit/trainer_runs.hpp"

namespace stoke::testing {
namespace {

// ~24 float32 steps of accumulated rounding (as TrainerOnGpu).
constexpr double kFitTolerance = 1e-3;

class GpuTrainerPaths : public TrainerRuns {
 protected:
  void SetUp() override {
    TrainerRuns::SetUp();
    const std::string why = gpu_unavailable_reason(query_system());
    if (!why.empty()) GTEST_SKIP() << why;
    gpu_ = make_gpu(Settings{});
  }
  // Strict FP32 and deterministic algorithms: CPU-comparable, bit-repeatable.
  static std::unique_ptr<GpuBackend> make_gpu(const Settings& settings) {
    CudaBackendOptions options;
    options.strict_fp32 = true;
    options.deterministic = true;
    return create_cuda_backend(0, settings, options);
  }
  // A fit with extra settings (name = value) beside depth 2 and graphs `graphs`.
  Run fit_with(Backend& backend, Toggle graphs, const std::map<std::string, std::string>& extra) {
    Config config;
    config.set("STOKE_PREFETCH_DEPTH", "2");
    config.set("STOKE_GPU_GRAPH", graphs == Toggle::kOn ? "on" : "off");
    for (const auto& [name, value] : extra) config.set(name, value);
    options_.settings = config.settings();
    auto m = nn::build_model(backend, spec_, 7);
    Trainer trainer(*m, options_, callbacks_);
    Run run{trainer.fit(data_, val_, loader_), m->parameters().to_vector()};
    return run;
  }
  void expect_like_cpu(const Run& gpu, const Run& cpu) {
    ASSERT_EQ(gpu.result.log.epochs.size(), cpu.result.log.epochs.size());
    for (std::size_t e = 0; e < cpu.result.log.epochs.size(); ++e) {
      EXPECT_NEAR(gpu.result.log.epochs[e].train_loss, cpu.result.log.epochs[e].train_loss,
                  kFitTolerance)
          << "epoch " << e + 1;
      EXPECT_EQ(gpu.result.log.epochs[e].images, cpu.result.log.epochs[e].images);
    }
    EXPECT_LT(max_difference(gpu.parameters, cpu.parameters), kFitTolerance);
  }
  static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }
  std::unique_ptr<GpuBackend> gpu_;
};

// Two device batches of 8 per optimizer step (eager on the GPU: the fit
// says why) follow the CPU trainer's accumulated steps.
TEST_F(GpuTrainerPaths, GradientAccumulationMatchesTheCpuReference) {
  options_.epochs = 2;
  options_.batch_size = 8;
  options_.batch_multiplier = 2;
  const Run cpu = fit(cpu_backend(), Toggle::kOff);
  const Run gpu = fit(*gpu_, Toggle::kOn);
  expect_like_cpu(gpu, cpu);
  EXPECT_EQ(gpu.result.batch_multiplier, 2);
  EXPECT_EQ(gpu.result.log.epochs.back().steps, static_cast<std::uint64_t>(kCount / 16));
}

// Per-class weights (the weighted cross-entropy on the device) follow the
// CPU's, and differ from the unweighted fit.
TEST_F(GpuTrainerPaths, ClassWeightedLossMatchesTheCpuReference) {
  options_.epochs = 2;
  const Run plain = fit(*gpu_, Toggle::kOff);
  options_.class_weights = {1.0f, 3.0f};
  const Run cpu = fit(cpu_backend(), Toggle::kOff);
  const Run gpu = fit(*gpu_, Toggle::kOff);
  expect_like_cpu(gpu, cpu);
  EXPECT_GT(max_difference(gpu.parameters, plain.parameters), 10 * kFitTolerance)
      << "the weights changed nothing: the test would not see them ignored";
}

// Frozen stem and first stage keep their weights and statistics bit for bit
// on the device; the rest trains like the CPU.
TEST_F(GpuTrainerPaths, FrozenStagesKeepTheirWeightsOnTheGpu) {
  spec_.widths = {6, 8};
  options_.epochs = 1;
  options_.freeze_stages = 1;
  const Run cpu = fit(cpu_backend(), Toggle::kOff);
  auto m = nn::build_model(*gpu_, spec_, 7);
  std::map<std::string, std::vector<float>> before;
  for (const auto& t : m->named_parameters()) before[t.name] = t.tensor.to_vector();
  for (const auto& t : m->named_buffers()) before[t.name] = t.tensor.to_vector();
  Trainer(*m, options_).fit(data_, nullptr, loader_);
  EXPECT_GT(m->frozen_layers(), 0);
  for (const auto& t : m->named_parameters()) {
    if (t.name.starts_with("conv1")) {
      EXPECT_EQ(t.tensor.to_vector(), before[t.name]) << t.name;
    }
  }
  for (const auto& t : m->named_buffers()) {
    if (t.name.starts_with("conv1")) {
      EXPECT_EQ(t.tensor.to_vector(), before[t.name]) << t.name;
    }
  }
  EXPECT_LT(max_difference(m->parameters().to_vector(), cpu.parameters), kFitTolerance);
}

// With STOKE_GPU_STREAMS=off the uploads run on the compute stream and graphs
// are refused (the fit says why); the result is the copy-stream fit's, bit
// for bit (the same kernels in the same order).
TEST_F(GpuTrainerPaths, StreamsOffTrainsLikeACopyStreamAndRunsEagerly) {
  options_.epochs = 2;
  const Run streams = fit_with(*gpu_, Toggle::kOff, {});
  const Run one_stream = fit_with(*gpu_, Toggle::kOn, {{"STOKE_GPU_STREAMS", "off"}});
  EXPECT_EQ(one_stream.result.graph_steps, 0);
  EXPECT_NE(one_stream.result.graph_note.find("STOKE_GPU_STREAMS"), std::string::npos)
      << one_stream.result.graph_note;
  EXPECT_TRUE(same_bits(one_stream.parameters, streams.parameters));
  EXPECT_EQ(one_stream.result.log.epochs.back().images, static_cast<std::uint64_t>(kCount));
}

// uint8 batches normalized on the device by the prefetcher, under CUDA graphs
// (each slot's graph copies the normalized slot in), equal eager uint8
// training.
TEST_F(GpuTrainerPaths, Uint8UploadUnderGraphsEqualsEagerExecution) {
  options_.epochs = 2;
  loader_.preprocess.dtype = OutputDtype::kUint8;
  const Run eager = fit(*gpu_, Toggle::kOff);
  const Run graphed = fit(*gpu_, Toggle::kOn);
  EXPECT_EQ(graphed.result.graph_steps, 2 * kSteps - 2) << graphed.result.graph_note;
  EXPECT_LT(max_difference(graphed.parameters, eager.parameters), 1e-5);
}

// CudaBackendOptions::deterministic promises bitwise-repeatable steps, TF32
// allowed (the user's default math): two fits on two backends agree bit for bit.
TEST_F(GpuTrainerPaths, DeterministicStepsAreBitRepeatable) {
  options_.epochs = 2;
  CudaBackendOptions options;
  options.deterministic = true;
  auto first = create_cuda_backend(0, Settings{}, options);
  auto second = create_cuda_backend(0, Settings{}, options);
  const Run a = fit(*first, Toggle::kOff);
  const Run b = fit(*second, Toggle::kOff);
  EXPECT_TRUE(same_bits(a.parameters, b.parameters));
  for (std::size_t e = 0; e < 2; ++e)
    EXPECT_EQ(a.result.log.epochs[e].train_loss, b.result.log.epochs[e].train_loss);
}

// A GPU model saved as a checkpoint loads onto the CPU and back onto the GPU
// with the same bits, and a run stopped after its first epoch and resumed from
// its stop checkpoint on the GPU ends where the straight GPU run ends.
TEST_F(GpuTrainerPaths, CheckpointRoundTripAndExactResume) {
  options_.epochs = 3;
  const Run straight = fit(*gpu_, Toggle::kOff);

  options_.stop_checkpoint = dir_ / "stop.ckpt";
  auto m = nn::build_model(*gpu_, spec_, 7);
  Callbacks stop_after_first;
  Trainer* self = nullptr;
  stop_after_first.on_epoch = [&](const EpochRecord& r) {
    if (r.epoch == 0) self->request_stop();
  };
  Trainer first(*m, options_, stop_after_first);
  self = &first;
  ASSERT_EQ(first.fit(data_, nullptr, loader_).reason, StopReason::kRequested);
  ASSERT_TRUE(fs::exists(options_.stop_checkpoint));

  const auto saved = m->parameters().to_vector();
  auto on_cpu = nn::load_model(options_.stop_checkpoint.string(), cpu_backend());
  auto on_gpu = nn::load_model(options_.stop_checkpoint.string(), *gpu_);
  EXPECT_TRUE(same_bits(on_cpu->parameters().to_vector(), saved));
  EXPECT_TRUE(same_bits(on_gpu->parameters().to_vector(), saved));

  options_.resume = options_.stop_checkpoint.string();
  options_.stop_checkpoint.clear();
  auto resumed_model = nn::build_model(*gpu_, spec_, 99);
  Trainer resumed(*resumed_model, options_);
  EXPECT_EQ(resumed.fit(data_, nullptr, loader_).reason, StopReason::kCompleted);
  EXPECT_TRUE(same_bits(resumed_model->parameters().to_vector(), straight.parameters))
      << "max difference "
      << max_difference(resumed_model->parameters().to_vector(), straight.parameters);
}

// The device pool's cap, not a plan, decides: a fit in batch-size-auto mode
// under a cap that batch 64 does not fit halves the batch on the device's
// OutOfMemory, keeps the effective batch and completes; the automatic batch
// of a capped backend fits its cap.
TEST_F(GpuTrainerPaths, OutOfMemoryHalvesTheBatchAndAutoBatchFitsTheDevicePool) {
  // 512 channels at 12 x 12: activations of 15 MiB at batch 8 and 117 MiB at
  // batch 64 (the plan), large beside the pool's reservation steps (chunks of
  // at least 32 MiB, in 2 MiB steps), so a cap between the peaks in use is
  // one the pool can keep. (With the fixture's 8 channels the peaks were 1 MiB
  // apart beside cuBLAS's 32 MiB workspace: no cap between them could hold
  // both the workspace and a chunk, as seen on an H200.)
  spec_.widths = {512};
  auto peak_at = [&](int batch) {
    auto be = make_gpu(Settings{});
    auto m = nn::build_model(*be, spec_, 7);
    TrainerOptions o = options_;
    o.batch_size = batch;
    o.max_steps_per_epoch = 2;
    Trainer(*m, o).fit(data_, nullptr, loader_);
    return be->pool_stats().peak_in_use;
  };
  // The cap sits halfway between the peaks of batch 8 and batch 64.
  const std::uint64_t p8 = peak_at(8), p64 = peak_at(64);
  ASSERT_GT(p64, p8 + (64ull << 20)) << "the activations do not dwarf the pool's steps";
  const std::uint64_t cap = p8 + (p64 - p8) / 2;
  Settings capped;
  capped.gpu_mem_max = cap;
  auto be = make_gpu(capped);
  auto m = nn::build_model(*be, spec_, 7);
  TrainerOptions o = options_;
  o.batch_size = 0;           // auto
  o.max_memory = 1ull << 40;  // the plan says "anything fits": the device decides
  o.epochs = 1;
  const FitResult result = Trainer(*m, o).fit(data_, nullptr, loader_);
  EXPECT_EQ(result.reason, StopReason::kCompleted) << result.message;
  EXPECT_GT(result.out_of_memory_retries, 0);
  EXPECT_EQ(result.batch_size * result.batch_multiplier,
            result.batch_size << result.out_of_memory_retries);
  ASSERT_EQ(result.log.epochs.size(), 1u);
  EXPECT_TRUE(std::isfinite(result.log.epochs.back().train_loss));
  EXPECT_EQ(result.log.epochs.back().images, static_cast<std::uint64_t>(kCount));
  EXPECT_LE(be->pool_stats().peak_in_use, cap);

  // max_memory 0: the backend's cap bounds the plan; the first batch fits.
  auto auto_be = make_gpu(capped);
  auto auto_m = nn::build_model(*auto_be, spec_, 7);
  o.max_memory = 0;
  const FitResult planned = Trainer(*auto_m, o).fit(data_, nullptr, loader_);
  EXPECT_EQ(planned.reason, StopReason::kCompleted) << planned.message;
  EXPECT_GT(planned.batch_size, 0);
  EXPECT_LE(auto_be->pool_stats().peak_in_use, cap);
}

}  // namespace
}  // namespace stoke::testing
