// stoke export --model MODEL --onnx OUT [--fold-bn] [--softmax] [--opset N]
// Writes a model file (or any stoke checkpoint) as ONNX for inference, with
// the model file's class names and preprocessing in metadata_props; an int8
// model file (stoke quantize --precision int8) as QDQ int8; an anomaly model
// file (stoke train --task anomaly) as its scoring graph
// (stoke/anomaly_export.hpp: outputs score and anomaly_map, batch 1); a
// segmentation model file as its U-Net (outputs logits and labels per pixel).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "stoke/anomaly_export.hpp"
#include "stoke/deploy.hpp"
#include "stoke/interchange.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/stoke.hpp"

namespace {

constexpr const char* kUsage =
    "usage: stoke export --model MODEL --onnx OUT [--fold-bn] [--softmax] [--opset N]\n"
    "                    [--fp16] [--image-size WxH]\n"
    "  --fold-bn   fold batch norm into the convolutions (exact at inference)\n"
    "  --fp16      float16 weights and computation (for TensorRT --fp16), batch norm\n"
    "              folded; input and outputs stay float32 (a Cast at each end)\n"
    "  --softmax   add a 'probabilities' output\n"
    "  --opset N   ONNX opset, 13..21 (default 13; an anomaly model: 13)\n"
    "An int8 model file (stoke quantize --precision int8) exports as QDQ int8:\n"
    "QuantizeLinear/DequantizeLinear with its calibrated scales on each convolution's\n"
    "input, int8 weights with per-channel scales (docs/precision.md).\n"
    "An anomaly model file exports as one graph of batch 1: input (1, C, H, W)\n"
    "preprocessed, outputs score (1) and anomaly_map (1, 1, H, W); no --softmax.\n"
    "A tiling one (--tile) needs --image-size WxH: the graph takes the whole image\n"
    "(1, C, H, W) normalized at that size, cuts it into the model's tiles (which must\n"
    "be its input size), stitches their maps and scores the highest tile.\n"
    "A segmentation model file exports its U-Net: outputs logits (N, classes, H, W),\n"
    "labels (N, H, W) int64 (their arg-max) and with --softmax probabilities.\n";

bool anomaly = false;  // the --model is an anomaly model file (cmd_export decides)

int export_anomaly(const stoke_cli::Args& args, const std::string& model_path,
                   const std::string& out) {
  if (args.has("softmax"))
    throw stoke_cli::UsageError("--softmax: an anomaly model has no class probabilities");
  if (args.has("fp16")) throw stoke_cli::UsageError("--fp16: an anomaly model exports in fp32");
  auto core = stoke::anomaly::PatchCore::load(model_path, stoke::cpu_backend());
  stoke::anomaly::AnomalyOnnxOptions o;
  o.fold_batch_norm = args.has("fold-bn");
  o.opset = args.get_int("opset", 13);
  if (args.has("image-size")) {
    const std::string size = args.get("image-size");
    char tail = 0;
    if (std::sscanf(size.c_str(), "%dx%d%c", &o.image_width, &o.image_height, &tail) != 2 ||
        o.image_width <= 0 || o.image_height <= 0)
      throw stoke_cli::UsageError("--image-size '" + size + "' is not WxH");
  }
  for (const auto& [key, value] : stoke::nn::read_checkpoint_info(model_path).metadata) {
    if (key.rfind("model.preprocess.", 0) == 0) o.metadata.emplace_back(key, value);
  }
  o.metadata.emplace_back("stoke.source", model_path);
  stoke::anomaly::export_onnx(core, out, o);
  const stoke::PreprocessOptions& p = core.preprocess();
  const bool tiled = o.image_width > 0;
  std::printf(
      "wrote %s (anomaly %s on %s, input 1x%dx%dx%d%s, outputs score and anomaly_map, "
      "opset %d%s)\n",
      out.c_str(), stoke::anomaly::method_name(core.options().method),
      stoke::nn::architecture_name(core.backbone_spec().architecture), p.channels,
      tiled ? o.image_height : p.height, tiled ? o.image_width : p.width,
      tiled ? (", tiles of " + std::to_string(core.options().tile)).c_str() : "", o.opset,
      o.fold_batch_norm ? ", batch norm folded" : "");
  return 0;
}

int run(int argc, char** argv) {
  const stoke_cli::Args args(argc, argv, {"model", "onnx", "opset", "image-size"},
                             {"fold-bn", "softmax", "fp16"});
  const std::string model_path = args.required("model"), out = args.required("onnx");
  std::error_code ec;
  if (std::filesystem::equivalent(out, model_path, ec)) {
    throw stoke_cli::UsageError("--onnx " + out + " is the input --model " + model_path +
                                "; refusing to overwrite it");
  }
  stoke_cli::check_writable("--onnx", out);
  if (anomaly) return export_anomaly(args, model_path, out);
  if (args.has("image-size"))
    throw stoke_cli::UsageError("--image-size is for a tiling anomaly model");
  stoke::nn::CheckpointInfo info;
  auto model = stoke::nn::load_model(model_path, stoke::cpu_backend(), &info);
  stoke::interchange::OnnxExportOptions o;
  o.fold_batch_norm = args.has("fold-bn");
  o.softmax = args.has("softmax");
  o.fp16 = args.has("fp16");
  o.opset = args.get_int("opset", 13);
  // The model file's preprocessing goes along under its own keys; class names
  // as a JSON list. A plain checkpoint has neither: the export says so.
  for (const auto& [key, value] : info.metadata) {
    if (key.rfind("model.preprocess.", 0) == 0) o.metadata.emplace_back(key, value);
  }
  try {
    const stoke::ModelInfo model_info = stoke::read_model_info(model_path);
    o.class_names = model_info.class_names;
    // An int8 file (stoke quantize --precision int8) exports as QDQ int8.
    if (model_info.precision == stoke::Precision::kInt8)
      o.int8_input_ranges = model_info.int8_input_ranges;
  } catch (const stoke::CorruptFile&) {
    std::fprintf(stderr, "stoke export: %s is not a model file; exporting without class names\n",
                 model_path.c_str());
  }
  o.metadata.emplace_back("stoke.source", model_path);
  const bool int8 = !o.int8_input_ranges.empty();
  if (int8 && o.fp16) {
    throw stoke_cli::UsageError("--fp16: " + model_path +
                                " is an int8 model file (it exports as QDQ int8); export the fp32 "
                                "file it was quantized from");
  }
  if (int8) o.metadata.emplace_back("stoke.precision", "int8");
  if (o.fp16) o.metadata.emplace_back("stoke.precision", "fp16");
  stoke::interchange::export_onnx(*model, out, o);
  std::printf("wrote %s (%s%s, %d classes, input %dx%dx%d, dynamic batch, opset %d%s%s%s)\n",
              out.c_str(), model->spec().is_segmentation() ? "U-Net on " : "",
              stoke::nn::architecture_name(model->spec().architecture), model->spec().classes,
              model->spec().in_channels, model->spec().height, model->spec().width, o.opset,
              o.fold_batch_norm || int8 || o.fp16 ? ", batch norm folded" : "",
              o.softmax ? ", softmax output" : "",
              int8     ? ", int8 QDQ: stoke's calibrated scales"
              : o.fp16 ? ", float16"
                       : "");
  return 0;
}

}  // namespace

int cmd_export(int argc, char** argv) {
  anomaly = stoke_cli::is_anomaly_model(argc, argv);
  return stoke_cli::run_guarded("export", kUsage, run, argc, argv);
}
