// Anomaly detection trained on good parts only, two methods as anomalib
// defines them: PatchCore (Roth et al. 2022: a memory bank of layer2 and
// layer3 patch features, nearest-neighbour distances) and PaDiM (Defard et
// al. 2020: a Gaussian per grid position over a seeded channel subset of
// layer1..layer3, Mahalanobis distances). The features of both come from a
// torchvision backbone through the inference plan (the same fused program as
// Model::forward(x, false)); tiling, thresholds, maps and the model file are
// shared. docs/anomaly.md describes the algorithms, the model file and where
// stoke's definitions differ from anomalib's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stoke/data.hpp"
#include "stoke/deploy.hpp"
#include "stoke/export.hpp"
#include "stoke/image.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/precision.hpp"

namespace stoke::anomaly {

// What is fitted and how a patch grid is scored.
enum class AnomalyMethod {
  kPatchCore,  // memory bank (coreset) + nearest-neighbour distance
  kPadim,      // per-position Gaussians + Mahalanobis distance (at least 2 training images)
};
// "patchcore", "padim".
STOKE_API const char* method_name(AnomalyMethod method) noexcept;
// InvalidArgument naming the accepted values for another name.
STOKE_API AnomalyMethod anomaly_method_from_name(std::string_view name);

// The options of either method (the name is PatchCore's, which came first).
struct PatchCoreOptions {
  AnomalyMethod method = AnomalyMethod::kPatchCore;
  // Share of the training patches kept by the greedy k-center coreset, in
  // (0, 1]; 1 keeps every patch (no coreset). PatchCore only.
  double coreset_ratio = 0.1;
  // The memory cap: PatchCore's full bank (training patches x feature width x
  // 4 bytes), PaDiM's Gaussians (grid positions x features^2 x 4 bytes) and
  // the training embeddings they are fitted from; checked before any patch is
  // stored; InvalidArgument naming max_bank_bytes (the CLI's --max-bank) when
  // the training set needs more.
  std::uint64_t max_bank_bytes = std::uint64_t{4} << 30;
  // PatchCore at scale (0, the default: every patch): each training image (each
  // tile) gives the bank this many of its grid positions, drawn from `seed` and
  // the image's number (sampled_positions in lib/anomaly/coreset.hpp: the same
  // rows for any batch and thread count), before the coreset keeps
  // coreset_ratio of them. The full bank, the memory figure checked against
  // max_bank_bytes and the greedy k-center's time (rows x kept rows x
  // projection width) shrink by patches_per_image / (grid_h x grid_w), so a
  // fit of thousands of images ends in bounded time. Not in the PatchCore
  // paper or anomalib, which take every patch. PatchCore only
  // (InvalidArgument with PaDiM, whose Gaussians need every position).
  int patches_per_image = 0;
  // PatchCore: the coreset's projection and starting patch; PaDiM: its channel subset.
  std::uint64_t seed = 0;
  // PaDiM: the channels kept of layer1 + layer2 + layer3 (0: the default,
  // padim_default_features). InvalidArgument above the backbone's width.
  int padim_features = 0;
  int num_neighbors = 9;  // PatchCore's image score re-weighting (1: the plain maximum)
  float sigma = 4.0f;     // the anomaly map's Gaussian smoothing
  // The threshold's target: the share of good validation parts rejected.
  double target_false_reject = 0.005;
  // With defect images among the validation images (calibrate's second
  // list): the threshold passes at most this share of them as good (the
  // highest threshold that does, so the fewest good parts are rejected);
  // negative (the default): the false-reject target alone.
  double target_escape = -1.0;
  // Tiling at native resolution (0: off, the whole image is resized to the
  // backbone's input): each image is cut into tile x tile squares of its
  // full-size pixels, `tile_stride` apart (0: the tile size, no overlap; the
  // last tile of a row or column ends at the image's edge), each resized to
  // the input size; training takes every tile's patches, scoring the highest
  // tile score, and the map is at the image's size (overlaps averaged). An
  // image smaller than a tile is an InvalidArgument naming it.
  int tile = 0;
  int tile_stride = 0;
};

// One image's result (stoke/deploy.hpp, where the Predictor returns it too).
using AnomalyResult = stoke::AnomalyResult;

// Patch embeddings of a batch: rows (N x grid_h x grid_w) of `width` floats,
// row (n, y, x) at ((n * grid_h + y) * grid_w + x) * width; channels are
// layer2's then layer3's (anomalib's generate_embedding + reshape_embedding).
struct Embeddings {
  std::int64_t count = 0, grid_h = 0, grid_w = 0, width = 0;
  std::vector<float> rows;
};

// Bank size x feature width x 4 bytes: the memory figure the training prints
// before the coreset runs.
STOKE_API std::uint64_t bank_bytes(std::uint64_t patches, std::uint64_t width) noexcept;
// PaDiM's Gaussians: positions x features^2 x 4 bytes (the inverse
// covariances; the means add positions x features x 4).
STOKE_API std::uint64_t gaussians_bytes(std::uint64_t positions, std::uint64_t features) noexcept;
// PaDiM's channels kept of a layer1 + layer2 + layer3 width: anomalib's
// defaults, 100 of resnet18's 448 and 550 of wide_resnet50_2's 1792; the
// same ratios for the ResNets of the same block (resnet34: 100 of 448,
// resnet50: 550 of 1792; anomalib has no default for them) and for other
// widths (width_multiplier), rounded, at least 1.
STOKE_API std::int64_t padim_default_features(nn::Architecture architecture,
                                              std::int64_t full_width) noexcept;

// The threshold at which at most `target_false_reject` of `good_scores` are
// above it (anomalous = score > threshold): the smallest good score that
// leaves at most floor(target x n) scores above. InvalidArgument for no
// score or a target outside [0, 1).
STOKE_API float threshold_at_false_reject(std::vector<float> good_scores,
                                          double target_false_reject);

// The highest threshold at which at most `target_escape` of `defect_scores`
// are at or below it (passed as good): just below the (floor(target x n) +
// 1)-th smallest defect score. InvalidArgument for no score, a non-finite
// one, or a target outside [0, 1).
STOKE_API float threshold_at_escape(std::vector<float> defect_scores, double target_escape);

// Area under the ROC curve of defect (positive) vs good scores, ties counted
// half; InvalidArgument when either list is empty.
STOKE_API double image_auroc(std::span<const float> good_scores,
                             std::span<const float> defect_scores);

// ---- Pixel-level metrics (ground-truth masks) --------------------------------

// A ground-truth mask (non-zero = defect) of an image_width x image_height
// image, brought to the model's input grid as the preprocessing brings the
// image (resize to the resize target, centre crop), by nearest neighbour
// (pixel centres): height x width bytes of `preprocess`, 1 = defect.
// InvalidArgument naming `name` and both sizes when the mask's size is not the image's.
STOKE_API std::vector<std::uint8_t> mask_to_input(ImageView mask, int image_width, int image_height,
                                                  const PreprocessOptions& preprocess,
                                                  std::string_view name);

struct PixelMetrics {
  double auroc = 0;  // over every pixel of every image, ties counted half
  // The area under the per-region overlap (PRO) curve for false-positive
  // rates up to max_fpr, divided by max_fpr (1 = every region fully found
  // before any good pixel): regions are the 8-connected components of each
  // image's mask; PRO at a threshold is the mean over regions of the share of
  // the region's pixels above it; the FPR counts every good pixel of every image.
  double aupro = 0;
  std::uint64_t pixels = 0, defect_pixels = 0, regions = 0;
};

// maps: count x height x width anomaly maps (AnomalyResult::map); masks: the
// same layout, non-zero = defect (mask_to_input). InvalidArgument when the
// sizes differ, a value is not finite, or no defect or no good pixel exists.
STOKE_API PixelMetrics pixel_metrics(std::span<const float> maps,
                                     std::span<const std::uint8_t> masks, int height, int width,
                                     double max_fpr = 0.3);
// The same for maps of different sizes (tiled models map each image at its
// own size): sizes[i] is map i's, the maps and masks one after the other.
struct MapSize {
  int height = 0, width = 0;
};
STOKE_API PixelMetrics pixel_metrics(std::span<const float> maps,
                                     std::span<const std::uint8_t> masks,
                                     std::span<const MapSize> sizes, double max_fpr = 0.3);

// An anomaly model of either method (options().method): its backbone, what
// it fitted (PatchCore's memory bank or PaDiM's Gaussians), options and
// threshold. One caller at a time (the feature programs and the preprocessor
// keep state): one PatchCore per thread.
class STOKE_API PatchCore {
 public:
  // backbone: a torchvision ResNet (resnet18/34/50, wide_resnet50_2) on the
  // backend that computes; preprocess: how files become its input (its
  // channels and size must match the backbone's spec). InvalidArgument for
  // another architecture or a mismatch.
  PatchCore(std::unique_ptr<nn::Model> backbone, PreprocessOptions preprocess,
            PatchCoreOptions options);
  ~PatchCore();
  PatchCore(PatchCore&&) noexcept;
  PatchCore& operator=(PatchCore&&) noexcept;

