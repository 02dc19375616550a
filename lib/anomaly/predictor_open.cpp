// The Predictor's public constructor: the model file's kind decides. An
// anomaly model (the metadata key "anomaly.method") is opened here, as
// PatchCore::load opens it for stoke eval, and handed to the Predictor
// through deploy's seam (lib/deploy/model_kinds.hpp); any other file goes on
// to the classifier loading in lib/deploy/predictor.cpp. It lives in this
// module because deploy may not depend on anomaly (anomaly depends on
// deploy): the one module that knows both kinds dispatches, explicitly, with
// no registry and no static initializer to be dropped by a static link.
#include <cstdio>
#include <optional>
#include <string>

#include "deploy/model_kinds.hpp"
#include "stoke/anomaly.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/segment.hpp"

namespace stoke {
namespace {

// The anomaly model as the Predictor calls it; one call at a time (the
// Predictor holds its lock around each).
class PatchCoreScorer final : public deploy_detail::AnomalyScorer {
 public:
  explicit PatchCoreScorer(anomaly::PatchCore core) : core_(std::move(core)) {}
  AnomalyResult score_file(const std::filesystem::path& path) override {
    return core_.score_file(path);
  }
  AnomalyResult score_bytes(std::span<const std::uint8_t> bytes, std::string_view name) override {
    return core_.score_bytes(bytes, name);
  }
  AnomalyResult score_pixels(const PixelBuffer& pixels) override {
    return core_.score_pixels(pixels);
  }
  const nn::ModelSpec& spec() const noexcept override { return core_.backbone_spec(); }

 private:
  anomaly::PatchCore core_;
};

std::string figure(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// The anomaly model of `path`, or nothing when the file is not one (a file
// that cannot be read at all goes to the classifier loading too, which
// reports it as it always has).
deploy_detail::OpenedModel open_model(const std::filesystem::path& path,
                                      const PredictorOptions& options) {
  deploy_detail::OpenedModel out;
  std::optional<nn::CheckpointInfo> ck;
  try {
    ck = nn::read_checkpoint_info(path.string());
  } catch (const Error&) {
    return out;
  }
  const auto& meta = ck->metadata;
  out.segmentation = is_segmentation_metadata(meta);
  if (!meta.count("anomaly.method")) return out;
  Backend& backend = options.backend ? *options.backend : default_backend();
  // Loads, checks every field (CorruptFile naming the file and the key) and
  // runs the self-check in fp32; then the file's gated precision, as for eval.
  anomaly::PatchCore core = anomaly::PatchCore::load(path, backend);
  SelfCheckResult& check = out.check;
  // STOKE_PRECISION when set, as for a classifier (and stoke eval).
  const bool asked =
      options.context.config().knob("STOKE_PRECISION").source != ConfigSource::kDefault;
  if (asked) check.precision_max_error = core.set_precision(options.context.settings().precision);
  core.set_max_image_pixels(deploy_detail::max_image_pixels(options));

  const auto reference = meta.find("anomaly.reference.count");
  check.ran = reference != meta.end() && reference->second == "1";
  check.passed = true;  // load() refuses a reference that scores otherwise
  check.tolerance = 1e-3;
  check.references = check.ran ? 1 : 0;
  check.precision = core.precision();
  const std::string method = anomaly::method_name(core.options().method);
  check.message = "anomaly model (" + method + "): " +
                  (check.ran ? "the reference image scored as stored (within 1e-3 relative) on " +
                                   std::string(backend.name())
                             : std::string("the file holds no reference image: no self-check ran"));
  if (check.precision != Precision::kFp32) {
    check.message += std::string("; in ") + to_string(check.precision) +
                     (asked ? ": the reference score moved " + figure(check.precision_max_error) +
                                  " (relative) from fp32's"
                            : std::string(" (the model file's gated precision)"));
  }

  out.info = ModelInfo::from_metadata(meta, path.string());
  out.info.class_names = {"good", "anomalous"};
  AnomalyModelInfo& d = out.details;
  d.method = method;
  d.threshold = core.threshold();
  d.pixel_threshold = core.pixel_threshold();
  d.score_min = core.score_min();
  d.score_max = core.score_max();
  d.tile = core.options().tile;
  out.anomaly = std::make_unique<PatchCoreScorer>(std::move(core));
  return out;
}

}  // namespace

Predictor::Predictor(const std::filesystem::path& model_file, PredictorOptions options)
    : Predictor(model_file, options, open_model(model_file, options)) {}

}  // namespace stoke
