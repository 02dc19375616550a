// An anomaly model (stoke/anomaly.hpp): fitting PatchCore's memory bank or
// PaDiM's Gaussians, and scoring images through either.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "anomaly/coreset.hpp"
#include "anomaly/padim.hpp"
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

BankScorer::BankScorer(Backend& backend, std::vector<float> bank, std::int64_t rows,
                       std::int64_t width, int num_neighbors)
    : bank_(std::move(bank)),
      rows_(rows),
      width_(width),
      num_neighbors_(num_neighbors),
      search_(backend, bank_, rows, width) {}

anomaly::AnomalyResult BankScorer::score(const anomaly::Embeddings& e, int height, int width,
                                         float sigma) const {
  const std::int64_t patches = e.grid_h * e.grid_w;
  const Neighbours nearest = search_.nearest(e.rows, patches, 1);
  anomaly::AnomalyResult r;
  r.score = image_score(nearest, e.rows, bank_, e.width, search_, num_neighbors_);
  r.height = height;
  r.width = width;
  r.map = gaussian_blur(resize_nearest(nearest.distances, e.grid_h, e.grid_w, height, width),
                        height, width, sigma);
  return r;
}

}  // namespace stoke::anomaly_detail

namespace stoke::anomaly {

using anomaly_detail::FeatureExtractor;

namespace {

void check_options(const PatchCoreOptions& o) {
  if (o.method != AnomalyMethod::kPatchCore && o.method != AnomalyMethod::kPadim)
    throw InvalidArgument("anomaly: method is patchcore or padim");
  if (o.padim_features < 0 || o.padim_features > (1 << 20))
    throw InvalidArgument("anomaly: padim_features " + std::to_string(o.padim_features) +
                          " (0: the backbone's default, else the channels kept)");
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
  if (o.patches_per_image < 0 || (o.patches_per_image > 0 && o.method == AnomalyMethod::kPadim)) {
    throw InvalidArgument("anomaly: patches_per_image " + std::to_string(o.patches_per_image) +
                          " (0: every patch, or a positive count; PatchCore only)");
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

const char* method_name(AnomalyMethod method) noexcept {
  return method == AnomalyMethod::kPadim ? "padim" : "patchcore";
}

AnomalyMethod anomaly_method_from_name(std::string_view name) {
  if (name == "patchcore") return AnomalyMethod::kPatchCore;
  if (name == "padim") return AnomalyMethod::kPadim;
  throw InvalidArgument("anomaly: method '" + std::string(name) + "' is not patchcore or padim");
}

std::uint64_t bank_bytes(std::uint64_t patches, std::uint64_t width) noexcept {
  return patches * width * sizeof(float);
}

std::uint64_t gaussians_bytes(std::uint64_t positions, std::uint64_t features) noexcept {
  return positions * features * features * sizeof(float);
}

std::int64_t padim_default_features(nn::Architecture architecture,
                                    std::int64_t full_width) noexcept {
  // anomalib's 100 of 448 (resnet18) and 550 of 1792 (wide_resnet50_2), by block type.
  const bool basic =
      architecture == nn::Architecture::kResNet18 || architecture == nn::Architecture::kResNet34;
  const std::int64_t kept =
      basic ? (full_width * 100 + 224) / 448 : (full_width * 550 + 896) / 1792;
  return std::clamp<std::int64_t>(kept, 1, std::max<std::int64_t>(full_width, 1));
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
    tiles = std::make_unique<data_detail::TileReader>(
        preprocess, options.tile, options.tile_stride ? options.tile_stride : options.tile,
        kDefaultMaxImagePixels);
  }
}

std::int64_t PatchCore::Impl::inputs_of(const std::filesystem::path& file, std::vector<float>& out,
                                        data_detail::TileGrid* grid) {
  if (tiles) {
    data_detail::TileGrid g = tiles->read(file, out);
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
  if (!extractor) extractor = std::make_unique<FeatureExtractor>(*model, precision, options.method);
  return *extractor;
}

void PatchCore::Impl::set_bank(std::vector<float> rows, std::int64_t count, std::int64_t width) {
  bank = std::make_unique<anomaly_detail::BankScorer>(model->backend(), std::move(rows), count,
                                                      width, options.num_neighbors);
  scorer = bank.get();
}

void PatchCore::Impl::set_gaussians(anomaly_detail::Gaussians g) {
  gaussians = std::make_unique<anomaly_detail::GaussianScorer>(std::move(g));
  scorer = gaussians.get();
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
  if (ref.empty() || !impl_->scorer) return 0.0;
  const float score = score_input(ref).score;
  const float stored = impl_->reference_score;
  return std::isfinite(score) ? std::fabs(score - stored) / std::max(1.0f, std::fabs(stored))
                              : INFINITY;
}

Precision PatchCore::precision() const noexcept {
  return impl_->precision;
}

Embeddings PatchCore::embed(std::span<const float> inputs, std::int64_t count) {
  if (impl_->options.method != AnomalyMethod::kPadim || !impl_->channels.empty())
    return impl_->features().embed(inputs, count, impl_->channels);
  // PaDiM's first embedding: the whole width, then the seeded subset of it.
  Embeddings e = impl_->features().embed(inputs, count);
  const int asked = impl_->options.padim_features;
  const std::int64_t kept =
      asked > 0 ? asked : padim_default_features(impl_->model->spec().architecture, e.width);
  impl_->channels = anomaly_detail::padim_channels(e.width, kept, impl_->options.seed);
  anomaly_detail::select_channels(e, impl_->channels);
  return e;
}

std::vector<float> PatchCore::preprocess_file(const std::filesystem::path& file) {
  std::vector<float> x(impl_->reader->sample_size());
  impl_->reader->from_file(file, x);
  return x;
}

namespace {

// The memory figure of a fit, logged before anything is stored, and the cap:
// every patch of every image (of every tile, counting the first image's for
// each) for PatchCore's bank or PaDiM's training embeddings, and PaDiM's
// Gaussians. Returns the training embeddings' float count.
std::uint64_t check_fit_memory(const PatchCore::Impl& impl, const Embeddings& first,
                               std::int64_t tiles, std::size_t images) {
  const std::uint64_t cap = impl.options.max_bank_bytes;
  const auto positions = static_cast<std::uint64_t>(first.grid_h * first.grid_w);
  const auto width = static_cast<std::uint64_t>(first.width);
  const auto sampled = static_cast<std::uint64_t>(impl.options.patches_per_image);
  const std::uint64_t kept = sampled > 0 ? std::min(sampled, positions) : positions;
  const std::uint64_t patches = kept * static_cast<std::uint64_t>(tiles) * images;
  const std::uint64_t bytes = bank_bytes(patches, width);
  std::string tiled = impl.tiles ? ", " + std::to_string(tiles) + " tiles per image" : "";
  if (sampled > 0) {
    tiled +=
        ", patches_per_image " + std::to_string(kept) + " of " + std::to_string(positions) +
        " (all: " + mib(bank_bytes(positions * static_cast<std::uint64_t>(tiles) * images, width)) +
        ")";
  }
  const std::string raise =
      std::string("; raise max_bank_bytes (--max-bank)") +
      (impl.options.method == AnomalyMethod::kPadim ? ""
                                                    : ", sample fewer patches (patches_per_image, "
                                                      "--patches-per-image)") +
      " or train on fewer images";
  const bool padim = impl.options.method == AnomalyMethod::kPadim;
  if (padim) {
    const std::uint64_t g = gaussians_bytes(positions, width);
    log_info("anomaly: PaDiM Gaussians " + std::to_string(positions) + " positions x " +
             std::to_string(width) + "^2 floats = " + mib(g) + " (cap " + mib(cap) +
             "), fitted from " + std::to_string(patches) + " x " + std::to_string(width) +
             " training floats = " + mib(bytes) + tiled);
    if (g > cap) {
      throw InvalidArgument("anomaly: PaDiM's Gaussians need " + mib(g) + " (" +
                            std::to_string(positions) + " positions x " + std::to_string(width) +
                            " x " + std::to_string(width) +
                            " x 4 bytes), above max_bank_bytes = " + mib(cap) +
                            "; raise max_bank_bytes (--max-bank), keep fewer channels "
                            "(padim_features) or use a smaller input size");
    }
  } else {
    log_info("anomaly: full bank " + std::to_string(patches) + " patches x " +
             std::to_string(width) + " floats = " + mib(bytes) + " (cap " + mib(cap) + ")" + tiled);
  }
  if (bytes > cap) {
    throw InvalidArgument(std::string(padim ? "anomaly: PaDiM's training embeddings need "
                                            : "anomaly: the full memory bank needs ") +
                          mib(bytes) + " (" + std::to_string(patches) + " patches x " +
                          std::to_string(width) + " x 4 bytes), above max_bank_bytes = " +
                          mib(cap) + raise + (impl.tiles ? " or larger tiles" : ""));
  }
  return patches * width;
}

// The embedding's progress line: at every tenth of the files (of 100 or more).
void embed_progress(std::size_t done, std::size_t total,
                    std::chrono::steady_clock::time_point start) {
  if (total < 100 || done == 0 || done % (total / 10) != 0) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log_info("anomaly: embedded " + std::to_string(done) + "/" + std::to_string(total) + " images (" +
           std::to_string(static_cast<int>(s)) + " s)");
}

}  // namespace

void PatchCore::fit(const std::vector<std::filesystem::path>& good_files) {
  if (good_files.empty()) throw InvalidArgument("anomaly: no good images to fit");
  if (impl_->options.method == AnomalyMethod::kPadim && good_files.size() < 2) {
    throw InvalidArgument(
        "anomaly: PaDiM fits a covariance per position and needs at least 2 "
        "good images to train on, got 1");
  }
  const std::size_t sample = impl_->reader->sample_size();
  const std::uint64_t cap = impl_->options.max_bank_bytes;
  Embeddings all;
  std::vector<float> inputs, first;
  constexpr std::int64_t kBatch = 8;
  const std::int64_t sampled = impl_->options.patches_per_image;
  std::uint64_t image = 0;  // the images (tiles) embedded so far: sampled_positions' key
  const auto start = std::chrono::steady_clock::now();
  std::size_t files_done = 0;
  for (const auto& file : good_files) {
    embed_progress(files_done++, good_files.size(), start);
    const std::int64_t n = impl_->inputs_of(file, inputs);  // the image, or its tiles
    for (std::int64_t j = 0; j < n; j += kBatch) {
      const std::int64_t m = std::min(kBatch, n - j);
      Embeddings e =
          embed(std::span<const float>(inputs).subspan(static_cast<std::size_t>(j) * sample,
                                                       static_cast<std::size_t>(m) * sample),
                m);
      const std::int64_t positions = e.grid_h * e.grid_w;
      // The memory figure (of the sampled rows with patches_per_image) before any is kept.
      const std::uint64_t floats =
          all.count == 0 ? check_fit_memory(*impl_, e, n, good_files.size()) : 0;
      if (sampled > 0 && sampled < positions) {  // rows of one patch each: a 1 x 1 grid
        std::vector<float> kept;
        anomaly_detail::append_sampled_rows(e.rows, e.count, positions, e.width, sampled, image,
                                            impl_->options.seed, kept);
        image += static_cast<std::uint64_t>(e.count);
        e.rows = std::move(kept);
        e.count *= sampled;
        e.grid_h = e.grid_w = 1;
      }
      if (all.count == 0) {
        first.assign(inputs.begin(), inputs.begin() + static_cast<std::ptrdiff_t>(sample));
        all = e;
        all.rows.reserve(static_cast<std::size_t>(floats));
      } else {
        all.count += e.count;
        all.rows.insert(all.rows.end(), e.rows.begin(), e.rows.end());
        if (all.rows.size() * sizeof(float) > cap) {  // images larger than the first
          throw InvalidArgument("anomaly: the training embeddings grew past max_bank_bytes = " +
                                mib(cap) + " at '" + file.string() +
                                "' (its images are larger than the first one's): raise "
                                "max_bank_bytes (--max-bank) or use larger tiles");
        }
      }
    }
  }
  embed_progress(files_done, good_files.size(), start);
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
  if (o.method == AnomalyMethod::kPadim) {
    const std::uint64_t g = gaussians_bytes(static_cast<std::uint64_t>(e.grid_h * e.grid_w),
                                            static_cast<std::uint64_t>(e.width));
    if (g > o.max_bank_bytes) {
      throw InvalidArgument("anomaly: PaDiM's Gaussians need " + mib(g) +
                            ", above max_bank_bytes = " + mib(o.max_bank_bytes) +
                            "; raise max_bank_bytes (--max-bank)");
    }
    log_info("anomaly: fitting PaDiM's Gaussians at " + std::to_string(e.grid_h * e.grid_w) +
             " positions from " + std::to_string(e.count) + " images");
    impl_->set_gaussians(anomaly_detail::fit_gaussians(e));
    return;
  }
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
  if (!impl_->scorer) throw InvalidArgument("anomaly: nothing fitted yet (fit first)");
  const Embeddings e = embed(input, 1);
  if (e.width != impl_->scorer->width()) {
    throw InvalidArgument("anomaly: embeddings of width " + std::to_string(e.width) + ", the " +
                          method_name(impl_->options.method) + " model holds " +
                          std::to_string(impl_->scorer->width()));
  }
  AnomalyResult r = impl_->scorer->score(e, impl_->preprocess.height, impl_->preprocess.width,
                                         impl_->options.sigma);
  impl_->decide(r);
  return r;
}

AnomalyResult PatchCore::Impl::score_tiles(PatchCore& core, const data_detail::TileGrid& grid,
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
  decide(r);
  return r;
}

AnomalyResult PatchCore::score_file(const std::filesystem::path& file) {
  if (!impl_->tiles) return score_input(preprocess_file(file));
  std::vector<float> inputs;
  const data_detail::TileGrid grid = impl_->tiles->read(file, inputs);
  return impl_->score_tiles(*this, grid, inputs);
}

AnomalyResult PatchCore::score_bytes(std::span<const std::uint8_t> bytes, std::string_view name) {
  std::vector<float> inputs;
  if (!impl_->tiles) {
    inputs.resize(impl_->reader->sample_size());
    impl_->reader->from_bytes(bytes, name, inputs);
    return score_input(inputs);
  }
  const data_detail::TileGrid grid = impl_->tiles->read_bytes(bytes, name, inputs);
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
  const data_detail::TileGrid grid =
      impl_->tiles->read_view(deploy_detail::pixel_view(pixels, scratch), "<pixels>", inputs);
  return impl_->score_tiles(*this, grid, inputs);
}

void PatchCore::set_max_image_pixels(std::uint64_t max_pixels) {
  ModelInfo info;
  info.preprocess = impl_->preprocess;
  impl_->reader =
      std::make_unique<deploy_detail::SamplePreprocessor>(info, default_simd_level(), max_pixels);
  if (impl_->tiles) {
    const PatchCoreOptions& o = impl_->options;
    impl_->tiles = std::make_unique<data_detail::TileReader>(
        impl_->preprocess, o.tile, o.tile_stride ? o.tile_stride : o.tile, max_pixels);
  }
}

void PatchCore::Impl::decide(AnomalyResult& r) const {
  r.anomalous = r.score > threshold;
  // The validation scores' range; without one (older files) the threshold's size.
  const float range = score_max - score_min;
  const float spread = range > 0 ? range : (std::abs(threshold) > 0 ? std::abs(threshold) : 1.0f);
  const float normalized = std::isfinite(threshold) ? (r.score - threshold) / spread + 0.5f : 0.0f;
  r.normalized_score = std::clamp(normalized, 0.0f, 1.0f);
  const float pixel = std::isnan(pixel_threshold) ? threshold : pixel_threshold;
  r.defect_pixels = std::count_if(r.map.begin(), r.map.end(), [&](float v) { return v > pixel; });
}

void PatchCore::calibrate(const std::vector<std::filesystem::path>& good_files,
                          const std::vector<std::filesystem::path>& defect_files) {
  std::vector<float> good, peaks, defects;
  for (const auto& f : good_files) {
    const AnomalyResult r = score_file(f);
    good.push_back(r.score);
    peaks.push_back(r.map.empty() ? r.score : *std::max_element(r.map.begin(), r.map.end()));
  }
  for (const auto& f : defect_files) defects.push_back(score_file(f).score);
  const PatchCoreOptions& o = impl_->options;
  impl_->threshold = o.target_escape >= 0 && !defects.empty()
                         ? threshold_at_escape(defects, o.target_escape)
                         : threshold_at_false_reject(good, o.target_false_reject);
  // A good part shows a pixel above it at the false-reject target's rate.
  impl_->pixel_threshold = threshold_at_false_reject(std::move(peaks), o.target_false_reject);
  good.insert(good.end(), defects.begin(), defects.end());
  impl_->score_min = *std::min_element(good.begin(), good.end());
  impl_->score_max = *std::max_element(good.begin(), good.end());
}

float PatchCore::pixel_threshold() const noexcept {
  return std::isnan(impl_->pixel_threshold) ? impl_->threshold : impl_->pixel_threshold;
}
float PatchCore::score_min() const noexcept {
  return impl_->score_min;
}
float PatchCore::score_max() const noexcept {
  return impl_->score_max;
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
  return impl_->bank ? impl_->bank->rows() : 0;
}
std::int64_t PatchCore::bank_width() const noexcept {
  return impl_->bank ? impl_->bank->width() : 0;
}
const std::vector<float>& PatchCore::bank() const noexcept {
  static const std::vector<float> none;
  return impl_->bank ? impl_->bank->bank() : none;
}
const std::vector<std::int64_t>& PatchCore::padim_channels() const noexcept {
  return impl_->channels;
}
std::int64_t PatchCore::padim_positions() const noexcept {
  return impl_->gaussians ? impl_->gaussians->gaussians().positions() : 0;
}
float PatchCore::threshold() const noexcept {
  return impl_->threshold;
}
void PatchCore::set_threshold(float threshold) noexcept {
  impl_->threshold = threshold;
}

}  // namespace stoke::anomaly
