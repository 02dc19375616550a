#include "image/tiff.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "image/tiff_parts.hpp"
#include "stoke/error.hpp"

namespace stoke::detail {
namespace {

using tiff::check_striles;
using tiff::Layout;
using tiff::tiff_fail;
using tiff::TiffSource;

// ---- libtiff over a byte buffer ----------------------------------------------

tmsize_t tiff_read(thandle_t handle, void* out, tmsize_t size) {
  auto* src = static_cast<TiffSource*>(handle);
  if (size <= 0 || src->offset >= src->size()) return 0;
  const auto n =
      std::min<std::uint64_t>(static_cast<std::uint64_t>(size), src->size() - src->offset);
  if (src->fd >= 0) {
    const ssize_t got = ::pread(src->fd, out, n, static_cast<off_t>(src->offset));
    if (got <= 0) return got < 0 ? -1 : 0;
    src->offset += static_cast<std::uint64_t>(got);
    return got;
  }
  std::memcpy(out, src->bytes.data() + src->offset, n);
  src->offset += n;
  return static_cast<tmsize_t>(n);
}

tmsize_t tiff_write(thandle_t, void*, tmsize_t) {
  return -1;
}

toff_t tiff_seek(thandle_t handle, toff_t offset, int whence) {
  auto* src = static_cast<TiffSource*>(handle);
  std::uint64_t base = 0;
  if (whence == SEEK_CUR) base = src->offset;
  if (whence == SEEK_END) base = src->size();
  if (offset > UINT64_MAX - base) return static_cast<toff_t>(-1);
  src->offset = base + offset;  // past the end is allowed; reads there return 0
  return src->offset;
}

int tiff_close(thandle_t) {
  return 0;
}
toff_t tiff_size(thandle_t handle) {
  return static_cast<TiffSource*>(handle)->size();
}

// Mapped: libtiff reads strips straight from the buffer (bounds-checked by it).
int tiff_map(thandle_t handle, void** base, toff_t* size) {
  auto* src = static_cast<TiffSource*>(handle);
  if (src->fd >= 0) return 0;
  *base = const_cast<std::uint8_t*>(src->bytes.data());
  *size = src->bytes.size();
  return 1;
}
void tiff_unmap(thandle_t, void*, toff_t) {}

// libtiff's messages already name the routine (e.g. "LZWDecode: ..."), so `module` is not repeated.
void collect(TiffSource& src, const char* kind, const char* format, va_list args) {
  if (src.messages.size() > 1024) return;  // the first few say what went wrong
  char text[320];
  std::vsnprintf(text, sizeof text, format, args);
  if (!src.messages.empty()) src.messages += "; ";
  src.messages += kind;
  src.messages += text;
}

int on_error(TIFF*, void* user, const char*, const char* format, va_list args) {
  collect(*static_cast<TiffSource*>(user), "", format, args);
  return 1;  // handled: libtiff's default handler (stderr) is not called
}

int on_warning(TIFF*, void* user, const char*, const char* format, va_list args) {
  collect(*static_cast<TiffSource*>(user), "warning: ", format, args);
  return 1;
}

// An open TIFF over `src`; closed on destruction.
class TiffFile {
 public:
  TiffFile(TiffSource& src, std::string_view name) {
    TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
    if (!options) tiff_fail(name, "out of memory", src);
    TIFFOpenOptionsSetErrorHandlerExtR(options, on_error, &src);
    TIFFOpenOptionsSetWarningHandlerExtR(options, on_warning, &src);
    // Mode "r" (no "m"): libtiff reads strips straight from the buffer through tiff_map.
    tif_ = TIFFClientOpenExt("stoke", "r", &src, tiff_read, tiff_write, tiff_seek, tiff_close,
                             tiff_size, tiff_map, tiff_unmap, options);
    TIFFOpenOptionsFree(options);
    if (!tif_) tiff_fail(name, "not a readable TIFF", src);
  }
  ~TiffFile() { TIFFClose(tif_); }
  TiffFile(const TiffFile&) = delete;
  TiffFile& operator=(const TiffFile&) = delete;
  TIFF* get() const noexcept { return tif_; }

