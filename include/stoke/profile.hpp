// Where training time goes: spans per pipeline/step stage, device-busy time,
// process CPU utilization and memory figures, summarized per epoch as a table,
// JSON, and a Chrome trace (viewable in Perfetto) of the first steps.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "stoke/export.hpp"

namespace stoke {

enum class Stage : int {
  kRead,           // file bytes from disk
  kDecode,         // JPEG/PNG decode
  kPreprocess,     // deterministic resize/crop/normalize
  kCache,          // cache lookup/store
  kAugment,        // random augmentation
  kBatchAssembly,  // copying samples into the staging batch
  kDataWait,       // the consumer waiting for a batch (starvation)
  kHostToDevice,   // upload of a batch
  kForward,
  kBackward,
  kUpdate,  // optimizer step
  kValidation,
  kLogging,
  kCommunicate,  // data-parallel collectives (gradient allreduce, stop agreement)
  kCount
};
inline constexpr int kStageCount = static_cast<int>(Stage::kCount);

STOKE_API const char* to_string(Stage stage) noexcept;

// True for the stages the input pipeline runs on worker threads, which overlap
// the step; their time is CPU work, not step time.
STOKE_API bool is_pipeline_stage(Stage stage) noexcept;

struct StageStats {
  double seconds = 0;  // summed over all threads
  std::uint64_t count = 0;
  double max_seconds = 0;
};

// Memory figures copied in from the pools at the end of an epoch.
struct MemoryFigures {
  std::uint64_t device_total = 0;  // the device's memory
  std::uint64_t pool_cap = 0;
  std::uint64_t pool_reserved = 0;
  std::uint64_t pool_in_use = 0;
  std::uint64_t pool_peak = 0;
  // In use on the device outside stoke's pool (the CUDA context, library
  // handles, other processes): the cap does not bound it. 0 when unknown.
  std::uint64_t device_outside_pool = 0;
  std::uint64_t pinned_bytes = 0;
  bool pinned_fallback = false;  // staging fell back to pageable memory
};

struct STOKE_API ProfileSummary {
  double wall_seconds = 0;  // from start() to the summary
  std::uint64_t steps = 0;
  std::uint64_t images = 0;
  std::array<StageStats, kStageCount> stages{};
  bool device_busy_measured = false;  // from CUDA events
  double device_busy_seconds = 0;     // GPU: events; CPU backend: forward+backward+update
  double process_cpu_seconds = 0;     // user + system time of the process
  int logical_cores = 1;
  MemoryFigures memory;

  const StageStats& stage(Stage s) const { return stages[static_cast<int>(s)]; }
  double images_per_second() const { return wall_seconds > 0 ? images / wall_seconds : 0; }
  // Share of wall time spent in `s` (pipeline stages can exceed 1: many threads).
  double share(Stage s) const { return wall_seconds > 0 ? stage(s).seconds / wall_seconds : 0; }
  // device_busy_seconds / wall_seconds: the honest "GPU utilization".
  double device_busy_share() const {
    return wall_seconds > 0 ? device_busy_seconds / wall_seconds : 0;
  }
  // Process CPU time over wall time and all logical cores, in [0, 1].
  double cpu_utilization() const;
};

struct ProfilerOptions {
  int trace_steps = 0;  // record individual spans of the first N steps for the Chrome trace
};

// Thread-safe: spans may be recorded from any thread concurrently.
class STOKE_API Profiler {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Starts (or restarts) the wall clock and the process CPU clock, and clears
  // every figure. Call at the start of each measured epoch.
  void start();

  // Records a span of `stage` from `begin` to `end`.
  void record(Stage stage, Clock::time_point begin, Clock::time_point end);

  // Measures a scope: `auto s = profiler.span(Stage::kForward);`.
  class Span {
   public:
    Span(Profiler* profiler, Stage stage)
        : profiler_(profiler), stage_(stage), begin_(Clock::now()) {}
    ~Span() {
      if (profiler_) profiler_->record(stage_, begin_, Clock::now());
    }
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    Profiler* profiler_;
    Stage stage_;
    Clock::time_point begin_;
  };
  Span span(Stage stage) { return Span(this, stage); }

  void add_device_busy(double seconds);  // GPU time measured by events
  void step_done(std::uint64_t images);  // a training step consumed `images`
  void set_memory(const MemoryFigures& memory);

  ProfileSummary summary() const;
  // Chrome trace event JSON of the spans of the first trace_steps steps.
  std::string chrome_trace() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Process CPU time (user + system) in seconds, from /proc/self/stat.
STOKE_API double process_cpu_seconds();

// Per-stage table with seconds, share of wall, counts, and the headline
// figures (images/s, device busy, CPU utilization, memory).
STOKE_API std::string format_profile(const ProfileSummary& summary);
STOKE_API std::string profile_to_json(const ProfileSummary& summary);

}  // namespace stoke
