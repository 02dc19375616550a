// The CUDA backend: cuDNN convolutions and batch norm, cuBLAS linear layers,
// NVRTC/precompiled custom kernels for the rest, all issued on one compute
// stream with no host synchronization inside an op. Memory (tensors and
// workspace) comes from the capped device pool in stream order.
//
// Two threads may issue ops on one backend (the stream serializes them): the
// shared per-shape convolution descriptors (whose math type is set per call),
// the workspace and cuBLAS's workspace are locked from the moment an op takes
// them until its work is enqueued. Graph capture and busy spans remain one
// thread's at a time.
//
// The op families live one per file: conv2d.cpp (+ conv2d_algo.cpp), batch_norm.cpp,
// linear.cpp, pool.cpp, elementwise.cpp (relu, add, scale, dropout), loss.cpp, optim.cpp
// (the same file stems as the CPU backend's);
// graph capture in graph.cpp.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <atomic>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/kernels.hpp"
#include "stoke/cuda.hpp"
#include "stoke/memory.hpp"

namespace stoke::cuda {

class ConvSetup;

class STOKE_INTERNAL CudaBackend final : public GpuBackend {
 public:
  CudaBackend(int device, std::shared_ptr<MemoryPool> pool, CudaBackendOptions options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda:" + std::to_string(device_); }
  bool is_host() const noexcept override { return false; }

  void* allocate(std::size_t bytes) override;
  void free(void* ptr, std::size_t bytes) noexcept override;
  MemoryStats memory_stats() const override;
  PoolStats pool_stats() const override;
  std::uint64_t device_memory_bytes() const override;
  std::uint64_t device_used_bytes() const override;
  void reset_peak() override;
  std::size_t conv2d_workspace_bytes(const Shape& x, const Shape& w,
                                     const Conv2dParams& params) const override;
  void release_workspace() override;

  void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) override;
  void fill(Tensor& tensor, float value) override;
  void write_values(Tensor& tensor, std::span<const float> values) override;
  void synchronize() override;

  // GpuBackend
  int device() const noexcept override { return device_; }
  StreamHandle compute_stream() const noexcept override { return stream_; }
  // Mixed-precision training convolutions (conv2d_low.cpp): bf16 natively on
  // compute capability 8.0 and later (bf16 tensor cores), fp16 on 7.0 and
  // later (the trainer scales the loss for fp16); none before.
  PrecisionSupport training_precision_support(Precision precision) const noexcept override;
  void set_training_precision(Precision precision) override;
  Precision training_precision() const noexcept override { return training_precision_; }
  // bf16 inference (the plain program, its convolutions in bf16): where
  // training_precision_support(bf16) is native.
  PrecisionSupport inference_precision(Precision precision) const noexcept override;
  std::unique_ptr<InferenceProgram> compile_inference(std::vector<InferenceStep> steps,
                                                      ProgramLayout layout,
                                                      Precision precision) override;
  void set_strict_fp32(bool strict) override;
  bool strict_fp32() const noexcept override { return options_.strict_fp32; }
  void set_conv_benchmark(bool on) override { options_.conv_benchmark = on; }
  std::vector<ConvAlgoChoice> conv_algorithms() const override;
  std::string save_conv_algorithms() const override;
  std::size_t load_conv_algorithms(const std::string& text) override;
  std::string kernel_origin() override;
  float time_ms(const std::function<void()>& work, int repeats) override;
  void begin_busy() override;
  void end_busy() override;
  double take_busy_seconds(bool wait) override;
  std::unique_ptr<CapturedStep> capture(const std::function<void()>& step,
                                        std::string* why) override;
  // NCCL groups (nccl_communicator.cpp).
  std::string device_collectives_unavailable() const override;
  std::vector<std::uint8_t> new_device_group_id() override;
  std::unique_ptr<DeviceCommunicator> join_device_group(int rank, int world_size,
                                                        std::span<const std::uint8_t> id,
                                                        double timeout_seconds) override;
  // A device group on this backend's stream (nccl_communicator.cpp) while it
  // lives: synchronize() then waits through it, bounded, when a collective is
  // queued, instead of blocking in the driver on a peer that never comes.
  struct CollectiveWatch {
    virtual ~CollectiveWatch() = default;
    virtual bool collective_queued() const noexcept = 0;
    // Waits until the stream is idle; CommunicationError (group aborted) on
    // an error or past the group's deadline.
    virtual void wait_stream() = 0;
  };
  void set_collective_watch(CollectiveWatch* watch) noexcept { collective_watch_ = watch; }