 private:
  TIFF* tif_ = nullptr;
};

// ---- Header --------------------------------------------------------------------

Layout read_layout(TIFF* tif, std::string_view name, const TiffSource& src) {
  std::uint32_t width = 0, height = 0;
  std::uint16_t bits = 0, samples = 0, photometric = 0, planar = 0, sample_format = 0;
  if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) ||
      !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height)) {
    tiff_fail(name, "no image width or length", src);
  }
  if (width > INT_MAX || height > INT_MAX) {
    tiff_fail(name, "header claims " + std::to_string(width) + "x" + std::to_string(height), src);
  }
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
  TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &sample_format);
  if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric))
    tiff_fail(name, "no photometric interpretation", src);
  if (bits != 8 && bits != 16) {
    tiff_fail(name, "unsupported bits per sample " + std::to_string(bits) + " (8 or 16)", src);
  }
  if (sample_format != SAMPLEFORMAT_UINT)
    tiff_fail(name, "unsupported sample format (unsigned integers only)", src);
  Layout layout{static_cast<int>(width),
                static_cast<int>(height),
                0,
                samples,
                bits,
                photometric == PHOTOMETRIC_MINISWHITE};
  if (photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE) {
    layout.channels = 1;
  } else if (photometric == PHOTOMETRIC_RGB) {
    layout.channels = 3;
  } else {
    tiff_fail(name,
              "unsupported photometric interpretation " + std::to_string(photometric) +
                  " (gray or RGB; palette, YCbCr, CMYK and others are not supported)",
              src);
  }
  if (samples < layout.channels) {
    tiff_fail(name,
              std::to_string(samples) + " samples per pixel for " +
                  std::to_string(layout.channels) + " color channels",
              src);
  }
  if (planar != PLANARCONFIG_CONTIG && samples > 1) {
    tiff_fail(name, "separate sample planes are not supported (interleaved samples only)", src);
  }
  return layout;
}

// ---- Pixels --------------------------------------------------------------------

// 16 -> 8 bits as png_set_scale_16: v * 255 / 65535, rounded.
inline std::uint8_t scale_16(std::uint16_t v) {
  return static_cast<std::uint8_t>((v * 255u + 32767u) / 65535u);
}

// Converts `count` stored pixels at `src` to `channels` channels of T at
// `dst`: uint8 (16-bit samples reduced) or uint16 (16-bit samples as stored).
template <class T>
void convert_pixels(const std::uint8_t* src, int count, const Layout& l, int channels, T* dst) {
  constexpr unsigned kMax = sizeof(T) == 2 ? 65535u : 255u;
  auto sample = [&](std::size_t i) -> T {
    if (l.bits == 8) return static_cast<T>(src[i]);
    std::uint16_t v;
    std::memcpy(&v, src + 2 * i, 2);  // libtiff returns native byte order
    if constexpr (sizeof(T) == 2) {
      return v;
    } else {
      return scale_16(v);
    }
  };
  for (int x = 0; x < count; ++x) {
    const std::size_t at = static_cast<std::size_t>(x) * l.samples;
    if (l.channels == 1) {
      const T v = l.min_is_white ? static_cast<T>(kMax - sample(at)) : sample(at);
      if (channels == 1) {
        dst[x] = v;
      } else {
        dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = v;
      }
      continue;
    }
    const unsigned r = sample(at), g = sample(at + 1), b = sample(at + 2);
    if (channels == 3) {
      dst[3 * x] = static_cast<T>(r), dst[3 * x + 1] = static_cast<T>(g),
              dst[3 * x + 2] = static_cast<T>(b);
    } else {
      dst[x] = static_cast<T>((77 * r + 150 * g + 29 * b + 128) >> 8);  // convert_channels' luma
    }
  }
}

// `count` stored pixels into `out` at (x, y), at out's bit depth.
void convert_into(const std::uint8_t* src, int count, const Layout& l, Image& out, std::size_t x,
                  std::size_t y) {
  std::uint8_t* at = out.data() + y * out.stride() + x * out.channels() * out.sample_bytes();
  if (out.bit_depth() == 16) {
    convert_pixels(src, count, l, out.channels(), reinterpret_cast<std::uint16_t*>(at));
  } else {
    convert_pixels(src, count, l, out.channels(), at);
  }
}

void read_strips(TIFF* tif, std::string_view name, const Layout& l,
                 std::vector<std::uint8_t>& scratch, const TiffSource& src, Image& out) {
  std::uint32_t rows_per_strip = 0;
  TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rows_per_strip);
  rows_per_strip =
      std::clamp<std::uint32_t>(rows_per_strip, 1, static_cast<std::uint32_t>(l.height));
  const std::uint64_t strip_size = TIFFStripSize64(tif);
  if (strip_size == 0) tiff_fail(name, "strip size overflows", src);
  scratch.resize(strip_size);
  const std::size_t row_bytes = static_cast<std::size_t>(l.width) * l.samples * (l.bits / 8);
  for (int y = 0; y < l.height; y += static_cast<int>(rows_per_strip)) {
    const int rows = std::min<int>(static_cast<int>(rows_per_strip), l.height - y);
    const tmsize_t got =
        TIFFReadEncodedStrip(tif, TIFFComputeStrip(tif, static_cast<std::uint32_t>(y), 0),
                             scratch.data(), static_cast<tmsize_t>(scratch.size()));
    if (got < 0 || static_cast<std::size_t>(got) < row_bytes * rows) {
      tiff_fail(name, "cannot read the strip at row " + std::to_string(y), src);
    }
    for (int r = 0; r < rows; ++r) {
      convert_into(scratch.data() + r * row_bytes, l.width, l, out, 0,
                   static_cast<std::size_t>(y + r));
    }
  }
}

