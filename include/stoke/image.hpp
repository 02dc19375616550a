// Images and the pixel work of the preprocessing pipeline: decoding (JPEG with
// DCT-domain downscaling, PNG 8/16 bit, BMP, TIFF 8/16 bit), gray<->RGB, and
// the SIMD pixel kernels
// (bilinear and area resize, crop, flip, brightness/contrast jitter, and the
// fused resize + normalize + HWC->CHW + dtype pass).
//
// Pixels are interleaved (HWC), 1 or 3 channels, uint8 or (16-bit PNG/TIFF,
// Mono16 buffers) uint16 in native byte order. Kernels run on the
// instruction set given by a SimdLevel (see resolve_simd); every level gives the
// same results as the scalar path within the tolerances in docs/pipeline.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "stoke/export.hpp"
#include "stoke/system.hpp"

namespace stoke {

// A read-only window onto HWC pixels; `stride` is bytes between rows
// (>= width * channels * sample_bytes()), so a crop is a view with an offset
// pointer. bit_depth 16: uint16 samples in native byte order, 2-byte aligned.
struct ImageView {
  const std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 0;
  std::size_t stride = 0;
  int bit_depth = 8;  // 8 or 16
  const std::uint8_t* row(int y) const noexcept {
    return data + static_cast<std::size_t>(y) * stride;
  }
  const std::uint16_t* row16(int y) const noexcept {
    return reinterpret_cast<const std::uint16_t*>(row(y));
  }
  std::size_t sample_bytes() const noexcept { return bit_depth == 16 ? 2 : 1; }
};

struct MutableImageView {
  std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 0;
  std::size_t stride = 0;
  int bit_depth = 8;  // 8 or 16
  std::uint8_t* row(int y) const noexcept { return data + static_cast<std::size_t>(y) * stride; }
  std::uint16_t* row16(int y) const noexcept { return reinterpret_cast<std::uint16_t*>(row(y)); }
  std::size_t sample_bytes() const noexcept { return bit_depth == 16 ? 2 : 1; }
  operator ImageView() const noexcept { return {data, width, height, channels, stride, bit_depth}; }
};

// An owning, tightly packed HWC image of uint8 (bit_depth 8) or uint16
// (bit_depth 16) samples. Its buffer only grows: reshaping
// to a size that fits reuses the memory, so decoding image after image into
// the same Image allocates nothing once the largest has been seen.
class STOKE_API Image {
 public:
  Image() = default;
  Image(int width, int height, int channels, int bit_depth = 8) {
    reshape(width, height, channels, bit_depth);
  }

  // Sets the shape; contents are unspecified afterwards. InvalidArgument for
  // non-positive sizes, channels other than 1 or 3, bit_depth other than 8 or 16.
  void reshape(int width, int height, int channels, int bit_depth = 8);

  int width() const noexcept { return width_; }
  int height() const noexcept { return height_; }
  int channels() const noexcept { return channels_; }
  int bit_depth() const noexcept { return bit_depth_; }
  std::size_t sample_bytes() const noexcept { return bit_depth_ == 16 ? 2 : 1; }
  std::size_t stride() const noexcept {
    return static_cast<std::size_t>(width_) * channels_ * sample_bytes();
  }
  std::size_t size_bytes() const noexcept { return stride() * height_; }
  std::size_t capacity() const noexcept { return capacity_; }
  // The buffer is allocated as uint16 (so 16-bit samples have their own type
  // and alignment); 8-bit samples are its bytes.
  std::uint8_t* data() noexcept { return reinterpret_cast<std::uint8_t*>(buffer_.get()); }
  const std::uint8_t* data() const noexcept {
    return reinterpret_cast<const std::uint8_t*>(buffer_.get());
  }
  std::uint16_t* data16() noexcept { return buffer_.get(); }
  const std::uint16_t* data16() const noexcept { return buffer_.get(); }

  ImageView view() const noexcept {
    return {data(), width_, height_, channels_, stride(), bit_depth_};
  }
  MutableImageView mutable_view() noexcept {
    return {data(), width_, height_, channels_, stride(), bit_depth_};
  }

 private:
  std::unique_ptr<std::uint16_t[]> buffer_;
  std::size_t capacity_ = 0;  // bytes
  int width_ = 0;
  int height_ = 0;
  int channels_ = 0;
  int bit_depth_ = 8;
};

enum class ImageFormat { kUnknown, kJpeg, kPng, kBmp, kTiff };
STOKE_API const char* to_string(ImageFormat format) noexcept;

// From the first bytes (magic numbers), not the file name.
STOKE_API ImageFormat sniff_format(std::span<const std::uint8_t> bytes) noexcept;

struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0;
  int height = 0;
  int channels = 0;     // as stored: 1 (gray) or 3 (color; alpha is dropped on decode)
  int bit_depth = 8;    // PNG: 1..16; TIFF: 8 or 16; JPEG, BMP: 8 per sample
  int orientation = 1;  // JPEG: EXIF orientation 1..8 as stored (1: upright)
};

