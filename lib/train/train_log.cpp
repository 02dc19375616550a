#include <cstdio>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/text.hpp"
#include "stoke/error.hpp"
#include "stoke/train.hpp"

namespace stoke {

const char* to_string(StopReason reason) noexcept {
  switch (reason) {
    case StopReason::kCompleted:
      return "completed";
    case StopReason::kEarlyStopping:
      return "early stopping";
    case StopReason::kRequested:
      return "stop requested";
    case StopReason::kOutOfMemory:
      return "out of memory";
    case StopReason::kCorruptData:
      return "too many corrupt samples";
  }
  return "unknown";
}

std::string TrainLog::to_json() const {
  std::ostringstream out;
  out.precision(9);
  out << "{\"epochs\":[";
  for (std::size_t i = 0; i < epochs.size(); ++i) {
    const auto& e = epochs[i];
    out << (i ? "," : "") << "{\"epoch\":" << e.epoch << ",\"steps\":" << e.steps
        << ",\"images\":" << e.images << ",\"train_loss\":" << e.train_loss
        << ",\"train_accuracy\":" << e.train_accuracy
        << ",\"validated\":" << (e.validated ? "true" : "false");
    if (e.validated)
      out << ",\"val_loss\":" << e.val_loss << ",\"val_accuracy\":" << e.val_accuracy;
    out << ",\"seconds\":" << e.seconds << ",\"images_per_second\":" << e.images_per_second
        << ",\"skipped_steps\":" << e.skipped_steps << ",\"loss_scale\":" << e.loss_scale
        << ",\"profile\":" << profile_to_json(e.profile) << "}";
  }
  out << "],\"corrupt_samples\":[";
  const auto quoted = [](const std::string& text) { return detail::json_quote(text); };
  for (std::size_t i = 0; i < corrupt_samples.size(); ++i) {
    out << (i ? "," : "") << "{\"path\":" << quoted(corrupt_samples[i].path)
        << ",\"reason\":" << quoted(corrupt_samples[i].reason) << "}";
  }
  out << "]}";
  return out.str();
}

std::string TrainLog::to_csv() const {
  std::ostringstream out;
  out << "epoch,steps,images,train_loss,train_accuracy,val_loss,val_accuracy,seconds,images_per_"
         "second,"
         "data_wait_seconds,device_busy_seconds,skipped_steps,loss_scale\n";
  out.precision(9);
  for (const auto& e : epochs) {
    out << e.epoch << ',' << e.steps << ',' << e.images << ',' << e.train_loss << ','
        << e.train_accuracy << ',';
    if (e.validated) {
      out << e.val_loss << ',' << e.val_accuracy;
    } else {
      out << ',';
    }
    out << ',' << e.seconds << ',' << e.images_per_second << ','
        << e.profile.stage(Stage::kDataWait).seconds << ',' << e.profile.device_busy_seconds << ','
        << e.skipped_steps << ',' << e.loss_scale << '\n';
  }
  return out.str();
}

void TrainLog::save(const std::filesystem::path& path) const {
  const auto ext = path.extension().string();
  if (ext == ".json") {
    detail::write_file_atomically(path, to_json());
  } else if (ext == ".csv") {
    detail::write_file_atomically(path, to_csv());
  } else {
    throw InvalidArgument("TrainLog::save: " + path.string() +
                          " needs the extension .json or .csv to choose the format");
  }
}

}  // namespace stoke
