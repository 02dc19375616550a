#include "gpu/plugin_loader.hpp"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>

#include "stoke/log.hpp"

namespace stoke::detail {
namespace {

std::filesystem::path this_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuda_plugin), &info) == 0 || !info.dli_fname) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

// What the plugin's libraries (CUDA runtime, cuBLAS/cuBLASLt, cuDNN, NVRTC)
// map into the address space when they load, with room for a CUDA context:
// about 0.8 GiB of mappings here, and the driver reserves more on a device.
constexpr unsigned long long kCudaAddressSpace = 4ull << 30;

unsigned long long address_space_in_use() {
  unsigned long long pages = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * static_cast<unsigned long long>(sysconf(_SC_PAGESIZE));
}

// Why the CUDA libraries must not be loaded in this process, or "". Both
// checks guard a failure the CUDA libraries do not report: under an
// address-space limit (ulimit -v) cuBLASLt's and cuDNN's loaders crash or
// abort when a mapping fails, and without a driver nothing they map is of use.
std::string cuda_libraries_refused(bool check_driver) {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const unsigned long long cap = limit.rlim_cur, used = address_space_in_use();
    if (used >= cap || cap - used < kCudaAddressSpace)
      return "the address-space limit (ulimit -v " + std::to_string(cap >> 10) + " KiB, " +
             std::to_string(used >> 20) + " MiB in use) leaves less than the " +
             std::to_string(kCudaAddressSpace >> 30) + " GiB the CUDA libraries need";
  }
  // The runtime loads the driver by this name; without it the plugin could
  // only report "no device" after mapping a gigabyte of libraries (a plugin
  // named explicitly is loaded all the same: its own errors are the news).
  if (!check_driver) return {};
  // The handle is kept, not closed: the CUDA runtime opens the driver next
  // anyway, and unloading a driver library that started threads or registered
  // exit handlers at load is not safe.
  if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL)) return {};
  const char* why = dlerror();
  return std::string("no CUDA driver: ") + (why ? why : "libcuda.so.1 does not load");
}

struct Request {
  std::mutex mutex;
  std::string value;
  std::string jit_cache;
  bool used = false;  // cuda_plugin() has loaded with `value`
};

Request& request() {
  static Request r;
  return r;
}

PluginLoad load(const std::string& value) {
  PluginLoad result;
  const std::string plugin_name = STOKE_CUDA_PLUGIN_NAME;
  result.built = !plugin_name.empty();
  std::string candidate;
  if (!value.empty()) {
    if (value == "off" || value == "none" || value == "0") {
      result.error = "disabled by STOKE_CUDA_PLUGIN=" + value;
      return result;
    }
    candidate = value;
  } else if (!result.built) {
    result.error = "libstoke was built without the CUDA plugin (-DSTOKE_CUDA=OFF or no CUDA/cuDNN)";
    return result;
  } else {
    const auto dir = this_library_dir();
    const auto beside = dir / plugin_name;
    std::error_code ec;
    candidate =
        (!dir.empty() && std::filesystem::exists(beside, ec)) ? beside.string() : plugin_name;
  }
  result.path = candidate;
  if (std::string refused = cuda_libraries_refused(value.empty()); !refused.empty()) {
    result.error = std::move(refused);
    return result;
  }
  void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    result.error = std::string("cannot load ") + candidate + ": " + (why ? why : "unknown reason");
    return result;
  }
  auto entry = reinterpret_cast<StokeCudaPluginEntry>(dlsym(handle, "stoke_cuda_plugin"));
  if (!entry) {
    result.error = candidate + " does not export stoke_cuda_plugin()";
    return result;
  }
  CudaPlugin* plugin = entry();
  if (!plugin || plugin->abi_version() != kCudaPluginAbi) {
    result.error = candidate + " was built for another plugin ABI (expected " +
                   std::to_string(kCudaPluginAbi) + ")";
    return result;
  }
  // The handle stays open for the life of the process: backends and buffers
  // created by the plugin may outlive any one caller.
  result.plugin = plugin;
  return result;
}

}  // namespace

const PluginLoad& cuda_plugin() {
  static const PluginLoad loaded = [] {
    Request& r = request();
    std::lock_guard lock(r.mutex);
    r.used = true;
    PluginLoad result = load(r.value);
    if (result.plugin) result.plugin->set_jit_cache(r.jit_cache);
    return result;
  }();
  return loaded;
}

void request_cuda_plugin(const std::string& value, const std::string& jit_cache) {
  Request& r = request();
  std::lock_guard lock(r.mutex);
  if (!r.used) {
    r.value = value;
    r.jit_cache = jit_cache;
  } else if (value != r.value) {
    log_warn("STOKE_CUDA_PLUGIN=" + value +
             " is ignored: this process already looked for the plugin" +
             (r.value.empty() ? std::string() : " at " + r.value));
  }
}

}  // namespace stoke::detail
