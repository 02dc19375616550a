// The U-Net's ONNX form (see onnx_unet.hpp), node for node the forward of
// lib/nn/unet.cpp: batch norm follows OnnxGraph's choice (folded into the
// convolutions or BatchNormalization nodes).
#include "interchange/onnx_unet.hpp"

#include <array>
#include <vector>

#include "stoke/error.hpp"

namespace stoke::interchange::detail {

namespace {

// The encoder's layers (conv1, bn1, relu, maxpool, layer1..4) that end each of
// its 5 stages (strides 2, 4, 8, 16, 32), as lib/nn/unet.cpp splits them.
constexpr std::array<std::size_t, 5> kStageEnd = {3, 5, 6, 7, 8};

}  // namespace

std::string unet(OnnxGraph& g, const nn::Unet& u, const std::string& x) {
  const nn::Sequential& encoder = u.encoder();
  const auto& blocks = u.decoder_blocks();
  if (encoder.layers().size() != kStageEnd.back() || blocks.size() != kStageEnd.size()) {
    throw Unsupported("export_onnx: U-Net '" + u.name() +
                      "' is not a torchvision ResNet encoder with 5 decoder blocks");
  }
  std::vector<std::string> features;
  std::string t = x;
  std::size_t first = 0;
  for (std::size_t end : kStageEnd) {
    t = g.layers(encoder, first, end, t);
    features.push_back(t);
    first = end;
  }
  // stoke's 2x nearest upsampling reads source floor(dst / 2): PyTorch's
  // F.interpolate(scale_factor=2, mode="nearest"), ONNX's asymmetric + floor.
  const std::string scales =
      g.float32_initializer(u.name() + ".upsample_scales", {4}, {1, 1, 2, 2});
  const std::vector<OnnxAttr> nearest = {
      string_attr("mode", "nearest"), string_attr("coordinate_transformation_mode", "asymmetric"),
      string_attr("nearest_mode", "floor")};
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::string& block = blocks[i]->name();
    t = g.node("Resize", {t, "", scales}, block + ".upsample", nearest);  // no roi
    if (i + 1 < blocks.size()) {  // the deepest feature is the input; the others are skips
      t = g.node("Concat", {t, features[3 - i]}, block + ".concat", {int_attr("axis", 1)});
    }
    t = g.sequential(*blocks[i], t);
  }
  return g.layer(u.head(), t);
}

}  // namespace stoke::interchange::detail
