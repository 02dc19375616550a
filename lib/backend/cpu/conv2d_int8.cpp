// int8 inference convolutions through oneDNN (conv2d_int8.hpp). Costs beside
// the int8 convolution itself, per layer: the quantizing reorder of its input
// and the reorder of its fp32 output from NHWC into the blocked layout (two
// with a residual); an int8 program in NHWC throughout would save them.
#include "backend/cpu/conv2d_int8.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "backend/cpu/cpu_backend.hpp"
#include "stoke/error.hpp"

#if STOKE_HAVE_DNNL
#include "backend/cpu/conv2d_dnnl_primitive.hpp"
#endif

namespace stoke::cpu::int8 {

InputQuantization input_quantization(const ActivationRange& r, bool reduce_range) {
  if (!std::isfinite(r.min) || !std::isfinite(r.max) || !(r.min <= r.max)) {
    throw InvalidArgument("int8: calibrated input range [" + std::to_string(r.min) + ", " +
                          std::to_string(r.max) + "] is not a finite interval");
  }
  InputQuantization q;
  q.is_unsigned = r.min >= 0.0f;
  const float top = q.is_unsigned ? r.max : std::max(-r.min, r.max);
  q.scale = top > 0.0f ? top / (q.is_unsigned && !reduce_range ? 255.0f : 127.0f) : 1.0f;
  if (!(q.scale > 0.0f) || !std::isfinite(1.0f / q.scale)) q.scale = 1.0f;  // subnormal range
  return q;
}

// std::nearbyint rounds half to even in the default rounding mode, as
// oneDNN's reorders (cvtps2dq) do.
std::uint8_t quantize_u8(float x, float inverse_scale) noexcept {
  const float v = std::nearbyint(x * inverse_scale);
  return static_cast<std::uint8_t>(std::clamp(std::isnan(v) ? 0.0f : v, 0.0f, 255.0f));
}
std::int8_t quantize_s8(float x, float inverse_scale) noexcept {
  const float v = std::nearbyint(x * inverse_scale);
  return static_cast<std::int8_t>(std::clamp(std::isnan(v) ? 0.0f : v, -127.0f, 127.0f));
}

std::vector<float> weight_scales(const float* w, std::int64_t k, std::int64_t per) {
  std::vector<float> s(static_cast<std::size_t>(k), 1.0f);
  for (std::int64_t o = 0; o < k; ++o) {
    float top = 0.0f;
    for (std::int64_t i = 0; i < per; ++i) top = std::max(top, std::fabs(w[o * per + i]));
    if (!std::isfinite(top)) {
      throw InvalidArgument("int8: output channel " + std::to_string(o) +
                            " of a convolution has a non-finite weight");
    }
    if (top > 0.0f && std::isfinite(127.0f / top)) s[static_cast<std::size_t>(o)] = top / 127.0f;
  }
  return s;
}

std::vector<float> quantize_weights(const float* w, std::int64_t k, std::int64_t per,
                                    const std::vector<float>& scales) {
  std::vector<float> q(static_cast<std::size_t>(k * per));
  for (std::int64_t o = 0; o < k; ++o) {
    const float s = scales[static_cast<std::size_t>(o)];
    for (std::int64_t i = 0; i < per; ++i) {
      const float v = std::nearbyint(w[o * per + i] / s);
      q[static_cast<std::size_t>(o * per + i)] = std::clamp(v, -127.0f, 127.0f);
    }
  }
  return q;
}

#if !STOKE_HAVE_DNNL

int support() noexcept {
  return 0;
}
struct Conv::Impl {};
Conv::Conv() = default;
Conv::~Conv() = default;
Conv::Conv(Conv&&) noexcept = default;
Conv& Conv::operator=(Conv&&) noexcept = default;
void Conv::set_weights(const Tensor&, const Tensor&, const Conv2dParams&, bool,
                       const ActivationRange&) {
  throw Error(ErrorCode::kInternal, "int8 conv2d: stoke was built without oneDNN");
}
void Conv::forward(Backend&, const Shape&, const void*, bool, void*, bool) {
  throw Error(ErrorCode::kInternal, "int8 conv2d: stoke was built without oneDNN");
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

bool isa_has(dnnl::cpu_isa level) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto want = static_cast<unsigned>(level);
  return (isa & want) == want;
}

Tag blocked_tag() {
  return blocked::block_channels() == 16 ? Tag::nChw16c : Tag::nChw8c;
}

CpuBackend& cpu(Backend& be) {
  auto* c = dynamic_cast<CpuBackend*>(&be);
  if (!c) throw InvalidArgument("int8 conv2d: needs the CPU backend, got " + be.name());
  return *c;
}

constexpr std::size_t kAlign = 64;  // bytes
std::size_t aligned(std::size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

int support() noexcept {
  try {
    if (isa_has(dnnl::cpu_isa::avx512_core_vnni) || isa_has(dnnl::cpu_isa::avx2_vnni) ||
        isa_has(dnnl::cpu_isa::avx512_core_amx))
      return 2;
    return isa_has(dnnl::cpu_isa::avx2) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

namespace {

// One part of a forward: images [n0, n0 + n) or, for one image, output
// channels [k0, k0 + k) (the split of blocked::Conv). oneDNN 2.6's fast int8
// kernels (brgconv, jit_int8) read and write NHWC only (any blocked side
// falls to ref_int8), so a part writes NHWC fp32 into its own buffer, which
// a reorder moves into the blocked output; a residual goes the other way first.
struct Part {
  dnnl::convolution_forward primitive;
  dnnl::reorder to_blocked, from_blocked;  // the part's output; its residual
  memory::desc src, dst, blocked, bias, scratch;
  std::string implementation;
  std::int64_t x_offset = 0, y_offset = 0, k0 = 0;  // bytes into the quantized input; floats
  std::size_t weights_index = 0;
};

struct Plan {
  std::vector<Part> parts;
  std::size_t part_bytes = 0;   // per part, aligned: its scratchpad, then its NHWC output
  std::size_t input_bytes = 0;  // the quantized input, aligned
};

}  // namespace

struct Conv::Impl {
  Shape w_shape;
  Conv2dParams params{};
  bool relu = false;
  InputQuantization in;
  std::vector<float> wq, out_scale, bias_q;  // w_q; s_x * s_w[k]; bias[k] / that
  std::map<std::array<std::int64_t, 6>, Plan> plans;
  struct Weights {
    std::int64_t k0, k;
    memory::desc desc;
    memory data;
  };
  std::vector<Weights> weights;

  memory::data_type src_type() const {
    return in.is_unsigned ? memory::data_type::u8 : memory::data_type::s8;
  }
  std::size_t weights_for(std::int64_t k0, std::int64_t k, const memory::desc& desc);
  Part make_part(const Shape& x, bool accumulate, std::int64_t n0, std::int64_t n, std::int64_t k0,
                 std::int64_t k);
  Plan make_plan(const Shape& x, bool accumulate);
  void quantize_input(CpuBackend& be, const Shape& x, const void* from, bool x_plain,
                      void* to) const;
};

Conv::Conv() : impl_(std::make_unique<Impl>()) {}
Conv::~Conv() = default;
Conv::Conv(Conv&&) noexcept = default;
Conv& Conv::operator=(Conv&&) noexcept = default;

void Conv::set_weights(const Tensor& w, const Tensor& bias, const Conv2dParams& params, bool relu,
                       const ActivationRange& input_range) {
  if (params.groups != 1) {
    throw InvalidArgument("int8 conv2d: groups must be 1, got " + std::to_string(params.groups));
  }
  Impl& im = *impl_;
  im.w_shape = w.shape();
  im.params = params;
  im.relu = relu;
  im.in = input_quantization(input_range, support() < 2);
  const std::int64_t k = im.w_shape[0], per = im.w_shape[1] * im.w_shape[2] * im.w_shape[3];
  const std::vector<float> ws = weight_scales(w.data<float>(), k, per);
  im.wq = quantize_weights(w.data<float>(), k, per, ws);
  im.out_scale.assign(static_cast<std::size_t>(k), 0.0f);
  im.bias_q.assign(static_cast<std::size_t>(k), 0.0f);
  const float* b = bias.defined() ? bias.data<float>() : nullptr;
  for (std::size_t o = 0; o < static_cast<std::size_t>(k); ++o) {
    im.out_scale[o] = im.in.scale * ws[o];
    if (b) im.bias_q[o] = b[o] / im.out_scale[o];
  }
  im.plans.clear();
  im.weights.clear();
}

std::size_t Conv::Impl::weights_for(std::int64_t k0, std::int64_t k, const memory::desc& desc) {
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i].k0 == k0 && weights[i].k == k && weights[i].desc == desc) return i;
  }
  // Integer-valued floats to s8: exact (oneDNN adds the s8-input compensation).
  const std::int64_t per = w_shape[1] * w_shape[2] * w_shape[3];
  const memory::desc plain({k, w_shape[1], w_shape[2], w_shape[3]}, kF32, Tag::oihw);
  memory from = wrap(plain, wq.data() + k0 * per), to(desc, engine());
  dnnl::reorder(from, to).execute(dnnl_conv::stream(), from, to);
  dnnl_conv::stream().wait();
  weights.push_back({k0, k, desc, to});
  return weights.size() - 1;
}

Part Conv::Impl::make_part(const Shape& x, bool accumulate, std::int64_t n0, std::int64_t n,
                           std::int64_t k0, std::int64_t k) {
  require_address_space(dnnl_conv::kDnnlCreateHeadroom, "creating a oneDNN int8 convolution");
  const Shape y = conv2d_output_shape(x, w_shape, params);
  Part part;
  part.k0 = k0;
  part.src = memory::desc({n, x[1], x[2], x[3]}, src_type(), Tag::nhwc);
  part.dst = memory::desc({n, k, y[2], y[3]}, kF32, Tag::nhwc);
  part.blocked = memory::desc({n, k, y[2], y[3]}, kF32, blocked_tag());
  part.to_blocked =
      dnnl::reorder(dnnl::reorder::primitive_desc(engine(), part.dst, engine(), part.blocked));
  if (accumulate) {
    part.from_blocked =
        dnnl::reorder(dnnl::reorder::primitive_desc(engine(), part.blocked, engine(), part.dst));
  }
  part.bias = memory::desc({k}, kF32, Tag::x);
  const memory::desc w_any({k, x[1], w_shape[2], w_shape[3]}, memory::data_type::s8, Tag::any);
  dnnl::post_ops ops;
  if (accumulate) ops.append_sum(1.0f);
  if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(1 << 1,
                         std::vector<float>(out_scale.begin() + k0, out_scale.begin() + k0 + k));
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, part.src, w_any,
      part.bias, part.dst, {params.stride_h, params.stride_w},
      {params.dilation_h - 1, params.dilation_w - 1}, {params.pad_h, params.pad_w},
      {params.pad_h, params.pad_w});
  const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine());
  part.primitive = dnnl::convolution_forward(pd);
  part.implementation = pd.impl_info_str();
  part.scratch = pd.scratchpad_desc();
  part.weights_index = weights_for(k0, k, pd.weights_desc());
  part.x_offset = n0 * x[1] * x[2] * x[3];
  part.y_offset = n0 * blocked::blocked_floats({1, y[1], y[2], y[3]}) + k0 * y[2] * y[3];
  return part;
}

