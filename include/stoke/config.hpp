// Every knob of the runtime in one place. Values come from, in increasing
// precedence: built-in defaults < a config file < STOKE_* environment variables
// < the API. Each effective value remembers where it came from, and every bad
// value is a ConfigError naming the knob, the value and what is accepted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stoke/export.hpp"
#include "stoke/log.hpp"
#include "stoke/precision.hpp"
#include "stoke/system.hpp"

namespace stoke {

// STOKE_GPU_DEVICE: `auto`, `cpu`, or a comma list of CUDA ordinals (parsed as a
// list; one process uses one device, so select_device refuses more than one:
// `stoke train --nproc N` gives each data-parallel rank one device of the list).
struct DeviceRequest {
  enum class Kind { kAuto, kCpu, kList };
  Kind kind = Kind::kAuto;
  std::vector<int> indices;  // for kList: distinct, in the order given
};

// auto/on/off knobs whose `auto` is resolved against the device at run time.
enum class Toggle { kAuto, kOn, kOff };

// STOKE_CPU_SIMD: a level to force, or auto (the best the CPU has).
struct SimdRequest {
  bool automatic = true;
  SimdLevel level = SimdLevel::kScalar;  // when !automatic
};

// STOKE_CACHE: off, ram[:SIZE] (no SIZE: no budget beyond memory), file:PATH.
struct CacheSpec {
  enum class Kind { kOff, kRam, kFile };
  Kind kind = Kind::kOff;
  std::uint64_t ram_budget = 0;  // bytes; 0 = unbounded
  std::string path;              // for kFile
};

// The typed, validated values. Read them through Config::settings().
struct Settings {
  DeviceRequest gpu_device;
  double gpu_mem_percent = 60.0;             // (0, 100]
  std::optional<std::uint64_t> gpu_mem_max;  // bytes
  bool gpu_streams = true;
  Toggle gpu_graph = Toggle::kAuto;  // auto: on where shapes are static
  Toggle gpu_jit = Toggle::kAuto;    // auto: on where NVRTC is present
  bool host_pinned = true;
  std::uint64_t host_pinned_max = 512ull << 20;
  std::optional<int> cpu_threads;  // empty: derived (see resolve_cpu_threads)
  SimdRequest cpu_simd;
  int prefetch_depth = 2;  // [1, 64]
  CacheSpec cache;
  LogLevel log_level = LogLevel::kWarn;
  Precision precision = Precision::kFp32;  // STOKE_PRECISION (stoke/precision.hpp)
  // Not knobs (no row in the table): where this process finds its parts.
  // Config::load reads them from STOKE_CUDA_PLUGIN and STOKE_JIT_CACHE (else
  // $XDG_CACHE_HOME/stoke/jit, else $HOME/.cache/stoke/jit); Config::set
  // takes the same names. Nothing below the public API reads them again.
  std::string cuda_plugin;  // a path, "off", or "" = beside libstoke.so, then the loader's path
  std::string jit_cache;    // NVRTC kernel cache directory; "" = <temp>/stoke-jit
  // STOKE_MAX_IMAGE_PIXELS: the largest width * height a decoder accepts,
  // checked from the header before any pixel buffer is reserved; empty = none.
  std::optional<std::uint64_t> max_image_pixels = std::uint64_t{300'000'000};
};

enum class ConfigSource { kDefault, kFile, kEnvironment, kApi };
STOKE_API const char* to_string(ConfigSource source) noexcept;

// One knob's effective value and its provenance.
struct KnobValue {
  std::string name;   // "STOKE_GPU_MEM_PERCENT"
  std::string value;  // canonical text, e.g. "60"
  ConfigSource source = ConfigSource::kDefault;
  std::string origin;   // "", "/etc/stoke.conf:3", "environment", "api"
  std::string meaning;  // one line from the knob table
};

// A STOKE_* environment variable the library does not know (ignored).
struct UnknownVariable {
  std::string name;
  std::string value;
  std::string suggestion;  // nearest known name, or "" when nothing is close
};

struct ConfigLoadOptions {
  // Config file: this path if set; else the file named by STOKE_CONFIG in the
  // environment; else none. Format: `NAME = value` lines, `#` comments.
  std::optional<std::filesystem::path> file;
  // The environment to read; empty optional = this process's environment.
  std::optional<std::vector<std::pair<std::string, std::string>>> environment;
  // Physical cores, for the "more threads than cores" warning; 0 = query.
  int physical_cores = 0;
};

class STOKE_API Config {
 public:
  // Defaults only.
  Config();

  // Defaults < file < environment. Throws ConfigError for bad values (naming
  // the file and line, or the variable) and for unknown keys in a file;
  // unknown STOKE_* variables are warnings with the nearest known name.
  static Config load(const ConfigLoadOptions& options = {});

  // Sets a knob from the API (highest precedence). `name` is the environment
  // name ("STOKE_CPU_THREADS") or its short form ("cpu_threads").
  void set(std::string_view name, std::string_view value);

  const Settings& settings() const noexcept { return settings_; }
  const KnobValue& knob(std::string_view name) const;  // ConfigError if unknown
  const std::vector<KnobValue>& knobs() const noexcept { return knobs_; }

  // Warnings found while loading (unknown variables, oversubscribed threads,
  // forced SIMD above the CPU). Also logged once at load.
  const std::vector<std::string>& warnings() const noexcept { return warnings_; }
  const std::vector<UnknownVariable>& unknown_variables() const noexcept { return unknown_; }

  // The effective configuration as a table (name, value, source) and as JSON.
  std::string report() const;
  std::string to_json() const;

  // Applies the process-wide parts: log level. (The arena is sized by the
  // runtime once the device is known; see resolve_cpu_threads.)
  void apply_logging() const;

  // The names of all knobs, in table order.
  static std::vector<std::string> known_names();

 private:
  void assign(std::string_view name, std::string_view value, ConfigSource source,
              std::string origin);
  void check_against(const CpuInfo& cpu);  // oversubscription, forced SIMD

  Settings settings_;
  std::vector<KnobValue> knobs_;
  std::vector<std::string> warnings_;
  std::vector<UnknownVariable> unknown_;
};

// STOKE_CPU_THREADS resolved: the explicit value, else physical cores - 1 when
// a GPU computes (one core drives the GPU), else all physical cores; >= 1.
STOKE_API int resolve_cpu_threads(const Settings& settings, const CpuInfo& cpu, bool gpu_computes);

// STOKE_CPU_SIMD resolved against the CPU: never above what it has.
STOKE_API SimdLevel resolve_simd(const Settings& settings, const CpuInfo& cpu);

// Parses "512M", "1.5G", "4096", "2GiB" to bytes (binary units). ConfigError
// naming `what` if malformed.
STOKE_API std::uint64_t parse_size(std::string_view text, std::string_view what);

}  // namespace stoke
