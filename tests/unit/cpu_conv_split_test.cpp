// The CPU convolution's work splits (conv2d_dnnl.cpp, or im2col without
// oneDNN): a single image in bands of output rows (forward) or over channels
// (backward), a batch over images, at 1 to 5 arena threads, against the naive
// reference with the op suite's tolerances; and the fused epilogue
// (bias + residual + ReLU) against the plain ops composed.
#include <tuple>

#include "backend/cpu/conv2d_dnnl.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/naive.hpp"
#include "op_test_util.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/threads.hpp"

namespace stoke::testing {
namespace {

struct Case {
  Shape x, w;
  Conv2dParams p;
};

const Case kCases[] = {
    {{1, 3, 13, 11}, {8, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},   // stem-like, odd rows for uneven bands
    {{1, 8, 12, 12}, {16, 8, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},  // strided
    {{1, 8, 9, 9}, {8, 8, 1, 1}, {2, 2, 0, 0, 1, 1, 1}},     // 1x1 shortcut, stride 2
    {{1, 6, 10, 10}, {6, 3, 3, 3}, {1, 1, 2, 2, 2, 2, 2}},   // dilated, grouped
    {{1, 4, 3, 7}, {5, 4, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},     // fewer rows than threads
    {{3, 4, 8, 8}, {6, 4, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},     // a batch
    // Batches whose channels oneDNN keeps in its blocked layouts (staged
    // through reorders, conv2d_dnnl_layout.cpp); 20 channels pad a block.
    {{4, 16, 10, 10}, {32, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},
    {{3, 32, 9, 9}, {20, 32, 3, 3}, {2, 2, 1, 1, 1, 1, 1}},
    {{2, 16, 8, 8}, {32, 16, 1, 1}, {2, 2, 0, 0, 1, 1, 1}},
    {{9, 3, 12, 12}, {16, 3, 3, 3}, {1, 1, 1, 1, 1, 1, 1}},  // stem; 9 images in 8 parts
    {{2, 32, 6, 6}, {32, 16, 3, 3}, {1, 1, 1, 1, 1, 1, 2}},  // grouped
};

std::string describe(const Case& c, int threads) {
  std::string out = "x";
  out += shape_to_string(c.x);
  out += " w";
  out += shape_to_string(c.w);
  out += " threads ";
  out += std::to_string(threads);
  return out;
}

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(thread_count()) { set_thread_count(n); }
  ~ThreadCount() { set_thread_count(saved_); }

 private:
  int saved_;
};

// One forward and backward of case c on `be` and on the naive reference
// (inputs from seeds seed + 1 to seed + 4), y, dx and dw checked with
// `accuracy`'s tolerance, db (a plain sum) with kReduction's; returns y, dx,
// dw and db.
std::vector<std::vector<float>> run_against_naive(cpu::CpuBackend& be, const Case& c,
                                                  std::uint32_t seed, Accuracy accuracy,
                                                  const std::string& what) {
  const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
  Tensor x = random_tensor(be, c.x, seed + 1), w = random_tensor(be, c.w, seed + 2);
  Tensor b = random_tensor(be, {c.w[0]}, seed + 3), dy = random_tensor(be, ys, seed + 4);
  Tensor y(be, ys), ry(be, ys), dx(be, c.x), rdx(be, c.x), dw(be, c.w), rdw(be, c.w),
      db(be, {c.w[0]}), rdb(be, {c.w[0]});
  be.conv2d_forward(x, w, b, y, c.p);
  cpu::naive::conv2d_forward(x, w, b, ry, c.p);
  be.conv2d_backward(x, w, dy, dx, dw, db, c.p);
  cpu::naive::conv2d_backward(x, w, dy, rdx, rdw, rdb, c.p);
  const auto taps = static_cast<std::size_t>(c.w[1] * c.w[2] * c.w[3]);
  const auto back_taps = static_cast<std::size_t>(c.w[0] * c.w[2] * c.w[3]);
  const auto spatial = static_cast<std::size_t>(c.x[0] * ys[2] * ys[3]);
  expect_close(y, ry, tolerance(accuracy, taps), "y " + what);
  expect_close(dx, rdx, tolerance(accuracy, back_taps), "dx " + what);
  expect_close(dw, rdw, tolerance(accuracy, spatial), "dw " + what);
  expect_close(db, rdb, tolerance(Accuracy::kReduction, spatial), "db " + what);
  return {y.to_vector(), dx.to_vector(), dw.to_vector(), db.to_vector()};
}

TEST(CpuConvSplit, EveryThreadCountMatchesNaiveAndOneThreadBitForBit) {
  std::vector<std::vector<float>> first;  // the 1-thread results, per case and output
  for (int threads : {1, 2, 3, 5}) {
    ThreadCount tc(threads);
    cpu::CpuBackend be;
    std::uint32_t seed = 40;
    std::size_t out = 0;
    for (const Case& c : kCases) {
      const std::string what = describe(c, threads);
      const auto outputs = run_against_naive(be, c, seed, Accuracy::kReduction, what);
      seed += 4;
      for (const std::vector<float>& t : outputs) {
        if (threads == 1) {
          first.push_back(t);
        } else {
          EXPECT_EQ(t, first[out]) << "not the 1-thread bits: " << what;
        }
        ++out;
      }
    }
  }
}

TEST(CpuConvSplit, SerialEqualsParallelForOneImage) {
  ThreadCount tc(3);
  cpu::CpuBackend serial, parallel;
  serial.set_execution(Execution::kSerial);
  const Case& c = kCases[0];
  const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
  Tensor none;
  Tensor x = random_tensor(parallel, c.x, 1), w = random_tensor(parallel, c.w, 2),
         dy = random_tensor(parallel, ys, 3);
  Tensor ya(parallel, ys), yb(serial, ys), dxa(parallel, c.x), dxb(serial, c.x), dwa(parallel, c.w),
      dwb(serial, c.w);
  parallel.conv2d_forward(x, w, none, ya, c.p);
  serial.conv2d_forward(x, w, none, yb, c.p);
  parallel.conv2d_backward(x, w, dy, dxa, dwa, none, c.p);
  serial.conv2d_backward(x, w, dy, dxb, dwb, none, c.p);
  expect_identical(ya, yb, "y");
  expect_identical(dxa, dxb, "dx");
  expect_identical(dwa, dwb, "dw");
}

TEST(CpuConvSplit, FusedEpilogueMatchesThePlainOps) {
  for (int threads : {1, 2, 3}) {
    ThreadCount tc(threads);
    cpu::CpuBackend be;
    std::uint32_t seed = 90;
    for (const Case& c : kCases) {
      const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
      const std::string what = describe(c, threads);
      Tensor x = random_tensor(be, c.x, ++seed), w = random_tensor(be, c.w, ++seed);
      Tensor b = random_tensor(be, {c.w[0]}, ++seed), res = random_tensor(be, ys, ++seed);
      Tensor conv(be, ys), sum(be, ys), want(be, ys), got(be, ys), relu_only(be, ys),
          want_relu(be, ys);
      be.conv2d_forward(x, w, b, conv, c.p);
      be.add(conv, res, sum);
      be.relu_forward(sum, want);
      be.relu_forward(conv, want_relu);
      if (!cpu::dnnl_conv::enabled()) GTEST_SKIP() << "built without oneDNN";
      be.conv2d_fused_forward(x, w, b, res, got, c.p, Activation::kRelu);
      be.conv2d_fused_forward(x, w, b, Tensor(), relu_only, c.p, Activation::kRelu);
      // One rounding more or less (the add) on values of size ~sqrt(reduction).
      expect_close(
          got, want,
          tolerance(Accuracy::kReduction, static_cast<std::size_t>(c.w[1] * c.w[2] * c.w[3])),
          what);
      expect_close(relu_only, want_relu, tolerance(Accuracy::kElementwise), "relu only " + what);
    }
  }
}

// A batch's 3x3 stride-1 layer of 32 channels or more and 28x28 output
// pixels per image runs oneDNN's Winograd kernels in all three passes where
// it has them (AVX-512), within the op suite's convolution tolerance of the
// naive reference, and the same bits at 1, 2 and 3 threads; at 14x14, or
// with the 3 channels of a stem, it keeps the direct kernels.
TEST(CpuConvSplit, WinogradForLargeImagesMatchesNaiveAtEveryThreadCount) {
  if (!cpu::dnnl_conv::enabled()) GTEST_SKIP() << "built without oneDNN";
  const Case c{{2, 32, 28, 28}, {40, 32, 3, 3}, {1, 1, 1, 1, 1, 1, 1}};
  const std::string kernels = cpu::dnnl_conv::batch_kernels(c.x, c.w, c.p);
  const bool avx512 = kernels.find("avx512") != std::string::npos;
  EXPECT_EQ(kernels.find("wino") != std::string::npos, avx512) << kernels;
  if (avx512) {
    EXPECT_EQ(kernels.find("jit:"), std::string::npos) << "a pass is not Winograd: " << kernels;
  }
  // The op suite's Winograd-sized cases (op_suite_conv2d_test.cpp) take it too.
  const Conv2dParams unpadded{1, 1, 0, 0, 1, 1, 1};
  for (const auto& [x, w, p] : {std::tuple{Shape{3, 36, 29, 31}, Shape{34, 36, 3, 3}, c.p},
                                std::tuple{Shape{2, 32, 32, 30}, Shape{32, 32, 3, 3}, unpadded}}) {
    const std::string k = cpu::dnnl_conv::batch_kernels(x, w, p);
    EXPECT_EQ(k.find("wino") != std::string::npos, avx512) << shape_to_string(x) << ": " << k;
  }
  const std::string small = cpu::dnnl_conv::batch_kernels({2, 32, 14, 14}, c.w, c.p);
  EXPECT_EQ(small.find("wino"), std::string::npos) << small;
  const std::string stem = cpu::dnnl_conv::batch_kernels({2, 3, 28, 28}, {32, 3, 3, 3}, c.p);
  EXPECT_EQ(stem.find("wino"), std::string::npos) << stem;
  std::vector<std::vector<float>> first;
  for (int threads : {1, 2, 3}) {
    ThreadCount tc(threads);
    cpu::CpuBackend be;
    const std::string what = describe(c, threads);
    const auto got = run_against_naive(be, c, 6, Accuracy::kConvolution, what);
    if (threads == 1) first = got;
    EXPECT_EQ(got, first) << "not the 1-thread bits: " << what;
  }
}

TEST(CpuConvSplit, FusedRejectsAMismatchedResidual) {
  cpu::CpuBackend be;
  const Case& c = kCases[0];
  const Shape ys = conv2d_output_shape(c.x, c.w, c.p);
  Tensor x = random_tensor(be, c.x, 1), w = random_tensor(be, c.w, 2), none, y(be, ys),
         res(be, {1, 1, 2, 2});
  be.conv2d_fused_forward(x, w, none, none, y, c.p, Activation::kIdentity);
  EXPECT_THROW(be.conv2d_fused_forward(x, w, none, res, y, c.p, Activation::kRelu),
               InvalidArgument);
}

}  // namespace
}  // namespace stoke::testing

namespace stoke::testing {
namespace {

// A train step (forward, both backward passes, SGD) through the CPU
// convolution allocates nothing after the first step, at batch 1 (channel and
// band splits) and at a batch (image split).
TEST(CpuConvSplit, TrainStepAllocatesNothingAfterTheFirst) {
  ThreadCount tc(2);
  // 28x28: a batch's 3x3 layers take Winograd (with its scratchpads) on AVX-512.
  for (const auto& [batch, size] :
       {std::pair<std::int64_t, std::int64_t>{1, 12}, {4, 12}, {4, 28}}) {
    cpu::CpuBackend be;
    nn::ModelSpec spec;
    spec.in_channels = 3;
    spec.height = spec.width = size;
    spec.stem_width = 8;
    spec.widths = {32, 32};  // Winograd from 32 channels
    spec.strides = {1, 2};
    spec.blocks_per_stage = 1;
    auto model = nn::build_model(be, spec, 1);
    nn::Sgd sgd(*model);
    nn::TrainStep step(*model, sgd);
    Tensor x = random_tensor(be, model->input_shape(batch), 2);
    Tensor labels(be, {batch}, DType::kInt32);
    std::vector<std::int32_t> l(static_cast<std::size_t>(batch), 1);
    labels.copy_from_host(l.data());
    step.run(x, labels, 0.01f);
    const MemoryStats first = be.memory_stats();
    step.run(x, labels, 0.01f);
    step.run(x, labels, 0.01f);
    const std::string what =
        "batch " + std::to_string(batch) + ", " + std::to_string(size) + "x" + std::to_string(size);
    EXPECT_EQ(be.memory_stats().allocations, first.allocations) << what;
    EXPECT_EQ(be.memory_stats().peak_bytes, first.peak_bytes) << what;
  }
}

// Not even a block taken and given back within a step: the 2nd..4th steps of
// a batch whose convolutions run in oneDNN's blocked layouts (staged in the
// workspace) ask the allocator for nothing.
TEST(CpuConvSplit, TrainStepsAfterTheFirstServeNoAllocation) {
  ThreadCount tc(2);
  cpu::CpuBackend be;
  nn::ModelSpec spec;
  spec.in_channels = 3;
  spec.height = spec.width = 16;
  spec.stem_width = 16;
  spec.widths = {16, 32};
  spec.strides = {1, 2};
  spec.blocks_per_stage = 1;
  auto model = nn::build_model(be, spec, 1);
  nn::Sgd sgd(*model, {0.9f, 5e-4f, false});
  nn::TrainStep step(*model, sgd);
  const std::int64_t batch = 4;
  Tensor x = random_tensor(be, model->input_shape(batch), 3);
  Tensor labels(be, {batch}, DType::kInt32);
  std::vector<std::int32_t> l{0, 1, 2, 3};
  labels.copy_from_host(l.data());
  step.run(x, labels, 0.01f);
  const std::uint64_t after_first = be.total_allocations();
  for (int i = 0; i < 3; ++i) step.run(x, labels, 0.01f);
  EXPECT_EQ(be.total_allocations(), after_first);
}

}  // namespace
}  // namespace stoke::testing
