// Dynamic loss scaling (stoke/loss_scale.hpp, docs/precision.md): the
// scaler's update rule (GradScaler's), its options and their refusal; and in
// the trainer: an infinity injected into one step's gradients (through the
// gradient hook, before the scaler's check) skips exactly that step and
// halves the scale, the scale grows after N clean steps, a power-of-two scale
// without overflow trains the same weights bit for bit as no scaling, and a
// stopped run resumes its scaler exactly.
#include "stoke/loss_scale.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "unit/fake_gpu_backend.hpp"
#include "unit/tiny_dataset.hpp"
#include "unit/trainer_runs.hpp"

namespace stoke {
namespace {

using testing::TinyDataset;
using LossScaleFakeGpu = testing::TrainerRuns;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

LossScaleOptions dynamic(float init = 65536.0f, std::int64_t interval = 2000) {
  LossScaleOptions o;
  o.mode = LossScaleMode::kDynamic;
  o.init_scale = init;
  o.growth_interval = interval;
  return o;
}

// InvalidArgument whose message names `option`.
void expect_refused(const LossScaleOptions& o, const std::string& option) {
  try {
    LossScaler scaler(o);
    ADD_FAILURE() << option << " accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
  }
}

TEST(LossScaler, DefaultsAreGradScalersAndAutoIsOffInFp32) {
  const LossScaleOptions o;
  EXPECT_EQ(o.init_scale, 65536.0f);
  EXPECT_EQ(o.growth_factor, 2.0f);
  EXPECT_EQ(o.backoff_factor, 0.5f);
  EXPECT_EQ(o.growth_interval, 2000);
  EXPECT_EQ(o.mode, LossScaleMode::kAuto);
  const LossScaler fp32(o, Precision::kFp32);
  EXPECT_FALSE(fp32.enabled());
  EXPECT_EQ(fp32.scale(), 1.0f);
  EXPECT_EQ(fp32.state().scale, 0.0f);
  const LossScaler fp16(o, Precision::kFp16);
  EXPECT_EQ(fp16.mode(), LossScaleMode::kDynamic);
  EXPECT_EQ(fp16.scale(), 65536.0f);
  EXPECT_STREQ(to_string(LossScaleMode::kFixed), "fixed");
}

TEST(LossScaler, BacksOffOnNonFiniteAndGrowsAfterTheInterval) {
  LossScaler s(dynamic(1024.0f, 3));
  EXPECT_TRUE(s.update(true));
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.growth_tracker(), 2);
  EXPECT_FALSE(s.update(false));  // skip: halve, the clean count restarts
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  EXPECT_EQ(s.skipped_steps(), 1u);
  EXPECT_EQ(s.inverse_scale(), 1.0f / 512.0f);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 512.0f);
  EXPECT_TRUE(s.update(true));  // the third clean step in a row
  EXPECT_EQ(s.scale(), 1024.0f);
  EXPECT_EQ(s.growth_tracker(), 0);
  // Growth that would overflow float is not taken (GradScaler keeps the scale).
  LossScaler top(dynamic(std::ldexp(1.0f, 127), 1));
  EXPECT_TRUE(top.update(true));
  EXPECT_EQ(top.scale(), std::ldexp(1.0f, 127));
  EXPECT_EQ(top.growth_tracker(), 0);
}

TEST(LossScaler, FixedSkipsWithoutChangingTheScaleAndAZeroScaleIsAnError) {
  LossScaleOptions o = dynamic(8.0f, 1);
  o.mode = LossScaleMode::kFixed;
  LossScaler fixed(o);
  EXPECT_FALSE(fixed.update(false));
  EXPECT_TRUE(fixed.update(true));
  EXPECT_TRUE(fixed.update(true));
  EXPECT_EQ(fixed.scale(), 8.0f);
  EXPECT_EQ(fixed.skipped_steps(), 1u);
  LossScaler tiny(dynamic(std::numeric_limits<float>::denorm_min()));
  EXPECT_THROW(tiny.update(false), NonFinite);
  LossScaler off(LossScaleOptions{});
  EXPECT_TRUE(off.update(false));  // off: nothing is skipped or counted
  EXPECT_EQ(off.skipped_steps(), 0u);
}

