// One epoch of the trainer: batches from the prefetch ring through the step
// runner, from the epoch's start or a resumed position, into the epoch's
// record.
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "stoke/log.hpp"
#include "stoke/train.hpp"
#include "train/batch_io.hpp"
#include "train/fit_state.hpp"

namespace stoke {

EpochRecord Trainer::run_epoch(int epoch, Loader& loader) {
  State& st = *state_;
  Backend& be = model_.backend();
  if (!st.loss_sum.defined()) {
    st.loss_sum = Tensor(be, {1});
    st.correct_sum = Tensor(be, {1});
  }
  EpochRecord record;
  record.epoch = epoch;
  begin_epoch(record);
  if (!st.runner) {
    detail::StepEnv env{
        model_,
        *optimizer_,
        profiler_,
        st.loss_sum,
        st.correct_sum,
        st.graphs,
        st.dp ? st.dp->gradient_hook(callbacks_.on_gradients) : callbacks_.on_gradients,
        st.class_weights,
        st.dp ? st.dp->backward_progress(model_) : nn::Model::GradientsReady{},
        st.scaler.enabled() ? &st.scaler : nullptr};
    st.runner = detail::make_step_runner(std::move(env), st.multiplier, st.settings.gpu_graph,
                                         st.settings.gpu_streams);
  }
  profiler_.start();
  run_batches(epoch, loader, record);
  be.synchronize();
  if (GpuBackend* gpu = be.gpu()) profiler_.add_device_busy(gpu->take_busy_seconds(true));
  if (st.runner->pending() != 0) {
    log_warn("epoch " + std::to_string(epoch) + " ended with " +
             std::to_string(st.runner->pending()) + " of " + std::to_string(st.multiplier) +
             " accumulated device batches; their gradients are discarded, not applied");
    st.runner->discard_pending();
  }
  record.loss_scale = st.scaler.enabled() ? st.scaler.scale() : 0.0;
  const auto summary = profiler_.summary();
  record.seconds = summary.wall_seconds;
  record.images_per_second = summary.images_per_second();
  if (record.images > 0) {
    record.train_loss = detail::read_scalar(st.loss_sum) / static_cast<double>(record.images);
    record.train_accuracy =
        detail::read_scalar(st.correct_sum) / static_cast<double>(record.images);
  }
  if (options_.trace_steps > 0) st.chrome_trace = profiler_.chrome_trace();
  return record;
}

// The epoch's sums and position: zero, or where a resumed run stopped.
void Trainer::begin_epoch(EpochRecord& record) {
  State& st = *state_;
  Backend& be = model_.backend();
  const std::optional<TrainState> resumed = std::exchange(st.resumed, std::nullopt);
  const float loss = resumed ? resumed->epoch_loss_sum : 0.0f;
  const float correct = resumed ? resumed->epoch_correct_sum : 0.0f;
  be.fill(st.loss_sum, loss);
  be.fill(st.correct_sum, correct);
  st.applied = resumed ? resumed->batch : 0;
  st.consumed = st.applied;
  record.images = resumed ? resumed->epoch_images : 0;
  record.steps = resumed ? resumed->epoch_steps : 0;
  record.skipped_steps = resumed ? resumed->epoch_skipped_steps : 0;
  st.epoch_images = record.images;
  st.epoch_steps = record.steps;
  st.epoch_skipped = record.skipped_steps;
  st.epoch_finished = false;
}

void Trainer::run_batches(int epoch, Loader& loader, EpochRecord& record) {
  State& st = *state_;
  Backend& be = model_.backend();
  GpuBackend* gpu = be.gpu();
  const PrefetchOptions po =
      detail::prefetch_options(st.settings, loader, static_cast<std::uint64_t>(epoch),
                               options_.max_steps_per_epoch * st.multiplier, gpu, st.applied);
  if (st.applied > 0 && po.batches_per_epoch == 0) {  // resumed after the epoch's last step
    st.epoch_finished = true;
    return;
  }
  const auto shape = loader.output_shape();
  st.runner->begin_epoch(po.batch_size,
                         {static_cast<std::int64_t>(shape[1]), static_cast<std::int64_t>(shape[2]),
                          static_cast<std::int64_t>(shape[3])});
  std::optional<Prefetcher> ring;  // this epoch's producer, on the fit's slots
  detail::open_prefetcher(ring, po, loader, be, st.applied, &st.rings);
  // A stop request ends the epoch at an optimizer step, never between the
  // device batches of one (the stop checkpoint then resumes exactly).
  while (!(stopping() && st.runner->pending() == 0)) {
    std::optional<Batch> batch;
    {
      auto span = profiler_.span(Stage::kDataWait);
      batch = ring->next();
    }
    if (!batch) {
      st.epoch_finished = true;
      break;
    }
    detail::DeviceBusySpan busy(gpu, profiler_);
    const auto n = static_cast<std::uint64_t>(batch->count());
    const float lr = st.schedule.lr(static_cast<std::int64_t>(st.step));
    const bool stepped = st.runner->run(*batch, busy, lr);
    record.images += n;
    ++st.consumed;
    if (stepped) finish_step(epoch, record, lr);
  }
  ring->stop();
  profiler_.set_memory(detail::memory_figures(be, gpu, ring->stats()));
}

bool Trainer::stopping() const noexcept {
  return state_ && state_->dp ? state_->stop_agreed : stop_requested_.load();
}

void Trainer::agree_stop() {
  State& st = *state_;
  st.stop_agreed = st.dp->agree_stop(stop_requested_.load());
  if (st.stop_agreed) stop_requested_.store(true);
}

void Trainer::finish_step(int epoch, EpochRecord& record, float lr) {
  State& st = *state_;
  ++st.step;
  ++record.steps;
  st.applied = st.consumed;
  st.epoch_images = record.images;
  st.epoch_steps = record.steps;
  StepInfo info{epoch, st.step, 0.0f, 0.0f, false, lr};
  if (st.scaler.enabled()) {
    info.skipped = st.runner->skipped();
    info.loss_scale = st.scaler.scale();
    if (info.skipped) {
      ++record.skipped_steps;
      char line[200];
      std::snprintf(line, sizeof line,
                    "epoch %d step %llu: NaN or infinite gradients, step skipped; loss scale now "
                    "%g (%llu skipped)",
                    epoch, static_cast<unsigned long long>(st.step), info.loss_scale,
                    static_cast<unsigned long long>(st.scaler.skipped_steps()));
      st.logger->push(line);
    }
  }
  st.epoch_skipped = record.skipped_steps;
  if (options_.log_every_steps > 0 &&
      st.step % static_cast<std::uint64_t>(options_.log_every_steps) == 0) {
    auto span = profiler_.span(Stage::kLogging);
    info.loss = detail::read_scalar(st.runner->loss());
    info.accuracy =
        detail::read_scalar(st.runner->correct()) / static_cast<float>(st.runner->batch());
    info.has_loss = true;
    char line[160];
    std::snprintf(line, sizeof line, "epoch %d step %llu: loss %.4f acc %.4f lr %.5f", epoch,
                  static_cast<unsigned long long>(st.step), info.loss, info.accuracy, lr);
    st.logger->push(line);
  }
  if (callbacks_.on_step) callbacks_.on_step(info);
  if (st.dp) {
    st.dp->check_identical(model_);
    agree_stop();
  }
}

}  // namespace stoke
