// Tiled segmentation at native resolution (PredictorOptions::segment_tile_stride):
// the image cut into squares of the network's input size at its own pixels,
// each tile's logits through the U-Net, overlapping logits averaged, the
// arg-max per pixel (ties: the lowest class) at the image's size.
#include <limits>
#include <string>

#include "deploy/segmentation.hpp"
#include "stoke/error.hpp"

namespace stoke::deploy_detail {

namespace {

// One tile's logits (classes x t x t) added into the image's sums.
void add_tile(std::span<const float> logits, int classes, int t, int ox, int oy, int width,
              int height, std::vector<float>& sum, std::vector<std::uint16_t>& covered) {
  const auto plane = static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  for (int k = 0; k < classes; ++k) {
    for (int y = 0; y < t; ++y) {
      const std::size_t row = static_cast<std::size_t>(k) * plane +
                              static_cast<std::size_t>(oy + y) * static_cast<std::size_t>(width);
      const std::size_t src = (static_cast<std::size_t>(k) * static_cast<std::size_t>(t) +
                               static_cast<std::size_t>(y)) *
                              static_cast<std::size_t>(t);
      for (int x = 0; x < t; ++x)
        sum[row + static_cast<std::size_t>(ox + x)] += logits[src + static_cast<std::size_t>(x)];
    }
  }
  for (int y = 0; y < t; ++y) {
    const std::size_t row = static_cast<std::size_t>(oy + y) * static_cast<std::size_t>(width);
    for (int x = 0; x < t; ++x) ++covered[row + static_cast<std::size_t>(ox + x)];
  }
}

}  // namespace

std::unique_ptr<data_detail::TileReader> segmentation_tile_reader(const LoadedSegmentation& loaded,
                                                                  int stride,
                                                                  std::uint64_t max_pixels) {
  const nn::ModelSpec& spec = loaded.model->spec();
  if (spec.width != spec.height) {
    throw InvalidArgument("segment_tile_stride: tiles are squares of the network's input, and " +
                          std::to_string(spec.width) + " x " + std::to_string(spec.height) +
                          " is not square");
  }
  if (stride < 1 || stride > spec.width) {
    throw InvalidArgument("segment_tile_stride " + std::to_string(stride) +
                          ": from 1 to the tile size " + std::to_string(spec.width) +
                          " (the network's input; larger would leave pixels out)");
  }
  return std::make_unique<data_detail::TileReader>(loaded.info.preprocess, spec.width, stride,
                                                   max_pixels);
}

SegmentationResult segment_tiles(LoadedSegmentation& loaded, const data_detail::TileGrid& grid,
                                 std::span<const float> inputs) {
  const nn::ModelSpec& spec = loaded.model->spec();
  const int classes = spec.classes, t = grid.tile, width = grid.image_width,
            height = grid.image_height;
  const auto pixels = static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  if (grid.origins.size() > std::numeric_limits<std::uint16_t>::max())
    throw InvalidArgument("segment_tile_stride: " + std::to_string(grid.origins.size()) +
                          " tiles; at most 65535 (use a larger stride)");
  const std::size_t sample = inputs.size() / grid.origins.size();
  std::vector<float> sum(static_cast<std::size_t>(classes) * pixels, 0.0f);
  std::vector<std::uint16_t> covered(pixels, 0);
  for (std::size_t i = 0; i < grid.origins.size(); ++i) {
    const std::vector<float> logits =
        segmentation_logits(*loaded.model, inputs.subspan(i * sample, sample), 1);
    add_tile(logits, classes, t, grid.origins[i].first, grid.origins[i].second, width, height, sum,
             covered);
  }
  // The mean over the tiles covering a pixel has the arg-max of the sum: the
  // count is the same for every class of the pixel.
  std::vector<std::uint8_t> labels(pixels);
  for (std::size_t p = 0; p < pixels; ++p) {
    int best = 0;
    for (int k = 1; k < classes; ++k)
      if (sum[static_cast<std::size_t>(k) * pixels + p] >
          sum[static_cast<std::size_t>(best) * pixels + p])
        best = k;
    labels[p] = static_cast<std::uint8_t>(best);
  }
  return segmentation_result(loaded, std::move(labels), width, height);
}

}  // namespace stoke::deploy_detail
