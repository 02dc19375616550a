// Deployment: a predictor that feeds the network exactly what the trainer's
// validation loader fed it, a load-time self-check, and evaluation reports
// (JSON and one self-contained HTML file), on self-describing model files
// (stoke/model_file.hpp; the predictor refuses a checkpoint without a
// ModelInfo and names the missing keys). See docs/deploy.md.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stoke/data.hpp"
#include "stoke/export.hpp"
#include "stoke/image.hpp"
#include "stoke/model_file.hpp"
#include "stoke/nn/inference.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/precision.hpp"
#include "stoke/train.hpp"

namespace stoke {

// ---- Prediction -----------------------------------------------------------------

// PixelFormat (Mono8, Mono16, RGB8, BGR8): stoke/data.hpp.

// An application's pixels: any size, rows `stride` bytes apart (0: packed).
// Mono16 (native byte order) keeps its 16 bits, as a 16-bit PNG does.
struct PixelBuffer {
  const void* data = nullptr;
  int width = 0;
  int height = 0;
  PixelFormat format = PixelFormat::kMono8;
  std::size_t stride = 0;
};

struct Prediction {
  int label = -1;
  std::string class_name;
  float confidence = 0;              // probability of label
  std::vector<float> probabilities;  // one per class
};

// An anomaly model's result for one image (PatchCore and PaDiM,
// stoke/anomaly.hpp, where it is also stoke::anomaly::AnomalyResult). map:
// (height, width) row-major, at the model's input size (at the image's own
// size with tiling).
struct AnomalyResult {
  float score = 0.0f;
  bool anomalous = false;  // score above the model's threshold
  // The score on [0, 1] with the threshold at 0.5: (score - threshold) /
  // (max - min) + 0.5, clamped, min and max the validation scores
  // (anomalib's min-max normalization); anomalous exactly when above 0.5
  // (files written before it was stored: 0.5 +- 0.5 at the threshold).
  float normalized_score = 0.0f;
  // Map values above the model's pixel threshold (the defect's area in map pixels).
  std::int64_t defect_pixels = 0;
  int height = 0, width = 0;
  std::vector<float> map;
};

// One connected region (8-connected pixels of one class) of a label map.
struct SegmentRegion {
  int label = 0;
  std::string class_name;
  std::int64_t area = 0;           // pixels
  int x = 0, y = 0, w = 0, h = 0;  // bounding box: first column and row, width, height
};

// A segmentation model's result for one image (stoke/segment.hpp): the label
// map at the image's own size (the network's arg-max over classes at its
// input size, resized nearest-neighbour as resize_labels_nearest does),
// pixels per class, and the regions of every class but the background
// (label 0), in the order connected_regions finds them.
struct SegmentationResult {
  int width = 0, height = 0;
  std::vector<std::uint8_t> labels;  // height x width class indices, row-major
  std::vector<std::int64_t> areas;   // one per class
  std::vector<SegmentRegion> regions;
};

// What a Predictor's model file is: a classifier (predict_*, forward,
// logits), an anomaly model (score_*) or a segmentation model (segment_*).
enum class ModelKind { kClassifier, kAnomaly, kSegmentation };

// An anomaly model's decision rule, as its file stores it.
struct AnomalyModelInfo {
  std::string method;   // "patchcore", "padim"
  float threshold = 0;  // anomalous: score > threshold
  // The map value a defect pixel exceeds (AnomalyResult::defect_pixels; the
  // threshold for files written before it was stored).
  float pixel_threshold = 0;
  // The validation scores' range the normalized score is taken over; NaN
  // for files written before it was stored (normalized_score is then 0.5 +-
  // 0.5 at the threshold).
  float score_min = NAN, score_max = NAN;
  bool has_score_range() const noexcept { return !std::isnan(score_min); }
  // Tiling at native resolution (0: off): maps are then at the image's size.
  int tile = 0;
};

namespace deploy_detail {
struct OpenedModel;        // lib/deploy/model_kinds.hpp
class SegmentationRunner;  // lib/deploy/segmentation.hpp
}  // namespace deploy_detail

struct SelfCheckResult {
  bool ran = false;  // false when the file holds no references
  bool passed = false;
  double max_error = 0;  // max |logit difference| / max(1, max |logit|)
  double tolerance = 0;
  std::size_t references = 0;
  // Decode + preprocessing of the references that carry their encoded file:
  // max |input difference| in pixel levels (1 = one 8-bit grey level after
  // normalization); passing needs <= 1.
  std::size_t decoded_references = 0;
  double max_input_levels = 0;
  std::string message;  // what was compared, on which backend, the result
  // The precision predictions run in (STOKE_PRECISION of the options'
  // context, resolved for the backend). The comparison above is always in
  // fp32; in another precision the references also run in it and are
  // compared with fp32's logits (relative as max_error), and a reference whose
  // top class changes is counted and logged as a warning.
  Precision precision = Precision::kFp32;
  double precision_max_error = 0;
  std::size_t precision_disagreements = 0;
};

struct PredictorOptions {
  Backend* backend = nullptr;  // null: the registry's default backend
  // Verify the reference logits at load; throw Unsupported when they are not
  // reproduced within the stored tolerance. Off: the result is only reported.
  bool require_self_check = true;
  // Images whose header claims more pixels are refused (DecodeError naming
  // STOKE_MAX_IMAGE_PIXELS); empty: the context's value (runtime.context of
  // init() carries the environment's); 0: no limit.
  std::optional<std::uint64_t> max_image_pixels;
  // Its settings' precision (STOKE_PRECISION) is the one predictions run in.
  Context context;
  // Segmentation models only: 0 (the default) segments the image resized to
  // the network's input; S > 0 cuts it at its own resolution into tiles of the
  // network's (square) input size, S pixels apart (S <= the tile; the last
  // tile of a row or column ends at the edge), averages the overlapping
  // tiles' logits and takes the arg-max per pixel. For models trained on
  // crops at the camera's scale. InvalidArgument (at open) for S outside
  // [0, tile] or a network that is not square; an image smaller than a tile
  // is an InvalidArgument naming it.
  int segment_tile_stride = 0;
};

// Classifies images with the model file's own preprocessing, running the
// loader's kernels in the loader's order (the tests compare the tensors with
// the validation loader's bit for bit).
//
// Thread safety: a Predictor may be shared by threads, and calls from
// several threads run at the same time: each concurrent caller gets a worker
// of its own (on the CPU a backend of the same settings with its own
// workspace, and an inference program over the one set of folded weights;
// made on the first concurrent call and kept, so memory grows by one set of
// activation buffers and one copy of the weights in the backend's layout per
// thread that called at once). Where the backend offers no workers (GPU
// backends today) or the network holds a layer outside the op list, calls
// take turns. A Session (cheap: a decoder, a resampler and buffers; no
// weights) is one thread's decoding and preprocessing; the predict_*
// functions take one from a pool.
//
// Anomaly models (stoke train --task anomaly: PatchCore, PaDiM; see
// docs/anomaly.md) open too (kind() == ModelKind::kAnomaly) and are scored
// with score_file, score_bytes and score_pixels: the same code and the same
// bits as anomaly::PatchCore::load + score_file (what stoke eval runs). Their
// calls take turns (one PatchCore: its feature programs and decoder keep
// state), so threads may share the Predictor but do not score at once.
//
// Segmentation models (stoke train --task segment: a U-Net; see
// docs/segmentation-cli.md) open too (kind() == ModelKind::kSegmentation) and
// give label maps with segment_file, segment_bytes and segment_pixels; their
// calls take turns as well.
class STOKE_API Predictor {
 public:
  // A classifier's model file, or an anomaly model's (the file's
  // "anomaly.method" key decides). For an anomaly model the backend and the
  // context's precision (STOKE_PRECISION when set, else the file's gated
  // one) apply as for a classifier; its self-check always runs (CorruptFile
  // naming the file when the reference image does not score as stored,
  // whatever require_self_check says), and images decode with
  // max_image_pixels as for a classifier.
  explicit Predictor(const std::filesystem::path& model_file, PredictorOptions options = {});
  // A plain checkpoint (nn::save_checkpoint) that records only a
  // normalization (nn::Preprocessing, what nn::Classifier reads): images go in
  // at the network's input size (a resize to it otherwise), classes are named
  // "0".."N-1", and no self-check runs (the file holds no references).
  // CorruptFile when the normalization has neither one value nor one per channel.
  Predictor(const std::filesystem::path& checkpoint, const nn::Preprocessing& normalization,
            PredictorOptions options = {});
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  ModelKind kind() const noexcept;
  // An anomaly model's: the file's preprocessing and provenance, class names
  // "good" and "anomalous" (the decision's two outcomes); spec() is its backbone's.
  const ModelInfo& info() const noexcept;
  const nn::ModelSpec& spec() const noexcept;
  // An anomaly model's: ran when the file holds a reference image (it scored
  // as stored, within 1e-3 relative, in fp32), precision the one scoring
  // runs in and, when STOKE_PRECISION asked for it, precision_max_error the
  // reference score's change in it from fp32's (0 otherwise).
  const SelfCheckResult& self_check() const noexcept;
  // Elements per preprocessed sample (C * H * W).
  std::size_t sample_size() const noexcept;
  // The pixel limit its decoding applies (PredictorOptions::max_image_pixels).
  std::uint64_t max_image_pixels() const noexcept;

