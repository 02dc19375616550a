// The advisor: rules that read a profile, the machine and the configuration
// and say what holds training back and exactly which settings to change.
#pragma once

#include <string>
#include <vector>

#include "stoke/config.hpp"
#include "stoke/device.hpp"
#include "stoke/export.hpp"
#include "stoke/profile.hpp"
#include "stoke/system.hpp"

namespace stoke {

// Everything the rules look at. Fields a caller cannot fill stay at their
// defaults, and the rules that need them stay silent.
struct AdvisorInput {
  ProfileSummary profile;
  SystemInfo system;
  Config config;                // settings and the warnings found while loading
  DeviceSelection device;
  int cpu_threads = 0;          // the arena size in effect
  SimdLevel simd = SimdLevel::kScalar;  // the level the kernels use
  int batch_size = 0;
  int max_batch_size = 0;       // largest batch the memory plan fits under the cap; 0 = unknown
  double decoded_pixels_per_image = 0;  // pixels decoded per sample (after DCT scaling)
  double training_pixels_per_image = 0; // pixels of the network input
  int validation_every_epochs = 0;
  int log_every_steps = 0;
};

struct Advice {
  std::string rule;        // stable identifier, e.g. "input-bound"
  std::string diagnosis;   // what the measurements show, with the numbers
  std::vector<std::string> exports;  // "export STOKE_CPU_THREADS=7"
  std::vector<std::string> changes;  // settings that are not variables ("batch size 64")
  double severity = 0;     // share of the step the problem costs, for ordering
};

// All rules that fire, most severe first.
STOKE_API std::vector<Advice> advise(const AdvisorInput& input);

// "stoke advisor: ..." block, with the export lines ready to paste.
STOKE_API std::string format_advice(const std::vector<Advice>& advice);

}  // namespace stoke