// STOKE_MAX_IMAGE_PIXELS's default (Settings::max_image_pixels).
inline constexpr std::uint64_t kDefaultMaxImagePixels = 300'000'000;

struct DecodeOptions {
  int channels = 0;    // 0: as stored; 1: gray; 3: RGB (converted as needed)
  int min_width = 0;   // JPEG: decode at the smallest DCT scale n/8 (n = 1..8)
  int min_height = 0;  // whose size is still >= these; 0: full size
  // The largest stored width * height accepted, checked from the header
  // before any buffer is reserved: DecodeError naming the file, the claimed
  // size and STOKE_MAX_IMAGE_PIXELS. 0: no limit.
  std::uint64_t max_pixels = kDefaultMaxImagePixels;
  // JPEG: turn the image upright by its EXIF orientation tag (min_width and
  // min_height then apply to the upright image); false keeps it as stored.
  bool apply_orientation = true;
  // PNG and TIFF with 16-bit samples: decode into a 16-bit Image (bit_depth
  // 16, the stored values). false reduces them to 8 bits (round(v * 255 /
  // 65535), as png_set_scale_16). Everything else always decodes to 8 bits.
  // The loader and the predictor set it for float outputs.
  bool keep_16_bit = false;
};

// Throws DecodeError naming `name`, the claimed size and the knob when
// width * height exceeds max_pixels (0: no limit), or when a side is not positive.
STOKE_API void check_image_size(std::string_view name, int width, int height,
                                std::uint64_t max_pixels);

