// stoke audit's output: the summary on stdout, the JSON object and the HTML
// page (pairs side by side, thumbnails as data: URIs); see audit.hpp.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <sstream>

#include "args.hpp"
#include "audit.hpp"
#include "core/web_text.hpp"
#include "stoke/stoke.hpp"

namespace stoke_cli::audit {

using stoke::detail::html_escape;

std::size_t Audit::cross_split_pairs() const {
  std::size_t n = cross_split_left_out;
  for (const auto* pairs : {&exact, &near})
    for (const auto& p : *pairs) n += cross_split(p);
  return n;
}

std::optional<double> Audit::imbalance(const std::string& split) const {
  const auto it = classes.find(split);
  if (it == classes.end() || it->second.empty()) return std::nullopt;
  std::size_t lo = SIZE_MAX, hi = 0;
  for (const auto& [label, count] : it->second) {
    lo = std::min(lo, count);
    hi = std::max(hi, count);
  }
  if (lo == 0) return std::nullopt;
  return static_cast<double>(hi) / static_cast<double>(lo);
}

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string where(const Audit& a, const Pair& p) {
  const auto& x = a.samples[p.a];
  const auto& y = a.samples[p.b];
  std::string s = x.split + "/" + x.label + " <-> " + y.split + "/" + y.label;
  if (a.label_conflict(p)) s += "  LABEL CONFLICT";
  return s;
}

void print_pairs(const Audit& a, const std::vector<Pair>& pairs, const char* what) {
  constexpr std::size_t kPrinted = 20;
  std::size_t cross = 0, conflicts = 0;
  for (const auto& p : pairs) {
    cross += a.cross_split(p);
    conflicts += a.label_conflict(p);
  }
  std::printf("%zu %s (%zu across train and val, %zu across classes)\n", pairs.size(), what, cross,
              conflicts);
  for (std::size_t i = 0; i < pairs.size() && i < kPrinted; ++i) {
    const auto& p = pairs[i];
    std::printf("  %s\n  %s\n    distance %d, %s\n", a.samples[p.a].path.c_str(),
                a.samples[p.b].path.c_str(), p.distance, where(a, p).c_str());
  }
  if (pairs.size() > kPrinted)
    std::printf("  ... %zu more (--json lists all)\n", pairs.size() - kPrinted);
}

std::string json_pair(const Audit& a, const Pair& p) {
  const auto& x = a.samples[p.a];
  const auto& y = a.samples[p.b];
  return "{\"a\": " + json_string(x.path.string()) + ", \"b\": " + json_string(y.path.string()) +
         ", \"distance\": " + std::to_string(p.distance) + ", \"splits\": [" +
         json_string(x.split) + ", " + json_string(y.split) + "], \"classes\": [" +
         json_string(x.label) + ", " + json_string(y.label) +
         "], \"label_conflict\": " + (a.label_conflict(p) ? "true" : "false") + "}";
}

std::string json_problems(const std::vector<Problem>& problems) {
  std::string o = "[";
  for (std::size_t i = 0; i < problems.size(); ++i) {
    o += (i ? ",\n    " : "\n    ") + std::string("{\"path\": ") + json_string(problems[i].path) +
         ", \"reason\": " + json_string(problems[i].reason) + "}";
  }
  return o + (problems.empty() ? "]" : "\n  ]");
}

// A JPEG thumbnail (longest side <= 96) as a data URI; "" when unreadable.
std::string thumbnail(const std::filesystem::path& file, stoke::Decoder& decoder,
                      stoke::Resampler& resampler) {
  constexpr int kSide = 96;
  try {
    stoke::Image full, small;
    decoder.decode_file(file, stoke::DecodeOptions{3, kSide, kSide}, full);
    const double f = std::min(1.0, double{kSide} / std::max(full.width(), full.height()));
    small.reshape(std::max(1, static_cast<int>(full.width() * f)),
                  std::max(1, static_cast<int>(full.height() * f)), 3);
    resampler.resize(full.view(), small.mutable_view(), stoke::ResizeFilter::kArea);
    return "data:image/jpeg;base64," +
           stoke::detail::base64_encode(stoke::encode_jpeg(small.view(), 85));
  } catch (const stoke::Error&) {
    return "";
  }
}

std::string html_side(const Sample& s, stoke::Decoder& decoder, stoke::Resampler& resampler) {
  const std::string uri = thumbnail(s.path, decoder, resampler);
  std::string o = "<td>";
  if (!uri.empty()) o += "<img src='" + uri + "' alt=''><br>";
  return o + html_escape(s.split + "/" + s.label) + "<br><small>" + html_escape(s.path.string()) +
         "</small></td>";
}

// At most kShownPairs pairs, cross-split ones first, the count left out named.
std::string html_pairs(const Audit& a, stoke::Decoder& decoder, stoke::Resampler& resampler) {
  std::vector<const Pair*> pairs;
  for (const auto* list : {&a.exact, &a.near})
    for (const auto& p : *list) pairs.push_back(&p);
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Pair* x, const Pair* y) {
    return a.cross_split(*x) > a.cross_split(*y);
  });
  std::ostringstream o;
  o << "<h2>Duplicate pairs</h2><p>" << a.exact.size() << " byte-identical, " << a.near.size()
    << " near duplicates (dHash distance &lt;= " << a.max_distance << " of 64 bits); "
    << a.cross_split_pairs() << " across train and val.</p>";
  if (pairs.empty()) return o.str();
  o << "<table><tr><th>a</th><th>b</th><th>distance</th><th></th></tr>";
  for (std::size_t i = 0; i < pairs.size() && i < kShownPairs; ++i) {
    const Pair& p = *pairs[i];
    o << "<tr>" << html_side(a.samples[p.a], decoder, resampler)
      << html_side(a.samples[p.b], decoder, resampler) << "<td>"
      << (p.exact ? std::string("identical") : std::to_string(p.distance)) << "</td><td>"
      << (a.cross_split(p) ? "across splits " : "")
      << (a.label_conflict(p) ? "<b>label conflict</b>" : "") << "</td></tr>";
  }
  o << "</table>";
  if (pairs.size() > kShownPairs)
    o << "<p>" << pairs.size() - kShownPairs << " more pairs left out (audit.json lists all).</p>";
  if (a.near_left_out > 0)
    o << "<p>" << a.near_left_out << " more near-duplicate pairs not kept (over " << kMaxNearPairs
      << " of a kind).</p>";
  return o.str();
}

