// JPEG (libjpeg-turbo, DCT-domain scaling) and PNG (libpng) decoding into
// caller-owned, reused Images. Corrupt data never crashes: libjpeg-turbo
// reports through return codes (with warnings promoted to errors, so a
// truncated file is an error and not a gray-filled image), and libpng's
// longjmp lands in png_read_into, whose frame owns no C++ objects.
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <bit>
#include <csetjmp>
#include <cstring>
#include <new>
#include <string>

#include "image/bmp.hpp"
#include "image/orientation.hpp"
#include "image/tiff.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"

namespace stoke {
namespace {

[[noreturn]] void decode_fail(std::string_view name, const std::string& reason) {
  throw DecodeError("cannot decode image '" + std::string(name) + "': " + reason);
}

// ---- PNG ---------------------------------------------------------------------

struct PngSource {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t offset;
};

struct PngErrorState {
  std::jmp_buf jump;
  char message[256];
};

void png_on_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngErrorState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof state->message, "%s", message ? message : "libpng error");
  std::longjmp(state->jump, 1);
}

void png_on_warning(png_structp, png_const_charp) {}

void png_read_bytes(png_structp png, png_bytep out, png_size_t length) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (length > src->size - src->offset) png_error(png, "file is truncated");
  std::memcpy(out, src->data + src->offset, length);
  src->offset += length;
}

struct PngRequest {
  int want_channels = 0;           // 0: as stored
  bool keep_16_bit = false;        // 16-bit samples stay 16-bit (native byte order)
  std::uint8_t* pixels = nullptr;  // null: header only
  std::size_t capacity = 0;
  std::uint8_t** row_pointers = nullptr;  // height entries when pixels != null
  ImageInfo info;                         // out: stored format
  int out_channels = 0;                   // out
  int out_bit_depth = 8;                  // out
};

// Returns 0 or an error with state.message set. No C++ objects live in this
// frame, so the longjmp from png_on_error skips no destructors.
int png_read_into(const PngSource& source, PngRequest& req, PngErrorState& state,
                  std::uint8_t** (*rows_for)(PngRequest&, int height)) {
  PngSource src = source;
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, png_on_error, png_on_warning);
  if (!png) return std::snprintf(state.message, sizeof state.message, "out of memory"), 1;
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return std::snprintf(state.message, sizeof state.message, "out of memory"), 1;
  }
  if (setjmp(state.jump)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return 1;
  }
  png_set_read_fn(png, &src, png_read_bytes);
  png_read_info(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  req.info.format = ImageFormat::kPng;
  req.info.width = static_cast<int>(png_get_image_width(png, info));
  req.info.height = static_cast<int>(png_get_image_height(png, info));
  req.info.bit_depth = depth;
  req.info.channels = (color & PNG_COLOR_MASK_COLOR) ? 3 : 1;
  const int want = req.want_channels ? req.want_channels : req.info.channels;
  req.out_channels = want;
  req.out_bit_depth = depth == 16 && req.keep_16_bit ? 16 : 8;
  if (!req.pixels) {
    png_destroy_read_struct(&png, &info, nullptr);
    return 0;
  }
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16 && req.keep_16_bit) {
    if constexpr (std::endian::native == std::endian::little) png_set_swap(png);
  } else if (depth == 16) {
    png_set_scale_16(png);  // rounds v * 255 / 65535
  }
  png_set_strip_alpha(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);  // then stripped
  if (want == 3 && req.info.channels == 1) png_set_gray_to_rgb(png);
  if (want == 1 && req.info.channels == 3) png_set_rgb_to_gray_fixed(png, 1, -1, -1);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (static_cast<int>(png_get_channels(png, info)) != want) {
    png_error(png, "unexpected channel count after conversion");
  }
  if (static_cast<int>(png_get_bit_depth(png, info)) != req.out_bit_depth) {
    png_error(png, "unexpected bit depth after conversion");
  }
  std::uint8_t** rows = rows_for(req, req.info.height);
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return 0;
}

// ---- JPEG --------------------------------------------------------------------

struct TjHandle {
  tjhandle handle = nullptr;
  TjHandle() : handle(tjInitDecompress()) {}
  ~TjHandle() {
    if (handle) tjDestroy(handle);
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
};

}  // namespace

int jpeg_scale_eighths(int width, int height, int min_width, int min_height) noexcept {
  if (min_width <= 0 && min_height <= 0) return 8;  // no target: full size
  for (int n = 1; n < 8; ++n) {
    // libjpeg-turbo's scaled size is ceil(size * n / 8) (TJSCALED).
    const int w = (width * n + 7) / 8;
    const int h = (height * n + 7) / 8;
    if (w >= min_width && h >= min_height) return n;
  }
  return 8;
}

