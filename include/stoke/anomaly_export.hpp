// ONNX export of an anomaly model (stoke/anomaly.hpp): the backbone up to its
// feature layers and the method's scoring as one ONNX graph, so that an
// application scores parts in ONNX Runtime (or any ONNX runtime) with the
// model stoke trained. docs/anomaly.md ("ONNX export") describes the graph,
// its inputs and outputs and where its numbers differ from stoke's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "stoke/anomaly.hpp"
#include "stoke/export.hpp"

namespace stoke::anomaly {

struct AnomalyOnnxOptions {
  // Batch norm folded into the preceding convolution (exact at inference).
  bool fold_batch_norm = false;
  // The file's opset: 13 only (ReduceMax, ReduceMin and Pad changed their
  // inputs later); InvalidArgument for another.
  int opset = 13;
  // A tiling model (PatchCoreOptions::tile): the full image's size the graph
  // takes (stoke export --image-size WxH). The graph cuts it into the model's
  // tiles (Slice), runs them as one batch, stitches their maps (overlaps
  // averaged) and scores the image as its highest tile. Required for a tiling
  // model and refused for another (InvalidArgument naming it); a size smaller
  // than a tile is an InvalidArgument naming it.
  int image_width = 0, image_height = 0;
  // Further metadata_props (the model file's preprocessing, say), written as given.
  std::vector<std::pair<std::string, std::string>> metadata;
};

// The model as an ONNX ModelProto for batch 1: input "input" (1, C, H, W)
// float32, the preprocessed image (PatchCore::preprocess_file's values: the
// same input as the classifier export takes); outputs "score" (1) and
// "anomaly_map" (1, 1, H, W): what PatchCore::score_input returns (the
// decision against the threshold is the application's; the threshold, the
// pixel threshold and the score range are in metadata_props under
// "anomaly.*"). PatchCore and PaDiM. A tiling model's input is instead the
// whole preprocessed image at options' image size, (1, C, image_height,
// image_width) normalized as the model's preprocessing normalizes (no
// resize), and its map that size; Unsupported for a tile other than the
// model's input size (stoke resizes such tiles from the decoded pixels), for
// an input smaller than the Gaussian blur's half width, or a file over 2 GiB
// (protobuf's limit); InvalidArgument for a model fitted to nothing.
STOKE_API std::string onnx_model_bytes(const PatchCore& model,
                                       const AnomalyOnnxOptions& options = {});
// Writes onnx_model_bytes to `path` atomically; IoError naming the path.
STOKE_API void export_onnx(const PatchCore& model, const std::string& path,
                           const AnomalyOnnxOptions& options = {});

}  // namespace stoke::anomaly
