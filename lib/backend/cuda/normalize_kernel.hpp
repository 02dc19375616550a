// The prefetcher's device-side normalize (kernels/normalize_u8.cu): its name
// and its parameter block as the host passes it. Plain C++: no CUDA include.
#pragma once

namespace stoke::cuda {

inline constexpr const char* kNormalizeKernelName = "stoke_u8_hwc_to_f32_chw";

// Same layout as StokeNormalizeParams in the kernel file.
struct NormalizeParams {
  float scale[4];
  float shift[4];
};

}  // namespace stoke::cuda
