// Bringing the library up: read the machine, choose the device, size the
// thread arena and the log level from a Config. An application calls init()
// once and passes runtime.context to the loaders, trainers and autotuner it
// builds (their options' `context`); make_backend() gives the context's backend.
#pragma once

#include <memory>

#include "stoke/backend.hpp"
#include "stoke/config.hpp"
#include "stoke/context.hpp"
#include "stoke/device.hpp"
#include "stoke/export.hpp"
#include "stoke/system.hpp"

namespace stoke {

struct Runtime {
  Config config;
  SystemInfo system;
  DeviceSelection device;
  int cpu_threads = 1;                  // the arena's size, now in effect
  SimdLevel simd = SimdLevel::kScalar;  // what the CPU kernels will use
  Context context;                      // the config, resolved; what every module takes
};

// Queries the system, selects the device (ConfigError for an impossible
// request), sizes the library arena to resolve_cpu_threads() and applies the
// log level. Hands the plugin location and the settings of the registry's
// shared GPU backends down (they are created once per process, so the first
// init() before any backend lookup sets them). Warnings (CPU fallback,
// oversubscription) are logged once.
STOKE_API Runtime init(const Config& config);

// init(Config::load()): the one place besides Context::from_environment()
// where the environment is read.
STOKE_API Runtime init();

// A backend of its own for `context`: the CPU backend with the context's SIMD
// level and thread arena when its STOKE_GPU_DEVICE selects the CPU (or no
// device exists), else a CUDA backend on the first selected device with the
// context's pool cap and options (create_cuda_backend). Two contexts give two
// independent backends.
STOKE_API std::unique_ptr<Backend> make_backend(const Context& context);

// The device, threads and SIMD lines stoke-info and every bench print.
STOKE_API std::string describe(const Runtime& runtime);

}  // namespace stoke