std::string html_problems(const char* title, const std::vector<Problem>& problems) {
  if (problems.empty()) return "";
  std::ostringstream o;
  o << "<h2>" << title << " (" << problems.size() << ")</h2><table>";
  for (std::size_t i = 0; i < problems.size() && i < kShownPairs; ++i)
    o << "<tr><td>" << html_escape(problems[i].path) << "</td><td>"
      << html_escape(problems[i].reason) << "</td></tr>";
  o << "</table>";
  if (problems.size() > kShownPairs)
    o << "<p>" << problems.size() - kShownPairs << " more left out.</p>";
  return o.str();
}

}  // namespace

void print_summary(const Audit& a) {
  std::size_t readable = 0;
  for (const auto& s : a.samples) readable += s.readable;
  std::printf("%zu images (%zu readable)\n", a.samples.size(), readable);
  for (const auto& split : a.splits) {
    std::printf("%s:", split.c_str());
    for (const auto& [label, count] : a.classes.at(split))
      std::printf(" %s %zu", label.c_str(), count);
    const auto ratio = a.imbalance(split);
    std::printf("; imbalance %s\n", ratio ? number(*ratio).c_str() : "n/a (an empty class)");
  }
  print_pairs(a, a.exact, "byte-identical pairs");
  print_pairs(
      a, a.near,
      ("near-duplicate pairs (dHash distance <= " + std::to_string(a.max_distance) + " of 64)")
          .c_str());
  if (a.near_left_out > 0)
    std::printf("  %zu more near-duplicate pairs not kept (over %zu of a kind)\n", a.near_left_out,
                kMaxNearPairs);
  std::printf("%zu pairs across train and val\n", a.cross_split_pairs());
  std::printf("%zu images of another size or channel count than their split's majority\n",
              a.size_outliers.size());
  for (const auto& o : a.size_outliers) {
    const auto& s = a.samples[o.sample];
    std::printf("  %s: %dx%dx%d (majority %s)\n", s.path.c_str(), s.width, s.height, s.channels,
                o.majority.c_str());
  }
  std::printf("%zu unreadable\n", a.unreadable.size());
  for (const auto& u : a.unreadable) std::printf("  %s: %s\n", u.path.c_str(), u.reason.c_str());
  if (!a.skipped.empty())
    std::printf("%zu entries skipped by the folder rule (see --json)\n", a.skipped.size());
  if (!a.label_noise) return;
  std::printf("%zu label-noise candidates (predicted another class with p >= %.2f)\n",
              a.label_noise->size(), double{kNoiseConfidence});
  for (const auto& n : *a.label_noise) {
    const auto& s = a.samples[n.sample];
    std::printf("  %s: folder %s, predicted %s (%.3f)\n", s.path.c_str(), s.label.c_str(),
                n.predicted.c_str(), double{n.probability});
  }
}

