#include "gpu/plugin_loader.hpp"

#include <dlfcn.h>

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