  class STOKE_API Session {
   public:
    explicit Session(Predictor& predictor);
    ~Session();
    Session(Session&&) noexcept;
    Session& operator=(Session&&) = delete;

    // The network's input for one image: sample_size() floats into `out`.
    void preprocess_file(const std::filesystem::path& path, std::span<float> out);
    void preprocess_bytes(std::span<const std::uint8_t> bytes, std::string_view name,
                          std::span<float> out);
    void preprocess_pixels(const PixelBuffer& pixels, std::span<float> out);

    Prediction predict_file(const std::filesystem::path& path);
    Prediction predict_bytes(std::span<const std::uint8_t> bytes,
                             std::string_view name = "<bytes>");
    Prediction predict_pixels(const PixelBuffer& pixels);
    std::vector<Prediction> predict_files(std::span<const std::filesystem::path> paths);
    std::vector<Prediction> predict_pixels(std::span<const PixelBuffer> images);

   private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };

  Session session() { return Session(*this); }

  Prediction predict_file(const std::filesystem::path& path);
  Prediction predict_bytes(std::span<const std::uint8_t> bytes, std::string_view name = "<bytes>");
  Prediction predict_pixels(const PixelBuffer& pixels);
  std::vector<Prediction> predict_files(std::span<const std::filesystem::path> paths);

