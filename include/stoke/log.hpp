// Library logging: one line per message to stderr (or an application sink),
// filtered by STOKE_LOG_LEVEL. Messages are complete sentences a user can act on.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "stoke/export.hpp"

namespace stoke {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

STOKE_API const char* to_string(LogLevel level) noexcept;

// Messages above `level` are dropped. Default: kWarn.
STOKE_API void set_log_level(LogLevel level) noexcept;
STOKE_API LogLevel log_level() noexcept;

// Where messages go. An empty function restores the default sink, which writes
// "stoke: <level>: <message>" to stderr. The sink may be called from any thread
// but never concurrently.
using LogSink = std::function<void(LogLevel, std::string_view)>;
STOKE_API void set_log_sink(LogSink sink);

STOKE_API void log(LogLevel level, std::string_view message);

inline void log_error(std::string_view m) {
  log(LogLevel::kError, m);
}
inline void log_warn(std::string_view m) {
  log(LogLevel::kWarn, m);
}
inline void log_info(std::string_view m) {
  log(LogLevel::kInfo, m);
}
inline void log_debug(std::string_view m) {
  log(LogLevel::kDebug, m);
}

}  // namespace stoke
