// stoke_predictor_*, stoke_predict_*: the C ABI over stoke::Predictor.
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "c_api/boundary.hpp"
#include "stoke/deploy.hpp"

// The opaque handle of stoke.h: a Predictor on a classifier's model file, an
// anomaly model's or a segmentation model's (whose calls take turns inside the
// Predictor).
struct stoke_predictor {
  stoke_predictor(const char* path, const stoke::PredictorOptions& options)
      : predictor(path, options) {}
  bool anomaly() const { return predictor.kind() == stoke::ModelKind::kAnomaly; }
  // An anomaly model's: "good", "anomalous" (labels 0 and 1).
  const std::vector<std::string>& class_names() const { return predictor.info().class_names; }
  stoke::Predictor predictor;
};

namespace stoke::c_api {
namespace {

const stoke_predictor& checked(const stoke_predictor* handle) {
  require(handle, "predictor");
  return *handle;
}

// Validates the output arguments before anything runs.
void check_outputs(const stoke_predictor& predictor, const stoke_prediction* out,
                   const float* probabilities, std::size_t capacity) {
  require(out, "out (stoke_prediction*)");
  const std::size_t classes = predictor.class_names().size();
  if (!probabilities && capacity != 0)
    throw InvalidArgument("probabilities is NULL but capacity is " + std::to_string(capacity));
  if (probabilities && capacity < classes) {
    throw Failure{STOKE_ERROR_BUFFER_TOO_SMALL, "probabilities holds " + std::to_string(capacity) +
                                                    " floats; the model has " +
                                                    std::to_string(classes) + " classes"};
  }
}

stoke_status write(const Prediction& p, float anomaly_score, stoke_prediction* out,
                   float* probabilities) {
  *out = stoke_prediction{};
  out->label = p.label;
  out->confidence = p.confidence;
  out->class_count = static_cast<std::uint32_t>(p.probabilities.size());
  out->anomaly_score = anomaly_score;
  if (probabilities) std::copy(p.probabilities.begin(), p.probabilities.end(), probabilities);
  return STOKE_OK;
}

// An anomaly model's result as a prediction: label 0 (good) or 1
// (anomalous), its score, and no probability (NaN for confidence and both classes).
stoke_status write_anomaly(const AnomalyResult& r, stoke_prediction* out, float* probabilities) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Prediction p;
  p.label = r.anomalous ? 1 : 0;
  p.confidence = nan;
  p.probabilities.assign(2, nan);
  return write(p, r.score, out, probabilities);
}

// One prediction through the handle: the classifier's, or the anomaly model's.
template <class Classify, class Score>
stoke_status run(stoke_predictor& h, stoke_prediction* out, float* probabilities,
                 Classify&& classify, Score&& score) {
  if (h.anomaly()) return write_anomaly(score(h.predictor), out, probabilities);
  return write(classify(h.predictor), std::numeric_limits<float>::quiet_NaN(), out, probabilities);
}

// An anomaly model's score and map: the prediction into `out`, the map's size
// always, its values when `map` holds them.
template <class Score>
stoke_status run_map(stoke_predictor& h, stoke_prediction* out, float* map,
                     std::size_t map_capacity, std::int32_t* map_width, std::int32_t* map_height,
                     Score&& score) {
  require(out, "out (stoke_prediction*)");
  require(map_width, "map_width");
  require(map_height, "map_height");
  if (!map && map_capacity != 0)
    throw InvalidArgument("map is NULL but map_capacity is " + std::to_string(map_capacity));
  if (!h.anomaly())
    throw InvalidArgument("the model is a classifier: anomaly maps come from anomaly models");
  const AnomalyResult r = score(h.predictor);
  *map_width = r.width;
  *map_height = r.height;
  if (map_capacity < r.map.size()) {
    throw Failure{STOKE_ERROR_BUFFER_TOO_SMALL,
                  "map holds " + std::to_string(map_capacity) + " floats; the map has " +
                      std::to_string(r.map.size()) + " (" + std::to_string(r.width) + " x " +
                      std::to_string(r.height) + ")"};
  }
  std::copy(r.map.begin(), r.map.end(), map);
  return write_anomaly(r, out, nullptr);
}

// A segmentation model's label map: its size always, the labels and the areas
// when asked for (the areas' buffer checked before anything runs).
template <class Segment>
stoke_status run_segment(stoke_predictor& h, std::uint8_t* labels, std::size_t capacity,
                         std::int32_t* width, std::int32_t* height, std::int64_t* areas,
                         std::size_t areas_capacity, Segment&& segment) {
  require(width, "width");
  require(height, "height");
  if (!labels && capacity != 0)
    throw InvalidArgument("labels is NULL but capacity is " + std::to_string(capacity));
  if (!areas && areas_capacity != 0)
    throw InvalidArgument("areas is NULL but areas_capacity is " + std::to_string(areas_capacity));
  if (h.predictor.kind() != ModelKind::kSegmentation)
    throw InvalidArgument(std::string("the model is ") +
                          (h.anomaly() ? "an anomaly model" : "a classifier") +
                          ": label maps come from segmentation models");
  const std::size_t classes = h.class_names().size();
  if (areas && areas_capacity < classes) {
    throw Failure{STOKE_ERROR_BUFFER_TOO_SMALL, "areas holds " + std::to_string(areas_capacity) +
                                                    " values; the model has " +
                                                    std::to_string(classes) + " classes"};
  }
  const SegmentationResult r = segment(h.predictor);
  *width = r.width;
  *height = r.height;
  if (labels && capacity < r.labels.size()) {
    throw Failure{STOKE_ERROR_BUFFER_TOO_SMALL,
                  "labels holds " + std::to_string(capacity) + " bytes; the map has " +
                      std::to_string(r.labels.size()) + " (" + std::to_string(r.width) + " x " +
                      std::to_string(r.height) + ")"};
  }
  if (labels) std::copy(r.labels.begin(), r.labels.end(), labels);
  if (areas) std::copy(r.areas.begin(), r.areas.end(), areas);
  return STOKE_OK;
}

PixelFormat pixel_format(std::int32_t format) {
  switch (format) {
    case STOKE_PIXEL_MONO8:
      return PixelFormat::kMono8;
    case STOKE_PIXEL_MONO16:
      return PixelFormat::kMono16;
    case STOKE_PIXEL_RGB8:
      return PixelFormat::kRgb8;
    case STOKE_PIXEL_BGR8:
      return PixelFormat::kBgr8;
  }
  throw InvalidArgument("pixel format " + std::to_string(format) +
                        " is not one of STOKE_PIXEL_MONO8 (0), MONO16 (1), RGB8 (2), BGR8 (3)");
}

// A host's camera buffer (the format checked).
PixelBuffer pixel_buffer(const void* pixels, std::int32_t width, std::int32_t height,
                         std::int32_t format, std::size_t stride) {
  PixelBuffer buffer;
  buffer.data = pixels;
  buffer.width = width;
  buffer.height = height;
  buffer.format = pixel_format(format);
  buffer.stride = stride;
  return buffer;
}

}  // namespace
}  // namespace stoke::c_api

