// The trainer's per-fit state, shared by its epoch loop (trainer.cpp) and
// its epoch (epoch.cpp).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "prefetch/ring.hpp"
#include "stoke/model_file.hpp"
#include "stoke/train.hpp"
#include "train/async_logger.hpp"
#include "train/data_parallel.hpp"
#include "train/epoch_end.hpp"
#include "train/finite_snapshot.hpp"
#include "train/oom_policy.hpp"
#include "train/step_runner.hpp"

namespace stoke {

// Per-fit state: the plan (batch, schedule), the step runner, the epoch sums
// on the device, the position in the epoch, the epoch-end policies.
//
// The prefetch rings and the step runner (with its CUDA graphs) live for the
// whole fit: built at the first epoch, reused by every later epoch and every
// validation pass, released when the device batch changes (the out-of-memory
// policy halves it: release_step_memory) and when fit() ends.
struct Trainer::State {
  explicit State(const TrainerOptions& o)
      : schedule(o.schedule),
        oom(o.batch_size == 0),
        stopping(o.early_stopping_patience),
        scaler(o.loss_scale, o.precision) {}
  std::unique_ptr<detail::AsyncLogger> logger;
  Settings settings;
  int batch = 0;       // the device batch
  int multiplier = 1;  // device batches per optimizer step
  nn::LrSchedule schedule;
  detail::OutOfMemoryPolicy oom;
  detail::EarlyStopping stopping;
  // Loss scaling: kAuto is dynamic for fp16 training (TrainerOptions::precision), else off.
  LossScaler scaler;
  std::unique_ptr<detail::StepRunner> runner;  // its graphs replay across epochs
  // The rings' slots (pinned staging, device buffers at fixed addresses,
  // events): the graphs captured those addresses, so the rings stay as long.
  detail::PrefetchRings rings;
  detail::GraphStats graphs;
  Tensor loss_sum, correct_sum;  // (1) each: the epoch's sums
  std::string chrome_trace;
  std::uint64_t step = 0;       // optimizer steps so far
  std::uint64_t applied = 0;    // device batches of the epoch applied by the last update
  std::uint64_t consumed = 0;   // device batches of the epoch run
  bool epoch_finished = false;  // every batch applied and validation (if due) done
  std::uint64_t epoch_images = 0, epoch_steps = 0;  // the epoch's record at the last update
  std::uint64_t epoch_skipped = 0;                  // of epoch_steps, skipped by the scaler
  std::uint64_t loader_seed = 0;
  std::vector<float> class_weights;          // the loss's per-class weights; empty = none
  std::unique_ptr<detail::DataParallel> dp;  // null: one process
  // Data-parallel: the stop every rank agreed on at the last step or epoch end.
  // A rank never reads its own request directly: ranks see a signal at
  // different steps, and one that acted alone would leave the others inside a
  // collective it never joins.
  bool stop_agreed = false;
  std::optional<TrainState> resumed;  // continues the first epoch (position and sums)
  ModelInfo model_info;  // what every checkpoint of this fit says about the model (lib/deploy)
  std::vector<std::string> resumed_history;  // the resumed checkpoint's epochs before this fit
  detail::FiniteSnapshot finite;             // what a diverged run's stop checkpoint holds
};

// The loaders for the current device batch (rebuilt when it halves).
struct Trainer::Loaders {
  const Dataset& train;
  std::optional<Dataset> val_data;
  LoaderOptions options;
  std::optional<Loader> train_loader, val_loader;

  void build(int batch) {
    options.batch_size = static_cast<std::size_t>(batch);
    train_loader.emplace(train, options);
    if (!val_data) return;
    LoaderOptions vo = options;
    vo.shuffle = false;
    vo.drop_last = false;
    vo.augment = {};
    vo.shard_whole_steps = false;  // data-parallel validation sees every sample once
    vo.profiler = nullptr;         // validation is one span of its own
    // A file cache holds one dataset: the validation set gets PATH.val beside
    // the training set's PATH (one file for both would be rebuilt by each).
    const CacheSpec cache = options.cache ? *options.cache : options.context.settings().cache;
    if (cache.kind == CacheSpec::Kind::kFile)
      vo.cache = CacheSpec{CacheSpec::Kind::kFile, 0, cache.path + ".val"};
    val_loader.emplace(*val_data, vo);
  }
};

}  // namespace stoke