TEST(LossScaler, BadOptionsAreRefusedByName) {
  for (float bad : {0.0f, -1.0f, kNaN, kInf}) expect_refused(dynamic(bad), "init_scale");
  expect_refused(dynamic(1.0f, 0), "growth_interval");
  expect_refused(dynamic(1.0f, -5), "growth_interval");
  LossScaleOptions o = dynamic();
  o.growth_factor = 1.0f;
  expect_refused(o, "growth_factor");
  o = dynamic();
  for (float bad : {1.0f, 0.0f, kNaN}) {
    o.backoff_factor = bad;
    expect_refused(o, "backoff_factor");
  }
  // Refused even when the mode leaves the scaler off: the option is wrong.
  o = LossScaleOptions{};
  o.init_scale = kNaN;
  expect_refused(o, "init_scale");
}

TEST(LossScaler, ParsesTheCommandLineForms) {
  EXPECT_EQ(parse_loss_scale("dynamic").mode, LossScaleMode::kDynamic);
  EXPECT_EQ(parse_loss_scale("off").mode, LossScaleMode::kOff);
  EXPECT_EQ(parse_loss_scale("auto").mode, LossScaleMode::kAuto);
  const LossScaleOptions fixed = parse_loss_scale("1024", dynamic(1.0f, 7));
  EXPECT_EQ(fixed.mode, LossScaleMode::kFixed);
  EXPECT_EQ(fixed.init_scale, 1024.0f);
  EXPECT_EQ(fixed.growth_interval, 7);
  for (const char* bad : {"0", "-2", "nan", "inf", "", "2x", "fp16"}) {
    try {
      parse_loss_scale(bad, {}, "--loss-scale");
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("--loss-scale"), std::string::npos) << e.what();
    }
  }
}

TEST(LossScaler, RestoresAStateAndRefusesABadOne) {
  LossScaler s(dynamic(4.0f, 10));
  s.restore({0.125f, 6, 9}, "here");
  EXPECT_EQ(s.scale(), 0.125f);
  EXPECT_EQ(s.growth_tracker(), 6);
  EXPECT_EQ(s.skipped_steps(), 9u);
  EXPECT_THROW(s.restore({kNaN, 0, 0}, "here"), CorruptFile);
  EXPECT_THROW(s.restore({0.0f, 0, 0}, "here"), CorruptFile);
  EXPECT_THROW(s.restore({1.0f, -1, 0}, "here"), CorruptFile);
}

class LossScaleTraining : public TinyDataset {
 protected:
  static constexpr std::int64_t kSteps = kCount / 16;  // per epoch at batch 16
  static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }
  static std::vector<float> optimizer_state(Trainer& t) {
    std::vector<float> out;
    for (const auto& s : t.optimizer().state()) {
      const auto v = s.tensor.to_vector();
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  }
  struct Run {
    FitResult result;
    std::vector<float> parameters;
    std::vector<StepInfo> steps;
    std::int64_t optimizer_steps = 0;
  };
  // A fit of a fresh model (seed 7) that writes +inf into gradient element 0
  // at the update points numbered in `inject` (1-based, counted over the
  // whole run: `first_step` is where a resumed run starts), and asks to stop
  // after optimizer step `stop_at` (0 = never).
  Run fit(const std::vector<std::int64_t>& inject, std::int64_t stop_at = 0,
          const std::string& resume = {}, std::int64_t first_step = 0) {
    auto m = nn::build_model(cpu_backend(), spec_, 7);
    TrainerOptions o = options_;
    o.resume = resume;
    Trainer* self = nullptr;
    std::int64_t updates = first_step;
    Run run;
    Callbacks cb;
    cb.on_gradients = [&](Tensor& g) {
      ++updates;
      if (std::find(inject.begin(), inject.end(), updates) != inject.end())
        g.data<float>()[0] = kInf;
    };
    cb.on_step = [&](const StepInfo& info) {
      run.steps.push_back(info);
      if (static_cast<std::int64_t>(info.step) == stop_at) self->request_stop();
    };
    Trainer trainer(*m, o, cb);
    self = &trainer;
    run.result = trainer.fit(data_, nullptr, loader_);
    run.parameters = m->parameters().to_vector();
    run.optimizer_steps = trainer.optimizer().steps();
    return run;
  }
};