  // Embeddings of preprocessed inputs x (count, C, H, W): PatchCore's, or
  // PaDiM's (layer1, layer2, layer3; the channel subset, drawn from the seed
  // on the first call when the model has none yet).
  Embeddings embed(std::span<const float> inputs, std::int64_t count);
  // One preprocessed image file (the same code the Predictor runs).
  std::vector<float> preprocess_file(const std::filesystem::path& file);

  // PatchCore's memory bank (every patch of every file, then the coreset), or
  // PaDiM's Gaussians (InvalidArgument for fewer than 2 files), from good
  // images. Progress and the memory figure go to the log.
  void fit(const std::vector<std::filesystem::path>& good_files);
  // The same from embeddings already computed (tests, parity): embed()'s.
  void fit_embeddings(const Embeddings& embeddings);
  // Sets the threshold from good-only validation files (options' target).
  // With `defect_files` (validation images known to be defects) and
  // options' target_escape >= 0: the threshold from the escape target
  // instead. Also stores the score normalization (the validation scores'
  // range) and the pixel threshold (at the false-reject target over the good
  // images' map pixels).
  void calibrate(const std::vector<std::filesystem::path>& good_files,
                 const std::vector<std::filesystem::path>& defect_files = {});

  AnomalyResult score_input(std::span<const float> input);  // (C, H, W)
  // The file's image (with tiling: its tiles, the map at the image's size).
  AnomalyResult score_file(const std::filesystem::path& file);
  // An encoded image in memory, and an application's pixels (PixelBuffer,
  // stoke/deploy.hpp's camera buffer: Mono8, Mono16, RGB8, BGR8, a row stride):
  // what a file of the same image gives.
  AnomalyResult score_bytes(std::span<const std::uint8_t> bytes, std::string_view name = "<bytes>");
  AnomalyResult score_pixels(const PixelBuffer& pixels);
  // The decoding's pixel limit from here on (PredictorOptions::max_image_pixels;
  // 0: none); kDefaultMaxImagePixels until set.
  void set_max_image_pixels(std::uint64_t max_pixels);

