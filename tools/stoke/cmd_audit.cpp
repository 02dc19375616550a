// stoke audit: what is wrong with a dataset before it is trained on: exact
// and near-duplicate images (within train, within val, and across them, with
// label conflicts), class counts and imbalance, images of another size or
// channel count than the rest, unreadable files, and with --model the
// training images a model confidently disagrees with. docs/audit.md.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <utility>

#include "args.hpp"
#include "audit.hpp"
#include "commands.hpp"
#include "core/image_hash.hpp"
#include "duplicates.hpp"
#include "inputs.hpp"
#include "stoke/stoke.hpp"

namespace {

namespace fs = std::filesystem;
namespace audit = stoke_cli::audit;
using stoke_cli::audit::Audit;

constexpr const char* kUsage =
    "usage: stoke audit --data DIR [--val DIR] [--report DIR] [--json] [--model MODEL]\n"
    "                   [--max-distance N]\n"
    "  DIR holds one subfolder per class, as stoke train reads it. Finds byte-identical\n"
    "  files and near duplicates (64-bit dHash of the 9x8 gray thumbnail within N bits,\n"
    "  default 10) within and across the splits, with the class of each side (a pair\n"
    "  across classes is a label conflict), class counts and imbalance, images whose size or\n"
    "  channel count differs from their split's majority, and unreadable files (over\n"
    "  STOKE_MAX_IMAGE_PIXELS too). --model: training images the classifier predicts as\n"
    "  another class with probability >= 0.9. --json: one JSON object on stdout. --report\n"
    "  DIR writes DIR/audit.json and DIR/audit.html. Findings do not fail it (status 0).\n";

// The folder rule of stoke train (Dataset::from_folder): root/<class>/...,
// every other entry at the root ignored; each class folder by list_image_files.
void list_split(const fs::path& root, const std::string& split, Audit& a) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw stoke::IoError("dataset folder '" + root.string() +
                         "' does not exist or is not a directory");
  std::vector<fs::path> class_dirs;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory(ec))
      class_dirs.push_back(entry.path());
    else
      a.skipped.push_back(
          {entry.path().string(), "ignored: not in a class folder (root/<class>/<image>)"});
  }
  if (class_dirs.empty())
    throw stoke::InvalidArgument("dataset folder '" + root.string() +
                                 "' has no class subfolders (expected root/<class>/<image>)");
  std::sort(class_dirs.begin(), class_dirs.end());
  std::vector<stoke::DatasetReport::Skipped> skipped;
  for (const auto& dir : class_dirs) {
    const std::string label = dir.filename().string();
    a.classes[split][label];  // a class folder without images counts too
    for (auto& file : stoke::list_image_files(dir, stoke::DatasetOptions{}.extensions, skipped))
      a.samples.push_back({std::move(file), split, label});
  }
  for (auto& s : skipped) a.skipped.push_back({std::move(s.path), std::move(s.reason)});
  a.splits.push_back(split);
}

// Decodes, checks the pixel limit and hashes one sample; a bad file is
// listed in unreadable and the audit goes on.
class Scanner {
 public:
  explicit Scanner(const stoke::Context& context)
      : resampler_(context.simd()), max_pixels_(context.settings().max_image_pixels.value_or(0)) {}

  void scan(audit::Sample& s, std::vector<audit::Problem>& unreadable) {
    try {
      stoke::read_file(s.path, bytes_);
      const auto info = decoder_.info(bytes_, s.path.string());
      stoke::check_image_size(s.path.string(), info.width, info.height, max_pixels_);
      stoke::DecodeOptions o;
      o.channels = 1;
      o.min_width = 4 * stoke::detail::kDhashWidth;  // DCT-scaled JPEG decode suffices
      o.min_height = 4 * stoke::detail::kDhashHeight;
      o.max_pixels = max_pixels_;
      decoder_.decode(bytes_, s.path.string(), o, gray_);
      thumb_.reshape(stoke::detail::kDhashWidth, stoke::detail::kDhashHeight, 1);
      resampler_.resize(gray_.view(), thumb_.mutable_view(), stoke::ResizeFilter::kArea);
      s.dhash = stoke::detail::difference_hash({thumb_.data(), thumb_.size_bytes()});
      s.width = info.width;
      s.height = info.height;
      s.channels = info.channels;
      s.readable = true;
    } catch (const stoke::Error& e) {
      unreadable.push_back({s.path.string(), e.what()});
    }
  }

 private:
  stoke::Decoder decoder_;
  stoke::Resampler resampler_;
  stoke::Image gray_, thumb_;
  std::vector<std::uint8_t> bytes_;
  std::uint64_t max_pixels_;
};

// Byte-identical files as pairs: every copy with the first of its group
// (training files come first, then path order), so n copies make n - 1 pairs.
std::vector<std::size_t> find_exact(Audit& a) {
  std::vector<fs::path> files;
  for (const auto& s : a.samples) files.push_back(s.path);
  std::vector<std::size_t> group_of(a.samples.size(), SIZE_MAX);
  const auto groups = stoke_cli::identical_file_groups(files);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const std::size_t i : groups[g]) {
      group_of[i] = g;
      if (i == groups[g].front() || !a.samples[i].readable) continue;
      a.exact.push_back({groups[g].front(), i, 0, true});
    }
  }
  return group_of;
}

