#include <cstdio>
#include <sstream>

#include "core/text.hpp"
#include "stoke/profile.hpp"
#include "stoke/system.hpp"

namespace stoke {

std::string format_profile(const ProfileSummary& s) {
  std::ostringstream out;
  char line[160];
  std::snprintf(line, sizeof line, "%-18s %10s %8s %10s %10s\n", "stage", "seconds", "% wall",
                "count", "mean ms");
  out << line;
  for (int i = 0; i < kStageCount; ++i) {
    const auto stage = static_cast<Stage>(i);
    const auto& st = s.stage(stage);
    if (st.count == 0) continue;
    std::snprintf(line, sizeof line, "%-18s %10.3f %7.1f%% %10llu %10.3f\n", to_string(stage),
                  st.seconds, 100.0 * s.share(stage), static_cast<unsigned long long>(st.count),
                  1e3 * st.seconds / static_cast<double>(st.count));
    out << line;
  }
  std::snprintf(line, sizeof line,
                "wall %.3f s, %llu steps, %llu images, %.1f images/s\n"
                "device busy %.1f%% (%s), process CPU %.1f%% of %d logical cores\n",
                s.wall_seconds, static_cast<unsigned long long>(s.steps),
                static_cast<unsigned long long>(s.images), s.images_per_second(),
                100.0 * s.device_busy_share(),
                s.device_busy_measured ? "CUDA events" : "CPU compute stages",
                100.0 * s.cpu_utilization(), s.logical_cores);
  out << line;
  const auto& m = s.memory;
  if (m.pool_cap || m.pool_reserved || m.pool_peak || m.pinned_bytes) {
    out << "memory: pool cap " << (m.pool_cap ? format_bytes(m.pool_cap) : std::string("none"))
        << ", reserved " << format_bytes(m.pool_reserved) << ", in use "
        << format_bytes(m.pool_in_use) << ", peak " << format_bytes(m.pool_peak)
        << (m.device_outside_pool
                ? "; outside the pool (CUDA context, library handles, other processes) " +
                      format_bytes(m.device_outside_pool)
                : std::string())
        << "; staging " << format_bytes(m.pinned_bytes)
        << (m.pinned_fallback ? " pageable (pinned refused or off)" : " pinned") << "\n";
  }
  return out.str();
}

std::string profile_to_json(const ProfileSummary& s) {
  std::ostringstream out;
  out.precision(9);
  out << "{\"wall_seconds\":" << s.wall_seconds << ",\"steps\":" << s.steps
      << ",\"images\":" << s.images << ",\"images_per_second\":" << s.images_per_second()
      << ",\"device_busy_seconds\":" << s.device_busy_seconds
      << ",\"device_busy_measured\":" << (s.device_busy_measured ? "true" : "false")
      << ",\"process_cpu_seconds\":" << s.process_cpu_seconds
      << ",\"cpu_utilization\":" << s.cpu_utilization() << ",\"stages\":{";
  for (int i = 0; i < kStageCount; ++i) {
    const auto& st = s.stages[i];
    out << (i ? "," : "") << detail::json_quote(to_string(static_cast<Stage>(i)))
        << ":{\"seconds\":" << st.seconds << ",\"count\":" << st.count
        << ",\"max_seconds\":" << st.max_seconds << "}";
  }
  const auto& m = s.memory;
  out << "},\"memory\":{\"device_total\":" << m.device_total << ",\"pool_cap\":" << m.pool_cap
      << ",\"pool_reserved\":" << m.pool_reserved << ",\"pool_in_use\":" << m.pool_in_use
      << ",\"pool_peak\":" << m.pool_peak << ",\"device_outside_pool\":" << m.device_outside_pool
      << ",\"pinned_bytes\":" << m.pinned_bytes
      << ",\"pinned_fallback\":" << (m.pinned_fallback ? "true" : "false") << "}}";
  return out.str();
}

}  // namespace stoke
