// Internal: loading a model file with its ModelInfo, and running logits.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "stoke/model_file.hpp"
#include "stoke/nn/inference.hpp"

namespace stoke::modelfile_detail {

struct LoadedModel {
  ModelInfo info;
  std::unique_ptr<nn::Model> model;
};

// CorruptFile when the metadata is missing or disagrees with the network.
STOKE_INTERNAL LoadedModel load_model_file(const std::filesystem::path& path, Backend& backend);
// A plain checkpoint with the normalization given: a ModelInfo whose input is
// the network's size (resized to it, no crop), classes "0".."N-1", no
// references. CorruptFile when `normalization` fits neither one channel nor
// the network's.
STOKE_INTERNAL LoadedModel load_checkpoint(const std::filesystem::path& path,
                                           const nn::Preprocessing& normalization,
                                           Backend& backend);

// Whether the validation loader for `loader` takes the staged path.
STOKE_INTERNAL bool loader_is_staged(const LoaderOptions& loader);

// The trainer's validation loader options for a model file's preprocessing
// (float32 output), batches of `batch`.
STOKE_INTERNAL LoaderOptions loader_options_for(const ModelInfo& info, std::size_t batch);

// The first tensor of `model` (or of the optimizer's state) holding a NaN or
// an infinity, "" when every value is finite.
STOKE_INTERNAL std::string first_non_finite(const nn::Model& model,
                                            const nn::Optimizer* optimizer = nullptr);
// NonFinite naming `path` and the tensor unless first_non_finite is "": a
// non-finite model is never written.
STOKE_INTERNAL void require_finite(const nn::Model& model, const nn::Optimizer* optimizer,
                                   const std::filesystem::path& path);

// An inference forward of `count` samples; returns count x classes logits.
STOKE_INTERNAL std::vector<float> run_logits(nn::Model& model, std::span<const float> inputs,
                                             std::size_t count);

}  // namespace stoke::modelfile_detail
