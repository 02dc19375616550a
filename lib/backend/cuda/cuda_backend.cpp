// CudaBackend: stream, memory, copies, handles, workspace and kernel launches.
// The ops live one family per file.
#include "backend/cuda/cuda_backend.hpp"

#include <unordered_map>
#include <vector>

#include "backend/cuda/check.hpp"
#include "backend/cuda/conv2d.hpp"  // ConvSetup, cached per shape
#include "backend/update_scalars.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::cuda {
namespace {

// cuDNN and cuBLAS handles are not thread-safe, so each thread that issues
// ops keeps its own per device, created on first use and destroyed when the
// thread ends.
struct ThreadHandles {
  std::unordered_map<int, cudnnHandle_t> cudnn;
  std::unordered_map<int, cublasHandle_t> cublas;
  ~ThreadHandles() {
    for (auto& [device, h] : cudnn) STOKE_CUDNN_WARN(cudnnDestroy(h));
    for (auto& [device, h] : cublas) STOKE_CUDA_WARN(cublasDestroy(h));
  }
};

ThreadHandles& thread_handles() {
  thread_local ThreadHandles handles;
  return handles;
}

// cuBLAS needs a user workspace to be capturable in a graph without its own
// cudaMalloc (NVIDIA recommends 32 MiB on Hopper).
constexpr std::size_t kCublasWorkspace = 32ull << 20;

}  // namespace

void expect_defined(const char* op, const char* name, const Tensor& t) {
  if (!t.defined()) throw InvalidArgument(std::string(op) + ": tensor '" + name + "' is undefined");
  if (t.backend().is_host()) {
    throw InvalidArgument(std::string(op) + ": tensor '" + name + "' lives on " +
                          t.backend().name() + ", not on the CUDA backend");
  }
}

TensorDesc::TensorDesc(int n, int c, int h, int w, cudnnDataType_t type) {
  STOKE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
  STOKE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, type, n, c, h, w));
}

TensorDesc::TensorDesc(const Shape& s, cudnnDataType_t type)
    : TensorDesc(static_cast<int>(s.at(0)), s.size() > 1 ? static_cast<int>(s[1]) : 1,
                 s.size() > 2 ? static_cast<int>(s[2]) : 1,
                 s.size() > 3 ? static_cast<int>(s[3]) : 1, type) {}

TensorDesc::~TensorDesc() {
  if (desc_) STOKE_CUDNN_WARN(cudnnDestroyTensorDescriptor(desc_));
}

CudaBackend::CudaBackend(int device, std::shared_ptr<MemoryPool> pool, CudaBackendOptions options)
    : device_(device), pool_(std::move(pool)), options_(options) {
  if (!pool_)
    throw InvalidArgument("CudaBackend: no device pool for cuda:" + std::to_string(device));
  make_current();
  STOKE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  int major = 0, minor = 0;
  STOKE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  STOKE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  compute_capability_ = major * 10 + minor;
}

CudaBackend::~CudaBackend() {
  STOKE_CUDA_WARN(cudaSetDevice(device_));
  if (stream_) STOKE_CUDA_WARN(cudaStreamSynchronize(stream_));
  destroy_busy_events();
  try {
    for (void* p : retired_workspaces_) pool_->deallocate(p, nullptr);
    if (workspace_) pool_->deallocate(workspace_, nullptr);
    if (staging_) pool_->deallocate(staging_, nullptr);
    if (cublas_workspace_) pool_->deallocate(cublas_workspace_, nullptr);
  } catch (const std::exception& e) {
    log_error(std::string("cuda backend teardown: ") + e.what());
  }
  // Handles of this thread were bound to the stream; unbind before it goes.
  auto& h = thread_handles();
  if (auto it = h.cudnn.find(device_); it != h.cudnn.end())
    STOKE_CUDNN_WARN(cudnnSetStream(it->second, nullptr));
  if (auto it = h.cublas.find(device_); it != h.cublas.end())
    STOKE_CUDA_WARN(cublasSetStream(it->second, nullptr));
  if (stream_) STOKE_CUDA_WARN(cudaStreamDestroy(stream_));
}

// Sets the device only when another one is current: cheaper per op, and a
// no-op while this thread captures a graph.
void CudaBackend::make_current() const {
  int current = -1;
  STOKE_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) STOKE_CUDA_CHECK(cudaSetDevice(device_));
}

