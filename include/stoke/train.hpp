// The trainer: fit() runs epochs of (prefetched batch -> forward -> backward ->
// update) with gradient accumulation, validation and logging cadences that
// never block the step, callbacks, early stopping, best-model checkpoints,
// exact resume from a checkpoint, a per-epoch train log (JSON, CSV) and a
// profile of every stage.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stoke/config.hpp"
#include "stoke/context.hpp"
#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/export.hpp"
#include "stoke/loss_scale.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/profile.hpp"

namespace stoke {

class Communicator;

enum class OptimizerKind { kSgd, kAdam, kAdamW };

struct TrainerOptions {
  int epochs = 1;
  // The model files and checkpoints fit() writes (describe_training) carry up
  // to four reference samples for the predictor's self-check: the image
  // files' paths, their preprocessed pixels and, for files up to 256 KiB, the
  // encoded files themselves; and the dataset's folder. false leaves all of
  // them out (the self-check then reports itself skipped) for models that
  // leave the building.
  bool embed_training_images = true;
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
  nn::LrSchedule schedule;             // total_steps 0 = set from the run length
  int validate_every_epochs = 1;       // 0 = never
  std::size_t validation_subset = 0;   // validate on the first N samples; 0 = all
  int log_every_steps = 50;            // 0 = never; written by an asynchronous logger
  std::ostream* log_stream = nullptr;  // where step logs go; null = stoke's log at info level
  int early_stopping_patience = 0;     // epochs without validation improvement; 0 = off
  // Written when validation accuracy improves: a deployable model (weights,
  // buffers, metadata, no optimizer state); empty = off.
  std::filesystem::path best_checkpoint;
  // Written when fit() stops before its last epoch (stop requested, or out of
  // memory with a fixed batch size); empty = off.
  std::filesystem::path stop_checkpoint;
  std::size_t max_steps_per_epoch = 0;  // 0 = the whole epoch (trials use a few steps)
  int trace_steps = 0;                  // Chrome trace of the first N steps of each epoch
  std::uint64_t seed = 0;
  // Fine-tuning: the stem and the first N stages frozen (Model::freeze_stages),
  // and per-stage learning-rate multipliers (Model::set_stage_lr_multipliers);
  // 0 / empty = the model as it is.
  int freeze_stages = 0;
  std::vector<float> stage_lr_multipliers;
  // Where the trainer's settings, SIMD level and CPU thread arena come from
  // (runtime.context, or a Context built from the application's Config):
  // fit() runs in its arena and the loaders it builds take it (replacing
  // the loader options' context). Default: defaults, the current arena.
  Context context;
  // Prefetch depth, pinned staging, streams and graphs; empty = context.settings().
  std::optional<Settings> settings;
  // Data-parallel training: the ranks' communicator (see
  // stoke/distributed.hpp), owned by the caller; null or a world of one =
  // this process alone. Every rank calls fit() with the same options and
  // data; each trains on its shard and gradients are averaged before every
  // update, so the ranks keep identical weights. Rank 0 alone writes the
  // checkpoints.
  Communicator* communicator = nullptr;
  // Data-parallel gradient buckets on CPU ranks: the gradient block is
  // averaged in pieces of this size on a communication thread while the
  // backward pass computes the earlier layers' gradients (overlap); 0 = one
  // allreduce of the whole block after the backward pass. GPU ranks average
  // the whole block after backward (NCCL on the compute stream, or through
  // the host).
  // 25 MiB as PyTorch's DistributedDataParallel: on a machine whose cores the
  // ranks already fill, many small buckets cost more in thread hand-overs
  // than they hide (bench/RESULTS.md, issue 18).
  std::size_t gradient_bucket_bytes = std::size_t{25} << 20;
  // A stop or best checkpoint written by fit() to continue from: the model,
  // the optimizer state and the TrainState it carries (epoch, position in the
  // epoch, schedule position, batch size, early-stopping state). From a stop
  // checkpoint the run then equals one that never stopped, bit for bit on the
  // CPU; a best checkpoint is a deployable model without optimizer state, so
  // the optimizer starts fresh (said in the log). Empty = none.
  std::string resume;
  // Per-class loss weights (one per class; empty = none), or weights
  // balanced from the training set's class counts (n / (classes * count)).
  std::vector<float> class_weights;
  bool balanced_class_weights = false;
  // Draw each epoch's batches class-balanced (deterministic per loader seed
  // and epoch) instead of a plain shuffle.
  bool balanced_sampler = false;
  // Loss scaling (stoke/loss_scale.hpp, docs/precision.md): the mode (auto:
  // dynamic when the step computes in fp16, off otherwise), the initial
  // scale and the clean steps before
  // a growth. Enabled, the loss gradient is scaled before backward, a step
  // with NaN or infinite gradients is skipped (counted in
  // EpochRecord::skipped_steps) and the others are unscaled before the
  // update; the hook Callbacks::on_gradients then sees the scaled gradients.
  // Bad values: InvalidArgument naming the option, from the constructor.
  LossScaleOptions loss_scale;
  // What the training step's convolutions compute in (docs/precision.md):
  // kFp32 (default); kBf16, mixed precision: the convolutions' inputs (x, w,
  // dy) rounded to bf16 with fp32 accumulation and fp32 outputs, while the
  // weights, their gradients, the optimizer state, batch norm, the loss and
  // the reductions stay fp32 (the model file is an ordinary fp32 one). Only
  // where the backend runs bf16 natively (the CPU: AVX512-BF16 or AMX; CUDA:
  // compute capability 8.0 and later); elsewhere Unsupported naming what is
  // missing (emulated bf16 is slower than fp32). kFp16 the same way with fp16
  // and the loss scaled (auto: dynamic), on CUDA only (compute capability 7.0
  // and later); Unsupported on CPUs. kAuto trains in fp32: whether a lower
  // precision reaches fp32's accuracy is the caller's decision, not the
  // machine's. Validation inside fit() runs in the same precision; the model
  // file's reference logits in fp32.
  Precision precision = Precision::kFp32;
};

struct EpochRecord {
  int epoch = 0;
  std::uint64_t steps = 0;  // update points: optimizer steps, skipped ones included
  std::uint64_t images = 0;
  double train_loss = 0;  // mean over the epoch's steps
  double train_accuracy = 0;
  bool validated = false;
  double val_loss = 0;
  double val_accuracy = 0;
  std::uint64_t val_images = 0;  // validation samples behind val_loss and val_accuracy
  double seconds = 0;
  double images_per_second = 0;
  // Loss scaling: of `steps`, those skipped for non-finite gradients, and
  // the scale at the epoch's end (0 when loss scaling is off).
  std::uint64_t skipped_steps = 0;
  double loss_scale = 0;
  ProfileSummary profile;
};

struct STOKE_API TrainLog {
  std::vector<EpochRecord> epochs;
  // Samples skipped as corrupt (LoaderOptions::skip_corrupt), train and
  // validation, in dataset order; in to_json() as "corrupt_samples".
  std::vector<CorruptSample> corrupt_samples;
  std::string to_json() const;
  std::string to_csv() const;
  // Writes to_json() or to_csv() by the file's extension (.json/.csv), via a
  // temporary file renamed into place.
  void save(const std::filesystem::path& path) const;
};

// kCorruptData: more corrupt samples than the loader's budget (FitResult::message lists them).
enum class StopReason { kCompleted, kEarlyStopping, kRequested, kOutOfMemory, kCorruptData };
STOKE_API const char* to_string(StopReason reason) noexcept;

struct StepInfo {
  int epoch = 0;
  std::uint64_t step = 0;  // optimizer steps so far in this fit
  float loss = 0;          // valid on logging steps only (others skip the sync)
  float accuracy = 0;
  bool has_loss = false;
  float lr = 0;
  // Loss scaling: the step was skipped (non-finite gradients; the optimizer
  // did not step), and the scale for the next step (0 when off).
  bool skipped = false;
  float loss_scale = 0;
};

struct Callbacks {
  std::function<void(const StepInfo&)> on_step;           // after every optimizer step (or skip)
  std::function<void(const EpochRecord&)> on_epoch;       // after every epoch
  std::function<void(const EpochRecord&)> on_validation;  // after every validation
  // Between backward and the optimizer's update, with the gradients the
  // update will apply (the model's gradient block; with accumulation, the mean
  // over the device batches), issued in stream order on the model's backend;
  // may change them in place (a data-parallel allreduce goes here). With loss
  // scaling (TrainerOptions::loss_scale) they are still multiplied by the
  // scale here: the check and the unscale come after the hook. Inside a
  // CUDA graph it is captured with the step: it must issue the same ops on the
  // same tensors every call.
  std::function<void(Tensor& gradients)> on_gradients;
};

// What fit() needs beyond the model and optimizer to continue a run exactly;
// stored in a checkpoint's metadata under "train.*" keys (a section of its
// own, beside the model file's fields).
struct STOKE_API TrainState {
  static constexpr int kVersion = 1;
  int epoch = 0;            // the epoch to continue (0-based)
  std::uint64_t batch = 0;  // device batches of that epoch already applied
  std::uint64_t step = 0;   // optimizer steps so far (the schedule's position)
  int batch_size = 0;       // the device batch the run ended with
  int batch_multiplier = 1;
  std::int64_t schedule_total_steps = 0;
  std::uint64_t loader_seed = 0;  // the sampler's and augmentation's seed
  double best_val_accuracy = -1;  // early stopping; -1 before a validation
  int epochs_without_improvement = 0;
  // The partial epoch's sums, so its record continues.
  float epoch_loss_sum = 0;
  float epoch_correct_sum = 0;
  std::uint64_t epoch_images = 0;
  std::uint64_t epoch_steps = 0;
  // Per dropout layer (in network order): its mask seed and masks drawn.
  std::vector<std::uint64_t> dropout_streams;  // seed, draws, seed, draws, ...
  // The loss scaler (scale 0: loss scaling was off) and the partial epoch's
  // skipped steps; absent from checkpoints written before loss scaling (read
  // as off).
  LossScalerState loss_scaler;
  std::uint64_t epoch_skipped_steps = 0;

