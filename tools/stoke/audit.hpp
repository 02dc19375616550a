// stoke audit's findings (cmd_audit.cpp gathers them, audit_report.cpp
// prints and writes them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stoke_cli::audit {

// The near-duplicate threshold's default: pairs whose dHash differs in at
// most this many of its 64 bits (docs/audit.md).
inline constexpr int kDefaultMaxDistance = 10;
// The HTML report shows at most this many pairs (the JSON holds them all).
inline constexpr std::size_t kShownPairs = 200;
// Near pairs kept per kind (across the splits, within one): a folder of
// look-alike frames would otherwise make n^2 / 2 pairs; the rest are counted.
inline constexpr std::size_t kMaxNearPairs = 100'000;
// Label-noise candidates: predicted another class with at least this probability.
inline constexpr float kNoiseConfidence = 0.9f;

// One listed image file.
struct Sample {
  std::filesystem::path path;
  std::string split;  // "train" (--data) or "val" (--val)
  std::string label;  // its class folder
  bool readable = false;
  int width = 0, height = 0, channels = 0;  // as stored
  std::uint64_t dhash = 0;
};

// Two samples (indices into Audit::samples, a < b); distance 0 and `exact`
// for byte-identical files.
struct Pair {
  std::size_t a = 0, b = 0;
  int distance = 0;
  bool exact = false;
};

struct Problem {
  std::string path, reason;
};

struct Outlier {
  std::size_t sample = 0;
  std::string majority;  // the split's majority shape, "WxHxC"
};

struct NoiseCandidate {
  std::size_t sample = 0;
  std::string predicted;
  float probability = 0;
};

struct Audit {
  std::vector<Sample> samples;
  std::vector<std::string> splits;  // in order: "train", then "val" with --val
  // split -> class -> readable images (class folders without any listed too)
  std::map<std::string, std::map<std::string, std::size_t>> classes;
  std::vector<Problem> skipped;     // entries the folder rule ignores
  std::vector<Problem> unreadable;  // image files that do not decode, or over the pixel limit
  std::vector<Pair> exact, near;
  std::size_t near_left_out = 0, cross_split_left_out = 0;  // past kMaxNearPairs
  std::vector<Outlier> size_outliers;
  std::optional<std::vector<NoiseCandidate>> label_noise;  // empty without --model
  int max_distance = kDefaultMaxDistance;

  bool cross_split(const Pair& p) const { return samples[p.a].split != samples[p.b].split; }
  bool label_conflict(const Pair& p) const { return samples[p.a].label != samples[p.b].label; }
  // Exact and near pairs across train and val, those left out included.
  std::size_t cross_split_pairs() const;
  // largest / smallest class of a split; nullopt when a class has no image.
  std::optional<double> imbalance(const std::string& split) const;
};

// The human-readable summary (stdout), the JSON object, the HTML page.
void print_summary(const Audit& audit);
std::string to_json(const Audit& audit);
std::string to_html(const Audit& audit);

}  // namespace stoke_cli::audit
