// stoke eval on a segmentation model: every image through the Predictor
// (the deploy path itself), compared with its mask at the image's own size:
// a pixel confusion matrix, IoU per class, pixel accuracy and the per-image
// defect area error.
#include <cmath>
#include <sstream>

#include "core/text.hpp"
#include "modelfile/text.hpp"
#include "stoke/error.hpp"
#include "stoke/segment.hpp"

namespace stoke {

namespace {

std::string number(double v) {
  return std::isfinite(v) ? modelfile_detail::float_text(v) : "null";
}

}  // namespace

std::vector<std::int32_t> read_segmentation_mask(const SegmentationDataset& dataset,
                                                 std::size_t index, int& width, int& height) {
  const auto& s = dataset.sample(index);
  Decoder decoder;
  if (s.mask.empty()) {  // all background: the image's size
    std::vector<std::uint8_t> bytes;
    read_file(s.image, bytes);
    const ImageInfo info = decoder.info(bytes, s.image);
    width = info.width;
    height = info.height;
    return std::vector<std::int32_t>(static_cast<std::size_t>(width) * height, 0);
  }
  Image mask;
  DecodeOptions d;
  d.max_pixels = 0;
  d.keep_16_bit = true;
  decoder.decode_file(s.mask, d, mask);
  const ImageView v = mask.view();
  if (v.channels != 1) throw DecodeError("mask '" + s.mask + "' has colour channels");
  width = v.width;
  height = v.height;
  std::vector<std::int32_t> out(static_cast<std::size_t>(width) * height);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      std::int32_t value = v.bit_depth == 16 ? v.row16(y)[x] : v.row(y)[x];
      if (s.mask_class >= 0) value = value == 255 ? s.mask_class : 0;
      out[static_cast<std::size_t>(y) * width + x] = value;
    }
  }
  return out;
}

SegmentationEvaluation evaluate_segmentation(
    Predictor& predictor, const SegmentationDataset& dataset,
    const std::function<void(std::size_t, std::size_t)>& on_progress) {
  if (predictor.kind() != ModelKind::kSegmentation)
    throw InvalidArgument("evaluate_segmentation: the model is not a segmentation model");
  const auto& names = predictor.info().class_names;
  if (dataset.class_names() != names) {
    throw InvalidArgument("evaluate_segmentation: the dataset's classes (" +
                          modelfile_detail::join(dataset.class_names(), ", ") +
                          ") are not the model's (" + modelfile_detail::join(names, ", ") + ")");
  }
  const int k = static_cast<int>(names.size());
  const std::int32_t ignore = dataset.ignore_label();
  SegmentationEvaluation e;
  e.class_names = names;
  e.confusion.assign(static_cast<std::size_t>(k) * k, 0);
  double error_sum = 0;
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    const auto& s = dataset.sample(i);
    int w = 0, h = 0;
    const std::vector<std::int32_t> truth = read_segmentation_mask(dataset, i, w, h);
    const SegmentationResult r = predictor.segment_file(s.image);
    if (r.width != w || r.height != h) {
      throw InvalidArgument("evaluate_segmentation: image '" + s.image + "' is " +
                            std::to_string(r.width) + "x" + std::to_string(r.height) +
                            " but its mask is " + std::to_string(w) + "x" + std::to_string(h));
    }
    std::vector<std::uint64_t> mine;
    add_confusion(truth, r.labels, k, ignore, mine);
    std::uint64_t counted = 0, true_fg = 0, predicted_fg = 0;
    for (int t = 0; t < k; ++t) {
      for (int p = 0; p < k; ++p) {
        const std::uint64_t n = mine[static_cast<std::size_t>(t) * k + p];
        counted += n;
        if (t != 0) true_fg += n;
        if (p != 0) predicted_fg += n;
        e.confusion[static_cast<std::size_t>(t) * k + p] += n;
      }
    }
    SegmentationImageResult one;
    one.file = s.image;
    one.true_area = counted ? static_cast<double>(true_fg) / static_cast<double>(counted) : 0.0;
    one.predicted_area =
        counted ? static_cast<double>(predicted_fg) / static_cast<double>(counted) : 0.0;
    one.area_error = std::abs(one.predicted_area - one.true_area);
    one.iou = mean_iou(class_iou(mine, k));
    error_sum += one.area_error;
    e.per_image.push_back(std::move(one));
    if (on_progress) on_progress(i + 1, dataset.size());
  }
  e.images = dataset.size();
  std::uint64_t diagonal = 0;
  for (int c = 0; c < k; ++c) diagonal += e.confusion[static_cast<std::size_t>(c) * k + c];
  for (std::uint64_t n : e.confusion) e.pixels += n;
  e.per_class_iou = class_iou(e.confusion, k);
  e.mean_iou = mean_iou(e.per_class_iou);
  e.pixel_accuracy = e.pixels ? static_cast<double>(diagonal) / static_cast<double>(e.pixels) : NAN;
  e.area_error = e.images ? error_sum / static_cast<double>(e.images) : NAN;
  return e;
}

std::string SegmentationEvaluation::to_json() const {
  std::ostringstream o;
  const std::size_t k = class_names.size();
  o << "{\n  \"task\": \"segment\",\n  \"images\": " << images << ",\n  \"pixels\": " << pixels
    << ",\n  \"mean_iou\": " << number(mean_iou)
    << ",\n  \"pixel_accuracy\": " << number(pixel_accuracy) << ",\n  \"per_class_iou\": {";
  for (std::size_t c = 0; c < k; ++c)
    o << (c ? ", " : "") << detail::json_quote(class_names[c]) << ": " << number(per_class_iou[c]);
  o << "},\n  \"confusion_matrix\": {\"classes\": [";
  for (std::size_t c = 0; c < k; ++c) o << (c ? ", " : "") << detail::json_quote(class_names[c]);
  o << "], \"rows\": [";
  for (std::size_t t = 0; t < k; ++t) {
    o << (t ? ", " : "") << "[";
    for (std::size_t p = 0; p < k; ++p) o << (p ? ", " : "") << confusion[t * k + p];
    o << "]";
  }
  o << "]},\n  \"area_error\": {\"mean\": " << number(area_error) << ", \"images\": [";
  for (std::size_t i = 0; i < per_image.size(); ++i) {
    const auto& r = per_image[i];
    o << (i ? "," : "") << "\n    {\"file\": " << detail::json_quote(r.file)
      << ", \"true\": " << number(r.true_area) << ", \"predicted\": " << number(r.predicted_area)
      << ", \"error\": " << number(r.area_error) << ", \"mean_iou\": " << number(r.iou) << "}";
  }
  o << "]}\n}\n";
  return o.str();
}

}  // namespace stoke
