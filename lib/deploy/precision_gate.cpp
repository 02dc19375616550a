// The reduced-precision gate (stoke/deploy.hpp, docs/precision.md).
#include <cmath>
#include <cstdio>
#include <string>

#include "stoke/deploy.hpp"
#include "stoke/error.hpp"

namespace stoke {

namespace {

std::string share(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

}  // namespace

PrecisionGateResult judge_precision(PrecisionGateResult m, const PrecisionGateLimits& limits) {
  if (m.images == 0) throw InvalidArgument("precision gate: no validation image");
  m.disagreement = static_cast<double>(m.disagreements) / static_cast<double>(m.images);
  std::string why;
  const auto add = [&why](const std::string& text) { why += (why.empty() ? "" : "; ") + text; };
  if (!(m.disagreement <= limits.max_disagreement)) {
    add(std::to_string(m.disagreements) + " of " + std::to_string(m.images) + " decisions (" +
        share(100 * m.disagreement) + " %) differ from fp32's, above " +
        share(100 * limits.max_disagreement) + " %");
  }
  if (std::isfinite(m.escape_fp32) && !(m.escape_reduced <= m.escape_fp32)) {
    add("the escape rate rises from " + share(m.escape_fp32) + " to " + share(m.escape_reduced));
  }
  if (std::isfinite(m.auroc_fp32) && !(m.auroc_reduced >= m.auroc_fp32 - limits.max_auroc_drop)) {
    add("the image AUROC falls from " + share(m.auroc_fp32) + " to " + share(m.auroc_reduced) +
        ", more than " + share(limits.max_auroc_drop));
  }
  m.passed = why.empty();
  m.reasons = std::move(why);
  return m;
}

void add_precision_metadata(std::map<std::string, std::string>& metadata,
                            const PrecisionGateResult& g) {
  metadata["model.precision"] = to_string(g.precision);
  const std::string k = "model.metrics.precision_gate.";
  metadata[k + "images"] = std::to_string(g.images);
  metadata[k + "disagreements"] = std::to_string(g.disagreements);
  metadata[k + "disagreement"] = share(g.disagreement);
  metadata[k + "passed"] = std::string(g.passed ? "1" : "0");
  if (std::isfinite(g.escape_fp32)) {
    metadata[k + "escape_fp32"] = share(g.escape_fp32);
    metadata[k + "escape_reduced"] = share(g.escape_reduced);
  }
  if (std::isfinite(g.auroc_fp32)) {
    metadata[k + "auroc_fp32"] = share(g.auroc_fp32);
    metadata[k + "auroc_reduced"] = share(g.auroc_reduced);
  }
  if (!g.reasons.empty()) metadata[k + "reasons"] = g.reasons;
}

}  // namespace stoke
