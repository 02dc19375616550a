// The Dataset accessors every source shares (dataset.cpp, idx.cpp,
// buffers.cpp build the storage), the report's text and the splits.
#include <algorithm>
#include <cmath>

#include "data/dataset_storage.hpp"
#include "data/rng.hpp"
#include "stoke/error.hpp"

namespace stoke {
using data_detail::fnv1a;

// ---- Accessors ------------------------------------------------------------------

Dataset::Dataset() : storage_(std::make_shared<Storage>()) {}

Dataset Dataset::from_storage(std::shared_ptr<const Storage> storage) {
  Dataset d;
  const std::size_t n = storage->labels.size();
  d.storage_ = std::move(storage);
  d.rows_.resize(n);
  for (std::size_t i = 0; i < n; ++i) d.rows_[i] = static_cast<std::uint32_t>(i);
  return d;
}

std::size_t Dataset::size() const noexcept {
  return rows_.size();
}
const std::vector<std::string>& Dataset::class_names() const noexcept {
  return storage_->classes;
}
bool Dataset::in_memory() const noexcept {
  return !storage_->pixels.empty();
}
const DatasetReport& Dataset::report() const noexcept {
  return storage_->report;
}

bool Dataset::skip_corrupt() const noexcept {
  return storage_->skip_corrupt;
}

std::uint32_t Dataset::row(std::size_t index) const {
  if (index >= rows_.size()) {
    throw InvalidArgument("Dataset: index " + std::to_string(index) + " out of range (size " +
                          std::to_string(rows_.size()) + ")");
  }
  return rows_[index];
}

std::int32_t Dataset::label(std::size_t index) const {
  return storage_->labels[row(index)];
}
Split Dataset::split(std::size_t index) const {
  const auto r = row(index);
  return r < storage_->splits.size() ? storage_->splits[r] : Split::kNone;
}

std::string Dataset::path(std::size_t index) const {
  const auto r = row(index);
  if (in_memory()) return storage_->report.source + "#" + std::to_string(r);
  return storage_->paths[r];
}

const std::string& Dataset::file(std::size_t index) const {
  static const std::string kNone;
  const auto r = row(index);
  return in_memory() ? kNone : storage_->paths[r];
}

int Dataset::bit_depth(std::size_t index) const {
  const auto r = row(index);
  const auto& s = *storage_;
  if (!s.slots.empty()) return s.slots[r].bit_depth;
  return r < s.bit_depths.size() ? s.bit_depths[r] : 8;
}

ImageView Dataset::pixels(std::size_t index) const {
  const auto r = row(index);
  if (!in_memory()) return {};
  const auto& s = *storage_;
  if (!s.slots.empty()) {
    const auto& slot = s.slots[r];
    return {s.pixels.data() + slot.offset,
            slot.width,
            slot.height,
            slot.channels,
            static_cast<std::size_t>(slot.width) * slot.channels * (slot.bit_depth == 16 ? 2 : 1),
            slot.bit_depth};
  }
  const std::size_t bytes = static_cast<std::size_t>(s.pixel_width) * s.pixel_height;
  return {s.pixels.data() + r * bytes, s.pixel_width, s.pixel_height, 1,
          static_cast<std::size_t>(s.pixel_width)};
}

Dataset Dataset::subset(std::span<const std::size_t> indices) const {
  Dataset d;
  d.storage_ = storage_;
  d.rows_.reserve(indices.size());
  for (std::size_t i : indices) d.rows_.push_back(row(i));
  return d;
}

std::uint64_t Dataset::fingerprint() const {
  std::uint64_t h = fnv1a(storage_->classes.data(), 0);
  for (const auto& name : storage_->classes) h = fnv1a(name.data(), name.size() + 1, h);
  for (auto r : rows_) h = fnv1a(&storage_->identity[r], sizeof(std::uint64_t), h);
  return h;
}

std::string DatasetReport::to_string() const {
  std::string out = "dataset " + source + ": " + std::to_string(used) + " of " +
                    std::to_string(candidates) + " entries used";
  if (!skipped.empty()) out += ", " + std::to_string(skipped.size()) + " skipped";
  out += "\n";
  for (const auto& s : skipped) out += "  skipped " + s.path + ": " + s.reason + "\n";
  for (const auto& c : empty_classes) out += "  empty class: " + c + "\n";
  return out;
}

const char* to_string(Split split) noexcept {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kVal:
      return "val";
    case Split::kTest:
      return "test";
    case Split::kNone:
      break;
  }
  return "none";
}

// ---- Splits ---------------------------------------------------------------------

SplitIndices stratified_split(const Dataset& dataset, std::span<const double> percents,
                              std::uint64_t seed) {
  double sum = 0;
  for (double p : percents) sum += p;
  if ((percents.size() != 2 && percents.size() != 3) || std::abs(sum - 100.0) > 1e-6 ||
      std::any_of(percents.begin(), percents.end(), [](double p) { return p < 0; })) {
    throw InvalidArgument(
        "stratified_split: need 2 or 3 non-negative percentages summing to 100, got " +
        std::to_string(percents.size()) + " summing to " + std::to_string(sum));
  }
  std::vector<std::vector<std::size_t>> by_class(dataset.class_names().size());
  for (std::size_t i = 0; i < dataset.size(); ++i) by_class[dataset.label(i)].push_back(i);
  SplitIndices out;
  for (std::size_t c = 0; c < by_class.size(); ++c) {
    auto& members = by_class[c];
    data_detail::Rng rng(data_detail::hash_seed(seed, c, 0x5EED));
    rng.shuffle(members.begin(), members.end());
    const auto n = members.size();
    const auto n_val = static_cast<std::size_t>(std::floor(n * percents[1] / 100.0));
    const auto n_test =
        percents.size() == 3 ? static_cast<std::size_t>(std::floor(n * percents[2] / 100.0)) : 0;
    const auto n_train = n - n_val - n_test;
    out.train.insert(out.train.end(), members.begin(), members.begin() + n_train);
    out.val.insert(out.val.end(), members.begin() + n_train, members.begin() + n_train + n_val);
    out.test.insert(out.test.end(), members.begin() + n_train + n_val, members.end());
  }
  for (auto* v : {&out.train, &out.val, &out.test}) std::sort(v->begin(), v->end());
  return out;
}

SplitIndices manifest_split(const Dataset& dataset) {
  SplitIndices out;
  for (std::size_t i = 0; i < dataset.size(); ++i) {
    switch (dataset.split(i)) {
      case Split::kTrain:
        out.train.push_back(i);
        break;
      case Split::kVal:
        out.val.push_back(i);
        break;
      case Split::kTest:
        out.test.push_back(i);
        break;
      case Split::kNone:
        break;
    }
  }
  return out;
}

}  // namespace stoke
