// The trainer's epoch loop. Its parts live beside it: the step runners
// (step_runner.cpp), the batch path (batch_io.cpp), the out-of-memory policy
// (oom_policy.cpp), the epoch-end policies (epoch_end.cpp) and the state a
// checkpoint carries for exact resume (train_state.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string_view>
#include <utility>

#include "modelfile/model_file.hpp"
#include "stoke/backend.hpp"
#include "stoke/distributed.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/train.hpp"
#include "train/async_logger.hpp"
#include "train/batch_io.hpp"
#include "train/epoch_end.hpp"
#include "train/fit_state.hpp"

namespace stoke {
namespace {

constexpr const char* kWorldSizeKey =
    "train.world_size";  // ranks of the run that wrote a checkpoint

std::unique_ptr<nn::Optimizer> make_optimizer(const nn::Model& model, const TrainerOptions& o) {
  switch (o.optimizer) {
    case OptimizerKind::kSgd:
      return std::make_unique<nn::Sgd>(model, o.sgd);
    case OptimizerKind::kAdam: {
      auto adam = o.adam;
      adam.decoupled_weight_decay = false;
      return std::make_unique<nn::Adam>(model, adam);
    }
    case OptimizerKind::kAdamW: {
      auto adam = o.adam;
      adam.decoupled_weight_decay = true;
      return std::make_unique<nn::Adam>(model, adam);
    }
  }
  throw InvalidArgument("unknown optimizer kind");
}

// The models compute in float32: the loader delivers float32, or uint8 HWC
// that a GPU backend's prefetcher normalizes on the device.
void check_loader_dtype(OutputDtype dtype, Backend& backend) {
  if (dtype == OutputDtype::kFloat16 || dtype == OutputDtype::kBFloat16) {
    throw InvalidArgument(
        std::string("Trainer::fit: the loader's output dtype is ") + to_string(dtype) +
        "; the models compute in float32: use OutputDtype::kFloat32 (or kUint8 on a GPU backend)");
  }
  if (dtype == OutputDtype::kUint8 && !backend.gpu()) {
    throw InvalidArgument(
        "Trainer::fit: the loader's output dtype is uint8 (HWC), which a GPU backend normalizes "
        "on the device; the model runs on " +
        backend.name() + ": use OutputDtype::kFloat32");
  }
}

// A stop checkpoint's trainer state at `epoch`.
std::map<std::string, std::string> stop_metadata(const TrainState& s, int epoch) {
  auto metadata = s.to_metadata();
  metadata["epoch"] = std::to_string(epoch);
  return metadata;
}

// The scaler continues where the checkpoint's stopped; a checkpoint written
// without loss scaling starts it at its initial scale, and one written with
// it, resumed without, leaves its state unused (both said in the log).
void resume_loss_scaler(const std::string& path, const LossScalerState& s, LossScaler& scaler) {
  if (s.scale > 0.0f && scaler.enabled()) {
    scaler.restore(s, "checkpoint '" + path + "'");
  } else if (scaler.enabled()) {
    log_info("resuming " + path + ": it was written without loss scaling; the scaler starts at " +
             std::to_string(scaler.scale()));
  } else if (s.scale > 0.0f) {
    log_info("resuming " + path +
             ": it was written with loss scaling, which is off now; its scaler state is unused");
  }
}

void check_options(const TrainerOptions& o) {
  if (o.epochs < 1)
    throw InvalidArgument("TrainerOptions::epochs must be >= 1, got " + std::to_string(o.epochs));
  if (o.batch_size < 0) throw InvalidArgument("TrainerOptions::batch_size must be >= 0 (0 = auto)");
  // NaN passes every comparison: a NaN rate would train to a NaN model.
  if (!std::isfinite(o.schedule.base_lr) || o.schedule.base_lr < 0.0f) {
    throw InvalidArgument("TrainerOptions::schedule.base_lr must be finite and >= 0, got " +
                          std::to_string(o.schedule.base_lr));
  }
  check_loss_scale_options(o.loss_scale);
  if (o.batch_multiplier < 1) {
    throw InvalidArgument("TrainerOptions::batch_multiplier must be >= 1, got " +
                          std::to_string(o.batch_multiplier));
  }
}

// The precision the step's convolutions compute in (TrainerOptions::precision).
Precision training_precision(const Backend& backend, Precision requested) {
  if (requested == Precision::kAuto || requested == Precision::kFp32) return Precision::kFp32;
  const PrecisionSupport support = backend.training_precision_support(requested);
  if (support == PrecisionSupport::kEmulated) {
    throw Unsupported(backend.name() + ": training in " + to_string(requested) +
                      " would be emulated here (the CPU, or its STOKE_CPU_SIMD / "
                      "ONEDNN_MAX_CPU_ISA cap, lacks AVX512-BF16 and AMX), slower than fp32; "
                      "train in fp32");
  }
  return requested;  // kNone: set_training_precision throws, naming what is missing
}

}  // namespace

Trainer::Trainer(nn::Model& model, TrainerOptions options, Callbacks callbacks)
    : model_(model),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      profiler_(ProfilerOptions{options_.trace_steps}),
      state_(std::make_unique<State>(options_)) {
  check_options(options_);
  // Fine-tuning (docs/interchange.md): set on the model before the optimizer takes its groups.
  if (options_.freeze_stages > 0) model_.freeze_stages(options_.freeze_stages);
  if (!options_.stage_lr_multipliers.empty())
    model_.set_stage_lr_multipliers(options_.stage_lr_multipliers);
  optimizer_ = make_optimizer(model_, options_);
}

Trainer::~Trainer() = default;

int auto_batch_size(const nn::Model& model, int optimizer_slots, std::uint64_t max_memory) {
  int best = 1;
  for (int batch = 1; batch <= 4096; batch *= 2) {
    if (model.memory_plan(batch, optimizer_slots).total() > max_memory) break;
    best = batch;
  }
  return best;
}

namespace {

std::optional<Dataset> validation_data(const Dataset* val, const TrainerOptions& o) {
  if (!val || val->empty() || o.validate_every_epochs <= 0) return std::nullopt;
  if (o.validation_subset == 0 || o.validation_subset >= val->size()) return *val;
  std::vector<std::size_t> first(o.validation_subset);
  for (std::size_t i = 0; i < first.size(); ++i) first[i] = i;
  return val->subset(first);
}

}  // namespace

FitResult Trainer::fit(const Dataset& train, const Dataset* val, LoaderOptions loader_options) {
  FitResult result;
  options_.context.run([&] { result = fit_in_context(train, val, std::move(loader_options)); });
  return result;
}

FitResult Trainer::fit_in_context(const Dataset& train, const Dataset* val,
                                  LoaderOptions loader_options) {
  check_loader_dtype(loader_options.preprocess.dtype, model_.backend());
  stop_requested_.store(false);
  state_ = std::make_unique<State>(options_);
  State& st = *state_;
  st.logger = std::make_unique<detail::AsyncLogger>(options_.log_stream);
  // The settings come from the context the application built (nothing here
  // reads the environment).
  st.settings = options_.settings ? *options_.settings : options_.context.settings();
  const Precision precision = training_precision(model_.backend(), options_.precision);
  if (st.settings.precision != Precision::kFp32 && st.settings.precision != Precision::kAuto &&
      st.settings.precision != precision) {
    log_warn(std::string("STOKE_PRECISION=") + to_string(st.settings.precision) +
             ": applies to predict, eval and the Predictor; training computes in " +
             to_string(precision) + " (TrainerOptions::precision, stoke train --precision)");
  }
  // The step's convolutions (validation's too) in `precision` for this fit.
  const TrainingPrecisionScope precision_scope(model_.backend(), precision);
  if (precision != Precision::kFp32) {
    log_info(std::string("training in ") + to_string(precision) +
             " mixed precision: convolutions on rounded inputs with fp32 accumulation; fp32 "
             "weights, optimizer state, batch norm and loss");
  }
  const int first_epoch = options_.resume.empty() ? 0 : resume_from(options_.resume, st);
  if (st.resumed && st.resumed->loader_seed != loader_options.seed) {
    throw InvalidArgument(
        "Trainer::fit: resuming " + options_.resume + " needs the loader seed it ran with (" +
        std::to_string(st.resumed->loader_seed) + "), got " + std::to_string(loader_options.seed));
  }
  st.class_weights = resolve_class_weights(options_, train, model_.spec().classes);
  st.loader_seed = loader_options.seed;
  if (options_.balanced_sampler) loader_options.balanced_sampler = true;
  loader_options.profiler = &profiler_;
  loader_options.context = options_.context;
  if (!loader_options.max_image_pixels)
    loader_options.max_image_pixels = st.settings.max_image_pixels.value_or(0);
  st.dp = detail::DataParallel::make(options_, profiler_);
  FitResult result;
  try {
    if (st.dp) {
      st.dp->shard(loader_options);
      st.dp->broadcast_model(model_);
    }
    Loaders loaders{train, validation_data(val, options_), loader_options, {}, {}};
    if (!options_.best_checkpoint.empty() || !options_.stop_checkpoint.empty()) {
      st.model_info = describe_training(train, loaders.val_data ? &*loaders.val_data : nullptr,
                                        loader_options, options_);
      st.model_info.history = st.resumed_history;  // a resumed run continues its history
    }
    plan_fit(loaders);
    st.finite.capture(model_, *optimizer_, stop_metadata(train_state(first_epoch), first_epoch));
    for (int epoch = first_epoch; epoch < options_.epochs; ++epoch) {
      std::optional<EpochRecord> record = run_epoch_with_retries(epoch, loaders, result);
      if (!record || end_epoch(epoch, *record, result)) break;
    }
    record_corrupt_samples(loaders, result);
  } catch (const std::exception& e) {
    release_fit_resources();
    if (st.dp) st.dp->report(e);  // the other ranks' next collective fails naming it
    throw;
  }
  release_fit_resources();
  st.logger->flush();
  result.batch_size = st.batch;
  result.batch_multiplier = st.multiplier;
  result.out_of_memory_retries = st.oom.retries();
  result.best_val_accuracy = std::max(0.0, st.stopping.best());
  result.chrome_trace = st.chrome_trace;
  result.graph_steps = st.graphs.steps;
  result.graph_note = st.graphs.note;
  result.skipped_steps = st.scaler.skipped_steps();
  result.loss_scale = st.scaler.enabled() ? st.scaler.scale() : 0.0f;
  result.precision = precision;
  if (model_.backend().gpu()) {
    log_info("CUDA graphs: " + std::to_string(st.graphs.steps) + " steps replayed" +
             (st.graphs.note.empty() ? std::string() : "; eager steps because " + st.graphs.note));
  }
  return result;
}

// The device batch (auto: the largest the memory plan fits; resumed: the
// one the run ended with), the loaders, and the schedule's length.
void Trainer::plan_fit(Loaders& loaders) {
  State& st = *state_;
  if (!st.resumed) {
    st.batch = options_.batch_size;
    st.multiplier = options_.batch_multiplier;
    if (st.batch == 0) {
      const std::uint64_t cap = options_.max_memory ? options_.max_memory : (2ull << 30);
      st.batch = auto_batch_size(model_, optimizer_->slots(), cap);
      log_info("batch size auto: " + std::to_string(st.batch) + " (memory plan under " +
               std::to_string(cap >> 20) + " MiB)");
    }
  }
  loaders.build(st.batch);
  if (st.resumed || st.schedule.total_steps > 1) return;
  std::uint64_t batches = loaders.train_loader->batches_per_epoch();
  if (options_.max_steps_per_epoch > 0) {
    batches = std::min<std::uint64_t>(batches, options_.max_steps_per_epoch * st.multiplier);
  }
  st.schedule.total_steps = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(batches / st.multiplier) * options_.epochs);
}

