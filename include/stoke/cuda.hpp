// The CUDA backend's surface beyond Backend: numerics switches, the cuDNN
// algorithms it chose, event timing and CUDA-graph capture of a whole step.
//
// The backend itself lives in the CUDA plugin (libstoke_cuda.so); libstoke
// only sees it through GpuBackend. The registry offers one as "cuda:<index>"
// per device when the plugin loads (see backend.hpp); create_cuda_backend()
// makes a separate one with its own stream and options (tests, benches).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "stoke/backend.hpp"
#include "stoke/config.hpp"
#include "stoke/export.hpp"
#include "stoke/memory.hpp"

namespace stoke {

struct CudaBackendOptions {
  // Strict FP32: cuDNN convolutions with CUDNN_FMA_MATH and cuBLAS pedantic
  // math (no TF32 tensor cores). Off by default: TF32 trades ~10 mantissa bits
  // of the products for several times the throughput on sm_80+, which training
  // tolerates; the parity tests turn strict on.
  bool strict_fp32 = false;
  // Choose each convolution's algorithms by timing them (cudnnFind*Ex) once
  // per shape instead of by cuDNN's heuristics; the choice is cached.
  bool conv_benchmark = false;
  // Deterministic cuDNN convolution algorithms only (no atomics reordering
  // sums between runs): bitwise-repeatable steps, sometimes slower.
  bool deterministic = false;
  // Largest workspace one convolution algorithm may take from the pool; 0:
  // the larger of 512 MiB and an eighth of the pool's cap (10.5 GiB under an
  // H200's default cap). A fixed 512 MiB kept cuDNN's fast algorithms out at
  // batch 256 on an H200 (their workspaces grow with the batch).
  std::size_t conv_workspace_limit = 0;
  // STOKE_GPU_JIT: NVRTC-compiled kernels for the exact device (on/auto) or
  // the precompiled ones (off).
  Toggle jit = Toggle::kAuto;
};

// One cached cuDNN algorithm choice.
struct ConvAlgoChoice {
  std::string pass;    // "forward", "backward_data", "backward_filter"
  std::string key;     // shapes, padding, stride, dilation, groups, math
  int algorithm = -1;  // the cudnnConvolution*Algo_t value
  std::string algorithm_name;
  std::size_t workspace_bytes = 0;
  bool benchmarked = false;    // timed (cudnnFind) rather than heuristic
  bool tensor_ops = false;     // math type allows TF32 / tensor cores
  int math_type = 0;           // the cudnnMathType_t to run it with
  float time_ms = -1.0f;       // measured time when benchmarked
  bool deterministic = false;  // cuDNN reports it bitwise repeatable (no atomics)
};

// A captured step: replay() enqueues the whole recorded sequence of ops on the
// backend's stream as one graph launch. Every tensor the captured ops touched
// must outlive it (it reads and writes the same addresses each replay); memory
// the step freed while being captured is held until it is destroyed.
class STOKE_API CapturedStep {
 public:
  virtual ~CapturedStep();
  virtual void replay() = 0;
  virtual std::size_t nodes() const = 0;  // graph nodes, for reports
};

// Collectives on device memory among the ranks of one run (NCCL), issued on
// the backend's compute stream in stream order: the host does not wait for
// them. Made by GpuBackend::join_device_group; every rank calls the same
// collectives in the same order with the same sizes.
class STOKE_API DeviceCommunicator {
 public:
  virtual ~DeviceCommunicator();
  virtual int rank() const noexcept = 0;
  virtual int world_size() const noexcept = 0;
  // "nccl 2.28.9".
  virtual std::string name() const = 0;
  // tensor = the element-wise sum (mean) over ranks, in place. The tensor is
  // float32 on this communicator's backend (InvalidArgument otherwise);
  // CommunicationError (stoke/distributed.hpp) when the library fails.
  virtual void allreduce_sum(Tensor& tensor) = 0;
  virtual void allreduce_mean(Tensor& tensor) = 0;
};

// Bytes of the id that makes ranks one device group (NCCL's ncclUniqueId).
inline constexpr std::size_t kDeviceGroupIdBytes = 128;

class STOKE_API GpuBackend : public Backend {
 public:
  ~GpuBackend() override;
  GpuBackend* gpu() noexcept final { return this; }

  virtual int device() const noexcept = 0;
  // The device pool's figures (cap, reserved, in use, peak, fragmentation)
  // and the device's total memory, for profiles and the advisor.
  virtual PoolStats pool_stats() const = 0;
  virtual std::uint64_t device_memory_bytes() const = 0;
  // Device memory in use by everyone as the driver reports it (total - free:
  // the pool, this process's CUDA context and cuDNN/cuBLAS handles, other
  // processes); 0 when unknown.
  virtual std::uint64_t device_used_bytes() const { return 0; }
  // The compute stream every op is issued on (a cudaStream_t), for
  // PrefetchOptions::compute_stream, so uploads are handed over in stream order.
  virtual StreamHandle compute_stream() const noexcept = 0;
  virtual void set_strict_fp32(bool strict) = 0;
  virtual bool strict_fp32() const noexcept = 0;
  virtual void set_conv_benchmark(bool on) = 0;
  // Every algorithm chosen so far, in the order first chosen.
  virtual std::vector<ConvAlgoChoice> conv_algorithms() const = 0;
  // The cached choices as text (to store beside a checkpoint) and back:
  // loading adds choices not yet cached and returns how many; text from
  // another cuDNN version is ignored with a warning (returns 0);
  // InvalidArgument for malformed text.
  virtual std::string save_conv_algorithms() const = 0;
  virtual std::size_t load_conv_algorithms(const std::string& text) = 0;
  // "jit sm_90 (3 compiled, rest from the cache)" or "precompiled".
  virtual std::string kernel_origin() = 0;

