// CPU facts from sched_getaffinity, /sys topology, /proc/meminfo and cpuid.
#include <sched.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <xsimd/xsimd.hpp>

#include "core/text.hpp"
#include "stoke/system.hpp"
#include "system/cpu_limits.hpp"

namespace stoke {
namespace {

std::string read_first_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// kB value of a /proc/meminfo field, in bytes; 0 if absent.
std::uint64_t meminfo_bytes(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == field + ":") return kib * 1024;
  }
  return 0;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return std::string(detail::trim(line.substr(colon + 1)));
    }
  }
  return "unknown";
}

SimdLevel detect_simd() {
  const auto arch = xsimd::available_architectures();
  if (arch.avx512bw && arch.avx512f) return SimdLevel::kAvx512;
  if (arch.avx2 && arch.fma3_avx2) return SimdLevel::kAvx2;
  if (arch.sse4_1) return SimdLevel::kSse4;
  return SimdLevel::kScalar;
}

int count_numa_nodes() {
  std::error_code ec;
  int nodes = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const auto name = entry.path().filename().string();
    if (name.size() > 4 && name.rfind("node", 0) == 0 &&
        name.find_first_not_of("0123456789", 4) == std::string::npos) {
      ++nodes;
    }
  }
  return nodes > 0 ? nodes : 1;
}

}  // namespace

const char* to_string(SimdLevel level) noexcept {
  switch (level) {
    case SimdLevel::kScalar:
      return "scalar";
    case SimdLevel::kSse4:
      return "sse4";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
  }
  return "unknown";
}

CpuInfo query_cpu() {
  CpuInfo info;
  info.model = cpu_model();
  cpu_set_t set;
  CPU_ZERO(&set);
  std::set<std::pair<std::string, std::string>> cores;
  int logical = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &set)) continue;
      ++logical;
      const std::filesystem::path topo =
          "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology";
      auto package = read_first_line(topo / "physical_package_id");
      auto core = read_first_line(topo / "core_id");
      // Without topology, count each logical CPU as its own core.
      if (core.empty()) core = "cpu" + std::to_string(cpu);
      cores.emplace(package, core);
    }
  }
  if (logical == 0) logical = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  info.logical_cores = logical;
  info.physical_cores = cores.empty() ? logical : static_cast<int>(cores.size());
  info.numa_nodes = count_numa_nodes();
  info.simd = detect_simd();
  info.total_memory = meminfo_bytes("MemTotal");
  info.available_memory = meminfo_bytes("MemAvailable");
  return info;
}

CpuLimits cpu_limits() {
  static std::mutex mutex;
  static bool cached = false;
  static cpu_set_t cached_mask;
  static CpuLimits limits;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const bool have_mask = sched_getaffinity(0, sizeof mask, &mask) == 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (cached && have_mask && std::memcmp(&mask, &cached_mask, sizeof mask) == 0) return limits;
  const CpuInfo info = query_cpu();
  limits = {info.physical_cores, info.simd};
  cached = have_mask;
  cached_mask = mask;
  return limits;
}

}  // namespace stoke
