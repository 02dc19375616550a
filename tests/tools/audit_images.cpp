// Writes the altered copies tests/install/stoke_cli_audit.sh plants in a
// validation set, with stoke's own decoder, resize and encoders:
//   stoke_audit_images reencode SRC DST QUALITY   SRC decoded, written as JPEG
//   stoke_audit_images resize SRC DST W H         SRC resized to W x H (area / bilinear)
//   stoke_audit_images shift SRC DST DX DY        SRC moved by (DX, DY) pixels, edges repeated
// DST is written as PNG when it ends in .png, else as JPEG (quality 90).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "stoke/stoke.hpp"

namespace {

void write(const std::string& path, const stoke::Image& image, int quality) {
  const bool png = path.size() > 4 && path.compare(path.size() - 4, 4, ".png") == 0;
  const auto bytes =
      png ? stoke::encode_png(image.view()) : stoke::encode_jpeg(image.view(), quality);
  stoke::write_file(path, bytes);
}

stoke::Image shifted(const stoke::Image& src, int dx, int dy) {
  stoke::Image out(src.width(), src.height(), src.channels());
  const int c = src.channels();
  for (int y = 0; y < src.height(); ++y) {
    const int sy = std::clamp(y - dy, 0, src.height() - 1);
    for (int x = 0; x < src.width(); ++x) {
      const int sx = std::clamp(x - dx, 0, src.width() - 1);
      std::memcpy(out.mutable_view().row(y) + x * c, src.view().row(sy) + sx * c,
                  static_cast<std::size_t>(c));
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s reencode|resize|shift SRC DST ARGS...\n", argv[0]);
    return 2;
  }
  try {
    const std::string what = argv[1], dst = argv[3];
    stoke::Decoder decoder;
    stoke::Image src;
    decoder.decode_file(argv[2], stoke::DecodeOptions{3}, src);
    if (what == "reencode") {
      write(dst, src, std::atoi(argv[4]));
    } else if (what == "resize" && argc == 6) {
      stoke::Image out(std::atoi(argv[4]), std::atoi(argv[5]), src.channels());
      stoke::Resampler(stoke::default_simd_level())
          .resize(src.view(), out.mutable_view(), stoke::ResizeFilter::kAuto);
      write(dst, out, 90);
    } else if (what == "shift" && argc == 6) {
      write(dst, shifted(src, std::atoi(argv[4]), std::atoi(argv[5])), 90);
    } else {
      std::fprintf(stderr, "%s: unknown operation or arguments '%s'\n", argv[0], argv[1]);
      return 2;
    }
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 1;
  }
  return 0;
}
