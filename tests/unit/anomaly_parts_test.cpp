// PatchCore's parts against plain references: the resampling against
// PyTorch's values, the GEMM nearest-neighbour search against brute force,
// the coreset's determinism across thread counts and its greedy rule, the
// threshold and the AUROC, and the features through the inference plan
// against the layers' own eval forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "anomaly/coreset.hpp"
#include "anomaly/features.hpp"
#include "anomaly/knn.hpp"
#include "anomaly/resample.hpp"
#include "op_test_util.hpp"
#include "stoke/anomaly.hpp"
#include "stoke/threads.hpp"

namespace stoke::testing {
namespace {

using namespace stoke::anomaly_detail;

TEST(AnomalyResample, BilinearMatchesTorchAlignCornersFalse) {
  // F.interpolate(torch.tensor([[[[1., 2.], [3., 4.]]]]), size=(4, 4), mode="bilinear")
  const std::vector<float> in = {1, 2, 3, 4};
  const std::vector<float> torch = {1.00f, 1.25f, 1.75f, 2.00f, 1.50f, 1.75f, 2.25f, 2.50f,
                                    2.50f, 2.75f, 3.25f, 3.50f, 3.00f, 3.25f, 3.75f, 4.00f};
  const auto out = resize_bilinear(in, 1, 2, 2, 4, 4);
  ASSERT_EQ(out.size(), torch.size());
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_FLOAT_EQ(out[i], torch[i]) << i;
}

TEST(AnomalyResample, NearestTakesFloorOfScaledIndex) {
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};  // 2 x 3
  const auto out = resize_nearest(in, 2, 3, 4, 7);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 7; ++x)
      EXPECT_EQ(out[static_cast<std::size_t>(y * 7 + x)],
                in[static_cast<std::size_t>((y * 2 / 4) * 3 + (x * 3 / 7))]);
}

TEST(AnomalyResample, GaussianBlurKeepsConstantsAndSpreadsAnImpulse) {
  EXPECT_EQ(gaussian_kernel_size(4.0f), 33);  // anomalib: 2 * int(4 * 4 + 0.5) + 1
  const std::vector<float> flat(40 * 36, 2.5f);
  for (float v : gaussian_blur(flat, 40, 36, 4.0f)) EXPECT_NEAR(v, 2.5f, 1e-5f);
  std::vector<float> impulse(64 * 64, 0.0f);
  impulse[32 * 64 + 32] = 1.0f;
  const auto b = gaussian_blur(impulse, 64, 64, 4.0f);
  // The centre holds the 2-D Gaussian's peak 1 / (2 pi sigma^2) of a normalized 33-tap kernel.
  EXPECT_NEAR(b[32 * 64 + 32], 1.0 / (2.0 * M_PI * 16.0), 1e-4);
  EXPECT_NEAR(b[32 * 64 + 36] / b[32 * 64 + 32], std::exp(-16.0 / 32.0), 1e-4);
}

TEST(AnomalyKnn, ChunkedGemmMatchesBruteForce) {
  const std::int64_t rows = 300, width = 37, queries = 50;
  const auto bank = random_values(static_cast<std::size_t>(rows * width), 3);
  const auto q = random_values(static_cast<std::size_t>(queries * width), 4);
  // 4 KiB blocks: many bank chunks per query chunk.
  const BankSearch search(cpu_backend(), bank, rows, width, 4096);
  for (std::int64_t k : {1, 9}) {
    const Neighbours fast = search.nearest(q, queries, k);
    const Neighbours ref = nearest_brute_force(bank, rows, width, q, queries, k);
    for (std::size_t i = 0; i < ref.distances.size(); ++i) {
      EXPECT_NEAR(fast.distances[i], ref.distances[i], 1e-4f * (1.0f + ref.distances[i])) << i;
      EXPECT_EQ(fast.indices[i], ref.indices[i]) << i;
    }
  }
  EXPECT_THROW(search.nearest(q, queries, rows + 1), InvalidArgument);
}

