#include "backend/cuda/conv_algo_text.hpp"

#include <iomanip>
#include <sstream>

#include "stoke/error.hpp"

namespace stoke::cuda {
namespace {
constexpr const char* kMagic = "stoke-conv-algos";
}  // namespace

std::string format_conv_algos(const std::vector<ConvAlgoChoice>& choices, int cudnn_version) {
  std::ostringstream out;
  out << kMagic << " 2 cudnn=" << cudnn_version << "\n"
      << std::setprecision(9);  // floats round-trip
  for (const ConvAlgoChoice& c : choices) {
    out << c.pass << '\t' << c.algorithm << '\t' << c.algorithm_name << '\t' << c.workspace_bytes
        << '\t' << c.math_type << '\t' << (c.benchmarked ? 1 : 0) << '\t' << c.time_ms << '\t'
        << (c.deterministic ? 1 : 0) << '\t' << c.key << '\n';
  }
  return out.str();
}

std::vector<ConvAlgoChoice> parse_conv_algos(const std::string& text, int cudnn_version,
                                             std::string* why) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line)) throw InvalidArgument("conv algorithm cache: empty text");
  std::istringstream header(line);
  std::string magic, version, cudnn;
  header >> magic >> version >> cudnn;
  if (magic != kMagic || (version != "1" && version != "2") || cudnn.rfind("cudnn=", 0) != 0) {
    throw InvalidArgument("conv algorithm cache: line 1 is '" + line + "', expected '" + kMagic +
                          " 2 cudnn=<version>'");
  }
  const std::size_t fields_per_line = version == "1" ? 8 : 9;
  if (cudnn != "cudnn=" + std::to_string(cudnn_version)) {
    if (why)
      *why = "recorded with " + cudnn + ", this process has cuDNN " + std::to_string(cudnn_version);
    return {};
  }
  std::vector<ConvAlgoChoice> out;
  for (int number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string item; std::getline(fields, item, '\t');) f.push_back(item);
    const auto fail = [&](const std::string& what) {
      throw InvalidArgument("conv algorithm cache: line " + std::to_string(number) + ": " + what);
    };
    if (f.size() != fields_per_line) {
      fail("expected " + std::to_string(fields_per_line) + " tab-separated fields, got " +
           std::to_string(f.size()));
    }
    if (f[0] != "forward" && f[0] != "backward_data" && f[0] != "backward_filter")
      fail("unknown pass '" + f[0] + "'");
    ConvAlgoChoice c;
    try {
      c.pass = f[0];
      c.algorithm = std::stoi(f[1]);
      c.algorithm_name = f[2];
      c.workspace_bytes = static_cast<std::size_t>(std::stoull(f[3]));
      c.math_type = std::stoi(f[4]);
      c.benchmarked = f[5] == "1";
      c.time_ms = std::stof(f[6]);
    } catch (const std::exception&) {
      fail("a number does not parse");
    }
    // Version 1 did not record it: not known to be deterministic.
    c.deterministic = fields_per_line == 9 && f[7] == "1";
    c.key = f.back();
    c.tensor_ops =
        c.key.find(" tf32") != std::string::npos && c.math_type != 3;  // 3: CUDNN_FMA_MATH
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<ConvAlgoChoice> conv_algos_to_load(const std::string& text, int cudnn_version,
                                               const ConvAlgoLimits& limits, std::string* why) {
  std::string reason;
  std::vector<ConvAlgoChoice> kept;
  for (ConvAlgoChoice& c : parse_conv_algos(text, cudnn_version, &reason)) {
    std::string drop;
    if (c.workspace_bytes > limits.workspace_limit) {
      drop = "workspace " + std::to_string(c.workspace_bytes) + " bytes over the workspace limit " +
             std::to_string(limits.workspace_limit);
    } else if (limits.deterministic && !c.deterministic) {
      drop = c.algorithm_name + " not deterministic";
    }
    if (drop.empty()) {
      kept.push_back(std::move(c));
      continue;
    }
    reason += (reason.empty() ? "" : "; ") + c.pass + " " + c.key + " not loaded: " + drop;
  }
  if (why) *why = reason;
  return kept;
}

}  // namespace stoke::cuda