std::string to_json(const Audit& a) {
  std::ostringstream o;
  o << "{\n  \"images\": " << a.samples.size() << ",\n  \"max_distance\": " << a.max_distance
    << ",\n  \"classes\": {";
  for (std::size_t i = 0; i < a.splits.size(); ++i) {
    o << (i ? ", " : "") << json_string(a.splits[i]) << ": {";
    std::size_t k = 0;
    for (const auto& [label, count] : a.classes.at(a.splits[i]))
      o << (k++ ? ", " : "") << json_string(label) << ": " << count;
    o << "}";
  }
  o << "},\n  \"imbalance\": {";
  for (std::size_t i = 0; i < a.splits.size(); ++i) {
    const auto ratio = a.imbalance(a.splits[i]);
    o << (i ? ", " : "") << json_string(a.splits[i]) << ": " << (ratio ? number(*ratio) : "null");
  }
  o << "},\n  \"exact_duplicates\": [";
  for (std::size_t i = 0; i < a.exact.size(); ++i)
    o << (i ? ",\n    [" : "\n    [") << json_string(a.samples[a.exact[i].a].path.string()) << ", "
      << json_string(a.samples[a.exact[i].b].path.string()) << "]";
  o << (a.exact.empty() ? "]" : "\n  ]") << ",\n  \"near_duplicates\": [";
  for (std::size_t i = 0; i < a.near.size(); ++i)
    o << (i ? ",\n    " : "\n    ") << json_pair(a, a.near[i]);
  o << (a.near.empty() ? "]" : "\n  ]") << ",\n  \"near_duplicates_left_out\": " << a.near_left_out
    << ",\n  \"cross_split\": " << a.cross_split_pairs() << ",\n  \"size_outliers\": [";
  for (std::size_t i = 0; i < a.size_outliers.size(); ++i) {
    const auto& s = a.samples[a.size_outliers[i].sample];
    o << (i ? ",\n    " : "\n    ") << "{\"path\": " << json_string(s.path.string())
      << ", \"split\": " << json_string(s.split) << ", \"width\": " << s.width
      << ", \"height\": " << s.height << ", \"channels\": " << s.channels
      << ", \"majority\": " << json_string(a.size_outliers[i].majority) << "}";
  }
  o << (a.size_outliers.empty() ? "]" : "\n  ]")
    << ",\n  \"unreadable\": " << json_problems(a.unreadable)
    << ",\n  \"skipped\": " << json_problems(a.skipped) << ",\n  \"label_noise\": ";
  if (!a.label_noise) {
    o << "null";
  } else {
    o << "[";
    for (std::size_t i = 0; i < a.label_noise->size(); ++i) {
      const auto& n = (*a.label_noise)[i];
      const auto& s = a.samples[n.sample];
      o << (i ? ",\n    " : "\n    ") << "{\"path\": " << json_string(s.path.string())
        << ", \"class\": " << json_string(s.label)
        << ", \"predicted\": " << json_string(n.predicted)
        << ", \"probability\": " << number(n.probability) << "}";
    }
    o << (a.label_noise->empty() ? "]" : "\n  ]");
  }
  o << "\n}\n";
  return o.str();
}

std::string to_html(const Audit& a) {
  stoke::Decoder decoder;
  stoke::Resampler resampler(stoke::default_simd_level());
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>stoke audit</title>"
    << "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
    << "td,th{border:1px solid #ccc;padding:4px;vertical-align:top}small{color:#555}</style>"
    << "</head><body><h1>stoke audit</h1><p>" << a.samples.size()
    << " images</p><h2>Classes</h2><table>"
    << "<tr><th>split</th><th>class</th><th>images</th></tr>";
  for (const auto& split : a.splits)
    for (const auto& [label, count] : a.classes.at(split))
      o << "<tr><td>" << html_escape(split) << "</td><td>" << html_escape(label) << "</td><td>"
        << count << "</td></tr>";
  o << "</table><p>";
  for (const auto& split : a.splits) {
    const auto ratio = a.imbalance(split);
    o << "imbalance " << html_escape(split) << ": " << (ratio ? number(*ratio) : "n/a") << "; ";
  }
  o << "</p>" << html_pairs(a, decoder, resampler);
  std::vector<Problem> outliers, noise;
  for (const auto& x : a.size_outliers) {
    const auto& s = a.samples[x.sample];
    outliers.push_back({s.path.string(), std::to_string(s.width) + "x" + std::to_string(s.height) +
                                             "x" + std::to_string(s.channels) + ", majority " +
                                             x.majority});
  }
  if (a.label_noise)
    for (const auto& n : *a.label_noise)
      noise.push_back({a.samples[n.sample].path.string(), "folder " + a.samples[n.sample].label +
                                                              ", predicted " + n.predicted + " (" +
                                                              number(n.probability) + ")"});
  o << html_problems("Size or channel outliers", outliers)
    << html_problems("Unreadable", a.unreadable) << html_problems("Label-noise candidates", noise)
    << html_problems("Skipped entries", a.skipped) << "</body></html>\n";
  return o.str();
}

}  // namespace stoke_cli::audit