ImageFormat sniff_format(std::span<const std::uint8_t> bytes) noexcept {
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    return ImageFormat::kJpeg;
  }
  static constexpr std::uint8_t kPngMagic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPngMagic, 8) == 0) return ImageFormat::kPng;
  if (bytes.size() >= 2 && bytes[0] == 'B' && bytes[1] == 'M') return ImageFormat::kBmp;
  // TIFF "II*\0" / "MM\0*", BigTIFF "II+\0" / "MM\0+".
  if (bytes.size() >= 4 && ((bytes[0] == 'I' && bytes[1] == 'I' &&
                             (bytes[2] == 42 || bytes[2] == 43) && bytes[3] == 0) ||
                            (bytes[0] == 'M' && bytes[1] == 'M' && bytes[2] == 0 &&
                             (bytes[3] == 42 || bytes[3] == 43)))) {
    return ImageFormat::kTiff;
  }
  return ImageFormat::kUnknown;
}

// Hidden explicitly: a class nested in a STOKE_API class is exported otherwise.
struct __attribute__((visibility("hidden"))) Decoder::Impl {
  TjHandle tj;
  std::vector<std::uint8_t> file_bytes;
  std::vector<std::uint8_t*> row_pointers;
  std::vector<std::uint8_t> tiff_scratch;  // one TIFF strip or tile
  Image stored_orientation;                // a JPEG as stored, before it is turned upright

  ImageInfo jpeg_info(std::span<const std::uint8_t> bytes, std::string_view name) {
    if (!tj.handle) decode_fail(name, "libjpeg-turbo could not create a decompressor");
    int width = 0, height = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(tj.handle, bytes.data(), static_cast<unsigned long>(bytes.size()),
                            &width, &height, &subsamp, &colorspace) != 0) {
      decode_fail(name, std::string("bad JPEG header: ") + tjGetErrorStr2(tj.handle));
    }
    if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
      throw DecodeError("cannot decode image '" + std::string(name) +
                        "': CMYK/YCCK JPEG is not supported (convert it to RGB)");
    }
    if (width <= 0 || height <= 0) decode_fail(name, "JPEG header has zero width or height");
    if (subsamp < 0) decode_fail(name, "unsupported JPEG chroma subsampling");
    return {ImageFormat::kJpeg,
            width,
            height,
            colorspace == TJCS_GRAY ? 1 : 3,
            8,
            detail::jpeg_exif_orientation(bytes)};
  }

  void decode_jpeg(std::span<const std::uint8_t> bytes, std::string_view name,
                   const DecodeOptions& options, Image& out);
  void decode_png(std::span<const std::uint8_t> bytes, std::string_view name,
                  const DecodeOptions& options, Image& out);
};

Decoder::Decoder() : impl_(std::make_unique<Impl>()) {}
Decoder::~Decoder() = default;
Decoder::Decoder(Decoder&&) noexcept = default;
Decoder& Decoder::operator=(Decoder&&) noexcept = default;

ImageInfo Decoder::info(std::span<const std::uint8_t> bytes, std::string_view name) {
  switch (sniff_format(bytes)) {
    case ImageFormat::kJpeg:
      return impl_->jpeg_info(bytes, name);
    case ImageFormat::kPng: {
      PngSource src{bytes.data(), bytes.size(), 0};
      PngRequest req;
      PngErrorState state{};
      if (png_read_into(src, req, state, nullptr) != 0)
        decode_fail(name, std::string("PNG: ") + state.message);
      if (req.info.width <= 0 || req.info.height <= 0)
        decode_fail(name, "PNG header has zero width or height");
      return req.info;
    }
    case ImageFormat::kBmp: {
      const auto h = detail::parse_bmp_header(bytes, name);
      return {ImageFormat::kBmp, h.width, h.height, h.bits == 8 && h.gray ? 1 : 3, 8, 1};
    }
    case ImageFormat::kTiff:
      return detail::tiff_info(bytes, name);
    case ImageFormat::kUnknown:
      break;
  }
  decode_fail(name,
              bytes.empty() ? "file is empty" : "unsupported format (not JPEG, PNG, BMP or TIFF)");
}

ImageInfo Decoder::output_info(std::span<const std::uint8_t> bytes, std::string_view name,
                               const DecodeOptions& options) {
  ImageInfo info = this->info(bytes, name);
  check_image_size(name, info.width, info.height, options.max_pixels);
  if (options.channels) info.channels = options.channels;
  if (info.format == ImageFormat::kJpeg) {
    const bool swap = options.apply_orientation && detail::orientation_swaps_axes(info.orientation);
    const int n =
        swap ? jpeg_scale_eighths(info.width, info.height, options.min_height, options.min_width)
             : jpeg_scale_eighths(info.width, info.height, options.min_width, options.min_height);
    info.width = (info.width * n + 7) / 8;
    info.height = (info.height * n + 7) / 8;
    if (swap) std::swap(info.width, info.height);
  }
  return info;
}

