// The cuDNN algorithm cache as text, so benchmarked choices can be stored
// beside a checkpoint and reused without timing again. Header line
// "stoke-conv-algos 1 cudnn=<version>", then one tab-separated line per choice:
// pass, algorithm, name, workspace bytes, math type, benchmarked, time ms, key.
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

}  // namespace stoke::cuda
