#include "stoke/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

namespace stoke {
namespace {

// The logger is process state like the arena: a level and a sink, both set by
// the application or from STOKE_LOG_LEVEL when a Config is applied.
std::atomic<LogLevel> g_level{LogLevel::kWarn};

struct SinkSlot {
  std::mutex mutex;
  LogSink sink;
};

SinkSlot& sink_slot() {
  static SinkSlot slot;
  return slot;
}

}  // namespace

const char* to_string(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "unknown";
}

void set_log_level(LogLevel level) noexcept {
  g_level.store(level, std::memory_order_relaxed);
}
LogLevel log_level() noexcept {
  return g_level.load(std::memory_order_relaxed);
}

void set_log_sink(LogSink sink) {
  auto& slot = sink_slot();
  std::lock_guard lock(slot.mutex);
  slot.sink = std::move(sink);
}

void log(LogLevel level, std::string_view message) {
  if (static_cast<int>(level) > static_cast<int>(log_level())) return;
  auto& slot = sink_slot();
  std::lock_guard lock(slot.mutex);
  if (slot.sink) {
    slot.sink(level, message);
    return;
  }
  // One write per line: ranks of a data-parallel run share one stderr, and
  // an unbuffered stream may write a formatted line in pieces.
  std::string line = std::string("stoke: ") + to_string(level) + ": ";
  line.append(message);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace stoke
