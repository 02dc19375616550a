#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "stoke/profile.hpp"
#include "stoke/system.hpp"

namespace stoke {
namespace {

std::uint64_t to_ns(Profiler::Clock::duration d) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

struct TraceEvent {
  Stage stage;
  std::uint64_t begin_ns;  // since start()
  std::uint64_t duration_ns;
  std::size_t thread;
};

}  // namespace

struct Profiler::State {
  ProfilerOptions options;
  Clock::time_point started = Clock::now();
  double cpu_started = process_cpu_seconds();
  std::array<std::atomic<std::uint64_t>, kStageCount> total_ns{};
  std::array<std::atomic<std::uint64_t>, kStageCount> count{};
  std::array<std::atomic<std::uint64_t>, kStageCount> max_ns{};
  std::atomic<std::uint64_t> steps{0};
  std::atomic<std::uint64_t> images{0};
  std::atomic<std::uint64_t> device_busy_ns{0};
  std::atomic<bool> device_busy_measured{false};
  std::mutex mutex;  // memory figures and trace events
  MemoryFigures memory;
  std::vector<TraceEvent> trace;
  int logical_cores = query_cpu().logical_cores;
};

const char* to_string(Stage stage) noexcept {
  switch (stage) {
    case Stage::kRead:
      return "read";
    case Stage::kDecode:
      return "decode";
    case Stage::kPreprocess:
      return "preprocess";
    case Stage::kCache:
      return "cache";
    case Stage::kAugment:
      return "augment";
    case Stage::kBatchAssembly:
      return "batch assembly";
    case Stage::kDataWait:
      return "waiting for data";
    case Stage::kHostToDevice:
      return "host to device";
    case Stage::kForward:
      return "forward";
    case Stage::kBackward:
      return "backward";
    case Stage::kUpdate:
      return "update";
    case Stage::kValidation:
      return "validation";
    case Stage::kLogging:
      return "logging";
    case Stage::kCommunicate:
      return "communicate";
    case Stage::kCount:
      break;
  }
  return "unknown";
}

bool is_pipeline_stage(Stage stage) noexcept {
  return static_cast<int>(stage) <= static_cast<int>(Stage::kBatchAssembly);
}

double ProfileSummary::cpu_utilization() const {
  if (wall_seconds <= 0 || logical_cores <= 0) return 0;
  const double u = process_cpu_seconds / (wall_seconds * logical_cores);
  return u < 0 ? 0 : (u > 1 ? 1 : u);
}

double process_cpu_seconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  const auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

Profiler::Profiler(ProfilerOptions options) : state_(std::make_unique<State>()) {
  state_->options = options;
}

Profiler::~Profiler() = default;

void Profiler::start() {
  auto& s = *state_;
  for (int i = 0; i < kStageCount; ++i) {
    s.total_ns[i] = 0;
    s.count[i] = 0;
    s.max_ns[i] = 0;
  }
  s.steps = 0;
  s.images = 0;
  s.device_busy_ns = 0;
  s.device_busy_measured = false;
  {
    std::lock_guard lock(s.mutex);
    s.trace.clear();
    s.memory = {};
  }
  s.cpu_started = process_cpu_seconds();
  s.started = Clock::now();
}

void Profiler::record(Stage stage, Clock::time_point begin, Clock::time_point end) {
  auto& s = *state_;
  const int i = static_cast<int>(stage);
  if (i < 0 || i >= kStageCount || end < begin) return;
  const std::uint64_t ns = to_ns(end - begin);
  s.total_ns[i].fetch_add(ns, std::memory_order_relaxed);
  s.count[i].fetch_add(1, std::memory_order_relaxed);
  std::uint64_t seen = s.max_ns[i].load(std::memory_order_relaxed);
  while (ns > seen && !s.max_ns[i].compare_exchange_weak(seen, ns, std::memory_order_relaxed)) {
  }
  if (s.steps.load(std::memory_order_relaxed) < static_cast<std::uint64_t>(s.options.trace_steps)) {
    const std::uint64_t since = begin > s.started ? to_ns(begin - s.started) : 0;
    std::lock_guard lock(s.mutex);
    s.trace.push_back({stage, since, ns, std::hash<std::thread::id>{}(std::this_thread::get_id())});
  }
}

void Profiler::add_device_busy(double seconds) {
  state_->device_busy_measured = true;
  state_->device_busy_ns.fetch_add(static_cast<std::uint64_t>(seconds * 1e9),
                                   std::memory_order_relaxed);
}

void Profiler::step_done(std::uint64_t images) {
  state_->images.fetch_add(images, std::memory_order_relaxed);
  state_->steps.fetch_add(1, std::memory_order_relaxed);
}

void Profiler::set_memory(const MemoryFigures& memory) {
  std::lock_guard lock(state_->mutex);
  state_->memory = memory;
}

ProfileSummary Profiler::summary() const {
  auto& s = *state_;
  ProfileSummary out;
  out.wall_seconds = std::chrono::duration<double>(Clock::now() - s.started).count();
  out.steps = s.steps.load();
  out.images = s.images.load();
  for (int i = 0; i < kStageCount; ++i) {
    out.stages[i].seconds = s.total_ns[i].load() * 1e-9;
    out.stages[i].count = s.count[i].load();
    out.stages[i].max_seconds = s.max_ns[i].load() * 1e-9;
  }
  out.device_busy_measured = s.device_busy_measured.load();
  if (out.device_busy_measured) {
    out.device_busy_seconds = s.device_busy_ns.load() * 1e-9;
  } else {
    // CPU backend: the compute stages are the device's busy time.
    out.device_busy_seconds = out.stage(Stage::kForward).seconds +
                              out.stage(Stage::kBackward).seconds +
                              out.stage(Stage::kUpdate).seconds;
  }
  out.process_cpu_seconds = process_cpu_seconds() - s.cpu_started;
  out.logical_cores = s.logical_cores;
  {
    std::lock_guard lock(s.mutex);
    out.memory = s.memory;
  }
  return out;
}

std::string Profiler::chrome_trace() const {
  auto& s = *state_;
  std::vector<TraceEvent> events;
  {
    std::lock_guard lock(s.mutex);
    events = s.trace;
  }
  // Small thread ids make the trace readable.
  std::vector<std::size_t> threads;
  std::string out = "{\"traceEvents\":[";
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    std::size_t tid = 0;
    while (tid < threads.size() && threads[tid] != e.thread) ++tid;
    if (tid == threads.size()) threads.push_back(e.thread);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
                  "\"pid\":1,\"tid\":%zu}",
                  i ? "," : "", to_string(e.stage),
                  is_pipeline_stage(e.stage) ? "pipeline" : "step", e.begin_ns / 1e3,
                  e.duration_ns / 1e3, tid);
    out += buf;
  }
  out += "],\"displayTimeUnit\":\"ms\"}";
  return out;
}

}  // namespace stoke
