// Convolution: through oneDNN where stoke is built with it (conv2d_dnnl.cpp,
// the default, chosen by measurement); otherwise as below.
// Convolution as im2col + sgemm per chunk of the batch. Small feature maps
// put several images side by side in one column matrix (rows x B*cols), so
// each sgemm has at least ~kMinGemmCols columns: OpenBLAS is far from peak on
// the 7x7 = 49-column products of the last ResNet stage otherwise.
// Each chunk owns a slice of the backend workspace (its column buffer, a
// staging matrix for y or dy, and backward its partial weight/bias
// gradients), so chunks never share writes and the partials are reduced in
// chunk order (deterministic).
#include <algorithm>
#include <cstring>

#include "backend/cpu/blas.hpp"
#include "backend/cpu/conv2d_blocked.hpp"
#include "backend/cpu/conv2d_dnnl.hpp"
#include "backend/cpu/conv2d_gemm.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

namespace {

struct Geometry {
  int n, c, h, w, k, r, s, p, q, groups, cg, kg;
  int rows() const { return cg * r * s; }  // im2col rows per group
  int cols() const { return p * q; }
  bool direct = false;  // 1x1, stride 1, no padding: x is its own column matrix
};

Geometry geometry(const Shape& x, const Shape& w, const Conv2dParams& prm) {
  const Shape y = conv2d_output_shape(x, w, prm);
  Geometry g{};
  g.n = static_cast<int>(x[0]);
  g.c = static_cast<int>(x[1]);
  g.h = static_cast<int>(x[2]);
  g.w = static_cast<int>(x[3]);
  g.k = static_cast<int>(w[0]);
  g.r = static_cast<int>(w[2]);
  g.s = static_cast<int>(w[3]);
  g.p = static_cast<int>(y[2]);
  g.q = static_cast<int>(y[3]);
  g.groups = prm.groups;
  g.cg = g.c / g.groups;
  g.kg = g.k / g.groups;
  g.direct = g.r == 1 && g.s == 1 && prm.stride_h == 1 && prm.stride_w == 1 && prm.pad_h == 0 &&
             prm.pad_w == 0;
  return g;
}

constexpr int kMinGemmCols = 512;

// x (cg, h, w) of one image and group -> col (rows, cols) with row stride ld.
void im2col(const float* x, float* col, std::size_t ld, const Geometry& g,
            const Conv2dParams& prm) {
  for (int c = 0; c < g.cg; ++c)
    for (int r = 0; r < g.r; ++r)
      for (int s = 0; s < g.s; ++s) {
        float* out = col + static_cast<std::size_t>((c * g.r + r) * g.s + s) * ld;
        const int ow = s * prm.dilation_w - prm.pad_w;
        // Output columns q whose input column iw = q*stride + ow lies inside [0, w).
        int q_lo = 0;
        while (q_lo < g.q && q_lo * prm.stride_w + ow < 0) ++q_lo;
        int q_hi = g.q;
        while (q_hi > q_lo && (q_hi - 1) * prm.stride_w + ow >= g.w) --q_hi;
        for (int p = 0; p < g.p; ++p, out += g.q) {
          const int ih = p * prm.stride_h - prm.pad_h + r * prm.dilation_h;
          if (ih < 0 || ih >= g.h) {
            std::fill(out, out + g.q, 0.0f);
            continue;
          }
          const float* row = x + (static_cast<std::size_t>(c) * g.h + ih) * g.w;
          std::fill(out, out + q_lo, 0.0f);
          if (prm.stride_w == 1) {
            std::memcpy(out + q_lo, row + q_lo + ow,
                        sizeof(float) * static_cast<std::size_t>(q_hi - q_lo));
          } else {
            for (int q = q_lo; q < q_hi; ++q) out[q] = row[q * prm.stride_w + ow];
          }
          std::fill(out + q_hi, out + g.q, 0.0f);
        }
      }
}

// col (rows, cols) with row stride ld -> dx (cg, h, w) of one image and group, accumulating.
void col2im(const float* col, std::size_t ld, float* dx, const Geometry& g,
            const Conv2dParams& prm) {
  for (int c = 0; c < g.cg; ++c)
    for (int r = 0; r < g.r; ++r)
      for (int s = 0; s < g.s; ++s) {
        const float* in = col + static_cast<std::size_t>((c * g.r + r) * g.s + s) * ld;
        const int ow = s * prm.dilation_w - prm.pad_w;
        // The same clipping as im2col, so the inner loop has no bounds checks
        // (and vectorizes for stride 1).
        int q_lo = 0;
        while (q_lo < g.q && q_lo * prm.stride_w + ow < 0) ++q_lo;
        int q_hi = g.q;
        while (q_hi > q_lo && (q_hi - 1) * prm.stride_w + ow >= g.w) --q_hi;
        for (int p = 0; p < g.p; ++p, in += g.q) {
          const int ih = p * prm.stride_h - prm.pad_h + r * prm.dilation_h;
          if (ih < 0 || ih >= g.h) continue;
          float* row = dx + (static_cast<std::size_t>(c) * g.h + ih) * g.w;
          if (prm.stride_w == 1) {
            for (int q = q_lo; q < q_hi; ++q) row[q + ow] += in[q];
          } else {
            for (int q = q_lo; q < q_hi; ++q) row[q * prm.stride_w + ow] += in[q];
          }
        }
      }
}

// Images per column matrix: enough for ~kMinGemmCols columns, at most a chunk.
// The direct (1x1) path uses x in place and keeps one image per product.
int images_per_gemm(const Geometry& g, int chunk_images) {
  if (g.direct) return 1;
  const int want = (kMinGemmCols + g.cols() - 1) / g.cols();
  return std::max(1, std::min(want, chunk_images));
}

int max_chunk_images(const Geometry& g, int chunk_count) {
  return (g.n + chunk_count - 1) / chunk_count;
}

struct Layout {
  int batch;               // images per column matrix
  std::size_t col, stage;  // floats: column matrix, staging matrix (kg x batch*cols)
  std::size_t forward() const { return col + stage; }
};

Layout layout(const Geometry& g, int chunk_count) {
  Layout l{};
  l.batch = images_per_gemm(g, max_chunk_images(g, chunk_count));
  const std::size_t wide = static_cast<std::size_t>(l.batch) * g.cols();
  l.col = g.direct ? 0 : static_cast<std::size_t>(g.rows()) * wide;
  l.stage = l.batch > 1 ? static_cast<std::size_t>(g.kg) * wide : 0;
  return l;
}

std::size_t backward_floats_per_chunk(const Geometry& g, const Layout& l) {
  return l.forward() + static_cast<std::size_t>(g.k) * g.rows() + g.k;
}

// A fixed number of chunks, not one per thread: the backward pass sums its
// per-chunk partial weight gradients, and the images packed per product
// depend on the chunk, so a thread-count-dependent split would make the
// weights a function of the thread count. The arena runs the chunks on
// however many threads it has.
constexpr int kChunks = 8;
int chunk_count_for(const Geometry& g) {
  return std::max(1, std::min(kChunks, g.n));
}

}  // namespace

