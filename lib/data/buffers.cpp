// Datasets from application-held buffers (camera frames): copied once into
// the shared storage as packed gray (8 or 16 bit) or RGB, so the loader treats
// them like IDX samples (no files, no decoding).
#include <algorithm>
#include <cstring>

#include "data/dataset_storage.hpp"
#include "data/rng.hpp"

namespace stoke {
namespace {

int bytes_per_pixel(PixelFormat format) {
  switch (format) {
    case PixelFormat::kMono8:
      return 1;
    case PixelFormat::kMono16:
      return 2;
    case PixelFormat::kRgb8:
    case PixelFormat::kBgr8:
      return 3;
  }
  return 1;
}

int channels_of(PixelFormat format) {
  return format == PixelFormat::kRgb8 || format == PixelFormat::kBgr8 ? 3 : 1;
}

void check_buffer(const ImageBuffer& b, std::size_t i, std::uint64_t max_pixels) {
  const std::string what = "Dataset::from_buffers: image " + std::to_string(i);
  if (!b.data) throw InvalidArgument(what + ": null data");
  if (b.width <= 0 || b.height <= 0) {
    throw InvalidArgument(what + ": size " + std::to_string(b.width) + "x" +
                          std::to_string(b.height));
  }
  const std::size_t row = static_cast<std::size_t>(b.width) * bytes_per_pixel(b.format);
  if (b.stride != 0 && b.stride < row) {
    throw InvalidArgument(what + ": stride " + std::to_string(b.stride) + " below the row size " +
                          std::to_string(row));
  }
  const auto pixels = static_cast<std::uint64_t>(b.width) * static_cast<std::uint64_t>(b.height);
  if (max_pixels != 0 && pixels > max_pixels) {
    throw InvalidArgument(what + ": " + std::to_string(b.width) + "x" + std::to_string(b.height) +
                          " is above the limit of " + std::to_string(max_pixels) +
                          " pixels (STOKE_MAX_IMAGE_PIXELS)");
  }
}

// Copies one image as packed gray (Mono8; Mono16 as 16-bit samples in native
// byte order, kept at full precision) or RGB (RGB8, BGR8 swapped).
void append_pixels(const ImageBuffer& b, std::vector<std::uint8_t>& out) {
  const int bpp = bytes_per_pixel(b.format);
  const std::size_t row = static_cast<std::size_t>(b.width) * bpp;
  const std::size_t stride = b.stride ? b.stride : row;
  for (int y = 0; y < b.height; ++y) {
    const std::uint8_t* src = b.data + static_cast<std::size_t>(y) * stride;
    const std::size_t at = out.size();
    out.insert(out.end(), src, src + row);
    if (b.format == PixelFormat::kBgr8) {
      for (std::size_t x = 0; x < row; x += 3) std::swap(out[at + x], out[at + x + 2]);
    }
  }
}

Dataset buffer_dataset(std::span<const ImageBuffer> images, std::span<const std::int32_t> labels,
                       std::vector<std::string> class_names, const DatasetOptions& options) {
  if (images.size() != labels.size()) {
    throw InvalidArgument("Dataset::from_buffers: " + std::to_string(images.size()) +
                          " images but " + std::to_string(labels.size()) + " labels");
  }
  const std::uint64_t max_pixels = options.max_image_pixels
                                       ? *options.max_image_pixels
                                       : options.context.settings().max_image_pixels.value_or(0);
  auto storage = std::make_shared<Dataset::Storage>();
  storage->skip_corrupt = options.skip_corrupt;
  auto& s = *storage;
  s.report.source = "buffers";
  s.classes = std::move(class_names);
  for (std::size_t i = 0; i < images.size(); ++i) {
    const auto& b = images[i];
    check_buffer(b, i, max_pixels);
    if (labels[i] < 0 || static_cast<std::size_t>(labels[i]) >= s.classes.size()) {
      throw InvalidArgument("Dataset::from_buffers: image " + std::to_string(i) + ": label " +
                            std::to_string(labels[i]) + " out of range (" +
                            std::to_string(s.classes.size()) + " classes)");
    }
    const int bit_depth = b.format == PixelFormat::kMono16 ? 16 : 8;
    if (bit_depth == 16 && s.pixels.size() % 2 != 0) s.pixels.push_back(0);  // uint16 alignment
    const std::size_t offset = s.pixels.size();
    append_pixels(b, s.pixels);
    const int channels = channels_of(b.format);
    s.slots.push_back({offset, b.width, b.height, channels, bit_depth});
    std::uint64_t h = data_detail::fnv1a(s.pixels.data() + offset, s.pixels.size() - offset);
    const std::int32_t shape[] = {b.width, b.height, channels, labels[i], bit_depth};
    s.identity.push_back(data_detail::fnv1a(shape, sizeof shape, h));
  }
  s.labels.assign(labels.begin(), labels.end());
  s.splits.assign(labels.size(), Split::kNone);
  s.report.candidates = s.report.used = images.size();
  return Dataset::from_storage(std::move(storage));
}

}  // namespace

Dataset Dataset::from_buffers(std::span<const ImageBuffer> images,
                              std::span<const std::int32_t> labels,
                              std::vector<std::string> class_names, const DatasetOptions& options) {
  return data_detail::guarded("Dataset::from_buffers", [&] {
    return buffer_dataset(images, labels, std::move(class_names), options);
  });
}

const char* to_string(PixelFormat format) noexcept {
  switch (format) {
    case PixelFormat::kMono8:
      return "Mono8";
    case PixelFormat::kMono16:
      return "Mono16";
    case PixelFormat::kRgb8:
      return "RGB8";
    case PixelFormat::kBgr8:
      return "BGR8";
  }
  return "?";
}

}  // namespace stoke
