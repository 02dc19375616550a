// ONNX import: walks stoke's layers and the ONNX graph side by side from the
// input, so weights are found by where they sit in the graph, not by name.
#include <algorithm>
#include <cmath>

#include "interchange/onnx_read.hpp"
#include "stoke/error.hpp"

namespace stoke::interchange {

namespace {

class Matcher {
 public:
  Matcher(const OnnxGraph& g, const nn::Model& model, const ImportOptions& options,
          std::string path)
      : g_(g), ends_(model_ends(model)), options_(options), path_(std::move(path)) {}

  std::string sequential(const nn::Sequential& seq, std::string v,
                         const OnnxNode* forced = nullptr);
  std::map<std::string, HostTensor>& out() { return out_; }

 private:
  [[noreturn]] void fail(const nn::Layer& l, const std::string& why) const {
    throw InvalidArgument("import_onnx '" + path_ + "': stoke layer '" + l.name() + "': " + why);
  }
  const HostTensor& tensor(const OnnxNode& n, std::size_t input, const nn::Layer& l) const {
    if (input >= n.inputs.size()) fail(l, n.label() + " has no input " + std::to_string(input));
    auto it = g_.tensors.find(n.inputs[input]);
    if (it == g_.tensors.end())
      fail(l, n.label() + ": input '" + n.inputs[input] + "' is not a constant weight");
    return it->second;
  }
  std::vector<const OnnxNode*> consumers(const std::string& v, const std::string& op) const {
    std::vector<const OnnxNode*> out;
    auto it = g_.consumers.find(v);
    if (it == g_.consumers.end()) return out;
    for (std::size_t i : it->second) {
      if (g_.nodes[i].op == op) out.push_back(&g_.nodes[i]);
    }
    return out;
  }
  // The one consumer of v with one of `ops`; an error naming the layer otherwise.
  const OnnxNode& next(const nn::Layer& l, const std::string& v,
                       std::initializer_list<const char*> ops) const {
    std::vector<const OnnxNode*> found;
    for (const char* op : ops) {
      for (const OnnxNode* n : consumers(v, op)) found.push_back(n);
    }
    if (found.size() == 1 && !found[0]->outputs.empty()) return *found[0];
    std::string want;
    for (const char* op : ops) {
      if (!want.empty()) want += " or ";
      want += op;
    }
    fail(l, "expected one " + want + " node after value '" + v + "', found " +
                std::to_string(found.size()));
  }
  // Follows nodes that change nothing at inference (and, after a global
  // average pool, the reshapes to (N, C)).
  std::string skip(std::string v, bool reshapes) const {
    for (;;) {
      auto it = g_.consumers.find(v);
      if (it == g_.consumers.end() || it->second.size() != 1) return v;
      const OnnxNode& n = g_.nodes[it->second[0]];
      const bool pass = n.op == "Identity" || n.op == "Dropout" ||
                        (reshapes && (n.op == "Flatten" || n.op == "Reshape" || n.op == "Squeeze"));
      if (!pass || n.outputs.empty()) return v;
      v = n.outputs[0];
    }
  }
  void put(const std::string& name, HostTensor t) { out_[name] = std::move(t); }
  void check_shape(const nn::Layer& l, const OnnxNode& n, const HostTensor& t, const Shape& want,
                   bool lenient) const;

  std::string layer(const nn::Layer& l, const std::string& v, const OnnxNode* forced);
  std::string conv(const nn::Conv2d& c, const nn::BatchNorm2d* bn, const std::string& v,
                   const OnnxNode* forced, bool& bn_used);
  std::string batch_norm(const nn::BatchNorm2d& bn, const std::string& v,
                         const std::vector<float>* conv_bias);
  std::string linear(const nn::Linear& fc, const std::string& v);
  std::string residual(const nn::Layer& l, const nn::Sequential& main,
                       const nn::Sequential* shortcut, const std::string& v);
  void pool(const nn::Pool2d& p, const OnnxNode& n);

