// stoke_train: `stoke train` for a C host, on the same recipe
// (stoke/recipe.hpp), with a progress callback that can cancel.
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "c_api/boundary.hpp"
#include "stoke/backend.hpp"
#include "stoke/recipe.hpp"

namespace stoke::c_api {
namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// "key=value" entries separated by newlines or ';' -> options.
std::map<std::string, std::string> parse_options(const char* text) {
  std::map<std::string, std::string> options;
  const std::string all = text ? text : "";
  std::size_t begin = 0;
  while (begin <= all.size()) {
    const std::size_t end = std::min(all.find_first_of(";\n", begin), all.size());
    const std::string entry = trim(all.substr(begin, end - begin));
    begin = end + 1;
    if (entry.empty()) continue;
    const auto eq = entry.find('=');
    if (eq == std::string::npos) throw InvalidArgument("option '" + entry + "' is not key=value");
    const std::string key = trim(entry.substr(0, eq));
    if (key == "data" || key == "out")
      throw InvalidArgument("option '" + key + "' is an argument of stoke_train, not an option");
    if (!options.emplace(key, trim(entry.substr(eq + 1))).second)
      throw InvalidArgument("option '" + key + "' is given twice");
  }
  return options;
}

constexpr float kNone = std::numeric_limits<float>::quiet_NaN();

stoke_progress step_progress(const StepInfo& s, int epochs, std::uint64_t total) {
  stoke_progress p{};
  p.kind = STOKE_PROGRESS_STEP;
  p.epoch = s.epoch;
  p.epochs = epochs;
  p.step = s.step;
  p.total_steps = total;
  p.train_loss = p.train_accuracy = p.val_accuracy = p.images_per_second = kNone;
  return p;
}

stoke_progress epoch_progress(const EpochRecord& r, int epochs, std::uint64_t step,
                              std::uint64_t total) {
  stoke_progress p{};
  p.kind = STOKE_PROGRESS_EPOCH;
  p.epoch = r.epoch;
  p.epochs = epochs;
  p.step = step;
  p.total_steps = total;
  p.train_loss = static_cast<float>(r.train_loss);
  p.train_accuracy = static_cast<float>(r.train_accuracy);
  p.val_accuracy = r.validated ? static_cast<float>(r.val_accuracy) : kNone;
  p.images_per_second = static_cast<float>(r.images_per_second);
  return p;
}

stoke_status outcome(const FitResult& fit, bool cancelled, const TrainRecipe& recipe) {
  switch (fit.reason) {
    case StopReason::kCompleted:
    case StopReason::kEarlyStopping:
      return STOKE_OK;
    case StopReason::kRequested:
      throw Failure{STOKE_ERROR_CANCELLED,
                    std::string(cancelled ? "the progress callback" : "a request") +
                        " stopped training; the stop checkpoint " + recipe.out.string() +
                        ".stop continues it (option resume=" + recipe.out.string() + ".stop)"};
    case StopReason::kOutOfMemory:
      throw Failure{STOKE_ERROR_OUT_OF_MEMORY,
                    fit.message + " (stop checkpoint " + recipe.out.string() + ".stop)"};
    case StopReason::kCorruptData:
      throw Failure{STOKE_ERROR_DECODE, fit.message};
  }
  return STOKE_ERROR_INTERNAL;
}

}  // namespace
}  // namespace stoke::c_api

extern "C" stoke_status stoke_train(const char* data_dir, const char* model_out,
                                    const char* options, stoke_progress_fn progress,
                                    void* user_data, stoke_train_result* result) {
  using namespace stoke::c_api;  // NOLINT
  return guarded("stoke_train", [&] {
    if (result) *result = stoke_train_result{};
    require(data_dir, "data_dir");
    require(model_out, "model_out");
    auto given = parse_options(options);
    given["data"] = data_dir;
    given["out"] = model_out;
    const stoke::TrainRecipe recipe = stoke::parse_train_recipe(given);
    const auto& rt = runtime();
    const stoke::TrainSets sets = stoke::recipe_datasets(recipe);
    stoke::LoaderOptions loader = recipe.loader;
    loader.context = rt.context;
    const bool validate = !sets.val.empty();
    stoke::TrainerOptions o = stoke::recipe_trainer_options(recipe, validate);
    o.context = rt.context;
    const auto spec =
        stoke::recipe_model_spec(recipe, static_cast<int>(sets.train.class_names().size()));
    auto model = stoke::nn::build_model(stoke::default_backend(), spec, recipe.seed);

    const std::uint64_t batch = (o.batch_size ? static_cast<std::uint64_t>(o.batch_size) : 32) *
                                static_cast<std::uint64_t>(o.batch_multiplier);
    const std::uint64_t total =
        (sets.train.size() + batch - 1) / batch * static_cast<std::uint64_t>(o.epochs);
    stoke::Trainer* trainer = nullptr;
    bool cancelled = false;
    std::uint64_t steps = 0;
    const auto report = [&](const stoke_progress& p) {
      if (progress && progress(user_data, &p) != 0 && !cancelled) {
        cancelled = true;
        trainer->request_stop();
      }
    };
    stoke::Callbacks cb;
    cb.on_step = [&](const stoke::StepInfo& s) {
      steps = s.step;
      report(step_progress(s, o.epochs, total));
    };
    cb.on_epoch = [&](const stoke::EpochRecord& r) {
      report(epoch_progress(r, o.epochs, steps, total));
    };
    stoke::Trainer run(*model, o, cb);
    trainer = &run;
    const auto fit = run.fit(sets.train, validate ? &sets.val : nullptr, loader);
    const bool wrote = stoke::save_final_model(recipe, sets, loader, o, *model, fit);
    if (result) {
      result->epochs = static_cast<int32_t>(fit.log.epochs.size());
      result->batch_size = fit.batch_size;
      result->best_val_accuracy = validate ? static_cast<float>(fit.best_val_accuracy) : -1.f;
      result->train_samples = static_cast<uint32_t>(sets.train.size());
      result->val_samples = static_cast<uint32_t>(sets.val.size());
      bool validated = false;  // a run that validated wrote its best model at the first one
      for (const auto& epoch : fit.log.epochs) validated = validated || epoch.validated;
      result->wrote_model = wrote || validated;
    }
    return outcome(fit, cancelled, recipe);
  });
}
