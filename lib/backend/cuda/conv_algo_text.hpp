// The cuDNN algorithm cache as text, so benchmarked choices can be stored
// beside a checkpoint and reused without timing again. Header line
// "stoke-conv-algos 2 cudnn=<version>", then one tab-separated line per choice:
// pass, algorithm, name, workspace bytes, math type, benchmarked, time ms,
// deterministic, key. Version 1 (no deterministic field) still parses, its
// choices not known to be deterministic.
#pragma once

#include <string>
#include <vector>

#include "stoke/cuda.hpp"

namespace stoke::cuda {

STOKE_INTERNAL std::string format_conv_algos(const std::vector<ConvAlgoChoice>& choices,
                                             int cudnn_version);

// InvalidArgument naming the line for malformed text. Choices recorded with
// another cuDNN version are not reusable (algorithm numbers and workspace
// sizes change): returns none and sets *why.
STOKE_INTERNAL std::vector<ConvAlgoChoice> parse_conv_algos(const std::string& text,
                                                            int cudnn_version, std::string* why);

// What a backend's own choice would respect (CudaBackendOptions).
struct ConvAlgoLimits {
  bool deterministic = false;
  std::size_t workspace_limit = 0;
};

// The choices of `text` a backend with `limits` may reuse: those over its
// workspace limit, and with `deterministic` those not known to be
// deterministic, are dropped (the backend then chooses again) and named in
// *why, after any reason parse_conv_algos gave.
STOKE_INTERNAL std::vector<ConvAlgoChoice> conv_algos_to_load(const std::string& text,
                                                              int cudnn_version,
                                                              const ConvAlgoLimits& limits,
                                                              std::string* why);

}  // namespace stoke::cuda
