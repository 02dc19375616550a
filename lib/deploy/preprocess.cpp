// The loader's validation path for one image; see preprocess.hpp.
#include "deploy/preprocess.hpp"

#include <cstring>

#include "image/stage_format.hpp"
#include "stoke/error.hpp"

namespace stoke::deploy_detail {

SamplePreprocessor::SamplePreprocessor(const ModelInfo& info, SimdLevel level,
                                       std::uint64_t max_pixels)
    : pre_(info.preprocess), staged_(info.staged), max_pixels_(max_pixels), resampler_(level) {
  if (!pre_.resize_width) pre_.resize_width = pre_.width;
  if (!pre_.resize_height) pre_.resize_height = pre_.height;
  // The network computes in float32; a uint8 loader output was normalized
  // on the device with the same affine form.
  pre_.dtype = OutputDtype::kFloat32;
  sample_ = static_cast<std::size_t>(pre_.channels) * pre_.width * pre_.height;
}

void SamplePreprocessor::check(std::span<float> out) const {
  if (out.size() < sample_) {
    throw InvalidArgument("stoke::Predictor: output span of " + std::to_string(out.size()) +
                          " floats, a sample needs " + std::to_string(sample_));
  }
}

void SamplePreprocessor::from_file(const std::filesystem::path& path, std::span<float> out) {
  read_file(path, bytes_);
  from_bytes(bytes_, path.string(), out);
}

void SamplePreprocessor::from_bytes(std::span<const std::uint8_t> bytes, std::string_view name,
                                    std::span<float> out) {
  check(out);
  // Loader::Impl::decode_options: the DCT scale covering the stage's size.
  const int w = staged_ ? pre_.resize_width : pre_.width;
  const int h = staged_ ? pre_.resize_height : pre_.height;
  DecodeOptions options =
      pre_.dct_scaling ? DecodeOptions{pre_.channels, w, h} : DecodeOptions{pre_.channels, 0, 0};
  options.keep_16_bit = true;  // the validation loader's float output keeps 16-bit samples
  options.max_pixels = max_pixels_;
  decoder_.decode(bytes, name, options, decoded_);
  source_width_ = decoded_.view().width;
  source_height_ = decoded_.view().height;
  if (pre_.dct_scaling) {  // a JPEG decoded at a DCT scale: the stored size
    const ImageInfo info = decoder_.info(bytes, name);
    const bool turned = options.apply_orientation && info.orientation >= 5;  // 5..8: a quarter turn
    source_width_ = turned ? info.height : info.width;
    source_height_ = turned ? info.width : info.height;
  }
  finish(decoded_.view(), out);
}

void SamplePreprocessor::finish(ImageView source, std::span<float> out) {
  // Loader::Impl::deterministic with a float output: the stage depth is the
  // sample's own (16 for 16-bit samples), then the channels.
  const int depth = source.bit_depth;
  source = image_detail::to_stage_format(source, pre_.channels, depth, deepened_, converted_);
  if (staged_) {
    resized_.reshape(pre_.resize_width, pre_.resize_height, pre_.channels, depth);
    resampler_.resize(source, resized_.mutable_view(), pre_.filter);
    source = center_crop(resized_.view(), pre_.width, pre_.height);
  }
  resampler_.resize_normalize_chw(source, pre_.width, pre_.height, pre_.filter, pre_.normalization,
                                  pre_.dtype, out.data());
}

ImageView pixel_view(const PixelBuffer& px, Image& scratch) {
  if (!px.data || px.width <= 0 || px.height <= 0) {
    throw InvalidArgument("stoke::Predictor: pixel buffer is empty or " + std::to_string(px.width) +
                          "x" + std::to_string(px.height));
  }
  const int in_channels =
      px.format == PixelFormat::kRgb8 || px.format == PixelFormat::kBgr8 ? 3 : 1;
  const std::size_t bytes_per_pixel =
      px.format == PixelFormat::kMono16 ? 2 : static_cast<std::size_t>(in_channels);
  const std::size_t row = static_cast<std::size_t>(px.width) * bytes_per_pixel;
  const std::size_t stride = px.stride ? px.stride : row;
  if (stride < row) {
    throw InvalidArgument("stoke::Predictor: " + std::string(to_string(px.format)) +
                          " row stride " + std::to_string(stride) + " is less than a row of " +
                          std::to_string(row) + " bytes");
  }
  const auto* base = static_cast<const std::uint8_t*>(px.data);
  if (px.format == PixelFormat::kMono8 || px.format == PixelFormat::kRgb8)
    return {base, px.width, px.height, in_channels, stride};
  if (px.format == PixelFormat::kMono16) {  // 16-bit, native byte order, copied aligned
    scratch.reshape(px.width, px.height, 1, 16);
    for (int y = 0; y < px.height; ++y) {
      std::memcpy(scratch.data() + static_cast<std::size_t>(y) * scratch.stride(),
                  base + static_cast<std::size_t>(y) * stride, row);
    }
    return scratch.view();
  }
  scratch.reshape(px.width, px.height, in_channels);
  for (int y = 0; y < px.height; ++y) {
    const std::uint8_t* src = base + static_cast<std::size_t>(y) * stride;
    std::uint8_t* dst = scratch.data() + static_cast<std::size_t>(y) * scratch.stride();
    for (int x = 0; x < px.width; ++x) {  // BGR8
      dst[3 * x] = src[3 * x + 2];
      dst[3 * x + 1] = src[3 * x + 1];
      dst[3 * x + 2] = src[3 * x];
    }
  }
  return scratch.view();
}

void SamplePreprocessor::from_pixels(const PixelBuffer& px, std::span<float> out) {
  check(out);
  source_width_ = px.width;
  source_height_ = px.height;
  finish(pixel_view(px, decoded_), out);
}

}  // namespace stoke::deploy_detail