void read_tiles(TIFF* tif, std::string_view name, const Layout& l,
                std::vector<std::uint8_t>& scratch, const TiffSource& src, Image& out) {
  std::uint32_t tile_width = 0, tile_height = 0;
  TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tile_width);
  TIFFGetField(tif, TIFFTAG_TILELENGTH, &tile_height);
  const std::uint64_t tile_size = TIFFTileSize64(tif);
  if (tile_width == 0 || tile_height == 0 || tile_size == 0) tiff_fail(name, "bad tile size", src);
  scratch.resize(tile_size);
  const std::size_t pixel_bytes = static_cast<std::size_t>(l.samples) * (l.bits / 8);
  const std::size_t tile_row_bytes = tile_width * pixel_bytes;
  for (std::uint32_t ty = 0; ty < static_cast<std::uint32_t>(l.height); ty += tile_height) {
    for (std::uint32_t tx = 0; tx < static_cast<std::uint32_t>(l.width); tx += tile_width) {
      const tmsize_t got =
          TIFFReadEncodedTile(tif, TIFFComputeTile(tif, tx, ty, 0, 0), scratch.data(),
                              static_cast<tmsize_t>(scratch.size()));
      if (got < 0 || static_cast<std::uint64_t>(got) < tile_size) {
        tiff_fail(name, "cannot read the tile at " + std::to_string(tx) + "," + std::to_string(ty),
                  src);
      }
      const int cols = static_cast<int>(std::min<std::uint32_t>(tile_width, l.width - tx));
      const int rows = static_cast<int>(std::min<std::uint32_t>(tile_height, l.height - ty));
      for (int r = 0; r < rows; ++r) {
        convert_into(scratch.data() + r * tile_row_bytes, cols, l, out, tx,
                     static_cast<std::size_t>(ty + r));
      }
    }
  }
}

}  // namespace

ImageInfo tiff_info(std::span<const std::uint8_t> bytes, std::string_view name) {
  TiffSource src{bytes, 0, {}};
  TiffFile file(src, name);
  const Layout l = read_layout(file.get(), name, src);
  return {ImageFormat::kTiff, l.width, l.height, l.channels, l.bits, 1};
}

ImageInfo tiff_file_info(const std::filesystem::path& path) {
  const std::string name = path.string();
  TiffSource src{{}, 0, {}, ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK), 0};
  if (src.fd < 0) throw IoError("cannot open '" + name + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{src.fd};
  struct stat st {};
  if (::fstat(src.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw IoError("'" + name + "' is not a regular file");
  src.file_size = static_cast<std::uint64_t>(st.st_size);
  TiffFile file(src, name);
  const Layout l = read_layout(file.get(), name, src);
  return {ImageFormat::kTiff, l.width, l.height, l.channels, l.bits, 1};
}

void decode_tiff(std::span<const std::uint8_t> bytes, std::string_view name,
                 std::uint64_t max_pixels, int channels, bool keep_16_bit,
                 std::vector<std::uint8_t>& scratch, Image& out) {
  TiffSource src{bytes, 0, {}};
  TiffFile file(src, name);
  const Layout l = read_layout(file.get(), name, src);
  check_image_size(name, l.width, l.height, max_pixels);
  check_striles(file.get(), name, src, l);
  out.reshape(l.width, l.height, channels ? channels : l.channels,
              l.bits == 16 && keep_16_bit ? 16 : 8);
  if (TIFFIsTiled(file.get())) {
    read_tiles(file.get(), name, l, scratch, src, out);
  } else {
    read_strips(file.get(), name, l, scratch, src, out);
  }
}

}  // namespace stoke::detail

namespace stoke::detail::tiff {

[[noreturn]] void tiff_fail(std::string_view name, const std::string& reason,
                            const TiffSource& src) {
  std::string message = "cannot decode image '" + std::string(name) + "': TIFF: " + reason;
  if (!src.messages.empty()) message += " (libtiff: " + src.messages + ")";
  throw DecodeError(message);
}

}  // namespace stoke::detail::tiff
