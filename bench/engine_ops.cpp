// BM_conv2d/<impl>/f32/<shape>: the fast CPU convolution (im2col + serial
// sgemm per TBB task) against the naive reference, forward and backward, on
// the stage-1 shape of the Fashion-MNIST ResNet; and the three stride-1 3x3
// shapes of the ResNet-style net's 224x224 batch-8 train step (10 of its 15
// convolutions: 4 at 32x224x224, 3 at 64x112x112, 3 at 128x56x56), for the
// step's profile.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "backend/cpu/naive.hpp"
#include "stoke/backend.hpp"

namespace {

stoke::Tensor random(stoke::Backend& be, const stoke::Shape& s) {
  stoke::Tensor t(be, s);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  for (float& x : v) x = d(rng);
  t.copy_from_host(v.data());
  return t;
}

double conv_flops(std::int64_t n, std::int64_t k, std::int64_t c, std::int64_t hw) {
  return 2.0 * n * k * c * 9 * hw;
}

void conv(benchmark::State& state, bool naive, bool backward, std::int64_t n, std::int64_t c,
          std::int64_t hw) {
  stoke::Backend& be = stoke::cpu_backend();
  const stoke::Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  stoke::Tensor x = random(be, {n, c, hw, hw}), w = random(be, {c, c, 3, 3}), y(be, {n, c, hw, hw});
  stoke::Tensor dy = random(be, {n, c, hw, hw}), dx(be, {n, c, hw, hw}), dw(be, {c, c, 3, 3}), none;
  for (auto _ : state) {
    if (backward) {
      naive ? stoke::cpu::naive::conv2d_backward(x, w, dy, dx, dw, none, p)
            : be.conv2d_backward(x, w, dy, dx, dw, none, p);
    } else {
      naive ? stoke::cpu::naive::conv2d_forward(x, w, none, y, p)
            : be.conv2d_forward(x, w, none, y, p);
    }
  }
  state.counters["GFLOP/s"] = benchmark::Counter(conv_flops(n, c, c, hw * hw) * (backward ? 2 : 1) *
                                                     static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
  state.SetItemsProcessed(state.iterations() * n);
}

BENCHMARK_CAPTURE(conv, fast_fwd, false, false, 64, 32, 28)
    ->Name("BM_conv2d_forward/cpu/f32/64x32x28x28_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(conv, fast_bwd, false, true, 64, 32, 28)
    ->Name("BM_conv2d_backward/cpu/f32/64x32x28x28_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(conv, naive_fwd, true, false, 4, 32, 28)
    ->Name("BM_conv2d_forward/naive/f32/4x32x28x28_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(conv, fast_fwd_small, false, false, 4, 32, 28)
    ->Name("BM_conv2d_forward/cpu/f32/4x32x28x28_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(conv, step224_forward_32, false, false, 8, 32, 224)
    ->Name("BM_conv2d_forward/cpu/f32/8x32x224x224_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(conv, step224_backward_32, false, true, 8, 32, 224)
    ->Name("BM_conv2d_backward/cpu/f32/8x32x224x224_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(conv, step224_forward_64, false, false, 8, 64, 112)
    ->Name("BM_conv2d_forward/cpu/f32/8x64x112x112_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(conv, step224_backward_64, false, true, 8, 64, 112)
    ->Name("BM_conv2d_backward/cpu/f32/8x64x112x112_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(conv, step224_forward_128, false, false, 8, 128, 56)
    ->Name("BM_conv2d_forward/cpu/f32/8x128x56x56_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(conv, step224_backward_128, false, true, 8, 128, 56)
    ->Name("BM_conv2d_backward/cpu/f32/8x128x56x56_k3")
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
