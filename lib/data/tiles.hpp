// Internal: tiling at native resolution (anomaly models' PatchCoreOptions::tile,
// segmentation models' PredictorOptions::segment_tile_stride): the tile
// origins that cover an image, and a reader that cuts a decoded file into
// tiles, each resized to the network's input and normalized as the model's
// preprocessing normalizes a whole image.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "stoke/data.hpp"
#include "stoke/image.hpp"

namespace stoke::data_detail {

struct TileGrid {
  int image_width = 0, image_height = 0, tile = 0;
  std::vector<std::pair<int, int>> origins;  // (x, y), row by row
};

// Origins 0, stride, 2 stride, ... along each side, the last moved to
// side - tile so the tiles cover every pixel. InvalidArgument naming `name`
// and both sizes when the tile is larger than the image.
STOKE_INTERNAL TileGrid tile_grid(int width, int height, int tile, int stride,
                                  std::string_view name);

class STOKE_INTERNAL TileReader {
 public:
  // preprocess: the model's (channels, input size, filter, normalization);
  // max_pixels as DecodeOptions::max_pixels.
  TileReader(const PreprocessOptions& preprocess, int tile, int stride, std::uint64_t max_pixels);
  // Decodes `file` at full size and writes every tile as a (C, H, W) input
  // into `out` (resized to the input size when the tile is another size).
  TileGrid read(const std::filesystem::path& file, std::vector<float>& out);
  TileGrid read_bytes(std::span<const std::uint8_t> bytes, std::string_view name,
                      std::vector<float>& out);
  // An image already in memory (any channels and depth the decoder gives).
  TileGrid read_view(ImageView image, std::string_view name, std::vector<float>& out);
  std::size_t sample_size() const noexcept;

 private:
  PreprocessOptions pre_;
  int tile_, stride_;
  std::uint64_t max_pixels_;
  Decoder decoder_;
  Resampler resampler_;
  Image decoded_, deepened_, converted_;
  std::vector<std::uint8_t> bytes_;
};

}  // namespace stoke::data_detail
