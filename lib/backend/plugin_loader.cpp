#include "backend/plugin_loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace stoke::detail {
namespace {

std::filesystem::path this_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuda_plugin), &info) == 0 || !info.dli_fname) return {};
  return std::filesystem::path(info.dli_fname).parent_path();
}

PluginLoad load() {
  PluginLoad result;
  const std::string plugin_name = STOKE_CUDA_PLUGIN_NAME;
  result.built = !plugin_name.empty();
  std::string candidate;
  if (const char* env = std::getenv("STOKE_CUDA_PLUGIN"); env && *env) {
    const std::string value = env;
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
    candidate = (!dir.empty() && std::filesystem::exists(beside, ec)) ? beside.string() : plugin_name;
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
  static const PluginLoad loaded = load();
  return loaded;
}

}  // namespace stoke::detail
