// ONNX export: walks the model's layers and writes one node per op (onnx_graph.hpp).
#include "core/atomic_file.hpp"
#include "core/text.hpp"
#include "interchange/onnx_graph.hpp"
#include "interchange/onnx_qdq.hpp"
#include "interchange/onnx_schema.hpp"
#include "stoke/error.hpp"
#include "stoke/interchange.hpp"

namespace stoke::interchange {

std::string onnx_model_bytes(const nn::Model& model, const OnnxExportOptions& options) {
  if (options.opset < 13 || options.opset > 21) {
    throw InvalidArgument("export_onnx: opset " + std::to_string(options.opset) +
                          " is outside 13..21");
  }
  const nn::ModelSpec& spec = model.spec();
  const bool int8 = !options.int8_input_ranges.empty();
  if (int8 && options.fp16) {
    throw InvalidArgument("export_onnx: fp16 and int8 at once (an int8 model exports as QDQ int8)");
  }
  detail::OnnxGraph g(model, options.fold_batch_norm || int8 || options.fp16);
  g.fp16 = options.fp16;
  detail::QdqConvolutions qdq(g, options.int8_input_ranges);
  // fp16: Cast's "to" is a TensorProto.DataType.
  const std::string in = options.fp16 ? g.node("Cast", {"input"}, "input.float16",
                                               {detail::int_attr("to", onnx::tensor::kFloat16)})
                                      : "input";
  std::string out = g.sequential(model.network(), in);
  qdq.check_all_used();
  if (out == in) throw Unsupported("export_onnx: the model has no layers");
  if (options.fp16) {
    out = g.node("Cast", {out}, out + ".float32", {detail::int_attr("to", onnx::tensor::kFloat)});
  }
  g.node("Identity", {out}, "logits");
  // A U-Net's outputs are per pixel: (N, classes, H, W), and its labels (N, H, W).
  std::vector<std::int64_t> dims = {-1, spec.classes};
  if (spec.is_segmentation()) dims.insert(dims.end(), {spec.height, spec.width});
  std::vector<detail::OnnxValue> outputs = {{"logits", dims}};
  if (spec.is_segmentation()) {  // arg-max over the classes, ties to the lowest as stoke's
    g.node("ArgMax", {"logits"}, "labels",
           {detail::int_attr("axis", 1), detail::int_attr("keepdims", 0)});
    outputs.push_back({"labels", {-1, spec.height, spec.width}, true});
  }
  if (options.softmax) {
    g.node("Softmax", {"logits"}, "probabilities", {detail::int_attr("axis", 1)});
    outputs.push_back({"probabilities", dims});
  }
  std::vector<std::pair<std::string, std::string>> meta = {
      {"stoke.architecture", nn::architecture_name(spec.architecture)}};
  if (!options.class_names.empty()) {
    std::string list = "[";
    for (std::size_t i = 0; i < options.class_names.size(); ++i) {
      if (i) list += ", ";
      list += stoke::detail::json_quote(options.class_names[i]);
    }
    meta.emplace_back("class_names", list + "]");
  }
  meta.insert(meta.end(), options.metadata.begin(), options.metadata.end());
  // A dynamic batch dimension (-1: "N").
  return g.model_bytes(std::string("stoke_") + nn::architecture_name(spec.architecture),
                       {{"input", {-1, spec.in_channels, spec.height, spec.width}}}, outputs,
                       options.opset, meta);
}

void export_onnx(const nn::Model& model, const std::string& path,
                 const OnnxExportOptions& options) {
  const std::string bytes = onnx_model_bytes(model, options);
  // Temporary file, fsync, rename: a kill or a full disk leaves the old file
  // (or none), never a partial .onnx under the final name; the error says why.
  stoke::detail::write_file_atomically(path, bytes);
}

}  // namespace stoke::interchange
