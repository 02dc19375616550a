// A host stand-in for the plugin's CudaDevice whose streams really are
// asynchronous: one "device" thread runs the queued operations (copies,
// event records, stream waits, the normalize reference), choosing among the
// streams that can make progress at random (fixed seed). It lags on purpose:
// it runs only once a random backlog of operations has built up, or when the
// host waits for an event, so queued work stays queued while the host moves on. Work queued on a
// stream runs in order; nothing orders two streams except events. Code that
// forgets an event hand-over reads or overwrites data too early here, as it
// would on a GPU, so the prefetcher's CUDA ordering is testable without one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu/cuda_device_api.hpp"

namespace stoke::testing {

class AsyncFakeCudaDevice final : public detail::CudaDevice {
 public:
  explicit AsyncFakeCudaDevice(std::uint64_t seed) : rng_(seed) {
    worker_ = std::thread([this] { run(); });
  }
  ~AsyncFakeCudaDevice() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  int index() const noexcept override { return 0; }
  std::string name() const override { return "async-fake:0"; }
  std::uint64_t total_memory() const override { return 1ull << 30; }
  std::uint64_t free_memory() const override { return 1ull << 30; }

  void* device_alloc(std::size_t bytes) override {
    return ::operator new (bytes, std::align_val_t{256});
  }
  void device_free(void* ptr) noexcept override {
    if (ptr) ::operator delete (ptr, std::align_val_t{256});
  }
  // What the code above created, for tests that count rebuilds.
  std::atomic<int> pinned_allocs{0};
  std::atomic<int> pinned_live{0};
  std::atomic<int> streams_created{0};
  std::atomic<int> events_created{0};

  void* pinned_alloc(std::size_t bytes) override {
    ++pinned_allocs;
    ++pinned_live;
    return device_alloc(bytes);
  }
  void pinned_free(void* ptr) noexcept override {
    if (ptr) --pinned_live;
    device_free(ptr);
  }

  detail::GpuStream create_stream() override {
    ++streams_created;
    std::lock_guard lock(mutex_);
    streams_.push_back(std::make_unique<Stream>());
    return streams_.back().get();
  }
  void destroy_stream(detail::GpuStream) noexcept override {}  // kept until the device dies
  void synchronize(detail::GpuStream stream) override {
    Event done;
    record(&done, stream);
    wait(&done);
  }

