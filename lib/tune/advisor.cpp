// The advisor's rules. Each rule reads the measurements, and when it fires,
// says what it saw (with the numbers) and the exact settings to change.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "stoke/tune.hpp"

namespace stoke {
namespace {

// Thresholds, as shares of wall time unless said otherwise.
constexpr double kInputBoundWait = 0.15;  // waiting for data
constexpr double kTransferBound = 0.15;   // host-to-device copies
constexpr double kLowDeviceBusy = 0.60;   // device busy below this is under-fed
constexpr double kPoolHeadroom = 0.50;    // peak in use below this share of the cap
constexpr double kHoardingFactor = 2.0;   // reserved above this multiple of peak
constexpr std::uint64_t kHoardingMinimum = 256ull << 20;
constexpr double kInterruptions = 0.10;       // validation + logging
constexpr double kOversizedDecode = 4.0;      // decoded pixels per training pixel
constexpr double kCommunicationBound = 0.20;  // data-parallel collectives
constexpr double kClassImbalance = 5.0;       // most common class per sample of the rarest

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * share);
  return buf;
}

std::string fixed(double v, int digits = 1) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string mib(std::uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

// The thread count a pipeline should have on this machine and device.
int recommended_threads(const AdvisorInput& in) {
  const int cores = std::max(1, in.system.cpu.physical_cores);
  return in.device.use_gpu ? std::max(1, cores - 1) : cores;
}

const GpuInfo* find_gpu(const AdvisorInput& in, int index) {
  for (const auto& g : in.system.cuda.gpus) {
    if (g.index == index) return &g;
  }
  return nullptr;
}

void input_bound(const AdvisorInput& in, std::vector<Advice>& out) {
  const auto& p = in.profile;
  const double wait = p.share(Stage::kDataWait);
  if (wait < kInputBoundWait) return;
  Advice a;
  a.rule = "input-bound";
  double pipeline_seconds = 0;
  for (int i = 0; i < kStageCount; ++i) {
    if (is_pipeline_stage(static_cast<Stage>(i))) pipeline_seconds += p.stages[i].seconds;
  }
  a.diagnosis = "the step waited for data " + percent(wait) + " of the wall time: preprocessing (" +
                fixed(pipeline_seconds, 2) + " s of CPU work on " + std::to_string(in.cpu_threads) +
                " threads, CPU utilization " + percent(p.cpu_utilization()) +
                ") is slower than compute";
  const int threads = recommended_threads(in);
  if (in.cpu_threads < threads)
    a.exports.push_back("export STOKE_CPU_THREADS=" + std::to_string(threads));
  const auto& s = in.config.settings();
  if (s.cache.kind == CacheSpec::Kind::kOff) a.exports.push_back("export STOKE_CACHE=ram");
  if (s.prefetch_depth < 3) a.exports.push_back("export STOKE_PREFETCH_DEPTH=3");
  if (in.simd == SimdLevel::kScalar && in.system.cpu.simd != SimdLevel::kScalar) {
    a.exports.push_back("export STOKE_CPU_SIMD=auto");
  }
  a.changes.push_back("a smaller input size, if the task allows it");
  a.severity = wait;
  out.push_back(std::move(a));
}

void small_batch(const AdvisorInput& in, std::vector<Advice>& out) {
  const auto& p = in.profile;
  if (!in.device.use_gpu || in.batch_size <= 0 || p.steps == 0) return;
  const double busy = p.device_busy_share();
  if (busy >= kLowDeviceBusy || p.share(Stage::kDataWait) >= kInputBoundWait) return;
  const auto& m = p.memory;
  const bool pool_headroom = m.pool_cap > 0 && m.pool_peak < kPoolHeadroom * m.pool_cap;
  const bool plan_headroom = in.max_batch_size >= 2 * in.batch_size;
  if (!pool_headroom && !plan_headroom) return;
  Advice a;
  a.rule = "batch-too-small";
  a.diagnosis = "the device is busy only " + percent(busy) + " of the time at batch size " +
                std::to_string(in.batch_size) + ", with memory to spare (peak " + mib(m.pool_peak) +
                " of a " + mib(m.pool_cap) + " cap): each launch does too little work";
  const int target = plan_headroom ? in.max_batch_size : in.batch_size * 2;
  a.changes.push_back("batch size " + std::to_string(target) +
                      " (or batch size auto, which picks the largest that fits)");
  a.severity = 1.0 - busy;
  out.push_back(std::move(a));
}

void pool_hoarding(const AdvisorInput& in, std::vector<Advice>& out) {
  const auto& m = in.profile.memory;
  if (m.pool_reserved == 0 || m.pool_reserved < kHoardingMinimum + m.pool_peak ||
      m.pool_reserved < kHoardingFactor * m.pool_peak) {
    return;
  }
  Advice a;
  a.rule = "pool-hoarding";
  a.diagnosis = "the device pool reserves " + mib(m.pool_reserved) + " but at most " +
                mib(m.pool_peak) + " was ever in use: reserved is not used";
  if (m.device_total > 0) {
    const double needed = 100.0 * 1.5 * static_cast<double>(m.pool_peak) / m.device_total;
    const int percent_cap = std::clamp(static_cast<int>(std::ceil(needed)), 5, 100);
    a.exports.push_back("export STOKE_GPU_MEM_PERCENT=" + std::to_string(percent_cap));
  }
  a.changes.push_back("or spend the headroom on a larger batch");
  a.severity = 0.05;
  out.push_back(std::move(a));
}

void transfer_bound(const AdvisorInput& in, std::vector<Advice>& out) {
  if (!in.device.use_gpu) return;
  const auto& p = in.profile;
  const auto& s = in.config.settings();
  const double copy = p.share(Stage::kHostToDevice);
  const bool pageable = !s.host_pinned || p.memory.pinned_fallback;
  if (copy < kTransferBound && !pageable && s.gpu_streams) return;
  Advice a;
  a.rule = "transfer-bound";
  a.diagnosis = "host-to-device copies take " + percent(copy) + " of the wall time";
  if (pageable) {
    a.diagnosis += s.host_pinned ? ", and staging fell back to pageable memory (over "
                                   "STOKE_HOST_PINNED_MAX or refused)"
                                 : ", through pageable memory (STOKE_HOST_PINNED=off)";
    if (!s.host_pinned) a.exports.push_back("export STOKE_HOST_PINNED=on");
    if (p.memory.pinned_fallback) {
      a.exports.push_back(
          "export STOKE_HOST_PINNED_MAX=" +
          std::to_string(std::max<std::uint64_t>(2 * (s.host_pinned_max >> 20), 1024)) + "M");
    }
  }
  if (!s.gpu_streams) {
    a.diagnosis += "; copies are serialized with compute (STOKE_GPU_STREAMS=off)";
    a.exports.push_back("export STOKE_GPU_STREAMS=on");
  }
  a.changes.push_back("upload uint8 images and normalize on the device (4x fewer bytes)");
  a.severity = std::max(copy, pageable ? 0.1 : 0.0);
  out.push_back(std::move(a));
}

void threads_rule(const AdvisorInput& in, std::vector<Advice>& out) {
  const int cores = std::max(1, in.system.cpu.physical_cores);
  const int recommended = recommended_threads(in);
  if (in.cpu_threads > cores) {
    Advice a;
    a.rule = "too-many-threads";
    a.diagnosis = std::to_string(in.cpu_threads) + " threads on " + std::to_string(cores) +
                  " physical cores: switching costs more than the extra threads bring";
    a.exports.push_back("export STOKE_CPU_THREADS=" + std::to_string(recommended));
    a.severity = 0.05;
    out.push_back(std::move(a));
  } else if (in.cpu_threads > 0 && in.cpu_threads < recommended) {
    // With a GPU the arena only preprocesses: too few threads shows as waiting
    // for data. On the CPU backend it also computes: it shows as idle cores.
    const double wait = in.profile.share(Stage::kDataWait);
    const double cpu = in.profile.cpu_utilization();
    const bool starving = wait >= 0.05;
    const bool idle_cores = !in.device.use_gpu && in.profile.wall_seconds > 0 && cpu < 0.75;
    if (!starving && !idle_cores) return;
    Advice a;
    a.rule = "too-few-threads";
    a.diagnosis = "the library arena has " + std::to_string(in.cpu_threads) + " thread" +
                  (in.cpu_threads == 1 ? "" : "s") + " on " + std::to_string(cores) +
                  " physical cores: " +
                  (starving ? "the step waits for data " + percent(wait) + " of the time"
                            : "the process uses " + percent(cpu) + " of the CPU");
    a.exports.push_back("export STOKE_CPU_THREADS=" + std::to_string(recommended));
    a.severity = starving ? wait : 1.0 - cpu;
    out.push_back(std::move(a));
  }
}

void simd_off(const AdvisorInput& in, std::vector<Advice>& out) {
  const auto cpu_level = in.system.cpu.simd;
  if (in.simd < cpu_level) {
    Advice a;
    a.rule = "simd-forced-off";
    a.diagnosis = std::string("pixel kernels run at ") + to_string(in.simd) +
                  " while the CPU has " + to_string(cpu_level);
    a.exports.push_back("export STOKE_CPU_SIMD=auto");
    a.severity = 0.1;
    out.push_back(std::move(a));
  } else if (cpu_level == SimdLevel::kScalar) {
    Advice a;
    a.rule = "simd-unavailable";
    a.diagnosis =
        "the CPU reports no SSE4/AVX2/AVX-512: pixel kernels run scalar (a virtual "
        "machine hiding CPU flags?)";
    a.changes.push_back("expose the host CPU's instruction sets to the VM (e.g. CPU model host)");
    a.severity = 0.1;
    out.push_back(std::move(a));
  }
}

// Inference in bf16 where the CPU has the instructions for it and they are
// measured faster (docs/precision.md), and back to fp32 where bf16 is
// emulated or measured slower.
void precision_rule(const AdvisorInput& in, std::vector<Advice>& out) {
  const Precision p = in.config.settings().precision;
  const double ratio = in.bf16_time_ratio;
  const bool measured_slower = ratio > kAutoTimeRatio;
  Advice a;
  if (in.bf16 == PrecisionSupport::kNative && p == Precision::kFp32 && !measured_slower) {
    a.rule = "bf16-inference";
    a.diagnosis = "the backend runs bf16 convolutions natively (AVX512-BF16 or AMX)" +
                  (ratio > 0 ? " in " + fixed(ratio, 2) + "x fp32's time" : std::string()) +
                  " while inference (predict, eval, the Predictor) computes in fp32";
    a.exports.push_back("export STOKE_PRECISION=auto");
    a.changes.push_back(
        "compare stoke eval --precision bf16 with fp32 on the validation folder first");
  } else if (in.bf16 == PrecisionSupport::kEmulated && p == Precision::kBf16) {
    a.rule = "bf16-emulated";
    a.diagnosis = "STOKE_PRECISION=bf16 on a backend that emulates bf16: slower than fp32";
    a.exports.push_back("export STOKE_PRECISION=auto");
  } else if (in.bf16 == PrecisionSupport::kNative && p == Precision::kBf16 && measured_slower) {
    a.rule = "bf16-slower";
    a.diagnosis = "STOKE_PRECISION=bf16 where the backend's bf16 convolutions take " +
                  fixed(ratio, 2) + "x fp32's time (native kernels, yet slower here)";
    a.exports.push_back("export STOKE_PRECISION=auto");
  } else {
    return;
  }
  a.severity = 0.05;
  out.push_back(std::move(a));
}

void integrated_gpu(const AdvisorInput& in, std::vector<Advice>& out) {
  if (!in.device.use_gpu || in.device.gpus.empty()) return;
  const GpuInfo* chosen = find_gpu(in, in.device.gpus.front());
  if (!chosen || !chosen->integrated) return;
  const GpuInfo* discrete = nullptr;
  for (const auto& g : in.system.cuda.gpus) {
    if (!g.integrated && (!discrete || g.total_memory > discrete->total_memory)) discrete = &g;
  }
  if (!discrete) return;
  Advice a;
  a.rule = "integrated-gpu";
  a.diagnosis = "training runs on the integrated GPU " + std::to_string(chosen->index) + " (" +
                chosen->name + ") while the discrete GPU " + std::to_string(discrete->index) +
                " (" + discrete->name + ") is idle";
  a.exports.push_back("export STOKE_GPU_DEVICE=" + std::to_string(discrete->index));
  a.severity = 1.0;
  out.push_back(std::move(a));
}

void unknown_variables(const AdvisorInput& in, std::vector<Advice>& out) {
  for (const auto& u : in.config.unknown_variables()) {
    Advice a;
    a.rule = "unknown-variable";
    a.diagnosis = u.name + "=" + u.value + " is not a stoke setting and has no effect";
    a.exports.push_back("unset " + u.name);
    if (!u.suggestion.empty()) {
      a.diagnosis += " (did you mean " + u.suggestion + "?)";
      a.exports.push_back("export " + u.suggestion + "=" + u.value);
    }
    a.severity = 0.2;
    out.push_back(std::move(a));
  }
}

void interruptions(const AdvisorInput& in, std::vector<Advice>& out) {
  const auto& p = in.profile;
  const double share = p.share(Stage::kValidation) + p.share(Stage::kLogging);
  if (share < kInterruptions) return;
  Advice a;
  a.rule = "interruptions";
  a.diagnosis = "validation and logging take " + percent(share) + " of the wall time (validation " +
                percent(p.share(Stage::kValidation)) + ", logging " +
                percent(p.share(Stage::kLogging)) + ")";
  if (p.share(Stage::kValidation) > 0) {
    a.changes.push_back("validate every " +
                        std::to_string(std::max(1, in.validation_every_epochs) * 4) +
                        " epochs, or on a subset of the validation set");
  }
  if (p.share(Stage::kLogging) > 0) {
    a.changes.push_back("log every " + std::to_string(std::max(1, in.log_every_steps) * 10) +
                        " steps");
  }
  a.severity = share;
  out.push_back(std::move(a));
}

void oversized_decode(const AdvisorInput& in, std::vector<Advice>& out) {
  if (in.training_pixels_per_image <= 0 || in.decoded_pixels_per_image <= 0) return;
  const double ratio = in.decoded_pixels_per_image / in.training_pixels_per_image;
  if (ratio < kOversizedDecode) return;
  Advice a;
  a.rule = "oversized-decode";
  a.diagnosis = "each image is decoded at " + fixed(ratio) +
                "x the pixels the network trains on; decode and resize dominate preprocessing";
  if (in.config.settings().cache.kind == CacheSpec::Kind::kOff) {
    a.exports.push_back("export STOKE_CACHE=ram");
  }
  a.changes.push_back(
      "store the images at (or near) the training size, or as JPEG so decoding "
      "can scale down in the DCT domain");
  a.severity = 0.1 + 0.1 * std::log2(ratio) / 4;
  out.push_back(std::move(a));
}

// A rare class (a defect) among many samples of another trains a model
// that rarely predicts it: loss weights or a balanced sampler counter that.
void class_imbalance(const AdvisorInput& in, std::vector<Advice>& out) {
  if (in.class_counts.size() < 2 || in.class_weights || in.balanced_sampler) return;
  std::size_t rare = 0, common = 0;
  for (std::size_t c = 0; c < in.class_counts.size(); ++c) {
    if (in.class_counts[c] < in.class_counts[rare]) rare = c;
    if (in.class_counts[c] > in.class_counts[common]) common = c;
  }
  const double ratio = static_cast<double>(in.class_counts[common]) /
                       static_cast<double>(std::max<std::uint64_t>(1, in.class_counts[rare]));
  if (ratio < kClassImbalance) return;
  Advice a;
  a.rule = "class-imbalance";
  a.diagnosis = "class " + std::to_string(rare) + " has " + std::to_string(in.class_counts[rare]) +
                " training samples, class " + std::to_string(common) + " has " +
                std::to_string(in.class_counts[common]) + " (" + fixed(ratio) +
                "x): the model learns to rarely predict the rare class";
  a.changes.push_back(
      "TrainerOptions::balanced_class_weights = true (stoke train --class-weights balanced)");
  a.changes.push_back(
      "or TrainerOptions::balanced_sampler = true (stoke train --balanced-sampler)");
  a.severity = 0.05 + 0.05 * std::min(1.0, std::log2(ratio) / 6);
  out.push_back(std::move(a));
}

// Data-parallel runs whose ranks spend a large share waiting in collectives:
// each step exchanges the whole gradient block, so fewer, larger steps (a
// bigger batch per rank, or accumulation) amortize it.
void communication_bound(const AdvisorInput& in, std::vector<Advice>& out) {
  const double share = in.profile.share(Stage::kCommunicate);
  if (share < kCommunicationBound) return;
  Advice a;
  a.rule = "communication-bound";
  a.diagnosis = "data-parallel collectives (gradient allreduce, stop agreement) take " +
                percent(share) + " of the wall time";
  a.changes.push_back(
      "a larger batch per rank (TrainerOptions::batch_size, stoke train --batch) so each "
      "allreduce of the gradients serves more images");
  a.changes.push_back(
      "or TrainerOptions::batch_multiplier > 1: accumulate batches locally, allreduce once per "
      "step");
  a.changes.push_back("or fewer ranks per machine when they share its cores (stoke train --nproc)");
  a.severity = share;
  out.push_back(std::move(a));
}

}  // namespace

std::vector<Advice> advise(const AdvisorInput& in) {
  std::vector<Advice> out;
  integrated_gpu(in, out);
  input_bound(in, out);
  small_batch(in, out);
  transfer_bound(in, out);
  threads_rule(in, out);
  simd_off(in, out);
  pool_hoarding(in, out);
  unknown_variables(in, out);
  interruptions(in, out);
  oversized_decode(in, out);
  class_imbalance(in, out);
  communication_bound(in, out);
  precision_rule(in, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const Advice& a, const Advice& b) { return a.severity > b.severity; });
  return out;
}

std::string format_advice(const std::vector<Advice>& advice) {
  std::ostringstream out;
  out << "stoke advisor\n";
  if (advice.empty()) {
    out << "  no bottleneck found: the measurements show no rule's symptom\n";
    return out.str();
  }
  for (const auto& a : advice) {
    out << "  [" << a.rule << "] " << a.diagnosis << "\n";
    for (const auto& e : a.exports) out << "      " << e << "\n";
    for (const auto& c : a.changes) out << "      change: " << c << "\n";
  }
  return out.str();
}

}  // namespace stoke
