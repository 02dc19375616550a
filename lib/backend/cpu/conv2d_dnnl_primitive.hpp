// oneDNN's engine, streams and the primitive cache shared by the NCHW
// convolution (conv2d_dnnl.cpp, conv2d_dnnl_backward.cpp) and the blocked-layout
// inference convolution (conv2d_blocked.cpp). Only for sources compiled with
// STOKE_HAVE_DNNL (lib/backend/module.cmake); includes oneDNN's header.
#pragma once

#if STOKE_HAVE_DNNL
#include <algorithm>
#include <array>
#include <cstddef>
#include <dnnl.hpp>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/cpu/address_space.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu::dnnl_conv {

using dnnl::memory;
using Tag = memory::format_tag;

// Scratch and slices start on 64-byte boundaries.
inline std::size_t align16(std::size_t floats) {
  return (floats + 15) / 16 * 16;
}

// Runs with one OpenMP thread on this thread, restoring the caller's setting
// (DESIGN.md: the oneTBB arena owns parallelism; see conv2d_dnnl.hpp).
class OneOmpThread {
 public:
  OneOmpThread();
  ~OneOmpThread();
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int previous_;
};

// The process's CPU engine (never destroyed) and this thread's stream.
dnnl::engine& engine();
dnnl::stream& stream();

enum Kind : int { kForward, kBackwardData, kBackwardWeights };

// One primitive's problem: the part of the convolution one chunk computes.
struct Problem {
  int kind = kForward;
  int n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, groups = 1;
  int sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int ph_bottom = 0;  // a band of rows pads only where it meets the image's edge
  bool bias = false;  // backward weights: also the bias gradient (forward: bias in output_pass)
  // Mixed precision (CpuBackend::training_precision bf16): the inputs (x, w,
  // dy) are staged as bf16, the outputs (y, dx, dw, db) stay fp32; layout
  // primitives only (the image split).
  bool bf16 = false;
  std::array<int, 18> key() const {
    return {kind, n, c, h, w, k, r, s, groups, sh, sw, ph, pw, dh, dw, ph_bottom, bias, bf16};
  }
  int p() const { return (h + ph + ph_bottom - ((r - 1) * dh + 1)) / sh + 1; }
  int q() const { return static_cast<int>(conv_output_size(w, s, sw, pw, dw)); }
};

Problem problem(const Shape& x, const Shape& w, const Conv2dParams& prm);
// With bf16 set from the backend's training precision.
Problem problem(const CpuBackend& be, const Shape& x, const Shape& w, const Conv2dParams& prm);

// Address space that must be free before a primitive is created (its JIT
// code, its descriptors) or run (a gemm-based one generates its GEMM kernels
// then; address_space.hpp).
inline constexpr std::size_t kDnnlCreateHeadroom = std::size_t{64} << 20;

