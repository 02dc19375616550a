// Runtime compilation of the custom kernels with NVRTC for the exact device
// architecture (STOKE_GPU_JIT), cached on disk by source, options, architecture
// and NVRTC version so a second run does not compile again.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/kernel_sources.hpp"
#include "stoke/export.hpp"

namespace stoke::cuda {

// Options every kernel is compiled with (part of the cache key).
STOKE_INTERNAL std::vector<std::string> jit_options(int arch);  // arch: 90 for sm_90

// Compiles `source` to a cubin for sm_<arch>. Throws GpuLibraryError (kNvrtc)
// whose message names the kernel file, the architecture and the compiler log.
STOKE_INTERNAL std::vector<char> compile_to_cubin(const KernelSource& source, int arch);

// 64-bit FNV-1a, the cache key and file checksum.
STOKE_INTERNAL std::uint64_t fnv1a(const void* data, std::size_t size,
                                   std::uint64_t seed = 1469598103934665603ull);

// A directory of compiled cubins. Files carry a header with the payload size
// and checksum; a truncated or corrupt file is a miss (and is replaced), never
// loaded. Writes go to a temporary file that is renamed into place.
class STOKE_INTERNAL JitCache {
 public:
  // The directory libstoke handed down (Settings::jit_cache, from
  // STOKE_JIT_CACHE, else $XDG_CACHE_HOME/stoke/jit, else ~/.cache/stoke/jit,
  // resolved by Config::load), else <temp>/stoke-jit. Never reads the environment.
  static std::filesystem::path default_directory();
  static void set_default_directory(std::filesystem::path directory);

  explicit JitCache(std::filesystem::path directory);

  std::uint64_t key(const KernelSource& source, int arch) const;
  std::optional<std::vector<char>> load(std::uint64_t key) const;
  // Returns false (and logs why) when the cache cannot be written: a cache is
  // an optimization, never a reason to fail.
  bool store(std::uint64_t key, const std::vector<char>& cubin) const;

  // Loads from the cache or compiles and stores. `compiled` says which happened.
  std::vector<char> get_or_compile(const KernelSource& source, int arch,
                                   bool* compiled = nullptr) const;

  const std::filesystem::path& directory() const { return directory_; }

 private:
  std::filesystem::path path_for(std::uint64_t key) const;
  std::filesystem::path directory_;
};

}  // namespace stoke::cuda
