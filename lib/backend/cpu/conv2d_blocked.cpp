// Blocked-layout inference convolutions through oneDNN (conv2d_blocked.hpp).
#include "backend/cpu/conv2d_blocked.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "stoke/error.hpp"

#if STOKE_HAVE_DNNL
#include "backend/cpu/conv2d_dnnl_primitive.hpp"
#endif

namespace stoke::cpu::blocked {

#if !STOKE_HAVE_DNNL

bool available(Backend&) noexcept {
  return false;
}

namespace {
[[noreturn]] void no_dnnl() {
  throw Error(ErrorCode::kInternal, "blocked conv2d: stoke was built without oneDNN");
}
}  // namespace

int bf16_support() noexcept {
  return 0;
}
std::string isa_name() {
  return "none (stoke was built without oneDNN)";
}
int block_channels() {
  no_dnnl();
}
std::int64_t blocked_floats(const Shape&) {
  no_dnnl();
}
void to_blocked(Backend&, const Tensor&, void*, Elem, bool) {
  no_dnnl();
}
void to_plain(Backend&, const void*, Tensor&, Elem) {
  no_dnnl();
}
struct Conv::Impl {};
Conv::Conv() = default;
Conv::~Conv() = default;
Conv::Conv(Conv&&) noexcept = default;
Conv& Conv::operator=(Conv&&) noexcept = default;
void Conv::set_weights(const Tensor&, const Tensor&, const Conv2dParams&, bool, Elem) {
  no_dnnl();
}
void Conv::forward(Backend&, const Shape&, const void*, bool, void*, bool) {
  no_dnnl();
}
std::string Conv::implementations() const {
  return {};
}

#else

using dnnl_conv::engine;
using dnnl_conv::memory;
using dnnl_conv::OneOmpThread;
using dnnl_conv::Tag;
using dnnl_conv::wrap;

namespace {

constexpr auto kF32 = memory::data_type::f32;

memory::data_type data_type(Elem e) {
  return e == Elem::kF32 ? kF32 : memory::data_type::bf16;
}

bool isa_has(dnnl::cpu_isa level) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto want = static_cast<unsigned>(level);
  return (isa & want) == want;
}

bool has_avx512() {
  return isa_has(dnnl::cpu_isa::avx512_core);
}

// `p` advanced by `elements` of `elem`.
const void* at(const void* p, std::int64_t elements, Elem elem) {
  return static_cast<const char*>(p) + elements * static_cast<std::int64_t>(elem_size(elem));
}
void* at(void* p, std::int64_t elements, Elem elem) {
  return static_cast<char*>(p) + elements * static_cast<std::int64_t>(elem_size(elem));
}

Tag blocked_tag() {
  static const Tag tag = has_avx512() ? Tag::nChw16c : Tag::nChw8c;
  return tag;
}

// Whether oneDNN has its Winograd inference kernel on this machine (AVX-512).
bool winograd_available() {
  static const bool available = [] {
    const memory::desc act({2, 16, 8, 8}, kF32, blocked_tag());
    const memory::desc w({16, 16, 3, 3}, kF32, Tag::any);
    const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                               dnnl::algorithm::convolution_winograd, act, w, act,
                                               {1, 1}, {0, 0}, {1, 1}, {1, 1});
    try {
      OneOmpThread one;
      const dnnl::convolution_forward::primitive_desc pd(desc, engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return available;
}

memory::dims dims(const Shape& s) {
  return {s[0], s[1], s[2], s[3]};
}

CpuBackend& cpu(Backend& be) {
  auto* c = dynamic_cast<CpuBackend*>(&be);
  if (!c) throw InvalidArgument("blocked conv2d: needs the CPU backend, got " + be.name());
  return *c;
}

// One side of a reorder: its layout, element type and the images' size in elements.
struct Side {
  Tag tag;
  Elem elem;
  std::int64_t image;
};

Side plain_side(const Shape& s, Elem elem) {
  return {Tag::nchw, elem, s[1] * s[2] * s[3]};
}
Side blocked_side(const Shape& s, Elem elem) {
  return {blocked_tag(), elem, blocked_floats({1, s[1], s[2], s[3]})};
}

// Reorders the images of `s` from one layout and element type to another,
// split over images; oneDNN's primitive cache keeps the reorder primitives.
void reorder_images(Backend& backend, const Shape& s, const void* from, Side in, void* to,
                    Side out) {
  CpuBackend& be = cpu(backend);
  const int count = dnnl_conv::parts(static_cast<int>(s[0]));
  for_chunks(be, static_cast<std::size_t>(s[0]), count, [&](int, std::size_t b, std::size_t e) {
    const Shape part{static_cast<std::int64_t>(e - b), s[1], s[2], s[3]};
    const memory::desc src_desc(dims(part), data_type(in.elem), in.tag);
    const memory::desc dst_desc(dims(part), data_type(out.elem), out.tag);
    const auto i = static_cast<std::int64_t>(b);
    memory src = wrap(src_desc, at(from, i * in.image, in.elem));
    memory dst = wrap(dst_desc, at(to, i * out.image, out.elem));
    try {
      OneOmpThread one;
      dnnl::reorder(src, dst).execute(dnnl_conv::stream(), src, dst);
      dnnl_conv::stream().wait();
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kInternal, std::string("blocked reorder: oneDNN failed: ") + e.what());
    }
  });
}

}  // namespace

bool available(Backend& backend) noexcept {
  const auto* cpu = dynamic_cast<CpuBackend*>(&backend);
  return cpu && cpu->dnnl_convolutions();
}

int bf16_support() noexcept {
  try {
    if (isa_has(dnnl::cpu_isa::avx512_core_bf16) || isa_has(dnnl::cpu_isa::avx512_core_amx))
      return 2;
    return has_avx512() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

std::string isa_name() {
  const auto isa = dnnl::get_effective_cpu_isa();
  if (isa_has(dnnl::cpu_isa::avx512_core_amx)) return "avx512_core_amx";
  if (isa_has(dnnl::cpu_isa::avx512_core_bf16)) return "avx512_core_bf16";
  if (isa_has(dnnl::cpu_isa::avx512_core)) return "avx512_core";
  if (isa_has(dnnl::cpu_isa::avx2)) return "avx2";
  return isa == dnnl::cpu_isa::sse41 ? "sse41" : "below avx2";
}

int block_channels() {
  return blocked_tag() == Tag::nChw16c ? 16 : 8;
}

std::int64_t blocked_floats(const Shape& s) {
  const std::int64_t b = block_channels();
  return s[0] * ((s[1] + b - 1) / b * b) * s[2] * s[3];
}

void to_blocked(Backend& backend, const Tensor& x, void* to, Elem elem, bool plain) {
  const Shape& s = x.shape();
  reorder_images(backend, s, x.data<float>(), plain_side(s, Elem::kF32), to,
                 plain ? plain_side(s, elem) : blocked_side(s, elem));
}

void to_plain(Backend& backend, const void* from, Tensor& y, Elem elem) {
  const Shape& s = y.shape();
  reorder_images(backend, s, from, blocked_side(s, elem), y.data<float>(),
                 plain_side(s, Elem::kF32));
}

// One part of a forward: images [n0, n0 + n) or, for one image, output
// channels [k0, k0 + k).
struct Part {
  dnnl::convolution_forward primitive;
  memory::desc src, dst, bias, weights, scratch;
  std::string implementation;  // oneDNN's name for the kernel it chose
  std::int64_t x_offset = 0, y_offset = 0, k0 = 0;
  std::size_t weights_index = 0;  // into Impl::weights
};

struct Plan {
  std::vector<Part> parts;
  std::size_t scratch_floats = 0;  // per part
};

struct Conv::Impl {
  const float* w = nullptr;
  const float* bias = nullptr;
  Shape w_shape;
  Conv2dParams params{};
  bool relu = false;
  Elem elem = Elem::kF32;
  // Plans by (N, C, H, W, x_plain, accumulate), created on first use.
  std::map<std::array<std::int64_t, 6>, Plan> plans;
  // Reordered weights by (first output channel, layout).
  struct Weights {
    std::int64_t k0, k;
    memory::desc desc;
    memory data;
  };
  std::vector<Weights> weights;

  Plan make_plan(const Shape& x, bool x_plain, bool accumulate);
  Part make_part(const Shape& x, bool x_plain, bool accumulate, bool winograd, std::int64_t n0,
                 std::int64_t n, std::int64_t k0, std::int64_t k);
  std::size_t weights_for(std::int64_t k0, std::int64_t k, const memory::desc& desc);
  bool winograd_fits(const Shape& x, bool x_plain) const;
};

Conv::Conv() : impl_(std::make_unique<Impl>()) {}
Conv::~Conv() = default;
Conv::Conv(Conv&&) noexcept = default;
Conv& Conv::operator=(Conv&&) noexcept = default;

void Conv::set_weights(const Tensor& w, const Tensor& bias, const Conv2dParams& params, bool relu,
                       Elem elem) {
  if (params.groups != 1) {
    throw InvalidArgument("blocked conv2d: groups must be 1, got " + std::to_string(params.groups));
  }
  impl_->w = w.data<float>();
  impl_->bias = bias.defined() ? bias.data<float>() : nullptr;
  impl_->w_shape = w.shape();
  impl_->params = params;
  impl_->relu = relu;
  impl_->elem = elem;
  impl_->plans.clear();
  impl_->weights.clear();
}

std::size_t Conv::Impl::weights_for(std::int64_t k0, std::int64_t k, const memory::desc& desc) {
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i].k0 == k0 && weights[i].k == k && weights[i].desc == desc) return i;
  }
  const std::int64_t per = w_shape[1] * w_shape[2] * w_shape[3];
  const memory::desc plain({k, w_shape[1], w_shape[2], w_shape[3]}, kF32, Tag::oihw);
  memory from = wrap(plain, w + k0 * per), to(desc, engine());
  dnnl::reorder(from, to).execute(dnnl_conv::stream(), from, to);
  dnnl_conv::stream().wait();
  weights.push_back({k0, k, desc, to});
  return weights.size() - 1;
}

