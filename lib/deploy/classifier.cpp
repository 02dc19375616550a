// nn::Classifier: a plain checkpoint's normalization, then the Predictor
// (the one inference API and plan) on HWC uint8 pixels at the input size.
#include <memory>

#include "stoke/deploy.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/nn/inference.hpp"

namespace stoke::nn {

namespace {

PixelFormat format_of(int channels) {
  if (channels == 1) return PixelFormat::kMono8;
  if (channels == 3) return PixelFormat::kRgb8;
  throw InvalidArgument("Classifier: images have 1 or 3 channels, got " + std::to_string(channels));
}

Prediction from_predictor(stoke::Prediction p) {
  return Prediction{p.label, p.confidence, std::move(p.probabilities)};
}

}  // namespace

Classifier::Classifier(const std::string& checkpoint_path, Backend* backend) {
  const CheckpointInfo info = read_checkpoint_info(checkpoint_path);
  try {
    preprocessing_ = Preprocessing::from_metadata(info.metadata);
  } catch (const InvalidArgument& e) {
    throw CorruptFile("checkpoint '" + checkpoint_path + "': " + e.what());
  }
  PredictorOptions options;
  options.backend = backend;
  predictor_ = std::make_unique<Predictor>(checkpoint_path, preprocessing_, options);
}

Classifier::~Classifier() = default;

const ModelSpec& Classifier::spec() const noexcept {
  return predictor_->spec();
}

Prediction Classifier::classify(const std::uint8_t* pixels, int height, int width, int channels) {
  return classify_batch(pixels, 1, height, width, channels).front();
}

std::vector<Prediction> Classifier::classify_batch(const std::uint8_t* pixels, int count,
                                                   int height, int width, int channels) {
  const ModelSpec& s = spec();
  if (height != s.height || width != s.width || channels != s.in_channels) {
    throw InvalidArgument(
        "Classifier: image " + std::to_string(height) + "x" + std::to_string(width) + "x" +
        std::to_string(channels) + " does not match the model input " + std::to_string(s.height) +
        "x" + std::to_string(s.width) + "x" + std::to_string(s.in_channels) + "; resize first");
  }
  if (count < 1 || !pixels) throw InvalidArgument("Classifier: need at least one image");
  const std::size_t bytes = static_cast<std::size_t>(height) * width * channels;
  std::vector<PixelBuffer> images(static_cast<std::size_t>(count));
  for (std::size_t n = 0; n < images.size(); ++n)
    images[n] = PixelBuffer{pixels + n * bytes, width, height, format_of(channels), 0};
  std::vector<Prediction> out;
  out.reserve(images.size());
  for (auto& p : predictor_->session().predict_pixels(images)) out.push_back(from_predictor(p));
  return out;
}

}  // namespace stoke::nn
