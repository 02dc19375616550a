// Whole-file I/O, the JPEG/PNG encoders (for the synthetic dataset and tests)
// and gray<->RGB conversion.
#include <fcntl.h>
#include <png.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "image/file_read.hpp"
#include "image/stage_format.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"

namespace stoke {
namespace {

struct PngWriteState {
  std::jmp_buf jump;
  char message[256];
  std::vector<std::uint8_t>* out;
};

void png_write_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngWriteState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof state->message, "%s", message ? message : "libpng error");
  std::longjmp(state->jump, 1);
}

void png_write_bytes(png_structp png, png_bytep data, png_size_t length) {
  auto* state = static_cast<PngWriteState*>(png_get_io_ptr(png));
  state->out->insert(state->out->end(), data, data + length);
}

void png_flush(png_structp) {}

// No C++ objects in this frame (see decode.cpp); rows are prepared by the caller.
int png_write_rows(PngWriteState& state, int width, int height, int channels, int bit_depth,
                   std::uint8_t** rows) {
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, &state, png_write_error, nullptr);
  if (!png) return 1;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(state.jump)) {
    png_destroy_write_struct(&png, &info);
    return 1;
  }
  png_set_write_fn(png, &state, png_write_bytes, png_flush);
  png_set_IHDR(png, info, width, height, bit_depth,
               channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 1);  // fast: the generator writes many large files
  png_write_info(png, info);
  if (bit_depth == 16) png_set_swap(png);  // rows hold host-order (little-endian) uint16
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return 0;
}

}  // namespace

namespace detail {

void read_regular_file(const char* path, std::vector<std::uint8_t>& out) {
  const int fd = ::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw IoError("cannot open '" + std::string(path) + "': " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw IoError("cannot stat '" + std::string(path) + "': " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode))
    throw IoError("cannot read '" + std::string(path) + "': it is a directory");
  if (!S_ISREG(st.st_mode)) {
    throw IoError("cannot read '" + std::string(path) +
                  "': not a regular file (a device, FIFO or socket)");
  }
  try {
    out.resize(static_cast<std::size_t>(st.st_size));
  } catch (const std::bad_alloc&) {
    throw IoError("cannot read '" + std::string(path) + "': out of memory for " +
                  std::to_string(st.st_size) + " bytes");
  }
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError("cannot read '" + std::string(path) + "': " + std::strerror(errno));
    if (n == 0) throw IoError("cannot read '" + std::string(path) + "': short read (file shrank?)");
    got += static_cast<std::size_t>(n);
  }
}

}  // namespace detail

void read_file(const std::filesystem::path& path, std::vector<std::uint8_t>& out) {
  detail::read_regular_file(path.c_str(), out);
}

void write_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw IoError("cannot create '" + path.string() + "': " + std::strerror(errno));
  const std::size_t put = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), file);
  if (std::fclose(file) != 0 || put != bytes.size()) {
    throw IoError("cannot write '" + path.string() + "' (disk full?)");
  }
}

std::vector<std::uint8_t> encode_jpeg(ImageView image, int quality) {
  tjhandle tj = tjInitCompress();
  if (!tj) throw DecodeError("encode_jpeg: libjpeg-turbo could not create a compressor");
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(tj, image.data, image.width, static_cast<int>(image.stride),
                             image.height, image.channels == 1 ? TJPF_GRAY : TJPF_RGB, &buffer,
                             &size, image.channels == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0);
  std::string error = rc != 0 ? tjGetErrorStr2(tj) : "";
  std::vector<std::uint8_t> out;
  if (rc == 0) out.assign(buffer, buffer + size);
  tjFree(buffer);
  tjDestroy(tj);
  if (rc != 0) throw DecodeError("encode_jpeg: " + error);
  return out;
}