// Every pair of readable samples within max_distance bits that are not
// byte-identical, at most kMaxNearPairs of each kind (across, within splits).
void find_near(Audit& a, const std::vector<std::size_t>& group_of) {
  const auto& s = a.samples;
  std::size_t kept[2] = {0, 0};  // within, across
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!s[i].readable) continue;
    for (std::size_t j = i + 1; j < s.size(); ++j) {
      if (!s[j].readable || (group_of[i] != SIZE_MAX && group_of[i] == group_of[j])) continue;
      const int d = stoke::detail::hamming_distance(s[i].dhash, s[j].dhash);
      if (d > a.max_distance) continue;
      const bool across = s[i].split != s[j].split;
      if (kept[across] < audit::kMaxNearPairs) {
        ++kept[across];
        a.near.push_back({i, j, d, false});
      } else {
        ++a.near_left_out;
        a.cross_split_left_out += across;
      }
    }
  }
  std::stable_sort(a.near.begin(), a.near.end(), [&](const audit::Pair& x, const audit::Pair& y) {
    // Cross-split pairs first (they are what inflates a validation score), then the closest.
    return std::pair(!a.cross_split(x), x.distance) < std::pair(!a.cross_split(y), y.distance);
  });
}

// Per split: the most common width x height x channels; the others are outliers.
void find_outliers(Audit& a) {
  for (const auto& split : a.splits) {
    std::map<std::string, std::size_t> shapes;
    const auto shape = [](const audit::Sample& s) {
      return std::to_string(s.width) + "x" + std::to_string(s.height) + "x" +
             std::to_string(s.channels);
    };
    for (const auto& s : a.samples)
      if (s.readable && s.split == split) ++shapes[shape(s)];
    if (shapes.size() < 2) continue;
    const auto majority = std::max_element(shapes.begin(), shapes.end(), [](auto& x, auto& y) {
                            return x.second < y.second;
                          })->first;
    for (std::size_t i = 0; i < a.samples.size(); ++i) {
      const auto& s = a.samples[i];
      if (s.readable && s.split == split && shape(s) != majority)
        a.size_outliers.push_back({i, majority});
    }
  }
}

// Training samples the model predicts as another class with probability >= 0.9.
void find_label_noise(Audit& a, stoke::Predictor& predictor) {
  const auto& known = predictor.info().class_names;
  for (const auto& [label, count] : a.classes["train"]) {
    if (std::find(known.begin(), known.end(), label) == known.end())
      std::fprintf(stderr,
                   "stoke audit: warning: --model has no class '%s': all its images will be "
                   "candidates\n",
                   label.c_str());
  }
  auto session = predictor.session();
  a.label_noise.emplace();
  std::size_t total = 0;
  for (const auto& s : a.samples) total += s.readable && s.split == "train";
  stoke_cli::Progress progress("audit --model", total, "images");
  std::size_t done = 0;
  for (std::size_t i = 0; i < a.samples.size(); ++i) {
    const auto& s = a.samples[i];
    if (!s.readable || s.split != "train") continue;
    try {
      const auto p = session.predict_file(s.path);
      if (p.class_name != s.label && p.confidence >= audit::kNoiseConfidence)
        a.label_noise->push_back({i, p.class_name, p.confidence});
    } catch (const stoke::Error& e) {
      std::fprintf(stderr, "stoke audit: --model could not classify %s: %s\n", s.path.c_str(),
                   e.what());
    }
    progress.update(++done);
  }
  progress.finish();
}

void write_report(const fs::path& dir, const Audit& a) {
  fs::create_directories(dir);
  const std::string json = audit::to_json(a), html = audit::to_html(a);
  stoke::write_file(dir / "audit.json",
                    {reinterpret_cast<const std::uint8_t*>(json.data()), json.size()});
  stoke::write_file(dir / "audit.html",
                    {reinterpret_cast<const std::uint8_t*>(html.data()), html.size()});
  std::fprintf(stderr, "report: %s/audit.html\n", dir.c_str());
}

int run(int argc, char** argv) {
  stoke_cli::Args args(argc, argv, {"data", "val", "report", "model", "max-distance"}, {"json"});
  Audit a;
  a.max_distance = args.get_int("max-distance", audit::kDefaultMaxDistance, 0, 64);
  const std::string data = args.required("data");
  if (args.has("report")) stoke_cli::check_writable("--report", args.get("report"), true);
  const auto runtime = stoke_cli::init_with_precision("");
  std::unique_ptr<stoke::Predictor> predictor;  // loaded first: a bad --model fails at once
  if (args.has("model")) {
    stoke::PredictorOptions po;
    po.context = runtime.context;  // STOKE_MAX_IMAGE_PIXELS
    predictor = std::make_unique<stoke::Predictor>(args.get("model"), po);
    std::fprintf(stderr, "%s\n", predictor->self_check().message.c_str());
  }
  list_split(data, "train", a);
  if (args.has("val")) list_split(args.get("val"), "val", a);
  Scanner scanner(runtime.context);
  stoke_cli::Progress progress("audit", a.samples.size(), "images");
  for (std::size_t i = 0; i < a.samples.size(); ++i) {
    scanner.scan(a.samples[i], a.unreadable);
    if (a.samples[i].readable) ++a.classes[a.samples[i].split][a.samples[i].label];
    progress.update(i + 1);
  }
  progress.finish();
  const auto group_of = find_exact(a);
  find_near(a, group_of);
  find_outliers(a);
  if (predictor) find_label_noise(a, *predictor);
  if (args.has("report")) write_report(args.get("report"), a);
  if (args.has("json"))
    std::fputs(audit::to_json(a).c_str(), stdout);
  else
    audit::print_summary(a);
  return 0;
}

}  // namespace

int cmd_audit(int argc, char** argv) {
  return stoke_cli::run_guarded("audit", kUsage, run, argc, argv);
}