  // Runs the network on `count` preprocessed samples (count * sample_size()
  // floats) and returns their probabilities. Thread-safe.
  std::vector<Prediction> forward(std::span<const float> inputs, std::size_t count);
  // The raw logits (count x classes). Thread-safe.
  std::vector<float> logits(std::span<const float> inputs, std::size_t count);
  // (The predict_*, forward and logits calls, and a Session's predict_*, are
  // a classifier's: InvalidArgument naming the file on an anomaly model.)

  // ---- Anomaly models (kind() == ModelKind::kAnomaly) -----------------------------
  // Each call is InvalidArgument naming the file on a classifier.

  const AnomalyModelInfo& anomaly_info() const;
  // The image's score, decision, normalized score, defect pixels and map (the
  // map always: the defect pixels are counted on it). Calls take turns.
  AnomalyResult score_file(const std::filesystem::path& path);
  AnomalyResult score_bytes(std::span<const std::uint8_t> bytes, std::string_view name = "<bytes>");
  AnomalyResult score_pixels(const PixelBuffer& pixels);

  // ---- Segmentation models (kind() == ModelKind::kSegmentation) ---------------------
  // (stoke train --task segment; docs/segmentation-cli.md.) Each call is
  // InvalidArgument naming the call and the file on another kind, as the
  // other kinds' calls are on a segmentation model. The image goes through
  // the file's preprocessing (SegmentationLoader's, without augmentation),
  // the U-Net's eval forward, arg-max, and back to the image's size. Calls
  // take turns.
  SegmentationResult segment_file(const std::filesystem::path& path);
  SegmentationResult segment_bytes(std::span<const std::uint8_t> bytes,
                                   std::string_view name = "<bytes>");
  SegmentationResult segment_pixels(const PixelBuffer& pixels);

