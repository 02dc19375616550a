// Synthetic industrial-inspection images: brushed metal with shading and
// grain, and for the defect class scratches and spots. Cheap to generate
// (a few integer operations per pixel) so benches can materialize thousands of
// 5 MP images; deterministic in (seed, index) on any thread count.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "data/rng.hpp"
#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/threads.hpp"

namespace stoke {
namespace {

using data_detail::Rng;

constexpr int kGrid = 9;  // coarse shading grid

// A pixel whose level a defect changes by at least this much is a defect
// pixel of the mask (the fade to the defect's edge stays below it).
constexpr float kMaskLevels = 8.f;

// Darkens (delta < 0) or brightens pixels within `radius` of the segment
// (x0, y0)-(x1, y1), fading linearly to the edge; sets the pixels it changes
// by kMaskLevels or more to `mark` in `mask` (when given: 1 channel, the image's size).
void draw_segment(Image& img, Image* mask, std::uint8_t mark, float x0, float y0, float x1,
                  float y1, float radius, float delta) {
  const int c = img.channels();
  const int lo_x = std::max(0, static_cast<int>(std::floor(std::min(x0, x1) - radius)));
  const int hi_x =
      std::min(img.width() - 1, static_cast<int>(std::ceil(std::max(x0, x1) + radius)));
  const int lo_y = std::max(0, static_cast<int>(std::floor(std::min(y0, y1) - radius)));
  const int hi_y =
      std::min(img.height() - 1, static_cast<int>(std::ceil(std::max(y0, y1) + radius)));
  const float dx = x1 - x0, dy = y1 - y0;
  const float len2 = std::max(dx * dx + dy * dy, 1e-6f);
  for (int y = lo_y; y <= hi_y; ++y) {
    std::uint8_t* row = img.data() + y * img.stride();
    for (int x = lo_x; x <= hi_x; ++x) {
      const float t = std::clamp(((x - x0) * dx + (y - y0) * dy) / len2, 0.f, 1.f);
      const float px = x0 + t * dx - x, py = y0 + t * dy - y;
      const float d = std::sqrt(px * px + py * py);
      if (d >= radius) continue;
      const float amount = delta * (1.f - d / radius);
      if (mask && std::abs(amount) >= kMaskLevels) mask->data()[y * mask->stride() + x] = mark;
      for (int k = 0; k < c; ++k) {
        row[x * c + k] = static_cast<std::uint8_t>(std::clamp(row[x * c + k] + amount, 0.f, 255.f));
      }
    }
  }
}

// synthetic_inspection_image with the mask values of scratches and spots.
void paint_image(int width, int height, std::uint64_t seed, bool defect, Image& out, Image* mask,
                 std::uint8_t scratch_mark, std::uint8_t spot_mark) {
  out.reshape(width, height, 3);
  if (mask) {
    mask->reshape(width, height, 1);
    for (int y = 0; y < height; ++y) std::fill_n(mask->data() + y * mask->stride(), width, 0);
  }
  Rng rng(data_detail::hash_seed(seed, defect ? 1 : 0, 0x1A5));
  const float base = 90.f + 70.f * rng.unit();
  const float tint[3] = {1.f, 0.97f + 0.04f * rng.unit(), 0.92f + 0.06f * rng.unit()};
  float grid[kGrid][kGrid];
  for (auto& r : grid) {
    for (float& v : r) v = 50.f * (rng.unit() - 0.5f);
  }
  // Brushing: each row carries its own streak offset; grain is a per-pixel hash.
  std::vector<float> shade(width);
  for (int y = 0; y < height; ++y) {
    const float gy = static_cast<float>(y) * (kGrid - 1) / std::max(1, height - 1);
    const int iy = std::min(kGrid - 2, static_cast<int>(gy));
    const float fy = gy - iy;
    const float streak = 12.f * (Rng(data_detail::hash_seed(seed, y, 0x57)).unit() - 0.5f);
    for (int x = 0; x < width; ++x) {
      const float gx = static_cast<float>(x) * (kGrid - 1) / std::max(1, width - 1);
      const int ix = std::min(kGrid - 2, static_cast<int>(gx));
      const float fx = gx - ix;
      const float top = grid[iy][ix] + fx * (grid[iy][ix + 1] - grid[iy][ix]);
      const float bottom = grid[iy + 1][ix] + fx * (grid[iy + 1][ix + 1] - grid[iy + 1][ix]);
      shade[x] = base + streak + top + fy * (bottom - top);
    }
    std::uint8_t* row = out.data() + y * out.stride();
    std::uint64_t noise = data_detail::hash_seed(seed, y, 0xA11);
    for (int x = 0; x < width; ++x) {
      noise ^= noise << 13;
      noise ^= noise >> 7;
      noise ^= noise << 17;
      const float grain = static_cast<float>(static_cast<int>(noise & 15) - 8);
      const float v = shade[x] + grain;
      for (int k = 0; k < 3; ++k) {
        row[3 * x + k] = static_cast<std::uint8_t>(std::clamp(v * tint[k], 0.f, 255.f));
      }
    }
  }
  if (!defect) return;
  // Sizes scale with the image so small test images still show their defects.
  const float unit = std::min(width, height) / 2048.f;
  const int scratches = 1 + static_cast<int>(rng.below(3));
  for (int i = 0; i < scratches; ++i) {
    const float x0 = rng.unit() * width, y0 = rng.unit() * height;
    const float angle = rng.unit() * 3.14159265f;
    const float length = (200.f + 1000.f * rng.unit()) * unit;
    draw_segment(out, mask, scratch_mark, x0, y0, x0 + length * std::cos(angle),
                 y0 + length * std::sin(angle),
                 std::max(1.5f, (2.f + 3.f * rng.unit()) * unit * 2.f),
                 -(40.f + 30.f * rng.unit()));
  }
  const int spots = static_cast<int>(rng.below(3));
  for (int i = 0; i < spots; ++i) {
    const float x = rng.unit() * width, y = rng.unit() * height;
    const float radius = std::max(2.f, (8.f + 32.f * rng.unit()) * unit * 2.f);
    draw_segment(out, mask, spot_mark, x, y, x, y, radius, rng.unit() < 0.5f ? -60.f : 50.f);
  }
}

void check_size(const SyntheticOptions& options) {
  if (options.width <= 0 || options.height <= 0 || options.width > 16384 ||
      options.height > 16384) {
    throw InvalidArgument("write_synthetic_dataset: bad size " + std::to_string(options.width) +
                          "x" + std::to_string(options.height));
  }
}

void make_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError("cannot create '" + dir.string() + "': " + ec.message());
}

}  // namespace