Part Conv::Impl::make_part(const Shape& x, bool x_plain, bool accumulate, bool winograd,
                           std::int64_t n0, std::int64_t n, std::int64_t k0, std::int64_t k) {
  require_address_space(dnnl_conv::kDnnlCreateHeadroom, "creating a oneDNN convolution");
  const Shape y = conv2d_output_shape(x, w_shape, params);
  Part part;
  part.k0 = k0;
  const memory::data_type dt = data_type(elem);
  part.src = memory::desc({n, x[1], x[2], x[3]}, dt, x_plain ? Tag::nchw : blocked_tag());
  part.dst = memory::desc({n, k, y[2], y[3]}, dt, blocked_tag());
  part.bias = memory::desc({k}, kF32, Tag::x);
  const memory::desc w_any({k, x[1], w_shape[2], w_shape[3]}, dt, Tag::any);
  const memory::dims strides{params.stride_h, params.stride_w};
  const memory::dims dilates{params.dilation_h - 1, params.dilation_w - 1};
  const memory::dims pad{params.pad_h, params.pad_w};
  dnnl::post_ops ops;
  if (accumulate) ops.append_sum(1.0f);
  if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto pd_for = [&](dnnl::algorithm alg) {
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto desc = bias ? dnnl::convolution_forward::desc(prop, alg, part.src, w_any, part.bias,
                                                             part.dst, strides, dilates, pad, pad)
                           : dnnl::convolution_forward::desc(prop, alg, part.src, w_any, part.dst,
                                                             strides, dilates, pad, pad);
    return dnnl::convolution_forward::primitive_desc(desc, attr, engine());
  };
  dnnl::convolution_forward::primitive_desc pd;
  if (winograd && elem == Elem::kF32) {
    try {
      pd = pd_for(dnnl::algorithm::convolution_winograd);
    } catch (const dnnl::error&) {
      // No Winograd kernel for this shape or these post-ops: the direct one.
    }
  }
  if (!pd) pd = pd_for(dnnl::algorithm::convolution_direct);
  part.primitive = dnnl::convolution_forward(pd);
  part.implementation = pd.impl_info_str();
  part.scratch = pd.scratchpad_desc();
  part.weights = pd.weights_desc();
  part.weights_index = weights_for(k0, k, part.weights);
  part.x_offset = n0 * (x_plain ? x[1] * x[2] * x[3] : blocked_floats({1, x[1], x[2], x[3]}));
  part.y_offset = n0 * blocked_floats({1, y[1], y[2], y[3]}) + k0 * y[2] * y[3];
  return part;
}