  const OnnxGraph& g_;
  ModelEnds ends_;
  const ImportOptions& options_;
  std::string path_;
  std::map<std::string, HostTensor> out_;
};

void Matcher::check_shape(const nn::Layer& l, const OnnxNode& n, const HostTensor& t,
                          const Shape& want, bool lenient) const {
  const Shape got(t.shape.begin(), t.shape.end());
  if (got == want || lenient) return;
  fail(l,
       "weight " + shape_to_string(want) + ", but " + n.label() + " has " + shape_to_string(got));
}

std::string Matcher::sequential(const nn::Sequential& seq, std::string v, const OnnxNode* forced) {
  const auto& layers = seq.layers();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const OnnxNode* f = i == 0 ? forced : nullptr;
    if (const auto* c = nn::layer_as<nn::Conv2d>(*layers[i])) {
      const auto* bn =
          i + 1 < layers.size() ? nn::layer_as<nn::BatchNorm2d>(*layers[i + 1]) : nullptr;
      bool bn_used = false;
      v = conv(*c, bn, v, f, bn_used);
      if (bn_used) ++i;
    } else {
      v = layer(*layers[i], v, f);
    }
  }
  return v;
}

std::string Matcher::conv(const nn::Conv2d& c, const nn::BatchNorm2d* bn, const std::string& v0,
                          const OnnxNode* forced, bool& bn_used) {
  const std::string v = skip(v0, false);
  const OnnxNode& n = forced ? *forced : next(c, v, {"Conv"});
  const std::int64_t k = c.kernel();
  const Shape want = {c.out_channels(), c.in_channels() / c.params().groups, k, k};
  HostTensor w = tensor(n, 1, c);
  const bool stem = c.name() + ".weight" == ends_.stem_weight;
  check_shape(c, n, w, want, stem && w.shape.size() == 4 && w.shape[1] == 3 && want[1] == 1);
  const Conv2dParams& p = c.params();
  const std::vector<std::int64_t> strides = n.attr_ints("strides", {1, 1}),
                                  pads = n.attr_ints("pads", {0, 0, 0, 0});
  if (strides != std::vector<std::int64_t>{p.stride_h, p.stride_w} ||
      pads != std::vector<std::int64_t>{p.pad_h, p.pad_w, p.pad_h, p.pad_w} ||
      n.attr_i("group", 1) != p.groups) {
    fail(c, "stride, padding or groups differ from " + n.label());
  }
  put(c.name() + ".weight", std::move(w));
  std::vector<float> bias;
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) bias = tensor(n, 2, c).data;
  if (!bias.empty() && bias.size() != static_cast<std::size_t>(c.out_channels()))
    fail(c, n.label() + ": bias size differs");
  const std::string o = n.outputs[0];
  if (c.has_bias()) {
    bias.resize(static_cast<std::size_t>(c.out_channels()), 0.0f);
    put(c.name() + ".bias", {{c.out_channels()}, bias});
    return o;
  }
  if (!bn) {
    if (!bias.empty()) fail(c, n.label() + " has a bias the stoke convolution lacks");
    return o;
  }
  bn_used = true;
  if (!consumers(skip(o, false), "BatchNormalization").empty())
    return batch_norm(*bn, o, bias.empty() ? nullptr : &bias);
  // Folded: the batch norm becomes the identity plus the convolution's bias.
  const auto ch = static_cast<std::size_t>(bn->channels());
  bias.resize(ch, 0.0f);
  put(bn->scale_name(), {{bn->channels()}, std::vector<float>(ch, 1.0f)});
  put(bn->shift_name(), {{bn->channels()}, bias});
  put(bn->name() + ".running_mean", {{bn->channels()}, std::vector<float>(ch, 0.0f)});
  put(bn->name() + ".running_var",
      {{bn->channels()}, std::vector<float>(ch, 1.0f - bn->params().epsilon)});
  return o;
}

std::string Matcher::batch_norm(const nn::BatchNorm2d& bn, const std::string& v,
                                const std::vector<float>* conv_bias) {
  const OnnxNode& n = next(bn, skip(v, false), {"BatchNormalization"});
  const Shape want = {bn.channels()};
  const char* parts[] = {"scale", "shift", "running_mean", "running_var"};
  const std::string names[] = {bn.scale_name(), bn.shift_name(), bn.name() + ".running_mean",
                               bn.name() + ".running_var"};
  HostTensor t[4];
  for (int i = 0; i < 4; ++i) {
    t[i] = tensor(n, static_cast<std::size_t>(i) + 1, bn);
    if (Shape(t[i].shape.begin(), t[i].shape.end()) != want)
      fail(bn, std::string(parts[i]) + " shape differs from " + n.label());
  }
  // A convolution bias before the norm shifts the mean; a different epsilon shifts the variance.
  const float eps = n.attrs.count("epsilon") ? n.attrs.at("epsilon").f : 1e-5f;
  for (std::size_t c = 0; c < t[3].data.size(); ++c) {
    if (conv_bias) t[2].data[c] -= (*conv_bias)[c];
    t[3].data[c] += eps - bn.params().epsilon;
  }
  for (int i = 0; i < 4; ++i) put(names[i], std::move(t[i]));
  return n.outputs[0];
}

std::string Matcher::linear(const nn::Linear& fc, const std::string& v) {
  const OnnxNode& n = next(fc, skip(v, true), {"Gemm", "MatMul"});
  HostTensor w = tensor(n, 1, fc);
  const bool transposed =
      n.op == "Gemm" && n.attr_i("transB", 0) == 1;  // (out, in) as stoke keeps it
  if (n.op == "Gemm" &&
      (n.attr_i("transA", 0) != 0 || (n.attrs.count("alpha") && n.attrs.at("alpha").f != 1.0f))) {
    fail(fc, n.label() + " transposes its input or scales it (alpha != 1)");
  }
  if (w.shape.size() != 2) fail(fc, n.label() + ": weight is not 2-D");
  if (!transposed) {  // (in, out) -> (out, in)
    HostTensor t{{w.shape[1], w.shape[0]}, std::vector<float>(w.data.size())};
    for (std::int64_t i = 0; i < w.shape[0]; ++i) {
      for (std::int64_t j = 0; j < w.shape[1]; ++j)
        t.data[static_cast<std::size_t>(j * w.shape[0] + i)] =
            w.data[static_cast<std::size_t>(i * w.shape[1] + j)];
    }
    w = std::move(t);
  }
  const bool head = fc.name() + ".weight" == ends_.head_weight && !options_.load_classifier;
  check_shape(fc, n, w, {fc.out_features(), fc.in_features()}, head);
  std::string o = n.outputs[0];
  HostTensor b;
  if (n.op == "Gemm" && n.inputs.size() > 2) {
    b = tensor(n, 2, fc);
  } else if (n.op == "MatMul") {
    const OnnxNode& add = next(fc, o, {"Add"});
    b = tensor(add, add.inputs[0] == o ? 1 : 0, fc);
    o = add.outputs[0];
  }
  b.shape = {static_cast<std::int64_t>(b.data.size())};
  if (!head && b.data.size() != static_cast<std::size_t>(fc.out_features()))
    fail(fc, n.label() + ": bias size differs");
  put(fc.name() + ".weight", std::move(w));
  put(fc.name() + ".bias", std::move(b));
  return o;
}