  std::map<std::string, std::string> to_metadata() const;
  // Whether metadata carries a trainer state.
  static bool present(const std::map<std::string, std::string>& metadata);
  // CorruptFile naming `where` and the key when one is missing or malformed.
  static TrainState from_metadata(const std::map<std::string, std::string>& metadata,
                                  const std::string& where);
};

struct FitResult {
  TrainLog log;
  StopReason reason = StopReason::kCompleted;
  int batch_size = 0;  // the device batch used
  int batch_multiplier = 1;
  double best_val_accuracy = 0;
  std::string chrome_trace;  // of the last epoch's first trace_steps steps, if any
  std::string message;  // why it stopped early (the OutOfMemory or corrupt-data text), if it did
  std::vector<CorruptSample> corrupt_samples;  // = log.corrupt_samples
  int out_of_memory_retries = 0;               // batch halvings in batch-size-auto mode
  // On a GPU: steps that ran as a replayed CUDA graph (STOKE_GPU_GRAPH), and
  // why steps ran eagerly where they did ("" when every full batch replayed
  // after each slot's warm-up and capture).
  std::int64_t graph_steps = 0;
  std::string graph_note;
  // Loss scaling: steps skipped for non-finite gradients (the whole run's,
  // a resumed one's included) and the final scale (0 when off).
  std::uint64_t skipped_steps = 0;
  float loss_scale = 0;
  // The precision the convolutions trained in (TrainerOptions::precision resolved).
  Precision precision = Precision::kFp32;
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
  // fit() leaves options() as given: the batch it ended with is in the result.
  FitResult fit(const Dataset& train, const Dataset* val, LoaderOptions loader);

