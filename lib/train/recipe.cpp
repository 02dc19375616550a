// `stoke train`'s options as text -> TrainerOptions, LoaderOptions, ModelSpec
// (stoke/recipe.hpp). Messages start with the option's name so that the
// command can print it as "--name ..." and the C ABI as "name ...".
#include "stoke/recipe.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "stoke/error.hpp"
#include "stoke/model_file.hpp"
#include "stoke/nn/checkpoint.hpp"

namespace stoke {
namespace {

using Options = std::map<std::string, std::string>;

std::string get(const Options& o, const std::string& key, const std::string& fallback = "") {
  const auto it = o.find(key);
  return it == o.end() ? fallback : it->second;
}

int get_int(const Options& o, const std::string& key, int fallback) {
  const auto it = o.find(key);
  if (it == o.end()) return fallback;
  const std::string& v = it->second;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 0 || n > 1000000000)
    throw InvalidArgument(key + " '" + v + "' is not a count");
  return static_cast<int>(n);
}

double get_double(const Options& o, const std::string& key, double fallback) {
  const auto it = o.find(key);
  if (it == o.end()) return fallback;
  const std::string& v = it->second;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') throw InvalidArgument(key + " '" + v + "' is not a number");
  return d;
}

bool get_bool(const Options& o, const std::string& key) {
  const std::string v = get(o, key, "0");
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  throw InvalidArgument(key + " '" + v + "' is not 1/0, true/false, on/off or yes/no");
}

// "a<sep>b<sep>c" as numbers; `what` names the option in the message.
std::vector<float> floats(const std::string& text, char sep, const std::string& what) {
  std::vector<float> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, sep);) {
    char* end = nullptr;
    out.push_back(std::strtof(item.c_str(), &end));
    if (item.empty() || *end) throw InvalidArgument(what + ": '" + item + "' is not a number");
  }
  return out;
}

Normalization normalization(const std::string& text) {
  if (text == "minmax") return Normalization::min_max(0.f, 1.f);
  if (text == "imagenet") {
    return Normalization::mean_std(std::vector<float>{0.485f, 0.456f, 0.406f},
                                   std::vector<float>{0.229f, 0.224f, 0.225f});
  }
  // mean=a:b:c,std=a:b:c (or one value each)
  const auto comma = text.find(",std=");
  if (text.rfind("mean=", 0) != 0 || comma == std::string::npos)
    throw InvalidArgument("normalize is minmax, imagenet or mean=a:b:c,std=a:b:c");
  auto mean = floats(text.substr(5, comma - 5), ':', "normalize mean");
  auto sd = floats(text.substr(comma + 5), ':', "normalize std");
  if (mean.size() == 1) mean.assign(3, mean[0]);
  if (sd.size() == 1) sd.assign(3, sd[0]);
  return Normalization::mean_std(mean, sd);
}

void augment(const std::string& text, LoaderOptions& l) {
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const float value = eq == std::string::npos ? 0.f : std::strtof(item.c_str() + eq + 1, nullptr);
    if (name == "hflip") {
      l.augment.hflip_probability = 0.5f;
    } else if (name == "vflip") {
      l.augment.vflip_probability = 0.5f;
    } else if (name ==
               "crop") {  // random crop of a 1/8 larger resize (centre crop when validating)
      l.augment.random_crop = true;
      l.preprocess.resize_width = l.preprocess.width + std::max(1, l.preprocess.width / 8);
      l.preprocess.resize_height = l.preprocess.height + std::max(1, l.preprocess.height / 8);
    } else if (name == "brightness") {
      l.augment.brightness = eq == std::string::npos ? 0.1f : value;
    } else if (name == "contrast") {
      l.augment.contrast = eq == std::string::npos ? 0.1f : value;
    } else if (!name.empty() && name != "none") {
      throw InvalidArgument("augment: unknown '" + name +
                            "' (hflip, vflip, crop, brightness=X, contrast=X)");
    }
  }
}

