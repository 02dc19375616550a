// Convolution through oneDNN (Debian's libdnnl), the engine PyTorch's CPU
// convolutions use; chosen over the im2col + OpenBLAS kernels by
// bench_engine_conv_dnnl (bench/RESULTS.md, "Convolution engine"). Compiled
// when CMake finds libdnnl (STOKE_HAVE_DNNL); enabled() says whether it was.
//
// Threads: Debian builds oneDNN on OpenMP. To keep DESIGN.md's rule (one
// oneTBB arena, no pool behind its back) every oneDNN primitive is created and
// run with one OpenMP thread, inside the backend's own chunks: a batch is split
// over images, a single image into bands of output rows (forward), over output
// channels (weight gradient) or input channels (input gradient), so batch 1
// uses every arena thread. The split is a fixed number of parts (8), not one
// per thread: results are the same bits for any thread count and for kSerial.
#pragma once

#include <cstddef>
#include <string>

#include "backend/cpu/cpu_backend.hpp"

namespace stoke::cpu::dnnl_conv {

// What the forward does to its output after the convolution, in the same
// pass that adds the bias: y = relu?(conv(x) + bias + residual?). The
// residual has y's shape and does not alias y.
struct Epilogue {
  const float* residual = nullptr;
  bool relu = false;
};

bool enabled() noexcept;

// Bytes of CpuBackend workspace a forward or backward with these shapes needs.
std::size_t workspace_bytes(const CpuBackend& be, const Shape& x, const Shape& w,
                            const Conv2dParams& p);

// oneDNN's names for the kernels one part of a batch (x[0] > 1) runs: the
// forward, the input gradient and the weight gradient, "; "-separated (the
// tests and benches; "" without oneDNN); bf16: the mixed-precision ones.
std::string batch_kernels(const Shape& x, const Shape& w, const Conv2dParams& p, bool bf16 = false);

// Mixed precision: with be.training_precision() bf16, forward and backward
// stage x, w and dy as bf16 in oneDNN's layouts (always the image split, a
// single image too) and write y, dx, dw and db in fp32 (fp32 accumulation).
// The naive fp32 reference with inputs rounded to bf16 is what they match
// (tests/ops, Accuracy::kRoundedInputs).

// Shapes are checked by the caller.
void forward(CpuBackend& be, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
             const Conv2dParams& p, const Epilogue& epilogue);
void backward(CpuBackend& be, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
              Tensor& dw, Tensor& db, const Conv2dParams& p);

}  // namespace stoke::cpu::dnnl_conv
