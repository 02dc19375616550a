// Per-class loss weights: explicit, or balanced from the training set's class
// counts (n / (classes present * count), as scikit-learn's "balanced").
#include <cmath>
#include <string>

#include "stoke/error.hpp"
#include "stoke/train.hpp"

namespace stoke {

std::vector<std::uint64_t> class_counts(const Dataset& data, int classes) {
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(std::max(classes, 0)), 0);
  for (std::size_t i = 0; i < data.size(); ++i) {
    const std::int32_t label = data.label(i);
    if (label < 0 || label >= classes) {
      throw InvalidArgument("class_counts: sample " + std::to_string(i) + " (" + data.path(i) +
                            ") has label " + std::to_string(label) + ", outside [0, " +
                            std::to_string(classes) + ")");
    }
    ++counts[static_cast<std::size_t>(label)];
  }
  return counts;
}

std::vector<float> balanced_class_weights(const std::vector<std::uint64_t>& counts) {
  std::uint64_t total = 0;
  std::size_t present = 0;
  for (std::uint64_t c : counts) {
    total += c;
    present += c > 0 ? 1 : 0;
  }
  std::vector<float> weights(counts.size(), 1.0f);  // absent classes: no sample to weigh
  for (std::size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] > 0) {
      weights[c] =
          static_cast<float>(static_cast<double>(total) /
                             (static_cast<double>(present) * static_cast<double>(counts[c])));
    }
  }
  return weights;
}

std::vector<float> resolve_class_weights(const TrainerOptions& o, const Dataset& train,
                                         int classes) {
  if (!o.class_weights.empty() && o.balanced_class_weights) {
    throw InvalidArgument(
        "TrainerOptions: class_weights and balanced_class_weights are both set; choose one");
  }
  if (o.balanced_class_weights) return balanced_class_weights(class_counts(train, classes));
  if (o.class_weights.empty()) return {};
  if (static_cast<int>(o.class_weights.size()) != classes) {
    throw InvalidArgument("TrainerOptions::class_weights has " +
                          std::to_string(o.class_weights.size()) + " weights; the model has " +
                          std::to_string(classes) + " classes");
  }
  for (std::size_t c = 0; c < o.class_weights.size(); ++c) {
    const float w = o.class_weights[c];
    if (!std::isfinite(w) || w < 0.0f) {
      throw InvalidArgument("TrainerOptions::class_weights[" + std::to_string(c) +
                            "] = " + std::to_string(w) + ": weights must be finite and >= 0");
    }
  }
  return o.class_weights;
}

}  // namespace stoke
