#include "stoke/config.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "config/knobs.hpp"
#include "config/parse.hpp"
#include "core/text.hpp"
#include "stoke/error.hpp"
#include "system/cpu_limits.hpp"

extern char** environ;

namespace stoke {
namespace {

using detail::BadValue;
using detail::canonical_name;
using detail::did_you_mean;
using detail::find_knob;
using detail::is_auxiliary;
using detail::Knob;
using detail::nearest_name;
using detail::suggestion;

// A config file must be a regular file of sane size: a device (/dev/zero), a
// FIFO or a directory is refused before it is read.
void check_config_file(const std::filesystem::path& file, const std::string& from) {
  constexpr std::uintmax_t kMaxBytes = 1 << 20;
  const std::string what = "config file " + file.string() + " (from " + from + ")";
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::exists(status))
    throw ConfigError("cannot read " + what + ": not found");
  if (std::filesystem::is_directory(status))
    throw ConfigError("cannot read " + what + ": it is a directory");
  if (!std::filesystem::is_regular_file(status)) {
    throw ConfigError("cannot read " + what + ": not a regular file (a device, FIFO or socket)");
  }
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) throw ConfigError("cannot read " + what + ": " + ec.message());
  if (size > kMaxBytes) {
    throw ConfigError("cannot read " + what + ": " + std::to_string(size) +
                      " bytes; a config file is at most 1 MiB");
  }
}

std::vector<std::pair<std::string, std::string>> process_environment() {
  std::vector<std::pair<std::string, std::string>> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

// STOKE_JIT_CACHE's default: $XDG_CACHE_HOME/stoke/jit, else
// $HOME/.cache/stoke/jit, else "" (the plugin's temporary directory).
std::string default_jit_cache(const std::vector<std::pair<std::string, std::string>>& env) {
  std::string xdg, home;
  for (const auto& [key, value] : env) {
    if (key == "XDG_CACHE_HOME") xdg = value;
    if (key == "HOME") home = value;
  }
  if (!xdg.empty()) return (std::filesystem::path(xdg) / "stoke" / "jit").string();
  if (!home.empty()) return (std::filesystem::path(home) / ".cache" / "stoke" / "jit").string();
  return {};
}

}  // namespace

const char* to_string(Precision precision) noexcept {
  switch (precision) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kAuto:
      return "auto";
    case Precision::kInt8:
      return "int8";
  }
  return "fp32";
}

const char* to_string(ConfigSource source) noexcept {
  switch (source) {
    case ConfigSource::kDefault:
      return "default";
    case ConfigSource::kFile:
      return "file";
    case ConfigSource::kEnvironment:
      return "environment";
    case ConfigSource::kApi:
      return "api";
  }
  return "unknown";
}

Config::Config() {
  for (const auto& knob : detail::knobs()) {
    KnobValue value;
    value.name = knob.name;
    value.value = knob.apply(settings_, knob.default_text);
    value.meaning = knob.meaning;
    knobs_.push_back(std::move(value));
  }
}

std::vector<std::string> Config::known_names() {
  std::vector<std::string> names;
  for (const auto& knob : detail::knobs()) names.emplace_back(knob.name);
  return names;
}

void Config::assign(std::string_view name, std::string_view value, ConfigSource source,
                    std::string origin) {
  const std::string canonical = canonical_name(name);
  if (canonical == "STOKE_CUDA_PLUGIN" || canonical == "STOKE_JIT_CACHE") {
    (canonical == "STOKE_CUDA_PLUGIN" ? settings_.cuda_plugin : settings_.jit_cache) =
        std::string(detail::trim(value));
    return;
  }
  const Knob* knob = find_knob(canonical);
  if (!knob) {
    throw ConfigError("unknown setting " + std::string(name) +
                      (origin.empty() ? "" : " (" + origin + ")") + suggestion(canonical) +
                      "; known settings: see `stoke-info` or README.md");
  }
  std::string canonical_value;
  try {
    canonical_value = knob->apply(settings_, value);
  } catch (const BadValue& e) {
    throw ConfigError(std::string(knob->name) + "=" + std::string(value) + " is invalid (" +
                      e.what() + ")" + (origin.empty() ? "" : " from " + origin) +
                      "; accepted: " + knob->accepted);
  }
  auto it = std::find_if(knobs_.begin(), knobs_.end(),
                         [&](const KnobValue& k) { return k.name == knob->name; });
  it->value = std::move(canonical_value);
  it->source = source;
  it->origin = std::move(origin);
}

void Config::set(std::string_view name, std::string_view value) {
  assign(name, value, ConfigSource::kApi, "api");
}

const KnobValue& Config::knob(std::string_view name) const {
  const std::string canonical = canonical_name(name);
  for (const auto& k : knobs_) {
    if (k.name == canonical) return k;
  }
  throw ConfigError("unknown setting " + std::string(name) + suggestion(canonical));
}