// The step whose gradients hold an infinity changes nothing the optimizer
// owns (weights, Adam's moments, its step count: compared bit for bit with
// what they were when the gradients came), the scale halves, and the next
// step trains again.
TEST_F(LossScaleTraining, AnInjectedInfinitySkipsExactlyThatStepAndHalvesTheScale) {
  options_.optimizer = OptimizerKind::kAdam;
  options_.schedule.base_lr = 0.01f;
  options_.epochs = 1;
  options_.loss_scale = dynamic(65536.0f, 1000);
  constexpr std::int64_t kBad = 5;
  auto m = nn::build_model(cpu_backend(), spec_, 7);
  Trainer* self = nullptr;
  std::int64_t updates = 0;
  std::vector<float> weights_before, state_before;
  std::int64_t steps_before = -1;
  std::vector<StepInfo> infos;
  Callbacks cb;
  cb.on_gradients = [&](Tensor& g) {
    ++updates;
    weights_before = m->parameters().to_vector();
    state_before = optimizer_state(*self);
    steps_before = self->optimizer().steps();
    if (updates == kBad) g.data<float>()[0] = kInf;
  };
  cb.on_step = [&](const StepInfo& info) {
    infos.push_back(info);
    const bool weights_same = same_bits(m->parameters().to_vector(), weights_before);
    const bool state_same = same_bits(optimizer_state(*self), state_before);
    const bool count_same = self->optimizer().steps() == steps_before;
    if (static_cast<std::int64_t>(info.step) == kBad) {
      EXPECT_TRUE(weights_same && state_same && count_same) << "the skipped step changed state";
    } else {
      EXPECT_FALSE(weights_same) << "step " << info.step << " did not train";
      EXPECT_FALSE(count_same) << "step " << info.step << " not counted by the optimizer";
    }
  };
  Trainer trainer(*m, options_, cb);
  self = &trainer;
  const FitResult r = trainer.fit(data_, nullptr, loader_);
  ASSERT_EQ(infos.size(), static_cast<std::size_t>(kSteps));
  for (const auto& info : infos) {
    const bool bad = static_cast<std::int64_t>(info.step) == kBad;
    EXPECT_EQ(info.skipped, bad) << info.step;
    EXPECT_EQ(info.loss_scale, info.step < kBad ? 65536.0f : 32768.0f) << info.step;
  }
  EXPECT_EQ(trainer.optimizer().steps(), kSteps - 1);
  EXPECT_EQ(r.skipped_steps, 1u);
  EXPECT_EQ(r.loss_scale, 32768.0f);
  ASSERT_EQ(r.log.epochs.size(), 1u);
  EXPECT_EQ(r.log.epochs[0].steps, static_cast<std::uint64_t>(kSteps));
  EXPECT_EQ(r.log.epochs[0].skipped_steps, 1u);
  EXPECT_EQ(r.log.epochs[0].loss_scale, 32768.0);
  const std::string json = r.log.to_json();
  EXPECT_NE(json.find("\"skipped_steps\":1,\"loss_scale\":32768"), std::string::npos) << json;
  EXPECT_NE(r.log.to_csv().find("device_busy_seconds,skipped_steps,loss_scale\n"),
            std::string::npos);
}

