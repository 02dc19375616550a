// Checkpoints: weights, batch-norm buffers, optimizer state, the model spec
// and opaque metadata (preprocessing parameters) in one versioned binary file.
//
// Layout (little-endian): "STOKECKP", u32 version, u32 flags (0: no flag is
// defined), u64 payload length, payload, u32 CRC-32 of the payload. The
// payload holds the model spec and metadata as key/value maps, the optimizer
// kind and step count, and named tensors (name, dtype, shape, bytes). Every
// header field has one valid value and the CRC covers the payload, so any
// single-byte change or cut is refused: a file that is truncated, corrupt, of
// another version or flags, or that does not fit the model is a CorruptFile
// error naming the path and what is wrong; missing or unreadable files are
// IoError. Model files (stoke/deploy.hpp) are checkpoints whose metadata
// describes the model ("model.*" keys). Files are written to a temporary name and renamed, so a
// crash mid-write never leaves a half-written checkpoint under the real name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "stoke/nn/model.hpp"
#include "stoke/nn/optim.hpp"

namespace stoke::nn {

inline constexpr std::uint32_t kCheckpointVersion = 1;

struct CheckpointInfo {
  std::uint32_t version = kCheckpointVersion;
  ModelSpec spec;
  std::map<std::string, std::string> metadata;
  std::string optimizer_kind;  // empty when saved without an optimizer
  std::int64_t optimizer_steps = 0;
};

// optimizer may be null (weights only).
STOKE_API void save_checkpoint(const std::string& path, const Model& model,
                               const Optimizer* optimizer,
                               const std::map<std::string, std::string>& metadata = {});

// Validates the whole file and returns its header information.
STOKE_API CheckpointInfo read_checkpoint_info(const std::string& path);

// Loads weights and buffers into model (and state into optimizer when given
// and saved: a file without optimizer state, such as a deployable model,
// leaves `optimizer` as it is and returns an empty optimizer_kind).
// CorruptFile when the spec, a tensor name or a shape differs, or the saved
// optimizer state is of another kind.
STOKE_API CheckpointInfo load_checkpoint(const std::string& path, Model& model,
                                         Optimizer* optimizer = nullptr);

// Builds the model the checkpoint describes on backend and loads its weights.
STOKE_API std::unique_ptr<Model> load_model(const std::string& path, Backend& backend,
                                            CheckpointInfo* info = nullptr);

}  // namespace stoke::nn
