// stoke-info: what this machine has, which device stoke would use, and the
// effective configuration with the source of every value.
//
//   stoke-info          tables
//   stoke-info --json   one JSON object
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "stoke/distributed.hpp"
#include "stoke/stoke.hpp"

namespace {

std::string stoke_json(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The precision inference runs in (STOKE_PRECISION resolved for the default
// backend), and whether the backend has bf16: native, emulated or none.
std::string short_ratio(double r) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", r);
  return text;
}

struct PrecisionInfo {
  std::string effective;  // "fp32", "bf16", or "unavailable: <why>"
  const char* bf16 = "none";
  double bf16_time_ratio = 0;  // native bf16's time over fp32's; 0 = not measured
};

PrecisionInfo precision_info(const stoke::Settings& settings) {
  stoke::Backend& backend = stoke::default_backend();
  PrecisionInfo p;
  const auto bf16 = backend.inference_precision(stoke::Precision::kBf16);
  p.bf16 = bf16 == stoke::PrecisionSupport::kNative     ? "native"
           : bf16 == stoke::PrecisionSupport::kEmulated ? "emulated"
                                                        : "none";
  try {
    if (bf16 == stoke::PrecisionSupport::kNative)
      p.bf16_time_ratio = stoke::measured_time_ratio(backend, stoke::Precision::kBf16);
    p.effective = stoke::to_string(stoke::resolve_precision(backend, settings.precision));
  } catch (const stoke::Error& e) {
    p.effective = std::string("unavailable: ") + e.what();
  }
  return p;
}

}  // namespace

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
    const PrecisionInfo precision = precision_info(config.settings());
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
                << "\"},\"precision\":" << stoke_json(precision.effective) << ",\"bf16\":\""
                << precision.bf16 << "\",\"bf16_time_ratio\":"
                << (precision.bf16_time_ratio > 0 ? short_ratio(precision.bf16_time_ratio)
                                                  : std::string("null"))
                << ",\"matrix_route\":" << stoke_json(stoke::cpu_matrix_route())
                << ",\"distributed\":" << (stoke::distributed_available() ? "true" : "false")
                << ",\"config\":" << config.to_json() << "}\n";
      return 0;
    }
    std::cout << "stoke " << stoke::version() << "\n\n"
              << stoke::format_system(system) << "\n"
              << stoke::describe(runtime) << "\n"
              << "precision: " << precision.effective
              << " (bf16 on this backend: " << precision.bf16
              << (precision.bf16_time_ratio > 0
                      ? ", " + short_ratio(precision.bf16_time_ratio) + "x fp32's time"
                      : std::string())
              << ")\n"
              << "cpu matrix products: " << stoke::cpu_matrix_route() << "\n"
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
