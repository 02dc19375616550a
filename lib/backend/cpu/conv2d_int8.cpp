// int8 inference convolutions through oneDNN (conv2d_int8.hpp). Costs beside
// the int8 convolution itself, per layer: the quantizing reorder of a fp32
// input (none for kCodes), and a reorder of the output (two with a residual)
// where it cannot be written in place: a blocked output, or an NHWC one split
// over output channels (one image: each part's channels are strided there).
#include "backend/cpu/conv2d_int8.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>

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
InputQuantization Conv::input() const noexcept {
  return {};
}
void Conv::set_output_codes(const InputQuantization&) {
  throw Error(ErrorCode::kInternal, "int8 conv2d: stoke was built without oneDNN");
}
void Conv::forward(Backend&, const Shape&, const void*, Layout, void*, Layout, bool,
                   const Residual*) {
  throw Error(ErrorCode::kInternal, "int8 conv2d: stoke was built without oneDNN");
}
std::string Conv::implementations() const {
  return {};
}
void Conv::quantize(Backend&, const Shape&, const void*, Layout, void*) const {
  throw Error(ErrorCode::kInternal, "int8 conv2d: stoke was built without oneDNN");
}
void nhwc_to_blocked(Backend&, const Shape&, const void*, void*) {
  throw Error(ErrorCode::kInternal, "int8 conv2d: stoke was built without oneDNN");
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

// One part of a forward: images, or for one image bands of output rows (an
// NHWC output) or of output channels (a blocked one: the split of
// blocked::Conv). oneDNN 2.6's fast int8 kernels (brgconv, jit_int8) read and
// write dense NHWC only (any blocked side falls to ref_int8). In NHWC an
// image's band of rows is contiguous, in the input as in the output (its
// padding rows given to the part's convolution), so a part writes its NHWC
// output in place; a blocked output goes into the part's own buffer, which a
// reorder moves into the output's view (a residual goes the other way first).
struct Part {
  dnnl::convolution_forward primitive;
  dnnl::reorder to_out, from_out;  // own buffer -> the output's view; a residual back
  dnnl::reorder gather;            // a Residual's view -> the part's own copy (not direct)
  memory::desc src, dst, view, bias, scratch;
  memory::desc src1, src1_view;  // a Residual: as the part reads it; its view in the buffer
  bool direct = false;           // dst is the output's view itself (and src1 the residual's)
  std::string implementation;
  std::int64_t x_offset = 0, y_offset = 0, k0 = 0;  // bytes into the input codes and the output
  std::int64_t r_offset = 0;                        // bytes into a Residual's buffer
  std::size_t weights_index = 0;
};

// The post-op argument of a Residual: the first post-op.
constexpr int kResidualArg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1;

// A part's share of the output: images [n0, n0 + n), channels [k0, k0 + k),
// rows [p0, p1).
struct Share {
  std::int64_t n0, n, k0, k, p0, p1;
};

struct Plan {
  std::vector<Part> parts;
  // per part, aligned: its scratchpad, its own output, its own residual copy
  std::size_t part_bytes = 0;
  std::size_t input_bytes = 0;  // the quantized input, aligned
};

}  // namespace

