// The torchvision ResNet backbones (internal: build_model dispatches here).
#pragma once

#include <cstdint>
#include <memory>

#include "stoke/nn/model.hpp"

namespace stoke::nn {

// The network of a kResNet18/34/50 or kWideResNet50_2 spec, with torchvision's layer names:
// conv1, bn1, relu, maxpool, layer1..layer4 (blocks layerS.B with conv1, bn1,
// conv2, bn2[, conv3, bn3] and downsample.0/.1), avgpool, [dropout], fc.
// InvalidArgument for a bad channel count, class count, multiplier or input size.
STOKE_INTERNAL std::unique_ptr<Sequential> build_torchvision_resnet(Backend& backend,
                                                                    const ModelSpec& spec,
                                                                    std::uint64_t seed);

// Channels of the stem and of each stage's blocks before expansion: round(64 x m) x {1, 2, 4, 8}.
int torchvision_base_width(const ModelSpec& spec) noexcept;

}  // namespace stoke::nn
