// The advisor: rules that read a profile, the machine and the configuration
// and say what holds training back and exactly which settings to change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoke/config.hpp"
#include "stoke/device.hpp"
#include "stoke/export.hpp"
#include "stoke/precision.hpp"
#include "stoke/profile.hpp"
#include "stoke/system.hpp"
#include "stoke/train.hpp"

namespace stoke {

// Everything the rules look at. Fields a caller cannot fill stay at their
// defaults, and the rules that need them stay silent.
struct AdvisorInput {
  ProfileSummary profile;
  SystemInfo system;
  Config config;  // settings and the warnings found while loading
  DeviceSelection device;
  int cpu_threads = 0;                  // the arena size in effect
  SimdLevel simd = SimdLevel::kScalar;  // the level the kernels use
  int batch_size = 0;
  int max_batch_size = 0;  // largest batch the memory plan fits under the cap; 0 = unknown
  double decoded_pixels_per_image = 0;   // pixels decoded per sample (after DCT scaling)
  double training_pixels_per_image = 0;  // pixels of the network input
  int validation_every_epochs = 0;
  int log_every_steps = 0;
  // Training samples per class (label order); empty = unknown. With the
  // run's imbalance remedies, for the class-imbalance rule.
  std::vector<std::uint64_t> class_counts;
  bool class_weights = false;  // class_weights or balanced_class_weights set
  bool balanced_sampler = false;
  // How the backend runs bf16 inference (Backend::inference_precision);
  // kNone also where unknown.
  PrecisionSupport bf16 = PrecisionSupport::kNone;
  // Native bf16's time over fp32's (measured_time_ratio); 0 = not measured.
  double bf16_time_ratio = 0;
};

struct Advice {
  std::string rule;                  // stable identifier, e.g. "input-bound"
  std::string diagnosis;             // what the measurements show, with the numbers
  std::vector<std::string> exports;  // "export STOKE_CPU_THREADS=7"
  std::vector<std::string> changes;  // settings that are not variables ("batch size 64")
  double severity = 0;               // share of the step the problem costs, for ordering
};

// All rules that fire, most severe first.
STOKE_API std::vector<Advice> advise(const AdvisorInput& input);

// "stoke advisor: ..." block, with the export lines ready to paste.
STOKE_API std::string format_advice(const std::vector<Advice>& advice);

// ---- Autotuner --------------------------------------------------------------

// The settings one trial runs with.
struct TrialSettings {
  int batch_size = 0;
  int cpu_threads = 0;
  bool cache = false;  // STOKE_CACHE=ram
  int prefetch_depth = 2;
  bool gpu_graph = false;     // STOKE_GPU_GRAPH (GPU backends only)
  bool uint8_upload = false;  // loader output uint8, normalized on the GPU (GPU backends only)
  std::string label;          // what this trial varies, e.g. "batch 32"
};

struct TrialResult {
  TrialSettings settings;
  double images_per_second = 0;  // of the measured (second) epoch
  double data_wait_share = 0;
  bool failed = false;  // e.g. out of memory: recorded, never fatal
  std::string error;
};

struct TuneOptions {
  std::size_t steps_per_trial = 4;  // optimizer steps per measured epoch
  double headroom = 0.8;            // the batch's memory plan uses at most this share of the cap
  std::uint64_t max_memory = 0;     // the cap; 0 = TrainerOptions::max_memory or 2 GiB
  int max_batch = 256;
  std::vector<int> thread_candidates;  // empty: 1, cores / 2, cores - 1, cores (distinct)
  std::function<void(const TrialResult&)> on_trial;  // progress
};

struct STOKE_API TuneResult {
  TrialSettings best;
  double best_images_per_second = 0;
  std::vector<TrialResult> trials;
  std::vector<std::string> not_tried;  // knobs that do not apply here, with the reason
  bool gpu = false;                    // tuned on a GPU backend (graph trial, STOKE_GPU_GRAPH line)
  // The trainer's context with the best thread count (an arena of that size):
  // run the tuned training in it. autotune() changes no process state.
  Context context;
  std::string table() const;
  // STOKE_* lines that Config loads (the batch size, a trainer option, as a comment).
  std::string config_text() const;
  void write_config(const std::filesystem::path& path) const;
};

// Short trials on `data` with `model` (whose weights are restored afterwards):
// the batch size (powers of two up to the largest whose memory plan fits the
// cap with headroom), then the thread count, then the cache and the prefetch
// depth, and on a GPU backend CUDA graphs on/off and uint8 upload on/off, each
// keeping the fastest. Each trial trains two short epochs on a
// subset and measures the second. The library arena is left as it was; the
// result's context carries the best thread count.
STOKE_API TuneResult autotune(nn::Model& model, const Dataset& data, const LoaderOptions& loader,
                              const TrainerOptions& trainer, const TuneOptions& options = {});

}  // namespace stoke