struct Conv::Impl {
  Shape w_shape;
  Conv2dParams params{};
  bool relu = false;
  InputQuantization in;
  std::optional<InputQuantization> codes;    // a kCodes output's quantization
  std::vector<float> wq, out_scale, bias_q;  // w_q; s_x * s_w[k]; bias[k] / that
  // input shape, output layout, accumulate, the Residual's kind and scale
  std::map<std::array<std::int64_t, 8>, Plan> plans;
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
  Part make_part(const Shape& x, Layout out, bool accumulate, const Residual* residual,
                 const Share& share);
  Plan make_plan(const Shape& x, Layout out, bool accumulate, const Residual* residual,
                 int threads);
  void quantize_input(CpuBackend& be, const Shape& x, const void* from, Layout layout,
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
  im.codes.reset();
  im.plans.clear();
  im.weights.clear();
}

InputQuantization Conv::input() const noexcept {
  return impl_->in;
}

void Conv::set_output_codes(const InputQuantization& next) {
  impl_->codes = next;
  impl_->plans.clear();
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

Part Conv::Impl::make_part(const Shape& x, Layout out, bool accumulate, const Residual* residual,
                           const Share& share) {
  require_address_space(dnnl_conv::kDnnlCreateHeadroom, "creating a oneDNN int8 convolution");
  const Shape y = conv2d_output_shape(x, w_shape, params);
  const std::int64_t k_total = y[1], pq = y[2] * y[3], n = share.n, k = share.k;
  const std::int64_t rows = share.p1 - share.p0;
  const bool to_codes = out == Layout::kCodes;
  const auto dst_type = !to_codes            ? kF32
                        : codes->is_unsigned ? memory::data_type::u8
                                             : memory::data_type::s8;
  // A band of rows reads input rows [top, bottom], its window clamped to the
  // image, the rest of the window padding. All rows: the whole image with
  // the layer's padding (images after the first start H rows on).
  const bool all_rows = share.p0 == 0 && share.p1 == y[2];
  const std::int64_t reach = (w_shape[2] - 1) * params.dilation_h;
  const std::int64_t first = share.p0 * params.stride_h - params.pad_h;
  const std::int64_t last = (share.p1 - 1) * params.stride_h - params.pad_h + reach;
  const std::int64_t top = all_rows ? 0 : std::max<std::int64_t>(first, 0);
  const std::int64_t bottom = all_rows ? x[2] - 1 : std::min<std::int64_t>(last, x[2] - 1);
  const std::int64_t pad_top = all_rows ? params.pad_h : top - first;
  const std::int64_t pad_bottom = all_rows ? params.pad_h : last - bottom;
  Part part;
  part.k0 = share.k0;
  part.src = memory::desc({n, x[1], bottom - top + 1, x[3]}, src_type(), Tag::nhwc);
  part.dst = memory::desc({n, k, rows, y[3]}, dst_type, Tag::nhwc);
  // In an NHWC tensor like the output: the part's first element, and the
  // strides of its channels among all of them.
  const std::int64_t nhwc_first = share.n0 * k_total * pq + share.p0 * y[3] * k_total + share.k0;
  const memory::dims nhwc_strides{k_total * pq, 1, y[3] * k_total, k_total};
  if (out == Layout::kBlocked) {  // all rows: make_plan bands NHWC outputs only
    part.view = memory::desc({n, k, y[2], y[3]}, kF32, blocked_tag());
    part.y_offset =
        (share.n0 * blocked::blocked_floats({1, k_total, y[2], y[3]}) + share.k0 * pq) * 4;
  } else {
    part.view = memory::desc({n, k, rows, y[3]}, dst_type, nhwc_strides);
    part.y_offset = nhwc_first * (to_codes ? 1 : 4);
  }
  part.direct = out != Layout::kBlocked && k == k_total;
  if (residual) {  // NHWC like the output: the same offset and view, in its own type
    const bool codes_in = residual->codes.has_value();
    const auto type = !codes_in                      ? kF32
                      : residual->codes->is_unsigned ? memory::data_type::u8
                                                     : memory::data_type::s8;
    part.src1 = memory::desc({n, k, rows, y[3]}, type, Tag::nhwc);
    part.src1_view = memory::desc({n, k, rows, y[3]}, type, nhwc_strides);
    part.r_offset = nhwc_first * (codes_in ? 1 : 4);
    if (!part.direct) {
      part.gather = dnnl::reorder(
          dnnl::reorder::primitive_desc(engine(), part.src1_view, engine(), part.src1));
    }
  }
  if (!part.direct) {
    part.to_out =
        dnnl::reorder(dnnl::reorder::primitive_desc(engine(), part.dst, engine(), part.view));
    if (accumulate) {
      part.from_out =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine(), part.view, engine(), part.dst));
    }
  }
  part.bias = memory::desc({k}, kF32, Tag::x);
  const memory::desc w_any({k, x[1], w_shape[2], w_shape[3]}, memory::data_type::s8, Tag::any);
  // The sum is scaled into the unit of what is added to it (a Residual's
  // codes: their scale), then into the output's (the next layer's codes:
  // their scale, and quantize_u8 / quantize_s8's clamp; fp32: 1).
  const float out_unit = to_codes ? codes->scale : 1.0f;
  const float unit = !residual ? out_unit : residual->codes ? residual->codes->scale : 1.0f;
  dnnl::post_ops ops;
  if (residual) ops.append_binary(dnnl::algorithm::binary_add, part.src1);  // kResidualArg
  if (accumulate) ops.append_sum(1.0f);
  if (unit != out_unit)
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, unit / out_unit, 0.0f);
  if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  std::vector<float> scales(out_scale.begin() + share.k0, out_scale.begin() + share.k0 + k);
  for (float& v : scales) v /= unit;
  if (to_codes) {
    const float hi = codes->is_unsigned && support() == 2 ? 255.0f : 127.0f;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, codes->is_unsigned ? 0.0f : -127.0f,
                       hi);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_output_scales(1 << 1, scales);
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, part.src, w_any,
      part.bias, part.dst, {params.stride_h, params.stride_w},
      {params.dilation_h - 1, params.dilation_w - 1}, {pad_top, params.pad_w},
      {pad_bottom, params.pad_w});
  const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine());
  part.primitive = dnnl::convolution_forward(pd);
  part.implementation = pd.impl_info_str();
  part.scratch = pd.scratchpad_desc();
  part.weights_index = weights_for(share.k0, k, pd.weights_desc());
  part.x_offset = (share.n0 * x[2] + top) * x[3] * x[1];
  return part;
}

