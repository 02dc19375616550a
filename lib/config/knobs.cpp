// The knob table (DESIGN.md's knobs): each knob's name, default, accepted
// values and parser, and the names the library reads besides the knobs.
#include "config/knobs.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "config/parse.hpp"
#include "core/text.hpp"
#include "stoke/error.hpp"
#include "system/cpu_limits.hpp"

namespace stoke::detail {
namespace {

std::string on_off(bool v) {
  return v ? "on" : "off";
}
std::string toggle_text(Toggle t) {
  return t == Toggle::kAuto ? "auto" : (t == Toggle::kOn ? "on" : "off");
}
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

const Knob kKnobs[] = {
    {"STOKE_GPU_DEVICE", "auto", "auto, cpu, or a comma list of distinct device indices (0,1)",
     "device: auto = best discrete GPU, else CPU",
     [](Settings& s, std::string_view v) {
       s.gpu_device = detail::parse_device_request(v);
       return detail::format_device_request(s.gpu_device);
     }},
    {"STOKE_GPU_MEM_PERCENT", "60", "a percentage in (0, 100], e.g. 60",
     "device pool cap, % of the device's total memory",
     [](Settings& s, std::string_view v) {
       s.gpu_mem_percent = detail::parse_percent(v);
       return number_text(s.gpu_mem_percent);
     }},
    {"STOKE_GPU_MEM_MAX", "none", "none, or a size greater than zero such as 8G, 512M, 1073741824",
     "absolute device pool cap",
     [](Settings& s, std::string_view v) {
       if (detail::to_lower(detail::trim(v)) == "none") {
         s.gpu_mem_max.reset();
         return std::string("none");
       }
       s.gpu_mem_max = detail::parse_bytes(v);
       return detail::format_size(*s.gpu_mem_max);
     }},
    {"STOKE_GPU_STREAMS", "on", "on or off", "separate copy and compute streams (overlap)",
     [](Settings& s, std::string_view v) {
       s.gpu_streams = detail::parse_bool(v);
       return on_off(s.gpu_streams);
     }},
    {"STOKE_GPU_GRAPH", "auto", "auto, on or off", "capture the train step as a CUDA graph",
     [](Settings& s, std::string_view v) {
       s.gpu_graph = detail::parse_toggle(v);
       return toggle_text(s.gpu_graph);
     }},
    {"STOKE_GPU_JIT", "auto", "auto, on or off", "compile custom kernels with NVRTC for the device",
     [](Settings& s, std::string_view v) {
       s.gpu_jit = detail::parse_toggle(v);
       return toggle_text(s.gpu_jit);
     }},
    {"STOKE_HOST_PINNED", "on", "on or off", "page-locked host staging buffers",
     [](Settings& s, std::string_view v) {
       s.host_pinned = detail::parse_bool(v);
       return on_off(s.host_pinned);
     }},
    {"STOKE_HOST_PINNED_MAX", "512M", "a size greater than zero such as 512M or 1G",
     "cap of pinned host memory",
     [](Settings& s, std::string_view v) {
       s.host_pinned_max = detail::parse_bytes(v);
       return detail::format_size(s.host_pinned_max);
     }},
    {"STOKE_CPU_THREADS", "auto", "auto or an integer in [1, 4096]",
     "threads of the library's oneTBB arena",
     [](Settings& s, std::string_view v) {
       if (detail::to_lower(detail::trim(v)) == "auto") {
         s.cpu_threads.reset();
         return std::string("auto");
       }
       s.cpu_threads = static_cast<int>(detail::parse_integer(v, 1, 4096));
       return std::to_string(*s.cpu_threads);
     }},
    {"STOKE_CPU_SIMD", "auto", "auto, scalar, sse4, avx2 or avx512",
     "instruction set of the CPU kernels",
     [](Settings& s, std::string_view v) {
       s.cpu_simd = detail::parse_simd(v);
       return std::string(s.cpu_simd.automatic ? "auto" : to_string(s.cpu_simd.level));
     }},
    {"STOKE_PREFETCH_DEPTH", "2", "an integer in [1, 64]", "batches in flight",
     [](Settings& s, std::string_view v) {
       s.prefetch_depth = static_cast<int>(detail::parse_integer(v, 1, 64));
       return std::to_string(s.prefetch_depth);
     }},
    {"STOKE_CACHE", "off", "off, ram, ram:SIZE (e.g. ram:4G) or file:PATH",
     "cache of preprocessed images",
     [](Settings& s, std::string_view v) {
       s.cache = detail::parse_cache(v);
       switch (s.cache.kind) {
         case CacheSpec::Kind::kOff:
           return std::string("off");
         case CacheSpec::Kind::kRam:
           return s.cache.ram_budget ? "ram:" + detail::format_size(s.cache.ram_budget)
                                     : std::string("ram");
         case CacheSpec::Kind::kFile:
           return "file:" + s.cache.path;
       }
       return std::string("off");
     }},
    {"STOKE_MAX_IMAGE_PIXELS", "300000000", "none, or an integer in [1, 2^50] (width * height)",
     "largest image a decoder accepts, checked from the header before allocating",
     [](Settings& s, std::string_view v) {
       if (detail::to_lower(detail::trim(v)) == "none") {
         s.max_image_pixels.reset();
         return std::string("none");
       }
       s.max_image_pixels = static_cast<std::uint64_t>(detail::parse_integer(v, 1, 1ll << 50));
       return std::to_string(*s.max_image_pixels);
     }},
    {"STOKE_PRECISION", "fp32", "fp32, bf16, fp16, int8 or auto",
     "compute precision of the convolutions in inference (auto: bf16 where native and faster; int8 "
     "needs a model file calibrated by stoke quantize; docs/precision.md)",
     [](Settings& s, std::string_view v) {
       s.precision = detail::parse_precision(v);
       return std::string(to_string(s.precision));
     }},
    {"STOKE_LOG_LEVEL", "warn", "error, warn, info or debug", "library log verbosity",
     [](Settings& s, std::string_view v) {
       s.log_level = detail::parse_log_level(v);
       return std::string(to_string(s.log_level));
     }},
};

// STOKE_* variables that are not knobs but are read by the library.
const char* const kAuxiliaryNames[] = {
    "STOKE_CONFIG",       // config file path
    "STOKE_CUDA_PLUGIN",  // plugin path, or off
    "STOKE_JIT_CACHE",    // directory of NVRTC-compiled kernels
    // Data-parallel runs, read by DistributedOptions::from_environment()
    // (stoke/distributed.hpp), not by Config.
    "STOKE_DIST_STORE",
    "STOKE_DIST_RUN_ID",
    "STOKE_DIST_HOST",
    "STOKE_DIST_TIMEOUT",
};

}  // namespace

std::span<const Knob> knobs() {
  return kKnobs;
}

// "cpu_threads" -> "STOKE_CPU_THREADS"; full names pass through upper-cased.
std::string canonical_name(std::string_view name) {
  std::string upper(detail::trim(name));
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper.rfind("STOKE_", 0) != 0) upper = "STOKE_" + upper;
  return upper;
}