  struct Impl;

 private:
  // The file's kind decides: the public constructor (lib/anomaly/predictor_open.cpp,
  // the module above both kinds) opens an anomaly model and hands it here;
  // without one (opened.anomaly null) the classifier loads here.
  Predictor(const std::filesystem::path& model_file, const PredictorOptions& options,
            deploy_detail::OpenedModel&& opened);
  template <class F>
  auto with_session(F&& f);
  void open_segmentation(const std::filesystem::path& path, const PredictorOptions& options,
                         Backend& backend);
  deploy_detail::SegmentationRunner& segmenter(const char* call);
  // The rest of loading, once impl_->loaded holds the network and its information.
  void open(const std::filesystem::path& path, const PredictorOptions& options);
  std::unique_ptr<Impl> impl_;
};

// ---- The reduced-precision gate (stoke quantize, docs/precision.md) ------------------

// What a reduced precision did on a validation set, against fp32 on the
// same images; judge_precision fills `passed` and `reasons`.
struct PrecisionGateResult {
  Precision precision = Precision::kBf16;
  std::uint64_t images = 0;
  std::uint64_t disagreements = 0;  // images whose decision differs from fp32's
  double disagreement = 0;          // disagreements / images
  // With a good class (classifiers: stoke quantize --good), or for anomaly
  // models: the share of defect images passed as good, in each precision.
  double escape_fp32 = NAN, escape_reduced = NAN;
  double auroc_fp32 = NAN, auroc_reduced = NAN;  // anomaly models: image AUROC
  bool passed = false;
  std::string reasons;  // what failed, "; "-separated ("" when passed)
};

struct PrecisionGateLimits {
  double max_disagreement = 0.005;  // at most 0.5 % of decisions change
  double max_auroc_drop = 0.005;
  // The escape rate may not rise at all (a defect that fp32 catches is not let through).
};

// The gate: passed when the disagreement is within the limit, the escape
// rate (when measured) did not rise and the AUROC (when measured) fell by at
// most max_auroc_drop; InvalidArgument for no image.
STOKE_API PrecisionGateResult judge_precision(PrecisionGateResult measured,
                                              const PrecisionGateLimits& limits = {});

// The model file keys of a gated precision: "model.precision" (read by the
// Predictor and the anomaly commands when STOKE_PRECISION is not set) and
// the gate's figures under "model.metrics.precision_gate.*" (shown with the
// model's other metrics in the eval report).
STOKE_API void add_precision_metadata(std::map<std::string, std::string>& metadata,
                                      const PrecisionGateResult& gate);

// ---- int8 calibration (stoke quantize --precision int8 --calibrate DIR) ------------

// The calibrated input range of every fused convolution of a classifier,
// and where it came from: ModelInfo::int8_input_ranges and int8_calibration.
struct Int8Calibration {
  std::vector<std::pair<float, float>> input_ranges;
  std::map<std::string, std::string> provenance;  // folder, images, method, date
};

// Runs the classifier `model_file` in fp32 (its own preprocessing) over
// `images` and records the range (min, max: the max-abs method) each fused
// convolution's input took; `folder` is the provenance's name for them.
// options.backend (else the default backend) runs it. InvalidArgument for no
// image; Unsupported where the backend cannot record ranges (the CPU backend
// without oneDNN); decode errors propagate. Anomaly models: not built.
STOKE_API Int8Calibration calibrate_int8(const std::filesystem::path& model_file,
                                         const std::vector<std::filesystem::path>& images,
                                         const std::string& folder,
                                         const PredictorOptions& options = {});

// The model file keys of an int8 calibration (ModelInfo: model.int8.*),
// added to `metadata` (a model file's); model.precision is the gate's.
STOKE_API void add_int8_metadata(std::map<std::string, std::string>& metadata,
                                 const Int8Calibration& calibration);

// ---- Evaluation -------------------------------------------------------------------

struct EvaluationOptions {
  std::string good_class;     // non-empty: defect-vs-good analysis (ROC, threshold)
  double escape_rate = 0.01;  // target share of defects passed as good
  std::size_t batch_size = 32;
  std::size_t misclassified_limit = 200;  // kept in the result, worst first
  // An image that cannot be read or decoded is listed in Evaluation::skipped
  // (with the dataset's own skipped files) and left out of the metrics,
  // within the loader's budget (LoaderOptions::max_corrupt_samples and
  // max_corrupt_fraction: past it, DecodeError listing them); off: the first
  // one throws. Empty: the dataset's DatasetOptions::skip_corrupt.
  std::optional<bool> skip_corrupt;
};

// A class without samples (an evaluation folder holding only some of the
// model's classes) has no recall or F1: NaN (null in JSON), left out of macro F1.
struct ClassMetrics {
  std::uint64_t support = 0;  // true samples of the class
  double precision = 0;
  double recall = 0;
  double f1 = 0;
};

struct RocPoint {
  double threshold = 0;          // defect score >= threshold: rejected
  double detection_rate = 0;     // defects rejected (true positive rate)
  double false_reject_rate = 0;  // good parts rejected (false positive rate)
};

struct Misclassified {
  std::string file;
  int label = 0;
  int predicted = 0;
  float confidence = 0;  // probability of the predicted class
};

struct STOKE_API Evaluation {
  std::vector<std::string> class_names;
  std::uint64_t samples = 0;
  Precision precision = Precision::kFp32;  // the predictor's (SelfCheckResult::precision)
  double accuracy = 0;
  std::vector<std::vector<std::uint64_t>> confusion;  // [true][predicted]
  std::vector<ClassMetrics> per_class;
  double macro_f1 = 0;

