// A GpuBackend without a GPU, so that the trainer's GPU path (prefetcher
// device slots on a compute stream, one CUDA graph per slot, device-side
// optimizer values, device-busy spans, pool figures) runs and is checked on
// the CPU.
//
// - Ops compute on a private CpuBackend, in host memory.
// - The compute stream is a stream of an AsyncFakeCudaDevice, which the
//   prefetcher uploads through with real lag: every copy first drains that
//   stream (the prefetcher's "wait for the upload" sits there), so reading a
//   slot before its hand-over reads stale data, as on a GPU.
// - capture() records the ops instead of running them, with their arguments
//   as they are at capture (tensor handles, pointers, host scalars); replay()
//   runs the recording. That is a CUDA graph's contract: device memory is read
//   when the graph runs, host values are frozen at capture. A synchronize or a
//   device-to-host copy inside the capture fails it, as on a GPU.
#pragma once

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.hpp"
#include "gpu/prefetch_device.hpp"
#include "stoke/cuda.hpp"
#include "stoke/error.hpp"
#include "unit/async_fake_cuda_device.hpp"

namespace stoke::testing {

class FakeGpuBackend final : public GpuBackend, public detail::PrefetchDeviceSource {
 public:
  // memory_cap > 0: allocations beyond it throw OutOfMemory, as a capped pool does.
  explicit FakeGpuBackend(std::uint64_t seed = 1, std::uint64_t memory_cap = 0)
      : inner_(memory_cap),
        device_(std::make_shared<AsyncFakeCudaDevice>(seed)),
        stream_(device_->create_stream()) {}
  ~FakeGpuBackend() override { device_->synchronize(stream_); }

  // --- the fake's own figures --------------------------------------------
  int captures() const noexcept { return captures_; }
  int replays() const noexcept { return replays_; }
  // The device the prefetcher's staging, slots' events and copy stream come from.
  const AsyncFakeCudaDevice& fake_device() const noexcept { return *device_; }

  std::shared_ptr<detail::CudaDevice> prefetch_device() const override { return device_; }

  // --- Backend -----------------------------------------------------------
  std::string name() const override { return "fake-gpu:0"; }
  bool is_host() const noexcept override { return false; }
  void* allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void free(void* ptr, std::size_t bytes) noexcept override { inner_.free(ptr, bytes); }
  MemoryStats memory_stats() const override { return inner_.memory_stats(); }
  void reset_peak() override { inner_.reset_peak(); }
  std::size_t conv2d_workspace_bytes(const Shape& x, const Shape& w,
                                     const Conv2dParams& p) const override {
    return inner_.conv2d_workspace_bytes(x, w, p);
  }
  void release_workspace() override { inner_.release_workspace(); }

  void copy(void* dst, const void* src, std::size_t bytes, CopyKind kind) override {
    if (recording_ && kind == CopyKind::kDeviceToHost) return fail_capture("a device-to-host copy");
    issue([=, this] {
      device_->synchronize(stream_);  // in stream order after the uploads handed over
      inner_.copy(dst, src, bytes, kind);
    });
  }
  void fill(Tensor& t, float value) override {
    issue([=, this]() mutable { inner_.fill(t, value); });
  }
  void synchronize() override {
    if (recording_) return fail_capture("a synchronization");
    device_->synchronize(stream_);
  }
  // Every op of STOKE_OPS: issued on the fake stream (recorded while
  // capturing), computed by the inner CPU backend's unchecked implementation
  // (this backend's front door has validated the arguments). Tensors and
  // parameters are copied into the recording as they are at the call; the
  // optimizers' step values (SgdParams::scalars) are read when the op runs.
#define STOKE_FAKE_GPU_OP(kind, name, params, args)        \
  void do_##name params override {                         \
    issue([=, this]() mutable { inner_.do_##name args; }); \
  }
  STOKE_OPS(STOKE_FAKE_GPU_OP)
#undef STOKE_FAKE_GPU_OP

  // --- GpuBackend --------------------------------------------------------
  int device() const noexcept override {
    return 0;
  }
  PoolStats pool_stats() const override {
    const MemoryStats m = inner_.memory_stats();
    PoolStats s;
    s.cap = 1ull << 30;
    s.reserved = m.peak_bytes;
    s.in_use = m.in_use_bytes;
    s.peak_in_use = m.peak_bytes;
    return s;
  }
  std::uint64_t device_memory_bytes() const override {
    return 2ull << 30;
  }
  StreamHandle compute_stream() const noexcept override {
    return stream_;
  }
  void set_strict_fp32(bool) override {}
  bool strict_fp32() const noexcept override {
    return true;
  }
  void set_conv_benchmark(bool) override {}
  std::vector<ConvAlgoChoice> conv_algorithms() const override {
    return {};
  }
  std::string save_conv_algorithms() const override {
    return "";
  }
  std::size_t load_conv_algorithms(const std::string&) override {
    return 0;
  }
  std::string kernel_origin() override {
    return "fake";
  }

  void begin_busy() override {
    if (recording_ || busy_open_) return;
    busy_open_ = true;
    busy_start_ = std::chrono::steady_clock::now();
  }
  void end_busy() override {
    if (recording_ || !busy_open_) return;
    busy_open_ = false;
    busy_pending_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - busy_start_).count();
  }
  double take_busy_seconds(bool) override {
    return std::exchange(busy_pending_, 0.0);
  }
  float time_ms(const std::function<void()>& work, int repeats) override {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) work();
    return static_cast<float>(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
        repeats);
  }

  std::unique_ptr<CapturedStep> capture(const std::function<void()>& step,
                                        std::string* why) override {
    recording_ = true;
    capture_error_.clear();
    recorded_.clear();
    try {
      step();
    } catch (const std::exception& e) {
      capture_error_ = e.what();
    }
    recording_ = false;
    std::vector<std::function<void()>> ops = std::move(recorded_);
    recorded_.clear();
    if (!capture_error_.empty()) {
      if (why) *why = "the step could not be captured: " + capture_error_;
      return nullptr;
    }
    ++captures_;
    return std::make_unique<Recording>(*this, std::move(ops));
  }

 private:
  class Recording final : public CapturedStep {
   public:
    Recording(FakeGpuBackend& owner, std::vector<std::function<void()>> ops)
        : owner_(owner), ops_(std::move(ops)) {}
    void replay() override {
      ++owner_.replays_;
      for (auto& op : ops_) op();
    }
    std::size_t nodes() const override { return ops_.size(); }

   private:
    FakeGpuBackend& owner_;
    std::vector<std::function<void()>> ops_;
  };

  template <class F>
  void issue(F&& op) {
    if (recording_) {
      recorded_.emplace_back(std::forward<F>(op));
    } else {
      op();
    }
  }
  void fail_capture(const char* what) {
    if (capture_error_.empty()) capture_error_ = std::string(what) + " inside the captured step";
  }
  cpu::CpuBackend inner_;
  std::shared_ptr<AsyncFakeCudaDevice> device_;
  detail::GpuStream stream_;
  bool recording_ = false;
  std::string capture_error_;
  std::vector<std::function<void()>> recorded_;
  int captures_ = 0;
  int replays_ = 0;
  bool busy_open_ = false;
  std::chrono::steady_clock::time_point busy_start_;
  double busy_pending_ = 0.0;
};

}  // namespace stoke::testing
