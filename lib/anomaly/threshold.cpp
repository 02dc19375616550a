// Thresholds from good-only scores, and the image AUROC (stoke/anomaly.hpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "stoke/anomaly.hpp"
#include "stoke/error.hpp"

namespace stoke::anomaly {

float threshold_at_false_reject(std::vector<float> good_scores, double target_false_reject) {
  if (good_scores.empty())
    throw InvalidArgument("anomaly: no good validation score for the threshold");
  if (!(target_false_reject >= 0.0 && target_false_reject < 1.0)) {
    throw InvalidArgument("anomaly: target false-reject rate " +
                          std::to_string(target_false_reject) + " is not in [0, 1)");
  }
  for (float s : good_scores)
    if (!std::isfinite(s)) throw InvalidArgument("anomaly: a good validation score is not finite");
  std::sort(good_scores.begin(), good_scores.end());
  const std::size_t n = good_scores.size();
  // At most `allowed` scores may lie above the threshold.
  const auto allowed =
      static_cast<std::size_t>(std::floor(target_false_reject * static_cast<double>(n)));
  return good_scores[n - 1 - std::min(allowed, n - 1)];
}

float threshold_at_escape(std::vector<float> defect_scores, double target_escape) {
  if (defect_scores.empty())
    throw InvalidArgument("anomaly: no defect validation score for the escape threshold");
  if (!(target_escape >= 0.0 && target_escape < 1.0)) {
    throw InvalidArgument("anomaly: target escape rate " + std::to_string(target_escape) +
                          " is not in [0, 1)");
  }
  for (float s : defect_scores)
    if (!std::isfinite(s))
      throw InvalidArgument("anomaly: a defect validation score is not finite");
  std::sort(defect_scores.begin(), defect_scores.end());
  // At most `allowed` defects may score at or below the threshold (anomalous = score > threshold).
  const auto allowed = static_cast<std::size_t>(
      std::floor(target_escape * static_cast<double>(defect_scores.size())));
  return std::nextafter(defect_scores[allowed], -std::numeric_limits<float>::infinity());
}

double image_auroc(std::span<const float> good_scores, std::span<const float> defect_scores) {
  if (good_scores.empty() || defect_scores.empty())
    throw InvalidArgument("anomaly: AUROC needs good and defect scores (got " +
                          std::to_string(good_scores.size()) + " and " +
                          std::to_string(defect_scores.size()) + ")");
  std::vector<float> good(good_scores.begin(), good_scores.end());
  std::sort(good.begin(), good.end());
  double wins = 0.0;
  for (float d : defect_scores) {
    const auto below = std::lower_bound(good.begin(), good.end(), d) - good.begin();
    const auto equal = std::upper_bound(good.begin(), good.end(), d) - good.begin() - below;
    wins += static_cast<double>(below) + 0.5 * static_cast<double>(equal);
  }
  return wins / (static_cast<double>(good.size()) * static_cast<double>(defect_scores.size()));
}

}  // namespace stoke::anomaly
