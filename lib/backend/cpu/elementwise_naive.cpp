// Elementwise references: ReLU, add, accumulate, scale, the finite check,
// dropout.
#include <cmath>

#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "stoke/error.hpp"

namespace stoke::cpu {

float dropout_uniform(std::uint64_t seed, std::uint64_t index) noexcept {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

namespace naive {

void relu_forward(const Tensor& x, Tensor& y) {
  for (std::int64_t i = 0; i < x.numel(); ++i)
    y.data<float>()[i] = std::max(x.data<float>()[i], 0.0f);
}

void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) {
  for (std::int64_t i = 0; i < y.numel(); ++i)
    dx.data<float>()[i] = y.data<float>()[i] > 0.0f ? dy.data<float>()[i] : 0.0f;
}

void add(const Tensor& a, const Tensor& b, Tensor& y) {
  for (std::int64_t i = 0; i < a.numel(); ++i)
    y.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
}

void accumulate(Tensor& dx, const Tensor& dy) {
  for (std::int64_t i = 0; i < dx.numel(); ++i) dx.data<float>()[i] += dy.data<float>()[i];
}

void scale(Tensor& x, float alpha) {
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] *= alpha;
}

void all_finite(const Tensor& x, Tensor& flag) {
  bool finite = true;
  for (std::int64_t i = 0; i < x.numel(); ++i) finite = finite && std::isfinite(x.data<float>()[i]);
  flag.data<float>()[0] = finite ? 1.0f : 0.0f;
}

void dropout_forward(const Tensor& x, Tensor& y, Tensor& mask, float p, std::uint64_t seed) {
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = dropout_uniform(seed, static_cast<std::uint64_t>(i)) >= p;
    mask.data<float>()[i] = keep ? 1.0f / (1.0f - p) : 0.0f;
    y.data<float>()[i] = x.data<float>()[i] * mask.data<float>()[i];
  }
}

void dropout_backward(const Tensor& dy, const Tensor& mask, Tensor& dx) {
  for (std::int64_t i = 0; i < dy.numel(); ++i)
    dx.data<float>()[i] = dy.data<float>()[i] * mask.data<float>()[i];
}

}  // namespace naive
}  // namespace stoke::cpu
