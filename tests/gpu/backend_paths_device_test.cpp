// CUDA backend paths no other GPU test runs (label gpu; skip with the reason
// without a device): cuDNN's benchmark mode on the backward passes, TF32 in
// backward convolutions and in cuBLAS's linear layers, and an out-of-memory
// inside a graph capture.
#include <algorithm>

#include "gpu/cuda_parity.hpp"
#include "stoke/error.hpp"

namespace stoke::testing {
namespace {

// TF32 rounds each product's inputs to 10 mantissa bits (2^-11 relative);
// the sums below are of at most ~600 terms.
constexpr Tolerance kTf32{5e-3, "TF32 products (10-bit mantissa), sums in another order"};

// Benchmark mode times the candidates of every pass once per shape
// (cudnnFind*Ex), the backward ones included, caches them, and the timed
// algorithms give the CPU's gradients.
TEST_F(CudaParity, BenchmarkModeTimesAndCachesTheBackwardPasses) {
  gpu().set_conv_benchmark(true);
  const Shape xs{4, 16, 18, 18}, ws{24, 16, 3, 3};
  const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  const Tensor x = random(xs, 21), w = random(ws, 22);
  const Shape ys = conv2d_output_shape(xs, ws, p);
  const Tensor dy = random(ys, 23);
  Tensor dx(cpu(), xs), dw(cpu(), ws), db;
  cpu().conv2d_backward(x, w, dy, dx, dw, db, p);
  const Tensor gx = to_gpu(x), gw = to_gpu(w), gdy = to_gpu(dy);
  Tensor gdx(gpu(), xs), gdw(gpu(), ws), gdb;
  for (int call = 0; call < 2; ++call) gpu().conv2d_backward(gx, gw, gdy, gdx, gdw, gdb, p);
  EXPECT_TRUE(close(gdx, dx, kConv, "benchmarked backward data"));
  EXPECT_TRUE(close(gdw, dw, kConv, "benchmarked backward filter"));
  const auto algos = gpu().conv_algorithms();
  ASSERT_EQ(algos.size(), 2u) << "the second call reuses both cached choices";
  for (const ConvAlgoChoice& a : algos) {
    EXPECT_TRUE(a.benchmarked) << a.pass;
    EXPECT_GE(a.time_ms, 0.0f) << a.pass;
    EXPECT_FALSE(a.tensor_ops) << a.pass << ": strict FP32 times FMA-only candidates";
  }
}

// The default (TF32) backend's backward convolution and cuBLAS linear layer
// stay within TF32's error of the CPU, and TF32 is really in use there: the
// linear layer differs from the strict one, and at least one convolution
// pass reports tensor-op math.
TEST_F(CudaParity, Tf32BackwardConvolutionAndLinearStayCloseToTheCpu) {
  auto tf32 = create_cuda_backend(0, Settings{}, CudaBackendOptions{});
  ASSERT_FALSE(tf32->strict_fp32());
  const Shape xs{8, 64, 12, 12}, ws{64, 64, 3, 3};
  const Conv2dParams p{1, 1, 1, 1, 1, 1, 1};
  const Tensor x = random(xs, 31), w = random(ws, 32), dy = random(xs, 33);
  Tensor dx(cpu(), xs), dw(cpu(), ws), db(cpu(), {64});
  cpu().conv2d_backward(x, w, dy, dx, dw, db, p);
  Tensor tdx(*tf32, xs), tdw(*tf32, ws), tdb(*tf32, {64});
  tf32->conv2d_backward(to_gpu(*tf32, x), to_gpu(*tf32, w), to_gpu(*tf32, dy), tdx, tdw, tdb, p);
  EXPECT_TRUE(close(tdx, dx, kTf32, "tf32 conv backward data"));
  EXPECT_TRUE(close(tdw, dw, kTf32, "tf32 conv backward filter"));
  EXPECT_TRUE(close(tdb, db, tolerance(Accuracy::kReduction, 8 * 12 * 12), "conv backward bias"));
  const auto algos = tf32->conv_algorithms();
  EXPECT_TRUE(std::any_of(algos.begin(), algos.end(), [](const ConvAlgoChoice& a) {
    return a.tensor_ops;
  })) << "no backward pass runs with tensor-op math on the default backend";

  const Tensor lx = random({64, 512}, 34), lw = random({128, 512}, 35), lb = random({128}, 36),
               ldy = random({64, 128}, 37);
  Tensor ly(cpu(), {64, 128}), ldx(cpu(), {64, 512}), ldw(cpu(), {128, 512}), ldb(cpu(), {128});
  cpu().linear_forward(lx, lw, lb, ly);
  cpu().linear_backward(lx, lw, ldy, ldx, ldw, ldb);
  auto run_linear = [&](GpuBackend& be) {
    Tensor y(be, {64, 128}), dx(be, {64, 512}), dw(be, {128, 512}), db(be, {128});
    const Tensor gx = to_gpu(be, lx), gw = to_gpu(be, lw);
    be.linear_forward(gx, gw, to_gpu(be, lb), y);
    be.linear_backward(gx, gw, to_gpu(be, ldy), dx, dw, db);
    return std::vector<Tensor>{copy_to(cpu(), y), copy_to(cpu(), dx), copy_to(cpu(), dw)};
  };
  const auto fast = run_linear(*tf32);
  const auto strict = run_linear(gpu());
  EXPECT_TRUE(close(fast[0], ly, kTf32, "tf32 linear forward"));
  EXPECT_TRUE(close(fast[1], ldx, kTf32, "tf32 linear backward data"));
  EXPECT_TRUE(close(fast[2], ldw, kTf32, "tf32 linear backward weights"));
  EXPECT_NE(fast[0].to_vector(), strict[0].to_vector())
      << "the default backend's linear layer gives the strict one's bits: TF32 is not in use";
}

// A step that needs more memory than the pool's cap while it is captured:
// the capture fails with the out-of-memory reason, nothing it allocated
// stays in use (nor a cuBLAS workspace: the step runs no cuBLAS), and the
// backend works afterwards.
TEST_F(CudaParity, OutOfMemoryInsideACaptureFailsTheCaptureAndLeavesTheBackendUsable) {
  Settings capped;
  capped.gpu_mem_max = 96ull << 20;  // 128 MiB does not fit
  CudaBackendOptions options;
  options.strict_fp32 = true;
  auto be = create_cuda_backend(0, capped, options);
  Tensor x(*be, {1 << 20});
  be->fill(x, 1.0f);
  be->synchronize();
  const std::uint64_t in_use = be->memory_stats().in_use_bytes;
  std::string why;
  auto graph = be->capture(
      [&] {
        Tensor scratch(*be, {1 << 20});
        be->add(x, x, scratch);
        Tensor too_big(*be, {32 << 20});  // 128 MiB over a 96 MiB cap
        be->fill(too_big, 2.0f);
      },
      &why);
  EXPECT_FALSE(graph);
  EXPECT_NE(why.find("could not be captured"), std::string::npos) << why;
  EXPECT_NE(why.find("cap"), std::string::npos) << "the out-of-memory text: " << why;
  be->synchronize();
  EXPECT_EQ(be->memory_stats().in_use_bytes, in_use) << "the failed capture's memory came back";
  be->scale(x, 3.0f);
  const std::vector<float> v = x.to_vector();
  EXPECT_EQ(v.front(), 3.0f) << "nothing of the failed capture ran; the stream still works";
  EXPECT_EQ(v.back(), 3.0f);
}

}  // namespace
}  // namespace stoke::testing