// Winograd F(2x2, 3x3) (oneDNN's jit_fp32_wino_2x3, AVX-512 only) for a 3x3
// stride-1 convolution of at least 32 input and output channels: a batch
// (parts of whole images), or one image of at least 64 input channels split
// into two halves of the output channels (more parts would each transform the
// whole input again). Below those sizes the direct kernels win; the table
// behind the thresholds is bench_engine_winograd's (bench/RESULTS.md,
// "Winograd"). The choice depends on the shape only, never on the thread
// count or a timing.
bool Conv::Impl::winograd_fits(const Shape& x, bool x_plain) const {
  const bool shape = !x_plain && w_shape[2] == 3 && w_shape[3] == 3 && params.stride_h == 1 &&
                     params.stride_w == 1 && params.dilation_h == 1 && params.dilation_w == 1 &&
                     x[1] >= 32 && w_shape[0] >= 32;
  return shape && (x[0] > 1 || (x[1] >= 64 && w_shape[0] >= 2 * block_channels())) &&
         winograd_available();
}

Plan Conv::Impl::make_plan(const Shape& x, bool x_plain, bool accumulate) {
  Plan plan;
  const std::int64_t kb = block_channels(), k_total = w_shape[0];
  const std::int64_t blocks = (k_total + kb - 1) / kb;
  const bool channels = x[0] == 1;  // one image: blocks of output channels
  const std::int64_t total = channels ? blocks : x[0];
  const bool winograd = winograd_fits(x, x_plain);
  // One image: parts of at least 32 output channels (two halves at least),
  // at most 8. oneDNN's direct kernel blocks two 16-channel groups of outputs
  // per input it loads; a 16-channel part runs at half its speed (the 64-
  // channel layers after the stems: 1.4-2x slower in 4 parts than in 2).
  const std::int64_t wide = std::max<std::int64_t>(2, k_total / 32);
  const int count = !channels  ? dnnl_conv::parts(static_cast<int>(total))
                    : winograd ? 2
                               : dnnl_conv::parts(static_cast<int>(std::min(blocks, wide)));
  OneOmpThread one;
  for (int j = 0; j < count; ++j) {
    const std::int64_t b = j * total / count, e = (j + 1) * total / count;
    Part part = channels ? make_part(x, x_plain, accumulate, winograd, 0, 1, b * kb,
                                     std::min(e * kb, k_total) - b * kb)
                         : make_part(x, x_plain, accumulate, winograd, b, e - b, 0, k_total);
    plan.scratch_floats =
        std::max(plan.scratch_floats, dnnl_conv::align16(part.scratch.get_size() / sizeof(float)));
    plan.parts.push_back(std::move(part));
  }
  return plan;
}

