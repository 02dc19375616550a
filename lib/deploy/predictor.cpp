// Predictor: a model file's network as one inference plan, run by a pool of
// workers (one per concurrent caller), Sessions for decoding and
// preprocessing, and the load-time self-check through the same path.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>

#include "deploy/model_kinds.hpp"
#include "deploy/preprocess.hpp"
#include "deploy/segmentation.hpp"
#include "modelfile/model_file.hpp"
#include "modelfile/text.hpp"
#include "nn/fused_inference.hpp"
#include "stoke/backend.hpp"
#include "stoke/deploy.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/program.hpp"

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

// The references through `run` (the Predictor's own forward path).
using RunLogits = std::function<std::vector<float>(std::span<const float>, std::size_t)>;

SelfCheckResult run_self_check(const ModelInfo& info, const RunLogits& run, SimdLevel level,
                               const std::string& backend) {
  SelfCheckResult r;
  r.tolerance = info.reference_tolerance;
  r.references = info.references.size();
  if (info.references.empty()) {
    r.message = "self-check skipped: the model file holds no reference samples";
    return r;
  }
  std::vector<float> inputs;
  for (const auto& s : info.references) inputs.insert(inputs.end(), s.input.begin(), s.input.end());
  const auto logits = run(inputs, info.references.size());
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
              std::to_string(r.references) + " reference samples on backend '" + backend +
              "' (trained on '" + info.reference_backend + "', stoke " + info.stoke_version +
              "): max logit error " + short_number(r.max_error) + (logits_ok ? " <= " : " > ") +
              "tolerance " + short_number(r.tolerance) + " (relative to max(1, |logit|)); " +
              std::to_string(r.decoded_references) +
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

// One forward at a time per worker: its own backend (a worker of the
// model's: its own workspace) and inference program over the plan's folded
// weights. Workers are made on demand, one per thread that calls at once,
// and kept. Where the backend has no workers or the plan cannot run twice at
// once (a layer outside the op list), one worker on the model's backend
// serves every call in turn.
struct ForwardWorker {
  std::unique_ptr<Backend> backend;  // null: the model's own
  std::unique_ptr<InferenceProgram> program;
  Tensor input;
};

struct Predictor::Impl {
  modelfile_detail::LoadedModel loaded;
  SimdLevel level = SimdLevel::kScalar;
  std::uint64_t max_pixels = kDefaultMaxImagePixels;  // PredictorOptions::max_image_pixels
  SelfCheckResult check;
  std::unique_ptr<nn::FusedInference> plan;
  bool concurrent = false;
  std::mutex pool_mutex;
  std::condition_variable worker_free;
  std::vector<std::unique_ptr<ForwardWorker>> idle;
  std::size_t workers = 0;
  std::size_t in_flight = 0;                            // calls running now
  std::vector<std::unique_ptr<Session>> idle_sessions;  // the predict_* calls'
  // An anomaly model (loaded.model null then): its calls take turns.
  std::unique_ptr<deploy_detail::AnomalyScorer> anomaly;
  std::mutex anomaly_mutex;
  AnomalyModelInfo anomaly_details;
  // A segmentation model (loaded.model null then; its own copy in the runner).
  std::unique_ptr<deploy_detail::SegmentationRunner> segmentation;
  std::string file;  // the model file, for the errors below

  void require_classifier(const char* call) const {
    if (segmentation) {
      throw InvalidArgument("Predictor::" + std::string(call) + ": '" + file +
                            "' is a segmentation model: segment it with segment_file, "
                            "segment_bytes or segment_pixels");
    }
    if (!anomaly) return;
    throw InvalidArgument("Predictor::" + std::string(call) + ": '" + file +
                          "' is an anomaly model (" + anomaly_details.method +
                          "), which has no classes: score it with score_file, score_bytes or "
                          "score_pixels");
  }
  deploy_detail::AnomalyScorer& scorer(const char* call) const {
    if (anomaly) return *anomaly;
    if (segmentation) {
      throw InvalidArgument("Predictor::" + std::string(call) + ": '" + file +
                            "' is a segmentation model: anomaly scores come from anomaly models; "
                            "segment it with segment_file, segment_bytes or segment_pixels");
    }
    throw InvalidArgument("Predictor::" + std::string(call) + ": '" + file +
                          "' is a classifier: anomaly scores come from anomaly models (stoke "
                          "train --task anomaly); classify it with predict_file, predict_bytes or "
                          "predict_pixels");
  }

  std::unique_ptr<ForwardWorker> take_worker() {
    std::unique_lock lock(pool_mutex);
    if (!concurrent) worker_free.wait(lock, [&] { return !idle.empty() || workers == 0; });
    // Alone, a call uses the arena's threads; beside others, its own thread
    // only (the same results: the split of every op is fixed), so that
    // callers do not queue for the arena's threads.
    const bool alone = in_flight++ == 0;
    if (!idle.empty()) {
      auto w = std::move(idle.back());
      idle.pop_back();
      if (w->backend) w->backend->set_parallel(alone);
      return w;
    }
    ++workers;
    lock.unlock();
    try {
      return make_worker(alone);
    } catch (...) {  // out of memory making it: the books as before the call
      std::lock_guard relock(pool_mutex);
      --workers;
      --in_flight;
      worker_free.notify_one();
      throw;
    }
  }
  std::unique_ptr<ForwardWorker> make_worker(bool alone) {
    auto w = std::make_unique<ForwardWorker>();
    Backend& model_backend = loaded.model->backend();
    if (concurrent) {
      w->backend = model_backend.make_worker();
      w->backend->set_parallel(alone);
    }
    w->program = plan->compile(w->backend ? *w->backend : model_backend);
    return w;
  }
  void give_back(std::unique_ptr<ForwardWorker> w) {
    {
      std::lock_guard lock(pool_mutex);
      --in_flight;
      idle.push_back(std::move(w));
    }
    worker_free.notify_one();
  }

  // The plan in `precision` from here on, its logits on the references
  // compared with fp32's (SelfCheckResult's precision fields).
  void switch_precision(Precision precision) {
    const ModelInfo& info = loaded.info;
    std::vector<float> inputs;
    for (const auto& r : info.references)
      inputs.insert(inputs.end(), r.input.begin(), r.input.end());
    const std::size_t n = info.references.size();
    const std::vector<float> fp32 = n ? logits(inputs, n) : std::vector<float>{};
    {
      std::lock_guard lock(pool_mutex);  // the constructor's: no call runs yet
      idle.clear();
      workers = 0;
    }
    std::vector<ActivationRange> ranges;  // int8's calibration
    if (precision == Precision::kInt8) {
      for (const auto& [lo, hi] : info.int8_input_ranges) ranges.push_back({lo, hi});
    }
    plan = std::make_unique<nn::FusedInference>(
        loaded.model->network(), nn::FusedInference::Layout::kAuto, precision, ranges);
    check.precision = precision;
    if (n == 0) return;
    const std::vector<float> low = logits(inputs, n);
    const std::size_t classes = info.class_names.size();
    for (std::size_t i = 0; i < n; ++i) {
      const float* a = fp32.data() + i * classes;
      const float* b = low.data() + i * classes;
      double scale = 1.0, worst = 0.0;
      for (std::size_t c = 0; c < classes; ++c) {
        scale = std::max(scale, std::abs(double(a[c])));
        worst = std::max(worst, std::abs(double(a[c]) - b[c]));
      }
      check.precision_max_error =
          std::max(check.precision_max_error, std::isfinite(worst) ? worst / scale : INFINITY);
      if (std::max_element(a, a + classes) - a != std::max_element(b, b + classes) - b)
        ++check.precision_disagreements;
    }
    check.message += std::string("; in ") + to_string(precision) + ": max logit difference " +
                     short_number(check.precision_max_error) + " from fp32, " +
                     std::to_string(check.precision_disagreements) + " of " + std::to_string(n) +
                     " reference decisions changed";
    if (check.precision_disagreements > 0) {
      log_warn(std::string("STOKE_PRECISION=") + to_string(precision) +
               " changes the decision on " + std::to_string(check.precision_disagreements) +
               " of " + std::to_string(n) +
               " reference samples of the model file: check accuracy with stoke eval");
    }
  }

  std::vector<float> logits(std::span<const float> inputs, std::size_t count) {
    require_classifier("logits");
    const nn::Model& model = *loaded.model;
    const Shape shape = model.input_shape(static_cast<std::int64_t>(count));
    if (static_cast<std::size_t>(shape_numel(shape)) != inputs.size()) {
      throw InvalidArgument("stoke: " + std::to_string(inputs.size()) + " input values for " +
                            std::to_string(count) + " samples of " +
                            shape_to_string(model.input_shape(1)));
    }
    std::unique_ptr<ForwardWorker> w = take_worker();
    struct Return {  // the worker goes back to the pool on every path, an exception's too
      Impl& impl;
      std::unique_ptr<ForwardWorker>& w;
      ~Return() { impl.give_back(std::move(w)); }
    } back{*this, w};
    Backend& be = w->backend ? *w->backend : loaded.model->backend();
    if (!w->input.defined() || w->input.shape() != shape) w->input = Tensor(be, shape);
    w->input.copy_from_host(inputs.data());
    const Tensor& y = w->program->forward(w->input);
    std::vector<float> out(static_cast<std::size_t>(y.numel()));
    y.copy_to_host(out.data());
    return out;
  }
};

Predictor::Predictor(const std::filesystem::path& model_file, const PredictorOptions& options,
                     deploy_detail::OpenedModel&& opened)
    : impl_(std::make_unique<Impl>()) {
  impl_->file = model_file.string();
  if (opened.anomaly) {
    impl_->anomaly = std::move(opened.anomaly);
    impl_->loaded.info = std::move(opened.info);
    impl_->anomaly_details = std::move(opened.details);
    impl_->check = std::move(opened.check);
    impl_->level = default_simd_level();
    impl_->max_pixels = deploy_detail::max_image_pixels(options);
    return;
  }
  Backend& backend = options.backend ? *options.backend : default_backend();
  if (opened.segmentation) {
    open_segmentation(model_file, options, backend);
    return;
  }
  impl_->loaded = modelfile_detail::load_model_file(model_file, backend);
  open(model_file, options);
}

Predictor::Predictor(const std::filesystem::path& checkpoint,
                     const nn::Preprocessing& normalization, PredictorOptions options)
    : impl_(std::make_unique<Impl>()) {
  Backend& backend = options.backend ? *options.backend : default_backend();
  impl_->file = checkpoint.string();
  impl_->loaded = modelfile_detail::load_checkpoint(checkpoint, normalization, backend);
  open(checkpoint, options);
}

void Predictor::open(const std::filesystem::path& model_file, const PredictorOptions& options) {
  Backend& backend = impl_->loaded.model->backend();
  impl_->level = default_simd_level();
  impl_->max_pixels = deploy_detail::max_image_pixels(options);
  // STOKE_PRECISION when set, else the model file's (a gated bf16: stoke
  // quantize) where the backend runs it natively and faster than fp32 (as
  // auto measures it), else fp32.
  const bool asked =
      options.context.config().knob("STOKE_PRECISION").source != ConfigSource::kDefault;
  Precision precision = Precision::kFp32;
  if (asked) {
    precision = resolve_precision(backend, options.context.settings().precision);
  } else if (impl_->loaded.info.precision != Precision::kFp32) {
    const Precision stored = impl_->loaded.info.precision;
    if (gated_precision_pays(backend, stored)) {
      precision = stored;
    } else if (backend.inference_precision(stored) == PrecisionSupport::kNative) {
      log_info(std::string("model file: gated for ") + to_string(stored) + ", which is not " +
               "faster than fp32 on " + backend.name() + " here: predicting in fp32 " +
               "(STOKE_PRECISION=" + to_string(stored) + " to insist)");
    } else {
      log_info(std::string("model file: gated for ") + to_string(stored) + ", which " +
               backend.name() + " does not run natively: predicting in fp32");
    }
  }
  if (precision == Precision::kInt8 && impl_->loaded.info.int8_input_ranges.empty()) {
    throw Unsupported("model file '" + model_file.string() +
                      "': STOKE_PRECISION=int8 needs the activation ranges of an int8 "
                      "calibration, which this file has none of (make an int8 model file with "
                      "stoke quantize --precision int8 --calibrate DIR)");
  }
  impl_->plan = std::make_unique<nn::FusedInference>(impl_->loaded.model->network());
  std::unique_ptr<Backend> probe = backend.make_worker();
  impl_->concurrent = impl_->plan->concurrent() && probe != nullptr;
  impl_->check = run_self_check(
      impl_->loaded.info,
      [this](std::span<const float> in, std::size_t n) { return impl_->logits(in, n); },
      impl_->level, backend.name());
  if (impl_->check.ran && !impl_->check.passed && options.require_self_check) {
    throw Unsupported("model file '" + model_file.string() + "': " + impl_->check.message +
                      "; this build, machine or backend does not reproduce the trainer's outputs "
                      "(set PredictorOptions::require_self_check = false to load anyway)");
  }
  if (precision != Precision::kFp32) impl_->switch_precision(precision);
}

Predictor::~Predictor() = default;

const ModelInfo& Predictor::info() const noexcept {
  return impl_->loaded.info;
}
ModelKind Predictor::kind() const noexcept {
  if (impl_->segmentation) return ModelKind::kSegmentation;
  return impl_->anomaly ? ModelKind::kAnomaly : ModelKind::kClassifier;
}
const nn::ModelSpec& Predictor::spec() const noexcept {
  if (impl_->segmentation) return impl_->segmentation->loaded().model->spec();
  return impl_->anomaly ? impl_->anomaly->spec() : impl_->loaded.model->spec();
}
const SelfCheckResult& Predictor::self_check() const noexcept {
  return impl_->check;
}
std::size_t Predictor::sample_size() const noexcept {
  const auto& p = impl_->loaded.info.preprocess;
  return static_cast<std::size_t>(p.channels) * p.width * p.height;
}

std::uint64_t Predictor::max_image_pixels() const noexcept {
  return impl_->max_pixels;
}

std::vector<float> Predictor::logits(std::span<const float> inputs, std::size_t count) {
  return impl_->logits(inputs, count);
}

std::vector<Prediction> Predictor::forward(std::span<const float> inputs, std::size_t count) {
  impl_->require_classifier("forward");
  return to_predictions(impl_->loaded.info, logits(inputs, count), count);
}

// ---- Anomaly models ------------------------------------------------------------------

const AnomalyModelInfo& Predictor::anomaly_info() const {
  impl_->scorer("anomaly_info");
  return impl_->anomaly_details;
}

AnomalyResult Predictor::score_file(const std::filesystem::path& path) {
  auto& scorer = impl_->scorer("score_file");
  std::lock_guard lock(impl_->anomaly_mutex);
  return scorer.score_file(path);
}
AnomalyResult Predictor::score_bytes(std::span<const std::uint8_t> bytes, std::string_view name) {
  auto& scorer = impl_->scorer("score_bytes");
  std::lock_guard lock(impl_->anomaly_mutex);
  return scorer.score_bytes(bytes, name);
}
AnomalyResult Predictor::score_pixels(const PixelBuffer& pixels) {
  auto& scorer = impl_->scorer("score_pixels");
  std::lock_guard lock(impl_->anomaly_mutex);
  return scorer.score_pixels(pixels);
}

// ---- Segmentation models --------------------------------------------------------------

// The file's U-Net, its self-check in fp32 (the eval forward; STOKE_PRECISION
// is not applied to segmentation models yet).
void Predictor::open_segmentation(const std::filesystem::path& path,
                                  const PredictorOptions& options, Backend& backend) {
  deploy_detail::LoadedSegmentation loaded = deploy_detail::load_segmentation_file(path, backend);
  impl_->check = deploy_detail::segmentation_self_check(loaded, backend.name());
  if (!impl_->check.passed && options.require_self_check) {
    throw Unsupported("model file '" + path.string() + "': " + impl_->check.message +
                      "; this build, machine or backend does not reproduce the trainer's outputs "
                      "(set PredictorOptions::require_self_check = false to load anyway)");
  }
  impl_->level = default_simd_level();
  impl_->max_pixels = deploy_detail::max_image_pixels(options);
  impl_->loaded.info = loaded.info;
  impl_->segmentation = std::make_unique<deploy_detail::SegmentationRunner>(
      std::move(loaded), impl_->max_pixels, options.segment_tile_stride);
}

deploy_detail::SegmentationRunner& Predictor::segmenter(const char* call) {
  if (impl_->segmentation) return *impl_->segmentation;
  throw InvalidArgument("Predictor::" + std::string(call) + ": '" + impl_->file + "' is " +
                        (impl_->anomaly ? "an anomaly model" : "a classifier") +
                        ": label maps come from segmentation models (stoke train --task segment)");
}

SegmentationResult Predictor::segment_file(const std::filesystem::path& path) {
  return segmenter("segment_file").file(path);
}
SegmentationResult Predictor::segment_bytes(std::span<const std::uint8_t> bytes,
                                            std::string_view name) {
  return segmenter("segment_bytes").bytes(bytes, name);
}
SegmentationResult Predictor::segment_pixels(const PixelBuffer& pixels) {
  return segmenter("segment_pixels").pixels(pixels);
}

// The predict_* calls take a Session from a pool (made on demand, kept), so
// that threads calling them at once decode and run in parallel.
template <class F>
auto Predictor::with_session(F&& f) {
  std::unique_ptr<Session> session;
  {
    std::lock_guard lock(impl_->pool_mutex);
    if (!impl_->idle_sessions.empty()) {
      session = std::move(impl_->idle_sessions.back());
      impl_->idle_sessions.pop_back();
    }
  }
  if (!session) session = std::make_unique<Session>(*this);
  struct Return {
    Impl& impl;
    std::unique_ptr<Session>& s;
    ~Return() {
      std::lock_guard lock(impl.pool_mutex);
      impl.idle_sessions.push_back(std::move(s));
    }
  } back{*impl_, session};
  return f(*session);
}

Prediction Predictor::predict_file(const std::filesystem::path& path) {
  impl_->require_classifier("predict_file");
  return with_session([&](Session& s) { return s.predict_file(path); });
}
Prediction Predictor::predict_bytes(std::span<const std::uint8_t> bytes, std::string_view name) {
  impl_->require_classifier("predict_bytes");
  return with_session([&](Session& s) { return s.predict_bytes(bytes, name); });
}
Prediction Predictor::predict_pixels(const PixelBuffer& pixels) {
  impl_->require_classifier("predict_pixels");
  return with_session([&](Session& s) { return s.predict_pixels(pixels); });
}
std::vector<Prediction> Predictor::predict_files(std::span<const std::filesystem::path> paths) {
  impl_->require_classifier("predict_files");
  return with_session([&](Session& s) { return s.predict_files(paths); });
}

// ---- Session ------------------------------------------------------------------------

struct Predictor::Session::Impl {
  Impl(Predictor& p)
      : owner(p), pre(p.info(), p.impl_->level, p.impl_->max_pixels), input(pre.sample_size()) {}
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
  impl_->owner.impl_->require_classifier("Session::predict_file");
  impl_->pre.from_file(path, impl_->input);
  return impl_->owner.forward(impl_->input, 1).front();
}
Prediction Predictor::Session::predict_bytes(std::span<const std::uint8_t> bytes,
                                             std::string_view name) {
  impl_->owner.impl_->require_classifier("Session::predict_bytes");
  impl_->pre.from_bytes(bytes, name, impl_->input);
  return impl_->owner.forward(impl_->input, 1).front();
}
Prediction Predictor::Session::predict_pixels(const PixelBuffer& pixels) {
  impl_->owner.impl_->require_classifier("Session::predict_pixels");
  impl_->pre.from_pixels(pixels, impl_->input);
  return impl_->owner.forward(impl_->input, 1).front();
}

std::vector<Prediction> Predictor::Session::predict_files(
    std::span<const std::filesystem::path> paths) {
  impl_->owner.impl_->require_classifier("Session::Session");
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
  impl_->owner.impl_->require_classifier("Session::Session");
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