// Model, optimizer state and the TrainState of a checkpoint fit() wrote;
// returns the epoch to continue.
int Trainer::resume_from(const std::string& path, State& st) {
  const nn::CheckpointInfo info = nn::load_checkpoint(path, model_, optimizer_.get());
  if (!TrainState::present(info.metadata) && info.optimizer_kind.empty()) {
    throw CorruptFile("Trainer::fit: cannot resume from '" + path +
                      "': a plain checkpoint, with neither trainer state (train.* metadata) nor "
                      "optimizer state; only stop and best checkpoints written by Trainer::fit "
                      "can be resumed");
  }
  if (!TrainState::present(info.metadata)) {
    throw InvalidArgument(
        "Trainer::fit: cannot resume from '" + path +
        "': it has no trainer state (train.* metadata); only stop and best checkpoints "
        "written by Trainer::fit carry one");
  }
  TrainState s = TrainState::from_metadata(info.metadata, "checkpoint '" + path + "'");
  check_resume_world(path, info.metadata, s);
  if (s.epoch >= options_.epochs) {  // a finished run: fit() would claim a model it never trains
    throw InvalidArgument("Trainer::fit: checkpoint '" + path + "' finished " +
                          std::to_string(s.epoch) +
                          " epochs; resuming it with epochs = " + std::to_string(options_.epochs) +
                          " leaves nothing to train (raise epochs to continue it)");
  }
  st.batch = s.batch_size;
  st.multiplier = s.batch_multiplier;
  st.step = s.step;
  st.schedule.total_steps = s.schedule_total_steps;
  st.stopping.restore(s.best_val_accuracy, s.epochs_without_improvement);
  detail::restore_dropout_streams(model_, s.dropout_streams, "checkpoint '" + path + "'");
  resume_loss_scaler(path, s.loss_scaler, st.scaler);
  log_info("resuming " + path + " at epoch " + std::to_string(s.epoch) + ", batch " +
           std::to_string(s.batch) + ", step " + std::to_string(s.step));
  if (info.optimizer_kind.empty()) {
    log_info("resuming " + path +
             ": it holds no optimizer state (a best or final model, not a stop checkpoint); the "
             "optimizer starts fresh, so the run continues but not bit-exactly");
  }
  st.resumed_history = history_before(info.metadata, s.epoch);
  st.resumed = s;
  return s.epoch;
}

