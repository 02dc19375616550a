// Whole training steps on the CUDA backend: equal to the CPU backend (strict
// FP32), CUDA-graph replay equal to eager execution, JIT kernels equal to the
// precompiled ones, benchmarked algorithm choice, and the registry entry.
#include <bit>
#include <map>

#include "gpu/cuda_parity.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/prefetch.hpp"

namespace stoke::testing {
namespace {

// Replays run the very kernels eager execution runs, and the test's backend
// takes deterministic cuDNN algorithms only (ALGO_0 backward passes
// accumulate with atomics and reorder sums between runs): any difference
// above rounding noise is a replay bug.
constexpr Tolerance kReplay{1e-5,
                            "same kernels, deterministic cuDNN algorithms: only rounding noise"};

nn::ModelSpec small_resnet() {
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kResNet;
  spec.in_channels = 3;
  spec.height = 16;
  spec.width = 16;
  spec.classes = 10;
  spec.stem_width = 8;
  spec.widths = {8, 16};
  spec.strides = {1, 2};
  spec.blocks_per_stage = 1;
  return spec;
}

TEST_F(CudaParity, TrainingStepsMatchTheCpu) {
  const nn::ModelSpec spec = small_resnet();
  auto cpu_model = nn::build_model(cpu(), spec, 7);
  auto gpu_model = nn::build_model(gpu(), spec, 7);
  copy_model(*cpu_model, *gpu_model);
  nn::Sgd cpu_opt(*cpu_model), gpu_opt(*gpu_model);
  nn::TrainStep cpu_step(*cpu_model, cpu_opt), gpu_step(*gpu_model, gpu_opt);
  for (int s = 0; s < 3; ++s) {
    const Tensor x = random(cpu_model->input_shape(8), 60 + s),
                 lab = labels(8, spec.classes, 70 + s);
    cpu_step.run(x, lab, 0.05f);
    gpu_step.run(to_gpu(x), to_gpu(lab), 0.05f);
    const nn::StepStats a = cpu_step.stats(), b = gpu_step.stats();
    EXPECT_NEAR(b.loss, a.loss, kTrainStep.max_error * std::max(1.0f, a.loss))
        << "step " << s << ": " << kTrainStep.reason;
    EXPECT_EQ(b.accuracy, a.accuracy) << "step " << s;
  }
  EXPECT_TRUE(close(gpu_model->parameters(), cpu_model->parameters(), kTrainStep,
                    "parameters after 3 steps"));
  const auto cb = cpu_model->named_buffers();
  const auto gb = gpu_model->named_buffers();
  for (std::size_t i = 0; i < cb.size(); ++i) {
    EXPECT_TRUE(close(gb[i].tensor, cb[i].tensor, kTrainStep, cb[i].name));
  }
}

// The step reads its batch from a fixed device slot (as the prefetcher's
// slots are), copied into a static input inside the step, so a replay picks
// up each new batch without re-capture; the learning rate changes every step
// (cosine schedule) and Adam's step count advances, both through the
// optimizer's device-side values, so one capture serves every step.
TEST_F(CudaParity, GraphReplayEqualsEagerExecution) {
  CudaBackendOptions deterministic;
  deterministic.strict_fp32 = true;
  deterministic.deterministic = true;
  gpu_ = create_cuda_backend(0, Settings{}, deterministic);
  const nn::ModelSpec spec = small_resnet();
  auto eager_model = nn::build_model(gpu(), spec, 9);
  auto graph_model = nn::build_model(gpu(), spec, 9);
  nn::Adam eager_opt(*eager_model), graph_opt(*graph_model);
  nn::TrainStep eager_step(*eager_model, eager_opt), graph_step(*graph_model, graph_opt);
  nn::LrSchedule schedule;
  schedule.kind = nn::ScheduleKind::kCosine;
  schedule.base_lr = 0.01f;
  schedule.warmup_steps = 2;
  schedule.total_steps = 6;
  const Shape xs = eager_model->input_shape(8);
  Tensor slot_x(gpu(), xs), slot_y(gpu(), {8}, DType::kInt32);
  Tensor static_x(gpu(), xs), static_y(gpu(), {8}, DType::kInt32);
  GraphedStep graphed(gpu(), Toggle::kOn);
  for (int s = 0; s < 6; ++s) {
    const Tensor x = random(xs, 80 + s), lab = labels(8, spec.classes, 90 + s);
    const float lr = schedule.lr(s);
    eager_step.run(to_gpu(x), to_gpu(lab), lr);
    slot_x.copy_from_host(x.raw());
    slot_y.copy_from_host(lab.raw());
    graph_step.prepare(lr);
    graphed.run([&] {
      gpu().copy(static_x.raw(), slot_x.raw(), static_x.bytes(), CopyKind::kDeviceToDevice);
      gpu().copy(static_y.raw(), slot_y.raw(), static_y.bytes(), CopyKind::kDeviceToDevice);
      graph_step.issue(static_x, static_y);
    });
    const nn::StepStats a = eager_step.stats(), b = graph_step.stats();
    EXPECT_NEAR(b.loss, a.loss, 1e-5f) << "step " << s;
    if (s >= 1) {
      ASSERT_TRUE(graphed.replaying()) << "capture failed: " << graphed.eager_reason();
    }
  }
  EXPECT_EQ(graphed.captures(), 1)
      << "the rate and Adam's step reach the replays through device memory";
  EXPECT_EQ(graph_opt.steps(), eager_opt.steps());
  EXPECT_TRUE(close(graph_model->parameters(), eager_model->parameters(), kReplay,
                    "parameters after 6 steps"));
}

// Host values passed to ops directly are frozen at capture: a new key
// re-captures.
TEST_F(CudaParity, GraphReplayRecapturesOnANewKey) {
  Tensor x(gpu(), {1000});
  gpu().fill(x, 0.0f);
  GraphedStep graphed(gpu(), Toggle::kOn);
  float value = 1.0f;
  for (int i = 0; i < 5; ++i) {
    if (i == 3) value = 2.0f;
    graphed.run([&] { gpu().fill(x, value); }, std::bit_cast<std::uint32_t>(value));
    EXPECT_EQ(x.to_vector()[999], value) << "call " << i;
  }
  EXPECT_EQ(graphed.captures(), 2) << "one capture at call 2, one for the new value";
}

// The prefetcher's device slots have fixed addresses: one graph per slot,
// each copying its slot into the static input, replays every new batch the
// ring uploads there, in stream order with the uploads.
TEST_F(CudaParity, OneGraphPerPrefetchSlotMatchesEagerExecution) {
  CudaBackendOptions deterministic;  // kReplay's 1e-5 assumes it
  deterministic.strict_fp32 = true;
  deterministic.deterministic = true;
  gpu_ = create_cuda_backend(0, Settings{}, deterministic);
  const nn::ModelSpec spec = small_resnet();
  auto eager_model = nn::build_model(gpu(), spec, 11);
  auto graph_model = nn::build_model(gpu(), spec, 11);
  nn::Sgd eager_opt(*eager_model), graph_opt(*graph_model);
  nn::TrainStep eager_step(*eager_model, eager_opt), graph_step(*graph_model, graph_opt);
  const std::int64_t n = 8;
  const Shape xs = eager_model->input_shape(n);
  const std::size_t sample_floats = static_cast<std::size_t>(shape_numel(xs) / n);

  PrefetchOptions po;
  po.sample_bytes = sample_floats * sizeof(float);
  po.batch_size = static_cast<std::size_t>(n);
  po.batches_per_epoch = 7;
  po.depth = 2;
  po.device = 0;
  po.compute_stream = gpu().compute_stream();
  Prefetcher prefetcher(po, [&](std::uint64_t, std::uint64_t index, std::span<std::byte> images,
                                std::span<std::int32_t> labels) {
    std::mt19937 rng(static_cast<std::uint32_t>(1000 + index));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    auto* f = reinterpret_cast<float*>(images.data());
    for (std::size_t i = 0; i < sample_floats * static_cast<std::size_t>(n); ++i) f[i] = dist(rng);
    for (std::int64_t i = 0; i < n; ++i)
      labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(rng() % 10);
    return static_cast<std::size_t>(n);
  });

  Tensor static_x(gpu(), xs), static_y(gpu(), {n}, DType::kInt32);
  Tensor eager_x(gpu(), xs), eager_y(gpu(), {n}, DType::kInt32);
  std::map<int, std::unique_ptr<GraphedStep>> per_slot;
  int batches = 0;
  while (auto batch = prefetcher.next()) {
    ++batches;
    // Eager: the same batch from the host staging copy.
    eager_x.copy_from_host(batch->images().data());
    eager_y.copy_from_host(batch->labels().data());
    eager_step.run(eager_x, eager_y, 0.05f);
    auto& graphed = per_slot[batch->slot()];
    if (!graphed) graphed = std::make_unique<GraphedStep>(gpu(), Toggle::kOn);
    void* slot_images = batch->device_images();
    std::int32_t* slot_labels = batch->device_labels();
    graph_step.prepare(0.05f);
    graphed->run([&] {
      gpu().copy(static_x.raw(), slot_images, static_x.bytes(), CopyKind::kDeviceToDevice);
      gpu().copy(static_y.raw(), slot_labels, static_y.bytes(), CopyKind::kDeviceToDevice);
      graph_step.issue(static_x, static_y);
    });
    const nn::StepStats a = eager_step.stats(), b = graph_step.stats();
    EXPECT_NEAR(b.loss, a.loss, 1e-5f) << "batch " << batches << " slot " << batch->slot();
    batch->release();
  }
  EXPECT_EQ(batches, 7);
  ASSERT_EQ(per_slot.size(), 2u);
  for (auto& [slot, graphed] : per_slot) {
    EXPECT_TRUE(graphed->replaying()) << "slot " << slot << ": " << graphed->eager_reason();
    EXPECT_EQ(graphed->captures(), 1) << "slot " << slot << " captured once, replayed after";
  }
  EXPECT_TRUE(close(graph_model->parameters(), eager_model->parameters(), kReplay,
                    "parameters after 7 prefetched batches"));
}

// Busy intervals are timed by events without blocking; waiting harvests them
// all, and their sum matches the event timing of the same work.
TEST_F(CudaParity, BusyIntervalsMatchEventTiming) {
  Tensor x(gpu(), {1 << 24}), y(gpu(), {1 << 24});
  gpu().fill(x, 1.0f);
  gpu().synchronize();
  EXPECT_EQ(gpu().take_busy_seconds(true), 0.0) << "nothing recorded yet";
  const auto work = [&] {
    for (int i = 0; i < 20; ++i) gpu().add(x, x, y);
  };
  const double timed_ms = gpu().time_ms(work, 1);
  gpu().begin_busy();
  gpu().begin_busy();  // nested: ignored
  work();
  gpu().end_busy();
  gpu().end_busy();  // nothing open: ignored
  const double busy_ms = 1e3 * gpu().take_busy_seconds(true);
  EXPECT_GT(busy_ms, 0.0);
  EXPECT_NEAR(busy_ms, timed_ms, 0.5 * timed_ms) << "same work, same events";
  EXPECT_EQ(gpu().take_busy_seconds(false), 0.0) << "each interval is handed out once";
}

// A step that synchronizes cannot be captured: the capture fails, nothing of
// the failed capture runs, and the step runs eagerly from then on.
TEST_F(CudaParity, CaptureFailureFallsBackToEagerExecution) {
  Tensor x(gpu(), {1000}), one(gpu(), {1000});
  gpu().fill(x, 0.0f);
  gpu().fill(one, 1.0f);
  GraphedStep graphed(gpu(), Toggle::kOn);
  for (int i = 0; i < 3; ++i) {
    graphed.run([&] {
      gpu().add(x, one, x);
      gpu().synchronize();
    });
  }
  EXPECT_FALSE(graphed.replaying());
  EXPECT_NE(graphed.eager_reason().find("captured"), std::string::npos) << graphed.eager_reason();
  const std::vector<float> v = x.to_vector();
  EXPECT_EQ(v.front(), 3.0f) << "three eager adds; the failed capture must not have run";
  EXPECT_EQ(v.back(), 3.0f);
  // The stream still works after the failed capture.
  gpu().add(x, one, x);
  EXPECT_EQ(x.to_vector()[0], 4.0f);
}

TEST_F(CudaParity, JitKernelsEqualPrecompiledKernels) {
  CudaBackendOptions jit_opt, pre_opt;
  jit_opt.strict_fp32 = pre_opt.strict_fp32 = true;
  jit_opt.jit = Toggle::kOn;
  pre_opt.jit = Toggle::kOff;
  auto jit = create_cuda_backend(0, Settings{}, jit_opt);
  auto pre = create_cuda_backend(0, Settings{}, pre_opt);
  EXPECT_EQ(jit->kernel_origin().rfind("jit sm_", 0), 0u) << jit->kernel_origin();
  EXPECT_EQ(pre->kernel_origin(), "precompiled");

  const Shape s{4, 6, 15, 13};
  const Tensor x = random(s, 1), dy = random({4, 6, 8, 7}, 2), logits = random({16, 10}, 3),
               lab = labels(16, 10, 4);
  const Pool2dParams p{3, 3, 2, 2, 1, 1};
  auto run = [&](GpuBackend& be) {
    std::vector<std::vector<float>> out;
    const Tensor gx = to_gpu(be, x), gdy = to_gpu(be, dy);
    Tensor y(be, {4, 6, 8, 7}), dx(be, s), mask(be, s), r(be, s);
    be.max_pool2d_forward(gx, y, p);
    out.push_back(y.to_vector());
    be.max_pool2d_backward(gx, y, gdy, dx, p);
    out.push_back(dx.to_vector());
    be.avg_pool2d_backward(gdy, dx, p);
    out.push_back(dx.to_vector());
    be.dropout_forward(gx, r, mask, 0.3f, 99);
    out.push_back(r.to_vector());
    be.relu_forward(gx, r);
    out.push_back(r.to_vector());
    Tensor probs(be, {16, 10}), loss(be, {1}), correct(be, {1}), dl(be, {16, 10});
    const Tensor glab = to_gpu(be, lab);
    be.softmax_cross_entropy_forward(to_gpu(be, logits), glab, probs, loss, correct);
    be.softmax_cross_entropy_backward(probs, glab, dl);
    out.push_back(loss.to_vector());
    out.push_back(dl.to_vector());
    Tensor w = to_gpu(be, x), v(be, s);
    be.fill(v, 0.0f);
    be.sgd_update(w, gx, v, SgdParams{});
    out.push_back(w.to_vector());
    return out;
  };
  const auto a = run(*jit), b = run(*pre);
  ASSERT_EQ(a.size(), b.size());
  // Same source, but NVRTC and nvcc need not emit the same machine code
  // (contraction into FMAs, instruction order): equal within a few ulp of
  // the output's scale, not bitwise.
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << "output " << i;
    for (std::size_t k = 0; k < a[i].size(); ++k) {
      const double scale = std::max(1.0, static_cast<double>(std::fabs(b[i][k])));
      const Tolerance elementwise = tolerance(Accuracy::kElementwise);
      ASSERT_LE(std::fabs(static_cast<double>(a[i][k]) - b[i][k]), elementwise.max_error * scale)
          << "output " << i << " element " << k << ": jit " << a[i][k] << ", precompiled "
          << b[i][k] << " (" << elementwise.reason << ")";
    }
  }
}

TEST_F(CudaParity, BenchmarkedConvolutionChoicesAreCachedAndCorrect) {
  gpu().set_conv_benchmark(true);
  const Tensor x = random({8, 16, 20, 20}, 5), w = random({32, 16, 3, 3}, 6);
  const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  Tensor y(cpu(), {8, 32, 20, 20});
  cpu().conv2d_forward(x, w, Tensor(), y, p);
  const Tensor gx = to_gpu(x), gw = to_gpu(w);
  Tensor gy(gpu(), y.shape());
  gpu().conv2d_forward(gx, gw, Tensor(), gy, p);
  gpu().conv2d_forward(gx, gw, Tensor(), gy, p);
  EXPECT_TRUE(close(gy, y, kConv, "benchmarked conv2d_forward"));
  const auto algos = gpu().conv_algorithms();
  ASSERT_EQ(algos.size(), 1u) << "the second call must reuse the cached choice";
  EXPECT_TRUE(algos[0].benchmarked);
  EXPECT_GE(algos[0].time_ms, 0.0f);
  std::printf("benchmarked forward %s: %s, workspace %zu bytes, %.3f ms\n", algos[0].key.c_str(),
              algos[0].algorithm_name.c_str(), algos[0].workspace_bytes,
              static_cast<double>(algos[0].time_ms));

  // Saved and loaded into another backend: reused there without timing.
  CudaBackendOptions options;
  options.strict_fp32 = true;
  options.conv_benchmark = true;
  auto other = create_cuda_backend(0, Settings{}, options);
  EXPECT_EQ(other->load_conv_algorithms(gpu().save_conv_algorithms()), 1u);
  Tensor oy(*other, y.shape());
  other->conv2d_forward(to_gpu(*other, x), to_gpu(*other, w), Tensor(), oy, p);
  EXPECT_TRUE(close(oy, y, kConv, "conv2d_forward with a loaded choice"));
  const auto loaded = other->conv_algorithms();
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].algorithm, algos[0].algorithm);
  EXPECT_EQ(loaded[0].time_ms, algos[0].time_ms) << "the loaded choice, not a new timing";
}

