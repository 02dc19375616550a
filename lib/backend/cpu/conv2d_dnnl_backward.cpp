// The backward of the oneDNN convolution (see conv2d_dnnl.hpp): one image
// splits over channels, a batch over images with partial weight gradients
// reduced in chunk order.
#include <algorithm>
#include <cstring>

#include "backend/cpu/conv2d_dnnl.hpp"

#if STOKE_HAVE_DNNL
#include "backend/cpu/conv2d_dnnl_primitive.hpp"

namespace stoke::cpu::dnnl_conv {

namespace {

// A single image splits over channels (every arena thread on one image);
// a batch splits over images.
bool split_channels(const Problem& g) {
  return g.n == 1 && g.groups == 1 && !g.bf16;  // bf16: layout primitives only
}

struct BackwardPlan {
  bool channels;
  int count_k, count_c;  // channel split: output / input channel parts; else count_k images
  std::size_t scratch;   // floats per chunk
  std::size_t dy;        // per chunk (image split): dy staged once for both primitives
  std::size_t slice;     // per chunk: input-channel slice of w (channel split) or dw+db partials
  std::size_t db;        // image split: db's partial, floats after the start of dw's
  // Image split: w in the data gradient's layout, staged once for every part
  // (after the chunks' regions); dw's partials in the weight gradient's
  // layout, summed in it and reordered to stoke's once. Null where the parts'
  // layouts differ or oneDNN takes stoke's.
  SharedStaging w, dw;
  std::size_t per_chunk() const { return scratch + dy + slice; }
  std::size_t chunks_floats() const {
    return per_chunk() * static_cast<std::size_t>(std::max(count_k, count_c));
  }
  std::size_t floats() const { return chunks_floats() + (w.staged ? w.staged->floats : 0); }
};

std::size_t weight_floats(const Problem& g) {
  return static_cast<std::size_t>(g.k) * (g.c / g.groups) * g.r * g.s;
}

BackwardPlan backward_plan(const Problem& g, bool bias) {
  BackwardPlan bp{};
  bp.channels = split_channels(g);
  Problem w = g;
  w.bias = bias;
  if (bp.channels) {
    bp.count_k = parts(g.k);
    bp.count_c = parts(g.c);
    bp.scratch =
        std::max(most_scratch(w, kBackwardWeights, SplitOver::kOutputChannels, g.k, bp.count_k),
                 most_scratch(g, kBackwardData, SplitOver::kInputChannels, g.c, bp.count_c));
    const std::size_t c_most = static_cast<std::size_t>((g.c + bp.count_c - 1) / bp.count_c);
    bp.slice = align16(static_cast<std::size_t>(g.k) * c_most * g.r * g.s);
  } else {
    bp.count_k = parts(g.n);
    bp.scratch = std::max(most_layout(w, kBackwardWeights, g.n, bp.count_k),
                          most_layout(g, kBackwardData, g.n, bp.count_k));
    bp.dy = most_staged(w, kBackwardWeights, DNNL_ARG_DIFF_DST, g.n, bp.count_k);
    bp.w = shared_staging(g, kBackwardData, DNNL_ARG_WEIGHTS, g.n, bp.count_k);
    if (bp.count_k > 1) {
      bp.dw = shared_staging(w, kBackwardWeights, DNNL_ARG_DIFF_WEIGHTS, g.n, bp.count_k);
      bp.db = align16(std::max(weight_floats(g), bp.dw.staged ? bp.dw.staged->floats : 0));
      bp.slice = bp.db + align16(static_cast<std::size_t>(g.k));
    }
  }
  return bp;
}

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
               const Problem pb = sub(gw, kBackwardWeights, SplitOver::kOutputChannels, b, e);
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
        const Problem pb = sub(g, kBackwardData, SplitOver::kInputChannels, b, e);
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
  const bool dw_blocked = partials && bp.dw.staged;
  Problem gw = g;
  gw.bias = dbp != nullptr;
  memory w_staged;
  const bool w_shared = dxp && bp.w.staged;
  if (w_shared) {
    w_staged = stage_input(*bp.w.staged, wrap(descs(g).weights, wp), ws + bp.chunks_floats());
  }
  for_chunks(
      be, static_cast<std::size_t>(g.n), bp.count_k, [&](int chunk, std::size_t b, std::size_t e) {
        float* scratch = ws + bp.per_chunk() * static_cast<std::size_t>(chunk);
        float* dw_part = partials ? scratch + bp.scratch + bp.dy : dwp;
        float* db_part = partials ? dw_part + bp.db : dbp;
        const Problem pw = sub(gw, kBackwardWeights, SplitOver::kImages, b, e);
        const Problem pd = sub(g, kBackwardData, SplitOver::kImages, b, e);
        const Descs d = descs(pw);
        const LayoutPrim& lw = layout_primitive(pw);
        const LayoutPrim* ld = dxp ? &layout_primitive(pd) : nullptr;
        memory dy = wrap(d.dst, dyp + b * y_image);
        // Both primitives take dy in one layout: reorder it once.
        const LayoutPrim::Staged* sw = staged(lw, DNNL_ARG_DIFF_DST);
        const LayoutPrim::Staged* sd = ld ? staged(*ld, DNNL_ARG_DIFF_DST) : nullptr;
        const int shared = sw && sd && sw->chosen == sd->chosen ? DNNL_ARG_DIFF_DST : 0;
        if (shared) dy = stage_input(*sw, dy, scratch + bp.scratch);
        Args args{{DNNL_ARG_SRC, wrap(d.src, xp + b * x_image)},
                  {DNNL_ARG_DIFF_DST, dy},
                  {DNNL_ARG_DIFF_WEIGHTS,
                   dw_blocked ? wrap(bp.dw.staged->chosen, dw_part) : wrap(d.weights, dw_part)}};
        if (dbp) args.emplace(DNNL_ARG_DIFF_BIAS, wrap(d.bias, db_part));
        run(lw, args, scratch, "conv2d", {shared, dw_blocked ? DNNL_ARG_DIFF_WEIGHTS : kNoArg});
        if (!ld) return;
        Args data{{DNNL_ARG_DIFF_DST, dy},
                  {DNNL_ARG_WEIGHTS, w_shared ? w_staged : wrap(d.weights, wp)},
                  {DNNL_ARG_DIFF_SRC, wrap(d.src, dxp + b * x_image)}};
        run(*ld, data, scratch, "conv2d", {shared, w_shared ? DNNL_ARG_WEIGHTS : kNoArg});
      });
  if (!partials) return;
  // dw and db: the chunks' partials summed in chunk order, one contiguous
  // vector add per partial over blocks that stay in cache (the layout does
  // not matter to a sum: blocked partials are summed blocked, into chunk 0's).
  const SimdKernels& k = be.simd_kernels();
  const auto reduce = [&](float* out, std::size_t offset, std::size_t count) {
    for_chunks(be, count, be.chunks(), [&](int, std::size_t begin, std::size_t end) {
      constexpr std::size_t kBlock = 4096;
      for (std::size_t b = begin; b < end; b += kBlock) {
        const std::size_t n = std::min(kBlock, end - b);
        const auto partial = [&](int c) {
          return ws + bp.per_chunk() * static_cast<std::size_t>(c) + bp.scratch + bp.dy + offset +
                 b;
        };
        if (out + b != partial(0)) std::memcpy(out + b, partial(0), n * sizeof(float));
        for (int c = 1; c < bp.count_k; ++c) k.add(out + b, partial(c), out + b, n);
      }
    });
  };
  if (dw_blocked) {
    float* sum = ws + bp.scratch + bp.dy;  // chunk 0's partial
    reduce(sum, 0, bp.dw.staged->chosen.get_size() / sizeof(float));
    try {
      OneOmpThread one;
      memory from(bp.dw.staged->chosen, engine(), sum);
      memory to = wrap(descs(gw).weights, dwp);
      bp.dw.staged->reorder.execute(stream(), from, to);
      stream().wait();
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kInternal, std::string("conv2d: oneDNN reorder failed: ") + e.what());
    }
  } else {
    reduce(dwp, 0, w_floats);
  }
  if (dbp) reduce(dbp, bp.db, static_cast<std::size_t>(g.k));
}

}  // namespace

std::size_t backward_workspace_floats(const Problem& g, bool bias) {
  return backward_plan(g, bias).floats();
}

void backward(CpuBackend& be, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
              Tensor& dw, Tensor& db, const Conv2dParams& prm) {
  const Problem g = problem(be, x.shape(), w.shape(), prm);
  const BackwardPlan bp = backward_plan(g, db.defined());
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

}  // namespace stoke::cpu::dnnl_conv

#endif  // STOKE_HAVE_DNNL
