// Convolution as im2col + sgemm (conv2d.cpp): the CPU backend's path where
// stoke is built without oneDNN (CpuBackend::dnnl_convolutions() false); the
// op suite's "cpu_gemm" backend (CpuBackend::use_gemm_convolutions) runs it
// in builds that have oneDNN too.
#pragma once

#include <cstddef>

#include "backend/cpu/cpu_backend.hpp"

namespace stoke::cpu::gemm_conv {

// Bytes of backend workspace a forward or backward with these shapes needs.
std::size_t workspace_bytes(const Shape& x, const Shape& w, const Conv2dParams& params);
// y = conv(x, w) + bias: x (N, C, H, W), w (K, C/groups, R, S), y (N, K, P, Q);
// bias (K) or undefined. Arguments validated by the front door.
void forward(CpuBackend& be, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
             const Conv2dParams& params);
// dx (undefined: skipped), dw, db (undefined: skipped) from dy (N, K, P, Q).
void backward(CpuBackend& be, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
              Tensor& dw, Tensor& db, const Conv2dParams& params);

}  // namespace stoke::cpu::gemm_conv