TEST(AnomalyCoreset, SameIndicesForAnyThreadCountAndSerial) {
  const std::int64_t n = 2000, width = 24;
  const auto rows = random_values(static_cast<std::size_t>(n * width), 5);
  const int threads = thread_count();
  std::vector<std::vector<std::int64_t>> runs;
  for (int t : {1, 2, 4}) {
    set_thread_count(t);
    runs.push_back(k_center_greedy(rows, n, width, 150, 7));
  }
  set_thread_count(threads);
  runs.push_back(k_center_greedy(rows, n, width, 150, 7, {Execution::kSerial}));
  for (const auto& r : runs) EXPECT_EQ(r, runs.front());
  EXPECT_NE(k_center_greedy(rows, n, width, 150, 8), runs.front());
  const auto p1 = sparse_project(rows, n, width, 10, 3);
  EXPECT_EQ(sparse_project(rows, n, width, 10, 3, Execution::kSerial), p1);
}

// patches_per_image's draw: distinct ascending positions, a function of (seed,
// image) only, so a batch of images samples as the images one by one.
TEST(AnomalyCoreset, SampledPositionsAreSeededDistinctAndBatchIndependent) {
  const std::int64_t positions = 784, keep = 32, width = 3, images = 5;
  const auto a = sampled_positions(positions, keep, 9, 4);
  ASSERT_EQ(a.size(), static_cast<std::size_t>(keep));
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(std::adjacent_find(a.begin(), a.end()), a.end());
  EXPECT_GE(a.front(), 0);
  EXPECT_LT(a.back(), positions);
  EXPECT_EQ(sampled_positions(positions, keep, 9, 4), a);
  EXPECT_NE(sampled_positions(positions, keep, 9, 5), a);
  EXPECT_NE(sampled_positions(positions, keep, 10, 4), a);
  std::vector<std::int64_t> all(static_cast<std::size_t>(positions));
  for (std::int64_t i = 0; i < positions; ++i) all[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(sampled_positions(positions, positions, 9, 4), all);
  EXPECT_THROW(sampled_positions(positions, 0, 9, 4), InvalidArgument);
  EXPECT_THROW(sampled_positions(positions, positions + 1, 9, 4), InvalidArgument);
  const auto rows = random_values(static_cast<std::size_t>(images * positions * width), 3);
  std::vector<float> batch, one_by_one;
  append_sampled_rows(rows, images, positions, width, keep, 7, 9, batch);
  for (std::int64_t i = 0; i < images; ++i) {
    const auto first = static_cast<std::size_t>(i * positions * width);
    append_sampled_rows(
        std::span<const float>(rows).subspan(first, static_cast<std::size_t>(positions * width)), 1,
        positions, width, keep, 7 + static_cast<std::uint64_t>(i), 9, one_by_one);
  }
  ASSERT_EQ(batch.size(), static_cast<std::size_t>(images * keep * width));
  EXPECT_EQ(batch, one_by_one);
  const auto p7 = sampled_positions(positions, keep, 9, 7);  // image 7's rows come first
  for (std::int64_t k = 0; k < keep; ++k) {
    for (std::int64_t c = 0; c < width; ++c) {
      EXPECT_EQ(batch[static_cast<std::size_t>(k * width + c)],
                rows[static_cast<std::size_t>(p7[static_cast<std::size_t>(k)] * width + c)]);
    }
  }
  EXPECT_THROW(append_sampled_rows(rows, images + 1, positions, width, keep, 0, 9, batch),
               InvalidArgument);
}

// Rows in tight clusters (as patches of good parts are), where the triangle
// inequality spares most distances, and uniform noise, where it spares few:
// the same indices as the exhaustive search either way.
TEST(AnomalyCoreset, PruningKeepsTheExhaustiveSearchsIndices) {
  const std::int64_t n = 6000, width = 48, clusters = 40;
  const auto noise = random_values(static_cast<std::size_t>(n * width), 11);
  const auto middles = random_values(static_cast<std::size_t>(clusters * width), 12);
  std::vector<float> clustered(noise.size());
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < width; ++c)
      clustered[static_cast<std::size_t>(r * width + c)] =
          10.0f * middles[static_cast<std::size_t>((r % clusters) * width + c)] +
          0.05f * noise[static_cast<std::size_t>(r * width + c)];
  for (const std::vector<float>* rows : {&std::as_const(clustered), &noise}) {
    std::uint64_t pruned_count = 0, exhaustive_count = 0;
    const auto pruned =
        k_center_greedy(*rows, n, width, 300, 3, {Execution::kParallel, true, &pruned_count});
    const auto exhaustive =
        k_center_greedy(*rows, n, width, 300, 3, {Execution::kParallel, false, &exhaustive_count});
    EXPECT_EQ(pruned, exhaustive);
    EXPECT_EQ(exhaustive_count, static_cast<std::uint64_t>(n) * 299);
    EXPECT_LE(pruned_count, exhaustive_count);
    if (rows == &clustered) {
      EXPECT_LT(pruned_count, exhaustive_count / 4) << "the clusters spare most distances";
    }
  }
}

