// Preprocessing: the normalization a plain checkpoint records (nn::Classifier,
// lib/deploy/classifier.cpp).
#include "stoke/nn/inference.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

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

}  // namespace stoke::nn
