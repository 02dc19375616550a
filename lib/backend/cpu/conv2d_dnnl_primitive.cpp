// oneDNN's engine, streams and primitive cache (conv2d_dnnl_primitive.hpp).
#include "backend/cpu/conv2d_dnnl_primitive.hpp"

#if STOKE_HAVE_DNNL
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "stoke/error.hpp"

// libgomp, which Debian's oneDNN runs on (declared here: omp.h is not on every
// compiler's include path).
extern "C" int omp_get_max_threads(void);
extern "C" void omp_set_num_threads(int);

namespace stoke::cpu::dnnl_conv {

OneOmpThread::OneOmpThread() : previous_(omp_get_max_threads()) {
  if (previous_ != 1) omp_set_num_threads(1);
}

OneOmpThread::~OneOmpThread() {
  if (previous_ != 1) omp_set_num_threads(previous_);
}

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

Problem problem(const CpuBackend& be, const Shape& x, const Shape& w, const Conv2dParams& prm) {
  Problem pb = problem(x, w, prm);
  pb.bf16 = be.training_precision() == Precision::kBf16;
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

Descs any_layouts(Descs d, bool bf16, int kind) {
  const auto any = [](const memory::desc& m, bool low) {
    return memory::desc(m.dims(), low ? memory::data_type::bf16 : memory::data_type::f32, Tag::any);
  };
  const bool all = bf16 && kind < 0;
  d.src = any(d.src, all || (bf16 && kind != kBackwardData));
  d.weights = any(d.weights, all || (bf16 && kind != kBackwardWeights));
  d.dst = any(d.dst, all || (bf16 && kind != kForward));
  return d;
}

dnnl::convolution_forward::primitive_desc forward_pd(const Descs& d, bool bias,
                                                     dnnl::prop_kind prop,
                                                     const dnnl::primitive_attr& attr) {
  const auto alg = d.algorithm;
  const auto desc =
      bias ? dnnl::convolution_forward::desc(prop, alg, d.src, d.weights, d.bias, d.dst, d.strides,
                                             d.dilates, d.pad, d.pad_r)
           : dnnl::convolution_forward::desc(prop, alg, d.src, d.weights, d.dst, d.strides,
                                             d.dilates, d.pad, d.pad_r);
  return {desc, attr, engine()};
}

dnnl::convolution_backward_data::primitive_desc backward_data_pd(
    const Descs& d, const dnnl::primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
  const dnnl::convolution_backward_data::desc desc(d.algorithm, d.src, d.weights, d.dst, d.strides,
                                                   d.dilates, d.pad, d.pad_r);
  return {desc, attr, engine(), hint};
}

dnnl::convolution_backward_weights::primitive_desc backward_weights_pd(
    const Descs& d, bool bias, const dnnl::primitive_attr& attr,
    const dnnl::convolution_forward::primitive_desc& hint) {
  const auto alg = d.algorithm;
  const auto desc =
      bias ? dnnl::convolution_backward_weights::desc(alg, d.src, d.weights, d.bias, d.dst,
                                                      d.strides, d.dilates, d.pad, d.pad_r)
           : dnnl::convolution_backward_weights::desc(alg, d.src, d.weights, d.dst, d.strides,
                                                      d.dilates, d.pad, d.pad_r);
  return {desc, attr, engine(), hint};
}

namespace {

std::unique_ptr<Prim> create(const Problem& pb) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto out = std::make_unique<Prim>();
  const Descs d = descs(pb);
  if (pb.kind == kForward) {
    const auto pd = forward_pd(d, pb.bias, dnnl::prop_kind::forward_inference, attr);
    set_primitive(*out, pd, dnnl::convolution_forward(pd));
    return out;
  }
  const auto hint =
      forward_pd(d, pb.bias, dnnl::prop_kind::forward_training, dnnl::primitive_attr());
  if (pb.kind == kBackwardData) {
    const auto pd = backward_data_pd(d, attr, hint);
    set_primitive(*out, pd, dnnl::convolution_backward_data(pd));
  } else {
    const auto pd = backward_weights_pd(d, pb.bias, attr, hint);
    set_primitive(*out, pd, dnnl::convolution_backward_weights(pd));
  }
  return out;
}

}  // namespace

// Primitives by problem, created once (one OpenMP thread) and shared: oneDNN
// primitives may run on several threads at once.
const Prim& primitive(const Problem& pb) {
  return cached<Prim>(pb, create);
}

void run(const Prim& prim, Args& args, float* scratch, const char* what) {
  // A gemm-based primitive generates its GEMM kernels at its first run.
  require_address_space(kDnnlCreateHeadroom, "running a oneDNN convolution");
  try {
    OneOmpThread one;
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(prim.scratch, engine(), scratch));
    prim.primitive.execute(stream(), args);
    stream().wait();
  } catch (const dnnl::error& e) {
    throw Error(ErrorCode::kInternal, std::string(what) + ": oneDNN failed: " + e.what());
  }
}

// Sub-problem for items [b, e) of `total` split over images or channels.
Problem sub(Problem pb, int kind, SplitOver over, std::size_t b, std::size_t e) {
  pb.kind = kind;
  const int count = static_cast<int>(e - b);
  switch (over) {
    case SplitOver::kOutputChannels:
      pb.k = count;
      break;
    case SplitOver::kInputChannels:
      pb.c = count;
      break;
    case SplitOver::kImages:
      pb.n = count;
      break;
  }
  return pb;
}

// Largest scratch over the (at most two) sub-problem sizes of an even split.
std::size_t most_scratch(Problem pb, int kind, SplitOver over, int total, int count) {
  std::size_t most = 0;
  for (std::size_t n : part_sizes(total, count))
    most = std::max(most, primitive(sub(pb, kind, over, 0, n)).scratch_floats);
  return most;
}

}  // namespace stoke::cpu::dnnl_conv

#endif  // STOKE_HAVE_DNNL
