// PatchCore: fitting the memory bank and scoring images (stoke/anomaly.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "anomaly/coreset.hpp"
#include "anomaly/patchcore_impl.hpp"
#include "anomaly/resample.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::anomaly_detail {

float image_score(const Neighbours& nearest, std::span<const float> patches,
                  std::span<const float> bank, std::int64_t width, const BankSearch& search,
                  int num_neighbors) {
  const auto count = static_cast<std::int64_t>(nearest.distances.size()) / nearest.k;
  std::int64_t worst = 0;  // torch.argmax: the first maximum
  for (std::int64_t i = 1; i < count; ++i)
    if (nearest.distances[static_cast<std::size_t>(i * nearest.k)] >
        nearest.distances[static_cast<std::size_t>(worst * nearest.k)])
      worst = i;
  const float s = nearest.distances[static_cast<std::size_t>(worst * nearest.k)];
  const std::int64_t k = std::min<std::int64_t>(num_neighbors, search.rows());
  if (k <= 1) return s;
  const std::int64_t m = nearest.indices[static_cast<std::size_t>(worst * nearest.k)];
  const Neighbours support = search.nearest(
      bank.subspan(static_cast<std::size_t>(m * width), static_cast<std::size_t>(width)), 1, k);
  const float* patch = patches.data() + worst * width;
  std::vector<double> d(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < k; ++j) {
    d[static_cast<std::size_t>(j)] = euclidean_distance(
        patch, bank.data() + support.indices[static_cast<std::size_t>(j)] * width, width);
  }
  const double top = *std::max_element(d.begin(), d.end());
  double sum = 0.0;
  for (double v : d) sum += std::exp(v - top);
  const double weight = 1.0 - std::exp(d[0] - top) / sum;
  return static_cast<float>(weight * s);
}

}  // namespace stoke::anomaly_detail

