// Finds and loads the CUDA plugin once per process.
#pragma once

#include <string>

#include "backend/cuda_plugin_api.hpp"

namespace stoke::detail {

struct PluginLoad {
  CudaPlugin* plugin = nullptr;  // null when not loaded
  std::string path;              // where it was loaded from (or looked for)
  std::string error;             // why it did not load
  bool built = false;            // libstoke was built with the plugin
};

// Search order: STOKE_CUDA_PLUGIN (a path, or "off"), the directory of
// libstoke.so, then the loader's default search (LD_LIBRARY_PATH).
// The result is cached for the process: the plugin is the registry's entry.
const PluginLoad& cuda_plugin();

}  // namespace stoke::detail
