#include "backend/cuda/jit.hpp"

#include <nvrtc.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "backend/cuda/check.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::cuda {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'K', 'J', 'I', 'T', '1', '\0'};

struct CacheHeader {
  char magic[8];
  std::uint64_t size;
  std::uint64_t checksum;
};

struct ProgramDeleter {
  void operator()(nvrtcProgram* p) const {
    if (p && *p) nvrtcDestroyProgram(p);
    delete p;
  }
};

std::string program_log(nvrtcProgram program) {
  std::size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  nvrtcGetProgramLog(program, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// A temporary name no other writer uses: the process id alone is shared by
// the threads of one process (two backends, or a backend and the
// prefetcher's normalize kernel, may store the same entry at once).
std::string temporary_name(const std::filesystem::path& path) {
  static std::atomic<std::uint64_t> counter{0};
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%zx.%llu", static_cast<long>(::getpid()),
                std::hash<std::thread::id>{}(std::this_thread::get_id()),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return path.string() + suffix;
}

int nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return major * 1000 + minor * 10;
}

}  // namespace

std::vector<std::string> jit_options(int arch) {
  return {"--gpu-architecture=sm_" + std::to_string(arch), "--std=c++17", "--fmad=true",
          "-default-device"};
}

std::uint64_t fnv1a(const void* data, std::size_t size, std::uint64_t seed) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::uint64_t hash = seed;
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

std::vector<char> compile_to_cubin(const KernelSource& source, int arch) {
  std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram(nullptr));
  const std::string file = source.name + ".cu";
  STOKE_NVRTC_CHECK(
      nvrtcCreateProgram(program.get(), source.text.c_str(), file.c_str(), 0, nullptr, nullptr));
  const auto options = jit_options(arch);
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtcResult result =
      nvrtcCompileProgram(*program, static_cast<int>(argv.size()), argv.data());
  if (result != NVRTC_SUCCESS) {
    throw GpuLibraryError(ErrorCode::kNvrtc,
                          "NVRTC could not compile kernel file " + file + " for sm_" +
                              std::to_string(arch) + ": " + nvrtcGetErrorString(result) + "\n" +
                              program_log(*program),
                          static_cast<int>(result));
  }
  std::size_t size = 0;
  STOKE_NVRTC_CHECK(nvrtcGetCUBINSize(*program, &size));
  std::vector<char> cubin(size);
  STOKE_NVRTC_CHECK(nvrtcGetCUBIN(*program, cubin.data()));
  return cubin;
}

namespace {
std::mutex default_directory_mutex;
std::filesystem::path default_directory_path;  // set by libstoke (Plugin::set_jit_cache)
}  // namespace

void JitCache::set_default_directory(std::filesystem::path directory) {
  std::lock_guard lock(default_directory_mutex);
  default_directory_path = std::move(directory);
}

std::filesystem::path JitCache::default_directory() {
  std::lock_guard lock(default_directory_mutex);
  if (!default_directory_path.empty()) return default_directory_path;
  return std::filesystem::temp_directory_path() / "stoke-jit";
}

JitCache::JitCache(std::filesystem::path directory) : directory_(std::move(directory)) {}

std::uint64_t JitCache::key(const KernelSource& source, int arch) const {
  std::uint64_t h = fnv1a(source.text.data(), source.text.size());
  for (const auto& option : jit_options(arch)) h = fnv1a(option.data(), option.size(), h);
  const int version = nvrtc_version();
  return fnv1a(&version, sizeof version, h);
}

std::filesystem::path JitCache::path_for(std::uint64_t key) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.cubin", static_cast<unsigned long long>(key));
  return directory_ / name;
}

std::optional<std::vector<char>> JitCache::load(std::uint64_t key) const {
  const auto path = path_for(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  CacheHeader header{};
  if (!in.read(reinterpret_cast<char*>(&header), sizeof header) ||
      std::memcmp(header.magic, kMagic, sizeof kMagic) != 0 || header.size > (1ull << 30)) {
    log_warn("JIT cache file " + path.string() + " has a bad header; recompiling");
    return std::nullopt;
  }
  std::vector<char> cubin(header.size);
  if (!in.read(cubin.data(), static_cast<std::streamsize>(cubin.size())) ||
      fnv1a(cubin.data(), cubin.size()) != header.checksum) {
    log_warn("JIT cache file " + path.string() + " is truncated or corrupt; recompiling");
    return std::nullopt;
  }
  return cubin;
}

bool JitCache::store(std::uint64_t key, const std::vector<char>& cubin) const {
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  const auto path = path_for(key);
  const auto temp = temporary_name(path);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    CacheHeader header{};
    std::memcpy(header.magic, kMagic, sizeof kMagic);
    header.size = cubin.size();
    header.checksum = fnv1a(cubin.data(), cubin.size());
    out.write(reinterpret_cast<const char*>(&header), sizeof header);
    out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    out.flush();
    if (!out) {
      log_warn("cannot write JIT cache file " + temp + "; kernels will be compiled again next run");
      std::filesystem::remove(temp, ec);
      return false;
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    log_warn("cannot rename JIT cache file into " + path.string() + ": " + ec.message());
    std::filesystem::remove(temp, ec);
    return false;
  }
  return true;
}

std::vector<char> JitCache::get_or_compile(const KernelSource& source, int arch,
                                           bool* compiled) const {
  const auto k = key(source, arch);
  if (auto cached = load(k)) {
    if (compiled) *compiled = false;
    return std::move(*cached);
  }
  auto cubin = compile_to_cubin(source, arch);
  store(k, cubin);
  if (compiled) *compiled = true;
  return cubin;
}

}  // namespace stoke::cuda