std::string Matcher::residual(const nn::Layer& l, const nn::Sequential& main,
                              const nn::Sequential* shortcut, const std::string& v0) {
  const std::string v = skip(v0, false);
  std::vector<const OnnxNode*> convs = consumers(v, "Conv");
  std::string m, s = v;
  if (!shortcut) {
    m = sequential(main, v);
  } else {
    if (convs.size() != 2)
      fail(l, "expected two Conv nodes after '" + v + "' (block and projection shortcut), found " +
                  std::to_string(convs.size()));
    // The branch whose weights fit the block's first convolution is the main path.
    const auto saved = out_;
    std::size_t first = 0;
    try {
      m = sequential(main, v, convs[0]);
    } catch (const InvalidArgument&) {
      out_ = saved;
      first = 1;
      m = sequential(main, v, convs[1]);
    }
    s = sequential(*shortcut, v, convs[1 - first]);
  }
  m = skip(m, false);
  s = skip(s, false);
  for (const OnnxNode* add : consumers(m, "Add")) {
    if (add->inputs.size() == 2 && ((add->inputs[0] == m && add->inputs[1] == s) ||
                                    (add->inputs[0] == s && add->inputs[1] == m))) {
      return next(l, add->outputs[0], {"Relu"}).outputs[0];
    }
  }
  fail(l, "no Add node joins the block's output '" + m + "' and its shortcut '" + s + "'");
}

void Matcher::pool(const nn::Pool2d& p, const OnnxNode& n) {
  const Pool2dParams& q = p.params();
  if (n.attr_ints("kernel_shape", {}) != std::vector<std::int64_t>{q.kernel_h, q.kernel_w} ||
      n.attr_ints("strides", {1, 1}) != std::vector<std::int64_t>{q.stride_h, q.stride_w} ||
      n.attr_ints("pads", {0, 0, 0, 0}) !=
          std::vector<std::int64_t>{q.pad_h, q.pad_w, q.pad_h, q.pad_w} ||
      n.attr_i("ceil_mode", 0) != 0) {
    fail(p, "window, stride or padding differ from " + n.label());
  }
}

std::string Matcher::layer(const nn::Layer& l, const std::string& v0, const OnnxNode* forced) {
  const std::string v = skip(v0, false);
  if (const auto* s = nn::layer_as<nn::Sequential>(l)) return sequential(*s, v, forced);
  if (forced) fail(l, "the graph branches here, stoke's layer does not");
  return nn::visit_layer(
      l, [&](const nn::BatchNorm2d& bn) { return batch_norm(bn, v, nullptr); },
      [&](const nn::Relu&) { return next(l, v, {"Relu"}).outputs[0]; },
      [&](const nn::Pool2d& p) {
        const OnnxNode& n =
            next(l, v, {p.kind() == nn::PoolKind::kMax ? "MaxPool" : "AveragePool"});
        pool(p, n);
        return n.outputs[0];
      },
      [&](const nn::GlobalAvgPool&) {
        return skip(next(l, v, {"GlobalAveragePool", "ReduceMean"}).outputs[0], true);
      },
      [&](const nn::Flatten&) { return skip(v, true); },
      [&](const nn::Dropout&) { return skip(v, true); },
      [&](const nn::Linear& fc) { return linear(fc, v); },
      [&](const nn::Residual& r) { return residual(l, r.main(), r.shortcut(), v); },
      [&](const nn::Conv2d& c) {
        bool unused = false;
        return conv(c, nullptr, v, nullptr, unused);
      },
      [&](const nn::Layer&) -> std::string {
        fail(l, "this layer has no ONNX counterpart to import from");
      });
}

}  // namespace

ImportReport import_onnx(nn::Model& model, const std::string& path, const ImportOptions& options) {
  const OnnxGraph g = read_onnx(path);
  Matcher m(g, model, options, path);
  m.sequential(model.network(), g.input);
  return assign_weights(model, m.out(), options, "import_onnx '" + path + "'", false);
}

std::map<std::string, std::string> onnx_metadata(const std::string& path) {
  return read_onnx(path).metadata;
}

}  // namespace stoke::interchange
