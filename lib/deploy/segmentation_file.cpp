// The segmentation model file: a checkpoint of the U-Net (weights and batch
// norm statistics, no optimizer state) whose metadata holds a ModelInfo
// ("model.*": class names, preprocessing, provenance, history) and
// "segment.*": the format version, the ignore label and a self-check
// reference (one preprocessed input and its logits, raw little-endian
// float32). Every value read is checked against the network: a missing,
// malformed or out-of-range key, or an array of another size, is a
// CorruptFile naming the path and the key. The checkpoint reader itself
// bounds every size before reading it (nn/checkpoint.cpp).
#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>

#include "deploy/segmentation.hpp"
#include "modelfile/text.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"

namespace stoke {

namespace {

static_assert(std::endian::native == std::endian::little, "the reference is stored little-endian");

[[noreturn]] void corrupt(const std::filesystem::path& path, const std::string& key,
                          const std::string& why) {
  throw CorruptFile("segmentation model '" + path.string() + "': " + key + " " + why);
}

const std::string& text(const std::map<std::string, std::string>& m,
                        const std::filesystem::path& path, const std::string& key) {
  const auto it = m.find(key);
  if (it == m.end()) corrupt(path, key, "is missing");
  return it->second;
}

std::int64_t integer(const std::map<std::string, std::string>& m, const std::filesystem::path& path,
                     const std::string& key, std::int64_t lo, std::int64_t hi) {
  const std::string& t = text(m, path, key);
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size())
    corrupt(path, key, "'" + t + "' is not an integer");
  if (v < lo || v > hi)
    corrupt(
        path, key,
        std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::vector<float> floats(const std::map<std::string, std::string>& m,
                          const std::filesystem::path& path, const std::string& key,
                          std::size_t count) {
  const std::string& t = text(m, path, key);
  const std::size_t expected = count * sizeof(float);
  if (t.size() != expected) {
    corrupt(path, key,
            "holds " + std::to_string(t.size()) + " bytes, " + std::to_string(count) +
                " floats need " + std::to_string(expected) + " (truncated or corrupt)");
  }
  std::vector<float> v(count);
  std::memcpy(v.data(), t.data(), t.size());
  if (!std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); }))
    corrupt(path, key, "holds a value that is not finite");
  return v;
}

std::string raw(std::span<const float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::size_t sample_size(const PreprocessOptions& p) {
  return static_cast<std::size_t>(p.channels) * p.width * p.height;
}

}  // namespace

bool is_segmentation_metadata(const std::map<std::string, std::string>& metadata) {
  return metadata.count("segment.version") != 0;
}

void save_segmentation_model(const std::filesystem::path& path, nn::Model& model,
                             const ModelInfo& info, std::span<const float> reference_input,
                             std::int32_t ignore_label) {
  const nn::ModelSpec& spec = model.spec();
  const std::string where = "save_segmentation_model('" + path.string() + "'): ";
  if (!spec.is_segmentation())
    throw InvalidArgument(where + "the model is not a segmentation model (no decoder_channels)");
  const auto classes = static_cast<std::size_t>(spec.classes);
  if (info.class_names.size() != classes || classes < 2 ||
      classes > static_cast<std::size_t>(kMaxSegmentationClasses)) {
    throw InvalidArgument(where + std::to_string(info.class_names.size()) +
                          " class names for a network of " + std::to_string(classes) +
                          " classes (2.." + std::to_string(kMaxSegmentationClasses) + ")");
  }
  const PreprocessOptions& p = info.preprocess;
  if (p.width != spec.width || p.height != spec.height || p.channels != spec.in_channels) {
    throw InvalidArgument(where + "the preprocessing's output " + std::to_string(p.channels) + "x" +
                          std::to_string(p.height) + "x" + std::to_string(p.width) +
                          " is not the network's input " + std::to_string(spec.in_channels) + "x" +
                          std::to_string(spec.height) + "x" + std::to_string(spec.width));
  }
  if (reference_input.size() != sample_size(p)) {
    throw InvalidArgument(where + "the reference input holds " +
                          std::to_string(reference_input.size()) + " values, not " +
                          std::to_string(sample_size(p)));
  }
  if (ignore_label >= 0 && ignore_label < spec.classes)
    throw InvalidArgument(where + "the ignore label " + std::to_string(ignore_label) +
                          " is a class index");
  ModelInfo stored = info;
  stored.references.clear();  // the classifier's references: one logit per class
  stored.staged = true;       // SegmentationLoader's path: resize to uint8, crop, normalize
  std::map<std::string, std::string> m;
  stored.to_metadata(m);
  const std::vector<float> logits = deploy_detail::segmentation_logits(model, reference_input, 1);
  m["segment.version"] = std::to_string(kSegmentationFileVersion);
  m["segment.ignore_label"] = std::to_string(ignore_label);
  m["segment.reference.input"] = raw(reference_input);
  m["segment.reference.logits"] = raw(logits);
  nn::save_checkpoint(path.string(), model, nullptr, m);
}

