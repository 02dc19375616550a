// What happens when an epoch ends: validation, the best-model checkpoint,
// early stopping, the stop checkpoint. Each is a small policy the trainer's
// epoch loop asks in turn.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "stoke/config.hpp"
#include "stoke/data.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/train.hpp"

namespace stoke::detail {

class PrefetchRings;  // lib/prefetch/ring.hpp

// Evaluates `model` on every batch of `loader` through a prefetch ring (the
// next batches are prepared, and on a GPU uploaded, while the model evaluates
// the current one) into record's validation fields. With `rings` the ring's
// slots are borrowed from there (the fit's, kept across epochs). pad_to > 0
// (the training batch, while the step replays CUDA graphs): a shorter batch
// is evaluated in the first rows of a pad_to batch (evaluation is per sample;
// the loss and accuracy count only those rows), so the layers' activations
// keep the training shape and the graphs that captured them stay valid.
void validate(nn::Model& model, Loader& loader, const Settings& settings, EpochRecord& record,
              PrefetchRings* rings = nullptr, std::int64_t pad_to = 0);

// Whether epoch `epoch` (0-based) of `epochs` validates.
bool validation_due(int validate_every_epochs, int epoch, int epochs);

// Early stopping: the best validation accuracy and the validated epochs since
// it last improved.
class EarlyStopping {
 public:
  explicit EarlyStopping(int patience = 0) : patience_(patience) {}
  // After a validated epoch; true when it improved on the best so far.
  bool observe(double val_accuracy);
  // Patience used up (never with patience 0).
  bool exhausted() const noexcept { return patience_ > 0 && stale_ >= patience_; }
  double best() const noexcept { return best_; }  // -1 before the first validation
  int stale() const noexcept { return stale_; }
  void restore(double best, int stale) noexcept {
    best_ = best;
    stale_ = stale;
  }

 private:
  int patience_;
  double best_ = -1;
  int stale_ = 0;
};

// Writes a checkpoint of the model (and optimizer, null for a deployable
// model such as the best checkpoint) with `metadata`. The best checkpoint's
// errors reach the caller; write_stop_checkpoint logs them (the run is ending
// anyway) and returns whether it wrote the file.
void write_checkpoint(const std::filesystem::path& path, const nn::Model& model,
                      const nn::Optimizer* optimizer,
                      const std::map<std::string, std::string>& metadata);
bool write_stop_checkpoint(const std::filesystem::path& path, const nn::Model& model,
                           const nn::Optimizer& optimizer,
                           const std::map<std::string, std::string>& metadata);

// The dropout layers' mask streams (train_state.cpp), saved for exact resume:
// (seed, draws) per layer. restore: CorruptFile naming `where` when the
// count does not fit the model.
std::vector<std::uint64_t> dropout_streams(nn::Model& model);
void restore_dropout_streams(nn::Model& model, const std::vector<std::uint64_t>& streams,
                             const std::string& where);

}  // namespace stoke::detail
