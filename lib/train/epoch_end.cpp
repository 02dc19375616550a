#include "train/epoch_end.hpp"

#include <algorithm>
#include <optional>

#include "modelfile/model_file.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/prefetch.hpp"
#include "train/batch_io.hpp"

namespace stoke::detail {

void validate(nn::Model& model, Loader& loader, const Settings& settings, EpochRecord& record,
              PrefetchRings* rings, std::int64_t pad_to) {
  // A rank whose share of a small validation set is empty (fewer samples
  // than batch x ranks) validates nothing; the reduction still counts it.
  if (loader.batches_per_epoch() == 0) {
    record.validated = false;
    record.val_images = 0;
    return;
  }
  Backend& be = model.backend();
  const auto shape = loader.output_shape();
  const PrefetchOptions po = prefetch_options(settings, loader, 0, 0, be.gpu());
  std::optional<Prefetcher> ring;
  open_prefetcher(ring, po, loader, be, 0, rings);
  Tensor x, y;
  double loss_sum = 0, correct_sum = 0;
  std::uint64_t seen = 0;
  while (std::optional<Batch> batch = ring->next()) {
    const auto count = static_cast<std::int64_t>(batch->count());
    const std::int64_t rows = std::max(count, pad_to);
    if (!x.defined() || x.dim(0) != rows) {
      x = Tensor(be, {rows, static_cast<std::int64_t>(shape[1]),
                      static_cast<std::int64_t>(shape[2]), static_cast<std::int64_t>(shape[3])});
      y = Tensor(be, {rows}, DType::kInt32);
      if (rows > count) be.fill(x, 0.0f);  // padding rows: finite values
    }
    Tensor xs = x.view(0, {count, x.dim(1), x.dim(2), x.dim(3)}), ys = y.view(0, {count});
    copy_batch_in(be, *batch, xs, ys);
    batch->release();
    const auto stats = nn::evaluate(model, x, y, count);
    loss_sum += static_cast<double>(stats.loss) * count;
    correct_sum += static_cast<double>(stats.accuracy) * count;
    seen += static_cast<std::uint64_t>(count);
  }
  record.validated = seen > 0;
  record.val_images = seen;
  if (seen > 0) {
    record.val_loss = loss_sum / static_cast<double>(seen);
    record.val_accuracy = correct_sum / static_cast<double>(seen);
  }
}

bool validation_due(int validate_every_epochs, int epoch, int epochs) {
  if (validate_every_epochs <= 0) return false;
  return (epoch + 1) % validate_every_epochs == 0 || epoch + 1 == epochs;
}

bool EarlyStopping::observe(double val_accuracy) {
  if (val_accuracy > best_) {
    best_ = val_accuracy;
    stale_ = 0;
    return true;
  }
  ++stale_;
  return false;
}

void write_checkpoint(const std::filesystem::path& path, const nn::Model& model,
                      const nn::Optimizer* optimizer,
                      const std::map<std::string, std::string>& metadata) {
  modelfile_detail::require_finite(model, optimizer, path);
  nn::save_checkpoint(path.string(), model, optimizer, metadata);
}

bool write_stop_checkpoint(const std::filesystem::path& path, const nn::Model& model,
                           const nn::Optimizer& optimizer,
                           const std::map<std::string, std::string>& metadata) {
  if (path.empty()) return false;
  try {
    write_checkpoint(path, model, &optimizer, metadata);
    const auto why = metadata.find("stopped");
    log_info("checkpoint written to " + path.string() +
             (why == metadata.end() ? std::string() : " (" + why->second + ")"));
    return true;
  } catch (const Error& e) {
    log_error("could not write the stop checkpoint " + path.string() + ": " + e.what());
    return false;
  }
}

}  // namespace stoke::detail
