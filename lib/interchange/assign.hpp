// Writing imported tensors into a model: one check of every name and shape
// (all differences listed in one error), then the copies.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "stoke/interchange.hpp"

namespace stoke::interchange {

struct HostTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;
};

// Names of the first convolution's weight and of the last Linear layer's
// weight and bias, or of a U-Net's segmentation head ("" when the model has none).
struct ModelEnds {
  std::string stem_weight, head_weight, head_bias;
};
ModelEnds model_ends(const nn::Model& model);

// Sets each of the model's parameters and buffers from `source` (by the
// model's names). With options.load_classifier false the head keeps its
// values; a 1-channel stem takes a 3-channel source summed over channels.
// Names in `source` the model lacks are errors unless ignored_extra says so.
// InvalidArgument starting with `what`, listing every difference; nothing is
// written then.
ImportReport assign_weights(nn::Model& model, const std::map<std::string, HostTensor>& source,
                            const ImportOptions& options, const std::string& what,
                            bool ignore_extra);

// The float tensors of a safetensors file by name (num_batches_tracked left out).
std::map<std::string, HostTensor> read_safetensors(const std::string& path);

std::string dims_to_string(const std::vector<std::int64_t>& dims);

}  // namespace stoke::interchange
