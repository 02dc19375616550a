// The last finite state of a fit: a host copy of the model and optimizer
// tensors taken where the run stood finite (the fit's start, each epoch's
// end), so that a diverged run still leaves a stop checkpoint worth resuming
// from (with a lower learning rate) instead of a NaN model.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"

namespace stoke::detail {

class FiniteSnapshot {
 public:
  // Copies every tensor; `metadata` is the trainer state at this point.
  void capture(const nn::Model& model, const nn::Optimizer& optimizer,
               std::map<std::string, std::string> metadata);
  // Writes the copies back; false when nothing was captured.
  bool restore(nn::Model& model, nn::Optimizer& optimizer) const;
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }

 private:
  std::vector<std::vector<char>> tensors_;
  std::map<std::string, std::string> metadata_;
  bool captured_ = false;
};

}  // namespace stoke::detail