Plan Conv::Impl::make_plan(const Shape& x, bool accumulate) {
  Plan plan;
  const std::int64_t kb = blocked::block_channels(), k_total = w_shape[0];
  const std::int64_t blocks = (k_total + kb - 1) / kb;
  const bool channels = x[0] == 1;
  const std::int64_t total = channels ? blocks : x[0];
  const std::int64_t wide = std::max<std::int64_t>(2, k_total / 32);
  const int count = dnnl_conv::parts(static_cast<int>(channels ? std::min(blocks, wide) : total));
  OneOmpThread one;
  for (int j = 0; j < count; ++j) {
    const std::int64_t b = j * total / count, e = (j + 1) * total / count;
    Part part = channels
                    ? make_part(x, accumulate, 0, 1, b * kb, std::min(e * kb, k_total) - b * kb)
                    : make_part(x, accumulate, b, e - b, 0, k_total);
    plan.part_bytes =
        std::max(plan.part_bytes, aligned(part.scratch.get_size()) + aligned(part.dst.get_size()));
    plan.parts.push_back(std::move(part));
  }
  plan.input_bytes = aligned(static_cast<std::size_t>(shape_numel(x)));
  return plan;
}

// fp32 x (blocked, or NCHW when x_plain) -> u8/s8 NHWC at `to`, split over images.
void Conv::Impl::quantize_input(CpuBackend& be, const Shape& x, const void* from, bool x_plain,
                                void* to) const {
  const int count = dnnl_conv::parts(static_cast<int>(x[0]));
  const std::int64_t in_image =
      x_plain ? x[1] * x[2] * x[3] : blocked::blocked_floats({1, x[1], x[2], x[3]});
  const std::int64_t out_image = x[1] * x[2] * x[3];
  for_chunks(be, static_cast<std::size_t>(x[0]), count, [&](int, std::size_t b, std::size_t e) {
    const memory::dims part{static_cast<std::int64_t>(e - b), x[1], x[2], x[3]};
    const auto i = static_cast<std::int64_t>(b);
    memory src = wrap(memory::desc(part, kF32, x_plain ? Tag::nchw : blocked_tag()),
                      static_cast<const float*>(from) + i * in_image);
    memory dst = wrap(memory::desc(part, src_type(), Tag::nhwc),
                      static_cast<const void*>(static_cast<char*>(to) + i * out_image));
    dnnl::primitive_attr attr;
    attr.set_output_scales(0, {1.0f / in.scale});
    try {
      OneOmpThread one;
      dnnl::reorder(src, dst, attr).execute(dnnl_conv::stream(), src, dst);
      dnnl_conv::stream().wait();
    } catch (const dnnl::error& err) {
      throw Error(ErrorCode::kInternal, std::string("int8 quantize: oneDNN failed: ") + err.what());
    }
  });
}

