// ONNX ModelProto reader on the wire-format reader.
#include "interchange/onnx_read.hpp"

#include <cstring>
#include <fstream>
#include <iterator>

#include "interchange/onnx_schema.hpp"
#include "interchange/protobuf.hpp"
#include "stoke/error.hpp"

namespace stoke::interchange {

namespace {

using pb::Field;
using pb::Reader;

HostTensor read_tensor(std::string_view bytes, const std::string& what, std::string* name) {
  Reader r(bytes, what);
  Field f;
  HostTensor t;
  int type = onnx::tensor::kFloat;
  std::string_view raw;
  std::vector<std::int64_t> ints;
  std::vector<double> doubles;
  while (r.next(f)) {
    switch (f.field) {
      case onnx::tensor::kDims:
        pb::append_int64s(f, t.shape, what);
        break;
      case onnx::tensor::kDataType:
        type = static_cast<int>(f.number);
        break;
      case onnx::tensor::kFloatData:
        pb::append_floats(f, t.data, what);
        break;
      case onnx::tensor::kInt64Data:
        pb::append_int64s(f, ints, what);
        break;
      case onnx::tensor::kDoubleData:
        if (f.wire == pb::Wire::kFixed64) {
          double d;
          std::memcpy(&d, &f.number, 8);
          doubles.push_back(d);
        } else {
          for (std::size_t i = 0; i + 8 <= f.bytes.size(); i += 8) {
            double d;
            std::memcpy(&d, f.bytes.data() + i, 8);
            doubles.push_back(d);
          }
        }
        break;
      case onnx::tensor::kName:
        if (name) *name = std::string(f.bytes);
        break;
      case onnx::tensor::kRawData:
        raw = f.bytes;
        break;
      case onnx::tensor::kDataLocation:
        if (f.number == 1)
          throw Unsupported(what +
                            ": tensor data in an external file is not supported; save the model "
                            "with its weights inside");
        break;
      default:
        break;
    }
  }
  std::int64_t n = 1;
  for (std::int64_t d : t.shape) n *= d;
  if (!raw.empty()) {
    const std::size_t size = type == onnx::tensor::kFloat                                    ? 4
                             : type == onnx::tensor::kInt64 || type == onnx::tensor::kDouble ? 8
                                                                                             : 0;
    if (size == 0) return t;  // a type import never needs as weights
    if (raw.size() != static_cast<std::size_t>(n) * size)
      throw CorruptFile(what + ": raw_data does not match the dims");
    t.data.resize(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < t.data.size(); ++i) {
      if (type == onnx::tensor::kFloat) {
        std::memcpy(&t.data[i], raw.data() + 4 * i, 4);
      } else if (type == onnx::tensor::kInt64) {
        std::int64_t v;
        std::memcpy(&v, raw.data() + 8 * i, 8);
        t.data[i] = static_cast<float>(v);
      } else {
        double v;
        std::memcpy(&v, raw.data() + 8 * i, 8);
        t.data[i] = static_cast<float>(v);
      }
    }
  }
  for (std::int64_t v : ints) t.data.push_back(static_cast<float>(v));
  for (double v : doubles) t.data.push_back(static_cast<float>(v));
  if (t.data.size() != static_cast<std::size_t>(n) &&
      (type == onnx::tensor::kFloat || type == onnx::tensor::kDouble)) {
    throw CorruptFile(what + ": " + std::to_string(t.data.size()) + " values for dims " +
                      dims_to_string(t.shape));
  }
  return t;
}

OnnxNode read_node(std::string_view bytes, const std::string& what) {
  Reader r(bytes, what);
  Field f;
  OnnxNode n;
  while (r.next(f)) {
    if (f.field == onnx::node::kInput) n.inputs.emplace_back(f.bytes);
    if (f.field == onnx::node::kOutput) n.outputs.emplace_back(f.bytes);
    if (f.field == onnx::node::kName) n.name = std::string(f.bytes);
    if (f.field == onnx::node::kOpType) n.op = std::string(f.bytes);
    if (f.field != onnx::node::kAttribute) continue;
    Reader a(f.bytes, what + " attribute");
    Field g;
    std::string key;
    OnnxAttr value;
    while (a.next(g)) {
      if (g.field == onnx::attr::kName) key = std::string(g.bytes);
      if (g.field == onnx::attr::kI) value.i = static_cast<std::int64_t>(g.number);
      if (g.field == onnx::attr::kF) value.f = g.as_float();
      if (g.field == onnx::attr::kInts) pb::append_int64s(g, value.ints, what);
      if (g.field == onnx::attr::kT)
        value.t = read_tensor(g.bytes, what + " attribute tensor", nullptr);
    }
    n.attrs[key] = std::move(value);
  }
  return n;
}

}  // namespace

OnnxGraph read_onnx(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw IoError("import_onnx: cannot open '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  Reader m(bytes, path);
  Field f;
  std::string_view graph;
  OnnxGraph g;
  while (m.next(f)) {
    if (f.field == onnx::model::kGraph && f.wire == pb::Wire::kBytes) graph = f.bytes;
    if (f.field == onnx::model::kMetadataProps && f.wire == pb::Wire::kBytes) {
      Reader e(f.bytes, path + " metadata_props");
      Field h;
      std::string key, value;
      while (e.next(h)) {
        if (h.field == onnx::entry::kKey) key = std::string(h.bytes);
        if (h.field == onnx::entry::kValue) value = std::string(h.bytes);
      }
      g.metadata[key] = std::move(value);
    }
  }
  if (graph.empty()) throw CorruptFile(path + ": no graph (not an ONNX model file)");
  std::vector<std::string> inputs;
  Reader r(graph, path + " graph");
  while (r.next(f)) {
    if (f.field == onnx::graph::kNode)
      g.nodes.push_back(read_node(f.bytes, path + " node " + std::to_string(g.nodes.size())));
    if (f.field == onnx::graph::kInitializer) {
      std::string name;
      HostTensor t = read_tensor(f.bytes, path + " initializer", &name);
      g.tensors[name] = std::move(t);
    }
    if (f.field == onnx::graph::kInput) {
      Reader v(f.bytes, path + " input");
      Field h;
      while (v.next(h)) {
        if (h.field == onnx::value_info::kName) inputs.emplace_back(h.bytes);
      }
    }
  }
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const OnnxNode& n = g.nodes[i];
    if (n.op == "Constant" && n.attrs.count("value") && !n.outputs.empty())
      g.tensors[n.outputs[0]] = n.attrs.at("value").t;
    // torch.onnx.export names a deduplicated initializer through an Identity
    // node: its output is the same constant (nodes are in topological order).
    if (n.op == "Identity" && n.inputs.size() == 1 && n.outputs.size() == 1) {
      const auto it = g.tensors.find(n.inputs[0]);
      if (it != g.tensors.end()) g.tensors[n.outputs[0]] = it->second;
    }
    for (const auto& in : n.inputs) g.consumers[in].push_back(i);
  }
  for (const auto& in : inputs) {
    if (!g.tensors.count(in)) {
      if (!g.input.empty())
        throw Unsupported(path + ": the graph has more than one input ('" + g.input + "', '" + in +
                          "')");
      g.input = in;
    }
  }
  if (g.input.empty()) throw CorruptFile(path + ": the graph has no input");
  return g;
}

}  // namespace stoke::interchange
