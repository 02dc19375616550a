// ModelInfo: the "model.*" metadata of a model file, written and read back
// with every missing key named.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "modelfile/text.hpp"
#include "stoke/error.hpp"
#include "stoke/model_file.hpp"

namespace stoke {

using modelfile_detail::float_text;

namespace {

using Meta = std::map<std::string, std::string>;

std::string floats_base64(std::span<const float> values) {
  return modelfile_detail::base64_encode(
      {reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(float)});
}

std::vector<float> base64_floats(const std::string& text, const std::string& what) {
  const auto bytes = modelfile_detail::base64_decode(text, what);
  if (bytes.size() % sizeof(float) != 0)
    throw InvalidArgument(what + ": not a whole number of float32 values");
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Reads keys, collecting the missing ones so the error names all of them.
class MetaReader {
 public:
  MetaReader(const Meta& meta, const std::string& path) : meta_(meta), path_(path) {}
  const std::string& text(const std::string& key) {
    static const std::string kEmpty;
    auto it = meta_.find(key);
    if (it == meta_.end()) {
      missing_.push_back(key);
      return kEmpty;
    }
    return it->second;
  }
  double number(const std::string& key) {
    const std::string& t = text(key);
    if (t.empty()) return 0;
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end != t.c_str() + t.size()) bad("'" + key + "' = '" + t + "' is not a number");
    return v;
  }
  std::uint64_t count(const std::string& key) {
    const std::string& t = text(key);
    if (t.empty()) return 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(t.c_str(), &end, 10);
    if (end != t.c_str() + t.size() || t[0] == '-')
      bad("'" + key + "' = '" + t + "' is not a count");
    return v;
  }
  // The entries under `prefix`, the prefix removed.
  Meta section(const std::string& prefix) const {
    Meta out;
    for (auto it = meta_.lower_bound(prefix); it != meta_.end() && it->first.rfind(prefix, 0) == 0;
         ++it) {
      out[it->first.substr(prefix.size())] = it->second;
    }
    return out;
  }
  [[noreturn]] void bad(const std::string& what) const {
    throw CorruptFile("model file '" + path_ + "': " + what);
  }
  void finish() const {
    if (missing_.empty()) return;
    std::string list;
    for (const auto& k : missing_) list += (list.empty() ? "" : ", ") + k;
    throw CorruptFile("model file '" + path_ +
                      "': not a self-describing stoke model file; missing " + list +
                      " (a checkpoint written without its model information cannot be used for "
                      "inference: write it with stoke::save_model or a Trainer of this version)");
  }

 private:
  const Meta& meta_;
  std::string path_;
  std::vector<std::string> missing_;
};

ResizeFilter parse_filter(const std::string& t, const MetaReader& r) {
  for (ResizeFilter f : {ResizeFilter::kBilinear, ResizeFilter::kArea, ResizeFilter::kAuto}) {
    if (t == to_string(f)) return f;
  }
  r.bad("unknown resize filter '" + t + "'");
}

OutputDtype parse_dtype(const std::string& t, const MetaReader& r) {
  for (OutputDtype d : {OutputDtype::kFloat32, OutputDtype::kFloat16, OutputDtype::kBFloat16,
                        OutputDtype::kUint8}) {
    if (t == to_string(d)) return d;
  }
  r.bad("unknown dtype '" + t + "'");
}

void write_preprocess(const PreprocessOptions& p, bool staged, Meta& m) {
  m["model.preprocess.channels"] = std::to_string(p.channels);
  m["model.preprocess.width"] = std::to_string(p.width);
  m["model.preprocess.height"] = std::to_string(p.height);
  m["model.preprocess.resize_width"] = std::to_string(p.resize_width ? p.resize_width : p.width);
  m["model.preprocess.resize_height"] =
      std::to_string(p.resize_height ? p.resize_height : p.height);
  m["model.preprocess.crop"] = "center";
  m["model.preprocess.filter"] = to_string(p.filter);
  m["model.preprocess.dtype"] = to_string(p.dtype);
  m["model.preprocess.dct_scaling"] = std::to_string(p.dct_scaling ? 1 : 0);
  m["model.preprocess.staged"] = std::to_string(staged ? 1 : 0);
  const auto& n = p.normalization;
  m["model.preprocess.normalization"] =
      n.kind == Normalization::Kind::kMeanStd ? "mean_std" : "min_max";
  std::vector<std::string> mean, sd;
  for (int c = 0; c < 3; ++c) {
    mean.push_back(float_text(n.mean[c]));
    sd.push_back(float_text(n.std[c]));
  }
  m["model.preprocess.mean"] = modelfile_detail::join(mean, ",");
  m["model.preprocess.std"] = modelfile_detail::join(sd, ",");
  m["model.preprocess.lo"] = float_text(n.lo);
  m["model.preprocess.hi"] = float_text(n.hi);
}

void read_preprocess(MetaReader& r, ModelInfo& info) {
  auto& p = info.preprocess;
  p.channels = static_cast<int>(r.count("model.preprocess.channels"));
  p.width = static_cast<int>(r.count("model.preprocess.width"));
  p.height = static_cast<int>(r.count("model.preprocess.height"));
  p.resize_width = static_cast<int>(r.count("model.preprocess.resize_width"));
  p.resize_height = static_cast<int>(r.count("model.preprocess.resize_height"));
  const std::string crop = r.text("model.preprocess.crop");
  const std::string filter = r.text("model.preprocess.filter");
  const std::string dtype = r.text("model.preprocess.dtype");
  p.dct_scaling = r.count("model.preprocess.dct_scaling") != 0;
  info.staged = r.count("model.preprocess.staged") != 0;
  const std::string kind = r.text("model.preprocess.normalization");
  const std::string mean = r.text("model.preprocess.mean");
  const std::string sd = r.text("model.preprocess.std");
  p.normalization.lo = static_cast<float>(r.number("model.preprocess.lo"));
  p.normalization.hi = static_cast<float>(r.number("model.preprocess.hi"));
  r.finish();
  if (crop != "center") r.bad("unknown crop '" + crop + "'");
  p.filter = parse_filter(filter, r);
  p.dtype = parse_dtype(dtype, r);
  if (kind != "mean_std" && kind != "min_max") r.bad("unknown normalization '" + kind + "'");
  p.normalization.kind =
      kind == "mean_std" ? Normalization::Kind::kMeanStd : Normalization::Kind::kMinMax;
  const auto m = modelfile_detail::split(mean, ','), s = modelfile_detail::split(sd, ',');
  if (m.size() != 3 || s.size() != 3) r.bad("normalization mean/std need 3 values");
  for (int c = 0; c < 3; ++c) {
    p.normalization.mean[c] = std::strtof(m[c].c_str(), nullptr);
    p.normalization.std[c] = std::strtof(s[c].c_str(), nullptr);
  }
  if ((p.channels != 1 && p.channels != 3) || p.width <= 0 || p.height <= 0 ||
      p.resize_width < p.width || p.resize_height < p.height) {
    r.bad("preprocessing sizes are inconsistent");
  }
  // Bounded before any buffer is sized from them (a crafted file with a
  // valid CRC is still input): stoke writes a resize at most 1/8 larger.
  constexpr int kMaxSide = 16384;
  if (p.width > kMaxSide || p.height > kMaxSide || p.resize_width > 2 * p.width + 8 ||
      p.resize_height > 2 * p.height + 8) {
    r.bad("preprocessing sizes are out of range (" + std::to_string(p.resize_width) + "x" +
          std::to_string(p.resize_height) + " for a " + std::to_string(p.width) + "x" +
          std::to_string(p.height) + " input)");
  }
  for (int c = 0; c < 3; ++c) {
    if (!std::isfinite(p.normalization.mean[c]) || !std::isfinite(p.normalization.std[c]) ||
        p.normalization.std[c] == 0.0f)
      r.bad("normalization mean/std must be finite with std != 0");
  }
}

}  // namespace

void ModelInfo::to_metadata(Meta& m) const {
  m["model.format"] = std::to_string(kModelInfoVersion);
  m["model.classes.count"] = std::to_string(class_names.size());
  for (std::size_t i = 0; i < class_names.size(); ++i)
    m["model.classes." + std::to_string(i)] = class_names[i];
  write_preprocess(preprocess, staged, m);
  m["model.input"] = std::to_string(preprocess.channels) + "x" + std::to_string(preprocess.height) +
                     "x" + std::to_string(preprocess.width);
  m["model.provenance.stoke_version"] = stoke_version;
  m["model.provenance.created"] = created;
  m["model.provenance.dataset_source"] = dataset_source;
  m["model.provenance.dataset_fingerprint"] = std::to_string(dataset_fingerprint);
  std::vector<std::string> counts;
  for (auto c : class_counts) counts.push_back(std::to_string(c));
  m["model.provenance.class_counts"] = modelfile_detail::join(counts, ",");
  m["model.provenance.validation_samples"] = std::to_string(validation_samples);
  for (const auto& [k, v] : trainer_options) m["model.trainer." + k] = v;
  for (const auto& [k, v] : configuration) m["model.config." + k] = v;
  for (const auto& [k, v] : metrics) m["model.metrics." + k] = v;
  m["model.history"] = modelfile_detail::join(history, ";");
  m["model.precision"] = to_string(precision);
  if (!int8_input_ranges.empty()) {
    std::vector<std::string> ranges;
    for (const auto& [lo, hi] : int8_input_ranges)
      ranges.push_back(float_text(lo) + ":" + float_text(hi));
    m["model.int8.input_ranges"] = modelfile_detail::join(ranges, ",");
  }
  for (const auto& [k, v] : int8_calibration) m["model.int8.calibration." + k] = v;
  m["model.reference.backend"] = reference_backend;
  m["model.reference.tolerance"] = float_text(reference_tolerance);
  m["model.reference.count"] = std::to_string(references.size());
  for (std::size_t i = 0; i < references.size(); ++i) {
    const std::string k = "model.reference." + std::to_string(i) + ".";
    m[k + "source"] = references[i].source;
    m[k + "input"] = floats_base64(references[i].input);
    m[k + "logits"] = floats_base64(references[i].logits);
    if (!references[i].encoded.empty())
      m[k + "encoded"] = modelfile_detail::base64_encode(references[i].encoded);
  }
}

PreprocessOptions read_preprocess_metadata(const Meta& metadata, const std::string& what) {
  MetaReader r(metadata, what);
  ModelInfo info;
  read_preprocess(r, info);
  return info.preprocess;
}

ModelInfo ModelInfo::from_metadata(const Meta& m, const std::string& path) {
  MetaReader r(m, path);
  ModelInfo info;
  const std::string format = r.text("model.format");
  const std::uint64_t classes = r.count("model.classes.count");
  r.text("model.provenance.stoke_version");
  r.text("model.reference.count");
  if (!format.empty() && format != std::to_string(kModelInfoVersion)) {
    r.bad("model information format " + format + ", this build reads " +
          std::to_string(kModelInfoVersion));
  }
  for (std::uint64_t i = 0; i < classes && i < 100000; ++i) {
    info.class_names.push_back(r.text("model.classes." + std::to_string(i)));
  }
  read_preprocess(r, info);  // finishes: every missing key so far is named
  info.stoke_version = r.text("model.provenance.stoke_version");
  info.created = r.text("model.provenance.created");
  info.dataset_source = r.text("model.provenance.dataset_source");
  info.dataset_fingerprint = r.count("model.provenance.dataset_fingerprint");
  for (const auto& c : modelfile_detail::split(r.text("model.provenance.class_counts"), ',')) {
    info.class_counts.push_back(std::strtoull(c.c_str(), nullptr, 10));
  }
  info.validation_samples = r.count("model.provenance.validation_samples");
  info.trainer_options = r.section("model.trainer.");
  info.configuration = r.section("model.config.");
  info.metrics = r.section("model.metrics.");
  info.history = modelfile_detail::split(r.text("model.history"), ';');
  if (const auto it = m.find("model.precision"); it != m.end()) {
    if (it->second == "bf16")
      info.precision = Precision::kBf16;
    else if (it->second == "int8")
      info.precision = Precision::kInt8;
    else if (it->second != "fp32")
      r.bad("model.precision '" + it->second + "' is not fp32, bf16 or int8");
  }
  if (const auto it = m.find("model.int8.input_ranges"); it != m.end()) {
    for (const auto& pair : modelfile_detail::split(it->second, ',')) {
      const auto colon = pair.find(':');
      char* end1 = nullptr;
      char* end2 = nullptr;
      const float lo = std::strtof(pair.c_str(), &end1);
      const float hi =
          colon == std::string::npos ? NAN : std::strtof(pair.c_str() + colon + 1, &end2);
      if (colon == std::string::npos || end1 != pair.c_str() + colon || *end2 != '\0' ||
          !std::isfinite(lo) || !std::isfinite(hi) || !(lo <= hi)) {
        r.bad("model.int8.input_ranges: '" + pair + "' is not a range min:max");
      }
      info.int8_input_ranges.emplace_back(lo, hi);
    }
  }
  info.int8_calibration = r.section("model.int8.calibration.");
  if (info.precision == Precision::kInt8 && info.int8_input_ranges.empty())
    r.bad("model.precision is int8 but model.int8.input_ranges (the calibration) is missing");
  info.reference_backend = r.text("model.reference.backend");
  info.reference_tolerance = static_cast<float>(r.number("model.reference.tolerance"));
  const std::uint64_t refs = r.count("model.reference.count");
  for (std::uint64_t i = 0; i < refs && i < 1000; ++i) {
    const std::string k = "model.reference." + std::to_string(i) + ".";
    ReferenceSample s;
    s.source = r.text(k + "source");
    try {
      s.input = base64_floats(r.text(k + "input"), k + "input");
      s.logits = base64_floats(r.text(k + "logits"), k + "logits");
      if (auto it = m.find(k + "encoded"); it != m.end())
        s.encoded = modelfile_detail::base64_decode(it->second, k + "encoded");
    } catch (const InvalidArgument& e) {
      r.bad(e.what());
    }
    info.references.push_back(std::move(s));
  }
  r.finish();
  const std::size_t sample = static_cast<std::size_t>(info.preprocess.channels) *
                             info.preprocess.width * info.preprocess.height;
  for (const auto& s : info.references) {
    if (s.input.size() != sample || s.logits.size() != info.class_names.size()) {
      r.bad("reference sample '" + s.source + "' has " + std::to_string(s.input.size()) +
            " inputs and " + std::to_string(s.logits.size()) + " logits, expected " +
            std::to_string(sample) + " and " + std::to_string(info.class_names.size()));
    }
    // A self-check against NaN references passes whatever the model computes.
    const auto finite = [](float v) { return std::isfinite(v); };
    if (!std::all_of(s.logits.begin(), s.logits.end(), finite) ||
        !std::all_of(s.input.begin(), s.input.end(), finite))
      r.bad("reference sample '" + s.source + "' holds NaN or infinite values");
  }
  return info;
}

}  // namespace stoke