std::optional<EpochRecord> Trainer::run_epoch_with_retries(int epoch, Loaders& loaders,
                                                           FitResult& result) {
  State& st = *state_;
  while (true) {
    try {
      EpochRecord record = run_epoch(epoch, *loaders.train_loader);
      const bool due = loaders.val_loader && detail::validation_due(options_.validate_every_epochs,
                                                                    epoch, options_.epochs);
      if (due && !stopping()) {
        auto span = profiler_.span(Stage::kValidation);
        // With graphs, a short last batch is padded to the training batch:
        // the activations the graphs captured stay where they are.
        const std::int64_t pad_to = st.runner && st.runner->keeps_graphs() ? st.batch : 0;
        detail::validate(model_, *loaders.val_loader, st.settings, record, &st.rings, pad_to);
      }
      // A rank with an empty share of the validation set has finished it too.
      st.epoch_finished =
          st.epoch_finished && (!due || record.validated || loaders.val_data->empty() ||
                                loaders.val_loader->batches_per_epoch() == 0);
      return record;
    } catch (const OutOfMemory& e) {
      release_step_memory();
      if (st.dp) throw;  // ranks change batch together or not at all: the run ends on every rank
      if (!st.oom.retry(e, &st.batch, &st.multiplier)) {
        save_stop_checkpoint(epoch, "out of memory", StopMemory::kExhausted);
        result.reason = StopReason::kOutOfMemory;
        result.message = e.what();
        return std::nullopt;
      }
      loaders.build(st.batch);
    } catch (const std::bad_alloc&) {
      save_stop_checkpoint(epoch, "out of host memory", StopMemory::kExhausted);
      throw OutOfMemory("fit: out of host memory in epoch " + std::to_string(epoch), 0, 0, 0);
    } catch (const Error& e) {
      if (!stop_for_data_error(epoch, e, loaders, result)) throw;
      return std::nullopt;
    }
  }
}