using namespace stoke::c_api;  // NOLINT: the exported functions below are its front

extern "C" {

stoke_status stoke_predictor_open(const char* model_path, uint32_t flags, stoke_predictor** out) {
  return guarded("stoke_predictor_open", [&] {
    require(out, "out (stoke_predictor**)");
    *out = nullptr;
    require(model_path, "model_path");
    if (flags & ~STOKE_PREDICTOR_NO_SELF_CHECK)
      throw stoke::InvalidArgument("unknown flags " + std::to_string(flags));
    stoke::PredictorOptions options;
    // stoke::init()'s settings, as `stoke predict` takes them (STOKE_PRECISION,
    // STOKE_MAX_IMAGE_PIXELS).
    options.context = runtime().context;
    options.require_self_check = !(flags & STOKE_PREDICTOR_NO_SELF_CHECK);
    *out = new stoke_predictor(model_path, options);
    return STOKE_OK;
  });
}

void stoke_predictor_close(stoke_predictor* predictor) {
  delete predictor;  // ~Predictor does not throw
}

stoke_status stoke_predictor_class_count(const stoke_predictor* predictor, uint32_t* count) {
  return guarded("stoke_predictor_class_count", [&] {
    const auto& p = checked(predictor);
    require(count, "count");
    *count = static_cast<uint32_t>(p.class_names().size());
    return STOKE_OK;
  });
}

stoke_status stoke_predictor_class_name(const stoke_predictor* predictor, uint32_t index,
                                        char* buffer, size_t capacity, size_t* needed) {
  return guarded("stoke_predictor_class_name", [&] {
    const auto& names = checked(predictor).class_names();
    if (index >= names.size()) {
      throw stoke::InvalidArgument("class index " + std::to_string(index) + " out of range (" +
                                   std::to_string(names.size()) + " classes)");
    }
    return copy_text(names[index], buffer, capacity, needed, "the class name");
  });
}

stoke_status stoke_predictor_self_check(const stoke_predictor* predictor, int32_t* passed,
                                        char* buffer, size_t capacity, size_t* needed) {
  return guarded("stoke_predictor_self_check", [&] {
    const auto& check = checked(predictor).predictor.self_check();
    if (passed) *passed = check.passed ? 1 : 0;
    return copy_text(check.message, buffer, capacity, needed, "the self-check message");
  });
}

stoke_status stoke_predict_file(stoke_predictor* predictor, const char* path, stoke_prediction* out,
                                float* probabilities, size_t capacity) {
  return guarded("stoke_predict_file", [&] {
    require(predictor, "predictor");
    require(path, "path");
    check_outputs(*predictor, out, probabilities, capacity);
    return run(
        *predictor, out, probabilities, [&](stoke::Predictor& p) { return p.predict_file(path); },
        [&](stoke::Predictor& p) { return p.score_file(path); });
  });
}

stoke_status stoke_predict_bytes(stoke_predictor* predictor, const void* bytes, size_t size,
                                 stoke_prediction* out, float* probabilities, size_t capacity) {
  return guarded("stoke_predict_bytes", [&] {
    require(predictor, "predictor");
    require(bytes, "bytes");
    check_outputs(*predictor, out, probabilities, capacity);
    const std::span<const std::uint8_t> data(static_cast<const std::uint8_t*>(bytes), size);
    return run(
        *predictor, out, probabilities, [&](stoke::Predictor& p) { return p.predict_bytes(data); },
        [&](stoke::Predictor& p) { return p.score_bytes(data); });
  });
}

stoke_status stoke_predict_pixels(stoke_predictor* predictor, const void* pixels, int32_t width,
                                  int32_t height, int32_t format, size_t stride,
                                  stoke_prediction* out, float* probabilities, size_t capacity) {
  return guarded("stoke_predict_pixels", [&] {
    require(predictor, "predictor");
    require(pixels, "pixels");
    check_outputs(*predictor, out, probabilities, capacity);
    const stoke::PixelBuffer buffer = pixel_buffer(pixels, width, height, format, stride);
    return run(
        *predictor, out, probabilities,
        [&](stoke::Predictor& p) { return p.predict_pixels(buffer); },
        [&](stoke::Predictor& p) { return p.score_pixels(buffer); });
  });
}

stoke_status stoke_predict_file_map(stoke_predictor* predictor, const char* path,
                                    stoke_prediction* out, float* map, size_t map_capacity,
                                    int32_t* map_width, int32_t* map_height) {
  return guarded("stoke_predict_file_map", [&] {
    require(predictor, "predictor");
    require(path, "path");
    return run_map(*predictor, out, map, map_capacity, map_width, map_height,
                   [&](stoke::Predictor& p) { return p.score_file(path); });
  });
}

stoke_status stoke_predict_pixels_map(stoke_predictor* predictor, const void* pixels, int32_t width,
                                      int32_t height, int32_t format, size_t stride,
                                      stoke_prediction* out, float* map, size_t map_capacity,
                                      int32_t* map_width, int32_t* map_height) {
  return guarded("stoke_predict_pixels_map", [&] {
    require(predictor, "predictor");
    require(pixels, "pixels");
    const stoke::PixelBuffer buffer = pixel_buffer(pixels, width, height, format, stride);
    return run_map(*predictor, out, map, map_capacity, map_width, map_height,
                   [&](stoke::Predictor& p) { return p.score_pixels(buffer); });
  });
}

stoke_status stoke_segment_file(stoke_predictor* predictor, const char* path, uint8_t* labels,
                                size_t capacity, int32_t* width, int32_t* height, int64_t* areas,
                                size_t areas_capacity) {
  return guarded("stoke_segment_file", [&] {
    require(predictor, "predictor");
    require(path, "path");
    return run_segment(*predictor, labels, capacity, width, height, areas, areas_capacity,
                       [&](stoke::Predictor& p) { return p.segment_file(path); });
  });
}

stoke_status stoke_segment_bytes(stoke_predictor* predictor, const void* bytes, size_t size,
                                 uint8_t* labels, size_t capacity, int32_t* width, int32_t* height,
                                 int64_t* areas, size_t areas_capacity) {
  return guarded("stoke_segment_bytes", [&] {
    require(predictor, "predictor");
    require(bytes, "bytes");
    const std::span<const std::uint8_t> data(static_cast<const std::uint8_t*>(bytes), size);
    return run_segment(*predictor, labels, capacity, width, height, areas, areas_capacity,
                       [&](stoke::Predictor& p) { return p.segment_bytes(data); });
  });
}

stoke_status stoke_segment_pixels(stoke_predictor* predictor, const void* pixels, int32_t width,
                                  int32_t height, int32_t format, size_t stride, uint8_t* labels,
                                  size_t capacity, int32_t* map_width, int32_t* map_height,
                                  int64_t* areas, size_t areas_capacity) {
  return guarded("stoke_segment_pixels", [&] {
    require(predictor, "predictor");
    require(pixels, "pixels");
    const stoke::PixelBuffer buffer = pixel_buffer(pixels, width, height, format, stride);
    return run_segment(*predictor, labels, capacity, map_width, map_height, areas, areas_capacity,
                       [&](stoke::Predictor& p) { return p.segment_pixels(buffer); });
  });
}

}  // extern "C"
