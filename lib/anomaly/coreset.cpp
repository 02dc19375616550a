// Greedy k-center coreset (see coreset.hpp).
#include "anomaly/coreset.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "data/rng.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::anomaly_detail {

namespace {

double uniform01(data_detail::Rng& rng) {
  return static_cast<double>(rng.next() >> 11) * 0x1.0p-53;
}

constexpr std::size_t kGrain = 256;

// |a - b|^2 in float, in 16 lanes summed in a fixed order: the same bits on
// any thread count, and vectorized by the compiler (the projected rows are a
// few hundred wide; the double-precision euclidean_distance (anomaly/knn.hpp) is
// for the final neighbour distances).
float squared_distance(const float* a, const float* b, std::int64_t width) noexcept {
  constexpr std::int64_t kLanes = 16;
  float lane[kLanes] = {};
  std::int64_t c = 0;
  for (; c + kLanes <= width; c += kLanes) {
    for (std::int64_t k = 0; k < kLanes; ++k) {
      const float d = a[c + k] - b[c + k];
      lane[k] += d * d;
    }
  }
  for (std::int64_t k = 0; c < width; ++c, ++k) {
    const float d = a[c] - b[c];
    lane[k] += d * d;
  }
  float sum = 0.0f;
  for (float v : lane) sum += v;
  return sum;
}

// The pruning test's margin on |c - a| >= 2 |r - a|, in squared distances:
// (2 (1 + 1e-3))^2. Float rounding of a squared distance of a few hundred
// terms is below 1e-5 relative, so a skipped row's distance to the new
// center is at least 1.004 times its minimum, never below it.
constexpr float kPruneFactor = 4.008004f;

// The state the greedy search keeps per row: its squared distance to the
// nearest chosen center and that center's number in the chosen list.
struct RowState {
  std::vector<float> min_distance;
  std::vector<std::int32_t> nearest;
};

// Block b's rows: their (squared) distance to the new center `c` (number `j`
// in the chosen list) folded into the state, skipping rows the triangle
// inequality rules out (center_gap[a]: squared |c - center a|); returns the
// largest minimum (the lowest row on ties) and counts the distances computed.
std::pair<float, std::int64_t> farthest_in_block(std::span<const float> rows, std::int64_t width,
                                                 const float* c, std::int32_t j,
                                                 const std::vector<float>& center_gap, bool prune,
                                                 std::size_t block, std::int64_t count,
                                                 RowState& state, std::uint64_t& computed) {
  std::pair<float, std::int64_t> local{-1.0f, -1};
  const std::size_t end = std::min(static_cast<std::size_t>(count), (block + 1) * kGrain);
  for (std::size_t r = block * kGrain; r < end; ++r) {
    float& m = state.min_distance[r];
    const std::int32_t a = state.nearest[r];
    if (!(prune && a >= 0 && center_gap[static_cast<std::size_t>(a)] > kPruneFactor * m)) {
      const float d = squared_distance(rows.data() + r * static_cast<std::size_t>(width), c, width);
      ++computed;
      if (d < m) {
        m = d;
        state.nearest[r] = j;
      }
    }
    if (m > local.first) local = {m, static_cast<std::int64_t>(r)};
  }
  return local;
}

// The progress line: at every tenth of the coreset, with the time so far.
void progress(std::int64_t done, std::int64_t total, std::chrono::steady_clock::time_point start) {
  if (total < 10 || done % (total / 10) != 0) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log_info("anomaly: coreset " + std::to_string(done) + "/" + std::to_string(total) + " (" +
           std::to_string(static_cast<int>(s)) + " s)");
}

}  // namespace

std::int64_t projection_dim(std::int64_t samples, std::int64_t width) noexcept {
  const double eps = 0.9;
  const double denominator = eps * eps / 2.0 - eps * eps * eps / 3.0;
  const auto dim = static_cast<std::int64_t>(
      4.0 * std::log(static_cast<double>(std::max<std::int64_t>(samples, 2))) / denominator);
  return std::clamp<std::int64_t>(dim, 1, width);
}

std::vector<float> sparse_project(std::span<const float> rows, std::int64_t count,
                                  std::int64_t width, std::int64_t dim, std::uint64_t seed,
                                  Execution execution) {
  // Per output component: its non-zero input columns and signs.
  const double density = 1.0 / std::sqrt(static_cast<double>(width));
  const auto value =
      static_cast<float>(std::sqrt(1.0 / density) / std::sqrt(static_cast<double>(dim)));
  std::vector<std::vector<std::pair<std::int64_t, float>>> taps(static_cast<std::size_t>(dim));
  data_detail::Rng rng(seed ^ 0x5EED0F0C0BE5E7ull);
  for (auto& component : taps) {
    for (std::int64_t c = 0; c < width; ++c) {
      const double u = uniform01(rng);
      if (u < density / 2.0) {
        component.emplace_back(c, -value);
      } else if (u < density) {
        component.emplace_back(c, value);
      }
    }
  }
  std::vector<float> out(static_cast<std::size_t>(count * dim));
  parallel_for(
      0, static_cast<std::size_t>(count), kGrain,
      [&](std::size_t lo, std::size_t hi) {
        for (std::size_t r = lo; r < hi; ++r) {
          const float* row = rows.data() + r * static_cast<std::size_t>(width);
          for (std::int64_t d = 0; d < dim; ++d) {
            double acc = 0.0;
            for (const auto& [c, v] : taps[static_cast<std::size_t>(d)])
              acc += row[c] * static_cast<double>(v);
            out[r * static_cast<std::size_t>(dim) + static_cast<std::size_t>(d)] =
                static_cast<float>(acc);
          }
        }
      },
      execution);
  return out;
}