// Scaling by powers of two is exact: the loss gradient times S, every
// backward op linear in it (sums and products of S-scaled values round as
// the unscaled ones do, S times), then 1/S. Without an overflow the weights
// equal an unscaled run's bit for bit, while the scale doubles every 4 steps.
TEST_F(LossScaleTraining, APowerOfTwoScaleWithoutOverflowTrainsTheSameWeightsBitForBit) {
  options_.epochs = 2;
  const Run plain = fit({});
  EXPECT_EQ(plain.result.loss_scale, 0.0f);
  EXPECT_EQ(plain.result.log.epochs[0].loss_scale, 0.0);
  options_.loss_scale = dynamic(65536.0f, 4);
  const Run scaled = fit({});
  EXPECT_TRUE(same_bits(scaled.parameters, plain.parameters));
  EXPECT_EQ(scaled.result.skipped_steps, 0u);
  const std::int64_t steps = 2 * kSteps;
  EXPECT_EQ(scaled.result.loss_scale, std::ldexp(65536.0f, static_cast<int>(steps / 4)));
  for (const auto& info : scaled.steps) {  // the scale for the next step
    EXPECT_EQ(info.loss_scale, std::ldexp(65536.0f, static_cast<int>(info.step / 4))) << info.step;
  }
  EXPECT_EQ(scaled.result.log.epochs[0].loss_scale,
            std::ldexp(65536.0, static_cast<int>(kSteps / 4)));
  // A scale that is not a power of two rounds: the comparison sees the scaling.
  options_.loss_scale = parse_loss_scale("1000");
  const Run rounded = fit({});
  EXPECT_FALSE(same_bits(rounded.parameters, plain.parameters));
  EXPECT_EQ(rounded.result.loss_scale, 1000.0f);
  // The same with Adam, gradient accumulation and class weights.
  options_.optimizer = OptimizerKind::kAdam;
  options_.schedule.base_lr = 0.01f;
  options_.batch_size = 8;
  options_.batch_multiplier = 2;
  options_.class_weights = {1.0f, 3.0f};
  options_.loss_scale.mode = LossScaleMode::kOff;
  const Run adam_plain = fit({});
  options_.loss_scale = dynamic(1024.0f, 5);
  const Run adam_scaled = fit({});
  EXPECT_TRUE(same_bits(adam_scaled.parameters, adam_plain.parameters));
  EXPECT_GT(adam_scaled.result.loss_scale, 1024.0f);
}

// A run stopped in the middle of an epoch and resumed from its stop
// checkpoint equals one that never stopped: the scaler's scale, clean-step
// count and skipped count continue (infinities injected before and after the
// stop, a growth interval that straddles it).
TEST_F(LossScaleTraining, AResumedRunContinuesTheScalerBitForBit) {
  options_.epochs = 3;
  options_.stop_checkpoint = dir_ / "stop.ckpt";
  options_.loss_scale = dynamic(256.0f, 5);
  // Steps 5 and 10 grow the scale to 1024, step 13 halves it to 512, and
  // the stop after step 16 leaves 3 clean steps counted toward the next growth.
  const std::vector<std::int64_t> inject = {kSteps + 1, 2 * kSteps + 1};
  const std::int64_t stop = kSteps + 4;
  const Run straight = fit(inject);
  EXPECT_EQ(straight.result.skipped_steps, 2u);
  const Run first = fit(inject, stop);
  ASSERT_EQ(first.result.reason, StopReason::kRequested);
  EXPECT_FALSE(same_bits(first.parameters, straight.parameters));
  const auto metadata = nn::read_checkpoint_info(options_.stop_checkpoint).metadata;
  const TrainState state = TrainState::from_metadata(metadata, "stop checkpoint");
  const StepInfo& at_stop = first.steps.back();
  EXPECT_EQ(at_stop.loss_scale, 512.0f);
  EXPECT_EQ(state.loss_scaler.scale, 512.0f);
  EXPECT_EQ(state.loss_scaler.skipped_steps, 1u);
  EXPECT_EQ(state.loss_scaler.growth_tracker, 3);
  EXPECT_EQ(state.epoch_skipped_steps, 1u);
  const Run resumed = fit(inject, 0, options_.stop_checkpoint.string(), stop);
  EXPECT_EQ(resumed.result.reason, StopReason::kCompleted);
  EXPECT_TRUE(same_bits(resumed.parameters, straight.parameters));
  EXPECT_EQ(resumed.optimizer_steps, straight.optimizer_steps);
  EXPECT_EQ(resumed.result.loss_scale, straight.result.loss_scale);
  EXPECT_EQ(resumed.result.skipped_steps, 2u);
  const auto& a = resumed.result.log.epochs;
  const auto& b = straight.result.log.epochs;
  ASSERT_EQ(a.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a[i].skipped_steps, b[i + 1].skipped_steps) << i;
    EXPECT_EQ(a[i].loss_scale, b[i + 1].loss_scale) << i;
    EXPECT_EQ(a[i].train_loss, b[i + 1].train_loss) << i;
  }
}

