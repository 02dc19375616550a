// SegmentationLoader: image + label-map batches. The image goes the Loader's
// way (decode, resize with the preprocessing filter, crop, augmentation, the
// fused normalize + CHW pass); the mask is resized nearest-neighbour to the same
// size and takes the same crop window and flips, never the photometric jitter.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "data/rng.hpp"
#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/threads.hpp"

namespace stoke {

void resize_labels_nearest(ImageView mask, int width, int height, std::span<std::int32_t> out) {
  if (mask.channels != 1 || mask.width <= 0 || mask.height <= 0 || width <= 0 || height <= 0 ||
      out.size() < static_cast<std::size_t>(width) * height) {
    throw InvalidArgument("resize_labels_nearest: needs a 1-channel mask and an output of " +
                          std::to_string(width) + "x" + std::to_string(height) + " values");
  }
  // Source index floor((d + 0.5) * in / out) in integers: ((2d + 1) * in) / (2 out).
  std::vector<int> xs(static_cast<std::size_t>(width));
  for (int x = 0; x < width; ++x)
    xs[x] = static_cast<int>((2ll * x + 1) * mask.width / (2ll * width));
  for (int y = 0; y < height; ++y) {
    const int sy = static_cast<int>((2ll * y + 1) * mask.height / (2ll * height));
    std::int32_t* row = out.data() + static_cast<std::size_t>(y) * width;
    if (mask.bit_depth == 16) {
      const std::uint16_t* src = mask.row16(sy);
      for (int x = 0; x < width; ++x) row[x] = src[xs[x]];
    } else {
      const std::uint8_t* src = mask.row(sy);
      for (int x = 0; x < width; ++x) row[x] = src[xs[x]];
    }
  }
}

SegmentationLoader::SegmentationLoader(SegmentationDataset dataset,
                                       SegmentationLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)), level_(default_simd_level()) {
  const auto& p = options_.preprocess;
  if (p.width <= 0 || p.height <= 0 || (p.channels != 1 && p.channels != 3) ||
      options_.batch_size == 0) {
    throw InvalidArgument("SegmentationLoader: output " + std::to_string(p.width) + "x" +
                          std::to_string(p.height) + " with " + std::to_string(p.channels) +
                          " channels, batch size " + std::to_string(options_.batch_size) +
                          " (a positive size and batch size, 1 or 3 channels)");
  }
  if (p.dtype != OutputDtype::kFloat32) {
    throw InvalidArgument(std::string("SegmentationLoader: output dtype ") + to_string(p.dtype) +
                          " is not supported (float32 only)");
  }
  resize_width_ = p.resize_width > 0 ? p.resize_width : p.width;
  resize_height_ = p.resize_height > 0 ? p.resize_height : p.height;
  if (resize_width_ < p.width || resize_height_ < p.height) {
    throw InvalidArgument("SegmentationLoader: the resize target " + std::to_string(resize_width_) +
                          "x" + std::to_string(resize_height_) + " is smaller than the output " +
                          std::to_string(p.width) + "x" + std::to_string(p.height));
  }
  if (dataset_.size() == 0) throw InvalidArgument("SegmentationLoader: the dataset is empty");
}

