// Model: frozen layers and per-stage learning-rate multipliers (fine-tuning).
#include <cmath>

#include "nn/resnet.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/model.hpp"

namespace stoke::nn {

int Model::stage_count() const noexcept {
  if (spec_.is_segmentation()) return 0;  // one Unet layer: no stages to freeze (yet)
  return is_torchvision_resnet(spec_.architecture) ? 4 : static_cast<int>(spec_.widths.size());
}

int Model::stage_end(int stages) const {
  if (stages < 0 || stages > stage_count()) {
    throw InvalidArgument("Model: stage " + std::to_string(stages) + " is outside 0.." +
                          std::to_string(stage_count()) + " for " +
                          architecture_name(spec_.architecture));
  }
  if (stages == 0) return 0;
  if (is_torchvision_resnet(spec_.architecture))
    return 4 + stages;  // conv1, bn1, relu, maxpool, layer1..
  if (spec_.architecture == Architecture::kResNet)
    return 3 + stages * spec_.blocks_per_stage;  // stem conv, bn, relu
  return 4 * stages;                             // conv, bn, relu, pool per stage
}

void Model::freeze_layers(int layers) {
  const auto& all = net_->layers();
  if (layers < 0 || layers > static_cast<int>(all.size())) {
    throw InvalidArgument("Model::freeze_layers: " + std::to_string(layers) + " is outside 0.." +
                          std::to_string(all.size()));
  }
  frozen_ = layers;
  // The first trained layer needs no input gradient: nothing before it learns.
  for (std::size_t i = 0; i < all.size(); ++i)
    all[i]->set_input_grad(i != 0 && static_cast<int>(i) != frozen_);
}

void Model::set_stage_lr_multipliers(std::vector<float> multipliers) {
  if (static_cast<int>(multipliers.size()) > stage_count()) {
    throw InvalidArgument("Model: " + std::to_string(multipliers.size()) +
                          " learning-rate multipliers for " + std::to_string(stage_count()) +
                          " stages");
  }
  for (float m : multipliers) {
    if (!(m >= 0.0f) || !std::isfinite(m))
      throw InvalidArgument("Model: learning-rate multiplier " + std::to_string(m));
  }
  stage_lr_ = std::move(multipliers);
}

namespace {

// `groups` cut where a slot of another decay kind starts (slots: the first
// offset of each parameter tensor and whether it is decayed), adjacent pieces
// of one kind and multiplier merged.
std::vector<ParameterGroup> split_by_decay(
    const std::vector<ParameterGroup>& groups,
    const std::vector<std::pair<std::int64_t, bool>>& slots) {
  std::vector<ParameterGroup> out;
  for (const ParameterGroup& g : groups) {
    const std::int64_t end = g.offset + g.count;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const std::int64_t begin = std::max(g.offset, slots[i].first);
      const std::int64_t stop = std::min(end, i + 1 < slots.size() ? slots[i + 1].first : end);
      if (stop <= begin) continue;
      if (!out.empty() && out.back().decay == slots[i].second &&
          out.back().lr_multiplier == g.lr_multiplier &&
          out.back().offset + out.back().count == begin) {
        out.back().count += stop - begin;
      } else {
        out.push_back({begin, stop - begin, g.lr_multiplier, slots[i].second});
      }
    }
  }
  return out;
}

}  // namespace

std::vector<ParameterGroup> Model::parameter_groups(bool split_decay) const {
  std::vector<ParameterGroup> groups = parameter_groups_by_stage();
  if (!split_decay) return groups;
  std::vector<std::pair<std::int64_t, bool>> slots;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    slots.emplace_back(slot_offset(i), slots_[i].shape.size() > 1);
  if (!slots.empty()) slots.front().first = 0;
  return split_by_decay(groups, slots);
}

std::vector<ParameterGroup> Model::parameter_groups_by_stage() const {
  bool plain = frozen_ == 0;
  for (float m : stage_lr_) plain = plain && m == 1.0f;
  if (plain) return {{0, params_.numel(), 1.0f}};
  std::vector<ParameterGroup> groups;
  std::size_t first_slot = 0;
  int stage = 1;
  for (std::size_t i = 0; i < layer_slot_end_.size(); ++i) {
    while (stage <= stage_count() && static_cast<int>(i) >= stage_end(stage)) ++stage;
    const float m = stage <= static_cast<int>(stage_lr_.size())
                        ? stage_lr_[static_cast<std::size_t>(stage - 1)]
                        : 1.0f;
    const std::size_t end_slot = layer_slot_end_[i];
    if (static_cast<int>(i) >= frozen_ && end_slot > first_slot) {
      const std::int64_t begin = slot_offset(first_slot);
      const std::int64_t end = slot_offset(end_slot);
      if (!groups.empty() && groups.back().lr_multiplier == m &&
          groups.back().offset + groups.back().count == begin) {
        groups.back().count += end - begin;
      } else {
        groups.push_back({begin, end - begin, m});
      }
    }
    first_slot = end_slot;
  }
  return groups;
}

}  // namespace stoke::nn