// Images split over the parts; one image into bands of output rows (an NHWC
// output) or of channel blocks (a blocked one). Each output element is the
// same sum whatever the split, so results do not depend on it. At most one
// part per thread of the arena: each part is a primitive call of its own, and
// more parts than threads cost more than they balance (ResNet-18 at 224² on 2
// threads: batch 1 4.48 -> 4.13 ms, batch 32 112-122 -> 106-109 ms).
Plan Conv::Impl::make_plan(const Shape& x, Layout out, bool accumulate, const Residual* residual,
                           int threads) {
  Plan plan;
  const Shape y = conv2d_output_shape(x, w_shape, params);
  const std::int64_t kb = blocked::block_channels(), k_total = w_shape[0], p = y[2];
  const std::int64_t blocks = (k_total + kb - 1) / kb;
  // One image whose weights outweigh its input 4 times (ResNet's later
  // stages: 2.4 MB of 3x3 512 -> 512 weights for a 7x7 image) splits over
  // output channels: a band of rows would read every weight on every thread.
  const bool weights_heavy =
      w_shape[0] * w_shape[1] * w_shape[2] * w_shape[3] > 4 * x[1] * x[2] * x[3];
  const bool one = x[0] == 1, bands = one && out != Layout::kBlocked && !weights_heavy;
  const std::int64_t total = bands ? p : one ? blocks : x[0];
  const std::int64_t wide =
      bands ? std::max<std::int64_t>(2, p * y[3] / 256) : std::max<std::int64_t>(2, k_total / 32);
  const int count =
      std::min(dnnl_conv::parts(static_cast<int>(one ? std::min(total, wide) : total)),
               std::max(threads, 1));
  OneOmpThread one_thread;
  for (int j = 0; j < count; ++j) {
    const std::int64_t b = j * total / count, e = (j + 1) * total / count;
    const Share share = bands ? Share{0, 1, 0, k_total, b, e}
                        : one ? Share{0, 1, b * kb, std::min(e * kb, k_total) - b * kb, 0, p}
                              : Share{b, e - b, 0, k_total, 0, p};
    Part part = make_part(x, out, accumulate, residual, share);
    const std::size_t own =
        part.direct ? 0
                    : aligned(part.dst.get_size()) + (residual ? aligned(part.src1.get_size()) : 0);
    plan.part_bytes = std::max(plan.part_bytes, aligned(part.scratch.get_size()) + own);
    plan.parts.push_back(std::move(part));
  }
  plan.input_bytes = aligned(static_cast<std::size_t>(shape_numel(x)));
  return plan;
}

