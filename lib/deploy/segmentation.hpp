// Internal: opening a segmentation model file (stoke/segment.hpp) for the
// Predictor, and the U-Net's eval forward both the self-check and the
// Predictor's segment_* calls run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "data/tiles.hpp"
#include "deploy/preprocess.hpp"
#include "stoke/deploy.hpp"
#include "stoke/segment.hpp"

namespace stoke::deploy_detail {

struct LoadedSegmentation {
  ModelInfo info;
  std::unique_ptr<nn::Model> model;
  std::int32_t ignore_label = kSegmentationIgnoreLabel;
  // The stored reference: one preprocessed input and the logits the trainer's
  // model gave it (classes x H x W).
  std::vector<float> reference_input, reference_logits;
};

// Builds the U-Net of the checkpoint and reads every "model.*" and
// "segment.*" key; CorruptFile naming the path and the key for a missing,
// malformed or inconsistent one (a reference of another size, a class count
// that is not the network's, a preprocessing size that is not its input).
STOKE_INTERNAL LoadedSegmentation load_segmentation_file(const std::filesystem::path& path,
                                                         Backend& backend);

// The eval forward of `count` preprocessed inputs: count x classes x H x W logits.
STOKE_INTERNAL std::vector<float> segmentation_logits(nn::Model& model,
                                                      std::span<const float> inputs,
                                                      std::size_t count);

// Runs the reference through `model` and fills the self-check's figures
// (max |logit difference| / max(1, max |logit|) against the tolerance).
STOKE_INTERNAL SelfCheckResult segmentation_self_check(LoadedSegmentation& loaded,
                                                       const std::string& backend);

// The result of a label map at the image's size (width x height class
// indices): its pixels per class and its regions.
STOKE_INTERNAL SegmentationResult segmentation_result(const LoadedSegmentation& loaded,
                                                      std::vector<std::uint8_t> labels, int width,
                                                      int height);

// The label map of one preprocessed input at the image's size, its areas and
// regions (SegmentationResult).
STOKE_INTERNAL SegmentationResult segment_input(LoadedSegmentation& loaded,
                                                std::span<const float> input, int image_width,
                                                int image_height);

// The reader of tiles of the network's (square) input size `stride` apart;
// InvalidArgument for a network that is not square or a stride outside
// [1, tile].
STOKE_INTERNAL std::unique_ptr<data_detail::TileReader> segmentation_tile_reader(
    const LoadedSegmentation& loaded, int stride, std::uint64_t max_pixels);

// The label map of an image cut into `grid`'s tiles (inputs: one preprocessed
// tile after another): each tile's logits, overlaps averaged, the arg-max per
// pixel at the image's size, its areas and regions.
STOKE_INTERNAL SegmentationResult segment_tiles(LoadedSegmentation& loaded,
                                                const data_detail::TileGrid& grid,
                                                std::span<const float> inputs);

// A Predictor's segmentation model: the loaded file, one preprocessor and one
// input buffer (with tile_stride > 0: a tile reader instead, tiles at native
// resolution); calls take turns (the U-Net's eval forward keeps its
// activations in its layers).
class STOKE_INTERNAL SegmentationRunner {
 public:
  SegmentationRunner(LoadedSegmentation loaded, std::uint64_t max_pixels, int tile_stride = 0);
  SegmentationResult file(const std::filesystem::path& path);
  SegmentationResult bytes(std::span<const std::uint8_t> bytes, std::string_view name);
  SegmentationResult pixels(const PixelBuffer& pixels);
  LoadedSegmentation& loaded() noexcept { return loaded_; }

 private:
  LoadedSegmentation loaded_;
  SamplePreprocessor pre_;
  std::unique_ptr<data_detail::TileReader> tiles_;
  std::vector<float> input_;
  std::mutex mutex_;
};

}  // namespace stoke::deploy_detail
