// Segmentation models end to end (issue 30): the model file of a U-Net
// (nn::ModelSpec with decoder_channels, stoke/nn/segmentation.hpp) with its
// class names, preprocessing, provenance and a self-check reference; the
// label-map tools the Predictor's segment_* calls use (stoke/deploy.hpp,
// SegmentationResult); and the evaluation stoke eval prints. See
// docs/segmentation-cli.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "stoke/data.hpp"
#include "stoke/deploy.hpp"
#include "stoke/export.hpp"
#include "stoke/model_file.hpp"
#include "stoke/nn/model.hpp"

namespace stoke {

// Version of the "segment.*" metadata keys.
inline constexpr int kSegmentationFileVersion = 1;

// At most this many classes (label maps are 8-bit; 255 is the ignore label).
inline constexpr int kMaxSegmentationClasses = 255;

// Writes a segmentation model file atomically: the checkpoint of `model`
// (weights and batch-norm statistics, no optimizer state) whose metadata holds
// `info` ("model.*": class names, preprocessing, provenance, metrics, history;
// info.references are not used) and "segment.*": the format version, the
// ignore label, and the self-check reference (`reference_input`, one
// preprocessed C x H x W image, and the logits `model` gives it now).
// InvalidArgument when the model is not a segmentation model, the class
// names are not one per output class (2..255), the preprocessing's size is
// not the network's input, or the reference input has another size.
STOKE_API void save_segmentation_model(const std::filesystem::path& path, nn::Model& model,
                                       const ModelInfo& info,
                                       std::span<const float> reference_input,
                                       std::int32_t ignore_label = kSegmentationIgnoreLabel);

// True when the checkpoint's metadata is a segmentation model's ("segment.version").
STOKE_API bool is_segmentation_metadata(const std::map<std::string, std::string>& metadata);

// The 8-connected regions of every label except 0 (background) and
// `ignore_label` in a width x height label map, in raster order of their
// first pixel. InvalidArgument when labels.size() != width x height or a
// label has no class name.
STOKE_API std::vector<SegmentRegion> connected_regions(std::span<const std::uint8_t> labels,
                                                       int width, int height,
                                                       const std::vector<std::string>& class_names,
                                                       int ignore_label = kSegmentationIgnoreLabel);

// Per-pixel arg-max over classes of logits (count, classes, height, width)
// (ties: the lowest class) into count x height x width labels.
STOKE_API void argmax_labels(std::span<const float> logits, std::size_t count, int classes,
                             int height, int width, std::span<std::uint8_t> labels);

// Adds pixel counts to `confusion` (classes x classes, row = truth, column =
// predicted): truth values equal to ignore_label are skipped; another value
// outside [0, classes) is an InvalidArgument.
STOKE_API void add_confusion(std::span<const std::int32_t> truth,
                             std::span<const std::uint8_t> predicted, int classes,
                             std::int32_t ignore_label, std::vector<std::uint64_t>& confusion);

// IoU per class (TP / (TP + FP + FN); NaN for a class neither in the truth
// nor predicted) and their mean over the classes that have one.
STOKE_API std::vector<double> class_iou(const std::vector<std::uint64_t>& confusion, int classes);
STOKE_API double mean_iou(const std::vector<double>& iou);

struct SegmentationImageResult {
  std::string file;
  double true_area = 0;       // share of the image's counted pixels not background
  double predicted_area = 0;  // the same for the prediction
  double area_error = 0;      // |predicted_area - true_area|
  double iou = 0;             // mean IoU of this image (NaN: no class present)
};

struct STOKE_API SegmentationEvaluation {
  std::vector<std::string> class_names;
  std::uint64_t images = 0;
  std::uint64_t pixels = 0;  // counted (the ignore label excluded), at the images' own size
  std::vector<std::uint64_t> confusion;  // classes x classes pixels, row = truth, col = predicted
  std::vector<double> per_class_iou;
  double mean_iou = 0;
  double pixel_accuracy = 0;
  double area_error = 0;  // mean over images of SegmentationImageResult::area_error
  std::vector<SegmentationImageResult> per_image;  // in dataset order

  // "per_class_iou" (by class name), "mean_iou", "pixel_accuracy",
  // "confusion_matrix" ({"classes", "rows"}), "area_error" ({"mean",
  // "images": [{file, true, predicted, error}]}), "images", "pixels".
  std::string to_json() const;
};

// Every image of `dataset` through predictor.segment_file, compared with its
// mask at the image's own size. InvalidArgument when the predictor is not a
// segmentation model or the dataset's class names are not the model's.
// `on_progress(done, total)` may be empty.
STOKE_API SegmentationEvaluation
evaluate_segmentation(Predictor& predictor, const SegmentationDataset& dataset,
                      const std::function<void(std::size_t, std::size_t)>& on_progress = {});

// A mask of the dataset at its stored size as class indices (the ignore
// label kept): a sample's mask_class applied, an absent mask all background.
STOKE_API std::vector<std::int32_t> read_segmentation_mask(const SegmentationDataset& dataset,
                                                           std::size_t index, int& width,
                                                           int& height);

}  // namespace stoke
