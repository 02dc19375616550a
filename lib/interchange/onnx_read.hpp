// Reading an ONNX ModelProto into the few things import needs: nodes,
// initializers (and Constant nodes' values), the graph input.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "interchange/assign.hpp"

namespace stoke::interchange {

struct OnnxAttr {
  std::int64_t i = 0;
  float f = 0.0f;
  std::vector<std::int64_t> ints;
  HostTensor t;
};

struct OnnxNode {
  std::string op, name;
  std::vector<std::string> inputs, outputs;
  std::map<std::string, OnnxAttr> attrs;
  std::string label() const {
    return op + " node '" + (name.empty() && !outputs.empty() ? outputs[0] : name) + "'";
  }
  std::int64_t attr_i(const std::string& key, std::int64_t fallback) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? fallback : it->second.i;
  }
  std::vector<std::int64_t> attr_ints(const std::string& key,
                                      std::vector<std::int64_t> fallback) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? fallback : it->second.ints;
  }
};

struct OnnxGraph {
  std::vector<OnnxNode> nodes;
  std::map<std::string, HostTensor> tensors;  // initializers and Constant outputs
  std::string input;                          // the one graph input that is not an initializer
  std::map<std::string, std::vector<std::size_t>> consumers;  // value -> node indices
  std::map<std::string, std::string> metadata;                // the model's metadata_props
};

// CorruptFile naming `path` for a malformed file; Unsupported for external data.
OnnxGraph read_onnx(const std::string& path);

}  // namespace stoke::interchange
