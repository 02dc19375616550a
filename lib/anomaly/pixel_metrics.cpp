// Pixel-level metrics against ground-truth masks (stoke/anomaly.hpp): masks
// brought to the model's input grid, pixel AUROC and AUPRO.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "stoke/anomaly.hpp"
#include "stoke/error.hpp"

namespace stoke::anomaly {

namespace {

// Labels the 8-connected regions of `mask` (height x width, non-zero =
// defect) from `next`; returns the next free label. labels: -1 off-mask.
std::int64_t label_regions(const std::uint8_t* mask, int height, int width, std::int64_t next,
                           std::int32_t* labels, std::vector<std::int64_t>& sizes) {
  const auto at = [width](int y, int x) {
    return static_cast<std::size_t>(y) * static_cast<std::size_t>(width) +
           static_cast<std::size_t>(x);
  };
  std::fill(labels, labels + static_cast<std::size_t>(height) * static_cast<std::size_t>(width),
            -1);
  std::vector<std::pair<int, int>> stack;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      if (!mask[at(y, x)] || labels[at(y, x)] >= 0) continue;
      const auto id = static_cast<std::int32_t>(next++);
      std::int64_t size = 0;
      stack.assign(1, {y, x});
      labels[at(y, x)] = id;
      while (!stack.empty()) {
        const auto [cy, cx] = stack.back();
        stack.pop_back();
        ++size;
        for (int dy = -1; dy <= 1; ++dy) {
          for (int dx = -1; dx <= 1; ++dx) {
            const int ny = cy + dy, nx = cx + dx;
            if (ny < 0 || nx < 0 || ny >= height || nx >= width) continue;
            if (!mask[at(ny, nx)] || labels[at(ny, nx)] >= 0) continue;
            labels[at(ny, nx)] = id;
            stack.push_back({ny, nx});
          }
        }
      }
      sizes.push_back(size);
    }
  }
  return next;
}

}  // namespace

std::vector<std::uint8_t> mask_to_input(ImageView mask, int image_width, int image_height,
                                        const PreprocessOptions& p, std::string_view name) {
  if (mask.width != image_width || mask.height != image_height) {
    throw InvalidArgument("anomaly: the mask '" + std::string(name) + "' is " +
                          std::to_string(mask.width) + "x" + std::to_string(mask.height) +
                          ", its image " + std::to_string(image_width) + "x" +
                          std::to_string(image_height));
  }
  const int rw = p.resize_width ? p.resize_width : p.width;
  const int rh = p.resize_height ? p.resize_height : p.height;
  const int ox = (rw - p.width) / 2, oy = (rh - p.height) / 2;  // center_crop's offsets
  std::vector<std::uint8_t> out(static_cast<std::size_t>(p.width) *
                                static_cast<std::size_t>(p.height));
  const int bytes = mask.bit_depth > 8 ? 2 : 1;
  for (int y = 0; y < p.height; ++y) {
    const auto sy = std::min<std::int64_t>(
        image_height - 1, (2 * std::int64_t{y + oy} + 1) * image_height / (2 * std::int64_t{rh}));
    const std::uint8_t* row = mask.data + static_cast<std::size_t>(sy) * mask.stride;
    for (int x = 0; x < p.width; ++x) {
      const auto sx = std::min<std::int64_t>(
          image_width - 1, (2 * std::int64_t{x + ox} + 1) * image_width / (2 * std::int64_t{rw}));
      const std::uint8_t* px = row + static_cast<std::size_t>(sx) * mask.channels * bytes;
      bool on = false;
      for (int k = 0; k < mask.channels * bytes; ++k) on = on || px[k] != 0;
      out[static_cast<std::size_t>(y) * static_cast<std::size_t>(p.width) +
          static_cast<std::size_t>(x)] = on ? 1 : 0;
    }
  }
  return out;
}

