// Convolution through oneDNN, one OpenMP thread per primitive, split over the
// backend's chunks (see conv2d_dnnl.hpp): the forward and the workspace size
// here, the backward in conv2d_dnnl_backward.cpp, the primitive cache in
// conv2d_dnnl_primitive.cpp. Tensors stay in stoke's NCHW/OIHW layout: oneDNN
// reads and writes them in place, with its scratchpad taken from the backend
// workspace, so a call allocates no tensor memory.
#include "backend/cpu/conv2d_dnnl.hpp"

#include <algorithm>
#include <cstring>

#include "stoke/error.hpp"

#if STOKE_HAVE_DNNL
#include "backend/cpu/conv2d_dnnl_primitive.hpp"
#endif

namespace stoke::cpu::dnnl_conv {

#if !STOKE_HAVE_DNNL

bool enabled() noexcept {
  return false;
}
std::size_t workspace_bytes(const CpuBackend&, const Shape&, const Shape&, const Conv2dParams&) {
  return 0;
}
std::string batch_kernels(const Shape&, const Shape&, const Conv2dParams&, bool) {
  return {};
}
void forward(CpuBackend&, const Tensor&, const Tensor&, const Tensor&, Tensor&, const Conv2dParams&,
             const Epilogue&) {
  throw Error(ErrorCode::kInternal, "conv2d: stoke was built without oneDNN");
}
void backward(CpuBackend&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&,
              const Conv2dParams&) {
  throw Error(ErrorCode::kInternal, "conv2d: stoke was built without oneDNN");
}

#else

namespace {

// Forward of one image split into bands of output rows (every arena thread
// on one image, no work done twice); a batch splits over images.
struct Band {
  int p0, p1;       // output rows
  int row0, rows;   // input rows read
  Problem problem;  // the band as a convolution of its own (n = 1)
};

Band band(const Problem& g, std::size_t b, std::size_t e) {
  Band bd{};
  bd.p0 = static_cast<int>(b);
  bd.p1 = static_cast<int>(e);
  const int lo = bd.p0 * g.sh - g.ph, hi = (bd.p1 - 1) * g.sh - g.ph + (g.r - 1) * g.dh + 1;
  bd.row0 = std::max(lo, 0);
  bd.rows = std::min(hi, g.h) - bd.row0;
  bd.problem = g;
  bd.problem.n = 1;
  bd.problem.h = bd.rows;
  bd.problem.ph = bd.row0 - lo;
  bd.problem.ph_bottom = hi - std::min(hi, g.h);
  return bd;
}

struct ForwardPlan {
  bool bands;
  int count;
  std::size_t scratch;  // floats per chunk, then the band's x and y copies
  std::size_t x_band, y_band;
  std::size_t per_chunk() const { return scratch + x_band + y_band; }
};

ForwardPlan forward_plan(const Problem& g) {
  ForwardPlan fp{};
  fp.bands = g.n == 1 && g.p() > 1 && !g.bf16;  // bf16: layout primitives only
  if (!fp.bands) {
    fp.count = parts(g.n);
    fp.scratch = most_layout(g, kForward, g.n, fp.count);
    return fp;
  }
  fp.count = parts(g.p());
  for (int j = 0; j < fp.count; ++j) {
    const std::size_t b = static_cast<std::size_t>(j) * g.p() / fp.count;
    const std::size_t e = static_cast<std::size_t>(j + 1) * g.p() / fp.count;
    const Band bd = band(g, b, e);
    fp.scratch = std::max(fp.scratch, primitive(bd.problem).scratch_floats);
    fp.x_band = std::max(fp.x_band, align16(static_cast<std::size_t>(g.c) * bd.rows * g.w));
    fp.y_band = std::max(fp.y_band, align16(static_cast<std::size_t>(g.k) * (e - b) * g.q()));
  }
  return fp;
}

}  // namespace

bool enabled() noexcept {
  return true;
}

std::size_t workspace_bytes(const CpuBackend& be, const Shape& x, const Shape& w,
                            const Conv2dParams& prm) {
  const Problem g = problem(be, x, w, prm);
  const ForwardPlan fp = forward_plan(g);
  return std::max(fp.per_chunk() * fp.count, backward_workspace_floats(g, true)) * sizeof(float);
}

std::string batch_kernels(const Shape& x, const Shape& w, const Conv2dParams& prm, bool bf16) {
  Problem g = problem(x, w, prm);
  g.bf16 = bf16;
  const std::size_t first = part_sizes(g.n, parts(g.n))[0];
  std::string out;
  for (int kind : {kForward, kBackwardData, kBackwardWeights}) {
    if (!out.empty()) out += "; ";
    out += layout_primitive(sub(g, kind, SplitOver::kImages, 0, first)).implementation;
  }
  return out;
}

namespace {

// The output pass: channel planes of `rows` x `width` from `from` (plane
// height from_height) to `to` (to_height), adding the channel's bias and the
// residual (laid out like `to`) and clamping at 0 as asked. In place when
// from == to. oneDNN 2.6's NCHW gemm convolution applies bias and post-ops
// element by element, several times slower than this vectorized loop.
struct Output {
  const float* bias;
  const float* residual;
  bool relu;
};

void output_pass(const float* from, std::size_t from_height, float* to, std::size_t to_height,
                 int channels, std::size_t rows, std::size_t width, const Output& out) {
  const std::size_t n = rows * width;
  for (int c = 0; c < channels; ++c) {
    const float* src = from + c * from_height * width;
    float* dst = to + c * to_height * width;
    const float* res = out.residual ? out.residual + c * to_height * width : nullptr;
    const float bias = out.bias ? out.bias[c] : 0.0f;
    if (res && out.relu) {
      for (std::size_t i = 0; i < n; ++i) dst[i] = std::max(src[i] + bias + res[i], 0.0f);
    } else if (res) {
      for (std::size_t i = 0; i < n; ++i) dst[i] = src[i] + bias + res[i];
    } else if (out.relu) {
      for (std::size_t i = 0; i < n; ++i) dst[i] = std::max(src[i] + bias, 0.0f);
    } else if (out.bias || src != dst) {
      for (std::size_t i = 0; i < n; ++i) dst[i] = src[i] + bias;
    }
  }
}

void forward_band(const Problem& g, const ForwardPlan& fp, float* scratch, std::size_t b,
                  std::size_t e, const float* xp, const float* wp, float* yp, const Output& out) {
  const Band bd = band(g, b, e);
  const Descs d = descs(bd.problem);
  const std::size_t q = static_cast<std::size_t>(g.q()), rows_out = e - b;
  float* x_band = scratch + fp.scratch;
  float* y_band = x_band + fp.x_band;
  const std::size_t w = static_cast<std::size_t>(g.w), rows_in = static_cast<std::size_t>(bd.rows);
  const float* x_rows = xp + static_cast<std::size_t>(bd.row0) * w;
  for (int c = 0; c < g.c; ++c) {
    std::memcpy(x_band + c * rows_in * w, x_rows + c * static_cast<std::size_t>(g.h) * w,
                rows_in * w * sizeof(float));
  }
  Args args{{DNNL_ARG_SRC, wrap(d.src, x_band)},
            {DNNL_ARG_WEIGHTS, wrap(d.weights, wp)},
            {DNNL_ARG_DST, wrap(d.dst, y_band)}};
  run(primitive(bd.problem), args, scratch);
  Output band_out = out;
  if (out.residual) band_out.residual = out.residual + b * q;
  output_pass(y_band, rows_out, yp + b * q, static_cast<std::size_t>(g.p()), g.k, rows_out, q,
              band_out);
}

}  // namespace

void forward(CpuBackend& be, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
             const Conv2dParams& prm, const Epilogue& epilogue) {
  const Problem g = problem(be, x.shape(), w.shape(), prm);  // bias and epilogue: output_pass
  const ForwardPlan fp = forward_plan(g);
  float* ws = be.workspace(std::max<std::size_t>(1, fp.per_chunk() * fp.count));
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const Output out{bias.defined() ? bias.data<float>() : nullptr, epilogue.residual, epilogue.relu};
  float* yp = y.data<float>();
  const std::size_t x_image = static_cast<std::size_t>(g.c) * g.h * g.w;
  const std::size_t pq = static_cast<std::size_t>(g.p()) * g.q(), y_image = g.k * pq;
  // Weights every part takes in one blocked layout: reordered once, into part
  // 0's staging slot, and read there by every part.
  const SharedStaging sw =
      fp.bands ? SharedStaging{} : shared_staging(g, kForward, DNNL_ARG_WEIGHTS, g.n, fp.count);
  memory w_staged;
  if (sw.staged) w_staged = stage_input(*sw.staged, wrap(descs(g).weights, wp), ws + sw.offset);
  for_chunks(be, static_cast<std::size_t>(fp.bands ? g.p() : g.n), fp.count,
             [&](int chunk, std::size_t b, std::size_t e) {
               float* scratch = ws + fp.per_chunk() * static_cast<std::size_t>(chunk);
               if (fp.bands) {
                 forward_band(g, fp, scratch, b, e, xp, wp, yp, out);
                 return;
               }
               const Problem pb = sub(g, kForward, SplitOver::kImages, b, e);
               const Descs d = descs(pb);
               Args args{{DNNL_ARG_SRC, wrap(d.src, xp + b * x_image)},
                         {DNNL_ARG_WEIGHTS, sw.staged ? w_staged : wrap(d.weights, wp)},
                         {DNNL_ARG_DST, wrap(d.dst, yp + b * y_image)}};
               run(layout_primitive(pb), args, scratch, "conv2d",
                   {sw.staged ? DNNL_ARG_WEIGHTS : kNoArg});
               for (std::size_t n = b; n < e; ++n) {
                 Output image_out = out;
                 if (out.residual) image_out.residual = out.residual + n * y_image;
                 output_pass(yp + n * y_image, 1, yp + n * y_image, 1, g.k, 1, pq,
                             image_out);  // planes of pq
               }
             });
}

#endif  // STOKE_HAVE_DNNL

}  // namespace stoke::cpu::dnnl_conv
