// xsimd kernel templates; included only by the per-ISA translation units.
#pragma once

#include <cmath>
#include <cstddef>
#include <xsimd/xsimd.hpp>

#include "backend/cpu/simd.hpp"

namespace stoke::cpu::simd_impl {

template <class Arch>
struct Kernels {
  using B = xsimd::batch<float, Arch>;
  static constexpr std::size_t kLanes = B::size;

  static void relu(const float* x, float* y, std::size_t n) {
    std::size_t i = 0;
    const B zero(0.0f);
    for (; i + kLanes <= n; i += kLanes)
      xsimd::max(B::load_unaligned(x + i), zero).store_unaligned(y + i);
    for (; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
  static void relu_backward(const float* y, const float* dy, float* dx, std::size_t n) {
    std::size_t i = 0;
    const B zero(0.0f);
    for (; i + kLanes <= n; i += kLanes) {
      const B yv = B::load_unaligned(y + i);
      xsimd::select(yv > zero, B::load_unaligned(dy + i), zero).store_unaligned(dx + i);
    }
    for (; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }
  static void add(const float* a, const float* b, float* y, std::size_t n) {
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      (B::load_unaligned(a + i) + B::load_unaligned(b + i)).store_unaligned(y + i);
    for (; i < n; ++i) y[i] = a[i] + b[i];
  }
  static void accumulate(float* dx, const float* dy, std::size_t n) { add(dx, dy, dx, n); }
  // y = max(a + b, 0): the residual add and its ReLU in one pass.
  static void add_relu(const float* a, const float* b, float* y, std::size_t n) {
    std::size_t i = 0;
    const B zero(0.0f);
    for (; i + kLanes <= n; i += kLanes)
      xsimd::max(B::load_unaligned(a + i) + B::load_unaligned(b + i), zero).store_unaligned(y + i);
    for (; i < n; ++i) {
      const float v = a[i] + b[i];
      y[i] = v > 0.0f ? v : 0.0f;
    }
  }
  static void mul(const float* a, const float* b, float* y, std::size_t n) {
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      (B::load_unaligned(a + i) * B::load_unaligned(b + i)).store_unaligned(y + i);
    for (; i < n; ++i) y[i] = a[i] * b[i];
  }
  static void scale_shift(const float* x, float* y, std::size_t n, float scale, float shift) {
    std::size_t i = 0;
    const B s(scale), t(shift);
    for (; i + kLanes <= n; i += kLanes)
      xsimd::fma(B::load_unaligned(x + i), s, t).store_unaligned(y + i);
    for (; i < n; ++i) y[i] = x[i] * scale + shift;
  }
  // Batch norm's per-plane reductions and passes. Two vector accumulators, so
  // the sums run at load speed rather than at one add's latency per element.
  static float sum(const float* x, std::size_t n) {
    B a0(0.0f), a1(0.0f);
    std::size_t i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
      a0 += B::load_unaligned(x + i);
      a1 += B::load_unaligned(x + i + kLanes);
    }
    for (; i + kLanes <= n; i += kLanes) a0 += B::load_unaligned(x + i);
    float s = xsimd::hadd(a0 + a1);
    for (; i < n; ++i) s += x[i];
    return s;
  }
  static float centered_squares(const float* x, std::size_t n, float mean) {
    B a0(0.0f), a1(0.0f);
    const B m(mean);
    std::size_t i = 0;
    for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
      const B d0 = B::load_unaligned(x + i) - m, d1 = B::load_unaligned(x + i + kLanes) - m;
      a0 = xsimd::fma(d0, d0, a0);
      a1 = xsimd::fma(d1, d1, a1);
    }
    for (; i + kLanes <= n; i += kLanes) {
      const B d = B::load_unaligned(x + i) - m;
      a0 = xsimd::fma(d, d, a0);
    }
    float s = xsimd::hadd(a0 + a1);
    for (; i < n; ++i) s += (x[i] - mean) * (x[i] - mean);
    return s;
  }
  // y = max(x * scale + shift, 0)
  static void scale_shift_relu(const float* x, float* y, std::size_t n, float scale, float shift) {
    std::size_t i = 0;
    const B s(scale), t(shift), zero(0.0f);
    for (; i + kLanes <= n; i += kLanes)
      xsimd::max(xsimd::fma(B::load_unaligned(x + i), s, t), zero).store_unaligned(y + i);
    for (; i < n; ++i) {
      const float v = x[i] * scale + shift;
      y[i] = v > 0.0f ? v : 0.0f;
    }
  }
  // g = dy, or where relu_y is given dy masked to relu_y > 0 (a ReLU's
  // backward folded in); sums[0] += sum(g), sums[1] += sum(g * (x - mean)).
  static void bn_backward_sums(const float* x, const float* dy, const float* relu_y, std::size_t n,
                               float mean, float* sums) {
    B s(0.0f), t(0.0f);
    const B m(mean), zero(0.0f);
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      B g = B::load_unaligned(dy + i);
      if (relu_y) g = xsimd::select(B::load_unaligned(relu_y + i) > zero, g, zero);
      s += g;
      t = xsimd::fma(g, B::load_unaligned(x + i) - m, t);
    }
    float sg = xsimd::hadd(s), tg = xsimd::hadd(t);
    for (; i < n; ++i) {
      const float g = !relu_y || relu_y[i] > 0.0f ? dy[i] : 0.0f;
      sg += g;
      tg += g * (x[i] - mean);
    }
    sums[0] = sg;
    sums[1] = tg;
  }
  // dx = a * g + b * (x - mean) + cst, g as in bn_backward_sums.
  static void bn_backward_apply(const float* x, const float* dy, const float* relu_y, float* dx,
                                std::size_t n, float mean, float a, float b, float cst) {
    const B m(mean), av(a), bv(b), cv(cst), zero(0.0f);
    std::size_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      B g = B::load_unaligned(dy + i);
      if (relu_y) g = xsimd::select(B::load_unaligned(relu_y + i) > zero, g, zero);
      xsimd::fma(av, g, xsimd::fma(bv, B::load_unaligned(x + i) - m, cv)).store_unaligned(dx + i);
    }
    for (; i < n; ++i) {
      const float g = !relu_y || relu_y[i] > 0.0f ? dy[i] : 0.0f;
      dx[i] = a * g + b * (x[i] - mean) + cst;
    }
  }
  static void sgd(float* w, const float* g, float* v, std::size_t n, float lr, float momentum,
                  float weight_decay, bool nesterov) {
    std::size_t i = 0;
    const B lr_b(lr), mom_b(momentum), wd_b(weight_decay);
    for (; i + kLanes <= n; i += kLanes) {
      const B wv = B::load_unaligned(w + i);
      const B gv = xsimd::fma(wd_b, wv, B::load_unaligned(g + i));
      const B vv = xsimd::fma(mom_b, B::load_unaligned(v + i), gv);
      vv.store_unaligned(v + i);
      const B step = nesterov ? xsimd::fma(mom_b, vv, gv) : vv;
      xsimd::fnma(lr_b, step, wv).store_unaligned(w + i);
    }
    for (; i < n; ++i) {
      const float gi = g[i] + weight_decay * w[i];
      v[i] = momentum * v[i] + gi;
      w[i] -= lr * (nesterov ? gi + momentum * v[i] : v[i]);
    }
  }
  static void adam(float* w, const float* g, float* m, float* v, std::size_t n, float lr,
                   float beta1, float beta2, float epsilon, float weight_decay, bool decoupled,
                   float bc1, float bc2) {
    const float l2 = decoupled ? 0.0f : weight_decay;
    const float decay = decoupled ? lr * weight_decay : 0.0f;
    const float step = lr / bc1;
    const float inv_sqrt_bc2 = 1.0f / std::sqrt(bc2);
    std::size_t i = 0;
    const B b1(beta1), b2(beta2), one_b1(1.0f - beta1), one_b2(1.0f - beta2), l2_b(l2),
        decay_b(decay), step_b(step), eps_b(epsilon), isb(inv_sqrt_bc2);
    for (; i + kLanes <= n; i += kLanes) {
      B wv = B::load_unaligned(w + i);
      const B gv = xsimd::fma(l2_b, wv, B::load_unaligned(g + i));
      const B mv = xsimd::fma(b1, B::load_unaligned(m + i), one_b1 * gv);
      const B vv = xsimd::fma(b2, B::load_unaligned(v + i), one_b2 * gv * gv);
      mv.store_unaligned(m + i);
      vv.store_unaligned(v + i);
      wv = xsimd::fnma(decay_b, wv, wv);
      wv = xsimd::fnma(step_b, mv / xsimd::fma(xsimd::sqrt(vv), isb, eps_b), wv);
      wv.store_unaligned(w + i);
    }
    for (; i < n; ++i) {
      const float gi = g[i] + l2 * w[i];
      m[i] = beta1 * m[i] + (1.0f - beta1) * gi;
      v[i] = beta2 * v[i] + (1.0f - beta2) * gi * gi;
      w[i] -= decay * w[i];
      w[i] -= step * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + epsilon);
    }
  }

  static const SimdKernels& table(const char* name) {
    static const SimdKernels k{name,
                               relu,
                               relu_backward,
                               add,
                               accumulate,
                               mul,
                               scale_shift,
                               sgd,
                               adam,
                               sum,
                               centered_squares,
                               scale_shift_relu,
                               bn_backward_sums,
                               bn_backward_apply,
                               add_relu};
    return k;
  }
};

}  // namespace stoke::cpu::simd_impl