// A sample that cannot be read or decoded (the error names the file): the
// stop checkpoint is written; true when the corrupt-sample budget is spent
// (the run stops with kCorruptData), false when the error should propagate.
bool Trainer::stop_for_data_error(int epoch, const Error& e, Loaders& loaders, FitResult& result) {
  if (e.code() != ErrorCode::kDecode && e.code() != ErrorCode::kIo) return false;
  save_stop_checkpoint(epoch, "data error");
  const bool budget = loaders.train_loader->stats().corrupt_budget_exceeded ||
                      (loaders.val_loader && loaders.val_loader->stats().corrupt_budget_exceeded);
  if (!budget) return false;
  result.reason = StopReason::kCorruptData;
  result.message = e.what();
  return true;  // fit() records the corrupt samples when its loop ends
}

// Every sample skipped as corrupt (training and validation), into the result,
// the train log and the log stream.
void Trainer::record_corrupt_samples(Loaders& loaders, FitResult& result) {
  std::vector<CorruptSample> all = loaders.train_loader->stats().corrupt;
  if (loaders.val_loader) {
    for (auto& c : loaders.val_loader->stats().corrupt) all.push_back(std::move(c));
  }
  for (const auto& c : all)
    state_->logger->push("skipped corrupt sample " + c.path + ": " + c.reason);
  result.log.corrupt_samples = all;
  result.corrupt_samples = std::move(all);
}