std::size_t SegmentationLoader::batches_per_epoch() const noexcept {
  const std::size_t n = dataset_.size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::array<std::size_t, 4> SegmentationLoader::image_shape() const noexcept {
  const auto& p = options_.preprocess;
  return {options_.batch_size, static_cast<std::size_t>(p.channels),
          static_cast<std::size_t>(p.height), static_cast<std::size_t>(p.width)};
}

std::array<std::size_t, 3> SegmentationLoader::label_shape() const noexcept {
  const auto& p = options_.preprocess;
  return {options_.batch_size, static_cast<std::size_t>(p.height),
          static_cast<std::size_t>(p.width)};
}

std::size_t SegmentationLoader::fill_batch(std::uint64_t epoch, std::uint64_t batch_index,
                                           std::span<float> images,
                                           std::span<std::int32_t> labels) {
  const auto is = image_shape();
  const auto ls = label_shape();
  const std::size_t image_values = is[1] * is[2] * is[3], label_values = ls[1] * ls[2];
  if (batch_index >= batches_per_epoch() || images.size() < is[0] * image_values ||
      labels.size() < ls[0] * label_values) {
    throw InvalidArgument("SegmentationLoader::fill_batch: batch " + std::to_string(batch_index) +
                          " of " + std::to_string(batches_per_epoch()) + ", buffers of " +
                          std::to_string(images.size()) + " and " + std::to_string(labels.size()) +
                          " values (need " + std::to_string(is[0] * image_values) + " and " +
                          std::to_string(ls[0] * label_values) + ")");
  }
  std::vector<std::size_t> order(dataset_.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (options_.shuffle)
    data_detail::Rng(data_detail::hash_seed(options_.seed, epoch, 0x5E65A1))
        .shuffle(order.begin(), order.end());
  const std::size_t first = batch_index * options_.batch_size;
  const std::size_t count = std::min(options_.batch_size, order.size() - first);
  parallel_for(0, count, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      load(order[first + i], epoch, images.data() + i * image_values,
           labels.data() + i * label_values);
  });
  return count;
}

void SegmentationLoader::load(std::size_t index, std::uint64_t epoch, float* image_out,
                              std::int32_t* labels_out) const {
  const auto& p = options_.preprocess;
  const auto& s = dataset_.sample(index);
  const int rw = resize_width_, rh = resize_height_, c = p.channels;
  // Per-thread decoder, resampler and buffers, reused from sample to sample.
  struct Worker {
    Decoder decoder;
    std::optional<Resampler> resampler;
    Image decoded, staged, mask, out;
    std::vector<std::int32_t> map;
  };
  thread_local Worker w;
  if (!w.resampler || w.resampler->level() != level_) w.resampler.emplace(level_);
  Decoder& decoder = w.decoder;
  Resampler& resampler = *w.resampler;
  Image &decoded = w.decoded, &staged = w.staged;
  DecodeOptions d = p.dct_scaling ? DecodeOptions{c, rw, rh} : DecodeOptions{c, 0, 0};
  d.max_pixels = 0;  // checked at load
  decoder.decode_file(s.image, d, decoded);
  staged.reshape(rw, rh, c);
  resampler.resize(decoded.view(), staged.mutable_view(), p.filter);

  // The label map at the resize target.
  std::vector<std::int32_t>& map = w.map;
  map.assign(static_cast<std::size_t>(rw) * rh, 0);
  if (!s.mask.empty()) {
    Image& mask = w.mask;
    DecodeOptions md;
    md.max_pixels = 0;
    md.keep_16_bit = true;
    decoder.decode_file(s.mask, md, mask);
    if (mask.channels() != 1)
      throw DecodeError("mask '" + s.mask +
                        "' has colour channels (changed since the dataset "
                        "was loaded?)");
    resize_labels_nearest(mask.view(), rw, rh, map);
    const auto classes = static_cast<std::int32_t>(dataset_.class_names().size());
    for (auto& v : map) {
      if (s.mask_class >= 0) v = v == 255 ? s.mask_class : 0;
      if (v >= classes && v != dataset_.ignore_label())
        throw InvalidArgument("mask '" + s.mask + "': value " + std::to_string(v) +
                              " is not a class index (" + std::to_string(classes) +
                              " classes) nor the ignore label (changed since the dataset was "
                              "loaded?)");
    }
  }

  // The crop window (the Loader's draws, in its order) and the flips.
  const auto& aug = options_.augment;
  ImageView window = center_crop(staged.view(), p.width, p.height);
  bool hflip = false, vflip = false;
  float brightness = 0.f, contrast = 1.f;
  if (aug.enabled()) {
    data_detail::Rng rng(data_detail::hash_seed(options_.seed, epoch, index ^ 0xA0A0A0A0ull));
    const std::uint64_t crop_seed = rng.next();
    hflip = rng.unit() < aug.hflip_probability;
    vflip = rng.unit() < aug.vflip_probability;
    brightness = aug.brightness * (2.f * rng.unit() - 1.f);
    contrast = 1.f + aug.contrast * (2.f * rng.unit() - 1.f);
    if (aug.random_crop) window = random_crop(staged.view(), p.width, p.height, crop_seed);
  }
  const auto offset = static_cast<std::size_t>(window.data - staged.data());
  const int x0 = static_cast<int>(offset % staged.stride()) / c;
  const int y0 = static_cast<int>(offset / staged.stride());
  Image& out = w.out;
  out.reshape(p.width, p.height, c);
  for (int y = 0; y < p.height; ++y) {
    std::memcpy(out.data() + y * out.stride(), window.row(y), out.stride());
    const std::int32_t* src = map.data() + static_cast<std::size_t>(y0 + y) * rw + x0;
    const int dy = vflip ? p.height - 1 - y : y;
    std::int32_t* dst = labels_out + static_cast<std::size_t>(dy) * p.width;
    if (hflip) {
      std::reverse_copy(src, src + p.width, dst);
    } else {
      std::copy(src, src + p.width, dst);
    }
  }
  if (hflip) flip_horizontal(out.mutable_view());
  if (vflip) flip_vertical(out.mutable_view());
  if (aug.brightness > 0 || aug.contrast > 0)
    adjust_brightness_contrast(out.mutable_view(), brightness, contrast, level_);
  resampler.resize_normalize_chw(out.view(), p.width, p.height, p.filter, p.normalization,
                                 OutputDtype::kFloat32, image_out);
}

}  // namespace stoke
