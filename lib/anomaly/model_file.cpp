// The anomaly model file: a checkpoint of the backbone whose metadata holds
// the preprocessing and provenance (ModelInfo's "model.*" keys) and the
// method's state, options, threshold and a self-check reference ("anomaly.*"
// keys): PatchCore's bank, or PaDiM's channel subset and Gaussians (raw
// little-endian float32 bytes). Every value read is checked: a missing,
// malformed or out-of-range key, or an array shorter or longer than its
// stated size, is a CorruptFile naming the path and the key.
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>

#include "anomaly/patchcore_impl.hpp"
#include "modelfile/text.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/version.hpp"

namespace stoke::anomaly {

namespace {

static_assert(std::endian::native == std::endian::little, "the bank is stored little-endian");

constexpr int kFormatVersion = 1;

class MetaReader {
 public:
  MetaReader(const std::map<std::string, std::string>& m, std::string path)
      : m_(m), path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw CorruptFile("anomaly model '" + path_ + "': " + key + " " + why);
  }
  const std::string& text(const std::string& key) const {
    auto it = m_.find(key);
    if (it == m_.end()) fail(key, "is missing");
    return it->second;
  }
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi) const {
    const std::string& t = text(key);
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size()) fail(key, "'" + t + "' is not an integer");
    if (v < lo || v > hi)
      fail(key, std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
    return v;
  }
  double real(const std::string& key, double lo, double hi) const {
    const std::string& t = text(key);
    double v = 0;
    try {
      std::size_t used = 0;
      v = std::stod(t, &used);
      if (used != t.size()) fail(key, "'" + t + "' is not a number");
    } catch (const std::logic_error&) {
      fail(key, "'" + t + "' is not a number");
    }
    if (!(v >= lo && v <= hi))
      fail(key, t + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v;
  }
  // Comma-separated integers, strictly ascending, each in [0, hi).
  std::vector<std::int64_t> ascending(const std::string& key, std::int64_t count,
                                      std::int64_t hi) const {
    const std::string& t = text(key);
    std::vector<std::int64_t> v;
    const char* p = t.data();
    const char* end = t.data() + t.size();
    while (p < end && static_cast<std::int64_t>(v.size()) < count) {
      std::int64_t x = 0;
      auto [next, ec] = std::from_chars(p, end, x);
      if (ec != std::errc() || x < 0 || x >= hi || (!v.empty() && x <= v.back()))
        fail(key, "is not " + std::to_string(count) + " ascending integers in [0, " +
                      std::to_string(hi) + ")");
      v.push_back(x);
      p = next;
      if (p < end && *p == ',') ++p;
    }
    if (static_cast<std::int64_t>(v.size()) != count || p != end)
      fail(key, "holds " + std::to_string(v.size()) + (p != end ? "+" : "") + " integers, not " +
                    std::to_string(count) + " (truncated or corrupt)");
    return v;
  }
  std::vector<float> floats(const std::string& key, std::int64_t count) const {
    const std::string& t = text(key);
    const auto expected = static_cast<std::uint64_t>(count) * sizeof(float);
    if (t.size() != expected) {
      fail(key, "holds " + std::to_string(t.size()) + " bytes, " + std::to_string(count) +
                    " floats need " + std::to_string(expected) + " (truncated or corrupt)");
    }
    std::vector<float> v(static_cast<std::size_t>(count));
    std::memcpy(v.data(), t.data(), t.size());
    for (float f : v)
      if (!std::isfinite(f)) fail(key, "holds a value that is not finite");
    return v;
  }

 private:
  const std::map<std::string, std::string>& m_;
  std::string path_;
};

// The checkpoint stores a metadata value's length in 32 bits: a larger array
// would be cut, so it is refused before anything is written.
std::string raw(const std::vector<float>& v, const char* key) {
  const std::uint64_t bytes = v.size() * sizeof(float);
  if (bytes > UINT32_MAX) {
    throw InvalidArgument(std::string("anomaly: ") + key + " is " + std::to_string(bytes) +
                          " bytes; the model file holds at most 4 GiB - 1 per array (lower "
                          "max_bank_bytes / --max-bank, the input size or PaDiM's features)");
  }
  return std::string(reinterpret_cast<const char*>(v.data()), bytes);
}

void check_finite(const std::vector<float>& v, const char* what,
                  const std::filesystem::path& path) {
  for (float f : v)
    if (!std::isfinite(f))
      throw NonFinite(std::string("anomaly: ") + what + " holds a non-finite value; '" +
                      path.string() + "' not written");
}

void save_gaussians(const PatchCore::Impl& s, std::map<std::string, std::string>& m,
                    const std::filesystem::path& path) {
  const anomaly_detail::Gaussians& g = s.gaussians->gaussians();
  check_finite(g.mean, "PaDiM's mean", path);
  check_finite(g.inv_upper, "PaDiM's inverse covariance", path);
  std::string channels;
  for (std::int64_t c : s.channels) {
    if (!channels.empty()) channels += ',';
    channels += std::to_string(c);
  }
  m["anomaly.padim.features"] = std::to_string(g.features);
  m["anomaly.padim.channels"] = channels;
  m["anomaly.padim.grid_h"] = std::to_string(g.grid_h);
  m["anomaly.padim.grid_w"] = std::to_string(g.grid_w);
  m["anomaly.padim.mean"] = raw(g.mean, "anomaly.padim.mean");
  m["anomaly.padim.inv_covariance"] =
      raw(anomaly_detail::full_inverse(g), "anomaly.padim.inv_covariance");
}

// The Gaussians as stored; the channels against the backbone's width and the
// grid against its feature grid, found by embedding the reference input (or
// zeros) once.
void load_gaussians(PatchCore::Impl& impl, const MetaReader& r) {
  anomaly_detail::Gaussians g;
  g.features = r.integer("anomaly.padim.features", 1, 1 << 16);
  g.grid_h = r.integer("anomaly.padim.grid_h", 1, 1 << 16);
  g.grid_w = r.integer("anomaly.padim.grid_w", 1, 1 << 16);
  const std::int64_t positions = g.positions();
  if (positions > INT64_MAX / 4 / g.features / g.features)
    r.fail("anomaly.padim.grid_h", "x grid_w x features^2 overflows");
  std::vector<float> probe = impl.reference_input;
  if (probe.empty()) probe.assign(impl.reader->sample_size(), 0.0f);
  const Embeddings full = impl.features().embed(probe, 1);
  if (full.grid_h != g.grid_h || full.grid_w != g.grid_w) {
    r.fail("anomaly.padim.grid_h", std::to_string(g.grid_h) + " x " + std::to_string(g.grid_w) +
                                       " is not the backbone's feature grid " +
                                       std::to_string(full.grid_h) + " x " +
                                       std::to_string(full.grid_w));
  }
  impl.channels = r.ascending("anomaly.padim.channels", g.features, full.width);
  g.mean = r.floats("anomaly.padim.mean", positions * g.features);
  const std::int64_t asymmetric = anomaly_detail::pack_inverse(
      r.floats("anomaly.padim.inv_covariance", positions * g.features * g.features), g);
  if (asymmetric >= 0) {
    r.fail("anomaly.padim.inv_covariance",
           "is not symmetric at grid position " + std::to_string(asymmetric));
  }
  impl.set_gaussians(std::move(g));
}

}  // namespace

