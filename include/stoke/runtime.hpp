// Bringing the library up: read the machine, choose the device, size the
// thread arena and the log level from a Config. An application calls init()
// once and passes the Runtime to the trainer/loader it builds.
#pragma once

#include "stoke/config.hpp"
#include "stoke/device.hpp"
#include "stoke/export.hpp"
#include "stoke/system.hpp"

namespace stoke {

struct Runtime {
  Config config;
  SystemInfo system;
  DeviceSelection device;
  int cpu_threads = 1;                   // the arena's size, now in effect
  SimdLevel simd = SimdLevel::kScalar;   // what the CPU kernels will use
};

// Queries the system, selects the device (ConfigError for an impossible
// request), sizes the library arena to resolve_cpu_threads() and applies the
// log level. Warnings (CPU fallback, oversubscription) are logged once.
STOKE_API Runtime init(const Config& config);

// init(Config::load()).
STOKE_API Runtime init();

// The device, threads and SIMD lines stoke-info and every bench print.
STOKE_API std::string describe(const Runtime& runtime);

}  // namespace stoke