Config Config::load(const ConfigLoadOptions& options) {
  Config config;
  const auto env = options.environment ? *options.environment : process_environment();

  std::optional<std::filesystem::path> file = options.file;
  if (!file) {
    for (const auto& [key, value] : env) {
      if (key == "STOKE_CONFIG" && !value.empty()) file = value;
    }
  }
  if (file) {
    const std::string from = options.file ? "the API" : "STOKE_CONFIG";
    check_config_file(*file, from);
    std::ifstream in(*file);
    if (!in)
      throw ConfigError("cannot read config file " + file->string() + " (from " + from + ")");
    std::map<std::string, std::string> first_seen;  // canonical key -> origin
    std::string line;
    int line_number = 0;
    while (std::getline(in, line)) {
      ++line_number;
      const std::string origin = file->string() + ":" + std::to_string(line_number);
      auto text = detail::trim(std::string_view(line).substr(0, line.find('#')));
      if (text.empty()) continue;
      const auto eq = text.find('=');
      if (eq == std::string_view::npos) {
        throw ConfigError("config file " + origin + ": expected `NAME = value`, got '" +
                          std::string(text) + "'");
      }
      const auto key = detail::trim(text.substr(0, eq));
      if (canonical_name(key) == "STOKE_CONFIG") {
        throw ConfigError("config file " + origin +
                          ": STOKE_CONFIG cannot be set in a config file");
      }
      const auto [seen, fresh] = first_seen.emplace(canonical_name(key), origin);
      if (!fresh) {
        throw ConfigError("config file " + origin + ": " + seen->first +
                          " is set twice (first at " + seen->second + ", again at " + origin + ")");
      }
      config.assign(key, detail::trim(text.substr(eq + 1)), ConfigSource::kFile, origin);
    }
  }

  config.settings_.jit_cache = default_jit_cache(env);
  for (const auto& [key, value] : env) {
    if (key.rfind("STOKE_", 0) != 0) continue;
    if (find_knob(key) || key == "STOKE_CUDA_PLUGIN" || key == "STOKE_JIT_CACHE") {
      config.assign(key, value, ConfigSource::kEnvironment, "environment");
    } else if (!is_auxiliary(key)) {
      std::string nearest = nearest_name(key);
      config.warnings_.push_back("unknown environment variable " + key + "=" + value +
                                 " is ignored" + did_you_mean(nearest));
      config.unknown_.push_back({key, value, std::move(nearest)});
    }
  }

  // Physical cores and SIMD level only: cached while the affinity mask stays.
  const CpuLimits limits = cpu_limits();
  CpuInfo cpu;
  cpu.physical_cores = options.physical_cores > 0 ? options.physical_cores : limits.physical_cores;
  cpu.simd = limits.simd;
  config.check_against(cpu);
  config.apply_logging();
  for (const auto& warning : config.warnings_) log_warn(warning);
  return config;
}

void Config::check_against(const CpuInfo& cpu) {
  const int physical_cores = cpu.physical_cores;
  if (settings_.cpu_threads && *settings_.cpu_threads > physical_cores) {
    warnings_.push_back("STOKE_CPU_THREADS=" + std::to_string(*settings_.cpu_threads) +
                        " is more than the " + std::to_string(physical_cores) +
                        " physical cores; oversubscribed threads usually slow preprocessing down");
  }
  if (!settings_.cpu_simd.automatic && settings_.cpu_simd.level > cpu.simd) {
    warnings_.push_back(std::string("STOKE_CPU_SIMD=") + to_string(settings_.cpu_simd.level) +
                        " is above what this CPU supports; using " + to_string(cpu.simd));
  }
}

void Config::apply_logging() const {
  set_log_level(settings_.log_level);
}

std::string Config::report() const {
  std::size_t name_width = 0, value_width = 5;
  for (const auto& k : knobs_) {
    name_width = std::max(name_width, k.name.size());
    value_width = std::max(value_width, k.value.size());
  }
  std::ostringstream out;
  out << "configuration (value and where it came from)\n";
  for (const auto& k : knobs_) {
    out << "  " << k.name << std::string(name_width - k.name.size() + 2, ' ') << k.value
        << std::string(value_width - k.value.size() + 2, ' ') << to_string(k.source);
    if (k.source == ConfigSource::kFile) out << " " << k.origin;
    out << "\n";
  }
  for (const auto& w : warnings_) out << "  warning: " << w << "\n";
  return out.str();
}

std::string Config::to_json() const {
  using detail::json_quote;
  std::ostringstream out;
  out << "{\"knobs\":[";
  for (std::size_t i = 0; i < knobs_.size(); ++i) {
    const auto& k = knobs_[i];
    out << (i ? "," : "") << "{\"name\":" << json_quote(k.name)
        << ",\"value\":" << json_quote(k.value) << ",\"source\":" << json_quote(to_string(k.source))
        << ",\"origin\":" << json_quote(k.origin) << "}";
  }
  out << "],\"warnings\":[";
  for (std::size_t i = 0; i < warnings_.size(); ++i)
    out << (i ? "," : "") << json_quote(warnings_[i]);
  out << "]}";
  return out.str();
}

int resolve_cpu_threads(const Settings& settings, const CpuInfo& cpu, bool gpu_computes) {
  if (settings.cpu_threads) return *settings.cpu_threads;
  const int cores = std::max(1, cpu.physical_cores);
  return gpu_computes ? std::max(1, cores - 1) : cores;
}

SimdLevel resolve_simd(const Settings& settings, const CpuInfo& cpu) {
  if (settings.cpu_simd.automatic) return cpu.simd;
  return std::min(settings.cpu_simd.level, cpu.simd);
}

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  try {
    return detail::parse_bytes(text);
  } catch (const BadValue& e) {
    throw ConfigError(std::string(what) + "=" + std::string(text) + " is invalid (" + e.what() +
                      "); accepted: a size greater than zero such as 512M, 8G or 1073741824");
  }
}

}  // namespace stoke
