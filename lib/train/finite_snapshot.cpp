#include "train/finite_snapshot.hpp"

#include <utility>

namespace stoke::detail {
namespace {

// Parameters, buffers and optimizer state in one fixed order.
std::vector<nn::NamedTensor> every_tensor(const nn::Model& model, const nn::Optimizer& optimizer) {
  std::vector<nn::NamedTensor> all = model.named_parameters();
  for (auto& t : model.named_buffers()) all.push_back(std::move(t));
  for (auto& t : optimizer.state()) all.push_back(std::move(t));
  return all;
}

}  // namespace

void FiniteSnapshot::capture(const nn::Model& model, const nn::Optimizer& optimizer,
                             std::map<std::string, std::string> metadata) {
  const auto all = every_tensor(model, optimizer);
  tensors_.resize(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    tensors_[i].resize(all[i].tensor.bytes());
    if (!tensors_[i].empty()) all[i].tensor.copy_to_host(tensors_[i].data());
  }
  metadata_ = std::move(metadata);
  captured_ = true;
}

bool FiniteSnapshot::restore(nn::Model& model, nn::Optimizer& optimizer) const {
  if (!captured_) return false;
  auto all = every_tensor(model, optimizer);
  if (all.size() != tensors_.size()) return false;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].tensor.bytes() != tensors_[i].size()) return false;
  }
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!tensors_[i].empty()) all[i].tensor.copy_from_host(tensors_[i].data());
  }
  return true;
}

}  // namespace stoke::detail
