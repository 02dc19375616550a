// Predictor: a model file's network behind a lock, per-thread Sessions for
// decoding and preprocessing, and the load-time self-check.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "deploy/model_file.hpp"
#include "deploy/preprocess.hpp"
#include "deploy/text.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"

namespace stoke {

namespace {

constexpr std::size_t kChunk = 32;  // samples per forward in batch calls

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// Decodes and preprocesses the references that carry their file, and
// measures the largest difference from the stored input in pixel levels.
void check_decoding(const ModelInfo& info, SimdLevel level, SelfCheckResult& r) {
  deploy_detail::SamplePreprocessor pre(info, level);
  const auto& p = info.preprocess;
  const std::size_t plane = static_cast<std::size_t>(p.width) * p.height;
  float scale[3] = {1.f, 1.f, 1.f}, bias;
  for (int c = 0; c < p.channels; ++c) p.normalization.affine(c, scale[c], bias);
  std::vector<float> mine(pre.sample_size());
  for (const auto& s : info.references) {
    if (s.encoded.empty()) continue;
    try {
      pre.from_bytes(s.encoded, s.source, mine);
    } catch (const Error& e) {
      r.max_input_levels = INFINITY;
      r.message += std::string("; cannot decode reference '") + s.source + "': " + e.what();
      continue;
    }
    ++r.decoded_references;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      const double levels =
          std::abs(double(mine[k]) - s.input[k]) / std::abs(double(scale[k / plane]));
      r.max_input_levels = std::max(r.max_input_levels, std::isfinite(levels) ? levels : INFINITY);
    }
  }
}

SelfCheckResult run_self_check(const ModelInfo& info, nn::Model& model, SimdLevel level) {
  SelfCheckResult r;
  r.tolerance = info.reference_tolerance;
  r.references = info.references.size();
  if (info.references.empty()) {
    r.message = "self-check skipped: the model file holds no reference samples";
    return r;
  }
  std::vector<float> inputs;
  for (const auto& s : info.references) inputs.insert(inputs.end(), s.input.begin(), s.input.end());
  const auto logits = deploy_detail::run_logits(model, inputs, info.references.size());
  const std::size_t classes = info.class_names.size();
  for (std::size_t i = 0; i < info.references.size(); ++i) {
    double scale = 1.0, worst = 0.0;
    for (std::size_t c = 0; c < classes; ++c)
      scale = std::max(scale, std::abs(double(info.references[i].logits[c])));
    for (std::size_t c = 0; c < classes; ++c) {
      worst =
          std::max(worst, std::abs(double(logits[i * classes + c]) - info.references[i].logits[c]));
    }
    const double err = std::isfinite(worst) ? worst / scale : INFINITY;
    r.max_error = std::max(r.max_error, err);
  }
  r.ran = true;
  const bool logits_ok = r.max_error <= r.tolerance;
  check_decoding(info, level, r);  // may append decode failures to r.message
  const std::string decode_notes = r.message;
  const bool decoding_ok = r.max_input_levels <= 1.0;
  r.passed = logits_ok && decoding_ok;
  r.message = std::string("self-check ") + (r.passed ? "passed" : "FAILED") + ": " +
              std::to_string(r.references) + " reference samples on backend '" +
              model.backend().name() + "' (trained on '" + info.reference_backend + "', stoke " +
              info.stoke_version + "): max logit error " + short_number(r.max_error) +
              (logits_ok ? " <= " : " > ") + "tolerance " + short_number(r.tolerance) +
              " (relative to max(1, |logit|)); " + std::to_string(r.decoded_references) +
              " decoded from their files: max input difference " +
              short_number(r.max_input_levels) + (decoding_ok ? " <= " : " > ") + "1 pixel level" +
              decode_notes;
  return r;
}

std::vector<Prediction> to_predictions(const ModelInfo& info, const std::vector<float>& logits,
                                       std::size_t count) {
  const std::size_t classes = info.class_names.size();
  std::vector<Prediction> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const float* l = logits.data() + i * classes;
    const float top = *std::max_element(l, l + classes);
    auto& p = out[i];
    p.probabilities.resize(classes);
    double sum = 0;
    for (std::size_t c = 0; c < classes; ++c) sum += p.probabilities[c] = std::exp(l[c] - top);
    for (auto& v : p.probabilities) v = static_cast<float>(v / sum);
    p.label = static_cast<int>(std::max_element(l, l + classes) - l);
    p.class_name = info.class_names[static_cast<std::size_t>(p.label)];
    p.confidence = p.probabilities[static_cast<std::size_t>(p.label)];
  }
  return out;
}

}  // namespace

struct Predictor::Impl {
  deploy_detail::LoadedModel loaded;
  SimdLevel level = SimdLevel::kScalar;
  SelfCheckResult check;
  std::mutex forward_mutex;
  std::mutex session_mutex;
  std::unique_ptr<Session> session;  // for the Predictor's own predict_* calls
};

