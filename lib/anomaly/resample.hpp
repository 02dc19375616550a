// Internal: the host-side resampling of PatchCore's maps, each matching the
// PyTorch definition anomalib calls.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "stoke/export.hpp"

namespace stoke::anomaly_detail {

// F.interpolate(mode="bilinear", align_corners=False) of `planes` planes
// (in_h, in_w) -> (out_h, out_w).
STOKE_INTERNAL std::vector<float> resize_bilinear(std::span<const float> in, std::int64_t planes,
                                                  std::int64_t in_h, std::int64_t in_w,
                                                  std::int64_t out_h, std::int64_t out_w);

// F.interpolate(mode="nearest"): for each destination pixel of out_h x out_w
// (row-major) the index of its source in in_h x in_w, floor(dst x in / out)
// on each axis.
STOKE_INTERNAL std::vector<std::int64_t> nearest_sources(std::int64_t in_h, std::int64_t in_w,
                                                         std::int64_t out_h, std::int64_t out_w);

// F.interpolate(mode="nearest") of one plane (nearest_sources' pixels).
STOKE_INTERNAL std::vector<float> resize_nearest(std::span<const float> in, std::int64_t in_h,
                                                 std::int64_t in_w, std::int64_t out_h,
                                                 std::int64_t out_w);

// anomalib's kernel size for sigma: 2 x int(4 sigma + 0.5) + 1.
STOKE_INTERNAL int gaussian_kernel_size(float sigma) noexcept;

// anomalib's GaussianBlur2d on one plane: the normalized separable Gaussian
// of gaussian_kernel_size(sigma) taps, reflect padding (the edge sample not
// repeated), same output size. Planes smaller than the kernel's half width
// reflect repeatedly.
STOKE_INTERNAL std::vector<float> gaussian_blur(std::span<const float> in, std::int64_t h,
                                                std::int64_t w, float sigma);

}  // namespace stoke::anomaly_detail
