// Convolution primitives in the layouts oneDNN prefers, staged through the
// chunk's workspace (LayoutPrim, conv2d_dnnl_primitive.hpp). Used by the
// image-split training convolutions (conv2d_dnnl.cpp, conv2d_dnnl_backward.cpp).
#include "backend/cpu/conv2d_dnnl_primitive.hpp"

#if STOKE_HAVE_DNNL
#include <algorithm>
#include <memory>
#include <string>

#include "stoke/error.hpp"

namespace stoke::cpu::dnnl_conv {

namespace {

// Stages argument `arg` when oneDNN chose another layout than `plain`.
void stage(LayoutPrim& lp, int arg, bool input, const memory::desc& plain,
           const memory::desc& chosen) {
  if (chosen == plain) return;
  LayoutPrim::Staged& s = lp.staged[static_cast<std::size_t>(lp.count++)];
  s.arg = arg;
  s.input = input;
  s.chosen = chosen;
  s.reorder = input
                  ? dnnl::reorder(dnnl::reorder::primitive_desc(engine(), plain, engine(), chosen))
                  : dnnl::reorder(dnnl::reorder::primitive_desc(engine(), chosen, engine(), plain));
  s.floats = align16((chosen.get_size() + sizeof(float) - 1) / sizeof(float));  // bf16: halves
}

template <class Pd>
void finish(LayoutPrim& lp, const Pd& pd, dnnl::primitive primitive) {
  set_primitive(lp.prim, pd, std::move(primitive));
  lp.implementation = pd.impl_info_str();
}

// Winograd F(4x4, 3x3) (oneDNN's jit_wino_4x3, AVX-512 only) for a 3x3
// stride-1 problem of at least 32 input and output channels and 28x28 output
// pixels over its images: below that, transforming the weights on every call
// outweighs the pixels, and narrow layers (the stems of 1 and 3 channels, 16
// channels) run faster direct (bench_engine_winograd's table, bench/RESULTS.md,
// "Winograd"). The choice depends on the problem only: the same bits for any
// thread count.
bool winograd_pays(const Problem& pb) {
  return pb.r == 3 && pb.s == 3 && pb.sh == 1 && pb.sw == 1 && pb.dh == 1 && pb.dw == 1 &&
         pb.groups == 1 && pb.ph_bottom == pb.ph && pb.c >= 32 && pb.k >= 32 &&
         static_cast<std::int64_t>(pb.n) * pb.p() * pb.q() >= 28 * 28;
}

// lp's primitive and staging for the layouts in a (any_layouts(d)).
void build_layout(LayoutPrim& lp, const Problem& pb, const Descs& d, const Descs& a) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (pb.kind == kForward) {
    const auto pd = forward_pd(a, pb.bias, dnnl::prop_kind::forward_training, attr);
    stage(lp, DNNL_ARG_SRC, true, d.src, pd.src_desc());
    stage(lp, DNNL_ARG_WEIGHTS, true, d.weights, pd.weights_desc());
    stage(lp, DNNL_ARG_DST, false, d.dst, pd.dst_desc());
    finish(lp, pd, dnnl::convolution_forward(pd));
    return;
  }
  // bf16: the hint is the all-bf16 forward oneDNN has kernels for.
  const auto hint = forward_pd(pb.bf16 ? any_layouts(d, true, -1) : a, pb.bias,
                               dnnl::prop_kind::forward_training, dnnl::primitive_attr());
  if (pb.kind == kBackwardData) {
    const auto pd = backward_data_pd(a, attr, hint);
    stage(lp, DNNL_ARG_DIFF_DST, true, d.dst, pd.diff_dst_desc());
    stage(lp, DNNL_ARG_WEIGHTS, true, d.weights, pd.weights_desc());
    stage(lp, DNNL_ARG_DIFF_SRC, false, d.src, pd.diff_src_desc());
    finish(lp, pd, dnnl::convolution_backward_data(pd));
    return;
  }
  const auto pd = backward_weights_pd(a, pb.bias, attr, hint);
  stage(lp, DNNL_ARG_SRC, true, d.src, pd.src_desc());
  stage(lp, DNNL_ARG_DIFF_DST, true, d.dst, pd.diff_dst_desc());
  stage(lp, DNNL_ARG_DIFF_WEIGHTS, false, d.weights, pd.diff_weights_desc());
  finish(lp, pd, dnnl::convolution_backward_weights(pd));
}

std::unique_ptr<LayoutPrim> create_layout(const Problem& pb) {
  const Descs d = descs(pb);
  const Descs a = any_layouts(d, pb.bf16, pb.kind);
  if (winograd_pays(pb) && !pb.bf16) {  // oneDNN's Winograd is fp32 only
    Descs w = a;
    w.algorithm = dnnl::algorithm::convolution_winograd;
    try {
      auto lp = std::make_unique<LayoutPrim>();
      build_layout(*lp, pb, d, w);
      return lp;
    } catch (const dnnl::error&) {
      // No Winograd kernel on this machine (oneDNN has them for AVX-512 only).
    }
  }
  auto lp = std::make_unique<LayoutPrim>();
  build_layout(*lp, pb, d, a);
  return lp;
}

}  // namespace