void Conv::quantize(Backend& backend, const Shape& x, const void* from, Layout in, void* to) const {
  impl_->quantize_input(cpu(backend), x, from, in, to);
}

// fp32 x in `layout` -> u8/s8 NHWC at `to`, split over images.
void Conv::Impl::quantize_input(CpuBackend& be, const Shape& x, const void* from, Layout layout,
                                void* to) const {
  // Over images; one NHWC or NCHW image over bands of rows (a network's input
  // on one thread took 0.14 ms of ResNet-18's 3.3 at 224²): contiguous on both
  // sides in NHWC, a strided view of each channel plane in NCHW.
  const bool plain = layout == Layout::kPlain;
  const bool bands = x[0] == 1 && (layout == Layout::kNhwc || plain);
  const std::int64_t total = bands ? x[2] : x[0];
  // One reorder per arena thread at most, as make_plan's parts.
  const int count =
      std::min(dnnl_conv::parts(static_cast<int>(bands ? std::min<std::int64_t>(total, 4) : total)),
               std::max(be.context().cpu_threads(), 1));
  const bool blocked = layout == Layout::kBlocked;
  const Tag tag = blocked ? blocked_tag() : layout == Layout::kPlain ? Tag::nchw : Tag::nhwc;
  const std::int64_t in_unit = bands     ? (plain ? x[3] : x[1] * x[3])
                               : blocked ? blocked::blocked_floats({1, x[1], x[2], x[3]})
                                         : x[1] * x[2] * x[3];
  const std::int64_t out_unit = bands ? x[1] * x[3] : x[1] * x[2] * x[3];
  for_chunks(be, static_cast<std::size_t>(total), count, [&](int, std::size_t b, std::size_t e) {
    const auto i = static_cast<std::int64_t>(b), items = static_cast<std::int64_t>(e - b);
    const memory::dims part =
        bands ? memory::dims{1, x[1], items, x[3]} : memory::dims{items, x[1], x[2], x[3]};
    const memory::desc src_desc =
        bands && plain ? memory::desc(part, kF32, {x[1] * x[2] * x[3], x[2] * x[3], x[3], 1})
                       : memory::desc(part, kF32, tag);
    memory src = wrap(src_desc, static_cast<const float*>(from) + i * in_unit);
    memory dst = wrap(memory::desc(part, src_type(), Tag::nhwc),
                      static_cast<const void*>(static_cast<char*>(to) + i * out_unit));
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

void Conv::forward(Backend& backend, const Shape& x, const void* xp, Layout in, void* yp,
                   Layout out, bool accumulate, const Residual* residual) {
  CpuBackend& be = cpu(backend);
  Impl& im = *impl_;
  if (out == Layout::kPlain || (out == Layout::kCodes && (accumulate || !im.codes)) ||
      (residual && (accumulate || out == Layout::kBlocked))) {
    throw Error(ErrorCode::kInternal,
                "int8 conv2d: no such output (kPlain, kCodes without set_output_codes or with "
                "accumulate, or a Residual with accumulate or a blocked output)");
  }
  std::int32_t residual_scale = 0;
  if (residual && residual->codes) std::memcpy(&residual_scale, &residual->codes->scale, 4);
  const std::int64_t residual_kind = !residual                      ? 0
                                     : !residual->codes             ? 1
                                     : residual->codes->is_unsigned ? 2
                                                                    : 3;
  const std::array<std::int64_t, 8> key{
      x[0],       x[1],          x[2],          x[3], static_cast<std::int64_t>(out),
      accumulate, residual_kind, residual_scale};
  auto it = im.plans.find(key);
  if (it == im.plans.end()) {
    try {
      it = im.plans
               .emplace(key, im.make_plan(x, out, accumulate, residual, be.context().cpu_threads()))
               .first;
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kInternal,
                  std::string("int8 conv2d: oneDNN has no int8 convolution for input ") +
                      shape_to_string(x) + " and weights " + shape_to_string(im.w_shape) + ": " +
                      e.what());
    }
  }
  const Plan& plan = it->second;
  const bool quantize = in != Layout::kCodes;
  const std::size_t bytes = (quantize ? plan.input_bytes : 0) + plan.part_bytes * plan.parts.size();
  char* ws = reinterpret_cast<char*>(be.workspace(std::max<std::size_t>(1, (bytes + 3) / 4)));
  const char* codes = quantize ? ws : static_cast<const char*>(xp);
  if (quantize) {
    im.quantize_input(be, x, xp, in, ws);
    ws += plan.input_bytes;
  }
  const auto count = static_cast<int>(plan.parts.size());
  for_chunks(be, plan.parts.size(), count, [&](int chunk, std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      const Part& part = plan.parts[i];
      char* own = ws + plan.part_bytes * static_cast<std::size_t>(chunk);
      memory view =
          wrap(part.view, static_cast<const void*>(static_cast<char*>(yp) + part.y_offset));
      memory dst =
          part.direct
              ? view
              : wrap(part.dst, static_cast<const void*>(own + aligned(part.scratch.get_size())));
      dnnl_conv::Args args{
          {DNNL_ARG_SRC, wrap(part.src, static_cast<const void*>(codes + part.x_offset))},
          {DNNL_ARG_WEIGHTS, im.weights[part.weights_index].data},
          {DNNL_ARG_BIAS, wrap(part.bias, im.bias_q.data() + part.k0)},
          {DNNL_ARG_DST, dst},
          {DNNL_ARG_SCRATCHPAD, wrap(part.scratch, static_cast<const void*>(own))}};
      memory residual_view;
      if (residual) {
        const void* at = static_cast<const char*>(residual->data) + part.r_offset;
        residual_view = wrap(part.direct ? part.src1 : part.src1_view, at);
        args[kResidualArg] =
            part.direct
                ? residual_view
                : wrap(part.src1, static_cast<const void*>(own + aligned(part.scratch.get_size()) +
                                                           aligned(part.dst.get_size())));
      }
      try {
        OneOmpThread one;
        if (accumulate && !part.direct) part.from_out.execute(dnnl_conv::stream(), view, dst);
        if (residual && !part.direct)
          part.gather.execute(dnnl_conv::stream(), residual_view, args[kResidualArg]);
        part.primitive.execute(dnnl_conv::stream(), args);
        if (!part.direct) part.to_out.execute(dnnl_conv::stream(), dst, view);
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

void nhwc_to_blocked(Backend& backend, const Shape& x, const void* from, void* to) {
  const int count = dnnl_conv::parts(static_cast<int>(x[0]));
  const std::int64_t in_image = x[1] * x[2] * x[3];
  const std::int64_t out_image = blocked::blocked_floats({1, x[1], x[2], x[3]});
  for_chunks(cpu(backend), static_cast<std::size_t>(x[0]), count,
             [&](int, std::size_t b, std::size_t e) {
               const memory::dims part{static_cast<std::int64_t>(e - b), x[1], x[2], x[3]};
               const auto i = static_cast<std::int64_t>(b);
               memory src = wrap(memory::desc(part, kF32, Tag::nhwc),
                                 static_cast<const float*>(from) + i * in_image);
               memory dst = wrap(memory::desc(part, kF32, blocked_tag()),
                                 static_cast<const float*>(to) + i * out_image);
               try {
                 OneOmpThread one;
                 dnnl::reorder(src, dst).execute(dnnl_conv::stream(), src, dst);
                 dnnl_conv::stream().wait();
               } catch (const dnnl::error& err) {
                 throw Error(ErrorCode::kInternal,
                             std::string("int8: NHWC to blocked: oneDNN failed: ") + err.what());
               }
             });
}

#endif  // STOKE_HAVE_DNNL

}  // namespace stoke::cpu::int8
