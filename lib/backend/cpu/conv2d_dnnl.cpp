// Convolution through oneDNN, one OpenMP thread per primitive, split over the
// backend's chunks (see conv2d_dnnl.hpp). Tensors stay in stoke's NCHW/OIHW
// layout: oneDNN reads and writes them in place, with its scratchpad taken from
// the backend workspace, so a call allocates no tensor memory.
#include "backend/cpu/conv2d_dnnl.hpp"

#include <algorithm>
#include <cstring>

#include "stoke/error.hpp"

#if STOKE_HAVE_DNNL
#include <array>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <mutex>

// libgomp, which Debian's oneDNN runs on (declared here: omp.h is not on every
// compiler's include path).
extern "C" int omp_get_max_threads(void);
extern "C" void omp_set_num_threads(int);
#endif

namespace stoke::cpu::dnnl_conv {

#if !STOKE_HAVE_DNNL

bool enabled() noexcept {
  return false;
}
std::size_t workspace_bytes(const CpuBackend&, const Shape&, const Shape&, const Conv2dParams&) {
  return 0;
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

using dnnl::memory;
using Tag = memory::format_tag;

// Scratch and slices start on 64-byte boundaries.
std::size_t align16(std::size_t floats) {
  return (floats + 15) / 16 * 16;
}

// Runs with one OpenMP thread on this thread, restoring the caller's setting.
class OneOmpThread {
 public:
  OneOmpThread() : previous_(omp_get_max_threads()) {
    if (previous_ != 1) omp_set_num_threads(1);
  }
  ~OneOmpThread() {
    if (previous_ != 1) omp_set_num_threads(previous_);
  }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int previous_;
};

enum Kind : int { kForward, kBackwardData, kBackwardWeights };

// One primitive's problem: the part of the convolution one chunk computes.
struct Problem {
  int kind = kForward;
  int n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, groups = 1;
  int sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int ph_bottom = 0;  // a band of rows pads only where it meets the image's edge
  bool bias = false;  // backward weights: also the bias gradient (forward: bias in output_pass)
  std::array<int, 17> key() const {
    return {kind, n, c, h, w, k, r, s, groups, sh, sw, ph, pw, dh, dw, ph_bottom, bias};
  }
  int p() const { return (h + ph + ph_bottom - ((r - 1) * dh + 1)) / sh + 1; }
  int q() const { return static_cast<int>(conv_output_size(w, s, sw, pw, dw)); }
};

Problem problem(const Shape& x, const Shape& w, const Conv2dParams& prm) {
  Problem pb;
  pb.n = static_cast<int>(x[0]);
  pb.c = static_cast<int>(x[1]);
  pb.h = static_cast<int>(x[2]);
  pb.w = static_cast<int>(x[3]);
  pb.k = static_cast<int>(w[0]);
  pb.r = static_cast<int>(w[2]);
  pb.s = static_cast<int>(w[3]);
  pb.groups = prm.groups;
  pb.sh = prm.stride_h;
  pb.sw = prm.stride_w;
  pb.ph = prm.pad_h;
  pb.pw = prm.pad_w;
  pb.dh = prm.dilation_h;
  pb.dw = prm.dilation_w;
  pb.ph_bottom = pb.ph;
  return pb;
}

// Never destroyed: the arena threads' streams may outlive static destruction.
dnnl::engine& engine() {
  static auto* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

struct Descs {
  memory::desc src, weights, bias, dst;
  memory::dims strides, dilates, pad, pad_r;
};

Descs descs(const Problem& pb) {
  Descs d;
  const auto f32 = memory::data_type::f32;
  d.src = memory::desc({pb.n, pb.c, pb.h, pb.w}, f32, Tag::nchw);
  d.dst = memory::desc({pb.n, pb.k, pb.p(), pb.q()}, f32, Tag::nchw);
  d.weights = pb.groups == 1
                  ? memory::desc({pb.k, pb.c, pb.r, pb.s}, f32, Tag::oihw)
                  : memory::desc({pb.groups, pb.k / pb.groups, pb.c / pb.groups, pb.r, pb.s}, f32,
                                 Tag::goihw);
  d.bias = memory::desc({pb.k}, f32, Tag::x);
  d.strides = {pb.sh, pb.sw};
  d.dilates = {pb.dh - 1, pb.dw - 1};  // oneDNN counts the gaps
  d.pad = {pb.ph, pb.pw};
  d.pad_r = {pb.ph_bottom,
             pb.pw};  // symmetric but for bands: stoke's output size is then consistent
  return d;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Problem& pb, dnnl::prop_kind prop,
                                                     const dnnl::primitive_attr& attr) {
  const Descs d = descs(pb);
  const auto alg = dnnl::algorithm::convolution_direct;
  const auto desc =
      pb.bias ? dnnl::convolution_forward::desc(prop, alg, d.src, d.weights, d.bias, d.dst,
                                                d.strides, d.dilates, d.pad, d.pad_r)
              : dnnl::convolution_forward::desc(prop, alg, d.src, d.weights, d.dst, d.strides,
                                                d.dilates, d.pad, d.pad_r);
  return {desc, attr, engine()};
}

struct Prim {
  dnnl::primitive primitive;
  memory::desc scratch;
  std::size_t scratch_floats = 0;
};

std::unique_ptr<Prim> create(const Problem& pb) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto out = std::make_unique<Prim>();
  if (pb.kind == kForward) {
    const auto pd = forward_pd(pb, dnnl::prop_kind::forward_inference, attr);
    out->primitive = dnnl::convolution_forward(pd);
    out->scratch = pd.scratchpad_desc();
  } else {
    Problem fwd = pb;
    fwd.kind = kForward;
    const auto hint = forward_pd(fwd, dnnl::prop_kind::forward_training, dnnl::primitive_attr());
    const Descs d = descs(pb);
    const auto alg = dnnl::algorithm::convolution_direct;
    if (pb.kind == kBackwardData) {
      const dnnl::convolution_backward_data::desc desc(alg, d.src, d.weights, d.dst, d.strides,
                                                       d.dilates, d.pad, d.pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(desc, attr, engine(), hint);
      out->primitive = dnnl::convolution_backward_data(pd);
      out->scratch = pd.scratchpad_desc();
    } else {
      const auto desc =
          pb.bias ? dnnl::convolution_backward_weights::desc(alg, d.src, d.weights, d.bias, d.dst,
                                                             d.strides, d.dilates, d.pad, d.pad_r)
                  : dnnl::convolution_backward_weights::desc(alg, d.src, d.weights, d.dst,
                                                             d.strides, d.dilates, d.pad, d.pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(desc, attr, engine(), hint);
      out->primitive = dnnl::convolution_backward_weights(pd);
      out->scratch = pd.scratchpad_desc();
    }
  }
  out->scratch_floats = align16(out->scratch.get_size() / sizeof(float));
  return out;
}

// Primitives by problem, created once (one OpenMP thread) and shared: oneDNN
// primitives may run on several threads at once.
const Prim& primitive(const Problem& pb) {
  static std::mutex mutex;
  static std::map<std::array<int, 17>, std::unique_ptr<Prim> > cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[pb.key()];
  if (!slot) {
    try {
      OneOmpThread one;
      slot = create(pb);
    } catch (const dnnl::error& e) {
      cache.erase(pb.key());
      throw Error(ErrorCode::kInternal,
                  std::string("conv2d: oneDNN has no convolution for this shape: ") + e.what());
    }
  }
  return *slot;
}

using Args = std::unordered_map<int, memory>;

void run(const Prim& prim, Args& args, float* scratch) {
  try {
    OneOmpThread one;
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(prim.scratch, engine(), scratch));
    prim.primitive.execute(stream(), args);
    stream().wait();
  } catch (const dnnl::error& e) {
    throw Error(ErrorCode::kInternal, std::string("conv2d: oneDNN failed: ") + e.what());
  }
}

memory wrap(const memory::desc& d, const float* p) {
  return memory(d, engine(), const_cast<float*>(p));
}

// A single image splits over channels (every arena thread on one image);
// a batch splits over images.
// A fixed number of parts, not one per thread: the weight gradient sums
// per-part partials and a band's rounding may depend on its height, so a
// thread-count-dependent split would make results (and trained weights) a
// function of the thread count. The arena runs the parts on the threads it has.
constexpr int kParts = 8;
bool split_channels(const CpuBackend&, const Problem& g) {
  return g.n == 1 && g.groups == 1;
}
int parts(const CpuBackend&, int total) {
  return std::max(1, std::min(kParts, total));
}

// Sub-problem for items [b, e) of `total` split over images or channels.
Problem sub(Problem pb, int kind, bool channels_k, bool channels_c, std::size_t b, std::size_t e) {
  pb.kind = kind;
  const int count = static_cast<int>(e - b);
  if (channels_k) {
    pb.k = count;
  } else if (channels_c) {
    pb.c = count;
  } else {
    pb.n = count;
  }
  return pb;
}

// Largest scratch over the (at most two) sub-problem sizes of an even split.
std::size_t most_scratch(Problem pb, int kind, bool channels_k, bool channels_c, int total,
                         int count) {
  const std::size_t lo = static_cast<std::size_t>(total / count), hi = lo + (total % count ? 1 : 0);
  return std::max(primitive(sub(pb, kind, channels_k, channels_c, 0, lo)).scratch_floats,
                  primitive(sub(pb, kind, channels_k, channels_c, 0, hi)).scratch_floats);
}

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

ForwardPlan forward_plan(const CpuBackend& be, const Problem& g) {
  ForwardPlan fp{};
  fp.bands = g.n == 1 && g.p() > 1;
  if (!fp.bands) {
    fp.count = parts(be, g.n);
    fp.scratch = most_scratch(g, kForward, false, false, g.n, fp.count);
    return fp;
  }
  fp.count = parts(be, g.p());
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

struct BackwardPlan {
  bool channels;
  int count_k, count_c;  // channel split: output / input channel parts; else count_k images
  std::size_t scratch;   // floats per chunk
  std::size_t slice;     // per chunk: input-channel slice of w (channel split) or dw+db partials
  std::size_t per_chunk() const { return scratch + slice; }
  std::size_t floats() const {
    return per_chunk() * static_cast<std::size_t>(std::max(count_k, count_c));
  }
};

std::size_t weight_floats(const Problem& g) {
  return static_cast<std::size_t>(g.k) * (g.c / g.groups) * g.r * g.s;
}

BackwardPlan backward_plan(const CpuBackend& be, const Problem& g, bool bias) {
  BackwardPlan bp{};
  bp.channels = split_channels(be, g);
  Problem w = g;
  w.bias = bias;
  if (bp.channels) {
    bp.count_k = parts(be, g.k);
    bp.count_c = parts(be, g.c);
    bp.scratch = std::max(most_scratch(w, kBackwardWeights, true, false, g.k, bp.count_k),
                          most_scratch(g, kBackwardData, false, true, g.c, bp.count_c));
    const std::size_t c_most = static_cast<std::size_t>((g.c + bp.count_c - 1) / bp.count_c);
    bp.slice = align16(static_cast<std::size_t>(g.k) * c_most * g.r * g.s);
  } else {
    bp.count_k = parts(be, g.n);
    bp.scratch = std::max(most_scratch(w, kBackwardWeights, false, false, g.n, bp.count_k),
                          most_scratch(g, kBackwardData, false, false, g.n, bp.count_k));
    bp.slice = bp.count_k > 1 ? align16(weight_floats(g) + g.k) : 0;
  }
  return bp;
}

}  // namespace

bool enabled() noexcept {
  return true;
}

std::size_t workspace_bytes(const CpuBackend& be, const Shape& x, const Shape& w,
                            const Conv2dParams& prm) {
  const Problem g = problem(x, w, prm);
  const ForwardPlan fp = forward_plan(be, g);
  const BackwardPlan bp = backward_plan(be, g, true);
  return std::max(fp.per_chunk() * fp.count, bp.floats()) * sizeof(float);
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
  const Problem g = problem(x.shape(), w.shape(), prm);  // bias and epilogue: output_pass
  const ForwardPlan fp = forward_plan(be, g);
  float* ws = be.workspace(std::max<std::size_t>(1, fp.per_chunk() * fp.count));
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  const Output out{bias.defined() ? bias.data<float>() : nullptr, epilogue.residual, epilogue.relu};
  float* yp = y.data<float>();
  const std::size_t x_image = static_cast<std::size_t>(g.c) * g.h * g.w;
  const std::size_t pq = static_cast<std::size_t>(g.p()) * g.q(), y_image = g.k * pq;
  for_chunks(be, static_cast<std::size_t>(fp.bands ? g.p() : g.n), fp.count,
             [&](int chunk, std::size_t b, std::size_t e) {
               float* scratch = ws + fp.per_chunk() * static_cast<std::size_t>(chunk);
               if (fp.bands) {
                 forward_band(g, fp, scratch, b, e, xp, wp, yp, out);
                 return;
               }
               const Problem pb = sub(g, kForward, false, false, b, e);
               const Descs d = descs(pb);
               Args args{{DNNL_ARG_SRC, wrap(d.src, xp + b * x_image)},
                         {DNNL_ARG_WEIGHTS, wrap(d.weights, wp)},
                         {DNNL_ARG_DST, wrap(d.dst, yp + b * y_image)}};
               run(primitive(pb), args, scratch);
               for (std::size_t n = b; n < e; ++n) {
                 Output image_out = out;
                 if (out.residual) image_out.residual = out.residual + n * y_image;
                 output_pass(yp + n * y_image, 1, yp + n * y_image, 1, g.k, 1, pq,
                             image_out);  // planes of pq
               }
             });
}

namespace {

// One image: weight gradient over output channels, input gradient over input
// channels (each with its own copy of that slice of w).
void backward_channels(CpuBackend& be, const BackwardPlan& bp, const Problem& g, float* ws,
                       const float* xp, const float* wp, const float* dyp, float* dxp, float* dwp,
                       float* dbp) {
  const std::size_t pq = static_cast<std::size_t>(g.p()) * g.q(),
                    rs = static_cast<std::size_t>(g.r) * g.s;
  Problem gw = g;
  gw.bias = dbp != nullptr;
  for_chunks(be, static_cast<std::size_t>(g.k), bp.count_k,
             [&](int chunk, std::size_t b, std::size_t e) {
               const Problem pb = sub(gw, kBackwardWeights, true, false, b, e);
               const Descs d = descs(pb);
               Args args{{DNNL_ARG_SRC, wrap(d.src, xp)},
                         {DNNL_ARG_DIFF_DST, wrap(d.dst, dyp + b * pq)},
                         {DNNL_ARG_DIFF_WEIGHTS, wrap(d.weights, dwp + b * g.c * rs)}};
               if (dbp) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(d.bias, dbp + b));
               run(primitive(pb), args, ws + bp.per_chunk() * static_cast<std::size_t>(chunk));
             });
  if (!dxp) return;
  for_chunks(
      be, static_cast<std::size_t>(g.c), bp.count_c, [&](int chunk, std::size_t b, std::size_t e) {
        const Problem pb = sub(g, kBackwardData, false, true, b, e);
        const Descs d = descs(pb);
        float* scratch = ws + bp.per_chunk() * static_cast<std::size_t>(chunk);
        float* w_slice = scratch + bp.scratch;
        const std::size_t cc = e - b;
        for (int k = 0; k < g.k; ++k) {
          std::memcpy(w_slice + k * cc * rs, wp + (k * static_cast<std::size_t>(g.c) + b) * rs,
                      cc * rs * sizeof(float));
        }
        Args args{{DNNL_ARG_DIFF_DST, wrap(d.dst, dyp)},
                  {DNNL_ARG_WEIGHTS, wrap(d.weights, w_slice)},
                  {DNNL_ARG_DIFF_SRC, wrap(d.src, dxp + b * g.h * g.w)}};
        run(primitive(pb), args, scratch);
      });
}

// A batch: images split over chunks, each chunk's weight gradient a partial
// sum reduced in chunk order afterwards (deterministic).
void backward_images(CpuBackend& be, const BackwardPlan& bp, const Problem& g, float* ws,
                     const float* xp, const float* wp, const float* dyp, float* dxp, float* dwp,
                     float* dbp) {
  const std::size_t x_image = static_cast<std::size_t>(g.c) * g.h * g.w;
  const std::size_t y_image = static_cast<std::size_t>(g.k) * g.p() * g.q();
  const std::size_t w_floats = weight_floats(g);
  const bool partials = bp.count_k > 1;
  Problem gw = g;
  gw.bias = dbp != nullptr;
  for_chunks(be, static_cast<std::size_t>(g.n), bp.count_k,
             [&](int chunk, std::size_t b, std::size_t e) {
               float* scratch = ws + bp.per_chunk() * static_cast<std::size_t>(chunk);
               float* dw_part = partials ? scratch + bp.scratch : dwp;
               float* db_part = partials ? dw_part + w_floats : dbp;
               const Problem pw = sub(gw, kBackwardWeights, false, false, b, e);
               const Descs d = descs(pw);
               Args args{{DNNL_ARG_SRC, wrap(d.src, xp + b * x_image)},
                         {DNNL_ARG_DIFF_DST, wrap(d.dst, dyp + b * y_image)},
                         {DNNL_ARG_DIFF_WEIGHTS, wrap(d.weights, dw_part)}};
               if (dbp) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(d.bias, db_part));
               run(primitive(pw), args, scratch);
               if (!dxp) return;
               const Problem pd = sub(g, kBackwardData, false, false, b, e);
               Args data{{DNNL_ARG_DIFF_DST, wrap(d.dst, dyp + b * y_image)},
                         {DNNL_ARG_WEIGHTS, wrap(d.weights, wp)},
                         {DNNL_ARG_DIFF_SRC, wrap(d.src, dxp + b * x_image)}};
               run(primitive(pd), data, scratch);
             });
  if (!partials) return;
  for_chunks(be, w_floats + g.k, be.chunks(), [&](int, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      float sum = 0.0f;
      for (int c = 0; c < bp.count_k; ++c) sum += ws[bp.per_chunk() * c + bp.scratch + i];
      if (i < w_floats) {
        dwp[i] = sum;
      } else if (dbp) {
        dbp[i - w_floats] = sum;
      }
    }
  });
}

}  // namespace

void backward(CpuBackend& be, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
              Tensor& dw, Tensor& db, const Conv2dParams& prm) {
  const Problem g = problem(x.shape(), w.shape(), prm);
  const BackwardPlan bp = backward_plan(be, g, db.defined());
  float* ws = be.workspace(std::max<std::size_t>(1, bp.floats()));
  float* dxp = dx.defined() ? dx.data<float>() : nullptr;
  float* dbp = db.defined() ? db.data<float>() : nullptr;
  if (bp.channels) {
    backward_channels(be, bp, g, ws, x.data<float>(), w.data<float>(), dy.data<float>(), dxp,
                      dw.data<float>(), dbp);
  } else {
    backward_images(be, bp, g, ws, x.data<float>(), w.data<float>(), dy.data<float>(), dxp,
                    dw.data<float>(), dbp);
  }
}

#endif  // STOKE_HAVE_DNNL

}  // namespace stoke::cpu::dnnl_conv