  // --- for the op files ----------------------------------------------------
  cudaStream_t stream() const noexcept { return stream_; }
  // This thread's handles for the device, bound to the compute stream.
  cudnnHandle_t cudnn() const;
  cublasHandle_t cublas();
  // Whether any thread ran cuBLAS on this backend (its workspace exists).
  bool uses_cublas() const {
    const auto lock = workspace_lock();
    return cublas_workspace_ != nullptr;
  }
  // Workspace of at least `bytes` from the pool, kept between ops. When it
  // grows (or is released) the old block is freed in stream order, unless a
  // live graph may point into it: then it is kept until the last graph goes.
  // Requires: the caller holds workspace_lock() until its work using the
  // block is enqueued (another thread's growth would free it first).
  void* workspace(std::size_t bytes);
  // A second such block for the bf16 copies of a convolution's operands
  // (kept apart: choosing an algorithm may grow the workspace).
  void* staging(std::size_t bytes);
  std::unique_lock<std::recursive_mutex> workspace_lock() const {
    return std::unique_lock(workspace_mutex_);
  }
  // Launches kernel `name` over n elements (grid-stride) on the stream.
  void launch_n(const char* name, long long n, std::initializer_list<const void*> args);
  void launch(const char* name, dim3 grid, dim3 block, std::initializer_list<const void*> args);
  bool capturing() const noexcept { return capturing_; }

  // Convolution algorithm choice (conv2d_algo.cpp). `pass`: 0 forward,
  // 1 backward data, 2 backward filter. Buffers are used only when
  // benchmarking (outside a capture).
  struct ConvCall;
  // options_.conv_workspace_limit, or its automatic value (see CudaBackendOptions).
  std::size_t conv_workspace_limit() const;
  ConvAlgoChoice choose_conv_algo(int pass, const ConvCall& call) const;
  // The descriptors of a convolution shape, built once per backend
  // (conv2d.cpp). Shared: a caller that eviction of the cache (at
  // kMaxConvSetups shapes) overtakes still holds its setup. Requires: the
  // caller holds workspace_lock() while it sets the setup's math and issues.
  std::shared_ptr<const ConvSetup> conv_setup(const char* op, const Shape& x, const Shape& w,
                                              const Conv2dParams& params);
  std::size_t conv_setups_cached() const;

 private:
  friend class CudaCapturedStep;
  // The ops (STOKE_OPS), behind Backend's front doors, one family per file.
  STOKE_BACKEND_OP_OVERRIDES

  void make_current() const;

  int device_;
  std::shared_ptr<MemoryPool> pool_;
  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  CollectiveWatch* collective_watch_ = nullptr;  // the live device group, if any
  std::unique_ptr<KernelSet> kernels_;           // loaded on first use
  std::mutex kernels_mutex_;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  void* staging_ = nullptr;
  std::size_t staging_bytes_ = 0;
  Precision training_precision_ = Precision::kFp32;
  int compute_capability_ = 0;  // major * 10 + minor
  // What convolutions now run in: a bf16 inference program running on the
  // calling thread makes it bf16, else the training precision.
  Precision convolution_precision() const noexcept;
  void conv2d_forward_low(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                          const Conv2dParams& params);
  void conv2d_backward_low(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx,
                           Tensor& dw, Tensor& db, const Conv2dParams& params);
  // fp32 <-> the 16-bit type of `precision` (bf16 or fp16).
  void narrow(const Tensor& x, void* low, Precision precision);
  void widen(const void* low, Tensor& y, Precision precision);
  // Graphs captured on this backend and not yet destroyed, and the workspace
  // blocks they may still point into (freed when the count drops to 0).
  int live_graphs_ = 0;
  std::vector<void*> retired_workspaces_;
  void drop_workspace();
  void retire(void* block);  // to the pool in stream order, or kept while a graph may use it
  void* grown(void*& block, std::size_t& size, std::size_t bytes);  // workspace(), staging()
  void graph_destroyed();
  void release_retired_workspaces();
  void* cublas_workspace_ = nullptr;
  std::size_t cublas_workspace_bytes_ = 0;
  static constexpr std::size_t kMaxConvSetups = 256;
  mutable std::mutex conv_setups_mutex_;
  std::map<std::array<std::int64_t, 16>, std::shared_ptr<const ConvSetup>> conv_setups_;
  // Held by every op from taking the workspace (and a convolution's shared
  // descriptors) until its work is enqueued; recursive: fused ops call plain ones.
  mutable std::recursive_mutex workspace_mutex_;
  mutable std::mutex algo_mutex_;
  mutable std::map<std::string, ConvAlgoChoice> algos_;
  mutable std::vector<std::string> algo_order_;
  // While capturing, frees are held (the graph keeps using the memory).
  bool capturing_ = false;
  std::vector<void*> held_during_capture_;
  // Device-busy intervals (busy.cpp): recorded, not yet harvested, in order.
  struct BusyInterval {
    cudaEvent_t start, stop;
  };
  cudaEvent_t busy_open_ = nullptr;
  std::deque<BusyInterval> busy_pending_;
  std::vector<cudaEvent_t> busy_spare_;
  cudaEvent_t busy_event();
  void destroy_busy_events() noexcept;
};

// InvalidArgument naming op and tensor unless t is defined and on this backend
// (fill(); the ops are checked by Backend's front doors).
STOKE_INTERNAL void expect_defined(const char* op, const char* name, const Tensor& t);

// RAII cuDNN descriptors.
class STOKE_INTERNAL TensorDesc {
 public:
  TensorDesc(int n, int c, int h, int w, cudnnDataType_t type = CUDNN_DATA_FLOAT);
  // rank 2 (N, C) is (N, C, 1, 1)
  explicit TensorDesc(const Shape& nchw, cudnnDataType_t type = CUDNN_DATA_FLOAT);
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const noexcept { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

}  // namespace stoke::cuda