TEST_F(LossScaleTraining, TheTrainerRefusesBadOptionsByName) {
  auto m = model();
  options_.loss_scale = dynamic(0.0f);
  try {
    Trainer t(*m, options_);
    ADD_FAILURE() << "init_scale 0 accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("init_scale"), std::string::npos) << e.what();
  }
  options_.loss_scale = dynamic(2.0f, 0);
  EXPECT_THROW({ Trainer t(*m, options_); }, InvalidArgument);
}

// On a GPU backend (the fake one) loss scaling runs the eager path even with
// CUDA graphs on: whether a step is skipped is a host decision. The weights
// and the scale are the CPU trainer's with the same scaler.
TEST_F(LossScaleFakeGpu, RunsEagerlyAndEqualsTheCpuTrainer) {
  options_.epochs = 2;
  options_.loss_scale = dynamic(65536.0f, 4);
  const Run cpu = fit(cpu_backend(), Toggle::kOn);
  testing::FakeGpuBackend gpu;
  const Run fake = fit(gpu, Toggle::kOn);
  EXPECT_EQ(fake.parameters, cpu.parameters);
  EXPECT_EQ(fake.result.graph_steps, 0);
  EXPECT_NE(fake.result.graph_note.find("loss scaling"), std::string::npos)
      << fake.result.graph_note;
  EXPECT_EQ(gpu.captures(), 0);
  EXPECT_EQ(fake.result.skipped_steps, 0u);
  EXPECT_EQ(fake.result.loss_scale, std::ldexp(65536.0f, static_cast<int>(2 * kSteps / 4)));
  EXPECT_EQ(fake.result.loss_scale, cpu.result.loss_scale);
}

TEST(LossScaleState, RoundTripsThroughMetadataAndOldCheckpointsReadAsOff) {
  TrainState s;
  s.batch_size = 16;
  s.loss_scaler = {0.1f, 1999, 12};
  s.epoch_skipped_steps = 3;
  auto m = s.to_metadata();
  const TrainState r = TrainState::from_metadata(m, "here");
  EXPECT_EQ(r.loss_scaler.scale, 0.1f);
  EXPECT_EQ(r.loss_scaler.growth_tracker, 1999);
  EXPECT_EQ(r.loss_scaler.skipped_steps, 12u);
  EXPECT_EQ(r.epoch_skipped_steps, 3u);
  for (const char* key : {"train.loss_scale", "train.loss_scale_growth_tracker",
                          "train.loss_scale_skipped_steps", "train.epoch_skipped_steps"})
    m.erase(key);
  const TrainState old = TrainState::from_metadata(m, "here");
  EXPECT_EQ(old.loss_scaler.scale, 0.0f);
  EXPECT_EQ(old.epoch_skipped_steps, 0u);
}

}  // namespace
}  // namespace stoke