void* CudaBackend::allocate(std::size_t bytes) {
  return pool_->allocate(bytes, stream_);
}

void CudaBackend::free(void* ptr, std::size_t /*bytes*/) noexcept {
  if (!ptr) return;
  if (capturing_) {  // the graph being captured may still use it
    held_during_capture_.push_back(ptr);
    return;
  }
  try {
    pool_->deallocate(ptr, stream_);
  } catch (const std::exception& e) {
    log_error(std::string("cuda backend free: ") + e.what());
  }
}

MemoryStats CudaBackend::memory_stats() const {
  const PoolStats s = pool_->stats();
  return {s.in_use, s.peak_in_use, s.live_allocations};
}

PoolStats CudaBackend::pool_stats() const {
  return pool_->stats();
}

std::uint64_t CudaBackend::device_memory_bytes() const {
  make_current();
  std::size_t free_bytes = 0, total = 0;
  STOKE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total;
}

std::uint64_t CudaBackend::device_used_bytes() const {
  make_current();
  std::size_t free_bytes = 0, total = 0;
  STOKE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return total - free_bytes;
}

void CudaBackend::reset_peak() {
  pool_->reset_peak();
}

void CudaBackend::release_workspace() {
  if (capturing_) return;
  const auto lock = workspace_lock();
  drop_workspace();
}

// The current block goes back to the pool in stream order, or waits in
// retired_workspaces_ while a graph (live, or being captured) may use it.
void CudaBackend::retire(void* block) {
  if (!block) return;
  if (live_graphs_ > 0 || capturing_) {
    retired_workspaces_.push_back(block);
  } else {
    pool_->deallocate(block, stream_);
  }
}

void CudaBackend::drop_workspace() {
  retire(workspace_);
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  retire(staging_);
  staging_ = nullptr;
  staging_bytes_ = 0;
}

void CudaBackend::graph_destroyed() {
  if (live_graphs_ > 0) --live_graphs_;
  release_retired_workspaces();
}

void CudaBackend::release_retired_workspaces() {
  if (live_graphs_ > 0 || capturing_) return;
  for (void* p : retired_workspaces_) free(p, 0);
  retired_workspaces_.clear();
}

// Grown, never shrunk between ops: the largest convolution sets the size; the
// old block is retired.
void* CudaBackend::grown(void*& block, std::size_t& size, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > size) {
    retire(block);
    block = nullptr;
    size = 0;
    block = pool_->allocate(bytes, stream_);
    size = bytes;
  }
  return block;
}

void* CudaBackend::workspace(std::size_t bytes) {
  return grown(workspace_, workspace_bytes_, bytes);
}

void* CudaBackend::staging(std::size_t bytes) {
  return grown(staging_, staging_bytes_, bytes);
}

void CudaBackend::copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) {
  if (bytes == 0) return;
  if (!dst || !src) throw InvalidArgument("cuda backend copy: null pointer");
  make_current();
  const cudaMemcpyKind k = kind == CopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                           : kind == CopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                             : cudaMemcpyDeviceToDevice;
  STOKE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, stream_));
}

void CudaBackend::fill(Tensor& tensor, float value) {
  expect_defined("fill", "tensor", tensor);
  if (tensor.dtype() != DType::kFloat32) throw InvalidArgument("fill: float32 tensors only");
  float* y = tensor.data<float>();
  const long long n = tensor.numel();
  launch_n("stoke_fill", n, {&y, &value, &n});
}

void CudaBackend::write_values(Tensor& tensor, std::span<const float> values) {
  check_write_values(tensor, values);
  if (values.empty()) return;
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (std::size_t i = 0; i < values.size(); ++i) v[i] = values[i];
  float* y = tensor.data<float>();
  const int count = static_cast<int>(values.size());
  launch("stoke_write_values", dim3(1), dim3(1), {&y, &count, &v[0], &v[1], &v[2], &v[3]});
}

