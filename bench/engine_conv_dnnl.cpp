// bench_engine_conv_dnnl: the convolution engine decision (issue 16). Times
// stoke's CPU conv2d_forward against Debian's oneDNN (libdnnl 2.6) on every
// convolution shape of bench/pytorch_resnet.py's net at 224x224, weighted by
// how often the net uses each shape, interleaved in the same run:
//   stoke        the CPU backend as built (im2col + OpenBLAS, oneTBB chunks)
//   dnnl_nchw    oneDNN on stoke's plain NCHW / OIHW tensors (a drop-in)
//   dnnl_blocked oneDNN with the layouts it prefers (format any); activations
//                would have to stay blocked between layers, no reorder timed
//   dnnl_reorder dnnl_blocked plus the reorders NCHW -> blocked (x, and the
//                weights as a training step would) and back (y): the drop-in
// Usage: bench_engine_conv_dnnl [batch] [rounds]. Threads: STOKE_CPU_THREADS
// for stoke, OMP_NUM_THREADS for oneDNN (Debian builds it on OpenMP).
// Bench-only; built when CMake finds libdnnl (bench/engine.cmake).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <random>
#include <unordered_map>
#include <vector>

#include "stoke/backend.hpp"

namespace {

struct ConvShape {
  int c, k, hw, kernel, stride, count;  // count: uses in the net
};

// bench/pytorch_resnet.py, resnet(3) at 224x224: stem, 3 stages of 2 blocks.
const ConvShape kShapes[] = {
    {3, 32, 224, 3, 1, 1},   {32, 32, 224, 3, 1, 4},  {32, 64, 224, 3, 2, 1},
    {64, 64, 112, 3, 1, 3},  {32, 64, 224, 1, 2, 1},  {64, 128, 112, 3, 2, 1},
    {128, 128, 56, 3, 1, 3}, {64, 128, 112, 1, 2, 1},
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<float> random_floats(std::size_t n) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

int out_size(const ConvShape& s) {
  return (s.hw + 2 * (s.kernel / 2) - s.kernel) / s.stride + 1;
}

struct StokeConv {
  stoke::Tensor x, w, y, none;
  stoke::Conv2dParams p{};
  StokeConv(stoke::Backend& be, const ConvShape& s, int n)
      : x(be, {n, s.c, s.hw, s.hw}),
        w(be, {s.k, s.c, s.kernel, s.kernel}),
        y(be, {n, s.k, out_size(s), out_size(s)}) {
    const int pad = s.kernel / 2;
    p = stoke::Conv2dParams{s.stride, s.stride, pad, pad, 1, 1, 1};
    x.copy_from_host(random_floats(static_cast<std::size_t>(x.numel())).data());
    w.copy_from_host(random_floats(static_cast<std::size_t>(w.numel())).data());
  }
  void run(stoke::Backend& be) { be.conv2d_forward(x, w, none, y, p); }
};

struct DnnlConv {
  dnnl::convolution_forward prim;
  std::unordered_map<int, dnnl::memory> args;
  // Plain NCHW / OIHW tensors and the reorders to and from them (reorder mode).
  dnnl::memory x_plain, w_plain, y_plain;
  dnnl::reorder to_x, to_w, to_y;
  bool reorders = false;
  DnnlConv(dnnl::engine& eng, const ConvShape& s, int n, bool blocked, bool with_reorders = false) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const int pad = s.kernel / 2, o = out_size(s);
    const tag act = blocked ? tag::any : tag::nchw, wei = blocked ? tag::any : tag::oihw;
    dnnl::memory::desc src({n, s.c, s.hw, s.hw}, dt::f32, act),
        w({s.k, s.c, s.kernel, s.kernel}, dt::f32, wei), dst({n, s.k, o, o}, dt::f32, act);
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::convolution_direct, src, w, dst,
                                      {s.stride, s.stride}, {pad, pad}, {pad, pad});
    dnnl::convolution_forward::primitive_desc pd(d, eng);
    prim = dnnl::convolution_forward(pd);
    args[DNNL_ARG_SRC] = dnnl::memory(pd.src_desc(), eng);
    args[DNNL_ARG_WEIGHTS] = dnnl::memory(pd.weights_desc(), eng);
    args[DNNL_ARG_DST] = dnnl::memory(pd.dst_desc(), eng);
    for (int a : {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS}) {
      const auto v = random_floats(args[a].get_desc().get_size() / sizeof(float));
      std::copy(v.begin(), v.end(), static_cast<float*>(args[a].get_data_handle()));
    }
    if (with_reorders) {
      reorders = true;
      x_plain = dnnl::memory({{n, s.c, s.hw, s.hw}, dt::f32, tag::nchw}, eng);
      w_plain = dnnl::memory({{s.k, s.c, s.kernel, s.kernel}, dt::f32, tag::oihw}, eng);
      y_plain = dnnl::memory({{n, s.k, o, o}, dt::f32, tag::nchw}, eng);
      to_x = dnnl::reorder(x_plain, args[DNNL_ARG_SRC]);
      to_w = dnnl::reorder(w_plain, args[DNNL_ARG_WEIGHTS]);
      to_y = dnnl::reorder(args[DNNL_ARG_DST], y_plain);
    }
    std::printf("#   dnnl %s %dx%d->%d hw%d k%d s%d: %s\n", blocked ? "blocked" : "nchw", s.c, n,
                s.k, s.hw, s.kernel, s.stride, pd.impl_info_str());
  }
  void run(dnnl::stream& st) {
    if (reorders) {
      to_x.execute(st, x_plain, args[DNNL_ARG_SRC]);
      to_w.execute(st, w_plain, args[DNNL_ARG_WEIGHTS]);
    }
    prim.execute(st, args);
    if (reorders) to_y.execute(st, args[DNNL_ARG_DST], y_plain);
    st.wait();
  }
};