std::vector<std::uint8_t> encode_png(ImageView image, int bit_depth) {
  if (bit_depth != 8 && bit_depth != 16) {
    throw InvalidArgument("encode_png: bit depth must be 8 or 16, got " +
                          std::to_string(bit_depth));
  }
  if (image.bit_depth == 16) bit_depth = 16;  // written as it is
  const std::size_t row_values = static_cast<std::size_t>(image.width) * image.channels;
  std::vector<std::uint16_t> wide;
  std::vector<std::uint8_t*> rows(image.height);
  if (bit_depth == 16 && image.bit_depth != 16) {
    wide.resize(row_values * image.height);
    for (int y = 0; y < image.height; ++y) {
      for (std::size_t i = 0; i < row_values; ++i) wide[y * row_values + i] = image.row(y)[i] * 257;
      rows[y] = reinterpret_cast<std::uint8_t*>(wide.data() + y * row_values);
    }
  } else {
    for (int y = 0; y < image.height; ++y) rows[y] = const_cast<std::uint8_t*>(image.row(y));
  }
  std::vector<std::uint8_t> out;
  PngWriteState state{};
  state.out = &out;
  if (png_write_rows(state, image.width, image.height, image.channels, bit_depth, rows.data()) !=
      0) {
    throw DecodeError(std::string("encode_png: ") + state.message);
  }
  return out;
}

namespace {

template <class T>  // uint8_t or uint16_t samples
void convert_rows(ImageView src, int channels, Image& dst) {
  for (int y = 0; y < src.height; ++y) {
    const T* s = reinterpret_cast<const T*>(src.row(y));
    T* d = reinterpret_cast<T*>(dst.data() + y * dst.stride());
    if (src.channels == channels) {
      std::memcpy(d, s, dst.stride());
    } else if (channels == 3) {
      for (int x = 0; x < src.width; ++x) d[3 * x] = d[3 * x + 1] = d[3 * x + 2] = s[x];
    } else {
      for (int x = 0; x < src.width; ++x) {
        d[x] =
            static_cast<T>((77u * s[3 * x] + 150u * s[3 * x + 1] + 29u * s[3 * x + 2] + 128u) >> 8);
      }
    }
  }
}

}  // namespace

void convert_channels(ImageView src, int channels, Image& dst) {
  if (channels != 1 && channels != 3) {
    throw InvalidArgument("convert_channels: channels must be 1 or 3, got " +
                          std::to_string(channels));
  }
  dst.reshape(src.width, src.height, channels, src.bit_depth);
  if (src.bit_depth == 16) {
    convert_rows<std::uint16_t>(src, channels, dst);
  } else {
    convert_rows<std::uint8_t>(src, channels, dst);
  }
}

void convert_depth(ImageView src, int bit_depth, Image& dst) {
  if (bit_depth != 8 && bit_depth != 16) {
    throw InvalidArgument("convert_depth: bit depth must be 8 or 16, got " +
                          std::to_string(bit_depth));
  }
  dst.reshape(src.width, src.height, src.channels, bit_depth);
  const std::size_t n = static_cast<std::size_t>(src.width) * src.channels;
  for (int y = 0; y < src.height; ++y) {
    std::uint8_t* d = dst.data() + y * dst.stride();
    if (src.bit_depth == bit_depth) {
      std::memcpy(d, src.row(y), dst.stride());
    } else if (bit_depth == 16) {
      const std::uint8_t* s = src.row(y);
      auto* d16 = reinterpret_cast<std::uint16_t*>(d);
      for (std::size_t i = 0; i < n; ++i) d16[i] = static_cast<std::uint16_t>(s[i] * 257u);
    } else {
      const std::uint16_t* s = src.row16(y);
      for (std::size_t i = 0; i < n; ++i)
        d[i] = static_cast<std::uint8_t>((s[i] * 255u + 32767u) / 65535u);
    }
  }
}

}  // namespace stoke

namespace stoke::image_detail {

ImageView to_stage_format(ImageView source, int channels, int bit_depth, Image& deepened,
                          Image& converted) {
  if (source.bit_depth != bit_depth) {
    convert_depth(source, bit_depth, deepened);
    source = deepened.view();
  }
  if (source.channels != channels) {
    convert_channels(source, channels, converted);
    source = converted.view();
  }
  return source;
}

}  // namespace stoke::image_detail
