// The naive reference of int8 inference convolutions (conv2d_int8.hpp):
// quantize x and w with the shared rules, sum the integer products exactly,
// dequantize as oneDNN's output pass does.
#include <cstdint>
#include <vector>

#include "backend/cpu/conv2d_int8.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu::int8 {

void conv2d_reference(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor* residual,
                      Tensor& y, const Conv2dParams& p, bool relu,
                      const ActivationRange& input_range, bool reduce_range) {
  if (p.groups != 1) throw InvalidArgument("int8 conv2d reference: groups must be 1");
  const Shape& xs = x.shape();
  const Shape& wsh = w.shape();
  const Shape ys = conv2d_output_shape(xs, wsh, p);
  if (y.shape() != ys) {
    throw InvalidArgument("int8 conv2d reference: 'y' is " + shape_to_string(y.shape()) +
                          ", want " + shape_to_string(ys));
  }
  const std::int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const std::int64_t k = wsh[0], r = wsh[2], s = wsh[3], oh = ys[2], ow = ys[3];
  const std::int64_t per = c * r * s;
  const InputQuantization q = input_quantization(input_range, reduce_range);
  const float inverse = 1.0f / q.scale;
  const float* xd = x.data<float>();
  std::vector<std::int32_t> xq(static_cast<std::size_t>(x.numel()));
  for (std::size_t i = 0; i < xq.size(); ++i)
    xq[i] = q.is_unsigned ? quantize_u8(xd[i], inverse) : quantize_s8(xd[i], inverse);
  const std::vector<float> wscale = weight_scales(w.data<float>(), k, per);
  const std::vector<float> wq = quantize_weights(w.data<float>(), k, per, wscale);
  const float* bd = bias.defined() ? bias.data<float>() : nullptr;
  const float* rd = residual ? residual->data<float>() : nullptr;
  float* yd = y.data<float>();
  for (std::int64_t b = 0; b < n; ++b) {
    for (std::int64_t o = 0; o < k; ++o) {
      const float out_scale = q.scale * wscale[static_cast<std::size_t>(o)];
      const float bias_q = bd ? bd[o] / out_scale : 0.0f;
      for (std::int64_t py = 0; py < oh; ++py) {
        for (std::int64_t px = 0; px < ow; ++px) {
          std::int64_t acc = 0;
          for (std::int64_t ci = 0; ci < c; ++ci) {
            for (std::int64_t ky = 0; ky < r; ++ky) {
              const std::int64_t iy = py * p.stride_h - p.pad_h + ky * p.dilation_h;
              if (iy < 0 || iy >= h) continue;
              for (std::int64_t kx = 0; kx < s; ++kx) {
                const std::int64_t ix = px * p.stride_w - p.pad_w + kx * p.dilation_w;
                if (ix < 0 || ix >= wd) continue;
                acc += static_cast<std::int64_t>(
                           xq[static_cast<std::size_t>(((b * c + ci) * h + iy) * wd + ix)]) *
                       static_cast<std::int64_t>(
                           wq[static_cast<std::size_t>(((o * c + ci) * r + ky) * s + kx)]);
              }
            }
          }
          const std::int64_t at = ((b * k + o) * oh + py) * ow + px;
          float v = (static_cast<float>(acc) + bias_q) * out_scale;
          if (rd) v += rd[at];
          if (relu && v < 0.0f) v = 0.0f;
          yd[at] = v;
        }
      }
    }
  }
}

}  // namespace stoke::cpu::int8