TrainerOptions trainer_options(const Options& args, std::uint64_t seed) {
  TrainerOptions o;
  o.epochs = get_int(args, "epochs", 10);
  o.batch_size = get(args, "batch", "32") == "auto" ? 0 : get_int(args, "batch", 32);
  // Gradient accumulation: device batches per optimizer step.
  o.batch_multiplier = get_int(args, "accumulate", 1);
  if (o.batch_multiplier < 1) throw InvalidArgument("accumulate must be at least 1");
  o.seed = seed;
  o.schedule.kind = nn::ScheduleKind::kCosine;
  // Adam at 2e-3 with a cosine schedule: a default that learns the synthetic
  // inspection set in a few epochs (SGD at 0.05 stayed at the majority class).
  const double lr = get_double(args, "lr", 0.002);
  // !(lr > 0) also refuses NaN, which every comparison lets through.
  if (!(lr > 0.0) || !std::isfinite(lr) || lr > 10.0)
    throw InvalidArgument("lr must be a number in (0, 10], got " + get(args, "lr"));
  o.schedule.base_lr = static_cast<float>(lr);
  const std::string opt = get(args, "optimizer", "adam");
  if (opt != "sgd" && opt != "adam" && opt != "adamw")
    throw InvalidArgument("optimizer is sgd, adam or adamw");
  o.optimizer = opt == "sgd"    ? OptimizerKind::kSgd
                : opt == "adam" ? OptimizerKind::kAdam
                                : OptimizerKind::kAdamW;
  if (args.count("weight-decay")) {  // the optimizer's own default otherwise
    const double wd = get_double(args, "weight-decay", 0.0);
    if (!(wd >= 0.0) || !std::isfinite(wd) || wd > 1.0)
      throw InvalidArgument("weight-decay must be a number in [0, 1], got " +
                            get(args, "weight-decay"));
    o.sgd.weight_decay = static_cast<float>(wd);
    o.adam.weight_decay = static_cast<float>(wd);
  }
  if (args.count("decay-norm-and-bias")) {  // unset: excluded for AdamW, decayed for SGD
    const bool decay_all = get_bool(args, "decay-norm-and-bias");
    o.sgd.exclude_norm_and_bias_from_decay = !decay_all;
    o.adam.exclude_norm_and_bias_from_decay = !decay_all;
  }
  o.log_every_steps = 0;
  o.resume = get(args, "resume", "");
  o.freeze_stages = get_int(args, "freeze", 0);
  o.gradient_bucket_bytes = static_cast<std::size_t>(get_int(
                                args, "bucket-kb", static_cast<int>(o.gradient_bucket_bytes >> 10)))
                            << 10;
  o.balanced_sampler = get_bool(args, "balanced-sampler");
  if (args.count("loss-scale"))
    o.loss_scale = parse_loss_scale(get(args, "loss-scale"), o.loss_scale, "loss-scale");
  // Mixed precision (TrainerOptions::precision): auto trains in fp32; the
  // backend refuses what it cannot run (fp16: CUDA only) when training starts.
  const std::string precision = get(args, "precision", "fp32");
  if (precision == "bf16") {
    o.precision = Precision::kBf16;
  } else if (precision == "fp16") {
    o.precision = Precision::kFp16;
  } else if (precision != "fp32" && precision != "auto") {
    throw InvalidArgument("precision must be fp32, bf16, fp16 or auto, got '" + precision + "'");
  }
  const std::string weights = get(args, "class-weights", "");
  if (weights == "balanced")
    o.balanced_class_weights = true;
  else if (!weights.empty())
    o.class_weights = floats(weights, ',', "class-weights");
  return o;
}

}  // namespace

const std::vector<std::string>& train_recipe_keys() {
  static const std::vector<std::string> keys = {"data",
                                                "val",
                                                "split",
                                                "out",
                                                "size",
                                                "channels",
                                                "epochs",
                                                "batch",
                                                "accumulate",
                                                "lr",
                                                "optimizer",
                                                "normalize",
                                                "augment",
                                                "arch",
                                                "width-mult",
                                                "seed",
                                                "resume",
                                                "freeze",
                                                "class-weights",
                                                "balanced-sampler",
                                                "bucket-kb",
                                                "weight-decay",
                                                "decay-norm-and-bias",
                                                "loss-scale",
                                                "precision"};
  return keys;
}

