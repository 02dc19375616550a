// The ONNX graph builder (see onnx_graph.hpp).
#include "interchange/onnx_graph.hpp"

#include <cmath>

#include "core/float16.hpp"
#include "interchange/onnx_schema.hpp"
#include "interchange/onnx_unet.hpp"
#include "stoke/error.hpp"
#include "stoke/version.hpp"

namespace stoke::interchange::detail {

using pb::Writer;

OnnxAttr ints_attr(std::string name, std::vector<std::int64_t> v) {
  return {std::move(name), onnx::attr::kTypeInts, 0, 0.0f, std::move(v), {}};
}
OnnxAttr int_attr(std::string name, std::int64_t v) {
  return {std::move(name), onnx::attr::kTypeInt, v, 0.0f, {}, {}};
}
OnnxAttr float_attr(std::string name, float v) {
  return {std::move(name), onnx::attr::kTypeFloat, 0, v, {}, {}};
}
OnnxAttr string_attr(std::string name, std::string v) {
  return {std::move(name), onnx::attr::kTypeString, 0, 0.0f, {}, std::move(v)};
}

OnnxGraph::OnnxGraph(const nn::Model& model, bool fold_batch_norm)
    : fold_batch_norm_(fold_batch_norm) {
  for (const auto& t : model.named_parameters()) values_[t.name] = t.tensor.to_vector();
  for (const auto& t : model.named_buffers()) values_[t.name] = t.tensor.to_vector();
}

const std::vector<float>& OnnxGraph::value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end())
    throw InvalidArgument("export_onnx: the model has no tensor '" + name + "'");
  return it->second;
}

std::string OnnxGraph::initializer(const std::string& name, const std::vector<std::int64_t>& dims,
                                   const std::vector<float>& v) {
  if (!fp16) return float32_initializer(name, dims, v);
  std::vector<std::uint16_t> half(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) half[i] = stoke::detail::float_to_half(v[i]);
  return raw_initializer(
      name, dims, onnx::tensor::kFloat16,
      std::string_view(reinterpret_cast<const char*>(half.data()), half.size() * 2));
}

std::string OnnxGraph::float32_initializer(const std::string& name,
                                           const std::vector<std::int64_t>& dims,
                                           const std::vector<float>& v) {
  Writer t;
  for (std::int64_t d : dims) t.int64(onnx::tensor::kDims, d);
  t.varint(onnx::tensor::kDataType, onnx::tensor::kFloat);
  t.bytes(onnx::tensor::kName, name);
  t.bytes(onnx::tensor::kRawData,
          std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  graph_.message(onnx::graph::kInitializer, t);
  return name;
}

std::string OnnxGraph::raw_initializer(const std::string& name,
                                       const std::vector<std::int64_t>& dims, int data_type,
                                       std::string_view bytes) {
  Writer t;
  for (std::int64_t d : dims) t.int64(onnx::tensor::kDims, d);
  t.varint(onnx::tensor::kDataType, static_cast<std::uint64_t>(data_type));
  t.bytes(onnx::tensor::kName, name);
  t.bytes(onnx::tensor::kRawData, bytes);
  graph_.message(onnx::graph::kInitializer, t);
  return name;
}

std::string OnnxGraph::int64_initializer(const std::string& name,
                                         const std::vector<std::int64_t>& dims,
                                         const std::vector<std::int64_t>& v) {
  Writer t;
  for (std::int64_t d : dims) t.int64(onnx::tensor::kDims, d);
  t.varint(onnx::tensor::kDataType, onnx::tensor::kInt64);
  t.bytes(onnx::tensor::kName, name);
  // raw_data is little-endian, as this machine's int64 (the float initializers assume the same).
  t.bytes(onnx::tensor::kRawData, std::string_view(reinterpret_cast<const char*>(v.data()),
                                                   v.size() * sizeof(std::int64_t)));
  graph_.message(onnx::graph::kInitializer, t);
  return name;
}

std::string OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs,
                            const std::string& output, const std::vector<OnnxAttr>& attrs) {
  Writer n;
  for (const auto& in : inputs) n.bytes(onnx::node::kInput, in);
  n.bytes(onnx::node::kOutput, output);
  n.bytes(onnx::node::kName, output);
  n.bytes(onnx::node::kOpType, op);
  for (const OnnxAttr& a : attrs) {
    Writer w;
    w.bytes(onnx::attr::kName, a.name);
    w.varint(onnx::attr::kType, static_cast<std::uint64_t>(a.type));
    if (a.type == onnx::attr::kTypeInt) w.int64(onnx::attr::kI, a.i);
    if (a.type == onnx::attr::kTypeFloat) w.float32(onnx::attr::kF, a.f);
    if (a.type == onnx::attr::kTypeString) w.bytes(onnx::attr::kS, a.s);
    if (a.type == onnx::attr::kTypeInts) {
      for (std::int64_t x : a.ints) w.int64(onnx::attr::kInts, x);
    }
    n.message(onnx::node::kAttribute, w);
  }
  nodes_.message(onnx::graph::kNode, n);
  return output;
}

