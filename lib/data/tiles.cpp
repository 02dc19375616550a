// Tiling at native resolution (data/tiles.hpp).
#include "data/tiles.hpp"

#include <string>

#include "image/stage_format.hpp"
#include "stoke/error.hpp"

namespace stoke::data_detail {

namespace {

std::vector<int> starts(int side, int tile, int stride) {
  std::vector<int> out;
  for (int s = 0;; s += stride) {
    if (s + tile >= side) {
      out.push_back(side - tile);
      return out;
    }
    out.push_back(s);
  }
}

}  // namespace

TileGrid tile_grid(int width, int height, int tile, int stride, std::string_view name) {
  if (tile <= 0 || stride <= 0 || stride > tile) {
    throw InvalidArgument("anomaly: tile " + std::to_string(tile) + " with stride " +
                          std::to_string(stride) + " (a tile and a stride of 1 to the tile size)");
  }
  if (tile > width || tile > height) {
    throw InvalidArgument("anomaly: '" + std::string(name) + "' is " + std::to_string(width) + "x" +
                          std::to_string(height) + ", smaller than a " + std::to_string(tile) +
                          "x" + std::to_string(tile) +
                          " tile (--tile at most the image's shorter side)");
  }
  TileGrid g{width, height, tile, {}};
  for (int y : starts(height, tile, stride))
    for (int x : starts(width, tile, stride)) g.origins.emplace_back(x, y);
  return g;
}

TileReader::TileReader(const PreprocessOptions& preprocess, int tile, int stride,
                       std::uint64_t max_pixels)
    : pre_(preprocess),
      tile_(tile),
      stride_(stride),
      max_pixels_(max_pixels),
      resampler_(default_simd_level()) {}

std::size_t TileReader::sample_size() const noexcept {
  return static_cast<std::size_t>(pre_.channels) * static_cast<std::size_t>(pre_.width) *
         static_cast<std::size_t>(pre_.height);
}

TileGrid TileReader::read(const std::filesystem::path& file, std::vector<float>& out) {
  read_file(file, bytes_);
  return read_bytes(bytes_, file.string(), out);
}

TileGrid TileReader::read_bytes(std::span<const std::uint8_t> bytes, std::string_view name,
                                std::vector<float>& out) {
  DecodeOptions options{pre_.channels, 0, 0};  // full size: the tiles are at native resolution
  options.keep_16_bit = true;
  options.max_pixels = max_pixels_;
  decoder_.decode(bytes, name, options, decoded_);
  return read_view(decoded_.view(), name, out);
}

TileGrid TileReader::read_view(ImageView image, std::string_view name, std::vector<float>& out) {
  const ImageView source =
      image_detail::to_stage_format(image, pre_.channels, image.bit_depth, deepened_, converted_);
  TileGrid grid = tile_grid(source.width, source.height, tile_, stride_, name);
  const std::size_t sample = sample_size();
  out.resize(grid.origins.size() * sample);
  for (std::size_t t = 0; t < grid.origins.size(); ++t) {
    const auto [x, y] = grid.origins[t];
    resampler_.resize_normalize_chw(crop(source, x, y, tile_, tile_), pre_.width, pre_.height,
                                    pre_.filter, pre_.normalization, OutputDtype::kFloat32,
                                    out.data() + t * sample);
  }
  return grid;
}

}  // namespace stoke::data_detail
