// Classifier: checkpoint -> model, uint8 HWC images -> normalized NCHW -> probabilities.
#include "stoke/nn/inference.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "nn/fused_inference.hpp"
#include "stoke/error.hpp"

namespace stoke::nn {

namespace {

std::string join(const std::vector<float>& v) {
  std::ostringstream out;
  out.precision(9);
  for (std::size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
  return out.str();
}

std::vector<float> floats(const std::string& key, const std::string& text) {
  std::vector<float> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      std::size_t used = 0;
      out.push_back(std::stof(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::logic_error&) {
      throw InvalidArgument("preprocessing: '" + key + "' = '" + text +
                            "' is not a comma list of numbers");
    }
  }
  if (out.empty()) throw InvalidArgument("preprocessing: '" + key + "' is empty");
  return out;
}

}  // namespace

void Preprocessing::to_metadata(std::map<std::string, std::string>& metadata) const {
  metadata["preprocess.scale"] = join({scale});
  metadata["preprocess.mean"] = join(mean);
  metadata["preprocess.std"] = join(std);
}

namespace {

// A model file's normalization ("model.preprocess.*", written by
// stoke::save_model and the Trainer) in this struct's form: min-max
// lo + x (hi - lo) is (x - mean) / std with mean = -lo / (hi - lo),
// std = 1 / (hi - lo).
Preprocessing from_model_file(const std::map<std::string, std::string>& metadata) {
  auto get = [&](const std::string& key) -> const std::string& {
    auto it = metadata.find(key);
    if (it == metadata.end()) throw InvalidArgument("preprocessing: '" + key + "' is missing");
    return it->second;
  };
  Preprocessing p;
  const std::string& kind = get("model.preprocess.normalization");
  if (kind == "mean_std") {
    p.mean = floats("model.preprocess.mean", get("model.preprocess.mean"));
    p.std = floats("model.preprocess.std", get("model.preprocess.std"));
    // Three values are stored whatever the channel count; keep the model's.
    const auto channels = static_cast<std::size_t>(
        floats("model.preprocess.channels", get("model.preprocess.channels"))[0]);
    if (channels >= 1 && channels <= p.mean.size() && channels <= p.std.size()) {
      p.mean.resize(channels);
      p.std.resize(channels);
    }
  } else if (kind == "min_max") {
    const float lo = floats("model.preprocess.lo", get("model.preprocess.lo"))[0];
    const float hi = floats("model.preprocess.hi", get("model.preprocess.hi"))[0];
    if (hi == lo) throw InvalidArgument("preprocessing: min-max range is empty");
    p.mean = {-lo / (hi - lo)};
    p.std = {1.0f / (hi - lo)};
  } else {
    throw InvalidArgument("preprocessing: unknown normalization '" + kind + "'");
  }
  return p;
}

}  // namespace

Preprocessing Preprocessing::from_metadata(const std::map<std::string, std::string>& metadata) {
  if (metadata.count("model.preprocess.normalization")) return from_model_file(metadata);
  const bool any = metadata.count("preprocess.scale") || metadata.count("preprocess.mean") ||
                   metadata.count("preprocess.std");
  if (!any) {
    throw InvalidArgument(
        "preprocessing: the checkpoint records none (no model.preprocess.* or preprocess.* keys); "
        "write it with stoke::save_model, a Trainer, or Preprocessing::to_metadata");
  }
  Preprocessing p;
  if (auto it = metadata.find("preprocess.scale"); it != metadata.end())
    p.scale = floats(it->first, it->second)[0];
  if (auto it = metadata.find("preprocess.mean"); it != metadata.end())
    p.mean = floats(it->first, it->second);
  if (auto it = metadata.find("preprocess.std"); it != metadata.end())
    p.std = floats(it->first, it->second);
  for (float s : p.std) {
    if (!(s > 0.0f)) throw InvalidArgument("preprocessing: 'preprocess.std' values must be > 0");
  }
  return p;
}

Classifier::Classifier(const std::string& checkpoint_path, Backend* backend) {
  CheckpointInfo info;
  model_ = load_model(checkpoint_path, backend ? *backend : default_backend(), &info);
  try {
    preprocessing_ = Preprocessing::from_metadata(info.metadata);
  } catch (const InvalidArgument& e) {
    throw CorruptFile("checkpoint '" + checkpoint_path + "': " + e.what());
  }
  const std::size_t c = static_cast<std::size_t>(model_->spec().in_channels);
  for (const auto* v : {&preprocessing_.mean, &preprocessing_.std}) {
    if (v->size() != 1 && v->size() != c) {
      throw CorruptFile("checkpoint '" + checkpoint_path + "': preprocessing has " +
                        std::to_string(v->size()) + " values per channel list, the model has " +
                        std::to_string(c) + " channels");
    }
  }
  fused_ = std::make_unique<FusedInference>(model_->network());
}

Classifier::~Classifier() = default;

Prediction Classifier::classify(const std::uint8_t* pixels, int height, int width, int channels) {
  return classify_batch(pixels, 1, height, width, channels).front();
}

std::vector<Prediction> Classifier::classify_batch(const std::uint8_t* pixels, int count,
                                                   int height, int width, int channels) {
  const ModelSpec& s = model_->spec();
  if (height != s.height || width != s.width || channels != s.in_channels) {
    throw InvalidArgument(
        "Classifier: image " + std::to_string(height) + "x" + std::to_string(width) + "x" +
        std::to_string(channels) + " does not match the model input " + std::to_string(s.height) +
        "x" + std::to_string(s.width) + "x" + std::to_string(s.in_channels) + "; resize first");
  }
  if (count < 1 || !pixels) throw InvalidArgument("Classifier: need at least one image");
  const std::size_t plane = static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  std::vector<float> host(static_cast<std::size_t>(count) * channels * plane);
  for (int n = 0; n < count; ++n)
    for (int c = 0; c < channels; ++c) {
      const float mean = preprocessing_.mean.size() == 1
                             ? preprocessing_.mean[0]
                             : preprocessing_.mean[static_cast<std::size_t>(c)];
      const float inv_std =
          1.0f / (preprocessing_.std.size() == 1 ? preprocessing_.std[0]
                                                 : preprocessing_.std[static_cast<std::size_t>(c)]);
      const std::uint8_t* src = pixels + static_cast<std::size_t>(n) * plane * channels + c;
      float* dst = host.data() + (static_cast<std::size_t>(n) * channels + c) * plane;
      for (std::size_t i = 0; i < plane; ++i)
        dst[i] = (src[i * channels] * preprocessing_.scale - mean) * inv_std;
    }
  std::lock_guard lock(mutex_);
  Backend& be = model_->backend();
  const Shape in = model_->input_shape(count);
  if (!input_.defined() || input_.shape() != in) input_ = Tensor(be, in);
  input_.copy_from_host(host.data());
  const Tensor& logits = fused_->forward(input_);
  const auto v = logits.to_vector();
  std::vector<Prediction> out(static_cast<std::size_t>(count));
  const std::size_t k = static_cast<std::size_t>(s.classes);
  for (std::size_t n = 0; n < out.size(); ++n) {
    const float* row = v.data() + n * k;
    float mx = row[0];
    for (std::size_t j = 1; j < k; ++j) mx = std::max(mx, row[j]);
    Prediction& p = out[n];
    p.probabilities.resize(k);
    double sum = 0;
    for (std::size_t j = 0; j < k; ++j) sum += p.probabilities[j] = std::exp(row[j] - mx);
    for (std::size_t j = 0; j < k; ++j) {
      p.probabilities[j] = static_cast<float>(p.probabilities[j] / sum);
      if (p.label < 0 || p.probabilities[j] > p.confidence) {
        p.label = static_cast<int>(j);
        p.confidence = p.probabilities[j];
      }
    }
  }
  return out;
}

}  // namespace stoke::nn