  // Device-busy time, the profiler's honest "GPU utilization": intervals of
  // the compute stream between begin_busy() and end_busy(), timed by CUDA
  // events without blocking the host. take_busy_seconds() returns the sum of
  // the intervals that completed since the last call (with wait = true, of
  // all of them, synchronizing). From one thread; ignored during a capture.
  virtual void begin_busy() = 0;
  virtual void end_busy() = 0;
  virtual double take_busy_seconds(bool wait) = 0;

  // Milliseconds between two events recorded around `work` on the stream,
  // divided by `repeats` (work is issued that many times); synchronizes.
  virtual float time_ms(const std::function<void()>& work, int repeats = 1) = 0;

  // Captures `step` (ops on this backend only) into a CUDA graph without
  // running it. Returns nullptr and sets *why when the capture fails (an op
  // that cannot be captured, a pool that had to grow, a library error); the
  // stream is usable afterwards and nothing of `step` ran, so the caller runs
  // it eagerly. Run the step once eagerly first: allocations and algorithm
  // choices then happen outside the capture.
  virtual std::unique_ptr<CapturedStep> capture(const std::function<void()>& step,
                                                std::string* why) = 0;

  // Device collectives (NCCL). Why this backend has none ("" when it has:
  // the plugin was built with NCCL).
  virtual std::string device_collectives_unavailable() const;
  // A new group's id (kDeviceGroupIdBytes): rank 0 makes it and hands it to
  // the other ranks (Communicator::broadcast_bytes). Unsupported when the
  // backend has no device collectives.
  virtual std::vector<std::uint8_t> new_device_group_id();
  // This rank's member of group `id` of `world_size` ranks on this backend's
  // device and stream; blocks until every rank joined, at most
  // `timeout_seconds`, and so does every later wait on the group (a
  // collective's enqueue, a synchronize of the stream while a collective is
  // queued, the group's destruction): past it, or on an error the library
  // reports while waiting, the group is aborted and the call throws
  // CommunicationError. InvalidArgument for a rank outside the world or an id
  // of the wrong size, Unsupported without device collectives.
  virtual std::unique_ptr<DeviceCommunicator> join_device_group(int rank, int world_size,
                                                                std::span<const std::uint8_t> id,
                                                                double timeout_seconds = 60.0);
};

// The backend's GPU surface, or nullptr for a host backend: backend.gpu().
STOKE_API GpuBackend* as_gpu_backend(Backend& backend) noexcept;

// A new CUDA backend on `device` with its own stream and a device pool capped
// by `settings` (STOKE_GPU_MEM_PERCENT / _MAX). Unsupported when the plugin
// or the device is missing (the message says why).
STOKE_API std::unique_ptr<GpuBackend> create_cuda_backend(int device, const Settings& settings,
                                                          const CudaBackendOptions& options = {});
// Options from the knobs (STOKE_GPU_JIT).
STOKE_API CudaBackendOptions cuda_backend_options(const Settings& settings);

// Runs a step with static shapes eagerly or as a replayed CUDA graph
// (STOKE_GPU_GRAPH): call 1 runs eagerly (warm-up: allocations, algorithm
// choices), call 2 captures and replays, later calls replay. A capture failure
// logs one warning saying why and runs eagerly from then on. On a host
// backend, or with the knob off, every call is eager. The step must issue the
// same ops on the same tensors each call (the input comes from a fixed device
// slot, e.g. a copy into a static input tensor inside the step).
// Per-step values: the optimizers keep the learning rate and Adam's bias
// corrections in device memory, written by Optimizer::prepare (or
// TrainStep::prepare) in stream order. Call prepare() before run(), outside
// the step, and put TrainStep::issue() inside it: every replay then uses that
// step's rate, so a schedule or Adam costs no re-capture. Any other host
// value the step passes to an op (a dropout seed) is frozen at capture: give
// run() a `key` that changes whenever one does, and a new key re-captures
// (one host synchronization) before replaying. Host-side effects inside the
// step happen once per capture, not per replay, and once more when a failed
// capture falls back to running the step: keep such counts outside the step.
class STOKE_API GraphedStep {
 public:
  GraphedStep(Backend& backend, Toggle mode);
  ~GraphedStep();
  GraphedStep(const GraphedStep&) = delete;
  GraphedStep& operator=(const GraphedStep&) = delete;

  void run(const std::function<void()>& step, std::uint64_t key = 0);
  bool replaying() const noexcept { return graph_ != nullptr; }
  std::int64_t captures() const noexcept { return captures_; }
  // Why the step runs eagerly ("" while replaying or before call 2).
  const std::string& eager_reason() const noexcept { return reason_; }
  std::int64_t calls() const noexcept { return calls_; }

 private:
  Backend& backend_;
  bool enabled_ = false;
  std::int64_t calls_ = 0;
  std::int64_t captures_ = 0;
  std::uint64_t key_ = 0;
  std::unique_ptr<CapturedStep> graph_;
  std::string reason_;
};

}  // namespace stoke
