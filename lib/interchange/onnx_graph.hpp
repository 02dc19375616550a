// Internal: an ONNX graph under construction (nodes, initializers) and the
// ModelProto around it. The classifier export (onnx_export.cpp) and the
// anomaly model's export (lib/anomaly_export/) both build on it: a stoke
// layer becomes its standard ops through layer(), anything else through node().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "interchange/protobuf.hpp"
#include "stoke/nn/model.hpp"

namespace stoke::interchange::detail {

struct OnnxAttr {
  std::string name;
  int type = 2;  // onnx::attr::kTypeInt
  std::int64_t i = 0;
  float f = 0.0f;
  std::vector<std::int64_t> ints;
  std::string s;
};
STOKE_INTERNAL OnnxAttr ints_attr(std::string name, std::vector<std::int64_t> v);
STOKE_INTERNAL OnnxAttr int_attr(std::string name, std::int64_t v);
STOKE_INTERNAL OnnxAttr float_attr(std::string name, float v);
STOKE_INTERNAL OnnxAttr string_attr(std::string name, std::string v);

// A graph input or output: float32 (or int64) of these dims, a negative one dynamic ("N").
struct OnnxValue {
  std::string name;
  std::vector<std::int64_t> dims;
  bool int64 = false;  // int64 elements (a U-Net's ArgMax labels)
};

// Collects nodes and initializers in order; values are named after the layers.
class STOKE_INTERNAL OnnxGraph {
 public:
  // The model's parameters and buffers become initializers as layers use
  // them; with fold_batch_norm a BatchNorm2d right after a Conv2d is folded
  // into the convolution's weights and bias.
  OnnxGraph(const nn::Model& model, bool fold_batch_norm);

  const std::vector<float>& value(const std::string& name) const;
  // A float initializer: float32, or float16 under `fp16` (the fp16 export).
  std::string initializer(const std::string& name, const std::vector<std::int64_t>& dims,
                          const std::vector<float>& v);
  // Always float32 (an operator input ONNX types as float, as Resize's scales).
  std::string float32_initializer(const std::string& name, const std::vector<std::int64_t>& dims,
                                  const std::vector<float>& v);
  bool fp16 = false;
  std::string int64_initializer(const std::string& name, const std::vector<std::int64_t>& dims,
                                const std::vector<std::int64_t>& v);
  // An initializer of ONNX data type `data_type` whose raw_data is `bytes`.
  std::string raw_initializer(const std::string& name, const std::vector<std::int64_t>& dims,
                              int data_type, std::string_view bytes);
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::string& output, const std::vector<OnnxAttr>& attrs = {});

  // The ops of one stoke layer (or a Sequential's layers) applied to x; returns the output's name.
  std::string sequential(const nn::Sequential& seq, std::string x);
  std::string layer(const nn::Layer& l, const std::string& x);
  // seq's layers [first, end) applied to x.
  std::string layers(const nn::Sequential& seq, std::size_t first, std::size_t end, std::string x);

  // When set (the QDQ int8 export, onnx_qdq.hpp), each convolution reads its
  // input and its weight (batch norm folded, dims (K, C, R, S)) through it:
  // (conv name, x, weight dims, weight) -> the input and weight names the Conv reads.
  std::function<std::pair<std::string, std::string>(const std::string&, const std::string&,
                                                    const std::vector<std::int64_t>&,
                                                    const std::vector<float>&)>
      quantize_conv;

  // The ModelProto: this graph named `name` with its inputs and outputs,
  // opset `opset` of the default domain, metadata_props as given.
  std::string model_bytes(const std::string& name, const std::vector<OnnxValue>& inputs,
                          const std::vector<OnnxValue>& outputs, int opset,
                          const std::vector<std::pair<std::string, std::string>>& metadata) const;

 private:
  std::string residual(const std::string& name, const nn::Sequential& main,
                       const nn::Sequential* shortcut, const std::string& x);
  std::string conv(const nn::Conv2d& c, const nn::BatchNorm2d* folded, const std::string& x);

  bool fold_batch_norm_;
  // quantize_conv: a value -> its dequantized codes, which an identity
  // shortcut adds as stoke's int8 program does.
  std::map<std::string, std::string> dequantized_;
  std::map<std::string, std::vector<float>> values_;
  pb::Writer graph_, nodes_;
};

}  // namespace stoke::interchange::detail