// Decodes JPEG, PNG, BMP (8-bit palette, 24/32-bit) and TIFF (8/16-bit gray or RGB;
// 16-bit samples kept with DecodeOptions::keep_16_bit, else reduced to 8 bits)
// into caller-owned Images. Holds a libjpeg-turbo handle
// and reusable read/row buffers, so one Decoder per thread decodes without
// allocating in steady state. Not thread-safe; move-only.
// Every failure (truncated or corrupt data, unsupported format, CMYK JPEG, an
// unreadable file) throws DecodeError (IoError for a file that cannot be read)
// whose message names `name` / the path and the reason.
class STOKE_API Decoder {
 public:
  Decoder();
  ~Decoder();
  Decoder(Decoder&&) noexcept;
  Decoder& operator=(Decoder&&) noexcept;
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  ImageInfo info(std::span<const std::uint8_t> bytes, std::string_view name);
  // The size decode() would produce for these bytes and options.
  ImageInfo output_info(std::span<const std::uint8_t> bytes, std::string_view name,
                        const DecodeOptions& options);
  void decode(std::span<const std::uint8_t> bytes, std::string_view name,
              const DecodeOptions& options, Image& out);
  // Reads the file into an internal reused buffer, then decodes it.
  void decode_file(const std::filesystem::path& path, const DecodeOptions& options, Image& out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The JPEG DCT scale (numerator over 8) decode() picks: the smallest n in 1..8
// with ceil(width * n / 8) >= min_width and ceil(height * n / 8) >= min_height.
STOKE_API int jpeg_scale_eighths(int width, int height, int min_width, int min_height) noexcept;

// Reads a whole file into `out` (reused). IoError naming the path on failure,
// and for a directory or a special file (device, FIFO, socket), which are
// refused without reading (so /dev/zero or a FIFO cannot hang or fill memory).
STOKE_API void read_file(const std::filesystem::path& path, std::vector<std::uint8_t>& out);

// Encoders, used by the synthetic dataset generator and tests. PNG: a 16-bit
// view is written at 16 bits as it is; for an 8-bit view `bit_depth` 16
// stores each value v as v * 257. Throw on failure (IoError for files).
STOKE_API std::vector<std::uint8_t> encode_jpeg(ImageView image, int quality);
STOKE_API std::vector<std::uint8_t> encode_png(ImageView image, int bit_depth = 8);
STOKE_API void write_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

// gray -> RGB repeats the value; RGB -> gray is BT.601 luma
// (77 R + 150 G + 29 B + 128) >> 8 (at either bit depth). `dst` is reshaped
// (same bit depth as src).
STOKE_API void convert_channels(ImageView src, int channels, Image& dst);

// Changes the sample depth: 8 -> 16 stores v * 257 (exact: v / 255 == v * 257
// / 65535); 16 -> 8 rounds v * 255 / 65535 (as png_set_scale_16 and the 8-bit
// decode). `dst` is reshaped; same depth copies.
STOKE_API void convert_depth(ImageView src, int bit_depth, Image& dst);

// ---- Pixel kernels ----------------------------------------------------------

// kBilinear: half-pixel-centre bilinear (OpenCV INTER_LINEAR). kArea: each
// output pixel averages the source area it covers (antialiased; OpenCV
// INTER_AREA); an axis that is upscaled uses bilinear. kAuto: area when the
// image shrinks by 2x or more on an axis, else bilinear.
enum class ResizeFilter { kBilinear, kArea, kAuto };
STOKE_API const char* to_string(ResizeFilter filter) noexcept;

// kUint8: the pixels as they are, interleaved HWC and not normalized (1 byte
// per value): for a GPU consumer that normalizes and transposes on the device
// (PrefetchOptions::device_normalize), uploading 4x fewer bytes than float32.
// The fused pass writes only the three planar float types.
enum class OutputDtype { kFloat32, kFloat16, kBFloat16, kUint8 };
STOKE_API const char* to_string(OutputDtype dtype) noexcept;
STOKE_API std::size_t dtype_size(OutputDtype dtype) noexcept;

// Per-channel normalization applied to x = pixel / 255 (8-bit) or
// x = pixel / 65535 (16-bit; an 8-bit u and its 16-bit u * 257 give the same x):
//   kMeanStd: out = (x - mean[c]) / std[c]
//   kMinMax:  out = lo + x * (hi - lo)
// Both are one multiply-add per value: out = pixel * scale[c] + bias[c]
// (16-bit: out = (pixel / 257) * scale[c] + bias[c], the same affine).
struct STOKE_API Normalization {
  enum class Kind { kMeanStd, kMinMax };
  Kind kind = Kind::kMinMax;
  float mean[3] = {0.f, 0.f, 0.f};
  float std[3] = {1.f, 1.f, 1.f};
  float lo = 0.f;
  float hi = 1.f;

  static Normalization mean_std(std::span<const float> mean, std::span<const float> std);
  static Normalization min_max(float lo, float hi);
  // The affine form; InvalidArgument for a zero std or hi == lo.
  void affine(int channel, float& scale, float& bias) const;
};

// A resize / normalize engine for one SimdLevel. Keeps its coefficient tables
// (rebuilt only when the source/target sizes or the filter change) and row
// scratch, so repeated calls allocate nothing. Not thread-safe: one per thread.
class STOKE_API Resampler {
 public:
  explicit Resampler(SimdLevel level);
  ~Resampler();
  Resampler(Resampler&&) noexcept;
  Resampler& operator=(Resampler&&) noexcept;

  SimdLevel level() const noexcept;

  // Resizes src into dst (its width/height/channels are the target;
  // channels and bit depth must match src). 16-bit: in float (no fixed point),
  // rounded to nearest even.
  void resize(ImageView src, MutableImageView dst, ResizeFilter filter);

  // The fused pass: resize src to (width, height), normalize per channel and
  // write planar CHW of `dtype` to dst (channels * height * width elements,
  // bytes in dst as float / IEEE half / bfloat16, round to nearest even).
  // Reads the source once. A 16-bit source is resized in float from its full
  // precision (the vertical pass in the level's SIMD table, the horizontal
  // pass in plain C++) and normalized as pixel / 65535.
  void resize_normalize_chw(ImageView src, int width, int height, ResizeFilter filter,
                            const Normalization& norm, OutputDtype dtype, void* dst);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Crop windows (views, no copy). center_crop: the centred window (rounding the
// offset down). random_crop: offsets uniform from `seed` (same seed, same window).
// InvalidArgument when the window does not fit.
STOKE_API ImageView crop(ImageView src, int x, int y, int width, int height);
STOKE_API ImageView center_crop(ImageView src, int width, int height);
STOKE_API ImageView random_crop(ImageView src, int width, int height, std::uint64_t seed);

// In-place flips (8- or 16-bit).
STOKE_API void flip_horizontal(MutableImageView image) noexcept;
STOKE_API void flip_vertical(MutableImageView image) noexcept;

// In place: v' = clamp(round(contrast * v + brightness * 255 + (1 - contrast) * 128), 0, 255)
// (round to nearest even), i.e. brightness shifts by a fraction of full scale and
// contrast stretches about mid-gray. 16-bit (plain C++): the same with 65535 and
// 32896 (128 * 257), clamped to [0, 65535].
STOKE_API void adjust_brightness_contrast(MutableImageView image, float brightness, float contrast,
                                          SimdLevel level);

// The best SIMD level this CPU has (resolve_simd of the default settings);
// a configured STOKE_CPU_SIMD reaches the kernels through Context::simd().
STOKE_API SimdLevel default_simd_level();

}  // namespace stoke
