// Label maps: arg-max of the U-Net's logits, back to the image's size,
// areas, 8-connected regions, and the pixel confusion matrix and IoU that
// stoke eval and the trainer's validation report.
#include <algorithm>
#include <cmath>

#include "deploy/segmentation.hpp"
#include "stoke/error.hpp"

namespace stoke {

void argmax_labels(std::span<const float> logits, std::size_t count, int classes, int height,
                   int width, std::span<std::uint8_t> labels) {
  const std::size_t plane = static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  if (classes < 1 || classes > 256 || logits.size() != count * classes * plane ||
      labels.size() != count * plane) {
    throw InvalidArgument("argmax_labels: " + std::to_string(logits.size()) + " logits and " +
                          std::to_string(labels.size()) + " labels for " + std::to_string(count) +
                          " x " + std::to_string(classes) + " x " + std::to_string(height) + " x " +
                          std::to_string(width));
  }
  for (std::size_t n = 0; n < count; ++n) {
    const float* l = logits.data() + n * classes * plane;
    std::uint8_t* out = labels.data() + n * plane;
    for (std::size_t i = 0; i < plane; ++i) {
      int best = 0;
      float top = l[i];
      for (int c = 1; c < classes; ++c) {
        const float v = l[static_cast<std::size_t>(c) * plane + i];
        if (v > top) top = v, best = c;
      }
      out[i] = static_cast<std::uint8_t>(best);
    }
  }
}

std::vector<SegmentRegion> connected_regions(std::span<const std::uint8_t> labels, int width,
                                             int height,
                                             const std::vector<std::string>& class_names,
                                             int ignore_label) {
  if (width < 0 || height < 0 ||
      labels.size() != static_cast<std::size_t>(width) * static_cast<std::size_t>(height)) {
    throw InvalidArgument("connected_regions: " + std::to_string(labels.size()) + " labels for a " +
                          std::to_string(width) + "x" + std::to_string(height) + " map");
  }
  std::vector<SegmentRegion> out;
  std::vector<std::uint8_t> seen(labels.size(), 0);
  std::vector<std::size_t> stack;
  for (std::size_t start = 0; start < labels.size(); ++start) {
    const int label = labels[start];
    if (seen[start] || label == 0 || label == ignore_label) continue;
    if (static_cast<std::size_t>(label) >= class_names.size()) {
      throw InvalidArgument("connected_regions: label " + std::to_string(label) + " at (" +
                            std::to_string(start % width) + ", " + std::to_string(start / width) +
                            ") has no class name (" + std::to_string(class_names.size()) +
                            " classes)");
    }
    SegmentRegion r;
    r.label = label;
    r.class_name = class_names[static_cast<std::size_t>(label)];
    int x0 = width, y0 = height, x1 = -1, y1 = -1;
    seen[start] = 1;
    stack.assign(1, start);
    while (!stack.empty()) {
      const std::size_t i = stack.back();
      stack.pop_back();
      const int x = static_cast<int>(i % width), y = static_cast<int>(i / width);
      ++r.area;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          const int nx = x + dx, ny = y + dy;
          if (nx < 0 || ny < 0 || nx >= width || ny >= height) continue;
          const std::size_t j = static_cast<std::size_t>(ny) * width + nx;
          if (!seen[j] && labels[j] == label) {
            seen[j] = 1;
            stack.push_back(j);
          }
        }
      }
    }
    r.x = x0, r.y = y0, r.w = x1 - x0 + 1, r.h = y1 - y0 + 1;
    out.push_back(std::move(r));
  }
  return out;
}

void add_confusion(std::span<const std::int32_t> truth, std::span<const std::uint8_t> predicted,
                   int classes, std::int32_t ignore_label, std::vector<std::uint64_t>& confusion) {
  const auto k = static_cast<std::size_t>(classes);
  if (truth.size() != predicted.size() || classes < 1)
    throw InvalidArgument("add_confusion: " + std::to_string(truth.size()) + " true and " +
                          std::to_string(predicted.size()) + " predicted labels");
  confusion.resize(k * k, 0);
  for (std::size_t i = 0; i < truth.size(); ++i) {
    const std::int32_t t = truth[i];
    if (t == ignore_label) continue;
    if (t < 0 || t >= classes || predicted[i] >= classes) {
      throw InvalidArgument("add_confusion: pixel " + std::to_string(i) + ": label " +
                            std::to_string(t) + " / predicted " + std::to_string(predicted[i]) +
                            " is not a class index (" + std::to_string(classes) + " classes)");
    }
    ++confusion[static_cast<std::size_t>(t) * k + predicted[i]];
  }
}

