// stoke eval --report on a segmentation model; see segment_report.hpp.
#include "segment_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "core/web_text.hpp"

namespace stoke_cli {

namespace {

namespace fs = std::filesystem;
using stoke::detail::html_escape;

constexpr int kOverlaySide = 256;  // the longer side of each thumbnail
constexpr std::size_t kWorst = 12;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return std::isfinite(v) ? buf : "n/a";
}

// A class's colour: background none, then a fixed palette.
void colour(int label, std::uint8_t rgb[3]) {
  static const std::uint8_t palette[][3] = {{230, 25, 75},  {60, 180, 75},  {255, 225, 25},
                                            {0, 130, 200},  {245, 130, 48}, {145, 30, 180},
                                            {70, 240, 240}, {240, 50, 230}};
  const auto* c = palette[static_cast<std::size_t>(label - 1) % 8];
  std::copy(c, c + 3, rgb);
}

// The image reduced to kOverlaySide with `labels` (width x height, the
// image's size) painted over it at 60 %; "" when the image cannot be read.
std::string overlay(const fs::path& file, const std::vector<std::int32_t>& labels, int width,
                    int height) {
  try {
    stoke::Decoder decoder;
    stoke::Image image, small;
    decoder.decode_file(file, stoke::DecodeOptions{3, 0, 0}, image);
    const double f = std::min(1.0, static_cast<double>(kOverlaySide) / std::max(width, height));
    const int w = std::max(1, static_cast<int>(width * f));
    const int h = std::max(1, static_cast<int>(height * f));
    small.reshape(w, h, 3);
    stoke::Resampler(stoke::default_simd_level())
        .resize(image.view(), small.mutable_view(), stoke::ResizeFilter::kArea);
    for (int y = 0; y < h; ++y) {
      const int my = std::min(height - 1, static_cast<int>((y + 0.5) * height / h));
      std::uint8_t* row = small.data() + static_cast<std::size_t>(y) * small.stride();
      for (int x = 0; x < w; ++x) {
        const int mx = std::min(width - 1, static_cast<int>((x + 0.5) * width / w));
        const int label = labels[static_cast<std::size_t>(my) * width + mx];
        if (label <= 0 || label == stoke::kSegmentationIgnoreLabel) continue;
        std::uint8_t c[3];
        colour(label, c);
        for (int k = 0; k < 3; ++k)
          row[3 * x + k] = static_cast<std::uint8_t>(0.4f * row[3 * x + k] + 0.6f * c[k] + 0.5f);
      }
    }
    return "data:image/png;base64," + stoke::detail::base64_encode(stoke::encode_png(small.view()));
  } catch (const stoke::Error&) {
    return "";
  }
}

void write_text(const fs::path& path, const std::string& text) {
  stoke::write_file(path, {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()});
}

}  // namespace

void write_segmentation_report(const fs::path& dir, const std::string& model,
                               const stoke::SegmentationEvaluation& e,
                               const stoke::SegmentationDataset& dataset,
                               stoke::Predictor& predictor) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw stoke::IoError("--report: cannot create '" + dir.string() + "': " + ec.message());
  const std::string json = e.to_json();
  write_text(dir / "report.json", json);
  const std::size_t k = e.class_names.size();
  std::ostringstream o;
  o << "<!doctype html><html><head><meta charset='utf-8'><title>stoke segmentation "
       "evaluation</title><style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 8px;"
       "text-align:right}figure{display:inline-block;margin:6px;font-size:12px}"
       "img{display:block}</style></head><body><h1>Segmentation evaluation</h1><p>model <code>"
    << html_escape(model) << "</code>: " << e.images << " images, " << e.pixels
    << " pixels; mean IoU <b>" << number(e.mean_iou) << "</b>, pixel accuracy "
    << number(e.pixel_accuracy) << ", mean area error " << number(e.area_error) << "</p>";
  o << "<h2>Classes</h2><table><tr><th>class</th><th>IoU</th>";
  for (const auto& n : e.class_names) o << "<th>&rarr; " << html_escape(n) << "</th>";
  o << "</tr>";
  for (std::size_t t = 0; t < k; ++t) {
    o << "<tr><th>";
    if (t > 0) {
      std::uint8_t c[3];
      colour(static_cast<int>(t), c);
      o << "<span style='color:rgb(" << int(c[0]) << "," << int(c[1]) << "," << int(c[2])
        << ")'>&#9632;</span> ";
    }
    o << html_escape(e.class_names[t]) << "</th><td>" << number(e.per_class_iou[t]) << "</td>";
    for (std::size_t p = 0; p < k; ++p) o << "<td>" << e.confusion[t * k + p] << "</td>";
    o << "</tr>";
  }
  o << "</table><p>Rows: true class; columns: predicted (pixels).</p>";
  std::vector<std::size_t> order(e.per_image.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto &x = e.per_image[a], &y = e.per_image[b];
    if (x.area_error != y.area_error) return x.area_error > y.area_error;
    return (std::isnan(x.iou) ? 1.0 : x.iou) < (std::isnan(y.iou) ? 1.0 : y.iou);
  });
  o << "<h2>Worst images</h2><p>Highest area error first; each image with its true mask "
       "(left) and the prediction (right) over it.</p>";
  for (std::size_t i = 0; i < std::min(kWorst, order.size()); ++i) {
    const auto& r = e.per_image[order[i]];
    int w = 0, h = 0;
    const auto truth = stoke::read_segmentation_mask(dataset, order[i], w, h);
    const auto p = predictor.segment_file(r.file);
    const std::vector<std::int32_t> predicted(p.labels.begin(), p.labels.end());
    o << "<figure><table><tr>";
    for (const auto* labels : {&truth, &predicted}) {
      const std::string uri = overlay(r.file, *labels, w, h);
      o << "<td>" << (uri.empty() ? "" : "<img src='" + uri + "' alt=''>") << "</td>";
    }
    o << "</tr></table>" << html_escape(fs::path(r.file).filename().string()) << ": area true "
      << number(r.true_area) << ", predicted " << number(r.predicted_area) << ", IoU "
      << number(r.iou) << "</figure>";
  }
  o << "<h2>JSON</h2><pre>" << html_escape(json) << "</pre></body></html>\n";
  write_text(dir / "report.html", o.str());
}

}  // namespace stoke_cli