void PatchCore::save(const std::filesystem::path& path) const {
  const Impl& s = *impl_;
  if (!s.scorer) throw InvalidArgument("anomaly: nothing to save before fit()");
  ModelInfo info;
  info.class_names = {"good", "anomalous"};
  info.preprocess = s.preprocess;
  info.stoke_version = version();
  info.created = modelfile_detail::utc_now();
  std::map<std::string, std::string> m;
  info.to_metadata(m);
  const PatchCoreOptions& o = s.options;
  m["anomaly.method"] = method_name(o.method);
  m["anomaly.version"] = std::to_string(kFormatVersion);
  m["anomaly.seed"] = std::to_string(o.seed);
  m["anomaly.sigma"] = modelfile_detail::float_text(o.sigma);
  m["anomaly.target_false_reject"] = modelfile_detail::float_text(o.target_false_reject);
  m["anomaly.threshold"] = modelfile_detail::float_text(s.threshold);
  m["anomaly.target_escape"] = modelfile_detail::float_text(o.target_escape);
  if (!std::isnan(s.pixel_threshold)) {
    m["anomaly.pixel_threshold"] = modelfile_detail::float_text(s.pixel_threshold);
    m["anomaly.score_min"] = modelfile_detail::float_text(s.score_min);
    m["anomaly.score_max"] = modelfile_detail::float_text(s.score_max);
  }
  m["anomaly.tile"] = std::to_string(o.tile);
  m["anomaly.tile_stride"] = std::to_string(o.tile_stride);
  if (s.gaussians) {
    save_gaussians(s, m, path);
  } else {
    check_finite(s.bank->bank(), "the memory bank", path);
    m["anomaly.coreset_ratio"] = modelfile_detail::float_text(o.coreset_ratio);
    m["anomaly.num_neighbors"] = std::to_string(o.num_neighbors);
    m["anomaly.bank.rows"] = std::to_string(s.bank->rows());
    m["anomaly.bank.width"] = std::to_string(s.bank->width());
    m["anomaly.bank"] = raw(s.bank->bank(), "anomaly.bank");
  }
  // The self-check: one training image's input and the score it had here.
  m["anomaly.reference.count"] = s.reference_input.empty() ? "0" : "1";
  m["anomaly.reference.input"] = raw(s.reference_input, "anomaly.reference.input");
  m["anomaly.reference.score"] = modelfile_detail::float_text(s.reference_score);
  nn::save_checkpoint(path.string(), *s.model, nullptr, m);
}

