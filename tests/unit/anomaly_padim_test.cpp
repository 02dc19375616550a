// PaDiM (anomaly/padim.hpp and PatchCoreOptions::method = kPadim): the
// Gaussians and Mahalanobis distances against a naive double-precision
// reference, the channel subset, determinism for any thread count, and the
// model end to end on the CPU backend: a painted spot found, the memory cap,
// the model file round trip and crafted files refused naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <filesystem>

#include "anomaly/padim.hpp"
#include "op_test_util.hpp"
#include "stoke/anomaly.hpp"
#include "stoke/backend.hpp"
#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/threads.hpp"
#include "unit/anomaly_fixture.hpp"

namespace stoke::testing {
namespace {

namespace fs = std::filesystem;
using namespace stoke::anomaly_detail;

// ---- The plain reference: mean, covariance and a Gauss-Jordan inverse in double.

struct NaiveGaussian {
  std::vector<double> mean, inv;  // features; features x features
};

NaiveGaussian naive_fit(const anomaly::Embeddings& e, std::int64_t pos) {
  const std::int64_t n = e.count, k = e.width, positions = e.grid_h * e.grid_w;
  const auto at = [&](std::int64_t i, std::int64_t c) {
    return static_cast<double>(e.rows[static_cast<std::size_t>((i * positions + pos) * k + c)]);
  };
  NaiveGaussian g;
  g.mean.assign(static_cast<std::size_t>(k), 0.0);
  for (std::int64_t c = 0; c < k; ++c) {
    for (std::int64_t i = 0; i < n; ++i) g.mean[static_cast<std::size_t>(c)] += at(i, c);
    g.mean[static_cast<std::size_t>(c)] /= static_cast<double>(n);
  }
  // [cov | I] -> [I | cov^-1] by Gauss-Jordan with partial pivoting.
  const std::int64_t w = 2 * k;
  std::vector<double> m(static_cast<std::size_t>(k * w), 0.0);
  for (std::int64_t a = 0; a < k; ++a) {
    for (std::int64_t b = 0; b < k; ++b) {
      double s = 0.0;
      for (std::int64_t i = 0; i < n; ++i)
        s += (at(i, a) - g.mean[static_cast<std::size_t>(a)]) *
             (at(i, b) - g.mean[static_cast<std::size_t>(b)]);
      m[static_cast<std::size_t>(a * w + b)] =
          s / static_cast<double>(n - 1) + (a == b ? 0.01 + 1e-5 : 0.0);
    }
    m[static_cast<std::size_t>(a * w + k + a)] = 1.0;
  }
  for (std::int64_t col = 0; col < k; ++col) {
    std::int64_t pivot = col;
    for (std::int64_t r = col + 1; r < k; ++r)
      if (std::fabs(m[static_cast<std::size_t>(r * w + col)]) >
          std::fabs(m[static_cast<std::size_t>(pivot * w + col)]))
        pivot = r;
    for (std::int64_t c = 0; c < w; ++c)
      std::swap(m[static_cast<std::size_t>(col * w + c)],
                m[static_cast<std::size_t>(pivot * w + c)]);
    const double d = m[static_cast<std::size_t>(col * w + col)];
    for (std::int64_t c = 0; c < w; ++c) m[static_cast<std::size_t>(col * w + c)] /= d;
    for (std::int64_t r = 0; r < k; ++r) {
      if (r == col) continue;
      const double f = m[static_cast<std::size_t>(r * w + col)];
      for (std::int64_t c = 0; c < w; ++c)
        m[static_cast<std::size_t>(r * w + c)] -= f * m[static_cast<std::size_t>(col * w + c)];
    }
  }
  g.inv.resize(static_cast<std::size_t>(k * k));
  for (std::int64_t a = 0; a < k; ++a)
    for (std::int64_t b = 0; b < k; ++b)
      g.inv[static_cast<std::size_t>(a * k + b)] = m[static_cast<std::size_t>(a * w + k + b)];
  return g;
}

double naive_distance(const NaiveGaussian& g, const float* x, std::int64_t k) {
  double s = 0.0;
  for (std::int64_t a = 0; a < k; ++a)
    for (std::int64_t b = 0; b < k; ++b)
      s += (x[a] - g.mean[static_cast<std::size_t>(a)]) *
           g.inv[static_cast<std::size_t>(a * k + b)] *
           (x[b] - g.mean[static_cast<std::size_t>(b)]);
  return std::sqrt(std::max(0.0, s));
}

anomaly::Embeddings random_embeddings(std::int64_t count, std::int64_t gh, std::int64_t gw,
                                      std::int64_t width, std::uint32_t seed) {
  anomaly::Embeddings e{count, gh, gw, width, {}};
  e.rows = random_values(static_cast<std::size_t>(count * gh * gw * width), seed, -2.0f, 3.0f);
  return e;
}

// Fewer images than features (the 0.01 I floor carries the covariance) and more.
TEST(AnomalyPadim, GaussiansAndDistancesMatchANaiveDoubleReference) {
  for (const auto& [count, width] : {std::pair<int, int>{3, 8}, {9, 5}}) {
    const anomaly::Embeddings e = random_embeddings(count, 3, 4, width, 11);
    const Gaussians g = fit_gaussians(e);
    ASSERT_EQ(g.positions(), 12);
    ASSERT_EQ(g.features, width);
    const anomaly::Embeddings query = random_embeddings(1, 3, 4, width, 12);
    const std::vector<float> got = mahalanobis(g, query.rows);
    const std::vector<float> inv = full_inverse(g);
    for (std::int64_t p = 0; p < 12; ++p) {
      const NaiveGaussian ref = naive_fit(e, p);
      double scale = 0.0;  // the inverse's largest entry: float rounding is relative to it
      for (double v : ref.inv) scale = std::max(scale, std::fabs(v));
      for (std::int64_t c = 0; c < width; ++c)
        EXPECT_NEAR(g.mean[static_cast<std::size_t>(p * width + c)],
                    ref.mean[static_cast<std::size_t>(c)], 4 * FLT_EPSILON * 3.0)
            << "position " << p;
      for (std::int64_t i = 0; i < width * width; ++i)
        EXPECT_NEAR(inv[static_cast<std::size_t>(p * width * width + i)],
                    ref.inv[static_cast<std::size_t>(i)], 8 * FLT_EPSILON * scale)
            << "position " << p << " entry " << i << " (" << count << " images)";
      const double want = naive_distance(ref, query.rows.data() + p * width, width);
      EXPECT_NEAR(got[static_cast<std::size_t>(p)], want, 1e-5 * std::max(1.0, want))
          << "position " << p << " (" << count << " images)";
    }
  }
}

TEST(AnomalyPadim, SameBitsForAnyThreadCountAndSerial) {
  const anomaly::Embeddings e = random_embeddings(6, 5, 7, 24, 3);
  const anomaly::Embeddings query = random_embeddings(1, 5, 7, 24, 4);
  const int threads = thread_count();
  std::vector<Gaussians> fits;
  std::vector<std::vector<float>> distances;
  for (int t : {1, 2, 4}) {
    set_thread_count(t);
    fits.push_back(fit_gaussians(e));
    distances.push_back(mahalanobis(fits.back(), query.rows));
  }
  set_thread_count(threads);
  fits.push_back(fit_gaussians(e, Execution::kSerial));
  distances.push_back(mahalanobis(fits.back(), query.rows, Execution::kSerial));
  for (std::size_t i = 1; i < fits.size(); ++i) {
    EXPECT_EQ(fits[i].mean, fits[0].mean);
    EXPECT_EQ(fits[i].inv_upper, fits[0].inv_upper);
    EXPECT_EQ(distances[i], distances[0]);
  }
}

TEST(AnomalyPadim, ChannelSubsetIsSeededAscendingAndDistinct) {
  const auto a = padim_channels(448, 100, 0);
  ASSERT_EQ(a.size(), 100u);
  EXPECT_TRUE(std::adjacent_find(a.begin(), a.end(), std::greater_equal<>()) == a.end());
  EXPECT_GE(a.front(), 0);
  EXPECT_LT(a.back(), 448);
  EXPECT_EQ(padim_channels(448, 100, 0), a);
  EXPECT_NE(padim_channels(448, 100, 1), a);
  EXPECT_EQ(padim_channels(5, 5, 9), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_THROW(padim_channels(448, 449, 0), InvalidArgument);
  EXPECT_THROW(padim_channels(448, 0, 0), InvalidArgument);
  // anomalib's defaults, and the rule for the backbones and widths it has none for.
  EXPECT_EQ(anomaly::padim_default_features(nn::Architecture::kResNet18, 448), 100);
  EXPECT_EQ(anomaly::padim_default_features(nn::Architecture::kWideResNet50_2, 1792), 550);
  EXPECT_EQ(anomaly::padim_default_features(nn::Architecture::kResNet34, 448), 100);
  EXPECT_EQ(anomaly::padim_default_features(nn::Architecture::kResNet50, 1792), 550);
  EXPECT_EQ(anomaly::padim_default_features(nn::Architecture::kResNet18, 224), 50);
  // The selection keeps those channels of every row, in order.
  anomaly::Embeddings e = random_embeddings(2, 2, 3, 10, 5);
  const anomaly::Embeddings before = e;
  const std::vector<std::int64_t> keep = {1, 4, 9};
  select_channels(e, keep);
  ASSERT_EQ(e.width, 3);
  for (std::size_t r = 0; r < 12; ++r)
    for (std::size_t i = 0; i < 3; ++i)
      EXPECT_EQ(e.rows[r * 3 + i], before.rows[r * 10 + static_cast<std::size_t>(keep[i])]);
  anomaly::Embeddings f = before;
  EXPECT_THROW(select_channels(f, std::vector<std::int64_t>{4, 1}), InvalidArgument);
}

TEST(AnomalyPadim, OneImageIsRefusedNamingTheMinimum) {
  try {
    fit_gaussians(random_embeddings(1, 2, 2, 4, 1));
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("at least 2"), std::string::npos) << e.what();
  }
}

// ---- End to end on the CPU backend (random ResNet-18 at half width).

anomaly::PatchCoreOptions padim_options() {
  anomaly::PatchCoreOptions o;
  o.method = anomaly::AnomalyMethod::kPadim;
  o.seed = 4;
  return o;
}

class AnomalyPadimModel : public SyntheticParts {};

// A dark 12 x 12 spot painted into held-out good parts (what random features
// see; docs/anomaly.md): each spotted part scores above itself unspotted and
// its map peaks on the spot.
TEST_F(AnomalyPadimModel, SpottedPartsScoreAboveThemselvesAndTheMapFindsTheSpot) {
  ASSERT_GE(good_.size(), 8u);
  anomaly::PatchCore core(anomaly_backbone(1), anomaly_preprocess(), padim_options());
  const std::vector<fs::path> train(good_.begin(), good_.end() - 4);
  core.fit(train);
  EXPECT_EQ(core.padim_channels().size(), 50u);  // of 32 + 64 + 128 channels
  EXPECT_EQ(core.padim_positions(), (kAnomalySize / 4) * (kAnomalySize / 4));
  EXPECT_EQ(core.bank_rows(), 0);
  for (auto it = good_.end() - 4; it != good_.end(); ++it) {
    std::vector<float> x = core.preprocess_file(*it);
    const anomaly::AnomalyResult clean = core.score_input(x);
    const int y0 = 20 + static_cast<int>(it - good_.begin()) % 3 * 20, x0 = 60;
    paint_spot(x, y0, x0);
    const anomaly::AnomalyResult spotted = core.score_input(x);
    EXPECT_GT(spotted.score, clean.score * 1.2f) << it->string();
    ASSERT_EQ(spotted.map.size(), static_cast<std::size_t>(kAnomalySize * kAnomalySize));
    const auto peak = std::max_element(spotted.map.begin(), spotted.map.end());
    EXPECT_EQ(*peak, spotted.score);  // the image score is the map's maximum
    const auto at = peak - spotted.map.begin();
    EXPECT_NEAR(static_cast<int>(at / kAnomalySize), y0 + 6, 12) << it->string();
    EXPECT_NEAR(static_cast<int>(at % kAnomalySize), x0 + 6, 12) << it->string();
  }
}

// The first embedding draws the subset from the whole width; later ones
// gather only those channels from the layers: the same rows.
TEST_F(AnomalyPadimModel, GatheredChannelsAreTheSubsetOfTheWholeEmbedding) {
  anomaly::PatchCore core(anomaly_backbone(1), anomaly_preprocess(), padim_options());
  std::vector<float> two = core.preprocess_file(good_[0]);
  const std::vector<float> second = core.preprocess_file(good_[1]);
  two.insert(two.end(), second.begin(), second.end());
  const anomaly::Embeddings first = core.embed(two, 2);  // whole, then select_channels
  ASSERT_EQ(first.width, 50);
  const std::vector<std::int64_t>& kept = core.padim_channels();
  // Channels from all three layers (32 + 64 + 128): each layer's gather runs.
  EXPECT_LT(kept.front(), 32);
  EXPECT_GE(kept.back(), 96);
  const anomaly::Embeddings gathered = core.embed(two, 2);
  EXPECT_EQ(gathered.count, 2);
  EXPECT_EQ(gathered.width, first.width);
  EXPECT_EQ(gathered.rows, first.rows);
}

TEST_F(AnomalyPadimModel, GaussiansOverTheMemoryCapNameTheOption) {
  anomaly::PatchCoreOptions o = padim_options();
  o.max_bank_bytes = 1 << 20;  // the Gaussians: 576 x 50^2 x 4 = 5.5 MiB
  anomaly::PatchCore core(anomaly_backbone(1), anomaly_preprocess(), o);
  try {
    core.fit({good_[0], good_[1]});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("Gaussians"), std::string::npos) << what;
    EXPECT_NE(what.find("max_bank_bytes (--max-bank)"), std::string::npos) << what;
  }
  anomaly::PatchCore one(anomaly_backbone(1), anomaly_preprocess(), padim_options());
  try {
    one.fit({good_[0]});
    FAIL() << "one image accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("at least 2"), std::string::npos) << e.what();
  }
}

// Writes `path`'s model again with metadata `key` set to `value` (a valid
// checkpoint: only the anomaly model's own checks can refuse it).
fs::path crafted(const fs::path& path, const fs::path& out, const std::string& key,
                 const std::string& value) {
  nn::CheckpointInfo info;
  auto model = nn::load_model(path.string(), cpu_backend(), &info);
  info.metadata[key] = value;
  nn::save_checkpoint(out.string(), *model, nullptr, info.metadata);
  return out;
}

void expect_refused(const fs::path& file, const std::string& key) {
  try {
    anomaly::PatchCore::load(file, cpu_backend());
    ADD_FAILURE() << key << ": no error";
  } catch (const CorruptFile& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
}

TEST_F(AnomalyPadimModel, SavedModelScoresBitIdenticallyAndCraftedFilesAreRefused) {
  anomaly::PatchCore core(anomaly_backbone(2), anomaly_preprocess(), padim_options());
  core.fit({good_[0], good_[1], good_[2]});
  core.calibrate({good_[3], good_[4]});
  const fs::path path = dir_ / "model.stoke";
  core.save(path);
  anomaly::PatchCore back = anomaly::PatchCore::load(path, cpu_backend());
  EXPECT_EQ(back.options().method, anomaly::AnomalyMethod::kPadim);
  EXPECT_EQ(back.padim_channels(), core.padim_channels());
  EXPECT_EQ(back.padim_positions(), core.padim_positions());
  EXPECT_EQ(back.threshold(), core.threshold());
  for (const fs::path& f : {defect_[0], good_[5]}) {
    const auto a = core.score_file(f), b = back.score_file(f);
    EXPECT_EQ(a.score, b.score) << f;
    EXPECT_EQ(a.map, b.map) << f;
    EXPECT_EQ(a.anomalous, b.anomalous) << f;
  }

  nn::CheckpointInfo info;
  nn::load_model(path.string(), cpu_backend(), &info);
  std::string cut = info.metadata["anomaly.padim.inv_covariance"];
  cut.resize(cut.size() - 4);
  expect_refused(crafted(path, dir_ / "a.stoke", "anomaly.padim.inv_covariance", cut),
                 "anomaly.padim.inv_covariance");
  std::string skew = info.metadata["anomaly.padim.inv_covariance"];
  skew[4] = static_cast<char>(skew[4] ^ 1);  // entry (0, 1) of position 0, not (1, 0)
  try {
    anomaly::PatchCore::load(crafted(path, dir_ / "s.stoke", "anomaly.padim.inv_covariance", skew),
                             cpu_backend());
    ADD_FAILURE() << "an asymmetric inverse accepted";
  } catch (const CorruptFile& e) {
    EXPECT_NE(std::string(e.what()).find("not symmetric at grid position 0"), std::string::npos)
        << e.what();
  }
  std::string mean = info.metadata["anomaly.padim.mean"];
  mean.resize(mean.size() / 2);
  expect_refused(crafted(path, dir_ / "b.stoke", "anomaly.padim.mean", mean), "anomaly.padim.mean");
  std::string channels = info.metadata["anomaly.padim.channels"];
  expect_refused(crafted(path, dir_ / "c.stoke", "anomaly.padim.channels",
                         channels.substr(0, channels.rfind(','))),
                 "anomaly.padim.channels");  // one index short
  expect_refused(crafted(path, dir_ / "d.stoke", "anomaly.padim.channels",
                         channels.substr(0, channels.rfind(',')) + ",224"),
                 "anomaly.padim.channels");  // outside the backbone's 224 channels
  expect_refused(crafted(path, dir_ / "e.stoke", "anomaly.padim.grid_h", "23"),
                 "anomaly.padim.grid_h");
  expect_refused(crafted(path, dir_ / "f.stoke", "anomaly.padim.features", "-1"),
                 "anomaly.padim.features");
  expect_refused(crafted(path, dir_ / "g.stoke", "anomaly.method", "padim2"), "anomaly.method");
  // The file itself cut short: the checkpoint's own checks.
  fs::copy_file(path, dir_ / "short.stoke");
  fs::resize_file(dir_ / "short.stoke", fs::file_size(path) / 2);
  EXPECT_THROW(anomaly::PatchCore::load(dir_ / "short.stoke", cpu_backend()), CorruptFile);
}

}  // namespace
}  // namespace stoke::testing