  detail::GpuEvent create_event(bool) override {
    ++events_created;
    std::lock_guard lock(mutex_);
    events_.push_back(std::make_unique<Event>());
    return events_.back().get();
  }
  void destroy_event(detail::GpuEvent) noexcept override {}
  void record(detail::GpuEvent handle, detail::GpuStream stream) override {
    auto* event = static_cast<Event*>(handle);
    std::lock_guard lock(mutex_);
    const std::uint64_t generation = ++event->recorded;
    enqueue_locked(stream, Op{nullptr, nullptr, 0, event, generation});
  }
  bool query(detail::GpuEvent handle) override {
    auto* event = static_cast<Event*>(handle);
    std::lock_guard lock(mutex_);
    const bool passed = event->completed >= event->recorded;
    if (!passed) {
      ++nudges_;  // a polling host lets the device move on, one operation per poll
      cv_.notify_all();
    }
    return passed;
  }
  void wait(detail::GpuEvent handle) override {
    auto* event = static_cast<Event*>(handle);
    std::unique_lock lock(mutex_);
    const std::uint64_t target = event->recorded;
    ++waiters_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return event->completed >= target; });
    --waiters_;
  }
  void stream_wait(detail::GpuStream stream, detail::GpuEvent handle) override {
    auto* event = static_cast<Event*>(handle);
    std::lock_guard lock(mutex_);
    enqueue_locked(stream, Op{nullptr, event, event->recorded});
  }
  float elapsed_ms(detail::GpuEvent, detail::GpuEvent) override { return 0.125f; }

  void copy_to_device(void* dst, const void* src, std::size_t bytes,
                      detail::GpuStream stream) override {
    std::lock_guard lock(mutex_);
    enqueue_locked(stream, Op{[=] { std::memcpy(dst, src, bytes); }, nullptr, 0});
  }
  void copy_to_host(void* dst, const void* src, std::size_t bytes,
                    detail::GpuStream stream) override {
    copy_to_device(dst, src, bytes, stream);
  }
  void normalize_u8_hwc_to_f32_chw(const void* src, float* dst, int samples, int height, int width,
                                   int channels, const float* mean, const float* std, bool jit,
                                   detail::GpuStream stream) override {
    (jit ? jit_normalizes_ : precompiled_normalizes_).fetch_add(1);
    std::vector<float> m(mean, mean + channels), s(std, std + channels);
    std::lock_guard lock(mutex_);
    enqueue_locked(stream, Op{[=] {
                                const auto* in = static_cast<const unsigned char*>(src);
                                const std::size_t pixels = static_cast<std::size_t>(height) * width;
                                for (std::size_t n = 0; n < static_cast<std::size_t>(samples); ++n)
                                  for (std::size_t p = 0; p < pixels; ++p)
                                    for (int c = 0; c < channels; ++c)
                                      dst[(n * channels + c) * pixels + p] =
                                          (in[(n * pixels + p) * channels + c] / 255.0f - m[c]) /
                                          s[c];
                              },
                              nullptr, 0});
  }
  // Normalizes asked for with the JIT kernel (STOKE_GPU_JIT on/auto) and with
  // the precompiled one (off).
  int jit_normalizes() const noexcept { return jit_normalizes_.load(); }
  int precompiled_normalizes() const noexcept { return precompiled_normalizes_.load(); }

 private:
  std::atomic<int> jit_normalizes_{0}, precompiled_normalizes_{0};
  struct Event {
    std::uint64_t recorded = 0;
    std::uint64_t completed = 0;
  };
  struct Op {
    std::function<void()> run;     // copies and kernels
    Event* wait_for = nullptr;     // a stream wait: blocks the stream until
    std::uint64_t generation = 0;  //   wait_for->completed >= generation
    Event* signal = nullptr;       // an event record: completes `signal`
    std::uint64_t signal_generation = 0;
  };
  struct Stream {
    std::deque<Op> ops;
  };

  void enqueue_locked(detail::GpuStream handle, Op op) {
    Stream* stream = handle ? static_cast<Stream*>(handle) : &legacy_;
    stream->ops.push_back(std::move(op));
    ++queued_;
    cv_.notify_all();
  }

  bool runnable(const Stream* s) const {
    if (s->ops.empty()) return false;
    const Op& op = s->ops.front();
    return !op.wait_for || op.wait_for->completed >= op.generation;
  }

  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      std::vector<Stream*> ready;
      if (runnable(&legacy_)) ready.push_back(&legacy_);
      for (auto& s : streams_) {
        if (runnable(s.get())) ready.push_back(s.get());
      }
      const bool pushed = stop_ || waiters_ > 0 || nudges_ > 0 || queued_ >= backlog_;
      if (ready.empty() || !pushed) {
        if (stop_ && ready.empty()) return;
        cv_.wait(lock);
        continue;
      }
      if (nudges_ > 0) --nudges_;
      Stream* pick = ready[rng_() % ready.size()];
      Op op = std::move(pick->ops.front());
      pick->ops.pop_front();
      --queued_;
      if (queued_ == 0) backlog_ = 1 + rng_() % 12;
      // Let the host threads run ahead now and then, as a real device lags.
      const int yields = static_cast<int>(rng_() % 4);
      lock.unlock();
      for (int i = 0; i < yields; ++i) std::this_thread::yield();
      if (op.run) op.run();
      lock.lock();
      if (op.signal && op.signal->completed < op.signal_generation) {
        op.signal->completed = op.signal_generation;
      }
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::mt19937_64 rng_;
  Stream legacy_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Event>> events_;
  bool stop_ = false;
  std::size_t queued_ = 0;   // operations queued on all streams
  std::size_t backlog_ = 4;  // the device starts once this many are queued
  int waiters_ = 0;          // host threads blocked in wait()
  int nudges_ = 0;           // unanswered polls
  std::thread worker_;
};

}  // namespace stoke::testing