void synthetic_inspection_image(int width, int height, std::uint64_t seed, bool defect, Image& out,
                                Image* mask) {
  paint_image(width, height, seed, defect, out, mask, 255, 255);
}

std::filesystem::path write_synthetic_segmentation_dataset(const std::filesystem::path& root,
                                                           std::size_t count,
                                                           const SyntheticOptions& options) {
  check_size(options);
  make_folder(root / "images");
  make_folder(root / "masks");
  {
    std::ofstream names(root / "classes.txt");
    names << "background\nscratch\nspot\n";
    if (!names) throw IoError("cannot write '" + (root / "classes.txt").string() + "'");
  }
  const bool jpeg = options.format == SyntheticOptions::Format::kJpeg;
  parallel_for(options.first, options.first + count, 1, [&](std::size_t begin, std::size_t end) {
    Image image, mask;
    for (std::size_t i = begin; i < end; ++i) {
      // The classification set's draws: image i is the same picture in both.
      const std::uint64_t image_seed = data_detail::hash_seed(options.seed, i, 0x1AA6E);
      const bool defect = Rng(image_seed).unit() < options.defect_fraction;
      paint_image(options.width, options.height, image_seed, defect, image, &mask, 1, 2);
      char name[32];
      std::snprintf(name, sizeof name, "%06zu.%s", i, jpeg ? "jpg" : "png");
      write_file(root / "images" / name,
                 jpeg ? encode_jpeg(image.view(), options.jpeg_quality) : encode_png(image.view()));
      std::snprintf(name, sizeof name, "%06zu.png", i);
      write_file(root / "masks" / name, encode_png(mask.view()));
    }
  });
  return root;
}

std::filesystem::path write_synthetic_dataset(const std::filesystem::path& root, std::size_t count,
                                              const SyntheticOptions& options) {
  check_size(options);
  std::error_code ec;
  for (const char* cls : {"defect", "ok"}) {
    std::filesystem::create_directories(root / cls, ec);
    if (ec) throw IoError("cannot create '" + (root / cls).string() + "': " + ec.message());
  }
  const bool masks = !options.mask_root.empty();
  if (masks) {
    std::filesystem::create_directories(options.mask_root / "defect", ec);
    if (ec) {
      throw IoError("cannot create '" + (options.mask_root / "defect").string() +
                    "': " + ec.message());
    }
  }
  const bool jpeg = options.format == SyntheticOptions::Format::kJpeg;
  parallel_for(options.first, options.first + count, 1, [&](std::size_t begin, std::size_t end) {
    Image image, mask;
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint64_t image_seed = data_detail::hash_seed(options.seed, i, 0x1AA6E);
      const bool defect = Rng(image_seed).unit() < options.defect_fraction;
      synthetic_inspection_image(options.width, options.height, image_seed, defect, image,
                                 masks && defect ? &mask : nullptr);
      char name[32];
      std::snprintf(name, sizeof name, "%06zu.%s", i, jpeg ? "jpg" : "png");
      const auto bytes =
          jpeg ? encode_jpeg(image.view(), options.jpeg_quality) : encode_png(image.view());
      write_file(root / (defect ? "defect" : "ok") / name, bytes);
      if (masks && defect) {
        std::snprintf(name, sizeof name, "%06zu_mask.png", i);
        write_file(options.mask_root / "defect" / name, encode_png(mask.view()));
      }
    }
  });
  return root;
}

}  // namespace stoke