TEST_F(CudaParity, Tf32DefaultStaysCloseToStrictFp32) {
  auto fast = create_cuda_backend(0, Settings{});
  EXPECT_FALSE(fast->strict_fp32());
  const Tensor x = random({8, 64, 16, 16}, 7), w = random({64, 64, 3, 3}, 8);
  const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  Tensor y(cpu(), {8, 64, 16, 16});
  cpu().conv2d_forward(x, w, Tensor(), y, p);
  Tensor fy(*fast, y.shape());
  fast->conv2d_forward(to_gpu(*fast, x), to_gpu(*fast, w), Tensor(), fy, p);
  // TF32 keeps 10 mantissa bits of each product: ~1e-3 relative.
  EXPECT_TRUE(
      close(fy, y, Tolerance{5e-3, "TF32 products (10-bit mantissa)"}, "tf32 conv2d_forward"));
}

TEST_F(CudaParity, RegistryOffersTheDeviceAsCuda0) {
  Backend* be = find_backend("cuda:0");
  ASSERT_NE(be, nullptr) << "registry has: " << backend_names().size() << " backends";
  EXPECT_FALSE(be->is_host());
  ASSERT_NE(as_gpu_backend(*be), nullptr);
  EXPECT_NE(as_gpu_backend(*be)->compute_stream(), nullptr)
      << "a non-blocking stream, not the legacy one";
  EXPECT_EQ(&default_backend(), be);
  EXPECT_EQ(as_gpu_backend(cpu_backend()), nullptr);
}

}  // namespace
}  // namespace stoke::testing