// The T for pb made once by create(pb) (with one OpenMP thread) and kept for
// the process; oneDNN's "no implementation" errors become stoke::Error.
template <class T, class Create>
const T& cached(const Problem& pb, Create create) {
  static std::mutex mutex;
  static std::map<std::array<int, 18>, std::unique_ptr<T>> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[pb.key()];
  if (!slot) {
    // oneDNN's JIT code generation crashes when its mapping fails.
    require_address_space(kDnnlCreateHeadroom, "creating a oneDNN convolution");
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

// Plain NCHW / OIHW (GOIHW) descriptors of a problem, and its geometry.
struct Descs {
  memory::desc src, weights, bias, dst;
  memory::dims strides, dilates, pad, pad_r;
  dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct;
};
Descs descs(const Problem& pb);
// d with src, weights and dst left to oneDNN ("any"): its preferred layouts.
// bf16: the pass's inputs in bf16 (kind's: forward src and weights, backward
// data diff_dst and weights, backward weights src and diff_dst), its output
// in fp32; kind -1: every argument bf16 (the forward hint of a backward pass).
Descs any_layouts(Descs d, bool bf16 = false, int kind = kForward);

// The primitive descriptors of a problem's three passes over the layouts in
// d (plain, or any_layouts) with d's algorithm; `hint` is the forward
// training descriptor.
dnnl::convolution_forward::primitive_desc forward_pd(const Descs& d, bool bias,
                                                     dnnl::prop_kind prop,
                                                     const dnnl::primitive_attr& attr);
dnnl::convolution_backward_data::primitive_desc backward_data_pd(
    const Descs& d, const dnnl::primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint);
dnnl::convolution_backward_weights::primitive_desc backward_weights_pd(
    const Descs& d, bool bias, const dnnl::primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint);

struct Prim {
  dnnl::primitive primitive;
  memory::desc scratch;
  std::size_t scratch_floats = 0;
};

// prim's primitive and scratchpad from its descriptor.
template <class Pd>
void set_primitive(Prim& prim, const Pd& pd, dnnl::primitive primitive) {
  prim.primitive = std::move(primitive);
  prim.scratch = pd.scratchpad_desc();
  prim.scratch_floats = align16((prim.scratch.get_size() + sizeof(float) - 1) / sizeof(float));
}

// The primitive of a plain-layout problem, created once (one OpenMP thread)
// and shared: oneDNN primitives may run on several threads at once.
const Prim& primitive(const Problem& pb);

using Args = std::unordered_map<int, memory>;

// A problem's primitive with the layouts oneDNN prefers (format "any"): on
// plain NCHW its training convolutions are gemm-based (im2col + sgemm, one
// image at a time), several times slower than its direct blocked-layout
// kernels (nChw16c / OIhw16i16o). Each argument whose preferred layout is not
// stoke's plain one is staged: reordered into the chunk's workspace before the
// primitive (inputs) or out of it afterwards (outputs). Where oneDNN prefers
// the plain layout nothing is staged (the same primitive as primitive()).
struct LayoutPrim {
  struct Staged {
    int arg = 0;  // DNNL_ARG_*
    bool input = true;
    memory::desc chosen;
    dnnl::reorder reorder;  // plain -> chosen (input) or chosen -> plain (output)
    std::size_t floats = 0;
  };
  Prim prim;
  std::array<Staged, 3> staged{};
  int count = 0;  // staged arguments in use
  std::string implementation;
  std::size_t floats() const;  // scratch + every staged argument
};

// Created once per problem (one OpenMP thread) and shared, as primitive().
const LayoutPrim& layout_primitive(const Problem& pb);

// Largest floats() over the (at most two) sub-problem sizes of an even split
// over images; most_staged: the largest staged copy of `arg` (0: never staged).
std::size_t most_layout(Problem pb, int kind, int total, int count);
std::size_t most_staged(Problem pb, int kind, int arg, int total, int count);

// lp's staged copy of `arg`, or null where oneDNN takes it in stoke's layout.
const LayoutPrim::Staged* staged(const LayoutPrim& lp, int arg);

// Reorders the plain `from` into s's layout at `to` (s.floats floats), for
// an argument two primitives share (the backward's dy).
memory stage_input(const LayoutPrim::Staged& s, memory from, float* to);
// Floats from the start of a part's workspace (run()'s `ws`) to lp's staged
// copy of `arg` (which must be staged).
std::size_t staged_offset(const LayoutPrim& lp, int arg);
// An argument every part of an image split (`count` parts of `total` images)
// stages in one layout, so that it can be staged once for all of them (the
// weights) or kept in that layout (the weight gradient's partials): part 0's
// Staged and its offset in part 0's workspace; staged null where the parts'
// layouts differ or the argument is not staged.
struct SharedStaging {
  const LayoutPrim::Staged* staged = nullptr;
  std::size_t offset = 0;
};
SharedStaging shared_staging(Problem pb, int kind, int arg, int total, int count);

// Executes on this thread's stream with one OpenMP thread, `scratch` as the
// scratchpad; oneDNN errors become stoke::Error naming `what`.
void run(const Prim& prim, Args& args, float* scratch, const char* what = "conv2d");

// No DNNL_ARG_* is 0: a place holder in run()'s `prestaged`.
constexpr int kNoArg = 0;

// As run(), `args` wrapping stoke's plain tensors: staged arguments go
// through `ws` (floats() floats: the scratchpad, then the staged copies).
// `prestaged`: arguments args already hold in lp's layout, not reordered in
// or out (an input the caller staged with stage_input, or an output the
// caller reads in that layout).
void run(const LayoutPrim& lp, Args& args, float* ws, const char* what = "conv2d",
         std::initializer_list<int> prestaged = {});

inline memory wrap(const memory::desc& d, const float* p) {
  return memory(d, engine(), const_cast<float*>(p));
}
// Elements of d's data type (the blocked inference program's bf16 ones).
inline memory wrap(const memory::desc& d, const void* p) {
  return memory(d, engine(), const_cast<void*>(p));
}

// A fixed number of parts, not one per thread: the weight gradient sums
// per-part partials and a band's rounding may depend on its height, so a
// thread-count-dependent split would make results (and trained weights) a
// function of the thread count. The arena runs the parts on the threads it has.
constexpr int kParts = 8;
inline int parts(int total) {
  return total < 1 ? 1 : (total < kParts ? total : kParts);
}

// The (at most two) part sizes of an even split of `total` items into `count`
// parts: part 0's (total / count) first, then the largest.
inline std::array<std::size_t, 2> part_sizes(int total, int count) {
  const auto lo = static_cast<std::size_t>(total / count);
  return {lo, lo + (total % count ? 1 : 0)};
}

// What a problem is split over into parts.
enum class SplitOver { kImages, kOutputChannels, kInputChannels };

// Sub-problem for items [b, e) of a split over `over`.
Problem sub(Problem pb, int kind, SplitOver over, std::size_t b, std::size_t e);

// Largest scratch over the (at most two) sub-problem sizes of an even split.
std::size_t most_scratch(Problem pb, int kind, SplitOver over, int total, int count);

// Floats of backward's workspace (conv2d_dnnl_backward.cpp).
std::size_t backward_workspace_floats(const Problem& g, bool bias);

}  // namespace stoke::cpu::dnnl_conv

#endif  // STOKE_HAVE_DNNL