namespace stoke::anomaly {

using anomaly_detail::FeatureExtractor;

namespace {

void check_options(const PatchCoreOptions& o) {
  if (!(o.coreset_ratio > 0.0 && o.coreset_ratio <= 1.0)) {
    throw InvalidArgument("anomaly: coreset_ratio " + std::to_string(o.coreset_ratio) +
                          " is not in (0, 1]");
  }
  if (o.num_neighbors < 1 || !(o.sigma > 0.0f) || !std::isfinite(o.sigma)) {
    throw InvalidArgument("anomaly: num_neighbors must be >= 1 and sigma > 0 (got " +
                          std::to_string(o.num_neighbors) + ", " + std::to_string(o.sigma) + ")");
  }
  if (!(o.target_false_reject >= 0.0 && o.target_false_reject < 1.0)) {
    throw InvalidArgument("anomaly: target_false_reject " + std::to_string(o.target_false_reject) +
                          " is not in [0, 1)");
  }
  if (o.tile < 0 || o.tile_stride < 0 || (o.tile == 0 && o.tile_stride != 0) ||
      o.tile_stride > o.tile || o.tile > 65536) {
    throw InvalidArgument("anomaly: tile " + std::to_string(o.tile) + ", tile_stride " +
                          std::to_string(o.tile_stride) +
                          " (a tile of 1 to 65536 pixels, a stride of 1 to the tile, or both 0)");
  }
}

std::string mib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::uint64_t bank_bytes(std::uint64_t patches, std::uint64_t width) noexcept {
  return patches * width * sizeof(float);
}

PatchCore::Impl::Impl(std::unique_ptr<nn::Model> m, PreprocessOptions p, PatchCoreOptions o)
    : model(std::move(m)), preprocess(std::move(p)), options(o) {
  if (!model) throw InvalidArgument("anomaly: null backbone");
  check_options(options);
  const nn::ModelSpec& s = model->spec();
  if (s.in_channels != preprocess.channels || s.height != preprocess.height ||
      s.width != preprocess.width) {
    throw InvalidArgument("anomaly: preprocessing gives " + std::to_string(preprocess.channels) +
                          "x" + std::to_string(preprocess.height) + "x" +
                          std::to_string(preprocess.width) + ", the backbone takes " +
                          std::to_string(s.in_channels) + "x" + std::to_string(s.height) + "x" +
                          std::to_string(s.width));
  }
  ModelInfo info;
  info.preprocess = preprocess;
  reader = std::make_unique<deploy_detail::SamplePreprocessor>(info, default_simd_level());
  if (options.tile > 0) {
    tiles = std::make_unique<anomaly_detail::TileReader>(
        preprocess, options.tile, options.tile_stride ? options.tile_stride : options.tile,
        kDefaultMaxImagePixels);
  }
}

std::int64_t PatchCore::Impl::inputs_of(const std::filesystem::path& file, std::vector<float>& out,
                                        anomaly_detail::TileGrid* grid) {
  if (tiles) {
    anomaly_detail::TileGrid g = tiles->read(file, out);
    const auto n = static_cast<std::int64_t>(g.origins.size());
    if (grid) *grid = std::move(g);
    return n;
  }
  out.resize(reader->sample_size());
  reader->from_file(file, out);
  return 1;
}

FeatureExtractor& PatchCore::Impl::features() {
  // Built on first use, after any weight import: the plan folds the weights it finds.
  if (!extractor) extractor = std::make_unique<FeatureExtractor>(*model, precision);
  return *extractor;
}

void PatchCore::Impl::set_bank(std::vector<float> rows, std::int64_t count, std::int64_t width) {
  search = std::make_unique<anomaly_detail::BankSearch>(model->backend(), rows, count, width);
  bank = std::move(rows);
  bank_rows = count;
  bank_width = width;
}

PatchCore::PatchCore(std::unique_ptr<nn::Model> backbone, PreprocessOptions preprocess,
                     PatchCoreOptions options)
    : impl_(std::make_unique<Impl>(std::move(backbone), std::move(preprocess), options)) {}
PatchCore::PatchCore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PatchCore::~PatchCore() = default;
PatchCore::PatchCore(PatchCore&&) noexcept = default;
PatchCore& PatchCore::operator=(PatchCore&&) noexcept = default;

double PatchCore::set_precision(Precision requested) {
  const Precision p = resolve_precision(impl_->model->backend(), requested);
  impl_->precision = p;
  impl_->extractor.reset();  // rebuilt in `p` on first use
  const std::vector<float>& ref = impl_->reference_input;
  if (ref.empty() || !impl_->search) return 0.0;
  const float score = score_input(ref).score;
  const float stored = impl_->reference_score;
  return std::isfinite(score) ? std::fabs(score - stored) / std::max(1.0f, std::fabs(stored))
                              : INFINITY;
}

Precision PatchCore::precision() const noexcept {
  return impl_->precision;
}

Embeddings PatchCore::embed(std::span<const float> inputs, std::int64_t count) {
  return impl_->features().embed(inputs, count);
}

std::vector<float> PatchCore::preprocess_file(const std::filesystem::path& file) {
  std::vector<float> x(impl_->reader->sample_size());
  impl_->reader->from_file(file, x);
  return x;
}

void PatchCore::fit(const std::vector<std::filesystem::path>& good_files) {
  if (good_files.empty()) throw InvalidArgument("anomaly: no good images to fit");
  const std::size_t sample = impl_->reader->sample_size();
  const std::uint64_t cap = impl_->options.max_bank_bytes;
  Embeddings all;
  std::vector<float> inputs, first;
  constexpr std::int64_t kBatch = 8;
  for (const auto& file : good_files) {
    const std::int64_t n = impl_->inputs_of(file, inputs);  // the image, or its tiles
    for (std::int64_t j = 0; j < n; j += kBatch) {
      const std::int64_t m = std::min(kBatch, n - j);
      Embeddings e =
          embed(std::span<const float>(inputs).subspan(static_cast<std::size_t>(j) * sample,
                                                       static_cast<std::size_t>(m) * sample),
                m);
      if (all.count == 0) {
        first.assign(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(sample));
        // The memory figure, before anything is stored: every patch of every
        // image (of every tile, counting the first image's for each).
        const auto patches = static_cast<std::uint64_t>(e.grid_h * e.grid_w) *
                             static_cast<std::uint64_t>(n) * good_files.size();
        const std::uint64_t bytes = bank_bytes(patches, static_cast<std::uint64_t>(e.width));
        log_info("anomaly: full bank " + std::to_string(patches) + " patches x " +
                 std::to_string(e.width) + " floats = " + mib(bytes) + " (cap " + mib(cap) + ")" +
                 (impl_->tiles ? ", " + std::to_string(n) + " tiles per image" : ""));
        if (bytes > cap) {
          throw InvalidArgument("anomaly: the full memory bank needs " + mib(bytes) + " (" +
                                std::to_string(patches) + " patches x " + std::to_string(e.width) +
                                " x 4 bytes), above max_bank_bytes = " + mib(cap) +
                                "; raise max_bank_bytes (--max-bank) or train on fewer images" +
                                (impl_->tiles ? " or larger tiles" : ""));
        }
        all = e;
        all.rows.reserve(static_cast<std::size_t>(patches * static_cast<std::uint64_t>(e.width)));
      } else {
        all.count += e.count;
        all.rows.insert(all.rows.end(), e.rows.begin(), e.rows.end());
        if (all.rows.size() * sizeof(float) > cap) {  // images larger than the first
          throw InvalidArgument("anomaly: the memory bank grew past max_bank_bytes = " + mib(cap) +
                                " at '" + file.string() +
                                "' (its images are larger than the first one's): raise "
                                "max_bank_bytes (--max-bank) or use larger tiles");
        }
      }
    }
  }
  fit_embeddings(all);
  impl_->reference_input = std::move(first);
  impl_->reference_score = score_input(impl_->reference_input).score;
}

void PatchCore::fit_embeddings(const Embeddings& e) {
  const std::int64_t n = e.count * e.grid_h * e.grid_w;
  if (n < 1 || e.rows.size() != static_cast<std::size_t>(n * e.width))
    throw InvalidArgument("anomaly: embeddings of " + std::to_string(e.rows.size()) +
                          " floats are not " + std::to_string(n) + " rows of " +
                          std::to_string(e.width));
  const PatchCoreOptions& o = impl_->options;
  const auto select = static_cast<std::int64_t>(static_cast<double>(n) * o.coreset_ratio);
  if (o.coreset_ratio >= 1.0 || select >= n) {
    impl_->set_bank(e.rows, n, e.width);
    return;
  }
  if (select < 1) {
    throw InvalidArgument("anomaly: coreset_ratio " + std::to_string(o.coreset_ratio) + " of " +
                          std::to_string(n) + " patches keeps none");
  }
  const std::int64_t dim = anomaly_detail::projection_dim(n, e.width);
  log_info("anomaly: coreset of " + std::to_string(select) + " from " + std::to_string(n) +
           " patches on a " + std::to_string(dim) + "-dimensional projection");
  const std::vector<float> projected =
      anomaly_detail::sparse_project(e.rows, n, e.width, dim, o.seed);
  const std::vector<std::int64_t> chosen =
      anomaly_detail::k_center_greedy(projected, n, dim, select, o.seed);
  std::vector<float> bank(static_cast<std::size_t>(select * e.width));
  for (std::size_t i = 0; i < chosen.size(); ++i)
    std::copy_n(e.rows.begin() + chosen[i] * e.width, e.width,
                bank.begin() + static_cast<std::ptrdiff_t>(i) * e.width);
  impl_->set_bank(std::move(bank), select, e.width);
}

AnomalyResult PatchCore::score_input(std::span<const float> input) {
  if (!impl_->search) throw InvalidArgument("anomaly: the memory bank is empty (fit first)");
  const Embeddings e = embed(input, 1);
  if (e.width != impl_->bank_width) {
    throw InvalidArgument("anomaly: embeddings of width " + std::to_string(e.width) +
                          ", the bank holds " + std::to_string(impl_->bank_width));
  }
  const std::int64_t patches = e.grid_h * e.grid_w;
  const anomaly_detail::Neighbours nearest = impl_->search->nearest(e.rows, patches, 1);
  AnomalyResult r;
  r.score = anomaly_detail::image_score(nearest, e.rows, impl_->bank, e.width, *impl_->search,
                                        impl_->options.num_neighbors);
  r.anomalous = r.score > impl_->threshold;
  r.height = impl_->preprocess.height;
  r.width = impl_->preprocess.width;
  r.map = anomaly_detail::gaussian_blur(
      anomaly_detail::resize_nearest(nearest.distances, e.grid_h, e.grid_w, r.height, r.width),
      r.height, r.width, impl_->options.sigma);
  return r;
}

AnomalyResult PatchCore::Impl::score_tiles(PatchCore& core, const anomaly_detail::TileGrid& grid,
                                           std::span<const float> inputs) {
  const std::size_t sample = reader->sample_size();
  AnomalyResult r;
  r.width = grid.image_width;
  r.height = grid.image_height;
  r.score = -std::numeric_limits<float>::infinity();
  const auto pixels = static_cast<std::size_t>(r.width) * static_cast<std::size_t>(r.height);
  std::vector<float> sum(pixels, 0.0f);
  std::vector<std::uint16_t> covered(pixels, 0);
  const int t = grid.tile;
  for (std::size_t i = 0; i < grid.origins.size(); ++i) {
    const AnomalyResult tile = core.score_input(inputs.subspan(i * sample, sample));
    r.score = std::max(r.score, tile.score);
    const std::vector<float> map =
        tile.height == t && tile.width == t
            ? tile.map
            : anomaly_detail::resize_bilinear(tile.map, 1, tile.height, tile.width, t, t);
    const auto [ox, oy] = grid.origins[i];
    for (int y = 0; y < t; ++y) {
      const std::size_t row = static_cast<std::size_t>(oy + y) * static_cast<std::size_t>(r.width);
      for (int x = 0; x < t; ++x) {
        sum[row + static_cast<std::size_t>(ox + x)] +=
            map[static_cast<std::size_t>(y) * static_cast<std::size_t>(t) +
                static_cast<std::size_t>(x)];
        ++covered[row + static_cast<std::size_t>(ox + x)];
      }
    }
  }
  r.map.resize(pixels);
  for (std::size_t p = 0; p < pixels; ++p) r.map[p] = sum[p] / static_cast<float>(covered[p]);
  r.anomalous = r.score > threshold;
  return r;
}

AnomalyResult PatchCore::score_file(const std::filesystem::path& file) {
  if (!impl_->tiles) return score_input(preprocess_file(file));
  std::vector<float> inputs;
  const anomaly_detail::TileGrid grid = impl_->tiles->read(file, inputs);
  return impl_->score_tiles(*this, grid, inputs);
}

AnomalyResult PatchCore::score_bytes(std::span<const std::uint8_t> bytes, std::string_view name) {
  std::vector<float> inputs;
  if (!impl_->tiles) {
    inputs.resize(impl_->reader->sample_size());
    impl_->reader->from_bytes(bytes, name, inputs);
    return score_input(inputs);
  }
  const anomaly_detail::TileGrid grid = impl_->tiles->read_bytes(bytes, name, inputs);
  return impl_->score_tiles(*this, grid, inputs);
}

AnomalyResult PatchCore::score_pixels(const PixelBuffer& pixels) {
  std::vector<float> inputs;
  if (!impl_->tiles) {
    inputs.resize(impl_->reader->sample_size());
    impl_->reader->from_pixels(pixels, inputs);
    return score_input(inputs);
  }
  Image scratch;
  const anomaly_detail::TileGrid grid =
      impl_->tiles->read_view(deploy_detail::pixel_view(pixels, scratch), "<pixels>", inputs);
  return impl_->score_tiles(*this, grid, inputs);
}

void PatchCore::calibrate(const std::vector<std::filesystem::path>& good_files) {
  std::vector<float> scores;
  for (const auto& f : good_files) scores.push_back(score_file(f).score);
  impl_->threshold =
      threshold_at_false_reject(std::move(scores), impl_->options.target_false_reject);
}

const PatchCoreOptions& PatchCore::options() const noexcept {
  return impl_->options;
}
const PreprocessOptions& PatchCore::preprocess() const noexcept {
  return impl_->preprocess;
}
const nn::ModelSpec& PatchCore::backbone_spec() const noexcept {
  return impl_->model->spec();
}
std::int64_t PatchCore::bank_rows() const noexcept {
  return impl_->bank_rows;
}
std::int64_t PatchCore::bank_width() const noexcept {
  return impl_->bank_width;
}
const std::vector<float>& PatchCore::bank() const noexcept {
  return impl_->bank;
}
float PatchCore::threshold() const noexcept {
  return impl_->threshold;
}
void PatchCore::set_threshold(float threshold) noexcept {
  impl_->threshold = threshold;
}

}  // namespace stoke::anomaly