std::string OnnxGraph::conv(const nn::Conv2d& c, const nn::BatchNorm2d* bn, const std::string& x) {
  const std::int64_t o = c.out_channels(), i = c.in_channels() / c.params().groups, k = c.kernel();
  std::vector<float> w = value(c.name() + ".weight");
  std::vector<float> b = c.has_bias() ? value(c.name() + ".bias") : std::vector<float>();
  if (bn) {  // w' = w * g / sqrt(var + eps), b' = beta + (b - mean) * g / sqrt(var + eps)
    const auto& g = value(bn->scale_name());
    const auto& beta = value(bn->shift_name());
    const auto& mean = value(bn->name() + ".running_mean");
    const auto& var = value(bn->name() + ".running_var");
    b.resize(static_cast<std::size_t>(o), 0.0f);
    const std::size_t per = static_cast<std::size_t>(i * k * k);
    for (std::size_t ch = 0; ch < static_cast<std::size_t>(o); ++ch) {
      const double s = g[ch] / std::sqrt(static_cast<double>(var[ch]) + bn->params().epsilon);
      for (std::size_t j = 0; j < per; ++j)
        w[ch * per + j] = static_cast<float>(w[ch * per + j] * s);
      b[ch] = static_cast<float>(beta[ch] + (b[ch] - mean[ch]) * s);
    }
  }
  std::vector<std::string> in;
  if (quantize_conv) {
    const auto [qx, qw] = quantize_conv(c.name(), x, {o, i, k, k}, w);
    in = {qx, qw};
    dequantized_.emplace(x, qx);
  } else {
    in = {x, initializer(c.name() + ".weight", {o, i, k, k}, w)};
  }
  if (!b.empty()) in.push_back(initializer(c.name() + ".bias", {o}, b));
  const Conv2dParams& p = c.params();
  return node("Conv", in, c.name(),
              {ints_attr("kernel_shape", {k, k}), ints_attr("strides", {p.stride_h, p.stride_w}),
               ints_attr("pads", {p.pad_h, p.pad_w, p.pad_h, p.pad_w}),
               ints_attr("dilations", {p.dilation_h, p.dilation_w}), int_attr("group", p.groups)});
}

std::string OnnxGraph::sequential(const nn::Sequential& seq, std::string x) {
  return layers(seq, 0, seq.layers().size(), std::move(x));
}

std::string OnnxGraph::layers(const nn::Sequential& seq, std::size_t first, std::size_t end,
                              std::string x) {
  const auto& layers = seq.layers();
  for (std::size_t i = first; i < end; ++i) {
    const auto* c = nn::layer_as<nn::Conv2d>(*layers[i]);
    const auto* bn = i + 1 < end ? nn::layer_as<nn::BatchNorm2d>(*layers[i + 1]) : nullptr;
    if (c && bn && fold_batch_norm_) {
      x = conv(*c, bn, x);
      ++i;
    } else {
      x = layer(*layers[i], x);
    }
  }
  return x;
}

std::string OnnxGraph::residual(const std::string& name, const nn::Sequential& main,
                                const nn::Sequential* shortcut, const std::string& x) {
  const std::string m = sequential(main, x);
  // int8: an identity shortcut adds the block's first convolution's codes.
  const auto codes = dequantized_.find(x);
  const std::string s = shortcut                      ? sequential(*shortcut, x)
                        : codes != dequantized_.end() ? codes->second
                                                      : x;
  return node("Relu", {node("Add", {m, s}, name + ".add")}, name + ".out");
}

