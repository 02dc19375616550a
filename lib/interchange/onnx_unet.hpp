// Internal: the U-Net segmentation model (nn::Unet) as ONNX nodes, for
// OnnxGraph::layer (onnx_graph.hpp).
#pragma once

#include <string>

#include "interchange/onnx_graph.hpp"
#include "stoke/nn/layers.hpp"

namespace stoke::interchange::detail {

// The U-Net applied to x (N, C, H, W): the encoder's layers, then per decoder
// block Resize (2x nearest), Concat with the encoder's skip feature and the
// block's layers, then the head's Conv; returns the logits' name
// (N, classes, H, W). Unsupported when the encoder is not the 8-layer trunk.
STOKE_INTERNAL std::string unet(OnnxGraph& g, const nn::Unet& u, const std::string& x);

}  // namespace stoke::interchange::detail
