// The anomaly evaluation's report (anomaly_report.hpp).
#include "anomaly_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/web_text.hpp"
#include "stoke/error.hpp"
#include "stoke/image.hpp"

namespace stoke_cli {

namespace fs = std::filesystem;
using stoke::detail::html_escape;

namespace {

constexpr int kOverlaySide = 256;  // the longest side of a part's picture

std::string number(double v, const char* format = "%.4g") {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Score histograms of good (green) and defect (red) parts, the threshold a line.
std::string histogram_svg(const std::vector<ScoredPart>& parts, float threshold) {
  constexpr int kBins = 30, kW = 520, kH = 180, kM = 30;
  float lo = threshold, hi = threshold;
  for (const auto& p : parts) lo = std::min(lo, p.score), hi = std::max(hi, p.score);
  if (!(hi > lo)) hi = lo + 1;
  std::vector<int> good(kBins, 0), defect(kBins, 0);
  for (const auto& p : parts) {
    const int b = std::min(kBins - 1, static_cast<int>((p.score - lo) / (hi - lo) * kBins));
    ++(p.good ? good : defect)[static_cast<std::size_t>(b)];
  }
  const int most = std::max(*std::max_element(good.begin(), good.end()),
                            *std::max_element(defect.begin(), defect.end()));
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kW + 2 * kM << "' height='"
    << kH + 2 * kM << "'>";
  const double bw = static_cast<double>(kW) / kBins;
  for (int b = 0; b < kBins; ++b) {
    for (int side = 0; side < 2; ++side) {
      const int n = (side ? defect : good)[static_cast<std::size_t>(b)];
      if (!n) continue;
      const double h = static_cast<double>(n) / std::max(1, most) * kH;
      o << "<rect x='" << kM + b * bw + side * bw / 2 << "' y='" << kM + kH - h << "' width='"
        << bw / 2 << "' height='" << h << "' fill='" << (side ? "#c0392b" : "#27ae60") << "'/>";
    }
  }
  const double tx = kM + (threshold - lo) / (hi - lo) * kW;
  o << "<line x1='" << tx << "' y1='" << kM - 5 << "' x2='" << tx << "' y2='" << kM + kH
    << "' stroke='black' stroke-dasharray='4'/><text x='" << tx + 4 << "' y='" << kM + 8
    << "' font-size='11'>threshold " << number(threshold) << "</text>"
    << "<text x='" << kM << "' y='" << kH + kM + 16 << "' font-size='11'>" << number(lo)
    << "</text><text x='" << kM + kW - 40 << "' y='" << kH + kM + 16 << "' font-size='11'>"
    << number(hi) << "</text><text x='" << kM + kW / 2 - 60 << "' y='" << kH + kM + 26
    << "' font-size='11'>score (green good, red defect)</text></svg>";
  return o.str();
}

// The image-level ROC: defect detection rate against good parts rejected.
std::string roc_svg(const std::vector<ScoredPart>& parts) {
  constexpr int kS = 220, kM = 30;
  std::vector<ScoredPart> sorted = parts;
  std::sort(sorted.begin(), sorted.end(),
            [](const ScoredPart& a, const ScoredPart& b) { return a.score > b.score; });
  const auto goods = static_cast<double>(
      std::count_if(parts.begin(), parts.end(), [](const ScoredPart& p) { return p.good; }));
  const double defects = static_cast<double>(parts.size()) - goods;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << kS + 2 * kM << "' height='"
    << kS + 2 * kM << "'><rect x='" << kM << "' y='" << kM << "' width='" << kS << "' height='"
    << kS << "' fill='none' stroke='#999'/>";
  if (goods > 0 && defects > 0) {
    o << "<polyline fill='none' stroke='#2c3e50' stroke-width='2' points='" << kM << "," << kM + kS;
    double fp = 0, tp = 0;
    for (std::size_t i = 0; i < sorted.size();) {
      const float s = sorted[i].score;
      for (; i < sorted.size() && sorted[i].score == s; ++i) (sorted[i].good ? fp : tp) += 1;
      o << " " << kM + fp / goods * kS << "," << kM + kS - tp / defects * kS;
    }
    o << "'/>";
  }
  o << "<text x='" << kM << "' y='" << kS + kM + 16
    << "' font-size='11'>good parts rejected &#8594;</text><text x='4' y='" << kM - 8
    << "' font-size='11'>defects found &#8593;</text></svg>";
  return o.str();
}

// The part's image with its anomaly map over it (red, opaque where the map is
// twice the threshold), as a PNG data URI; "" when the image cannot be read.
std::string overlay(const stoke::anomaly::AnomalyResult& r, const fs::path& file, float threshold) {
  try {
    stoke::Decoder decoder;
    stoke::Image image, small;
    decoder.decode_file(file, stoke::DecodeOptions{3, 0, 0}, image);
    const double f = std::min(1.0, static_cast<double>(kOverlaySide) / std::max(r.width, r.height));
    const int w = std::max(1, static_cast<int>(r.width * f));
    const int h = std::max(1, static_cast<int>(r.height * f));
    small.reshape(w, h, 3);
    stoke::Resampler(stoke::default_simd_level())
        .resize(image.view(), small.mutable_view(), stoke::ResizeFilter::kArea);
    for (int y = 0; y < h; ++y) {
      const int my = std::min(r.height - 1, static_cast<int>((y + 0.5) * r.height / h));
      std::uint8_t* row = small.data() + static_cast<std::size_t>(y) * small.stride();
      for (int x = 0; x < w; ++x) {
        const int mx = std::min(r.width - 1, static_cast<int>((x + 0.5) * r.width / w));
        const float v = r.map[static_cast<std::size_t>(my) * static_cast<std::size_t>(r.width) +
                              static_cast<std::size_t>(mx)];
        const float a = threshold > 0 ? std::clamp(v / (2 * threshold), 0.0f, 1.0f) * 0.7f : 0;
        for (int c = 0; c < 3; ++c) {
          const float red = c == 0 ? 255.0f : 0.0f;
          row[3 * x + c] = static_cast<std::uint8_t>((1 - a) * row[3 * x + c] + a * red + 0.5f);
        }
      }
    }
    return "data:image/png;base64," + stoke::detail::base64_encode(stoke::encode_png(small.view()));
  } catch (const stoke::Error&) {
    return "";
  }
}

}  // namespace

std::vector<ScoredPart> worst_parts(const std::vector<ScoredPart>& parts, float threshold,
                                    std::size_t limit) {
  std::vector<ScoredPart> escaped, rejected, rest;
  for (const auto& p : parts) {
    if (!p.good && !(p.score > threshold))
      escaped.push_back(p);
    else if (p.good && p.score > threshold)
      rejected.push_back(p);
    else
      rest.push_back(p);
  }
  const auto by = [](bool ascending) {
    return [ascending](const ScoredPart& a, const ScoredPart& b) {
      return ascending ? a.score < b.score : a.score > b.score;
    };
  };
  std::stable_sort(escaped.begin(), escaped.end(), by(true));
  std::stable_sort(rejected.begin(), rejected.end(), by(false));
  std::stable_sort(rest.begin(), rest.end(), by(false));
  std::vector<ScoredPart> out;
  for (const auto* list : {&escaped, &rejected, &rest})
    for (const auto& p : *list)
      if (out.size() < limit) out.push_back(p);
  return out;
}

void write_anomaly_report(const fs::path& dir, const AnomalyReport& report,
                          stoke::anomaly::PatchCore& core) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw stoke::IoError("--report: cannot create '" + dir.string() + "': " + ec.message());
  const std::string json = report.json + "\n";
  stoke::write_file(dir / "report.json",
                    {reinterpret_cast<const std::uint8_t*>(json.data()), json.size()});
  std::ostringstream o;
  o << "<!doctype html><html><head><meta charset='utf-8'><title>stoke anomaly evaluation</title>"
       "<style>body{font-family:sans-serif;margin:2em}td{vertical-align:top;padding:6px}"
       "figure{display:inline-block;margin:6px;font-size:12px}img{display:block}</style></head>"
       "<body><h1>Anomaly evaluation</h1><p>model <code>"
    << html_escape(report.model) << "</code></p><pre>" << html_escape(report.json)
    << "</pre><h2>Scores</h2>" << histogram_svg(report.parts, report.threshold)
    << roc_svg(report.parts);
  const auto shown = worst_parts(report.parts, report.threshold, 12);
  o << "<h2>Worst parts</h2><p>Escaped defects first, then rejected good parts, then the "
       "highest scores; the map over each part in red (opaque at twice the threshold "
    << number(report.threshold) << ").</p>";
  for (const auto& p : shown) {
    const auto r = core.score_file(p.file);
    const std::string uri = overlay(r, p.file, report.threshold);
    const bool wrong = p.good == (p.score > report.threshold);
    o << "<figure>";
    if (!uri.empty()) o << "<img src='" << uri << "' alt=''>";
    o << html_escape(p.file.filename().string()) << "<br>" << (p.good ? "good" : "defect")
      << ", score " << number(p.score) << (wrong ? " <b>(wrong)</b>" : "") << "</figure>";
  }
  o << "</body></html>\n";
  const std::string html = o.str();
  stoke::write_file(dir / "report.html",
                    {reinterpret_cast<const std::uint8_t*>(html.data()), html.size()});
}

}  // namespace stoke_cli