PixelMetrics pixel_metrics(std::span<const float> maps, std::span<const std::uint8_t> masks,
                           int height, int width, double max_fpr) {
  const std::size_t plane =
      static_cast<std::size_t>(std::max(height, 0)) * static_cast<std::size_t>(std::max(width, 0));
  if (plane == 0 || maps.size() != masks.size() || maps.size() % plane != 0) {
    throw InvalidArgument("anomaly: pixel metrics need maps and masks of count x " +
                          std::to_string(height) + " x " + std::to_string(width) + " (got " +
                          std::to_string(maps.size()) + " and " + std::to_string(masks.size()) +
                          " values)");
  }
  const std::vector<MapSize> sizes(maps.size() / plane, MapSize{height, width});
  return pixel_metrics(maps, masks, sizes, max_fpr);
}

PixelMetrics pixel_metrics(std::span<const float> maps, std::span<const std::uint8_t> masks,
                           std::span<const MapSize> sizes, double max_fpr) {
  std::size_t total = 0;
  for (const MapSize& s : sizes) {
    if (s.height <= 0 || s.width <= 0) throw InvalidArgument("anomaly: a map of no pixels");
    total += static_cast<std::size_t>(s.height) * static_cast<std::size_t>(s.width);
  }
  if (maps.size() != total || masks.size() != total) {
    throw InvalidArgument("anomaly: pixel metrics of " + std::to_string(sizes.size()) +
                          " maps need " + std::to_string(total) + " values, got " +
                          std::to_string(maps.size()) + " and " + std::to_string(masks.size()));
  }
  if (!(max_fpr > 0.0 && max_fpr <= 1.0))
    throw InvalidArgument("anomaly: AUPRO's FPR limit must be in (0, 1]");
  PixelMetrics m;
  m.pixels = maps.size();
  std::vector<float> good, defect;
  for (std::size_t i = 0; i < maps.size(); ++i) {
    if (!std::isfinite(maps[i]))
      throw InvalidArgument("anomaly: an anomaly map value is not finite");
    (masks[i] ? defect : good).push_back(maps[i]);
  }
  m.defect_pixels = defect.size();
  if (good.empty() || defect.empty()) {
    throw InvalidArgument("anomaly: pixel metrics need defect and good pixels (" +
                          std::to_string(defect.size()) + " defect, " +
                          std::to_string(good.size()) + " good)");
  }
  m.auroc = image_auroc(good, defect);
  good.clear();
  good.shrink_to_fit();
  defect.clear();
  defect.shrink_to_fit();

  // PRO: the mean over ground-truth regions of the share of the region's
  // pixels above the threshold, against the false-positive rate over every
  // good pixel; the exact curve, swept once over the pixels by falling score.
  std::vector<std::int32_t> region(maps.size());
  std::vector<std::int64_t> regions;  // pixels per region
  std::int64_t next = 0;
  std::size_t at = 0;
  for (const MapSize& s : sizes) {
    next = label_regions(masks.data() + at, s.height, s.width, next, region.data() + at, regions);
    at += static_cast<std::size_t>(s.height) * static_cast<std::size_t>(s.width);
  }
  m.regions = static_cast<std::uint64_t>(next);
  std::vector<std::uint32_t> order(maps.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return maps[a] > maps[b] || (maps[a] == maps[b] && a < b);
  });
  const double negatives = static_cast<double>(m.pixels - m.defect_pixels);
  const double region_count = static_cast<double>(m.regions);
  double fp = 0, pro = 0, last_fpr = 0, last_pro = 0, area = 0;
  for (std::size_t i = 0; i < order.size();) {
    const float score = maps[order[i]];
    for (; i < order.size() && maps[order[i]] == score; ++i) {
      const std::int32_t r = region[order[i]];
      if (r < 0)
        fp += 1;
      else
        pro += 1.0 / (static_cast<double>(regions[static_cast<std::size_t>(r)]) * region_count);
    }
    const double fpr = fp / negatives;
    if (fpr >= max_fpr) {  // the segment up to the limit, interpolated
      const double t = fpr > last_fpr ? (max_fpr - last_fpr) / (fpr - last_fpr) : 0.0;
      area += (max_fpr - last_fpr) * (last_pro + 0.5 * t * (pro - last_pro));
      last_fpr = max_fpr;
      break;
    }
    area += (fpr - last_fpr) * 0.5 * (pro + last_pro);
    last_fpr = fpr;
    last_pro = pro;
  }
  m.aupro = area / max_fpr;
  return m;
}

}  // namespace stoke::anomaly