std::size_t LayoutPrim::floats() const {
  std::size_t total = prim.scratch_floats;
  for (int i = 0; i < count; ++i) total += staged[static_cast<std::size_t>(i)].floats;
  return total;
}

const LayoutPrim& layout_primitive(const Problem& pb) {
  return cached<LayoutPrim>(pb, create_layout);
}

namespace {

// The layout primitives of the two part sizes of an image split (part 0's first).
std::array<const LayoutPrim*, 2> part_primitives(const Problem& pb, int kind, int total,
                                                 int count) {
  const auto [lo, hi] = part_sizes(total, count);
  return {&layout_primitive(sub(pb, kind, SplitOver::kImages, 0, lo)),
          &layout_primitive(sub(pb, kind, SplitOver::kImages, 0, hi))};
}

}  // namespace

std::size_t most_layout(Problem pb, int kind, int total, int count) {
  std::size_t most = 0;
  for (const LayoutPrim* lp : part_primitives(pb, kind, total, count))
    most = std::max(most, lp->floats());
  return most;
}

std::size_t most_staged(Problem pb, int kind, int arg, int total, int count) {
  std::size_t most = 0;
  for (const LayoutPrim* lp : part_primitives(pb, kind, total, count)) {
    if (const auto* s = staged(*lp, arg)) most = std::max(most, s->floats);
  }
  return most;
}

const LayoutPrim::Staged* staged(const LayoutPrim& lp, int arg) {
  for (int i = 0; i < lp.count; ++i) {
    if (lp.staged[static_cast<std::size_t>(i)].arg == arg)
      return &lp.staged[static_cast<std::size_t>(i)];
  }
  return nullptr;
}

memory stage_input(const LayoutPrim::Staged& s, memory from, float* to) {
  try {
    OneOmpThread one;
    memory out(s.chosen, engine(), to);
    s.reorder.execute(stream(), from, out);
    stream().wait();
    return out;
  } catch (const dnnl::error& e) {
    throw Error(ErrorCode::kInternal, std::string("conv2d: oneDNN reorder failed: ") + e.what());
  }
}

std::size_t staged_offset(const LayoutPrim& lp, int arg) {
  std::size_t offset = lp.prim.scratch_floats;
  for (int i = 0; i < lp.count && lp.staged[static_cast<std::size_t>(i)].arg != arg; ++i) {
    offset += lp.staged[static_cast<std::size_t>(i)].floats;
  }
  return offset;
}

SharedStaging shared_staging(Problem pb, int kind, int arg, int total, int count) {
  const auto [first, other] = part_primitives(pb, kind, total, count);
  const LayoutPrim::Staged* s = staged(*first, arg);
  const LayoutPrim::Staged* t = staged(*other, arg);
  if (!s || !t || t->chosen != s->chosen) return {};
  return {s, staged_offset(*first, arg)};
}

void run(const LayoutPrim& lp, Args& args, float* ws, const char* what,
         std::initializer_list<int> prestaged) {
  require_address_space(kDnnlCreateHeadroom,
                        std::string("running a oneDNN ") + what);  // as run(Prim)
  try {
    OneOmpThread one;
    float* next = ws + lp.prim.scratch_floats;
    std::array<memory, 3> plain_out, staged_out;
    int outputs = 0;
    for (int i = 0; i < lp.count; ++i) {
      const LayoutPrim::Staged& s = lp.staged[static_cast<std::size_t>(i)];
      memory& slot = args.at(s.arg);
      memory staged(s.chosen, engine(), next);
      next += s.floats;
      const bool given = std::find(prestaged.begin(), prestaged.end(), s.arg) != prestaged.end();
      if (given) continue;  // args hold it in s.chosen already
      if (s.input) {
        s.reorder.execute(stream(), slot, staged);
      } else {
        plain_out[static_cast<std::size_t>(outputs)] = slot;
        staged_out[static_cast<std::size_t>(outputs++)] = staged;
      }
      slot = staged;
    }
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(lp.prim.scratch, engine(), ws));
    lp.prim.primitive.execute(stream(), args);
    for (int i = 0, o = 0; i < lp.count; ++i) {
      const LayoutPrim::Staged& s = lp.staged[static_cast<std::size_t>(i)];
      if (s.input || std::find(prestaged.begin(), prestaged.end(), s.arg) != prestaged.end())
        continue;
      s.reorder.execute(stream(), staged_out[static_cast<std::size_t>(o)],
                        plain_out[static_cast<std::size_t>(o)]);
      ++o;
    }
    stream().wait();
  } catch (const dnnl::error& e) {
    throw Error(ErrorCode::kInternal, std::string(what) + ": oneDNN failed: " + e.what());
  } catch (const std::out_of_range&) {
    throw Error(ErrorCode::kInternal, std::string(what) + ": a staged oneDNN argument is missing");
  }
}

}  // namespace stoke::cpu::dnnl_conv

#endif  // STOKE_HAVE_DNNL
