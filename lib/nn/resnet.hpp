// The torchvision ResNet backbones (internal: build_model dispatches here).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "stoke/nn/model.hpp"

namespace stoke::nn {

// The network of a kResNet18/34/50 or kWideResNet50_2 spec, with torchvision's layer names:
// conv1, bn1, relu, maxpool, layer1..layer4 (blocks layerS.B with conv1, bn1,
// conv2, bn2[, conv3, bn3] and downsample.0/.1), avgpool, [dropout], fc.
// InvalidArgument for a bad channel count, class count, multiplier or input size.
STOKE_INTERNAL std::unique_ptr<Sequential> build_torchvision_resnet(Backend& backend,
                                                                    const ModelSpec& spec,
                                                                    std::uint64_t seed);

// Adds the backbone without its head to `net`: prefix + conv1, bn1, relu,
// maxpool, then layer1..layer4 (one Sequential each), as
// build_torchvision_resnet names them. Returns layer4's output channels.
// The spec's counts are not checked here.
int add_torchvision_trunk(Sequential& net, Backend& be, const ModelSpec& spec,
                          const std::string& prefix);

// The network of a spec with decoder_channels: one Unet layer (stoke/nn/layers.hpp)
// on the spec's torchvision encoder (lib/nn/unet.cpp). InvalidArgument naming
// what is wrong: not a torchvision architecture, classes < 2, sides not multiples of 32.
STOKE_INTERNAL std::unique_ptr<Sequential> build_unet(Backend& backend, const ModelSpec& spec);

// Channels of the stem and of each stage's blocks before expansion: round(64 x m) x {1, 2, 4, 8}.
int torchvision_base_width(const ModelSpec& spec) noexcept;

}  // namespace stoke::nn
