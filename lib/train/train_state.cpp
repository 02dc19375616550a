// TrainState <-> the "train.*" keys of a checkpoint's metadata. Floating-point
// values are written as hexadecimal floats so they read back bit for bit.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "stoke/error.hpp"
#include "stoke/train.hpp"
#include "train/epoch_end.hpp"

namespace stoke {
namespace {

constexpr const char* kPrefix = "train.";

std::string hex(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

class Reader {
 public:
  Reader(const std::map<std::string, std::string>& map, const std::string& where)
      : map_(map), where_(where) {}
  bool has(const char* key) const { return map_.count(kPrefix + std::string(key)) != 0; }
  const std::string& text(const char* key) const {
    const auto it = map_.find(kPrefix + std::string(key));
    if (it == map_.end())
      throw CorruptFile(where_ + ": the trainer state has no '" + kPrefix + key + "'");
    return it->second;
  }
  std::int64_t integer(const char* key) const {
    const std::string& s = text(key);
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0') bad(key, s);
    return v;
  }
  // Comma-separated unsigned integers; empty text = none.
  std::vector<std::uint64_t> integers(const char* key) const {
    const std::string& s = text(key);
    std::vector<std::uint64_t> out;
    for (std::size_t at = 0; at < s.size();) {
      char* end = nullptr;
      out.push_back(std::strtoull(s.c_str() + at, &end, 10));
      const std::size_t next = static_cast<std::size_t>(end - s.c_str());
      if (next == at || (next < s.size() && s[next] != ',')) bad(key, s);
      at = next + 1;
    }
    return out;
  }
  double real(const char* key) const {
    const std::string& s = text(key);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') bad(key, s);
    return v;
  }

 private:
  [[noreturn]] void bad(const char* key, const std::string& s) const {
    throw CorruptFile(where_ + ": the trainer state's '" + kPrefix + key + "' is not a number: '" +
                      s + "'");
  }
  const std::map<std::string, std::string>& map_;
  std::string where_;
};

}  // namespace

std::map<std::string, std::string> TrainState::to_metadata() const {
  std::map<std::string, std::string> m;
  const auto put = [&m](const char* key, std::string value) {
    m[kPrefix + std::string(key)] = std::move(value);
  };
  put("version", std::to_string(kVersion));
  put("epoch", std::to_string(epoch));
  put("batch", std::to_string(batch));
  put("step", std::to_string(step));
  put("batch_size", std::to_string(batch_size));
  put("batch_multiplier", std::to_string(batch_multiplier));
  put("schedule_total_steps", std::to_string(schedule_total_steps));
  put("loader_seed", std::to_string(loader_seed));
  put("best_val_accuracy", hex(best_val_accuracy));
  put("epochs_without_improvement", std::to_string(epochs_without_improvement));
  put("epoch_loss_sum", hex(epoch_loss_sum));
  put("epoch_correct_sum", hex(epoch_correct_sum));
  put("epoch_images", std::to_string(epoch_images));
  put("epoch_steps", std::to_string(epoch_steps));
  std::string streams;
  for (std::uint64_t v : dropout_streams) {
    if (!streams.empty()) streams += ',';
    streams += std::to_string(v);
  }
  put("dropout_streams", streams);
  put("loss_scale", hex(loss_scaler.scale));
  put("loss_scale_growth_tracker", std::to_string(loss_scaler.growth_tracker));
  put("loss_scale_skipped_steps", std::to_string(loss_scaler.skipped_steps));
  put("epoch_skipped_steps", std::to_string(epoch_skipped_steps));
  return m;
}

bool TrainState::present(const std::map<std::string, std::string>& metadata) {
  return metadata.count(kPrefix + std::string("version")) != 0;
}

TrainState TrainState::from_metadata(const std::map<std::string, std::string>& metadata,
                                     const std::string& where) {
  const Reader r(metadata, where);
  if (r.integer("version") != kVersion) {
    throw CorruptFile(where + ": trainer state version " + r.text("version") +
                      ", this build reads " + std::to_string(kVersion));
  }
  TrainState s;
  s.epoch = static_cast<int>(r.integer("epoch"));
  s.batch = static_cast<std::uint64_t>(r.integer("batch"));
  s.step = static_cast<std::uint64_t>(r.integer("step"));
  s.batch_size = static_cast<int>(r.integer("batch_size"));
  s.batch_multiplier = static_cast<int>(r.integer("batch_multiplier"));
  s.schedule_total_steps = r.integer("schedule_total_steps");
  s.loader_seed = static_cast<std::uint64_t>(r.integer("loader_seed"));
  s.best_val_accuracy = r.real("best_val_accuracy");
  s.epochs_without_improvement = static_cast<int>(r.integer("epochs_without_improvement"));
  s.epoch_loss_sum = static_cast<float>(r.real("epoch_loss_sum"));
  s.epoch_correct_sum = static_cast<float>(r.real("epoch_correct_sum"));
  s.epoch_images = static_cast<std::uint64_t>(r.integer("epoch_images"));
  s.epoch_steps = static_cast<std::uint64_t>(r.integer("epoch_steps"));
  s.dropout_streams = r.integers("dropout_streams");
  if (r.has("loss_scale")) {  // checkpoints written before loss scaling have none: off
    s.loss_scaler.scale = static_cast<float>(r.real("loss_scale"));
    s.loss_scaler.growth_tracker = r.integer("loss_scale_growth_tracker");
    s.loss_scaler.skipped_steps = static_cast<std::uint64_t>(r.integer("loss_scale_skipped_steps"));
    s.epoch_skipped_steps = static_cast<std::uint64_t>(r.integer("epoch_skipped_steps"));
  }
  if (s.epoch < 0 || s.batch_size < 1 || s.batch_multiplier < 1) {
    throw CorruptFile(where + ": the trainer state is out of range (epoch " +
                      std::to_string(s.epoch) + ", batch size " + std::to_string(s.batch_size) +
                      ", multiplier " + std::to_string(s.batch_multiplier) + ")");
  }
  return s;
}

namespace detail {

std::vector<std::uint64_t> dropout_streams(nn::Model& model) {
  std::vector<std::uint64_t> out;
  for (const auto& layer : model.network().layers()) {
    if (const auto* d = nn::layer_as<nn::Dropout>(*layer)) {
      out.push_back(d->seed());
      out.push_back(d->draws());
    }
  }
  return out;
}

void restore_dropout_streams(nn::Model& model, const std::vector<std::uint64_t>& streams,
                             const std::string& where) {
  if (streams.size() != dropout_streams(model).size()) {
    throw CorruptFile(where + ": the trainer state holds " + std::to_string(streams.size() / 2) +
                      " dropout streams, the model has " +
                      std::to_string(dropout_streams(model).size() / 2) + " dropout layers");
  }
  std::size_t i = 0;
  for (const auto& layer : model.network().layers()) {
    if (auto* d = nn::layer_as<nn::Dropout>(*layer)) {
      d->restore_stream(streams[i], streams[i + 1]);
      i += 2;
    }
  }
}

}  // namespace detail
}  // namespace stoke
