// Internal: one image -> the network's input, by the loader's validation path
// (lib/data/loader.cpp, Loader::Impl::process with augmentation off), calling
// the same decoder and kernels in the same order:
//   direct: decode at the DCT scale covering the output -> fused resize +
//           normalize + CHW;
//   staged: decode at the scale covering the resize target -> resize to the
//           target -> centre crop -> normalize + CHW.
// 16-bit samples (16-bit PNG/TIFF, Mono16) stay 16-bit throughout, as in the
// validation loader (always a float output); both convert with
// image_detail::to_stage_format.
// Pixel buffers enter where a decoded image does (in-memory samples always
// take the staged path in the loader; here they follow the model's policy so
// a buffer and a lossless file of the same pixels give the same tensor).
#pragma once

#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "stoke/deploy.hpp"

namespace stoke::deploy_detail {

// An application's pixels as an image view: Mono8 and RGB8 as they are, Mono16
// copied aligned and BGR8 swapped into `scratch`. InvalidArgument for an
// empty buffer or a stride shorter than a row.
STOKE_INTERNAL ImageView pixel_view(const PixelBuffer& pixels, Image& scratch);

class STOKE_INTERNAL SamplePreprocessor {
 public:
  // max_pixels: DecodeOptions::max_pixels of every decode (0: no limit).
  SamplePreprocessor(const ModelInfo& info, SimdLevel level,
                     std::uint64_t max_pixels = kDefaultMaxImagePixels);

  std::size_t sample_size() const noexcept { return sample_; }
  void from_file(const std::filesystem::path& path, std::span<float> out);
  void from_bytes(std::span<const std::uint8_t> bytes, std::string_view name, std::span<float> out);
  void from_pixels(const PixelBuffer& pixels, std::span<float> out);
  // The last image's own size (after EXIF orientation; a JPEG's stored size
  // when it was decoded at a DCT scale).
  int source_width() const noexcept { return source_width_; }
  int source_height() const noexcept { return source_height_; }

 private:
  void finish(ImageView source, std::span<float> out);
  void check(std::span<float> out) const;

  PreprocessOptions pre_;
  bool staged_;
  std::uint64_t max_pixels_;
  std::size_t sample_;
  int source_width_ = 0, source_height_ = 0;
  Decoder decoder_;
  Resampler resampler_;
  Image decoded_, deepened_, converted_, resized_;
  std::vector<std::uint8_t> bytes_;
};

}  // namespace stoke::deploy_detail