void CudaBackend::synchronize() {
  make_current();
  if (collective_watch_ && collective_watch_->collective_queued()) {
    collective_watch_->wait_stream();  // bounded: a dead peer cannot hang it
    return;
  }
  STOKE_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

cudnnHandle_t CudaBackend::cudnn() const {
  make_current();
  auto& map = thread_handles().cudnn;
  auto it = map.find(device_);
  if (it == map.end()) {
    cudnnHandle_t h = nullptr;
    STOKE_CUDNN_CHECK(cudnnCreate(&h));
    it = map.emplace(device_, h).first;
  }
  STOKE_CUDNN_CHECK(cudnnSetStream(it->second, stream_));
  return it->second;
}

cublasHandle_t CudaBackend::cublas() {
  make_current();
  auto& map = thread_handles().cublas;
  auto it = map.find(device_);
  if (it == map.end()) {
    cublasHandle_t h = nullptr;
    STOKE_CUBLAS_CHECK(cublasCreate(&h));
    it = map.emplace(device_, h).first;
  }
  {
    const auto lock = workspace_lock();  // two threads' first linear op
    if (!cublas_workspace_) {
      cublas_workspace_ = pool_->allocate(kCublasWorkspace, stream_);
      cublas_workspace_bytes_ = kCublasWorkspace;
    }
  }
  cublasHandle_t h = it->second;
  STOKE_CUBLAS_CHECK(cublasSetStream(h, stream_));
  STOKE_CUBLAS_CHECK(cublasSetWorkspace(h, cublas_workspace_, cublas_workspace_bytes_));
  STOKE_CUBLAS_CHECK(cublasSetMathMode(
      h, options_.strict_fp32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_TF32_TENSOR_OP_MATH));
  return h;
}

void CudaBackend::set_strict_fp32(bool strict) {
  options_.strict_fp32 = strict;
}

std::vector<ConvAlgoChoice> CudaBackend::conv_algorithms() const {
  std::lock_guard lock(algo_mutex_);
  std::vector<ConvAlgoChoice> out;
  for (const auto& key : algo_order_) out.push_back(algos_.at(key));
  return out;
}

namespace {
bool want_jit(Toggle t) {
  return t != Toggle::kOff;
}
}  // namespace

std::string CudaBackend::kernel_origin() {
  std::lock_guard lock(kernels_mutex_);
  if (!kernels_)
    kernels_ = std::make_unique<KernelSet>(device_, want_jit(options_.jit),
                                           JitCache(JitCache::default_directory()));
  if (kernels_->origin() == KernelOrigin::kPrecompiled) return "precompiled";
  return "jit sm_" + std::to_string(kernels_->arch()) + " (" +
         std::to_string(kernels_->compiled_count()) + " files compiled, the rest from the cache)";
}

void CudaBackend::launch(const char* name, dim3 grid, dim3 block,
                         std::initializer_list<const void*> args) {
  const void* fn = nullptr;
  {
    std::lock_guard lock(kernels_mutex_);
    if (!kernels_) {
      make_current();
      kernels_ = std::make_unique<KernelSet>(device_, want_jit(options_.jit),
                                             JitCache(JitCache::default_directory()));
    }
    fn = kernels_->function(name);
  }
  make_current();
  std::vector<void*> argv;
  argv.reserve(args.size());
  for (const void* a : args) argv.push_back(const_cast<void*>(a));
  cuda::launch(fn, grid, block, argv.data(), stream_, name);
}

void CudaBackend::launch_n(const char* name, long long n, std::initializer_list<const void*> args) {
  if (n <= 0) return;
  launch(name, grid_for(n), dim3(256), args);
}

float CudaBackend::time_ms(const std::function<void()>& work, int repeats) {
  if (repeats < 1) repeats = 1;
  make_current();
  cudaEvent_t start = nullptr, stop = nullptr;
  STOKE_CUDA_CHECK(cudaEventCreate(&start));
  STOKE_CUDA_CHECK(cudaEventCreate(&stop));
  float ms = 0.0f;
  try {
    STOKE_CUDA_CHECK(cudaEventRecord(start, stream_));
    for (int i = 0; i < repeats; ++i) work();
    STOKE_CUDA_CHECK(cudaEventRecord(stop, stream_));
    STOKE_CUDA_CHECK(cudaEventSynchronize(stop));
    STOKE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  } catch (...) {
    STOKE_CUDA_WARN(cudaEventDestroy(start));
    STOKE_CUDA_WARN(cudaEventDestroy(stop));
    throw;
  }
  STOKE_CUDA_WARN(cudaEventDestroy(start));
  STOKE_CUDA_WARN(cudaEventDestroy(stop));
  return ms / static_cast<float>(repeats);
}

}  // namespace stoke::cuda
