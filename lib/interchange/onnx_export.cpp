// ONNX export: walks the model's layers and writes one node per op.
#include <cmath>
#include <fstream>
#include <map>

#include "core/atomic_file.hpp"
#include "core/text.hpp"
#include "interchange/onnx_schema.hpp"
#include "interchange/protobuf.hpp"
#include "stoke/error.hpp"
#include "stoke/interchange.hpp"
#include "stoke/version.hpp"

namespace stoke::interchange {

namespace {

using pb::Writer;

struct Attr {
  std::string name;
  int type = onnx::attr::kTypeInt;
  std::int64_t i = 0;
  float f = 0.0f;
  std::vector<std::int64_t> ints;
};

Attr ints_attr(std::string name, std::vector<std::int64_t> v) {
  return {std::move(name), onnx::attr::kTypeInts, 0, 0.0f, std::move(v)};
}
Attr int_attr(std::string name, std::int64_t v) {
  return {std::move(name), onnx::attr::kTypeInt, v, 0.0f, {}};
}
Attr float_attr(std::string name, float v) {
  return {std::move(name), onnx::attr::kTypeFloat, 0, v, {}};
}

// Collects nodes and initializers in order; values are named after the layers.
class GraphBuilder {
 public:
  GraphBuilder(const nn::Model& model, const OnnxExportOptions& options) : options_(options) {
    for (const auto& t : model.named_parameters()) values_[t.name] = t.tensor.to_vector();
    for (const auto& t : model.named_buffers()) values_[t.name] = t.tensor.to_vector();
  }

  const std::vector<float>& value(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end())
      throw InvalidArgument("export_onnx: the model has no tensor '" + name + "'");
    return it->second;
  }

  std::string initializer(const std::string& name, const std::vector<std::int64_t>& dims,
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

  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::string& output, const std::vector<Attr>& attrs = {}) {
    Writer n;
    for (const auto& in : inputs) n.bytes(onnx::node::kInput, in);
    n.bytes(onnx::node::kOutput, output);
    n.bytes(onnx::node::kName, output);
    n.bytes(onnx::node::kOpType, op);
    for (const Attr& a : attrs) {
      Writer w;
      w.bytes(onnx::attr::kName, a.name);
      w.varint(onnx::attr::kType, static_cast<std::uint64_t>(a.type));
      if (a.type == onnx::attr::kTypeInt) w.int64(onnx::attr::kI, a.i);
      if (a.type == onnx::attr::kTypeFloat) w.float32(onnx::attr::kF, a.f);
      if (a.type == onnx::attr::kTypeInts) {
        for (std::int64_t x : a.ints) w.int64(onnx::attr::kInts, x);
      }
      n.message(onnx::node::kAttribute, w);
    }
    nodes_.message(onnx::graph::kNode, n);
    return output;
  }

  std::string sequential(const nn::Sequential& seq, std::string x);
  std::string layer(const nn::Layer& l, const std::string& x);
  std::string residual(const std::string& name, const nn::Sequential& main,
                       const nn::Sequential* shortcut, const std::string& x);
  std::string conv(const nn::Conv2d& c, const nn::BatchNorm2d* folded, const std::string& x);

  Writer& graph() { return graph_; }
  const Writer& nodes() const { return nodes_; }

 private:
  const OnnxExportOptions& options_;
  std::map<std::string, std::vector<float>> values_;
  Writer graph_, nodes_;
};

std::string GraphBuilder::conv(const nn::Conv2d& c, const nn::BatchNorm2d* bn,
                               const std::string& x) {
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
  std::vector<std::string> in = {x, initializer(c.name() + ".weight", {o, i, k, k}, w)};
  if (!b.empty()) in.push_back(initializer(c.name() + ".bias", {o}, b));
  const Conv2dParams& p = c.params();
  return node("Conv", in, c.name(),
              {ints_attr("kernel_shape", {k, k}), ints_attr("strides", {p.stride_h, p.stride_w}),
               ints_attr("pads", {p.pad_h, p.pad_w, p.pad_h, p.pad_w}),
               ints_attr("dilations", {p.dilation_h, p.dilation_w}), int_attr("group", p.groups)});
}

std::string GraphBuilder::sequential(const nn::Sequential& seq, std::string x) {
  const auto& layers = seq.layers();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto* c = nn::layer_as<nn::Conv2d>(*layers[i]);
    const auto* bn =
        i + 1 < layers.size() ? nn::layer_as<nn::BatchNorm2d>(*layers[i + 1]) : nullptr;
    if (c && bn && options_.fold_batch_norm) {
      x = conv(*c, bn, x);
      ++i;
    } else {
      x = layer(*layers[i], x);
    }
  }
  return x;
}

