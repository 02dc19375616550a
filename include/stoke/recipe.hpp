// A training run described as text: the options `stoke train` takes, as
// name -> value pairs (the flag names without "--"), turned into the typed
// TrainerOptions, LoaderOptions and ModelSpec. The `stoke` command and the C
// ABI (stoke/stoke.h, stoke_train) share it, so one option means one thing in
// both. See docs/deploy.md ("The `stoke` command") for what each option does.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "stoke/data.hpp"
#include "stoke/export.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/train.hpp"

namespace stoke {

// The options a recipe reads: data, val, split, out, size, channels, epochs,
// batch, accumulate, lr, optimizer, normalize, augment, arch, width-mult, seed, resume,
// freeze, class-weights, balanced-sampler, bucket-kb, weight-decay,
// decay-norm-and-bias.
STOKE_API const std::vector<std::string>& train_recipe_keys();

struct TrainRecipe {
  std::filesystem::path data;  // a folder with one subfolder per class
  std::filesystem::path val;   // empty: `split` of data
  std::vector<double> split = {80, 20};
  std::filesystem::path out;  // the model file
  int size = 64;              // input width = height
  int channels = 3;
  std::string arch = "resnet";
  float width_multiplier = 1;
  std::uint64_t seed = 42;
  LoaderOptions loader;    // preprocessing, normalization, augmentation, seed
  TrainerOptions trainer;  // without best_checkpoint: recipe_trainer_options() sets it
  std::map<std::string, std::string> options;  // as given
};

// Parses `options` (names as in train_recipe_keys(); "balanced-sampler"
// takes 1/0, true/false, on/off). InvalidArgument naming the option, its value
// and what is accepted, for an unknown name or a bad value. `data` and `out`
// are required. trainer.stop_checkpoint is `out`.stop; the best model by
// validation accuracy goes to `out` when the run validates
// (recipe_trainer_options()).
STOKE_API TrainRecipe parse_train_recipe(const std::map<std::string, std::string>& options);

// The training and validation sets: `val`, else the stratified `split` of `data`.
struct TrainSets {
  Dataset train, val;
};
STOKE_API TrainSets recipe_datasets(const TrainRecipe& recipe);

// The network for `classes` classes (arch: resnet, plain, resnet18/34/50 with
// width-mult).
STOKE_API nn::ModelSpec recipe_model_spec(const TrainRecipe& recipe, int classes);

// The trainer options for a run that validates or not: with validation the
// best model goes to `out` as it improves.
STOKE_API TrainerOptions recipe_trainer_options(const TrainRecipe& recipe, bool validates);

// After fit(): a run without validation that completed writes its final model
// to recipe.out (with its history, and a resumed run's earlier epochs); a run
// with validation already wrote its best one. `loader` and `options` are the
// ones fit() ran with. Returns whether it wrote.
STOKE_API bool save_final_model(const TrainRecipe& recipe, const TrainSets& sets,
                                const LoaderOptions& loader, const TrainerOptions& options,
                                nn::Model& model, const FitResult& result);

}  // namespace stoke