void Decoder::decode(std::span<const std::uint8_t> bytes, std::string_view name,
                     const DecodeOptions& options, Image& out) {
  if (options.channels != 0 && options.channels != 1 && options.channels != 3) {
    throw InvalidArgument("stoke::Decoder: channels must be 0, 1 or 3, got " +
                          std::to_string(options.channels));
  }
  const ImageFormat format = sniff_format(bytes);
  if (format == ImageFormat::kUnknown) {
    decode_fail(
        name, bytes.empty() ? "file is empty" : "unsupported format (not JPEG, PNG, BMP or TIFF)");
  }
  try {
    if (format == ImageFormat::kJpeg) {
      impl_->decode_jpeg(bytes, name, options, out);
    } else if (format == ImageFormat::kPng) {
      impl_->decode_png(bytes, name, options, out);
    } else if (format == ImageFormat::kTiff) {
      detail::decode_tiff(bytes, name, options.max_pixels, options.channels, options.keep_16_bit,
                          impl_->tiff_scratch, out);
    } else {
      const auto h = detail::parse_bmp_header(bytes, name);
      check_image_size(name, h.width, h.height, options.max_pixels);
      detail::decode_bmp(bytes, name, h,
                         options.channels ? options.channels : (h.bits == 8 && h.gray ? 1 : 3),
                         out);
    }
  } catch (const std::bad_alloc&) {
    // The size passed the limit but the memory is not there: still a stoke error naming the file.
    decode_fail(name,
                "out of memory for the decoded pixels (lower STOKE_MAX_IMAGE_PIXELS to refuse such "
                "images early)");
  }
}

void Decoder::Impl::decode_jpeg(std::span<const std::uint8_t> bytes, std::string_view name,
                                const DecodeOptions& options, Image& out) {
  const ImageInfo stored = jpeg_info(bytes, name);
  check_image_size(name, stored.width, stored.height, options.max_pixels);
  const int channels = options.channels ? options.channels : stored.channels;
  const int orientation = options.apply_orientation ? stored.orientation : 1;
  const bool swap = detail::orientation_swaps_axes(orientation);
  const int n =
      jpeg_scale_eighths(stored.width, stored.height, swap ? options.min_height : options.min_width,
                         swap ? options.min_width : options.min_height);
  const int width = (stored.width * n + 7) / 8;
  const int height = (stored.height * n + 7) / 8;
  Image& target = orientation == 1 ? out : stored_orientation;
  target.reshape(width, height, channels);
  // libjpeg-turbo does not expand gray to RGB: decode gray into the start of
  // each RGB row, then widen each row in place from its end.
  const bool widen = channels == 3 && stored.channels == 1;
  // Warnings (premature end of data, corrupt entropy segments) are errors.
  const int flags = TJFLAG_STOPONWARNING;
  if (tjDecompress2(tj.handle, bytes.data(), static_cast<unsigned long>(bytes.size()),
                    target.data(), width, static_cast<int>(target.stride()), height,
                    (channels == 1 || widen) ? TJPF_GRAY : TJPF_RGB, flags) != 0) {
    decode_fail(name, std::string("JPEG: ") + tjGetErrorStr2(tj.handle));
  }
  if (widen) {
    for (int y = 0; y < height; ++y) {
      std::uint8_t* row = target.data() + y * target.stride();
      for (int x = width - 1; x >= 0; --x) row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = row[x];
    }
  }
  if (orientation != 1) detail::apply_orientation(target.view(), orientation, out);
}

void Decoder::Impl::decode_png(std::span<const std::uint8_t> bytes, std::string_view name,
                               const DecodeOptions& options, Image& out) {
  PngSource src{bytes.data(), bytes.size(), 0};
  PngErrorState state{};
  PngRequest header;
  header.want_channels = options.channels;
  header.keep_16_bit = options.keep_16_bit;
  if (png_read_into(src, header, state, nullptr) != 0)
    decode_fail(name, std::string("PNG: ") + state.message);
  check_image_size(name, header.info.width, header.info.height, options.max_pixels);
  out.reshape(header.info.width, header.info.height, header.out_channels, header.out_bit_depth);
  row_pointers.resize(header.info.height);
  for (int y = 0; y < header.info.height; ++y) row_pointers[y] = out.data() + y * out.stride();
  PngRequest req;
  req.want_channels = options.channels;
  req.keep_16_bit = options.keep_16_bit;
  req.pixels = out.data();
  req.capacity = out.size_bytes();
  req.row_pointers = row_pointers.data();
  if (png_read_into(src, req, state, [](PngRequest& r, int) { return r.row_pointers; }) != 0) {
    decode_fail(name, std::string("PNG: ") + state.message);
  }
}

void check_image_size(std::string_view name, int width, int height, std::uint64_t max_pixels) {
  if (width <= 0 || height <= 0) {
    decode_fail(name,
                "header claims a size of " + std::to_string(width) + "x" + std::to_string(height));
  }
  const std::uint64_t pixels =
      static_cast<std::uint64_t>(width) * static_cast<std::uint64_t>(height);
  if (max_pixels != 0 && pixels > max_pixels) {
    decode_fail(name,
                "header claims " + std::to_string(width) + "x" + std::to_string(height) + " = " +
                    std::to_string(pixels) + " pixels, above the limit of " +
                    std::to_string(max_pixels) +
                    " (STOKE_MAX_IMAGE_PIXELS; raise it or set it to none to lift the limit)");
  }
}

void Decoder::decode_file(const std::filesystem::path& path, const DecodeOptions& options,
                          Image& out) {
  read_file(path, impl_->file_bytes);
  decode(impl_->file_bytes, path.string(), options, out);
}

}  // namespace stoke
