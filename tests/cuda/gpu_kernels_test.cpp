// The custom kernels on a real device: JIT-compiled and precompiled versions
// against a host reference written from the formula. Skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "backend/cuda/check.hpp"
#include "backend/cuda/kernels.hpp"
#include "backend/cuda/normalize_kernel.hpp"
#include "cuda_device.hpp"

namespace stoke::cuda {
namespace {

class GpuKernels : public ::testing::TestWithParam<bool /*jit*/> {
 protected:
  void SetUp() override {
    if (const std::string why = missing_cuda_device(); !why.empty()) GTEST_SKIP() << why;
    cache_dir_ = std::filesystem::temp_directory_path() / "stoke_gpu_kernels_test_cache";
    kernels_ = std::make_unique<KernelSet>(0, GetParam(), JitCache(cache_dir_));
    ASSERT_EQ(kernels_->origin(), GetParam() ? KernelOrigin::kJit : KernelOrigin::kPrecompiled);
    STOKE_CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    for (void* p : buffers_) cudaFree(p);
    if (stream_) cudaStreamDestroy(stream_);
  }

  template <typename T>
  T* upload(const std::vector<T>& host) {
    void* p = nullptr;
    STOKE_CUDA_CHECK(cudaMalloc(&p, host.size() * sizeof(T)));
    buffers_.push_back(p);
    STOKE_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    return static_cast<T*>(p);
  }
  template <typename T>
  std::vector<T> download(const T* device, std::size_t n) {
    STOKE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<T> host(n);
    STOKE_CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  void run(const char* name, long long n, std::vector<void*> args) {
    launch(kernels_->function(name), grid_for(n), dim3(256), args.data(), stream_, name);
  }

  static std::vector<float> random_floats(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
  }

  std::filesystem::path cache_dir_;
  std::unique_ptr<KernelSet> kernels_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> buffers_;
};

TEST_P(GpuKernels, ReluForwardBackwardAndAddMatchTheFormula) {
  const long long n = 100003;  // not a multiple of the block size
  const auto x = random_floats(n, 1), dy = random_floats(n, 2), b = random_floats(n, 3);
  float* dx_ = upload(x);
  float* ddy = upload(dy);
  float* db = upload(b);
  float* dout = upload(std::vector<float>(n, -7.0f));
  run("stoke_relu_forward", n, {&dx_, &dout, const_cast<long long*>(&n)});
  auto y = download(dout, n);
  for (long long i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f) << i;
  run("stoke_relu_backward", n, {&dx_, &ddy, &dout, const_cast<long long*>(&n)});
  y = download(dout, n);
  for (long long i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] > 0 ? dy[i] : 0.0f) << i;
  run("stoke_add", n, {&dx_, &db, &dout, const_cast<long long*>(&n)});
  y = download(dout, n);
  for (long long i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] + b[i]) << i;
}

TEST_P(GpuKernels, NormalizeU8MatchesTheHostConversion) {
  const int n = 3, h = 17, w = 23, c = 3;
  std::vector<unsigned char> src(static_cast<std::size_t>(n) * h * w * c);
  std::mt19937 rng(7);
  for (auto& v : src) v = static_cast<unsigned char>(rng() & 0xff);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std_dev[3] = {0.229f, 0.224f, 0.225f};
  NormalizeParams params{};
  for (int ch = 0; ch < c; ++ch) {
    params.scale[ch] = 1.0f / (255.0f * std_dev[ch]);
    params.shift[ch] = -mean[ch] / std_dev[ch];
  }
  unsigned char* dsrc = upload(src);
  float* ddst = upload(std::vector<float>(src.size(), 0.0f));
  long long pixels = static_cast<long long>(h) * w;
  int samples = n, channels = c;
  run(kNormalizeKernelName, pixels * n, {&dsrc, &ddst, &pixels, &samples, &channels, &params});
  const auto out = download(ddst, src.size());
  for (int i = 0; i < n; ++i)
    for (int ch = 0; ch < c; ++ch)
      for (int p = 0; p < h * w; ++p) {
        const float x = src[(static_cast<std::size_t>(i) * h * w + p) * c + ch] / 255.0f;
        ASSERT_NEAR(out[(static_cast<std::size_t>(i) * c + ch) * h * w + p],
                    (x - mean[ch]) / std_dev[ch], 1e-5f);
      }
}

TEST_P(GpuKernels, SgdAndAdamUpdatesMatchTheHostFormula) {
  const long long n = 4099;
  auto w = random_floats(n, 11), g = random_floats(n, 12), v = random_floats(n, 13);
  float* dw = upload(w);
  float* dg = upload(g);
  float* dv = upload(v);
  float lr = 0.05f, momentum = 0.9f, wd = 1e-4f;
  int nesterov = 0;
  const float* no_scalars = nullptr;  // the rate comes from the parameter
  run("stoke_sgd_update", n,
      {&dw, &dg, &dv, &no_scalars, &lr, &momentum, &wd, &nesterov, const_cast<long long*>(&n)});
  const auto w1 = download(dw, n);
  for (long long i = 0; i < n; ++i) {
    const float vi = momentum * v[i] + (g[i] + wd * w[i]);
    ASSERT_NEAR(w1[i], w[i] - lr * vi, 1e-6f) << i;
  }
  std::vector<float> m(n, 0.0f), s(n, 0.0f);
  float* dm = upload(m);
  float* ds = upload(s);
  float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, bias1 = 1 - b1, bias2 = 1 - b2;
  int decoupled = 1;
  // The rate and bias corrections from device memory; the parameters are decoys.
  float* dscalars = upload(std::vector<float>{lr, bias1, bias2});
  float decoy = -1.0f;
  run("stoke_adam_update", n,
      {&dw, &dg, &dm, &ds, &dscalars, &decoy, &b1, &b2, &eps, &wd, &decoupled, &decoy, &decoy,
       const_cast<long long*>(&n)});
  const auto w2 = download(dw, n);
  for (long long i = 0; i < n; ++i) {
    const float mi = (1 - b1) * g[i], vi = (1 - b2) * g[i] * g[i];
    const float step = (mi / bias1) / (std::sqrt(vi / bias2) + eps);
    ASSERT_NEAR(w2[i], w1[i] - lr * (step + wd * w1[i]), 1e-5f) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuKernels, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Jit" : "Precompiled"; });

}  // namespace
}  // namespace stoke::cuda