TEST(AnomalyCoreset, EachPickIsTheFarthestFromThoseBefore) {
  const std::int64_t n = 400, width = 5;
  const auto rows = random_values(static_cast<std::size_t>(n * width), 9);
  const auto chosen = k_center_greedy(rows, n, width, 12, 1);
  auto dist = [&](std::int64_t a, std::int64_t b) {
    double s = 0;
    for (std::int64_t c = 0; c < width; ++c) {
      const double d = rows[static_cast<std::size_t>(a * width + c)] -
                       rows[static_cast<std::size_t>(b * width + c)];
      s += d * d;
    }
    return std::sqrt(s);
  };
  for (std::size_t i = 1; i < chosen.size(); ++i) {
    auto min_to_chosen = [&](std::int64_t r) {
      double m = INFINITY;
      for (std::size_t j = 0; j < i; ++j) m = std::min(m, dist(r, chosen[j]));
      return m;
    };
    const double picked = min_to_chosen(chosen[i]);
    for (std::int64_t r = 0; r < n; ++r) ASSERT_LE(min_to_chosen(r), picked + 1e-5) << i;
  }
  EXPECT_EQ(projection_dim(100000, 1536),
            static_cast<std::int64_t>(4 * std::log(100000.0) / (0.405 - 0.243)));
}

TEST(AnomalyThreshold, RejectsAtMostTheTargetShareOfGoodParts) {
  std::vector<float> good;
  for (int i = 0; i < 400; ++i) good.push_back(static_cast<float>((i * 37) % 400));
  for (double target : {0.0, 0.005, 0.05, 0.5}) {
    const float t = anomaly::threshold_at_false_reject(good, target);
    const auto above = std::count_if(good.begin(), good.end(), [&](float s) { return s > t; });
    EXPECT_LE(above, static_cast<long>(target * 400)) << target;
    EXPECT_GE(above + 1, static_cast<long>(target * 400)) << target;  // and not far fewer
  }
  EXPECT_THROW(anomaly::threshold_at_false_reject({}, 0.01), InvalidArgument);
  EXPECT_THROW(anomaly::threshold_at_false_reject({1.0f}, 1.0), InvalidArgument);
  const std::vector<float> g = {1, 2, 3}, d = {4, 5}, same = {2, 2};
  EXPECT_DOUBLE_EQ(anomaly::image_auroc(g, d), 1.0);
  EXPECT_DOUBLE_EQ(anomaly::image_auroc(d, g), 0.0);
  EXPECT_DOUBLE_EQ(anomaly::image_auroc(same, same), 0.5);
}

// The escape threshold passes at most floor(target x n) defects as good, and is
// the highest such: the next defect up is caught.
TEST(AnomalyThreshold, EscapeTargetPassesAtMostItsShareOfDefects) {
  const std::vector<float> defects = {5.0f, 1.0f, 3.0f, 3.0f, 9.0f, 7.0f, 2.0f, 8.0f, 4.0f, 6.0f};
  for (const double target : {0.0, 0.05, 0.1, 0.25, 0.5, 0.95}) {
    const float t = anomaly::threshold_at_escape(defects, target);
    const auto escaped =
        std::count_if(defects.begin(), defects.end(), [&](float d) { return d <= t; });
    const auto allowed =
        static_cast<long>(std::floor(target * static_cast<double>(defects.size())));
    EXPECT_LE(escaped, allowed) << target;
    // Raising it to the next defect's score lets one more pass: it is the highest.
    const auto at_next = std::count_if(defects.begin(), defects.end(),
                                       [&](float d) { return d <= std::nextafter(t, 1e9f); });
    EXPECT_GT(at_next, allowed) << target;
  }
  EXPECT_LT(anomaly::threshold_at_escape(defects, 0.0), 1.0f) << "every defect caught";
  EXPECT_THROW(anomaly::threshold_at_escape({}, 0.1), InvalidArgument);
  EXPECT_THROW(anomaly::threshold_at_escape({1.0f}, 1.0), InvalidArgument);
  EXPECT_THROW(anomaly::threshold_at_escape({NAN}, 0.1), InvalidArgument);
}