std::string GraphBuilder::residual(const std::string& name, const nn::Sequential& main,
                                   const nn::Sequential* shortcut, const std::string& x) {
  const std::string m = sequential(main, x);
  const std::string s = shortcut ? sequential(*shortcut, x) : x;
  return node("Relu", {node("Add", {m, s}, name + ".add")}, name + ".out");
}

std::string GraphBuilder::layer(const nn::Layer& l, const std::string& x) {
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
        std::vector<Attr> a = {ints_attr("kernel_shape", {q.kernel_h, q.kernel_w}),
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
      [&](const nn::Layer&) -> std::string {
        throw Unsupported("export_onnx: layer '" + name + "' has no ONNX form");
      });
}

Writer value_info(const std::string& name, std::vector<std::int64_t> dims) {
  Writer shape;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    Writer d;
    if (i == 0) {
      d.bytes(onnx::value_info::kDimParam, "N");  // dynamic batch
    } else {
      d.int64(onnx::value_info::kDimValue, dims[i]);
    }
    shape.message(onnx::value_info::kDim, d);
  }
  Writer tensor, type, info;
  tensor.varint(onnx::value_info::kElemType, onnx::tensor::kFloat);
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

std::string onnx_model_bytes(const nn::Model& model, const OnnxExportOptions& options) {
  if (options.opset < 13 || options.opset > 21) {
    throw InvalidArgument("export_onnx: opset " + std::to_string(options.opset) +
                          " is outside 13..21");
  }
  const nn::ModelSpec& spec = model.spec();
  GraphBuilder g(model, options);
  std::string out = g.sequential(model.network(), "input");
  if (out == "input") throw Unsupported("export_onnx: the model has no layers");
  g.node("Identity", {out}, "logits");
  if (options.softmax) g.node("Softmax", {"logits"}, "probabilities", {int_attr("axis", 1)});
  Writer name;
  name.bytes(onnx::graph::kName, std::string("stoke_") + nn::architecture_name(spec.architecture));
  // Nodes first, as ONNX writers conventionally do; then name, initializers, inputs, outputs.
  std::string body = g.nodes().data() + name.data() + g.graph().data();
  Writer io;
  io.message(onnx::graph::kInput,
             value_info("input", {0, spec.in_channels, spec.height, spec.width}));
  io.message(onnx::graph::kOutput, value_info("logits", {0, spec.classes}));
  if (options.softmax)
    io.message(onnx::graph::kOutput, value_info("probabilities", {0, spec.classes}));
  body += io.data();

  Writer m;
  m.int64(onnx::model::kIrVersion, ir_version(options.opset));
  m.bytes(onnx::model::kProducerName, "stoke");
  m.bytes(onnx::model::kProducerVersion, stoke::version());
  Writer op;
  op.bytes(onnx::opset::kDomain, "");
  op.int64(onnx::opset::kVersion, options.opset);
  m.message(onnx::model::kOpsetImport, op);
  m.bytes(onnx::model::kGraph, body);
  metadata(m, "stoke.architecture", nn::architecture_name(spec.architecture));
  if (!options.class_names.empty()) {
    std::string list = "[";
    for (std::size_t i = 0; i < options.class_names.size(); ++i) {
      if (i) list += ", ";
      list += detail::json_quote(options.class_names[i]);
    }
    metadata(m, "class_names", list + "]");
  }
  for (const auto& [k, v] : options.metadata) metadata(m, k, v);
  return m.data();
}

void export_onnx(const nn::Model& model, const std::string& path,
                 const OnnxExportOptions& options) {
  const std::string bytes = onnx_model_bytes(model, options);
  // Temporary file, fsync, rename: a kill or a full disk leaves the old file
  // (or none), never a partial .onnx under the final name; the error says why.
  detail::write_file_atomically(path, bytes);
}

}  // namespace stoke::interchange