PatchCore PatchCore::load(const std::filesystem::path& path, Backend& backend) {
  nn::CheckpointInfo ck;
  std::unique_ptr<nn::Model> model = nn::load_model(path.string(), backend, &ck);
  const MetaReader r(ck.metadata, path.string());
  PatchCoreOptions o;
  const std::string& method = r.text("anomaly.method");
  if (method == "padim") {
    o.method = AnomalyMethod::kPadim;
  } else if (method != "patchcore") {
    r.fail("anomaly.method", "'" + method + "' is not patchcore or padim");
  }
  r.integer("anomaly.version", kFormatVersion, kFormatVersion);
  const ModelInfo info = ModelInfo::from_metadata(ck.metadata, path.string());
  const bool padim = o.method == AnomalyMethod::kPadim;
  if (!padim) {
    o.coreset_ratio = r.real("anomaly.coreset_ratio", 1e-12, 1.0);
    o.num_neighbors = static_cast<int>(r.integer("anomaly.num_neighbors", 1, 1 << 20));
  }
  o.seed = static_cast<std::uint64_t>(r.integer("anomaly.seed", 0, INT64_MAX));
  o.sigma = static_cast<float>(r.real("anomaly.sigma", 1e-6, 1e6));
  o.target_false_reject = r.real("anomaly.target_false_reject", 0.0, 0.999999);
  if (ck.metadata.count("anomaly.tile")) {  // files written before tiling hold neither key
    o.tile = static_cast<int>(r.integer("anomaly.tile", 0, 65536));
    o.tile_stride = static_cast<int>(r.integer("anomaly.tile_stride", 0, o.tile));
  }
  auto impl = std::make_unique<Impl>(std::move(model), info.preprocess, o);
  impl->threshold = static_cast<float>(r.real("anomaly.threshold", -HUGE_VAL, HUGE_VAL));
  // Files written before the escape target, the pixel threshold and the
  // score range hold none of them.
  if (ck.metadata.count("anomaly.target_escape"))
    impl->options.target_escape = r.real("anomaly.target_escape", -1.0, 0.999999);
  if (ck.metadata.count("anomaly.pixel_threshold")) {
    impl->pixel_threshold =
        static_cast<float>(r.real("anomaly.pixel_threshold", -HUGE_VAL, HUGE_VAL));
    impl->score_min = static_cast<float>(r.real("anomaly.score_min", -HUGE_VAL, HUGE_VAL));
    impl->score_max = static_cast<float>(r.real("anomaly.score_max", -HUGE_VAL, HUGE_VAL));
    if (!(impl->score_max >= impl->score_min))
      r.fail("anomaly.score_max", "is below anomaly.score_min");
  }
  const auto sample = static_cast<std::int64_t>(impl->reader->sample_size());
  const bool checked = r.integer("anomaly.reference.count", 0, 1) == 1;
  impl->reference_input = r.floats("anomaly.reference.input", checked ? sample : 0);
  impl->reference_score =
      static_cast<float>(r.real("anomaly.reference.score", -HUGE_VAL, HUGE_VAL));
  if (padim) {
    load_gaussians(*impl, r);
  } else {
    const std::int64_t rows = r.integer("anomaly.bank.rows", 1, INT64_MAX / 4);
    const std::int64_t width = r.integer("anomaly.bank.width", 1, 1 << 20);
    if (rows > INT64_MAX / 4 / width) r.fail("anomaly.bank.rows", "x anomaly.bank.width overflows");
    impl->set_bank(r.floats("anomaly.bank", rows * width), rows, width);
  }
  impl->options.padim_features = padim ? static_cast<int>(impl->channels.size()) : 0;
  PatchCore p(std::move(impl));
  if (checked) p.self_check(path);
  // A gated precision (stoke quantize) where the backend runs it natively
  // and faster than fp32; set_precision() overrides it.
  if (gated_precision_pays(backend, info.precision)) p.set_precision(info.precision);
  return p;
}

void PatchCore::self_check(const std::filesystem::path& path) {
  const float again = score_input(impl_->reference_input).score;
  const float ref = impl_->reference_score;
  if (!(std::fabs(again - ref) <= 1e-3f * std::max(1.0f, std::fabs(ref)))) {
    throw CorruptFile("anomaly model '" + path.string() +
                      "': self-check failed: the reference image scores " +
                      modelfile_detail::float_text(again) + " on " +
                      impl_->model->backend().name() + ", the model file says " +
                      modelfile_detail::float_text(ref) + " (tolerance 1e-3 relative)");
  }
}

}  // namespace stoke::anomaly