// Naive AvgPool2d(3, 1, 1) with the padding counted, on (N, C, H, W).
std::vector<float> pool_reference(const std::vector<float>& x, const Shape& s) {
  std::vector<float> y(x.size());
  const std::int64_t planes = s[0] * s[1], h = s[2], w = s[3];
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t i = 0; i < h; ++i)
      for (std::int64_t j = 0; j < w; ++j) {
        double acc = 0;
        for (std::int64_t di = -1; di <= 1; ++di)
          for (std::int64_t dj = -1; dj <= 1; ++dj)
            if (i + di >= 0 && i + di < h && j + dj >= 0 && j + dj < w)
              acc += x[static_cast<std::size_t>((p * h + i + di) * w + j + dj)];
        y[static_cast<std::size_t>((p * h + i) * w + j)] = static_cast<float>(acc / 9.0);
      }
  return y;
}

TEST(AnomalyFeatures, PlanFeaturesEqualTheLayersOwnForward) {
  for (auto arch : {nn::Architecture::kResNet18, nn::Architecture::kWideResNet50_2}) {
    nn::ModelSpec spec;
    spec.architecture = arch;
    spec.width_multiplier = arch == nn::Architecture::kResNet18 ? 0.25f : 0.125f;
    spec.in_channels = 3;
    spec.height = spec.width = 64;
    spec.classes = 4;
    auto model = nn::build_model(cpu_backend(), spec, 21);
    // Non-trivial batch-norm statistics, so that the fold matters.
    for (auto& b : model->named_buffers()) {
      auto v = random_values(static_cast<std::size_t>(b.tensor.numel()), 2, 0.5f, 1.5f);
      b.tensor.copy_from_host(v.data());
    }
    model->parameters_changed();
    const auto x = random_values(static_cast<std::size_t>(2 * 3 * 64 * 64), 6);
    FeatureExtractor fx(*model);
    const anomaly::Embeddings e = fx.embed(x, 2);
    Tensor t(cpu_backend(), model->input_shape(2));
    t.copy_from_host(x.data());
    Tensor cur = t;
    std::vector<float> l2, l3;
    Shape s2, s3;
    for (const auto& layer : model->network().layers()) {
      cur = layer->forward(cur, false);
      if (layer->name() == "layer2") l2 = pool_reference(cur.to_vector(), s2 = cur.shape());
      if (layer->name() == "layer3") {
        l3 = pool_reference(cur.to_vector(), s3 = cur.shape());
        break;
      }
    }
    const auto up = resize_bilinear(l3, s3[0] * s3[1], s3[2], s3[3], s2[2], s2[3]);
    ASSERT_EQ(e.width, s2[1] + s3[1]);
    ASSERT_EQ(e.grid_h, s2[2]);
    const std::int64_t hw = s2[2] * s2[3];
    double worst = 0, scale = 0;
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t pos = 0; pos < hw; ++pos)
        for (std::int64_t c = 0; c < e.width; ++c) {
          const float ref = c < s2[1]
                                ? l2[static_cast<std::size_t>((n * s2[1] + c) * hw + pos)]
                                : up[static_cast<std::size_t>((n * s3[1] + c - s2[1]) * hw + pos)];
          const float got = e.rows[static_cast<std::size_t>((n * hw + pos) * e.width + c)];
          worst = std::max(worst, static_cast<double>(std::fabs(got - ref)));
          scale = std::max(scale, static_cast<double>(std::fabs(ref)));
        }
    EXPECT_LE(worst, 1e-4 * std::max(1.0, scale)) << nn::architecture_name(arch);
  }
}

}  // namespace
}  // namespace stoke::testing
