#include "data/sampler.hpp"

#include <map>

#include "data/rng.hpp"

namespace stoke::data_detail {
namespace {

// `count` draws from one class's samples: passes over its indices, each pass
// in a fresh seeded order, so a rare class repeats every sample before any
// twice.
void draw(const std::vector<std::size_t>& members, std::size_t count, std::uint64_t seed,
          std::vector<std::size_t>& out) {
  std::vector<std::size_t> pass = members;
  for (std::uint64_t round = 0; count > 0; ++round) {
    Rng(hash_seed(seed, round, 0xC1A55)).shuffle(pass.begin(), pass.end());
    const std::size_t take = std::min(count, pass.size());
    out.insert(out.end(), pass.begin(), pass.begin() + static_cast<std::ptrdiff_t>(take));
    count -= take;
  }
}

}  // namespace

std::vector<std::size_t> balanced_order(const Dataset& dataset, std::uint64_t seed,
                                        std::uint64_t epoch) {
  std::map<std::int32_t, std::vector<std::size_t>> by_class;
  for (std::size_t i = 0; i < dataset.size(); ++i) by_class[dataset.label(i)].push_back(i);
  std::vector<std::size_t> order;
  order.reserve(dataset.size());
  if (by_class.empty()) return order;
  const std::size_t classes = by_class.size();
  const std::size_t quota = dataset.size() / classes;
  // The remainder goes to classes picked per epoch, so no class is favoured.
  std::vector<std::size_t> extra(classes, 0);
  std::vector<std::size_t> pick(classes);
  for (std::size_t c = 0; c < classes; ++c) pick[c] = c;
  Rng(hash_seed(seed, epoch, 0xE7A)).shuffle(pick.begin(), pick.end());
  for (std::size_t r = 0; r < dataset.size() % classes; ++r) extra[pick[r]] = 1;
  std::size_t c = 0;
  for (const auto& [label, members] : by_class) {
    draw(members, quota + extra[c++],
         hash_seed(seed, epoch, 0xBA1A0000ull + static_cast<std::uint32_t>(label)), order);
  }
  Rng(hash_seed(seed, epoch, 0x5AFF1E)).shuffle(order.begin(), order.end());
  return order;
}

}  // namespace stoke::data_detail