  // Writes the model file (a checkpoint of the backbone with the bank,
  // options, preprocessing and threshold in its metadata), atomically.
  void save(const std::filesystem::path& path) const;
  // CorruptFile naming the path and the field for a malformed, truncated or
  // inconsistent file (a bank shorter than its stated size among them).
  static PatchCore load(const std::filesystem::path& path, Backend& backend);

  // The precision the feature extraction computes in from here on
  // (STOKE_PRECISION's values, resolved as resolve_precision does: bf16 where
  // the backend has it, an Unsupported error naming why otherwise). Returns
  // the reference image's score change from the one the model file stores,
  // relative to max(1, |score|) (0 without a reference); load()'s self-check
  // ran in fp32 before.
  double set_precision(Precision precision);
  Precision precision() const noexcept;

  const PatchCoreOptions& options() const noexcept;
  const PreprocessOptions& preprocess() const noexcept;
  const nn::ModelSpec& backbone_spec() const noexcept;
  // PatchCore's bank (0, 0 and empty for PaDiM).
  std::int64_t bank_rows() const noexcept;
  std::int64_t bank_width() const noexcept;
  const std::vector<float>& bank() const noexcept;  // bank_rows x bank_width
  // PaDiM's channel subset (ascending indices into layer1 + layer2 + layer3;
  // empty for PatchCore and before the first embedding) and its Gaussians'
  // grid positions (0 before fit and for PatchCore).
  const std::vector<std::int64_t>& padim_channels() const noexcept;
  std::int64_t padim_positions() const noexcept;
  float threshold() const noexcept;
  void set_threshold(float threshold) noexcept;
  // The map value above which a pixel counts as defect (AnomalyResult::defect_pixels).
  float pixel_threshold() const noexcept;
  // The validation scores' range the normalized score is taken over.
  float score_min() const noexcept;
  float score_max() const noexcept;

  struct Impl;
  // The state itself, for stoke's own modules (the ONNX export reads the
  // backbone and what was fitted); Impl is not part of the public API.
  const Impl& internals() const noexcept { return *impl_; }

 private:
  explicit PatchCore(std::unique_ptr<Impl> impl);
  // CorruptFile unless the stored reference scores as stored (1e-3 relative).
  void self_check(const std::filesystem::path& path);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoke::anomaly