  // Thread-safe: asks a running fit() to stop after its current step.
  void request_stop() noexcept { stop_requested_.store(true); }

  nn::Optimizer& optimizer() noexcept { return *optimizer_; }
  Profiler& profiler() noexcept { return profiler_; }
  const TrainerOptions& options() const noexcept { return options_; }

 private:
  FitResult fit_in_context(const Dataset& train, const Dataset* val, LoaderOptions loader);
  struct State;
  struct Loaders;
  int resume_from(const std::string& path, State& st);
  void check_resume_world(const std::string& path,
                          const std::map<std::string, std::string>& metadata,
                          const TrainState& s) const;
  void plan_fit(Loaders& loaders);
  EpochRecord run_epoch(int epoch, Loader& loader);
  void begin_epoch(EpochRecord& record);
  void run_batches(int epoch, Loader& loader, EpochRecord& record);
  std::optional<EpochRecord> run_epoch_with_retries(int epoch, Loaders& loaders, FitResult& result);
  bool stop_for_data_error(int epoch, const Error& e, Loaders& loaders, FitResult& result);
  void record_corrupt_samples(Loaders& loaders, FitResult& result);
  // Validation, callbacks, checkpoints, early stopping; true = stop now.
  bool end_epoch(int epoch, EpochRecord& record, FitResult& result);
  void release_step_memory();
  // The stop this rank acts on: the request, or under data parallelism the
  // one all ranks agreed on (agree_stop).
  bool stopping() const noexcept;
  void agree_stop();
  void release_fit_resources() noexcept;
  TrainState train_state(int epoch) const;
  // `why` goes into the checkpoint's metadata; out of memory, the reference
  // logits (a forward pass) are not computed for it.
  enum class StopMemory { kAvailable, kExhausted };
  void save_stop_checkpoint(int epoch, const char* why, StopMemory memory = StopMemory::kAvailable);
  // Step count, record, on_step callback and the periodic log line.
  void finish_step(int epoch, EpochRecord& record, float lr);

  nn::Model& model_;
  const TrainerOptions options_;
  Callbacks callbacks_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  Profiler profiler_;
  std::atomic<bool> stop_requested_{false};
  std::unique_ptr<State> state_;
};

// Samples per label 0..classes-1; InvalidArgument naming the sample for a
// label outside that range.
STOKE_API std::vector<std::uint64_t> class_counts(const Dataset& data, int classes);
// n / (classes present * count) per class (1 for a class without samples).
STOKE_API std::vector<float> balanced_class_weights(const std::vector<std::uint64_t>& counts);
// The loss weights a fit uses: options.class_weights (one per class, finite,
// >= 0), balanced weights from train's counts, or none (empty).
// InvalidArgument naming the problem otherwise.
STOKE_API std::vector<float> resolve_class_weights(const TrainerOptions& options,
                                                   const Dataset& train, int classes);

// The largest power-of-two batch (<= 4096) whose memory plan for `model` with
// `optimizer_slots` fits in `max_memory` bytes; at least 1.
STOKE_API int auto_batch_size(const nn::Model& model, int optimizer_slots,
                              std::uint64_t max_memory);

}  // namespace stoke
