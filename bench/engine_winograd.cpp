// bench_engine_winograd: where oneDNN's Winograd kernels pay (issue 16). For
// every 3x3 stride-1 convolution shape of the issue net and ResNet-18, times
// oneDNN's direct and Winograd kernels on one thread, in the blocked layouts
// they choose (format any), interleaved round by round, best of the rounds:
//   infer  forward_inference (jit_fp32_wino_2x3 against jit / brgconv)
//   train  forward_training + backward_data + backward_weights (jit_wino_4x3)
// The thresholds in lib/backend/cpu/conv2d_blocked.cpp (winograd_fits) and
// conv2d_dnnl_layout.cpp (winograd_pays) come from this table.
// Usage: bench_engine_winograd [images] [rounds]. One OpenMP thread.
// Bench-only; built when CMake finds libdnnl (bench/engine.cmake).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <functional>
#include <unordered_map>
#include <vector>

namespace {

using dnnl::algorithm;
using dnnl::memory;
using Args = std::unordered_map<int, memory>;

struct Shape3x3 {
  int c, k, hw;  // c -> k channels, hw x hw pixels, pad 1
};

// The issue net's (bench/pytorch_resnet.py) stems at 224 and 28 pixels, a
// 16-channel layer (the training threshold), the issue net's stages, then
// ResNet-18's stages.
const Shape3x3 kShapes[] = {{3, 32, 224},   {1, 32, 28},    {16, 16, 56}, {32, 32, 224},
                            {64, 64, 112},  {128, 128, 56}, {64, 64, 56}, {128, 128, 28},
                            {256, 256, 14}, {512, 512, 7}};

memory filled(const memory::desc& d, const dnnl::engine& eng) {
  memory m(d, eng);
  auto* p = static_cast<float*>(m.get_data_handle());
  for (std::size_t i = 0; i < d.get_size() / sizeof(float); ++i) p[i] = 0.01f * (i % 97);
  return m;
}

struct Step {
  dnnl::primitive prim;
  Args args;
};

// The passes of one shape with one algorithm; empty where oneDNN has no kernel.
struct Passes {
  std::vector<Step> steps;
  std::string impl;
  Passes(const dnnl::engine& eng, const Shape3x3& s, int n, algorithm alg, bool train) {
    const auto f32 = memory::data_type::f32;
    const auto any = memory::format_tag::any;
    const memory::desc src({n, s.c, s.hw, s.hw}, f32, any), dst({n, s.k, s.hw, s.hw}, f32, any);
    const memory::desc w({s.k, s.c, 3, 3}, f32, any);
    const memory::dims one{1, 1}, none{0, 0};
    const auto prop =
        train ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
    try {
      const dnnl::convolution_forward::desc fd(prop, alg, src, w, dst, one, none, one, one);
      const dnnl::convolution_forward::primitive_desc fpd(fd, eng);
      impl = fpd.impl_info_str();
      steps.push_back({dnnl::convolution_forward(fpd),
                       {{DNNL_ARG_SRC, filled(fpd.src_desc(), eng)},
                        {DNNL_ARG_WEIGHTS, filled(fpd.weights_desc(), eng)},
                        {DNNL_ARG_DST, filled(fpd.dst_desc(), eng)}}});
      if (!train) return;
      const dnnl::convolution_backward_data::desc bd(alg, src, w, dst, one, none, one, one);
      const dnnl::convolution_backward_data::primitive_desc bpd(bd, eng, fpd);
      steps.push_back({dnnl::convolution_backward_data(bpd),
                       {{DNNL_ARG_DIFF_DST, filled(bpd.diff_dst_desc(), eng)},
                        {DNNL_ARG_WEIGHTS, filled(bpd.weights_desc(), eng)},
                        {DNNL_ARG_DIFF_SRC, filled(bpd.diff_src_desc(), eng)}}});
      const dnnl::convolution_backward_weights::desc wd(alg, src, w, dst, one, none, one, one);
      const dnnl::convolution_backward_weights::primitive_desc wpd(wd, eng, fpd);
      steps.push_back({dnnl::convolution_backward_weights(wpd),
                       {{DNNL_ARG_SRC, filled(wpd.src_desc(), eng)},
                        {DNNL_ARG_DIFF_DST, filled(wpd.diff_dst_desc(), eng)},
                        {DNNL_ARG_DIFF_WEIGHTS, filled(wpd.diff_weights_desc(), eng)}}});
    } catch (const dnnl::error&) {
      steps.clear();
      impl = "none";
    }
  }
  double run(dnnl::stream& st) {
    const auto t0 = std::chrono::steady_clock::now();
    for (Step& s : steps) s.prim.execute(st, s.args);
    st.wait();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  omp_set_num_threads(1);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream st(eng);
  std::printf("# %d image(s), one thread, best of %d interleaved rounds, ms (wino / direct)\n", n,
              rounds);
  std::printf("%-14s %9s %9s %7s   %9s %9s %7s\n", "c->k hw", "infer dir", "wino", "ratio",
              "train dir", "wino", "ratio");
  for (const Shape3x3& s : kShapes) {
    Passes infer_dir(eng, s, n, algorithm::convolution_direct, false);
    Passes infer_wino(eng, s, n, algorithm::convolution_winograd, false);
    Passes train_dir(eng, s, n, algorithm::convolution_direct, true);
    Passes train_wino(eng, s, n, algorithm::convolution_winograd, true);
    std::vector<Passes*> all{&infer_dir, &infer_wino, &train_dir, &train_wino};
    std::vector<double> best(all.size(), 1e30);
    for (Passes* p : all) p->run(st);  // warm up
    for (int r = 0; r < rounds; ++r) {
      for (std::size_t i = 0; i < all.size(); ++i) best[i] = std::min(best[i], all[i]->run(st));
    }
    char name[32];
    std::snprintf(name, sizeof name, "%d->%d %d", s.c, s.k, s.hw);
    std::printf("%-14s %9.2f %9.2f %7.2f   %9.2f %9.2f %7.2f   # %s; %s\n", name, best[0], best[1],
                best[1] / best[0], best[2], best[3], best[3] / best[2], infer_wino.impl.c_str(),
                train_wino.impl.c_str());
  }
  return 0;
}