namespace gemm_conv {

std::size_t workspace_bytes(const Shape& x, const Shape& w, const Conv2dParams& params) {
  const Geometry g = geometry(x, w, params);
  const int chunk_count = chunk_count_for(g);
  const Layout l = layout(g, chunk_count);
  return static_cast<std::size_t>(chunk_count) *
         std::max(l.forward(), backward_floats_per_chunk(g, l)) * sizeof(float);
}

void forward(CpuBackend& be, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
             const Conv2dParams& prm) {
  const Geometry g = geometry(x.shape(), w.shape(), prm);
  const int chunk_count = chunk_count_for(g);
  const Layout l = layout(g, chunk_count);
  float* ws = be.workspace(std::max<std::size_t>(1, l.forward() * chunk_count));
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* bp = bias.defined() ? bias.data<float>() : nullptr;
  float* yp = y.data<float>();
  const std::size_t x_image = static_cast<std::size_t>(g.c) * g.h * g.w;
  const std::size_t x_group = static_cast<std::size_t>(g.cg) * g.h * g.w;
  const std::size_t cols = static_cast<std::size_t>(g.cols());
  for_chunks(
      be, static_cast<std::size_t>(g.n), chunk_count,
      [&](int chunk, std::size_t begin, std::size_t end) {
        float* col = ws + l.forward() * static_cast<std::size_t>(chunk);
        float* stage = col + l.col;
        for (std::size_t n0 = begin; n0 < end; n0 += static_cast<std::size_t>(l.batch)) {
          const std::size_t nb = std::min<std::size_t>(static_cast<std::size_t>(l.batch), end - n0);
          const std::size_t wide = nb * cols;
          for (int grp = 0; grp < g.groups; ++grp) {
            const std::size_t k0 = static_cast<std::size_t>(grp) * g.kg;
            const float* src = xp + n0 * x_image + grp * x_group;  // direct path: x itself
            if (!g.direct) {
              for (std::size_t b = 0; b < nb; ++b) {
                im2col(xp + (n0 + b) * x_image + grp * x_group, col + b * cols, wide, g, prm);
              }
              src = col;
            }
            float* out = nb == 1 ? yp + (n0 * g.k + k0) * cols : stage;
            sgemm(false, false, g.kg, static_cast<int>(wide), g.rows(), 1.0f, wp + k0 * g.rows(),
                  g.rows(), src, static_cast<int>(wide), 0.0f, out, static_cast<int>(wide));
            if (nb > 1) {
              for (std::size_t b = 0; b < nb; ++b)
                for (int k = 0; k < g.kg; ++k) {
                  std::memcpy(yp + ((n0 + b) * g.k + k0 + k) * cols, stage + k * wide + b * cols,
                              cols * sizeof(float));
                }
            }
          }
          if (bp) {
            for (std::size_t n = n0; n < n0 + nb; ++n)
              for (int k = 0; k < g.k; ++k) {
                float* plane = yp + (n * g.k + k) * cols;
                for (std::size_t i = 0; i < cols; ++i) plane[i] += bp[k];
              }
          }
        }
      });
}

void backward(CpuBackend& be, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
              Tensor& dw, Tensor& db, const Conv2dParams& prm) {
  const Geometry g = geometry(x.shape(), w.shape(), prm);
  const int chunk_count = chunk_count_for(g);
  const Layout l = layout(g, chunk_count);
  const std::size_t per_chunk = backward_floats_per_chunk(g, l);
  const std::size_t w_floats = static_cast<std::size_t>(g.k) * g.rows();
  float* ws = be.workspace(per_chunk * chunk_count);
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const float* dyp = dy.data<float>();
  float* dxp = dx.defined() ? dx.data<float>() : nullptr;
  const std::size_t x_image = static_cast<std::size_t>(g.c) * g.h * g.w;
  const std::size_t x_group = static_cast<std::size_t>(g.cg) * g.h * g.w;
  const std::size_t cols = static_cast<std::size_t>(g.cols());
  for_chunks(be, static_cast<std::size_t>(g.n), chunk_count,
             [&](int chunk, std::size_t begin, std::size_t end) {
               float* col = ws + per_chunk * static_cast<std::size_t>(chunk);
               float* stage = col + l.col;
               float* dw_part = col + l.forward();
               float* db_part = dw_part + w_floats;
               std::fill(dw_part, dw_part + w_floats + g.k, 0.0f);
               for (std::size_t n0 = begin; n0 < end; n0 += static_cast<std::size_t>(l.batch)) {
                 const std::size_t nb =
                     std::min<std::size_t>(static_cast<std::size_t>(l.batch), end - n0);
                 const int wide = static_cast<int>(nb * cols);
                 for (int grp = 0; grp < g.groups; ++grp) {
                   const std::size_t k0 = static_cast<std::size_t>(grp) * g.kg;
                   const float* wg = wp + k0 * g.rows();
                   const float* src = xp + n0 * x_image + grp * x_group;
                   if (!g.direct) {
                     for (std::size_t b = 0; b < nb; ++b) {
                       im2col(xp + (n0 + b) * x_image + grp * x_group, col + b * cols,
                              static_cast<std::size_t>(wide), g, prm);
                     }
                     src = col;
                   }
                   // dy of the nb images as one (kg, nb*cols) matrix.
                   const float* dyg = dyp + (n0 * g.k + k0) * cols;
                   if (nb > 1) {
                     for (std::size_t b = 0; b < nb; ++b)
                       for (int k = 0; k < g.kg; ++k) {
                         std::memcpy(stage + k * static_cast<std::size_t>(wide) + b * cols,
                                     dyp + ((n0 + b) * g.k + k0 + k) * cols, cols * sizeof(float));
                       }
                     dyg = stage;
                   }
                   // dW_g (kg, rows) += dy_g (kg, wide) . col^T (wide, rows)
                   sgemm(false, true, g.kg, g.rows(), wide, 1.0f, dyg, wide, src, wide, 1.0f,
                         dw_part + k0 * g.rows(), g.rows());
                   if (dxp) {
                     // col (rows, wide) = W_g^T (rows, kg) . dy_g (kg, wide)
                     if (g.direct) {
                       sgemm(true, false, g.rows(), wide, g.kg, 1.0f, wg, g.rows(), dyg, wide, 0.0f,
                             dxp + n0 * x_image + grp * x_group, wide);
                     } else {
                       sgemm(true, false, g.rows(), wide, g.kg, 1.0f, wg, g.rows(), dyg, wide, 0.0f,
                             col, wide);
                       for (std::size_t b = 0; b < nb; ++b) {
                         float* dxg = dxp + (n0 + b) * x_image + grp * x_group;
                         std::fill(dxg, dxg + x_group, 0.0f);
                         col2im(col + b * cols, static_cast<std::size_t>(wide), dxg, g, prm);
                       }
                     }
                   }
                 }
                 for (std::size_t n = n0; n < n0 + nb; ++n)
                   for (int k = 0; k < g.k; ++k) {
                     const float* plane = dyp + (n * g.k + k) * cols;
                     float sum = 0.0f;
                     for (std::size_t i = 0; i < cols; ++i) sum += plane[i];
                     db_part[k] += sum;
                   }
               }
             });
  // Reduce the partials in chunk order.
  float* dwp = dw.data<float>();
  float* dbp = db.defined() ? db.data<float>() : nullptr;
  for_chunks(be, w_floats + g.k, be.chunks(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      float sum = 0.0f;
      for (int c = 0; c < chunk_count; ++c) sum += ws[per_chunk * c + l.forward() + i];
      if (i < w_floats) {
        dwp[i] = sum;
      } else if (dbp) {
        dbp[i - w_floats] = sum;
      }
    }
  });
}

}  // namespace gemm_conv

