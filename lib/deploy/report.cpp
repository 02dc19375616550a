// The evaluation report: one self-contained HTML page (inline SVG charts,
// thumbnails as data URIs) and its JSON twin.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/atomic_file.hpp"
#include "modelfile/text.hpp"
#include "stoke/deploy.hpp"
#include "stoke/error.hpp"

namespace stoke {

using modelfile_detail::float_text;
using modelfile_detail::html_escape;

namespace {

// Non-finite values (a metric without meaning, e.g. the recall of a class
// the evaluated set lacks) print as "n/a".
std::string pct(double v) {
  if (!std::isfinite(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %%", 100 * v);
  return buf;
}

std::string fixed(double v, int digits) {
  if (!std::isfinite(v)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The y scale of a chart: logarithmic when every value is positive and they
// span more than a decade (one loss spike would flatten the rest on a linear
// axis), else linear.
struct YScale {
  double lo, hi;
  bool log;
  double operator()(double v) const {  // 0 at lo, 1 at hi
    return log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
               : (v - lo) / (hi - lo);
  }
};

std::string value_text(double v, bool log) {
  if (!log) return fixed(v, 3);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// Axis labels: lo and hi, the decades between them on a log scale, and one
// tick per epoch (every k-th when there are more than 20).
void axes(std::ostringstream& o, const YScale& y, std::size_t n, double l, double t, double pw,
          double ph) {
  std::vector<double> labels = {y.lo, y.hi};
  if (y.log) {
    for (double d = std::pow(10.0, std::ceil(std::log10(y.lo))); d < y.hi; d *= 10)
      if (d > y.lo) labels.push_back(d);
  }
  for (double v : labels) {
    const double at = t + (1 - y(v)) * ph;
    o << "<line x1='" << l << "' x2='" << l + pw << "' y1='" << fixed(at, 1) << "' y2='"
      << fixed(at, 1) << "' stroke='#eee'/><text x='2' y='" << fixed(at + 4, 1)
      << "' font-size='10'>" << value_text(v, y.log) << "</text>";
  }
  const std::size_t every = n > 20 ? (n + 9) / 10 : 1;
  for (std::size_t i = 0; i < n; i += every) {
    const double x = l + (n > 1 ? double(i) / double(n - 1) : 0.5) * pw;
    o << "<line x1='" << fixed(x, 1) << "' x2='" << fixed(x, 1) << "' y1='" << t + ph << "' y2='"
      << t + ph + 4 << "' stroke='#999'/><text x='" << fixed(x - 3, 1) << "' y='" << t + ph + 15
      << "' font-size='10'>" << i + 1 << "</text>";
  }
  o << "<text x='" << l + pw - 30 << "' y='" << t + ph + 15 << "' font-size='10'>epoch</text>";
}

// A line chart of series (x = epoch index) in a 420 x 240 SVG.
std::string line_chart(const std::string& title,
                       const std::vector<std::pair<std::string, std::vector<double>>>& series) {
  const double w = 420, h = 240, l = 44, b = 40, t = 20;
  double lo = INFINITY, hi = -INFINITY;
  std::size_t n = 0;
  for (const auto& [name, v] : series) {
    for (double x : v) {
      if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
    }
    n = std::max(n, v.size());
  }
  const YScale y{lo, hi == lo ? lo + 1 : hi, lo > 0 && hi > 10 * lo};
  const std::string heading = title + (y.log ? " (log scale)" : "");
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h
    << "' role='img'><title>" << html_escape(heading) << "</title><text x='" << l
    << "' y='14' font-size='12'>" << html_escape(heading) << "</text>";
  o << "<rect x='" << l << "' y='" << t << "' width='" << w - l - 10 << "' height='" << h - t - b
    << "' fill='none' stroke='#999'/>";
  if (n == 0 || !std::isfinite(lo))
    return o.str() + "<text x='60' y='110' font-size='12'>no data</text></svg>";
  axes(o, y, n, l, t, w - l - 10, h - t - b);
  const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"};
  for (std::size_t s = 0; s < series.size(); ++s) {
    std::ostringstream pts;
    for (std::size_t i = 0; i < series[s].second.size(); ++i) {
      const double v = series[s].second[i];
      if (!std::isfinite(v)) continue;
      const double x = l + (n > 1 ? double(i) / double(n - 1) : 0.5) * (w - l - 10);
      pts << fixed(x, 1) << "," << fixed(t + (1 - y(v)) * (h - t - b), 1) << " ";
    }
    o << "<polyline fill='none' stroke-width='2' stroke='" << colors[s % 4] << "' points='"
      << pts.str() << "'/>";
    o << "<text x='" << l + 10 + 110 * double(s) << "' y='" << h - 6 << "' font-size='11' fill='"
      << colors[s % 4] << "'>" << html_escape(series[s].first) << "</text>";
  }
  return o.str() + "</svg>";
}

std::string history_charts(const ModelInfo& info) {
  std::vector<double> tl, vl, ta, va;
  for (const auto& line : info.history) {
    auto f = modelfile_detail::split(line, ',');
    f.resize(5);
    auto num = [](const std::string& s) {
      return s.empty() ? NAN : std::strtod(s.c_str(), nullptr);
    };
    tl.push_back(num(f[1]));
    ta.push_back(num(f[2]));
    vl.push_back(num(f[3]));
    va.push_back(num(f[4]));
  }
  return line_chart("loss per epoch", {{"train loss", tl}, {"val loss", vl}}) + " " +
         line_chart("accuracy per epoch", {{"train accuracy", ta}, {"val accuracy", va}});
}

// Beyond this many classes the page lists the largest confusions instead of
// the k x k matrix (which grows with the square of the classes).
constexpr std::size_t kMatrixClasses = 30;
constexpr std::size_t kTopConfusions = 50;

// The kTopConfusions largest off-diagonal cells, largest first.
std::string top_confusions(const Evaluation& e) {
  struct Cell {
    std::uint64_t count;
    std::size_t truth, predicted;
  };
  std::vector<Cell> cells;
  for (std::size_t r = 0; r < e.confusion.size(); ++r) {
    for (std::size_t c = 0; c < e.confusion[r].size(); ++c) {
      if (r != c && e.confusion[r][c] != 0) cells.push_back({e.confusion[r][c], r, c});
    }
  }
  const std::size_t shown = std::min(cells.size(), kTopConfusions);
  std::partial_sort(cells.begin(), cells.begin() + static_cast<std::ptrdiff_t>(shown), cells.end(),
                    [](const Cell& a, const Cell& b) { return a.count > b.count; });
  std::ostringstream o;
  o << "<p>" << e.class_names.size() << " classes: the " << shown << " largest of " << cells.size()
    << " confusions (the full matrix is in report.json).</p><table><tr><th>true</th>"
       "<th>predicted</th><th>images</th></tr>";
  for (std::size_t i = 0; i < shown; ++i) {
    o << "<tr><td>" << html_escape(e.class_names[cells[i].truth]) << "</td><td>"
      << html_escape(e.class_names[cells[i].predicted]) << "</td><td>" << cells[i].count
      << "</td></tr>";
  }
  return o.str() + "</table>";
}

std::string confusion_svg(const Evaluation& e) {
  const std::size_t k = e.class_names.size();
  if (k > kMatrixClasses) return top_confusions(e);
  const int cell = 56, left = 110, top = 40;
  std::uint64_t peak = 1;
  for (const auto& row : e.confusion) {
    for (auto v : row) peak = std::max(peak, v);
  }
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << left + cell * k + 10 << "' height='"
    << top + cell * k + 30 << "' role='img'><title>confusion matrix</title><text x='" << left
    << "' y='14' font-size='12'>predicted &#8594;"
    << "</text><text x='4' y='" << top - 6 << "' font-size='12'>true &#8595;</text>";
  for (std::size_t c = 0; c < k; ++c) {
    o << "<text x='" << left + cell * c + 4 << "' y='" << top - 6 << "' font-size='11'>"
      << html_escape(e.class_names[c].substr(0, 8)) << "</text><text x='4' y='"
      << top + cell * c + cell / 2 + 4 << "' font-size='11'>"
      << html_escape(e.class_names[c].substr(0, 14)) << "</text>";
  }
  for (std::size_t r = 0; r < k; ++r) {
    for (std::size_t c = 0; c < k; ++c) {
      const double a = double(e.confusion[r][c]) / double(peak);
      const int shade = static_cast<int>(255 - 180 * a);
      o << "<rect x='" << left + cell * c << "' y='" << top + cell * r << "' width='" << cell
        << "' height='" << cell << "' fill='rgb(" << shade << "," << shade
        << ",255)' stroke='#fff'/><text x='" << left + cell * c + cell / 2 << "' y='"
        << top + cell * r + cell / 2 + 4 << "' font-size='13' text-anchor='middle'>"
        << e.confusion[r][c] << "</text>";
    }
  }
  return o.str() + "</svg>";
}

std::string roc_svg(const Evaluation& e) {
  if (e.roc.empty())
    return "<p>No ROC: the evaluated set holds only good parts or only defects.</p>";
  const double s = 260, m = 30;
  std::ostringstream o, pts;
  for (const auto& p : e.roc) {
    pts << fixed(m + p.false_reject_rate * s, 1) << "," << fixed(m + (1 - p.detection_rate) * s, 1)
        << " ";
  }
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << s + 2 * m << "' height='"
    << s + 2 * m + 10 << "' role='img'><title>ROC defect vs good</title><rect x='" << m << "' y='"
    << m << "' width='" << s << "' height='" << s << "' fill='none' stroke='#999'/><line x1='" << m
    << "' y1='" << m + s << "' x2='" << m + s << "' y2='" << m
    << "' stroke='#ccc' stroke-dasharray='4'/><polyline fill='none' stroke='#d62728' "
    << "stroke-width='2' points='" << pts.str() << "'/><circle cx='" << m + e.false_reject_rate * s
    << "' cy='" << m + (1 - (1 - e.escape_rate)) * s << "' r='5' fill='#1f77b4'/><text x='" << m
    << "' y='18' font-size='12'>"
    << "ROC (AUC " << fixed(e.auc, 4) << ")</text><text x='" << m << "' y='" << s + 2 * m + 4
    << "' font-size='11'>false-reject rate (good parts rejected) &#8594;</text></svg>";
  return o.str();
}

// A PNG thumbnail (longest side <= 96) as a data URI; "" when unreadable.
std::string thumbnail(const std::string& file, Decoder& decoder, Resampler& resampler) {
  try {
    Image full, small;
    decoder.decode_file(file, DecodeOptions{3, 96, 96}, full);
    const double f = 96.0 / std::max(full.width(), full.height());
    const int w = std::max(1, static_cast<int>(full.width() * std::min(1.0, f)));
    const int h = std::max(1, static_cast<int>(full.height() * std::min(1.0, f)));
    small.reshape(w, h, 3);
    resampler.resize(full.view(), small.mutable_view(), ResizeFilter::kArea);
    const auto png = encode_png(small.view());
    return "data:image/png;base64," + modelfile_detail::base64_encode(png);
  } catch (const Error&) {
    return "";
  }
}

std::string table(const std::map<std::string, std::string>& m) {
  std::string o = "<table>";
  for (const auto& [k, v] : m)
    o += "<tr><td>" + html_escape(k) + "</td><td>" + html_escape(v) + "</td></tr>";
  return o + "</table>";
}

std::string provenance(const ModelInfo& info) {
  std::map<std::string, std::string> p;
  p["stoke version"] = info.stoke_version;
  p["written"] = info.created;
  p["dataset"] = info.dataset_source;
  p["dataset fingerprint"] = std::to_string(info.dataset_fingerprint);
  std::string counts;
  for (std::size_t c = 0; c < info.class_counts.size() && c < info.class_names.size(); ++c) {
    counts += (c ? ", " : "") + info.class_names[c] + ": " + std::to_string(info.class_counts[c]);
  }
  p["training samples per class"] = counts;
  p["validation samples"] = std::to_string(info.validation_samples);
  const auto& pre = info.preprocess;
  p["input"] = std::to_string(pre.channels) + " x " + std::to_string(pre.height) + " x " +
               std::to_string(pre.width);
  p["preprocessing"] =
      "resize to " + std::to_string(pre.resize_width) + "x" + std::to_string(pre.resize_height) +
      " (" + to_string(pre.filter) + "), centre crop, " +
      (pre.normalization.kind == Normalization::Kind::kMeanStd ? "mean/std" : "min-max") +
      (info.staged ? ", staged (uint8 after resize)" : ", fused resize + normalize") +
      (pre.dct_scaling ? ", JPEG DCT scaling" : "");
  p["reference samples"] =
      std::to_string(info.references.size()) + " (backend " + info.reference_backend + ")";
  return "<h3>Model</h3>" + table(p) + "<h3>Final metrics</h3>" + table(info.metrics) +
         "<details><summary>Trainer options</summary>" + table(info.trainer_options) +
         "</details><details><summary>Configuration</summary>" + table(info.configuration) +
         "</details>";
}

std::string summary(const Evaluation& e) {
  std::ostringstream o;
  o << "<p>" << e.samples << " images, accuracy <b>" << pct(e.accuracy) << "</b>, macro F1 "
    << fixed(e.macro_f1, 4);
  if (e.good_label >= 0) {
    o << "; good class <b>" << html_escape(e.class_names[static_cast<std::size_t>(e.good_label)])
      << "</b>: AUC " << fixed(e.auc, 4) << ", threshold "
      << (std::isfinite(e.threshold) ? fixed(e.threshold, 4) : "none")
      << " for a target escape rate of " << pct(e.target_escape_rate) << " gives escape rate "
      << pct(e.escape_rate) << " at a false-reject rate of <b>" << pct(e.false_reject_rate)
      << "</b>";
  }
  o << ".</p><table><tr><th>class</th><th>support</th><th>precision</th><th>recall</th><th>F1</"
       "th></tr>";
  for (std::size_t c = 0; c < e.class_names.size(); ++c) {
    const auto& m = e.per_class[c];
    o << "<tr><td>" << html_escape(e.class_names[c]) << "</td><td>" << m.support << "</td><td>"
      << fixed(m.precision, 4) << "</td><td>" << fixed(m.recall, 4) << "</td><td>" << fixed(m.f1, 4)
      << "</td></tr>";
  }
  o << "</table>";
  if (!e.skipped.empty()) {
    o << "<details><summary>" << e.skipped.size()
      << " files skipped (not evaluated)</summary><table>";
    for (const auto& s : e.skipped)
      o << "<tr><td>" << html_escape(s.path) << "</td><td>" << html_escape(s.reason)
        << "</td></tr>";
    o << "</table></details>";
  }
  return o.str();
}

std::string worst(const Evaluation& e, std::size_t thumbnails) {
  if (e.misclassified.empty()) return "<p>No image was misclassified.</p>";
  Decoder decoder;
  Resampler resampler(default_simd_level());
  std::ostringstream o;
  o << "<div class='grid'>";
  for (std::size_t i = 0; i < e.misclassified.size() && i < thumbnails; ++i) {
    const auto& m = e.misclassified[i];
    const std::string uri = thumbnail(m.file, decoder, resampler);
    o << "<figure>"
      << (uri.empty() ? "<div class='none'>no preview</div>" : "<img alt='' src='" + uri + "'>")
      << "<figcaption>" << html_escape(std::filesystem::path(m.file).filename().string())
      << "<br>true " << html_escape(e.class_names[static_cast<std::size_t>(m.label)])
      << ", predicted " << html_escape(e.class_names[static_cast<std::size_t>(m.predicted)]) << " ("
      << pct(m.confidence) << ")</figcaption></figure>";
  }
  o << "</div><details><summary>All " << e.misclassified.size()
    << " misclassified files</summary><table>";
  for (const auto& m : e.misclassified) {
    o << "<tr><td>" << html_escape(m.file) << "</td><td>"
      << html_escape(e.class_names[static_cast<std::size_t>(m.label)]) << "</td><td>"
      << html_escape(e.class_names[static_cast<std::size_t>(m.predicted)]) << "</td><td>"
      << pct(m.confidence) << "</td></tr>";
  }
  return o.str() + "</table></details>";
}

}  // namespace

std::string evaluation_html(const Evaluation& e, const ModelInfo& info, std::size_t thumbnails) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>stoke evaluation "
       "report</title><style>"
    << "body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;"
       "margin:.5em 0}"
    << "td,th{border:1px solid #ccc;padding:2px "
       "8px;text-align:left}.grid{display:flex;flex-wrap:wrap;gap:8px}"
    << "figure{margin:0;width:140px;font-size:11px}img{max-width:128px}svg{margin:4px}</style></"
       "head><body>"
    << "<h1>Evaluation report</h1><h2>Summary</h2>" << summary(e) << "<h2>Confusion matrix</h2>"
    << confusion_svg(e);
  if (e.good_label >= 0) o << "<h2>Defect vs good</h2>" << roc_svg(e);
  o << "<h2>Training</h2>" << history_charts(info) << "<h2>Worst misclassified images</h2>"
    << worst(e, thumbnails) << "<h2>Provenance</h2>" << provenance(info) << "</body></html>\n";
  return o.str();
}

void write_evaluation_report(const std::filesystem::path& dir, const Evaluation& evaluation,
                             const ModelInfo& info) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError("report folder '" + dir.string() + "': cannot create: " + ec.message());
  detail::write_file_atomically((dir / "report.json").string(), evaluation.to_json());
  detail::write_file_atomically((dir / "report.html").string(), evaluation_html(evaluation, info));
}

}  // namespace stoke