Predictor::Predictor(const std::filesystem::path& model_file, PredictorOptions options)
    : impl_(std::make_unique<Impl>()) {
  Backend& backend = options.backend ? *options.backend : default_backend();
  impl_->loaded = deploy_detail::load_model_file(model_file, backend);
  impl_->level = default_simd_level();
  impl_->check = run_self_check(impl_->loaded.info, *impl_->loaded.model, impl_->level);
  if (impl_->check.ran && !impl_->check.passed && options.require_self_check) {
    throw Unsupported("model file '" + model_file.string() + "': " + impl_->check.message +
                      "; this build, machine or backend does not reproduce the trainer's outputs "
                      "(set PredictorOptions::require_self_check = false to load anyway)");
  }
  impl_->session = std::make_unique<Session>(*this);
}

Predictor::~Predictor() = default;

const ModelInfo& Predictor::info() const noexcept {
  return impl_->loaded.info;
}
const nn::ModelSpec& Predictor::spec() const noexcept {
  return impl_->loaded.model->spec();
}
const SelfCheckResult& Predictor::self_check() const noexcept {
  return impl_->check;
}
std::size_t Predictor::sample_size() const noexcept {
  const auto& p = impl_->loaded.info.preprocess;
  return static_cast<std::size_t>(p.channels) * p.width * p.height;
}

std::vector<float> Predictor::logits(std::span<const float> inputs, std::size_t count) {
  std::lock_guard lock(impl_->forward_mutex);
  return deploy_detail::run_logits(*impl_->loaded.model, inputs, count);
}

std::vector<Prediction> Predictor::forward(std::span<const float> inputs, std::size_t count) {
  return to_predictions(impl_->loaded.info, logits(inputs, count), count);
}

Prediction Predictor::predict_file(const std::filesystem::path& path) {
  std::lock_guard lock(impl_->session_mutex);
  return impl_->session->predict_file(path);
}
Prediction Predictor::predict_bytes(std::span<const std::uint8_t> bytes, std::string_view name) {
  std::lock_guard lock(impl_->session_mutex);
  return impl_->session->predict_bytes(bytes, name);
}
Prediction Predictor::predict_pixels(const PixelBuffer& pixels) {
  std::lock_guard lock(impl_->session_mutex);
  return impl_->session->predict_pixels(pixels);
}
std::vector<Prediction> Predictor::predict_files(std::span<const std::filesystem::path> paths) {
  std::lock_guard lock(impl_->session_mutex);
  return impl_->session->predict_files(paths);
}

// ---- Session ------------------------------------------------------------------------

struct Predictor::Session::Impl {
  Impl(Predictor& p) : owner(p), pre(p.info(), p.impl_->level), input(pre.sample_size()) {}
  Predictor& owner;
  deploy_detail::SamplePreprocessor pre;
  std::vector<float> input;
};

Predictor::Session::Session(Predictor& predictor) : impl_(std::make_unique<Impl>(predictor)) {}
Predictor::Session::~Session() = default;
Predictor::Session::Session(Session&&) noexcept = default;

void Predictor::Session::preprocess_file(const std::filesystem::path& path, std::span<float> out) {
  impl_->pre.from_file(path, out);
}
void Predictor::Session::preprocess_bytes(std::span<const std::uint8_t> bytes,
                                          std::string_view name, std::span<float> out) {
  impl_->pre.from_bytes(bytes, name, out);
}
void Predictor::Session::preprocess_pixels(const PixelBuffer& pixels, std::span<float> out) {
  impl_->pre.from_pixels(pixels, out);
}

Prediction Predictor::Session::predict_file(const std::filesystem::path& path) {
  impl_->pre.from_file(path, impl_->input);
  return impl_->owner.forward(impl_->input, 1).front();
}
Prediction Predictor::Session::predict_bytes(std::span<const std::uint8_t> bytes,
                                             std::string_view name) {
  impl_->pre.from_bytes(bytes, name, impl_->input);
  return impl_->owner.forward(impl_->input, 1).front();
}
Prediction Predictor::Session::predict_pixels(const PixelBuffer& pixels) {
  impl_->pre.from_pixels(pixels, impl_->input);
  return impl_->owner.forward(impl_->input, 1).front();
}

std::vector<Prediction> Predictor::Session::predict_files(
    std::span<const std::filesystem::path> paths) {
  std::vector<Prediction> out;
  const std::size_t n = impl_->pre.sample_size();
  std::vector<float> batch;
  for (std::size_t first = 0; first < paths.size(); first += kChunk) {
    const std::size_t count = std::min(kChunk, paths.size() - first);
    batch.resize(count * n);
    for (std::size_t i = 0; i < count; ++i) {
      impl_->pre.from_file(paths[first + i], std::span<float>(batch).subspan(i * n, n));
    }
    auto part = impl_->owner.forward(batch, count);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

std::vector<Prediction> Predictor::Session::predict_pixels(std::span<const PixelBuffer> images) {
  std::vector<Prediction> out;
  const std::size_t n = impl_->pre.sample_size();
  std::vector<float> batch;
  for (std::size_t first = 0; first < images.size(); first += kChunk) {
    const std::size_t count = std::min(kChunk, images.size() - first);
    batch.resize(count * n);
    for (std::size_t i = 0; i < count; ++i) {
      impl_->pre.from_pixels(images[first + i], std::span<float>(batch).subspan(i * n, n));
    }
    auto part = impl_->owner.forward(batch, count);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

}  // namespace stoke