const Knob* find_knob(std::string_view canonical) {
  for (const auto& knob : kKnobs) {
    if (canonical == knob.name) return &knob;
  }
  return nullptr;
}

bool is_auxiliary(std::string_view canonical) {
  return std::any_of(std::begin(kAuxiliaryNames), std::end(kAuxiliaryNames),
                     [&](const char* n) { return canonical == n; });
}

// The nearest known name for a near miss, "" otherwise.
std::string nearest_name(std::string_view unknown) {
  // A suggestion is made within this distance. The distance is at least the
  // difference in length, so longer or shorter names are skipped unmeasured
  // (an arbitrarily long variable costs nothing).
  const std::size_t limit = std::max<std::size_t>(3, unknown.size() / 4);
  std::string best;
  std::size_t best_distance = std::string::npos;
  const auto consider = [&](std::string_view name) {
    const std::size_t length_gap =
        unknown.size() > name.size() ? unknown.size() - name.size() : name.size() - unknown.size();
    if (length_gap > limit) return;
    const auto d = detail::edit_distance(unknown, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  };
  for (const auto& knob : kKnobs) consider(knob.name);
  for (const char* name : kAuxiliaryNames) consider(name);
  return best_distance <= limit ? best : std::string();
}

// " (did you mean STOKE_X?)" for a near miss, "" otherwise.
std::string did_you_mean(const std::string& nearest) {
  return nearest.empty() ? "" : " (did you mean " + nearest + "?)";
}
std::string suggestion(std::string_view unknown) {
  return did_you_mean(nearest_name(unknown));
}

}  // namespace stoke::detail