bool Trainer::end_epoch(int epoch, EpochRecord& record, FitResult& result) {
  State& st = *state_;
  if (st.dp) {
    st.dp->reduce(record);
    st.dp->average_buffers(model_);
    agree_stop();
  }
  const bool writes = !st.dp || st.dp->writes_files();
  const std::string non_finite = !std::isfinite(record.train_loss)
                                     ? std::string("the training loss")
                                     : modelfile_detail::first_non_finite(model_, optimizer_.get());
  if (!non_finite.empty()) {
    save_stop_checkpoint(epoch, "diverged");  // the last finite state (save_stop_checkpoint)
    throw NonFinite("training diverged in epoch " + std::to_string(epoch + 1) + ": " + non_finite +
                    " is NaN or infinite (learning rate " +
                    std::to_string(options_.schedule.base_lr) +
                    "); the stop checkpoint holds the last finite state: lower the learning rate");
  }
  record.profile = profiler_.summary();
  result.log.epochs.push_back(record);
  record_epoch(st.model_info, record);
  if (record.validated) {
    if (callbacks_.on_validation) callbacks_.on_validation(record);
    if (st.stopping.observe(record.val_accuracy) && writes && !options_.best_checkpoint.empty()) {
      auto metadata = train_state(epoch).to_metadata();
      if (options_.communicator)
        metadata[kWorldSizeKey] = std::to_string(options_.communicator->world_size());
      metadata["epoch"] = std::to_string(epoch);
      metadata["val_accuracy"] = std::to_string(record.val_accuracy);
      if (!st.model_info.class_names.empty()) add_model_metadata(metadata, model_, st.model_info);
      // The best model is deployable: weights, buffers and metadata, no
      // optimizer state (the stop checkpoint keeps that for exact resume).
      detail::write_checkpoint(options_.best_checkpoint, model_, nullptr, metadata);
    }
  }
  if (callbacks_.on_epoch) callbacks_.on_epoch(record);
  char scaling[96] = "";
  if (st.scaler.enabled()) {
    std::snprintf(scaling, sizeof scaling, ", loss scale %g, %llu steps skipped", record.loss_scale,
                  static_cast<unsigned long long>(record.skipped_steps));
  }
  char line[352];
  std::snprintf(
      line, sizeof line, "epoch %d: loss %.4f acc %.4f%s, %.1f images/s, %.2f s%s", epoch,
      record.train_loss, record.train_accuracy,
      record.validated ? (", val acc " + std::to_string(record.val_accuracy)).c_str() : "",
      record.images_per_second, record.seconds, scaling);
  if (writes) st.logger->push(line);
  st.finite.capture(model_, *optimizer_, stop_metadata(train_state(epoch), epoch));
  if (stopping()) {
    result.reason = StopReason::kRequested;
    save_stop_checkpoint(epoch, "stop requested");
    return true;
  }
  if (st.stopping.exhausted()) {
    result.reason = StopReason::kEarlyStopping;
    return true;
  }
  return false;
}

