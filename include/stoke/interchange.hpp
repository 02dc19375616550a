// Interchange: ONNX export of any stoke model for inference, and import of
// pretrained weights from safetensors files (torchvision state_dict names)
// and from ONNX files (matched by graph topology, batch norm folded or not).
// Files are written and read with stoke's own protobuf wire code: no
// protobuf library is linked (docs/interchange.md says why).
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "stoke/export.hpp"
#include "stoke/nn/model.hpp"

namespace stoke::interchange {

struct OnnxExportOptions {
  // Batch norm folded into the preceding convolution's weights and bias
  // (exact at inference); otherwise BatchNormalization nodes.
  bool fold_batch_norm = false;
  // An output "probabilities" = Softmax(logits) over the classes (a U-Net: after "labels").
  bool softmax = false;
  int opset = 13;  // 13 or later
  // Written to metadata_props as "class_names" (a JSON list of strings), when given.
  std::vector<std::string> class_names;
  // Further metadata_props (for example the model file's preprocessing), written as given.
  std::vector<std::pair<std::string, std::string>> metadata;
  // Non-empty: the QDQ int8 form of stoke's int8 inference (stoke quantize
  // --precision int8; ModelInfo::int8_input_ranges, one calibrated (min, max)
  // per convolution input in the program's order): each convolution's input
  // goes through QuantizeLinear/DequantizeLinear with stoke's scale (uint8
  // for a range without negatives, else int8; zero point 0) and its weight,
  // batch norm folded (always, then), is an int8 initializer with stoke's
  // per-output-channel scales behind a DequantizeLinear (axis 0); the rest as
  // the fp32 export (lib/interchange/onnx_qdq.cpp, docs/precision.md).
  std::vector<std::pair<float, float>> int8_input_ranges;
  // The fp16 form (for TensorRT's --fp16 and other half-precision engines):
  // every weight a float16 initializer (rounded to nearest even, batch norm
  // folded first: always, then) and the graph computing in float16 between a
  // Cast of "input" to float16 and a Cast of the logits back to float32, so
  // its inputs and outputs stay float32 as in the fp32 export. Not with
  // int8_input_ranges (InvalidArgument).
  bool fp16 = false;
};

// The model as an ONNX ModelProto: input "input" (N, C, H, W) float32 with a
// dynamic batch dimension N, output "logits" (N, classes). Every layer of the
// built-in architectures maps to a standard op (Conv, BatchNormalization,
// Relu, MaxPool, AveragePool, GlobalAveragePool, Flatten, Add, Gemm; Dropout
// is left out: inference). A segmentation model (a U-Net) adds Resize (2x
// nearest) and Concat; its "logits" are (N, classes, H, W), followed by
// "labels" (N, H, W) int64, their ArgMax over the classes. Unsupported naming
// a layer without an ONNX form.
STOKE_API std::string onnx_model_bytes(const nn::Model& model,
                                       const OnnxExportOptions& options = {});
// Writes onnx_model_bytes to `path`; IoError naming the path.
STOKE_API void export_onnx(const nn::Model& model, const std::string& path,
                           const OnnxExportOptions& options = {});

struct ImportOptions {
  // False: the last Linear layer (the classifier head), or a U-Net's
  // segmentation head, keeps the model's own initialization, for fine-tuning
  // on a different set of classes.
  bool load_classifier = true;
  // A model with a 1-channel input takes a 3-channel stem by summing the
  // stem's weights over the input channels (gray = R = G = B gives the same response).
  bool sum_rgb_stem = true;
};

// What an import set: names of the model's tensors loaded from the file and
// of those left as they were (the head when load_classifier is false).
struct ImportReport {
  std::vector<std::string> loaded;
  std::vector<std::string> kept;
  bool stem_summed = false;
};

// Loads parameters and batch-norm statistics by name from a safetensors file
// (what safetensors.torch.save_file(model.state_dict(), path) writes; F32,
// F16, BF16 and F64 tensors; num_batches_tracked entries ignored).
// CorruptFile for a malformed file; InvalidArgument listing every missing,
// unexpected or differently shaped tensor. The model is unchanged on error.
STOKE_API ImportReport load_safetensors(nn::Model& model, const std::string& path,
                                        const ImportOptions& options = {});
// A U-Net's (nn::ModelSpec with decoder_channels) encoder from a torchvision
// backbone's safetensors file of the same architecture and width
// (torchvision's names, e.g. conv1.weight, layer1.0.bn1.running_mean; names
// already starting with "encoder." are taken as they are; fc.* is left
// out). The decoder and segmentation head keep their values (listed in
// `kept`). InvalidArgument as load_safetensors for a missing, unexpected or
// differently shaped encoder tensor, or when the model is not a U-Net.
STOKE_API ImportReport load_encoder_safetensors(nn::Model& model, const std::string& path,
                                                const ImportOptions& options = {});
// Writes the model's parameters and buffers as F32 tensors under their names
// (a torchvision backbone's file loads into torchvision's model).
STOKE_API void save_safetensors(const nn::Model& model, const std::string& path);

// Loads weights from an ONNX file whose graph has the model's topology (for
// example torchvision's export of the same backbone). Initializers are found
// by walking the graph from its input, not by name; convolutions whose
// following batch norm was folded in take the folded weights and bias
// (the batch norm becomes the identity with that bias as its shift).
// InvalidArgument naming the stoke layer and the ONNX node where the graphs
// differ; CorruptFile for a malformed file. The model is unchanged on error.
STOKE_API ImportReport import_onnx(nn::Model& model, const std::string& path,
                                   const ImportOptions& options = {});

// An ONNX file's metadata_props (stoke export writes "class_names" and the
// model file's "model.preprocess.*" there). CorruptFile / IoError as import_onnx.
STOKE_API std::map<std::string, std::string> onnx_metadata(const std::string& path);

}  // namespace stoke::interchange