TrainRecipe parse_train_recipe(const std::map<std::string, std::string>& options) {
  const auto& keys = train_recipe_keys();
  for (const auto& [key, value] : options) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      std::string known;
      for (const auto& k : keys) known += (known.empty() ? "" : ", ") + k;
      throw InvalidArgument("unknown training option '" + key + "' (known: " + known + ")");
    }
  }
  TrainRecipe r;
  r.options = options;
  r.data = get(options, "data");
  r.out = get(options, "out");
  if (r.data.empty()) throw InvalidArgument("data is required (a folder, one subfolder per class)");
  if (r.out.empty()) throw InvalidArgument("out is required (the model file to write)");
  r.val = get(options, "val");
  if (options.count("split")) {
    if (!r.val.empty()) throw InvalidArgument("val and split exclude each other");
    r.split.clear();
    for (const float p : floats(get(options, "split"), ',', "split")) r.split.push_back(p);
  }
  r.seed = static_cast<std::uint64_t>(get_int(options, "seed", 42));
  r.size = get_int(options, "size", 64);
  r.channels = get_int(options, "channels", 3);
  r.arch = get(options, "arch", "resnet");
  r.width_multiplier = static_cast<float>(get_double(options, "width-mult", 1.0));
  r.loader.seed = r.seed;
  r.loader.preprocess.width = r.loader.preprocess.height = r.size;
  r.loader.preprocess.channels = r.channels;
  r.loader.preprocess.normalization = normalization(get(options, "normalize", "minmax"));
  augment(get(options, "augment", ""), r.loader);
  r.trainer = trainer_options(options, r.seed);
  r.trainer.stop_checkpoint = r.out.string() + ".stop";
  recipe_model_spec(r, 2);  // the architecture's name, checked before any data is read
  return r;
}

TrainSets recipe_datasets(const TrainRecipe& recipe) {
  const auto data = Dataset::from_folder(recipe.data);
  if (!recipe.val.empty()) return {data, Dataset::from_folder(recipe.val)};
  const auto split = stratified_split(data, recipe.split, recipe.seed);
  return {data.subset(split.train), data.subset(split.val)};
}

nn::ModelSpec recipe_model_spec(const TrainRecipe& recipe, int classes) {
  nn::ModelSpec spec;
  spec.in_channels = recipe.channels;
  spec.height = spec.width = recipe.size;
  spec.classes = classes;
  if (recipe.arch == "plain") {
    spec.architecture = nn::Architecture::kPlainCnn;
    spec.widths = {16, 32, 64};
  } else if (recipe.arch == "resnet") {
    spec.stem_width = 16;
    spec.widths = {16, 32, 64};
    spec.blocks_per_stage = 1;
  } else if (recipe.arch == "resnet18" || recipe.arch == "resnet34" || recipe.arch == "resnet50") {
    spec.architecture = nn::architecture_from_name(recipe.arch);  // torchvision's topology, names
    spec.width_multiplier = recipe.width_multiplier;
  } else {
    throw InvalidArgument("arch is resnet, plain, resnet18, resnet34 or resnet50");
  }
  return spec;
}

TrainerOptions recipe_trainer_options(const TrainRecipe& recipe, bool validates) {
  TrainerOptions o = recipe.trainer;
  if (validates) o.best_checkpoint = recipe.out;  // the best model by validation accuracy
  return o;
}

bool save_final_model(const TrainRecipe& recipe, const TrainSets& sets, const LoaderOptions& loader,
                      const TrainerOptions& options, nn::Model& model, const FitResult& result) {
  if (!sets.val.empty() || result.reason != StopReason::kCompleted) return false;
  ModelInfo info = describe_training(sets.train, nullptr, loader, options);
  if (!result.log.epochs.empty() && !options.resume.empty()) {  // the resumed run's earlier epochs
    info.history = history_before(nn::read_checkpoint_info(options.resume).metadata,
                                  result.log.epochs.front().epoch);
  }
  for (const auto& r : result.log.epochs) record_epoch(info, r);
  save_model(recipe.out, model, info);
  return true;
}

}  // namespace stoke