void Conv::forward(Backend& backend, const Shape& x, const void* xp, bool x_plain, void* yp,
                   bool accumulate) {
  CpuBackend& be = cpu(backend);
  Impl& im = *impl_;
  const std::array<std::int64_t, 6> key{x[0], x[1], x[2], x[3], 0, accumulate};
  auto it = im.plans.find(key);
  if (it == im.plans.end()) {
    try {
      it = im.plans.emplace(key, im.make_plan(x, accumulate)).first;
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kInternal,
                  std::string("int8 conv2d: oneDNN has no int8 convolution for input ") +
                      shape_to_string(x) + " and weights " + shape_to_string(im.w_shape) + ": " +
                      e.what());
    }
  }
  const Plan& plan = it->second;
  const std::size_t bytes = plan.input_bytes + plan.part_bytes * plan.parts.size();
  char* ws = reinterpret_cast<char*>(be.workspace(std::max<std::size_t>(1, (bytes + 3) / 4)));
  im.quantize_input(be, x, xp, x_plain, ws);
  const auto count = static_cast<int>(plan.parts.size());
  for_chunks(be, plan.parts.size(), count, [&](int chunk, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const Part& part = plan.parts[i];
      char* own = ws + plan.input_bytes + plan.part_bytes * static_cast<std::size_t>(chunk);
      memory out = wrap(part.dst, static_cast<const void*>(own + aligned(part.scratch.get_size())));
      memory blocked = wrap(part.blocked, static_cast<float*>(yp) + part.y_offset);
      dnnl_conv::Args args{
          {DNNL_ARG_SRC, wrap(part.src, static_cast<const void*>(ws + part.x_offset))},
          {DNNL_ARG_WEIGHTS, im.weights[part.weights_index].data},
          {DNNL_ARG_BIAS, wrap(part.bias, im.bias_q.data() + part.k0)},
          {DNNL_ARG_DST, out},
          {DNNL_ARG_SCRATCHPAD, wrap(part.scratch, static_cast<const void*>(own))}};
      try {
        OneOmpThread one;
        if (accumulate) part.from_blocked.execute(dnnl_conv::stream(), blocked, out);
        part.primitive.execute(dnnl_conv::stream(), args);
        part.to_blocked.execute(dnnl_conv::stream(), out, blocked);
        dnnl_conv::stream().wait();
      } catch (const dnnl::error& err) {
        throw Error(ErrorCode::kInternal, std::string("int8 conv2d: oneDNN failed: ") + err.what());
      }
    }
  });
}

std::string Conv::implementations() const {
  std::string out;
  for (const auto& [key, plan] : impl_->plans) {
    for (const Part& part : plan.parts) {
      const std::string name = part.implementation + " (int8)";
      if (out.find(name) == std::string::npos) out += (out.empty() ? "" : ", ") + name;
    }
  }
  return out;
}

#endif  // STOKE_HAVE_DNNL

}  // namespace stoke::cpu::int8