template <class F>
double best_of(int rounds, F&& f) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  stoke::Backend& be = stoke::cpu_backend();
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  double total[4] = {0, 0, 0, 0}, flops = 0;
  std::printf("# batch %d, best of %d interleaved rounds, ms per conv\n", n, rounds);
  std::printf("%-28s %9s %9s %9s %9s %7s %7s %7s\n", "shape (c->k hw kernel/stride)", "stoke",
              "dnnl_nchw", "dnnl_blk", "dnnl_reo", "nchw/st", "blk/st", "reo/st");
  for (const ConvShape& s : kShapes) {
    StokeConv sc(be, s, n);
    DnnlConv plain(eng, s, n, false), blocked(eng, s, n, true), reordered(eng, s, n, true, true);
    double t[4] = {1e30, 1e30, 1e30, 1e30};
    sc.run(be), plain.run(st), blocked.run(st), reordered.run(st);  // warm up
    for (int r = 0; r < rounds; ++r) {  // interleaved: each round runs all three
      t[0] = std::min(t[0], best_of(1, [&] { sc.run(be); }));
      t[1] = std::min(t[1], best_of(1, [&] { plain.run(st); }));
      t[2] = std::min(t[2], best_of(1, [&] { blocked.run(st); }));
      t[3] = std::min(t[3], best_of(1, [&] { reordered.run(st); }));
    }
    const int o = out_size(s);
    flops += 2.0 * n * s.k * s.c * s.kernel * s.kernel * o * o * s.count;
    for (int i = 0; i < 4; ++i) total[i] += t[i] * s.count;
    char name[64];
    std::snprintf(name, sizeof name, "%d->%d %d k%d/s%d x%d", s.c, s.k, s.hw, s.kernel, s.stride,
                  s.count);
    std::printf("%-28s %9.2f %9.2f %9.2f %9.2f %7.2f %7.2f %7.2f\n", name, t[0] * 1e3, t[1] * 1e3,
                t[2] * 1e3, t[3] * 1e3, t[1] / t[0], t[2] / t[0], t[3] / t[0]);
  }
  std::printf("%-28s %9.1f %9.1f %9.1f %9.1f %7.2f %7.2f %7.2f\n", "net convs (weighted)",
              total[0] * 1e3, total[1] * 1e3, total[2] * 1e3, total[3] * 1e3, total[1] / total[0],
              total[2] / total[0], total[3] / total[0]);
  std::printf("%-28s %9.1f %9.1f %9.1f %9.1f\n", "GFLOP/s", flops / total[0] / 1e9,
              flops / total[1] / 1e9, flops / total[2] / 1e9, flops / total[3] / 1e9);
  return 0;
}