std::vector<double> class_iou(const std::vector<std::uint64_t>& confusion, int classes) {
  const auto k = static_cast<std::size_t>(classes);
  if (confusion.size() != k * k)
    throw InvalidArgument("class_iou: " + std::to_string(confusion.size()) + " counts for " +
                          std::to_string(classes) + " classes");
  std::vector<double> iou(k);
  for (std::size_t c = 0; c < k; ++c) {
    std::uint64_t row = 0, col = 0;
    for (std::size_t j = 0; j < k; ++j) row += confusion[c * k + j], col += confusion[j * k + c];
    const std::uint64_t tp = confusion[c * k + c];
    const std::uint64_t uni = row + col - tp;
    iou[c] = uni ? static_cast<double>(tp) / static_cast<double>(uni) : NAN;
  }
  return iou;
}

double mean_iou(const std::vector<double>& iou) {
  double sum = 0;
  std::size_t n = 0;
  for (double v : iou)
    if (!std::isnan(v)) sum += v, ++n;
  return n ? sum / static_cast<double>(n) : NAN;
}

namespace deploy_detail {

SegmentationResult segment_input(LoadedSegmentation& loaded, std::span<const float> input,
                                 int image_width, int image_height) {
  const nn::ModelSpec& spec = loaded.model->spec();
  const std::vector<float> logits = segmentation_logits(*loaded.model, input, 1);
  std::vector<std::uint8_t> small(static_cast<std::size_t>(spec.width) * spec.height);
  argmax_labels(logits, 1, spec.classes, spec.height, spec.width, small);
  ImageView view{small.data(), spec.width, spec.height, 1, static_cast<std::size_t>(spec.width)};
  std::vector<std::int32_t> full(static_cast<std::size_t>(image_width) * image_height);
  resize_labels_nearest(view, image_width, image_height, full);
  return segmentation_result(loaded, std::vector<std::uint8_t>(full.begin(), full.end()),
                             image_width, image_height);
}

SegmentationResult segmentation_result(const LoadedSegmentation& loaded,
                                       std::vector<std::uint8_t> labels, int width, int height) {
  SegmentationResult r;
  r.width = width;
  r.height = height;
  r.labels = std::move(labels);
  r.areas.assign(static_cast<std::size_t>(loaded.model->spec().classes), 0);
  for (const std::uint8_t label : r.labels) ++r.areas[label];
  r.regions =
      connected_regions(r.labels, width, height, loaded.info.class_names, loaded.ignore_label);
  return r;
}

SegmentationRunner::SegmentationRunner(LoadedSegmentation loaded, std::uint64_t max_pixels,
                                       int tile_stride)
    : loaded_(std::move(loaded)),
      pre_(loaded_.info, default_simd_level(), max_pixels),
      tiles_(tile_stride > 0 ? segmentation_tile_reader(loaded_, tile_stride, max_pixels)
                             : nullptr),
      input_(pre_.sample_size()) {
  if (tile_stride < 0)
    throw InvalidArgument("segment_tile_stride " + std::to_string(tile_stride) +
                          ": 0 (whole images) or a stride from 1 to the tile size");
}

SegmentationResult SegmentationRunner::file(const std::filesystem::path& path) {
  std::lock_guard lock(mutex_);
  if (tiles_) {
    const data_detail::TileGrid grid = tiles_->read(path, input_);
    return segment_tiles(loaded_, grid, input_);
  }
  pre_.from_file(path, input_);
  return segment_input(loaded_, input_, pre_.source_width(), pre_.source_height());
}

SegmentationResult SegmentationRunner::bytes(std::span<const std::uint8_t> bytes,
                                             std::string_view name) {
  std::lock_guard lock(mutex_);
  if (tiles_) {
    const data_detail::TileGrid grid = tiles_->read_bytes(bytes, name, input_);
    return segment_tiles(loaded_, grid, input_);
  }
  pre_.from_bytes(bytes, name, input_);
  return segment_input(loaded_, input_, pre_.source_width(), pre_.source_height());
}

SegmentationResult SegmentationRunner::pixels(const PixelBuffer& pixels) {
  std::lock_guard lock(mutex_);
  if (tiles_) {
    Image scratch;
    const data_detail::TileGrid grid =
        tiles_->read_view(pixel_view(pixels, scratch), "<pixels>", input_);
    return segment_tiles(loaded_, grid, input_);
  }
  pre_.from_pixels(pixels, input_);
  return segment_input(loaded_, input_, pre_.source_width(), pre_.source_height());
}

}  // namespace deploy_detail
}  // namespace stoke
