// PatchCore's patch embeddings through the inference plan (see features.hpp).
#include "anomaly/features.hpp"

#include <cstring>

#include "anomaly/resample.hpp"
#include "stoke/error.hpp"

namespace stoke::anomaly_detail {

namespace {

std::size_t layer_index(const nn::Sequential& net, const std::string& name) {
  const auto& layers = net.layers();
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (layers[i]->name() == name) return i;
  throw InvalidArgument("anomaly: the backbone has no top-level layer '" + name +
                        "' (a torchvision ResNet is needed: resnet18, resnet34, resnet50, "
                        "wide_resnet50_2)");
}

// torch.nn.AvgPool2d(3, 1, 1): the padding counts in the divisor.
Tensor pool3x3(Backend& be, const Tensor& x) {
  const Pool2dParams p{3, 3, 1, 1, 1, 1};
  Tensor y(be, pool2d_output_shape(x.shape(), p, "anomaly feature pooling"));
  be.avg_pool2d_forward(x, y, p);
  return y;
}

}  // namespace

FeatureExtractor::FeatureExtractor(nn::Model& model, Precision precision,
                                   anomaly::AnomalyMethod method)
    : model_(&model), method_(method) {
  if (!nn::is_torchvision_resnet(model.spec().architecture)) {
    throw InvalidArgument(std::string("anomaly: backbone '") +
                          nn::architecture_name(model.spec().architecture) +
                          "' is not a torchvision ResNet (resnet18, resnet34, resnet50, "
                          "wide_resnet50_2)");
  }
  nn::Sequential& net = model.network();
  const std::size_t l2 = layer_index(net, "layer2"), l3 = layer_index(net, "layer3");
  const auto layout = nn::FusedInference::Layout::kAuto;
  const auto stage = [&](std::size_t first, std::size_t end) {
    stages_.push_back(std::make_unique<nn::FusedInference>(net, first, end, layout, precision));
  };
  if (method == anomaly::AnomalyMethod::kPadim) {
    const std::size_t l1 = layer_index(net, "layer1");
    stage(0, l1 + 1);
    stage(l1 + 1, l2 + 1);
  } else {
    stage(0, l2 + 1);
  }
  stage(l3, l3 + 1);
}

FeatureExtractor::~FeatureExtractor() = default;

anomaly::Embeddings FeatureExtractor::embed(std::span<const float> inputs, std::int64_t count,
                                            std::span<const std::int64_t> channels) {
  Backend& be = model_->backend();
  const Shape in_shape = model_->input_shape(count);
  if (count < 1 || inputs.size() != static_cast<std::size_t>(shape_numel(in_shape))) {
    throw InvalidArgument("anomaly: " + std::to_string(inputs.size()) + " input floats for " +
                          std::to_string(count) + " images of " +
                          shape_to_string(model_->input_shape(1)));
  }
  Tensor x(be, in_shape);
  x.copy_from_host(inputs.data());
  if (method_ == anomaly::AnomalyMethod::kPadim) return embed_padim(x, count, channels);
  const Tensor& f2 = stages_[0]->forward(x);
  const std::vector<float> p2 = pool3x3(be, f2).to_vector();
  const Tensor& f3 = stages_[1]->forward(f2);
  const Tensor pooled3 = pool3x3(be, f3);
  const std::int64_t c2 = f2.dim(1), h = f2.dim(2), w = f2.dim(3);
  const std::int64_t c3 = pooled3.dim(1);
  const std::vector<float> p3 =
      resize_bilinear(pooled3.to_vector(), count * c3, pooled3.dim(2), pooled3.dim(3), h, w);
  anomaly::Embeddings e{count, h, w, c2 + c3, {}};
  e.rows.resize(static_cast<std::size_t>(count * h * w * e.width));
  for (std::int64_t n = 0; n < count; ++n) {
    for (std::int64_t pos = 0; pos < h * w; ++pos) {
      float* row = e.rows.data() + ((n * h * w) + pos) * e.width;
      for (std::int64_t c = 0; c < c2; ++c)
        row[c] = p2[static_cast<std::size_t>((n * c2 + c) * h * w + pos)];
      for (std::int64_t c = 0; c < c3; ++c)
        row[c2 + c] = p3[static_cast<std::size_t>((n * c3 + c) * h * w + pos)];
    }
  }
  return e;
}

anomaly::Embeddings FeatureExtractor::embed_padim(const Tensor& x, std::int64_t count,
                                                  std::span<const std::int64_t> channels) {
  const Tensor& f1 = stages_[0]->forward(x);
  const Tensor& f2 = stages_[1]->forward(f1);
  const Tensor& f3 = stages_[2]->forward(f2);
  const std::int64_t h = f1.dim(2), w = f1.dim(3), positions = h * w;
  const std::int64_t full = f1.dim(1) + f2.dim(1) + f3.dim(1);
  std::vector<std::int64_t> all;
  if (channels.empty()) {
    all.resize(static_cast<std::size_t>(full));
    for (std::int64_t c = 0; c < full; ++c) all[static_cast<std::size_t>(c)] = c;
    channels = all;
  }
  const auto kept = static_cast<std::int64_t>(channels.size());
  anomaly::Embeddings e{count, h, w, kept, {}};
  e.rows.resize(static_cast<std::size_t>(count * positions * kept));
  std::int64_t offset = 0;  // the channels before this layer's
  std::size_t i = 0;        // the next kept channel
  for (const Tensor* f : {&f1, &f2, &f3}) {
    const std::int64_t c = f->dim(1), plane = f->dim(2) * f->dim(3);
    // F.interpolate(mode="nearest") to layer1's grid: each row's source pixel.
    const std::vector<std::int64_t> from = nearest_sources(f->dim(2), f->dim(3), h, w);
    const std::vector<float> v = f->to_vector();
    for (; i < channels.size() && channels[i] < offset + c; ++i) {
      if (channels[i] < offset || (i > 0 && channels[i] <= channels[i - 1])) {
        throw InvalidArgument("anomaly: PaDiM channel " + std::to_string(channels[i]) +
                              " is not ascending within the embedding's " + std::to_string(full));
      }
      for (std::int64_t n = 0; n < count; ++n) {
        const float* src = v.data() + (n * c + channels[i] - offset) * plane;
        float* out = e.rows.data() + n * positions * kept + static_cast<std::int64_t>(i);
        for (std::int64_t pos = 0; pos < positions; ++pos)
          out[pos * kept] = src[from[static_cast<std::size_t>(pos)]];
      }
    }
    offset += c;
  }
  if (i < channels.size()) {
    throw InvalidArgument("anomaly: PaDiM channel " + std::to_string(channels[i]) +
                          " is past the embedding's " + std::to_string(full));
  }
  return e;
}

}  // namespace stoke::anomaly_detail
