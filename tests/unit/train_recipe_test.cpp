// stoke train's options as text (stoke/recipe.hpp): the defaults are the
// command's, every option lands in its field, and every bad value or unknown
// name is an InvalidArgument that starts with the option's name (the command
// prints it as "--name ...", the C ABI as is).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "stoke/error.hpp"
#include "stoke/recipe.hpp"

namespace {

using Options = std::map<std::string, std::string>;

stoke::TrainRecipe parse(Options extra) {
  extra.emplace("data", "/data");
  extra.emplace("out", "/models/m.stoke");
  return stoke::parse_train_recipe(extra);
}

// The message of the InvalidArgument parse(extra) throws ("" when none).
std::string refusal(const Options& extra) {
  try {
    parse(extra);
  } catch (const stoke::InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(TrainRecipe, DefaultsAreTheCommands) {
  const auto r = parse({});
  EXPECT_EQ(r.trainer.epochs, 10);
  EXPECT_EQ(r.trainer.batch_size, 32);
  EXPECT_EQ(r.trainer.batch_multiplier, 1);
  EXPECT_FALSE(r.trainer.adam.weight_decay.has_value());  // the optimizer's default
  EXPECT_FALSE(r.trainer.adam.exclude_norm_and_bias_from_decay.has_value());
  EXPECT_EQ(r.trainer.optimizer, stoke::OptimizerKind::kAdam);
  EXPECT_FLOAT_EQ(r.trainer.schedule.base_lr, 0.002f);
  EXPECT_EQ(r.trainer.schedule.kind, stoke::nn::ScheduleKind::kCosine);
  EXPECT_EQ(r.trainer.log_every_steps, 0);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_EQ(r.loader.seed, 42u);
  EXPECT_EQ(r.loader.preprocess.width, 64);
  EXPECT_EQ(r.loader.preprocess.height, 64);
  EXPECT_EQ(r.loader.preprocess.channels, 3);
  EXPECT_EQ(r.loader.preprocess.normalization.kind, stoke::Normalization::Kind::kMinMax);
  EXPECT_FALSE(r.loader.augment.enabled());
  EXPECT_EQ(r.split, (std::vector<double>{80, 20}));
  EXPECT_EQ(r.trainer.stop_checkpoint, "/models/m.stoke.stop");
  EXPECT_TRUE(r.trainer.best_checkpoint.empty());
  EXPECT_EQ(stoke::recipe_trainer_options(r, true).best_checkpoint, "/models/m.stoke");
  EXPECT_TRUE(stoke::recipe_trainer_options(r, false).best_checkpoint.empty());
  const auto spec = stoke::recipe_model_spec(r, 5);
  EXPECT_EQ(spec.classes, 5);
  EXPECT_EQ(spec.in_channels, 3);
  EXPECT_EQ(spec.width, 64);
  EXPECT_EQ(spec.widths, (std::vector<int>{16, 32, 64}));
}

TEST(TrainRecipe, EveryOptionReachesItsField) {
  const auto r = parse({{"epochs", "3"},
                        {"batch", "auto"},
                        {"accumulate", "4"},
                        {"weight-decay", "0.05"},
                        {"decay-norm-and-bias", "0"},
                        {"lr", "0.1"},
                        {"optimizer", "sgd"},
                        {"size", "40"},
                        {"channels", "1"},
                        {"seed", "7"},
                        {"normalize", "mean=0.5,std=0.25"},
                        {"augment", "hflip,crop,brightness=0.3"},
                        {"split", "70,30"},
                        {"class-weights", "1,2.5"},
                        {"balanced-sampler", "true"},
                        {"freeze", "2"},
                        {"bucket-kb", "64"},
                        {"loss-scale", "512"},
                        {"precision", "bf16"},
                        {"arch", "plain"}});
  EXPECT_EQ(r.trainer.epochs, 3);
  EXPECT_EQ(r.trainer.batch_size, 0);
  EXPECT_EQ(r.trainer.batch_multiplier, 4);
  EXPECT_FLOAT_EQ(r.trainer.sgd.weight_decay, 0.05f);
  EXPECT_TRUE(r.trainer.sgd.exclude_norm_and_bias_from_decay);
  EXPECT_FLOAT_EQ(r.trainer.schedule.base_lr, 0.1f);
  EXPECT_EQ(r.trainer.optimizer, stoke::OptimizerKind::kSgd);
  EXPECT_EQ(r.loader.preprocess.channels, 1);
  EXPECT_EQ(r.trainer.seed, 7u);
  EXPECT_EQ(r.trainer.loss_scale.mode, stoke::LossScaleMode::kFixed);
  EXPECT_EQ(r.trainer.loss_scale.init_scale, 512.0f);
  EXPECT_EQ(r.trainer.precision, stoke::Precision::kBf16);
  EXPECT_EQ(parse({{"precision", "auto"}}).trainer.precision, stoke::Precision::kFp32);
  // fp16 parses; the backend refuses it where it cannot run it (the CPU).
  EXPECT_EQ(parse({{"precision", "fp16"}}).trainer.precision, stoke::Precision::kFp16);
  const auto& n = r.loader.preprocess.normalization;
  EXPECT_EQ(n.kind, stoke::Normalization::Kind::kMeanStd);
  for (int c = 0; c < 3; ++c) {  // one value each is repeated
    EXPECT_FLOAT_EQ(n.mean[c], 0.5f);
    EXPECT_FLOAT_EQ(n.std[c], 0.25f);
  }
  EXPECT_FLOAT_EQ(r.loader.augment.hflip_probability, 0.5f);
  EXPECT_TRUE(r.loader.augment.random_crop);
  EXPECT_EQ(r.loader.preprocess.resize_width, 45);  // 1/8 larger
  EXPECT_FLOAT_EQ(r.loader.augment.brightness, 0.3f);
  EXPECT_EQ(r.split, (std::vector<double>{70, 30}));
  EXPECT_EQ(r.trainer.class_weights, (std::vector<float>{1.f, 2.5f}));
  EXPECT_TRUE(r.trainer.balanced_sampler);
  EXPECT_EQ(r.trainer.freeze_stages, 2);
  EXPECT_EQ(r.trainer.gradient_bucket_bytes, std::size_t{64} << 10);
  EXPECT_EQ(stoke::recipe_model_spec(r, 2).architecture, stoke::nn::Architecture::kPlainCnn);
  EXPECT_TRUE(parse({{"class-weights", "balanced"}}).trainer.balanced_class_weights);
}

TEST(TrainRecipe, BadValuesAndUnknownNamesAreRefusedByName) {
  const std::map<std::string, Options> cases = {
      {"lr must be", {{"lr", "nan"}}},
      {"lr must be", {{"lr", "inf"}}},
      {"lr must be", {{"lr", "-5"}}},
      {"lr must be", {{"lr", "11"}}},
      {"lr 'x'", {{"lr", "x"}}},
      {"epochs 'ten' is not a count", {{"epochs", "ten"}}},
      {"batch '-1' is not a count", {{"batch", "-1"}}},
      {"accumulate must be at least 1", {{"accumulate", "0"}}},
      {"loss-scale is dynamic, off, auto", {{"loss-scale", "0"}}},
      {"precision must be fp32, bf16, fp16 or auto", {{"precision", "int8"}}},
      {"weight-decay must be", {{"weight-decay", "-1"}}},
      {"decay-norm-and-bias 'x'", {{"decay-norm-and-bias", "x"}}},
      {"optimizer is", {{"optimizer", "rmsprop"}}},
      {"normalize is", {{"normalize", "zscore"}}},
      {"normalize mean: 'a'", {{"normalize", "mean=a,std=1"}}},
      {"augment: unknown 'blur'", {{"augment", "hflip,blur"}}},
      {"arch is", {{"arch", "vgg"}}},
      {"balanced-sampler 'maybe'", {{"balanced-sampler", "maybe"}}},
      {"class-weights: 'x'", {{"class-weights", "1,x"}}},
      {"val and split", {{"val", "/v"}, {"split", "50,50"}}},
      {"unknown training option 'epoch'", {{"epoch", "3"}}},
  };
  for (const auto& [expected, options] : cases) {
    const std::string message = refusal(options);
    EXPECT_EQ(message.rfind(expected, 0), 0u)
        << "expected '" << expected << "...', got '" << message << "'";
  }
  EXPECT_NE(refusal({{"epoch", "3"}}).find("epochs"), std::string::npos) << "lists the known ones";
  EXPECT_THROW(stoke::parse_train_recipe({{"out", "m.stoke"}}), stoke::InvalidArgument);
  EXPECT_THROW(stoke::parse_train_recipe({{"data", "d"}}), stoke::InvalidArgument);
}

}  // namespace
