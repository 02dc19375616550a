// TrainState <-> the "train.*" keys of a checkpoint's metadata. Floating-point
// values are written as hexadecimal floats so they read back bit for bit.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "stoke/error.hpp"
#include "stoke/train.hpp"

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
  Reader(const std::map<std::string, std::string>& map, const std::string& where) : map_(map), where_(where) {}
  const std::string& text(const char* key) const {
    const auto it = map_.find(kPrefix + std::string(key));
    if (it == map_.end()) throw CorruptFile(where_ + ": the trainer state has no '" + kPrefix + key + "'");
    return it->second;
  }
  std::int64_t integer(const char* key) const {
    const std::string& s = text(key);
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0') bad(key, s);
    return v;
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
    throw CorruptFile(where_ + ": the trainer state's '" + kPrefix + key + "' is not a number: '" + s + "'");
  }
  const std::map<std::string, std::string>& map_;
  std::string where_;
};

}  // namespace

std::map<std::string, std::string> TrainState::to_metadata() const {
  std::map<std::string, std::string> m;
  const auto put = [&m](const char* key, std::string value) { m[kPrefix + std::string(key)] = std::move(value); };
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
  return m;
}

bool TrainState::present(const std::map<std::string, std::string>& metadata) {
  return metadata.count(kPrefix + std::string("version")) != 0;
}

TrainState TrainState::from_metadata(const std::map<std::string, std::string>& metadata, const std::string& where) {
  const Reader r(metadata, where);
  if (r.integer("version") != kVersion) {
    throw CorruptFile(where + ": trainer state version " + r.text("version") + ", this build reads " +
                      std::to_string(kVersion));
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
  if (s.epoch < 0 || s.batch_size < 1 || s.batch_multiplier < 1) {
    throw CorruptFile(where + ": the trainer state is out of range (epoch " + std::to_string(s.epoch) +
                      ", batch size " + std::to_string(s.batch_size) + ", multiplier " +
                      std::to_string(s.batch_multiplier) + ")");
  }
  return s;
}

}  // namespace stoke
