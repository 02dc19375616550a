// Writing model files: what a fit knows (describe_training), the epoch
// history, and save_model, which recomputes the reference logits.
#include "modelfile/model_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "modelfile/text.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/version.hpp"

namespace stoke {

using modelfile_detail::float_text;

namespace {

const char* optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kAdamW:
      return "adamw";
  }
  return "?";
}

std::map<std::string, std::string> flatten(const TrainerOptions& o, const LoaderOptions& l) {
  std::map<std::string, std::string> m;
  m["epochs"] = std::to_string(o.epochs);
  m["batch_size"] = o.batch_size ? std::to_string(o.batch_size) : "auto";
  m["batch_multiplier"] = std::to_string(o.batch_multiplier);
  m["optimizer"] = optimizer_name(o.optimizer);
  m["sgd.momentum"] = float_text(o.sgd.momentum);
  m["sgd.weight_decay"] = float_text(o.sgd.weight_decay);
  m["sgd.nesterov"] = o.sgd.nesterov ? "1" : "0";
  auto adam = o.adam;  // as the trainer builds it: decoupled for AdamW
  adam.decoupled_weight_decay = o.optimizer == OptimizerKind::kAdamW;
  m["adam.weight_decay"] = float_text(adam.resolved_weight_decay());
  m["adam.exclude_norm_and_bias_from_decay"] = adam.resolved_exclusion() ? "1" : "0";
  m["sgd.exclude_norm_and_bias_from_decay"] = o.sgd.exclude_norm_and_bias_from_decay ? "1" : "0";
  m["schedule.base_lr"] = float_text(o.schedule.base_lr);
  m["schedule.kind"] = std::to_string(static_cast<int>(o.schedule.kind));
  m["schedule.warmup_steps"] = std::to_string(o.schedule.warmup_steps);
  m["schedule.min_lr"] = float_text(o.schedule.min_lr);
  m["early_stopping_patience"] = std::to_string(o.early_stopping_patience);
  m["validate_every_epochs"] = std::to_string(o.validate_every_epochs);
  m["max_steps_per_epoch"] = std::to_string(o.max_steps_per_epoch);
  m["seed"] = std::to_string(o.seed);
  m["loader.seed"] = std::to_string(l.seed);
  m["augment.random_crop"] = l.augment.random_crop ? "1" : "0";
  m["augment.hflip"] = float_text(l.augment.hflip_probability);
  m["augment.vflip"] = float_text(l.augment.vflip_probability);
  m["augment.brightness"] = float_text(l.augment.brightness);
  m["augment.contrast"] = float_text(l.augment.contrast);
  return m;
}

// The validation loader's options for `loader` (as Trainer::fit builds them),
// with a cache that cannot touch the training cache file.
LoaderOptions validation_options(const LoaderOptions& loader, bool cached, std::size_t batch) {
  LoaderOptions vo = loader;
  vo.shuffle = false;
  vo.drop_last = false;
  vo.augment = {};
  vo.profiler = nullptr;
  vo.batch_size = batch;
  vo.shard_index = 0;  // every sample, whatever the training rank
  vo.shard_count = 1;
  // A RAM cache with room for nothing: the loader takes its staged path
  // (as a cached training run did) without holding any image.
  vo.cache = cached ? CacheSpec{CacheSpec::Kind::kRam, 1, ""} : CacheSpec{};
  if (vo.preprocess.dtype == OutputDtype::kUint8) vo.preprocess.dtype = OutputDtype::kFloat32;
  return vo;
}

// Reference files up to this size travel in the model file for the
// predictor's decode check.
constexpr std::uintmax_t kMaxEncodedReference = 256 * 1024;

