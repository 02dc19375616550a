// The anomaly evaluation's report (stoke eval --report DIR on an anomaly
// model): DIR/report.json (the --json object) and DIR/report.html, one
// self-contained page: the figures, the score histogram of good and defect
// parts with the threshold, the ROC, and the worst parts with their anomaly
// maps over the image.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "stoke/anomaly.hpp"

namespace stoke_cli {

struct ScoredPart {
  std::filesystem::path file;
  float score = 0;
  bool good = false;
};

struct AnomalyReport {
  std::string model;
  std::string json;  // the evaluation's JSON object, as --json prints it
  std::vector<ScoredPart> parts;
  float threshold = 0;
};

// The parts shown with their maps (at most `limit`): escaped defects (lowest
// score first), then rejected good parts (highest first), then the
// highest-scoring remaining defects and good parts.
std::vector<ScoredPart> worst_parts(const std::vector<ScoredPart>& parts, float threshold,
                                    std::size_t limit);

// Writes both files (the folder is created); the maps of the worst parts are
// scored again with `core`. IoError naming a file that cannot be written.
void write_anomaly_report(const std::filesystem::path& dir, const AnomalyReport& report,
                          stoke::anomaly::PatchCore& core);

}  // namespace stoke_cli
