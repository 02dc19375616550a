// Exact resume: a run stopped (at an epoch's end or in the middle of one) and
// resumed from its stop checkpoint ends with the same weights, bit for bit,
// as a run that never stopped; the trainer state round-trips through a
// checkpoint's metadata; bad resumes are refused with the reason.
#include <gtest/gtest.h>

#include <cstring>

#include "stoke/deploy.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "unit/tiny_dataset.hpp"

namespace stoke {
namespace {

using testing::TinyDataset;
namespace fs = std::filesystem;

class TrainResume : public TinyDataset {
 protected:
  static constexpr std::int64_t kSteps = kCount / 16;  // per epoch at batch 16
  struct Outcome {
    FitResult result;
    std::vector<float> parameters;
    std::vector<float> buffers;
    std::int64_t optimizer_steps = 0;
  };
  // A fit of a fresh model (seed `init`); `stop_at` (an optimizer step, or
  // -(epoch + 1) for the end of an epoch) requests a stop there.
  Outcome run(std::uint64_t init, std::int64_t stop_at, const std::string& resume = {}) {
    auto m = nn::build_model(cpu_backend(), spec_, init);
    TrainerOptions o = options_;
    o.resume = resume;
    Callbacks cb;
    Trainer* self = nullptr;
    cb.on_step = [&](const StepInfo& info) {
      if (static_cast<std::int64_t>(info.step) == stop_at) self->request_stop();
    };
    cb.on_epoch = [&](const EpochRecord& r) {
      if (-(r.epoch + 1) == stop_at) self->request_stop();
    };
    Trainer trainer(*m, o, cb);
    self = &trainer;
    Outcome out{trainer.fit(data_, &data_, loader_), {}, {}, trainer.optimizer().steps()};
    out.parameters = m->parameters().to_vector();
    for (const auto& b : m->named_buffers()) {
      const auto v = b.tensor.to_vector();
      out.buffers.insert(out.buffers.end(), v.begin(), v.end());
    }
    return out;
  }
  static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }
  void expect_resume_is_exact(std::int64_t stop_at) {
    options_.epochs = 4;
    options_.stop_checkpoint = dir_ / "stop.ckpt";
    const Outcome straight = run(7, 0);
    const Outcome first = run(7, stop_at);
    ASSERT_EQ(first.result.reason, StopReason::kRequested);
    ASSERT_TRUE(fs::exists(options_.stop_checkpoint));
    EXPECT_FALSE(same_bits(first.parameters, straight.parameters))
        << "the stop came too late to test anything";
    const Outcome resumed = run(99, 0, options_.stop_checkpoint.string());
    EXPECT_EQ(resumed.result.reason, StopReason::kCompleted);
    EXPECT_TRUE(same_bits(resumed.parameters, straight.parameters));
    EXPECT_TRUE(same_bits(resumed.buffers, straight.buffers));
    EXPECT_EQ(resumed.optimizer_steps, straight.optimizer_steps);
    // The resumed epochs' records (a partial epoch's sums continue) equal
    // the straight run's.
    const EpochRecord& a = resumed.result.log.epochs.back();
    const EpochRecord& b = straight.result.log.epochs.back();
    EXPECT_EQ(a.epoch, 3);
    EXPECT_EQ(a.steps, b.steps);
    EXPECT_EQ(a.train_loss, b.train_loss);
    EXPECT_EQ(a.val_accuracy, b.val_accuracy);
    EXPECT_EQ(resumed.result.log.epochs.front().train_loss,
              straight.result.log
                  .epochs[static_cast<std::size_t>(resumed.result.log.epochs.front().epoch)]
                  .train_loss);
  }
};

TEST_F(TrainResume, TwoEpochsThenTwoResumedEqualFourStraight) {
  expect_resume_is_exact(-2);  // stop after epoch 1 (0-based): epochs 2, 3 resumed
}

TEST_F(TrainResume, AStopInTheMiddleOfAnEpochResumesExactly) {
  expect_resume_is_exact(kSteps + 5);  // in epoch 1
}

// Adam's moments and bias corrections, a cosine schedule with warm-up,
// gradient accumulation and random augmentation all continue where they were.
TEST_F(TrainResume, AdamCosineAccumulationAndAugmentationResumeExactly) {
  options_.optimizer = OptimizerKind::kAdam;
  options_.schedule.kind = nn::ScheduleKind::kCosine;
  options_.schedule.base_lr = 0.01f;
  options_.schedule.warmup_steps = 3;
  options_.batch_size = 8;
  options_.batch_multiplier = 2;
  loader_.augment.hflip_probability = 0.5f;
  loader_.augment.brightness = 0.1f;
  loader_.seed = 5;
  expect_resume_is_exact(kSteps + 3);  // 12 steps per epoch at 8 x 2
}

// Dropout's masks continue too (the layers' draw counter is in the state).
TEST_F(TrainResume, DropoutMasksContinueAfterAResume) {
  spec_.dropout = 0.3f;
  expect_resume_is_exact(kSteps + 4);
}

TEST_F(TrainResume, TheStateRoundTripsThroughCheckpointMetadata) {
  TrainState s;
  s.epoch = 3;
  s.batch = 7;
  s.step = 41;
  s.batch_size = 16;
  s.batch_multiplier = 2;
  s.schedule_total_steps = 96;
  s.loader_seed = 1234567890123ull;
  s.best_val_accuracy = 0.1 + 0.2;  // not a short decimal
  s.epochs_without_improvement = 1;
  s.epoch_loss_sum = 1.0f / 3.0f;
  s.epoch_correct_sum = 77.0f;
  s.epoch_images = 112;
  s.epoch_steps = 7;
  s.dropout_streams = {18446744073709551615ull, 5, 3, 0};
  const auto m = s.to_metadata();
  ASSERT_TRUE(TrainState::present(m));
  const TrainState r = TrainState::from_metadata(m, "here");
  EXPECT_EQ(r.epoch, 3);
  EXPECT_EQ(r.batch, 7u);
  EXPECT_EQ(r.step, 41u);
  EXPECT_EQ(r.loader_seed, s.loader_seed);
  EXPECT_EQ(r.best_val_accuracy, s.best_val_accuracy);
  EXPECT_EQ(r.epoch_loss_sum, s.epoch_loss_sum);
  EXPECT_EQ(r.epoch_images, 112u);
  EXPECT_EQ(r.dropout_streams, s.dropout_streams);
  TrainState none;
  none.batch_size = 1;
  EXPECT_TRUE(TrainState::from_metadata(none.to_metadata(), "here").dropout_streams.empty());
  auto broken = m;
  broken.erase("train.step");
  try {
    TrainState::from_metadata(broken, "checkpoint 'x'");
    FAIL() << "a missing key was accepted";
  } catch (const CorruptFile& e) {
    EXPECT_NE(std::string(e.what()).find("train.step"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("checkpoint 'x'"), std::string::npos) << e.what();
  }
  broken = m;
  broken["train.batch"] = "7x";
  EXPECT_THROW(TrainState::from_metadata(broken, "here"), CorruptFile);
  broken = m;
  broken["train.dropout_streams"] = "1,,2";
  EXPECT_THROW(TrainState::from_metadata(broken, "here"), CorruptFile);
  EXPECT_FALSE(TrainState::present({}));
}

TEST_F(TrainResume, ResumesThatCannotBeExactAreRefused) {
  auto m = model();
  nn::save_checkpoint((dir_ / "plain.ckpt").string(), *m, nullptr);
  TrainerOptions o = options_;
  o.resume = (dir_ / "plain.ckpt").string();
  {
    Trainer trainer(*m, o);
    EXPECT_THROW(trainer.fit(data_, nullptr, loader_), CorruptFile);  // no optimizer state
  }
  Trainer writer(*m, options_);
  nn::save_checkpoint((dir_ / "nostate.ckpt").string(), *m, &writer.optimizer());
  o.resume = (dir_ / "nostate.ckpt").string();
  try {
    Trainer trainer(*m, o);
    trainer.fit(data_, nullptr, loader_);
    FAIL() << "a checkpoint without trainer state was resumed";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("trainer state"), std::string::npos) << e.what();
  }
  // A stop checkpoint resumed with another loader seed would draw other batches.
  options_.stop_checkpoint = dir_ / "stop.ckpt";
  options_.epochs = 2;
  Callbacks cb;
  Trainer* self = nullptr;
  cb.on_step = [&](const StepInfo& info) {
    if (info.step == 2) self->request_stop();
  };
  Trainer stopped(*m, options_, cb);
  self = &stopped;
  stopped.fit(data_, nullptr, loader_);
  o.resume = options_.stop_checkpoint.string();
  LoaderOptions other = loader_;
  other.seed = 42;
  Trainer trainer(*m, o);
  EXPECT_THROW(trainer.fit(data_, nullptr, other), InvalidArgument);
}

// A resumed run's checkpoints carry the whole run's history: the epochs of
// the checkpoint it resumed, then its own.
TEST_F(TrainResume, TheResumedRunsCheckpointsTellTheWholeHistory) {
  options_.epochs = 4;
  options_.stop_checkpoint = dir_ / "stop.ckpt";
  run(7, -2);  // epochs 0 and 1, then a stop
  const auto first = nn::read_checkpoint_info(options_.stop_checkpoint.string()).metadata;
  ASSERT_EQ(history_before(first, 100).size(), 2u) << "the stop checkpoint carries no history";
  const fs::path resumed_from = dir_ / "first.ckpt";
  fs::rename(options_.stop_checkpoint, resumed_from);
  run(99, -4, resumed_from.string());  // epochs 2 and 3, then a stop
  const auto lines =
      history_before(nn::read_checkpoint_info(options_.stop_checkpoint.string()).metadata, 100);
  ASSERT_EQ(lines.size(), 4u);
  for (std::size_t e = 0; e < lines.size(); ++e)
    EXPECT_EQ(lines[e].substr(0, 2), std::to_string(e) + ",") << lines[e];
  EXPECT_EQ(lines[0], history_before(first, 100)[0]);
  EXPECT_EQ(history_before(first, 1).size(), 1u);
  // The last checkpoint finished all 4 epochs: resuming it trains nothing, and says so.
  try {
    run(5, 0, options_.stop_checkpoint.string());
    FAIL() << "a finished checkpoint was resumed";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("nothing to train"), std::string::npos) << e.what();
  }
}

// fit() leaves its options as given; the batch it ended with is in the result.
TEST_F(TrainResume, FitDoesNotChangeItsOptions) {
  auto m = model();
  options_.batch_size = 0;
  options_.max_memory = m->memory_plan(32, 1).total();
  options_.max_steps_per_epoch = 2;
  options_.schedule.total_steps = 0;
  options_.settings.reset();  // read from the environment by fit(), not written back
  Trainer trainer(*m, options_);
  const auto result = trainer.fit(data_, nullptr, loader_);
  EXPECT_EQ(result.batch_size, 32);
  EXPECT_EQ(trainer.options().batch_size, 0);
  EXPECT_EQ(trainer.options().schedule.total_steps, 0);
  EXPECT_FALSE(trainer.options().settings.has_value());
}

}  // namespace
}  // namespace stoke
