// The trainer: fit() runs epochs of (prefetched batch -> forward -> backward ->
// update) with gradient accumulation, validation and logging cadences that
// never block the step, callbacks, early stopping, best-model checkpoints, a
// per-epoch train log (JSON, CSV) and a profile of every stage.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stoke/config.hpp"
#include "stoke/data.hpp"
#include "stoke/export.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/profile.hpp"

namespace stoke {

enum class OptimizerKind { kSgd, kAdam, kAdamW };

struct TrainerOptions {
  int epochs = 1;
  // Samples per device batch; 0 = auto: the largest power of two whose memory
  // plan fits under max_memory (see auto_batch_size).
  int batch_size = 32;
  std::uint64_t max_memory = 0;  // bytes for batch auto; 0 = the backend's cap or 2 GiB on the CPU
  // Device batches per optimizer step (gradient accumulation): the effective
  // batch is batch_size * batch_multiplier.
  int batch_multiplier = 1;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  nn::SgdOptions sgd;
  nn::AdamOptions adam;
  nn::LrSchedule schedule;       // total_steps 0 = set from the run length
  int validate_every_epochs = 1;  // 0 = never
  std::size_t validation_subset = 0;  // validate on the first N samples; 0 = all
  int log_every_steps = 50;       // 0 = never; written by an asynchronous logger
  std::ostream* log_stream = nullptr;  // where step logs go; null = stoke's log at info level
  int early_stopping_patience = 0;     // epochs without validation improvement; 0 = off
  std::filesystem::path best_checkpoint;  // written when validation accuracy improves; empty = off
  // Written when fit() stops before its last epoch (stop requested, or out of
  // memory with a fixed batch size); empty = off.
  std::filesystem::path stop_checkpoint;
  std::size_t max_steps_per_epoch = 0;    // 0 = the whole epoch (trials use a few steps)
  int trace_steps = 0;                    // Chrome trace of the first N steps of each epoch
  std::uint64_t seed = 0;
  // Fine-tuning: the stem and the first N stages frozen (Model::freeze_stages),
  // and per-stage learning-rate multipliers (Model::set_stage_lr_multipliers);
  // 0 / empty = the model as it is.
  int freeze_stages = 0;
  std::vector<float> stage_lr_multipliers;
  // Prefetch depth, pinned staging and streams; empty = Config::load().
  std::optional<Settings> settings;
};

struct EpochRecord {
  int epoch = 0;
  std::uint64_t steps = 0;
  std::uint64_t images = 0;
  double train_loss = 0;       // mean over the epoch's steps
  double train_accuracy = 0;
  bool validated = false;
  double val_loss = 0;
  double val_accuracy = 0;
  double seconds = 0;
  double images_per_second = 0;
  ProfileSummary profile;
};

struct STOKE_API TrainLog {
  std::vector<EpochRecord> epochs;
  std::string to_json() const;
  std::string to_csv() const;
  // Writes to_json() or to_csv() by the file's extension (.json/.csv), via a
  // temporary file renamed into place.
  void save(const std::filesystem::path& path) const;
};

enum class StopReason { kCompleted, kEarlyStopping, kRequested, kOutOfMemory };
STOKE_API const char* to_string(StopReason reason) noexcept;

struct StepInfo {
  int epoch = 0;
  std::uint64_t step = 0;  // optimizer steps so far in this fit
  float loss = 0;          // valid on logging steps only (others skip the sync)
  float accuracy = 0;
  bool has_loss = false;
  float lr = 0;
};

struct Callbacks {
  std::function<void(const StepInfo&)> on_step;          // after every optimizer step
  std::function<void(const EpochRecord&)> on_epoch;      // after every epoch
  std::function<void(const EpochRecord&)> on_validation; // after every validation
};

struct FitResult {
  TrainLog log;
  StopReason reason = StopReason::kCompleted;
  int batch_size = 0;      // the device batch used
  int batch_multiplier = 1;
  double best_val_accuracy = 0;
  std::string chrome_trace;  // of the last epoch's first trace_steps steps, if any
  std::string message;       // why it stopped early (the OutOfMemory text), if it did
  int out_of_memory_retries = 0;  // batch halvings in batch-size-auto mode
  // On a GPU: steps that ran as a replayed CUDA graph (STOKE_GPU_GRAPH), and
  // why steps ran eagerly where they did ("" when every full batch replayed
  // after each slot's warm-up and capture).
  std::int64_t graph_steps = 0;
  std::string graph_note;
};

class STOKE_API Trainer {
 public:
  // The model's backend computes; the optimizer is created from the options.
  Trainer(nn::Model& model, TrainerOptions options, Callbacks callbacks = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains on `train` (and validates on `val` when given) with loaders built
  // from `loader` (its batch_size is replaced by the trainer's). Returns when
  // the epochs are done, early stopping triggers, or request_stop() was called
  // (the current step finishes first).
  // Out of memory: with batch size auto, the device batch is halved and the
  // batch multiplier doubled (the effective batch stays), and the epoch starts
  // again; with a fixed batch size, fit() writes stop_checkpoint and returns
  // with StopReason::kOutOfMemory and the error's text. Either way the
  // memory of the failed step is released.
  FitResult fit(const Dataset& train, const Dataset* val, LoaderOptions loader);

  // Thread-safe: asks a running fit() to stop after its current step.
  void request_stop() noexcept { stop_requested_.store(true); }

  nn::Optimizer& optimizer() noexcept { return *optimizer_; }
  Profiler& profiler() noexcept { return profiler_; }
  const TrainerOptions& options() const noexcept { return options_; }

 private:
  EpochRecord run_epoch(int epoch, Loader& loader, std::uint64_t& step);
  void release_step_memory();
  void save_stop_checkpoint(int epoch, const char* why);
  void validate(Loader& loader, EpochRecord& record);
  // Step count, record, on_step callback and the periodic log line.
  void finish_step(int epoch, std::uint64_t& step, EpochRecord& record, float lr, std::int64_t n);

  nn::Model& model_;
  TrainerOptions options_;
  Callbacks callbacks_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  Profiler profiler_;
  std::atomic<bool> stop_requested_{false};
  struct State;
  std::unique_ptr<State> state_;
};

// The largest power-of-two batch (<= 4096) whose memory plan for `model` with
// `optimizer_slots` fits in `max_memory` bytes; at least 1.
STOKE_API int auto_batch_size(const nn::Model& model, int optimizer_slots, std::uint64_t max_memory);

}  // namespace stoke