// Through oneDNN where stoke is built with it, else the im2col + sgemm path above.
bool CpuBackend::dnnl_convolutions() const noexcept {
  return dnnl_conv::enabled() && !gemm_convolutions_;
}

PrecisionSupport CpuBackend::training_precision_support(Precision precision) const noexcept {
  // Training convolutions run in bf16 through oneDNN only, where it has bf16
  // kernels: natively with AVX512-BF16 or AMX, emulated on plain AVX-512.
  if (precision == Precision::kBf16 && dnnl_convolutions()) {
    return inference_precision(Precision::kBf16);
  }
  return Backend::training_precision_support(precision);
}

void CpuBackend::set_training_precision(Precision precision) {
  if (precision == Precision::kFp32 ||
      (precision == Precision::kBf16 &&
       training_precision_support(precision) != PrecisionSupport::kNone)) {
    training_precision_ = precision;
    return;
  }
  if (precision == Precision::kBf16) {
    throw Unsupported(
        std::string("cpu: training in bf16 needs oneDNN's bf16 convolutions, which need "
                    "AVX-512 (AVX512-BF16 or AMX to run natively); ") +
        (dnnl_convolutions() ? "oneDNN runs " + blocked::isa_name() + " here"
                             : std::string("this backend runs without oneDNN")) +
        "; train in fp32");
  }
  throw Unsupported(std::string("cpu: training in ") + to_string(precision) +
                    (precision == Precision::kFp16
                         ? " is not available on the CPU (CPUs have no fast fp16 arithmetic; "
                           "CUDA GPUs of compute capability 7.0 and later train in fp16); "
                           "use bf16 or fp32"
                         : " is not a training precision (resolve auto first)"));
}

std::size_t CpuBackend::conv2d_workspace_bytes(const Shape& x, const Shape& w,
                                               const Conv2dParams& params) const {
  if (dnnl_convolutions()) return dnnl_conv::workspace_bytes(*this, x, w, params);
  return gemm_conv::workspace_bytes(x, w, params);
}

void CpuBackend::do_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                                   const Conv2dParams& prm) {
  if (dnnl_convolutions()) return dnnl_conv::forward(*this, x, w, bias, y, prm, {});
  gemm_conv::forward(*this, x, w, bias, y, prm);
}

void CpuBackend::do_conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                                    Tensor& dw, Tensor& db, const Conv2dParams& prm) {
  if (dnnl_convolutions()) return dnnl_conv::backward(*this, x, w, dy, dx, dw, db, prm);
  gemm_conv::backward(*this, x, w, dy, dx, dw, db, prm);
}

}  // namespace stoke::cpu