// The first `count` training samples that load (a corrupt file is no
// reference: it is skipped, and the trainer's own policy deals with it).
std::vector<ReferenceSample> reference_inputs(const Dataset& source, const LoaderOptions& loader,
                                              bool cached, std::size_t count) {
  std::vector<ReferenceSample> out;
  const std::size_t tries = std::min(source.size(), 8 * count);
  for (std::size_t i = 0; i < tries && out.size() < count; ++i) {
    ReferenceSample r;
    try {
      Loader l(source.subset(std::vector<std::size_t>{i}), validation_options(loader, cached, 1));
      r.input.resize(l.sample_bytes() / sizeof(float));
      std::vector<std::int32_t> label(1);
      l.fill_batch(0, 0, std::as_writable_bytes(std::span<float>(r.input)), label);
    } catch (const Error&) {
      continue;
    }
    r.source = source.path(i);
    std::error_code ec;
    const std::string& file = source.file(i);
    if (!file.empty() && std::filesystem::file_size(file, ec) <= kMaxEncodedReference && !ec) {
      read_file(file, r.encoded);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

namespace modelfile_detail {

LoaderOptions loader_options_for(const ModelInfo& info, std::size_t batch) {
  LoaderOptions l;
  l.preprocess = info.preprocess;
  return validation_options(l, info.staged, batch);
}

bool loader_is_staged(const LoaderOptions& loader) {
  const auto& p = loader.preprocess;
  const bool resized = (p.resize_width && p.resize_width != p.width) ||
                       (p.resize_height && p.resize_height != p.height);
  const CacheSpec cache =
      loader.cache ? *loader.cache : loader.context.settings().cache;  // as the Loader resolves it
  return resized || cache.kind != CacheSpec::Kind::kOff;
}

LoadedModel load_model_file(const std::filesystem::path& path, Backend& backend) {
  const std::string p = path.string();
  const nn::CheckpointInfo header = nn::read_checkpoint_info(p);
  LoadedModel out;
  out.info = ModelInfo::from_metadata(header.metadata, p);
  const auto& spec = header.spec;
  const auto& pre = out.info.preprocess;
  if (spec.in_channels != pre.channels || spec.height != pre.height || spec.width != pre.width ||
      static_cast<std::size_t>(spec.classes) != out.info.class_names.size()) {
    throw CorruptFile("model file '" + p + "': the network takes " +
                      std::to_string(spec.in_channels) + "x" + std::to_string(spec.height) + "x" +
                      std::to_string(spec.width) + " with " + std::to_string(spec.classes) +
                      " classes, the preprocessing gives " + std::to_string(pre.channels) + "x" +
                      std::to_string(pre.height) + "x" + std::to_string(pre.width) + " with " +
                      std::to_string(out.info.class_names.size()) + " class names");
  }
  out.model = nn::load_model(p, backend);
  return out;
}

LoadedModel load_checkpoint(const std::filesystem::path& path,
                            const nn::Preprocessing& normalization, Backend& backend) {
  const std::string p = path.string();
  const nn::CheckpointInfo header = nn::read_checkpoint_info(p);
  const nn::ModelSpec& spec = header.spec;
  const auto channels = static_cast<std::size_t>(spec.in_channels);
  for (const auto* values : {&normalization.mean, &normalization.std}) {
    if (values->size() != 1 && values->size() != channels) {
      throw CorruptFile(
          "checkpoint '" + p + "': preprocessing has " + std::to_string(values->size()) +
          " values per channel list, the model has " + std::to_string(channels) + " channels");
    }
  }
  LoadedModel out;
  ModelInfo& info = out.info;
  for (int c = 0; c < spec.classes; ++c) info.class_names.push_back(std::to_string(c));
  PreprocessOptions& pre = info.preprocess;
  pre.channels = spec.in_channels;
  pre.width = pre.resize_width = spec.width;
  pre.height = pre.resize_height = spec.height;
  // value = (pixel * scale - mean) / std is the loader's mean/std form,
  // (pixel / 255 - mean') / std', with mean' = mean / (255 scale) and
  // std' = std / (255 scale).
  const float to_unit = 255.0f * normalization.scale;
  float mean[3], std[3];
  for (std::size_t c = 0; c < 3; ++c) {
    const std::size_t k = std::min(c, channels - 1);
    mean[c] = normalization.mean[normalization.mean.size() == 1 ? 0 : k] / to_unit;
    std[c] = normalization.std[normalization.std.size() == 1 ? 0 : k] / to_unit;
  }
  try {
    pre.normalization = Normalization::mean_std(mean, std);
  } catch (const InvalidArgument& e) {
    throw CorruptFile("checkpoint '" + p + "': " + e.what());
  }
  out.model = nn::load_model(p, backend);
  return out;
}

namespace {

bool finite_values(const Tensor& t, std::vector<float>& host) {
  if (t.dtype() != DType::kFloat32 || t.bytes() == 0) return true;
  host.resize(t.bytes() / sizeof(float));
  t.copy_to_host(host.data());
  return std::all_of(host.begin(), host.end(), [](float v) { return std::isfinite(v); });
}

}  // namespace

std::string first_non_finite(const nn::Model& model, const nn::Optimizer* optimizer) {
  std::vector<float> host;
  for (const auto& t : model.named_parameters())
    if (!finite_values(t.tensor, host)) return "parameter " + t.name;
  for (const auto& t : model.named_buffers())
    if (!finite_values(t.tensor, host)) return "buffer " + t.name;
  if (optimizer) {
    for (const auto& t : optimizer->state())
      if (!finite_values(t.tensor, host)) return "optimizer state " + t.name;
  }
  return "";
}

void require_finite(const nn::Model& model, const nn::Optimizer* optimizer,
                    const std::filesystem::path& path) {
  const std::string bad = first_non_finite(model, optimizer);
  if (bad.empty()) return;
  throw NonFinite("not writing " + path.string() + ": " + bad +
                  " holds NaN or infinite values (training diverged: lower --lr)");
}

std::vector<float> run_logits(nn::Model& model, std::span<const float> inputs, std::size_t count) {
  Tensor x(model.backend(), model.input_shape(static_cast<std::int64_t>(count)));
  if (x.bytes() != inputs.size() * sizeof(float)) {
    throw InvalidArgument("stoke: " + std::to_string(inputs.size()) + " input values for " +
                          std::to_string(count) + " samples of " +
                          shape_to_string(model.input_shape(1)));
  }
  x.copy_from_host(inputs.data());
  const Tensor& logits = model.forward(x, false);
  std::vector<float> out(count * static_cast<std::size_t>(model.spec().classes));
  logits.copy_to_host(out.data());
  return out;
}

}  // namespace modelfile_detail

ModelInfo describe_training(const Dataset& train, const Dataset* val, const LoaderOptions& loader,
                            const TrainerOptions& options, std::size_t references) {
  ModelInfo info;
  info.class_names = train.class_names();
  info.preprocess = loader.preprocess;
  if (!info.preprocess.resize_width) info.preprocess.resize_width = info.preprocess.width;
  if (!info.preprocess.resize_height) info.preprocess.resize_height = info.preprocess.height;
  info.staged = modelfile_detail::loader_is_staged(loader);
  info.stoke_version = version();
  info.created = modelfile_detail::utc_now();
  info.dataset_source = train.report().source;
  info.dataset_fingerprint = train.fingerprint();
  info.class_counts.assign(info.class_names.size(), 0);
  for (std::size_t i = 0; i < train.size(); ++i) {
    const auto label = static_cast<std::size_t>(train.label(i));
    if (label < info.class_counts.size()) ++info.class_counts[label];
  }
  info.validation_samples = val ? val->size() : 0;
  info.trainer_options = flatten(options, loader);
  for (const KnobValue& k : loader.context.config().knobs()) info.configuration[k.name] = k.value;
  if (!options.embed_training_images) {  // no image, no path of the training data
    info.dataset_source.clear();
    return info;
  }
  const Dataset& source = val && !val->empty() ? *val : train;
  info.references = reference_inputs(source, loader, info.staged, references);
  return info;
}

ModelInfo describe_import(std::vector<std::string> class_names, const PreprocessOptions& preprocess,
                          const std::string& source, std::size_t references) {
  if (class_names.empty()) throw InvalidArgument("describe_import: no class names");
  const PreprocessOptions& p = preprocess;
  if ((p.channels != 1 && p.channels != 3) || p.width <= 0 || p.height <= 0 ||
      (p.resize_width && p.resize_width < p.width) ||
      (p.resize_height && p.resize_height < p.height)) {
    throw InvalidArgument("describe_import: preprocessing sizes are inconsistent (a " +
                          std::to_string(p.resize_width) + "x" + std::to_string(p.resize_height) +
                          " resize for a " + std::to_string(p.width) + "x" +
                          std::to_string(p.height) + " input)");
  }
  ModelInfo info;
  info.class_names = std::move(class_names);
  info.preprocess = preprocess;
  info.preprocess.dtype = OutputDtype::kFloat32;
  if (!info.preprocess.resize_width) info.preprocess.resize_width = info.preprocess.width;
  if (!info.preprocess.resize_height) info.preprocess.resize_height = info.preprocess.height;
  info.stoke_version = version();
  info.created = modelfile_detail::utc_now();
  info.dataset_source = source;
  info.class_counts.assign(info.class_names.size(), 0);
  info.trainer_options["imported_from"] = source;
  const auto plane = static_cast<std::size_t>(p.width) * static_cast<std::size_t>(p.height);
  for (std::size_t i = 0; i < references; ++i) {
    ReferenceSample r;
    r.source = "seeded 8-bit noise " + std::to_string(i) + " (stoke import)";
    r.input.resize(plane * static_cast<std::size_t>(p.channels));
    std::uint64_t state = 0x9E3779B97F4A7C15ull * (i + 1);
    for (int c = 0; c < p.channels; ++c) {
      float scale = 1, bias = 0;
      p.normalization.affine(c, scale, bias);
      for (std::size_t k = 0; k < plane; ++k) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;  // LCG: no Rng needed
        const auto pixel = static_cast<float>(state >> 56);               // 0..255
        r.input[static_cast<std::size_t>(c) * plane + k] = pixel * scale + bias;
      }
    }
    info.references.push_back(std::move(r));
  }
  return info;
}

std::vector<std::string> history_before(const std::map<std::string, std::string>& metadata,
                                        int epoch) {
  std::vector<std::string> kept;
  const auto it = metadata.find("model.history");
  if (it == metadata.end()) return kept;
  for (auto& line : modelfile_detail::split(it->second, ';')) {
    // "epoch,train_loss,train_accuracy,val_loss,val_accuracy" (record_epoch)
    if (!line.empty() && std::atoi(line.c_str()) < epoch) kept.push_back(std::move(line));
  }
  return kept;
}

void record_epoch(ModelInfo& info, const EpochRecord& r) {
  info.history.push_back(std::to_string(r.epoch) + "," + float_text(r.train_loss) + "," +
                         float_text(r.train_accuracy) + "," +
                         (r.validated ? float_text(r.val_loss) : "") + "," +
                         (r.validated ? float_text(r.val_accuracy) : ""));
  info.metrics["epoch"] = std::to_string(r.epoch);
  info.metrics["train_loss"] = float_text(r.train_loss);
  info.metrics["train_accuracy"] = float_text(r.train_accuracy);
  if (r.validated) {
    info.metrics["val_loss"] = float_text(r.val_loss);
    info.metrics["val_accuracy"] = float_text(r.val_accuracy);
  }
}

void add_model_metadata(std::map<std::string, std::string>& metadata, nn::Model& model,
                        const ModelInfo& info) {
  if (info.class_names.size() != static_cast<std::size_t>(model.spec().classes)) {
    throw InvalidArgument("stoke::save_model: " + std::to_string(info.class_names.size()) +
                          " class names for a " + std::to_string(model.spec().classes) +
                          "-class model");
  }
  ModelInfo out = info;
  for (const auto& [k, v] : metadata) {
    if (k.rfind("model.", 0) != 0 && k.rfind("train.", 0) != 0) out.metrics[k] = v;
  }
  out.reference_backend = model.backend().name();
  // The references are what a Predictor reproduces in fp32: in fp32 also
  // inside a mixed-precision fit (TrainerOptions::precision).
  const TrainingPrecisionScope fp32(model.backend(), Precision::kFp32);
  try {
    std::vector<float> inputs;
    for (const auto& r : out.references)
      inputs.insert(inputs.end(), r.input.begin(), r.input.end());
    const std::vector<float> logits =
        out.references.empty() ? std::vector<float>{}
                               : modelfile_detail::run_logits(model, inputs, out.references.size());
    // Leave the model's memory as the writer had it (a trainer between
    // epochs, possibly after running out of memory).
    model.release_activations();
    model.backend().release_workspace();
    if (!std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); })) {
      throw NonFinite(
          "model file: the reference logits are NaN or infinite (the model has diverged); no "
          "model file is written");
    }
    const std::size_t classes = out.class_names.size();
    for (std::size_t i = 0; i < out.references.size(); ++i) {
      out.references[i].logits.assign(logits.begin() + i * classes,
                                      logits.begin() + (i + 1) * classes);
    }
  } catch (const OutOfMemory& e) {
    // A stop checkpoint after running out of memory must still be written:
    // without references the predictor reports the self-check as skipped.
    log_warn(std::string("model file: no reference logits (out of memory): ") + e.what());
    out.references.clear();
    model.release_activations();
    model.backend().release_workspace();
  }
  out.to_metadata(metadata);
}

void save_model(const std::filesystem::path& path, nn::Model& model, const ModelInfo& info,
                const nn::Optimizer* optimizer, const std::map<std::string, std::string>& extra) {
  modelfile_detail::require_finite(model, optimizer, path);
  std::map<std::string, std::string> metadata = extra;
  add_model_metadata(metadata, model, info);
  nn::save_checkpoint(path.string(), model, optimizer, metadata);
}

ModelInfo read_model_info(const std::filesystem::path& path) {
  const nn::CheckpointInfo header = nn::read_checkpoint_info(path.string());
  return ModelInfo::from_metadata(header.metadata, path.string());
}

}  // namespace stoke