std::string OnnxGraph::layer(const nn::Layer& l, const std::string& x) {
  const std::string& name = l.name();
  return nn::visit_layer(
      l, [&](const nn::Sequential& s) { return sequential(s, x); },
      [&](const nn::Conv2d& c) { return conv(c, nullptr, x); },
      [&](const nn::BatchNorm2d& bn) {
        const std::int64_t ch = bn.channels();
        return node("BatchNormalization",
                    {x, initializer(bn.scale_name(), {ch}, value(bn.scale_name())),
                     initializer(bn.shift_name(), {ch}, value(bn.shift_name())),
                     initializer(name + ".running_mean", {ch}, value(name + ".running_mean")),
                     initializer(name + ".running_var", {ch}, value(name + ".running_var"))},
                    name, {float_attr("epsilon", bn.params().epsilon)});
      },
      [&](const nn::Relu&) { return node("Relu", {x}, name); },
      [&](const nn::Pool2d& p) {
        const Pool2dParams& q = p.params();
        std::vector<OnnxAttr> a = {ints_attr("kernel_shape", {q.kernel_h, q.kernel_w}),
                                   ints_attr("strides", {q.stride_h, q.stride_w}),
                                   ints_attr("pads", {q.pad_h, q.pad_w, q.pad_h, q.pad_w})};
        if (p.kind() == nn::PoolKind::kMax) return node("MaxPool", {x}, name, a);
        a.push_back(
            int_attr("count_include_pad", 1));  // stoke's average divides by the full window
        return node("AveragePool", {x}, name, a);
      },
      [&](const nn::GlobalAvgPool&) {
        return node("Flatten", {node("GlobalAveragePool", {x}, name)}, name + ".flat",
                    {int_attr("axis", 1)});
      },
      [&](const nn::Flatten&) { return node("Flatten", {x}, name, {int_attr("axis", 1)}); },
      [&](const nn::Dropout&) { return x; },  // identity at inference
      [&](const nn::Linear& fc) {
        return node("Gemm",
                    {x,
                     initializer(name + ".weight", {fc.out_features(), fc.in_features()},
                                 value(name + ".weight")),
                     initializer(name + ".bias", {fc.out_features()}, value(name + ".bias"))},
                    name, {int_attr("transB", 1)});
      },
      [&](const nn::Residual& r) { return residual(name, r.main(), r.shortcut(), x); },
      [&](const nn::Unet& u) { return unet(*this, u, x); },
      [&](const nn::Layer&) -> std::string {
        throw Unsupported("export_onnx: layer '" + name + "' has no ONNX form");
      });
}

namespace {

Writer value_info(const std::string& name, std::vector<std::int64_t> dims, bool int64) {
  Writer shape;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    Writer d;
    if (dims[i] < 0) {
      d.bytes(onnx::value_info::kDimParam, "N");  // dynamic batch
    } else {
      d.int64(onnx::value_info::kDimValue, dims[i]);
    }
    shape.message(onnx::value_info::kDim, d);
  }
  Writer tensor, type, info;
  tensor.varint(onnx::value_info::kElemType, int64 ? onnx::tensor::kInt64 : onnx::tensor::kFloat);
  tensor.message(onnx::value_info::kShape, shape);
  type.message(onnx::value_info::kTensorType, tensor);
  info.bytes(onnx::value_info::kName, name);
  info.message(onnx::value_info::kType, type);
  return info;
}

int ir_version(int opset) {
  return opset <= 13 ? 7 : opset <= 18 ? 8 : opset <= 20 ? 9 : 10;
}

void metadata(Writer& m, const std::string& key, const std::string& value) {
  Writer e;
  e.bytes(onnx::entry::kKey, key);
  e.bytes(onnx::entry::kValue, value);
  m.message(onnx::model::kMetadataProps, e);
}

}  // namespace

std::string OnnxGraph::model_bytes(
    const std::string& name, const std::vector<OnnxValue>& inputs,
    const std::vector<OnnxValue>& outputs, int opset,
    const std::vector<std::pair<std::string, std::string>>& metadata_props) const {
  Writer graph_name;
  graph_name.bytes(onnx::graph::kName, name);
  // Nodes first, as ONNX writers conventionally do; then name, initializers, inputs, outputs.
  std::string body = nodes_.data() + graph_name.data() + graph_.data();
  Writer io;
  for (const OnnxValue& v : inputs)
    io.message(onnx::graph::kInput, value_info(v.name, v.dims, v.int64));
  for (const OnnxValue& v : outputs)
    io.message(onnx::graph::kOutput, value_info(v.name, v.dims, v.int64));
  body += io.data();
  Writer m;
  m.int64(onnx::model::kIrVersion, ir_version(opset));
  m.bytes(onnx::model::kProducerName, "stoke");
  m.bytes(onnx::model::kProducerVersion, stoke::version());
  Writer op;
  op.bytes(onnx::opset::kDomain, "");
  op.int64(onnx::opset::kVersion, opset);
  m.message(onnx::model::kOpsetImport, op);
  m.bytes(onnx::model::kGraph, body);
  for (const auto& [k, v] : metadata_props) metadata(m, k, v);
  return m.data();
}

}  // namespace stoke::interchange::detail