  // With a good class: defect score = 1 - p(good).
  int good_label = -1;
  std::vector<RocPoint> roc;  // thresholds descending, from (0, 0) to (1, 1)
  double auc = 0;
  double target_escape_rate = 0;
  double threshold = 0;          // the largest meeting the target
  double escape_rate = 0;        // defects passed as good at that threshold
  double false_reject_rate = 0;  // its cost: good parts rejected

  std::vector<Misclassified> misclassified;  // by confidence, highest first
  // Files not evaluated (EvaluationOptions::skip_corrupt), in "skipped".
  std::vector<CorruptSample> skipped;

  std::string to_json() const;
};

// The metrics from per-sample labels and probabilities (n x classes,
// row-major); `files` may be empty. InvalidArgument for inconsistent sizes or
// an unknown good class.
STOKE_API Evaluation evaluate_scores(const std::vector<std::string>& class_names,
                                     std::span<const std::int32_t> labels,
                                     std::span<const float> probabilities,
                                     std::span<const std::string> files,
                                     const EvaluationOptions& options = {});

// Classifies every sample of `dataset` with a Loader running the model file's
// preprocessing (the trainer's validation loader) and evaluates. The dataset's
// classes must be the model's, or some of them (its labels are mapped; a
// class it lacks has support 0); InvalidArgument naming both otherwise.
// With a good class and only good parts (or only defects), the ROC, AUC,
// threshold and rates are NaN (null in JSON): they need both.
// `on_progress(done, total)` may be empty.
STOKE_API Evaluation
evaluate(Predictor& predictor, const Dataset& dataset, const EvaluationOptions& options = {},
         const std::function<void(std::size_t, std::size_t)>& on_progress = {});

// One self-contained HTML page (inline SVG and data-URI thumbnails; no
// external resources): metrics, confusion matrix, ROC, loss and accuracy per
// epoch from info.history, the worst misclassified images, the provenance.
STOKE_API std::string evaluation_html(const Evaluation& evaluation, const ModelInfo& info,
                                      std::size_t thumbnails = 12);

// Writes dir/report.json and dir/report.html (creating dir).
STOKE_API void write_evaluation_report(const std::filesystem::path& dir,
                                       const Evaluation& evaluation, const ModelInfo& info);

}  // namespace stoke