std::vector<std::int64_t> k_center_greedy(std::span<const float> rows, std::int64_t count,
                                          std::int64_t width, std::int64_t select,
                                          std::uint64_t seed, KCenterOptions options) {
  if (select < 1 || select > count) {
    throw InvalidArgument("anomaly: coreset of " + std::to_string(select) + " rows out of " +
                          std::to_string(count));
  }
  if (select > std::numeric_limits<std::int32_t>::max()) {
    throw InvalidArgument("anomaly: coreset of " + std::to_string(select) +
                          " rows: at most 2^31 - 1");
  }
  RowState state{
      std::vector<float>(static_cast<std::size_t>(count), std::numeric_limits<float>::infinity()),
      std::vector<std::int32_t>(static_cast<std::size_t>(count), -1)};
  data_detail::Rng rng(seed);
  std::int64_t center = static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(count));
  std::vector<std::int64_t> chosen{center};
  chosen.reserve(static_cast<std::size_t>(select));
  // The chosen rows, contiguous: the new center's squared distance to each.
  std::vector<float> centers;
  std::vector<float> center_gap;
  const std::size_t blocks = (static_cast<std::size_t>(count) + kGrain - 1) / kGrain;
  std::vector<std::pair<float, std::int64_t>> best(blocks);
  std::vector<std::uint64_t> computed(blocks, 0);
  const auto start = std::chrono::steady_clock::now();
  while (static_cast<std::int64_t>(chosen.size()) < select) {
    const float* c = rows.data() + center * width;
    const auto j = static_cast<std::int32_t>(chosen.size() - 1);
    if (options.prune) {
      center_gap.resize(static_cast<std::size_t>(j) + 1);
      parallel_for(
          0, static_cast<std::size_t>(j), kGrain / 4,
          [&](std::size_t first, std::size_t last) {
            for (std::size_t a = first; a < last; ++a)
              center_gap[a] = squared_distance(centers.data() + a * width, c, width);
          },
          options.execution);
      center_gap[static_cast<std::size_t>(j)] = 0.0f;
      centers.insert(centers.end(), c, c + width);
    }
    // Fixed blocks of kGrain rows, whatever chunks the arena makes of them.
    parallel_for(
        0, blocks, 1,
        [&](std::size_t first, std::size_t last) {
          for (std::size_t b = first; b < last; ++b) {
            best[b] = farthest_in_block(rows, width, c, j, center_gap, options.prune, b, count,
                                        state, computed[b]);
          }
        },
        options.execution);
    std::pair<float, std::int64_t> far{-1.0f, -1};
    for (const auto& b : best)
      if (b.first > far.first) far = b;
    center = far.second;
    state.min_distance[static_cast<std::size_t>(center)] = 0.0f;
    state.nearest[static_cast<std::size_t>(center)] = static_cast<std::int32_t>(chosen.size());
    chosen.push_back(center);
    progress(static_cast<std::int64_t>(chosen.size()), select, start);
  }
  std::uint64_t total = 0;
  for (std::uint64_t n : computed) total += n;
  if (options.distances) *options.distances = total;
  if (select > 1) {
    const double share =
        static_cast<double>(total) / (static_cast<double>(count) * static_cast<double>(select - 1));
    log_info("anomaly: coreset of " + std::to_string(select) + " rows from " +
             std::to_string(count) + ": " + std::to_string(static_cast<int>(100.0 * share + 0.5)) +
             " % of the row-to-center distances computed (the rest ruled out by the triangle "
             "inequality)");
  }
  return chosen;
}

std::vector<std::int64_t> sampled_positions(std::int64_t positions, std::int64_t keep,
                                            std::uint64_t seed, std::uint64_t image) {
  if (keep < 1 || keep > positions) {
    throw InvalidArgument("anomaly: patches_per_image " + std::to_string(keep) + " of " +
                          std::to_string(positions) + " grid positions");
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(positions));
  for (std::int64_t i = 0; i < positions; ++i) order[static_cast<std::size_t>(i)] = i;
  data_detail::Rng rng(data_detail::hash_seed(seed, 0x5A3F1E5ull, image));
  for (std::int64_t i = 0; i < keep; ++i) {
    const auto j =
        i + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(positions - i)));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  order.resize(static_cast<std::size_t>(keep));
  std::sort(order.begin(), order.end());
  return order;
}

void append_sampled_rows(std::span<const float> rows, std::int64_t images, std::int64_t positions,
                         std::int64_t width, std::int64_t keep, std::uint64_t first_image,
                         std::uint64_t seed, std::vector<float>& out) {
  if (rows.size() != static_cast<std::size_t>(images * positions * width)) {
    throw InvalidArgument("anomaly: " + std::to_string(rows.size()) + " floats are not " +
                          std::to_string(images) + " images of " + std::to_string(positions) +
                          " rows of " + std::to_string(width));
  }
  for (std::int64_t i = 0; i < images; ++i) {
    for (std::int64_t p :
         sampled_positions(positions, keep, seed, first_image + static_cast<std::uint64_t>(i))) {
      const auto begin = rows.begin() + (i * positions + p) * width;
      out.insert(out.end(), begin, begin + width);
    }
  }
}

}  // namespace stoke::anomaly_detail