// After an out-of-memory error, before the batch shrinks: the step's
// buffers, the graphs that point into them, and the rings sized for the old
// batch all go (the next epoch builds them anew, once).
void Trainer::release_step_memory() {
  State& st = *state_;
  st.runner.reset();
  st.rings.clear();
  model_.release_activations();
  model_.backend().release_workspace();
}

// The end of fit(): the graphs and the rings kept across its epochs (pinned
// staging, device slots) go; the epoch sums stay for train_state().
void Trainer::release_fit_resources() noexcept {
  State& st = *state_;
  st.runner.reset();
  st.rings.clear();
}

// A mid-epoch position is a position in each rank's shard: it continues only
// with the world size that wrote it (an epoch-end checkpoint fits any).
void Trainer::check_resume_world(const std::string& path,
                                 const std::map<std::string, std::string>& metadata,
                                 const TrainState& s) const {
  const auto it = metadata.find(kWorldSizeKey);
  const int written = it == metadata.end() ? 1 : std::atoi(it->second.c_str());
  const int now = options_.communicator ? options_.communicator->world_size() : 1;
  if (s.batch != 0 && written != now) {
    throw InvalidArgument("Trainer::fit: '" + path + "' stopped in the middle of epoch " +
                          std::to_string(s.epoch) + " of a run with " + std::to_string(written) +
                          " rank(s); it resumes only with " + std::to_string(written) +
                          " rank(s), not " + std::to_string(now) +
                          " (a checkpoint written at an epoch's end resumes with any number)");
  }
}

// Where the run stands after `epoch`: the next epoch when it finished,
// otherwise this epoch's position and partial sums.
TrainState Trainer::train_state(int epoch) const {
  const State& st = *state_;
  TrainState s;
  s.epoch = st.epoch_finished ? epoch + 1 : epoch;
  s.batch = st.epoch_finished ? 0 : st.applied;
  s.step = st.step;
  s.batch_size = st.batch;
  s.batch_multiplier = st.multiplier;
  s.schedule_total_steps = st.schedule.total_steps;
  s.loader_seed = st.loader_seed;
  s.best_val_accuracy = st.stopping.best();
  s.epochs_without_improvement = st.stopping.stale();
  s.dropout_streams = detail::dropout_streams(model_);
  s.loss_scaler = st.scaler.state();
  if (!st.epoch_finished && st.loss_sum.defined()) {
    s.epoch_skipped_steps = st.epoch_skipped;
    s.epoch_loss_sum = detail::read_scalar(st.loss_sum);
    s.epoch_correct_sum = detail::read_scalar(st.correct_sum);
    s.epoch_images = st.epoch_images;
    s.epoch_steps = st.epoch_steps;
  }
  return s;
}

void Trainer::save_stop_checkpoint(int epoch, const char* why, StopMemory memory) {
  if (state_->dp && !state_->dp->writes_files())
    return;  // rank 0 writes the run's one stop checkpoint
  auto metadata = stop_metadata(train_state(epoch), epoch);
  // A non-finite model is never written: the state where the run last stood
  // finite goes in its place (a resume with a lower rate continues from there).
  if (!modelfile_detail::first_non_finite(model_, optimizer_.get()).empty()) {
    if (!state_->finite.restore(model_, *optimizer_)) {
      log_error("no stop checkpoint: the model is not finite and no finite state was kept");
      return;
    }
    metadata = state_->finite.metadata();
  }
  metadata["stopped"] = why;
  if (options_.communicator)
    metadata[kWorldSizeKey] = std::to_string(options_.communicator->world_size());
  // Described at the start of fit (unless it failed before that).
  if (!state_->model_info.class_names.empty()) {
    ModelInfo info = state_->model_info;
    // Out of memory, a forward pass for the reference logits is the next
    // thing to fail, and oneDNN crashes where it cannot map its kernels:
    // the checkpoint goes without them (its predictor skips the self-check).
    if (memory == StopMemory::kExhausted) {
      if (!info.references.empty())
        log_warn("stop checkpoint: no reference logits (it is written because memory ran out)");
      info.references.clear();
    }
    add_model_metadata(metadata, model_, info);
  }
  detail::write_stop_checkpoint(options_.stop_checkpoint, model_, *optimizer_, metadata);
}

}  // namespace stoke
