// Pooling through the custom kernels of kernels/pool.cu (the CPU backend's
// semantics: first maximum wins, padding counts in the average, padded
// positions skipped), and global average pooling.
#include "backend/cuda/cuda_backend.hpp"
#include "stoke/error.hpp"

namespace stoke::cuda {
namespace {

// Same layout as StokePoolGeom in kernels/pool.cu (passed by value).
struct PoolGeom {
  int h, w, p, q;
  int kh, kw, sh, sw, ph, pw;
};
static_assert(sizeof(PoolGeom) == 10 * sizeof(int), "must match StokePoolGeom in kernels/pool.cu");

PoolGeom geometry(const Shape& x, const Shape& y, const Pool2dParams& p) {
  return {static_cast<int>(x[2]),
          static_cast<int>(x[3]),
          static_cast<int>(y[2]),
          static_cast<int>(y[3]),
          p.kernel_h,
          p.kernel_w,
          p.stride_h,
          p.stride_w,
          p.pad_h,
          p.pad_w};
}

// Both forward passes: checks x (N, C, H, W) and y for pooling `op` and
// launches `kernel` (x, y, geometry, count) over y's elements.
void pool_forward(CudaBackend& backend, const char* op, const char* kernel, const Tensor& x,
                  Tensor& y, const Pool2dParams& params) {
  (void)op;
  const Shape& ys = y.shape();
  PoolGeom g = geometry(x.shape(), ys, params);
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const long long total = y.numel();
  backend.launch_n(kernel, total, {&xp, &yp, &g, &total});
}

}  // namespace

void CudaBackend::do_max_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params) {
  pool_forward(*this, "max_pool2d_forward", "stoke_max_pool_forward", x, y, params);
}

void CudaBackend::do_max_pool2d_backward(const Tensor& x, const Tensor& /*y*/, const Tensor& dy,
                                         Tensor& dx, const Pool2dParams& params) {
  const Shape& ys = dy.shape();
  // The kernel recomputes each window's first maximum from x, which is what
  // y holds; y is validated for the contract but not read.
  PoolGeom g = geometry(x.shape(), ys, params);
  const float* xp = x.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const long long total = dx.numel();
  launch_n("stoke_max_pool_backward", total, {&xp, &dyp, &dxp, &g, &total});
}

void CudaBackend::do_avg_pool2d_forward(const Tensor& x, Tensor& y, const Pool2dParams& params) {
  pool_forward(*this, "avg_pool2d_forward", "stoke_avg_pool_forward", x, y, params);
}

void CudaBackend::do_avg_pool2d_backward(const Tensor& dy, Tensor& dx, const Pool2dParams& params) {
  const Shape& ys = dy.shape();
  PoolGeom g = geometry(dx.shape(), ys, params);
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const long long total = dx.numel();
  launch_n("stoke_avg_pool_backward", total, {&dyp, &dxp, &g, &total});
}

void CudaBackend::do_global_avg_pool_forward(const Tensor& x, Tensor& y) {
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const long long planes = x.dim(0) * x.dim(1);
  const int hw = static_cast<int>(x.dim(2) * x.dim(3));
  if (planes == 0) return;
  // 8 warps per block, one warp per plane.
  const long long blocks = (planes + 7) / 8;
  launch("stoke_global_avg_pool_forward",
         dim3(static_cast<unsigned>(blocks < 65535 ? blocks : 65535)), dim3(256),
         {&xp, &yp, &planes, &hw});
}

void CudaBackend::do_global_avg_pool_backward(const Tensor& dy, Tensor& dx) {
  const float* dyp = dy.data<float>();
  float* dxp = dx.data<float>();
  const long long total = dx.numel();
  const int hw = static_cast<int>(dx.dim(2) * dx.dim(3));
  launch_n("stoke_global_avg_pool_backward", total, {&dyp, &dxp, &total, &hw});
}

}  // namespace stoke::cuda
