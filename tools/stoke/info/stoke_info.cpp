// stoke-info: what this machine has, which device stoke would use, and the
// effective configuration with the source of every value.
//
//   stoke-info          tables
//   stoke-info --json   one JSON object
#include <cstdio>
#include <cstring>
#include <iostream>

#include "stoke/distributed.hpp"
#include "stoke/stoke.hpp"

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      std::fprintf(stderr, "usage: %s [--json]\n", argv[0]);
      return 2;
    }
  }
  try {
    const auto runtime = stoke::init();
    const auto& config = runtime.config;
    const auto& system = runtime.system;
    const auto& selection = runtime.device;
    if (json) {
      std::cout << "{\"stoke_version\":\"" << stoke::version()
                << "\",\"system\":" << stoke::system_to_json(system)
                << ",\"selection\":{\"use_gpu\":" << (selection.use_gpu ? "true" : "false")
                << ",\"gpus\":[";
      for (std::size_t i = 0; i < selection.gpus.size(); ++i) {
        std::cout << (i ? "," : "") << selection.gpus[i];
      }
      std::cout << "],\"cpu_threads\":" << runtime.cpu_threads << ",\"simd\":\""
                << stoke::to_string(runtime.simd)
                << "\"},\"distributed\":" << (stoke::distributed_available() ? "true" : "false")
                << ",\"config\":" << config.to_json() << "}\n";
      return 0;
    }
    std::cout << "stoke " << stoke::version() << "\n\n"
              << stoke::format_system(system) << "\n"
              << stoke::describe(runtime) << "\n"
              << "data-parallel training: "
              << (stoke::distributed_available() ? "Gloo (stoke train --nproc N)"
                                                 : "not built (no libgloo-dev)")
              << "\n\n"
              << config.report();
    return 0;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "stoke-info: %s\n", e.what());
    return 1;
  }
}
