// Finds and loads the CUDA plugin once per process.
#pragma once

#include <string>

#include "gpu/cuda_plugin_api.hpp"

namespace stoke::detail {

struct PluginLoad {
  CudaPlugin* plugin = nullptr;  // null when not loaded
  std::string path;              // where it was loaded from (or looked for)
  std::string error;             // why it did not load
  bool built = false;            // libstoke was built with the plugin
};

// Search order: the request (Settings::cuda_plugin, a path or "off", handed
// down by init() or make_backend() from the application's Config), the
// directory of libstoke.so, then the loader's default search
// (LD_LIBRARY_PATH). The result is cached for the process: the plugin is the
// registry's entry.
const PluginLoad& cuda_plugin();

// Sets what the first cuda_plugin() call loads with: Settings::cuda_plugin
// ("" = the default search) and Settings::jit_cache (handed to the plugin).
// After the plugin was looked for, a different request is logged and
// ignored (one plugin per process).
void request_cuda_plugin(const std::string& path, const std::string& jit_cache);

}  // namespace stoke::detail
