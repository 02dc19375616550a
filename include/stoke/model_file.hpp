// Model files: a checkpoint (stoke/nn/checkpoint.hpp) whose metadata holds a
// ModelInfo under "model.*" keys: the class names, the full deterministic
// preprocessing, provenance, and reference inputs with the logits the trainer
// produced for them. The trainer writes them (best model, stop checkpoint);
// the predictor and evaluation (stoke/deploy.hpp) read them. See
// docs/deploy.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "stoke/data.hpp"
#include "stoke/export.hpp"
#include "stoke/image.hpp"
#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/precision.hpp"
#include "stoke/train.hpp"

namespace stoke {

// Version of the "model.*" metadata layout.
inline constexpr int kModelInfoVersion = 1;

// A preprocessed input the trainer ran and the logits its model gave.
struct ReferenceSample {
  std::string source;         // the image it came from
  std::vector<float> input;   // C x H x W float32, as fed to the network
  std::vector<float> logits;  // one per class
  // The encoded file (when it was a file of at most 256 KiB), so a predictor
  // can check that this build decodes and preprocesses it to `input`.
  std::vector<std::uint8_t> encoded;
};

struct STOKE_API ModelInfo {
  std::vector<std::string> class_names;  // in label order
  // Channels, output size, resize target, filter, crop (centre crop of the
  // resize target to the output), normalization, dtype, JPEG DCT scaling.
  PreprocessOptions preprocess;
  // The loader's staged path (sample cache on, or a resize target larger than
  // the output): the resized image is rounded to uint8 (uint16 for 16-bit
  // samples), centre-cropped, then normalized. Off: the loader's direct path, one fused resize +
  // normalize.
  bool staged = false;

  // Provenance.
  std::string stoke_version;
  std::string created;  // UTC, ISO 8601
  std::string dataset_source;
  std::uint64_t dataset_fingerprint = 0;
  std::vector<std::uint64_t> class_counts;  // training samples per class
  std::uint64_t validation_samples = 0;
  std::map<std::string, std::string> trainer_options;
  std::map<std::string, std::string> configuration;  // effective STOKE_* knobs
  std::map<std::string, std::string> metrics;        // at the time of writing
  // Per epoch: "epoch,train_loss,train_accuracy,val_loss,val_accuracy" lines.
  std::vector<std::string> history;

  // The precision a gate (stoke quantize) chose for inference: the Predictor
  // runs it where STOKE_PRECISION is not set ("model.precision"; fp32 in
  // files without the key).
  Precision precision = Precision::kFp32;
  // int8 (stoke quantize --precision int8 --calibrate DIR): the calibrated
  // (min, max) of every fused convolution's input, in the inference
  // program's order (stoke/program.hpp: steps in order, a block's chain
  // before its shortcut), under "model.int8.input_ranges"; and where the
  // calibration came from under "model.int8.calibration.*" (folder, images,
  // method, date). Empty in files without it; model.precision int8 needs it.
  std::vector<std::pair<float, float>> int8_input_ranges;
  std::map<std::string, std::string> int8_calibration;

  // Self-check: inputs, and the logits the training backend produced.
  std::string reference_backend;
  std::vector<ReferenceSample> references;
  float reference_tolerance = 1e-3f;  // max |logit difference| / max(1, max |logit|)

  // Writes every field under "model.*" keys.
  void to_metadata(std::map<std::string, std::string>& metadata) const;
  // CorruptFile naming `path` and every missing key when the metadata is not
  // a model file's (e.g. a checkpoint written before model files existed),
  // or a malformed value.
  static ModelInfo from_metadata(const std::map<std::string, std::string>& metadata,
                                 const std::string& path);
};

// What a fit() knows before training: classes, preprocessing as the
// validation loader runs it, provenance, and up to `references` reference
// inputs (the first validation images, else the first training images),
// preprocessed by a validation loader; none, and no dataset folder, when
// options.embed_training_images is false.
STOKE_API ModelInfo describe_training(const Dataset& train, const Dataset* val,
                                      const LoaderOptions& loader, const TrainerOptions& options,
                                      std::size_t references = 4);

// A ModelInfo for weights trained elsewhere (stoke import): the class names
// and preprocessing the caller states, provenance naming `source`, and
// `references` reference inputs of seeded uniform 8-bit pixel noise through
// `preprocess`'s normalization, so the Predictor's self-check shows whether
// a deploy machine computes this machine's logits (there is no file to
// decode: SelfCheckResult::decoded_references stays 0). InvalidArgument for
// no class names or inconsistent sizes.
STOKE_API ModelInfo describe_import(std::vector<std::string> class_names,
                                    const PreprocessOptions& preprocess, const std::string& source,
                                    std::size_t references = 2);

// The preprocessing under "model.preprocess.*" of `metadata` (a model file's,
// or the metadata_props stoke export writes into an ONNX file); CorruptFile
// naming `what` and every missing key.
STOKE_API PreprocessOptions read_preprocess_metadata(
    const std::map<std::string, std::string>& metadata, const std::string& what);

// Appends an epoch's figures to info.history and info.metrics.
STOKE_API void record_epoch(ModelInfo& info, const EpochRecord& record);

// The history lines a checkpoint's metadata carries for the epochs before
// `epoch` (empty when it carries none): a run resumed at `epoch` continues
// that history, so the model file tells the whole run.
STOKE_API std::vector<std::string> history_before(
    const std::map<std::string, std::string>& checkpoint_metadata, int epoch);

// Writes a model file: the checkpoint of `model` (and optimizer, may be null)
// with `info`, whose reference logits are recomputed from `model` as it is
// now (an inference forward). `extra` goes into the metadata as is and into
// info.metrics.
STOKE_API void save_model(const std::filesystem::path& path, nn::Model& model,
                          const ModelInfo& info, const nn::Optimizer* optimizer = nullptr,
                          const std::map<std::string, std::string>& extra = {});

// The metadata save_model writes, added to `metadata` (keys of `info`
// replace existing ones), for writers that save the checkpoint themselves
// (the Trainer's best and stop checkpoints).
STOKE_API void add_model_metadata(std::map<std::string, std::string>& metadata, nn::Model& model,
                                  const ModelInfo& info);

// The model file's ModelInfo without building the model.
STOKE_API ModelInfo read_model_info(const std::filesystem::path& path);

}  // namespace stoke