namespace deploy_detail {

LoadedSegmentation load_segmentation_file(const std::filesystem::path& path, Backend& backend) {
  LoadedSegmentation out;
  nn::CheckpointInfo ck;
  out.model = nn::load_model(path.string(), backend, &ck);
  const auto& m = ck.metadata;
  integer(m, path, "segment.version", kSegmentationFileVersion, kSegmentationFileVersion);
  const nn::ModelSpec& spec = out.model->spec();
  if (!spec.is_segmentation())
    corrupt(path, "segment.version", "is set but the network is not a U-Net (no decoder_channels)");
  out.info = ModelInfo::from_metadata(m, path.string());
  if (out.info.class_names.size() != static_cast<std::size_t>(spec.classes) ||
      spec.classes > kMaxSegmentationClasses) {
    corrupt(path, "model.classes",
            "names " + std::to_string(out.info.class_names.size()) + " classes, the network has " +
                std::to_string(spec.classes) + " (at most " +
                std::to_string(kMaxSegmentationClasses) + ")");
  }
  const PreprocessOptions& p = out.info.preprocess;
  if (p.width != spec.width || p.height != spec.height || p.channels != spec.in_channels) {
    corrupt(path, "model.preprocess",
            "gives " + std::to_string(p.channels) + "x" + std::to_string(p.height) + "x" +
                std::to_string(p.width) + ", the network takes " +
                std::to_string(spec.in_channels) + "x" + std::to_string(spec.height) + "x" +
                std::to_string(spec.width));
  }
  out.ignore_label =
      static_cast<std::int32_t>(integer(m, path, "segment.ignore_label", -1000, 65535));
  if (out.ignore_label >= 0 && out.ignore_label < spec.classes)
    corrupt(path, "segment.ignore_label", "is a class index");
  const std::size_t sample = sample_size(p);
  out.reference_input = floats(m, path, "segment.reference.input", sample);
  out.reference_logits =
      floats(m, path, "segment.reference.logits",
             static_cast<std::size_t>(spec.classes) * static_cast<std::size_t>(p.width) *
                 static_cast<std::size_t>(p.height));
  return out;
}

std::vector<float> segmentation_logits(nn::Model& model, std::span<const float> inputs,
                                       std::size_t count) {
  const Shape shape = model.input_shape(static_cast<std::int64_t>(count));
  if (static_cast<std::size_t>(shape_numel(shape)) != inputs.size()) {
    throw InvalidArgument("segmentation: " + std::to_string(inputs.size()) + " input values for " +
                          std::to_string(count) + " samples of " +
                          shape_to_string(model.input_shape(1)));
  }
  Tensor x(model.backend(), shape);
  x.copy_from_host(inputs.data());
  const Tensor& y = model.forward(x, false);
  std::vector<float> out(static_cast<std::size_t>(y.numel()));
  y.copy_to_host(out.data());
  return out;
}

SelfCheckResult segmentation_self_check(LoadedSegmentation& loaded, const std::string& backend) {
  SelfCheckResult r;
  r.tolerance = loaded.info.reference_tolerance;
  r.references = 1;
  const std::vector<float> again = segmentation_logits(*loaded.model, loaded.reference_input, 1);
  double scale = 1.0, worst = 0.0;
  for (float v : loaded.reference_logits) scale = std::max(scale, std::abs(double(v)));
  for (std::size_t i = 0; i < again.size(); ++i)
    worst = std::max(worst, std::abs(double(again[i]) - loaded.reference_logits[i]));
  r.max_error = std::isfinite(worst) ? worst / scale : INFINITY;
  r.ran = true;
  r.passed = r.max_error <= r.tolerance;
  r.message = std::string("segmentation model: self-check ") + (r.passed ? "passed" : "FAILED") +
              ": the reference input's logits on backend '" + backend + "' differ by " +
              modelfile_detail::float_text(r.max_error) + (r.passed ? " <= " : " > ") +
              "tolerance " + modelfile_detail::float_text(r.tolerance) +
              " (relative to max(1, |logit|))";
  return r;
}

}  // namespace deploy_detail
}  // namespace stoke