void Conv::forward(Backend& backend, const Shape& x, const void* xp, bool x_plain, void* yp,
                   bool accumulate) {
  CpuBackend& be = cpu(backend);
  Impl& im = *impl_;
  const std::array<std::int64_t, 6> key{x[0], x[1], x[2], x[3], x_plain, accumulate};
  auto it = im.plans.find(key);
  if (it == im.plans.end()) {
    try {
      it = im.plans.emplace(key, im.make_plan(x, x_plain, accumulate)).first;
    } catch (const dnnl::error& e) {
      throw Error(
          ErrorCode::kInternal,
          std::string("blocked conv2d: oneDNN has no convolution for this shape: ") + e.what());
    }
  }
  const Plan& plan = it->second;
  float* ws = be.workspace(std::max<std::size_t>(1, plan.scratch_floats * plan.parts.size()));
  const auto count = static_cast<int>(plan.parts.size());
  for_chunks(be, plan.parts.size(), count, [&](int chunk, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const Part& part = plan.parts[i];
      dnnl_conv::Args args{
          {DNNL_ARG_SRC, wrap(part.src, at(xp, part.x_offset, im.elem))},
          {DNNL_ARG_WEIGHTS, im.weights[part.weights_index].data},
          {DNNL_ARG_DST, wrap(part.dst, at(yp, part.y_offset, im.elem))},
          {DNNL_ARG_SCRATCHPAD,
           wrap(part.scratch, ws + plan.scratch_floats * static_cast<std::size_t>(chunk))}};
      if (im.bias) args.emplace(DNNL_ARG_BIAS, wrap(part.bias, im.bias + part.k0));
      try {
        OneOmpThread one;
        part.primitive.execute(dnnl_conv::stream(), args);
        dnnl_conv::stream().wait();
      } catch (const dnnl::error& e) {
        throw Error(ErrorCode::kInternal,
                    std::string("blocked conv2d: oneDNN failed: ") + e.what());
      }
    }
  });
}

std::string Conv::implementations() const {
  std::string out;
  for (const auto& [key, plan] : impl_->plans) {
    for (const Part& part : plan.parts) {
      const std::string& name = part.implementation;
      if (out.find(name) == std::string::npos) out += (out.empty() ? "" : ", ") + name;
    }
  }
  return out;
}

#endif  // STOKE_HAVE_DNNL

}  // namespace stoke::cpu::blocked
