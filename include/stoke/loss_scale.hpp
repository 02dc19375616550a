// Dynamic loss scaling, as PyTorch's torch.cuda.amp.GradScaler defines it
// (docs/precision.md, "Loss scaling"): the loss gradient is multiplied by a
// scale S before backward, so that small gradients stay representable in a
// low precision; after backward the gradients are checked for NaN and
// infinities. A non-finite gradient skips the optimizer's step (weights,
// optimizer state and its step count untouched) and multiplies S by the
// backoff factor; otherwise the gradients are multiplied by 1/S and the
// optimizer steps, and after `growth_interval` consecutive clean steps S is
// multiplied by the growth factor.
//
// The LossScaler is the scale's bookkeeping alone (no tensors): the trainer
// scales, checks (Backend::all_finite) and unscales on the model's backend
// and tells update() what the check found.
#pragma once

#include <cstdint>
#include <string>

#include "stoke/export.hpp"
#include "stoke/precision.hpp"

namespace stoke {

// kAuto: dynamic when the training step computes in fp16, off otherwise
// (the trainer computes in fp32 today, so auto is off). kFixed: the scale
// stays init_scale; a step with non-finite gradients is still skipped and
// counted.
enum class LossScaleMode : std::uint8_t { kAuto, kOff, kDynamic, kFixed };
STOKE_API const char* to_string(LossScaleMode mode) noexcept;

// The defaults are torch.cuda.amp.GradScaler's: init_scale 2^16,
// growth_factor 2, backoff_factor 0.5, growth_interval 2000.
struct LossScaleOptions {
  LossScaleMode mode = LossScaleMode::kAuto;
  float init_scale = 65536.0f;          // finite, > 0
  float growth_factor = 2.0f;           // finite, > 1
  float backoff_factor = 0.5f;          // in (0, 1)
  std::int64_t growth_interval = 2000;  // clean steps before a growth; >= 1
};

// InvalidArgument naming the option ("LossScaleOptions::init_scale ...") for
// a value outside its range (NaN included).
STOKE_API void check_loss_scale_options(const LossScaleOptions& options);

// "dynamic", "off", "auto" or a positive finite number (a fixed scale) into
// `base` (its factors and interval stay); InvalidArgument naming `what` (the
// option, e.g. "--loss-scale") otherwise.
STOKE_API LossScaleOptions parse_loss_scale(const std::string& text, LossScaleOptions base = {},
                                            const std::string& what = "loss scale");

// What a checkpoint keeps of a scaler for an exact resume.
struct LossScalerState {
  float scale = 0;                  // 0: no scaler (loss scaling was off)
  std::int64_t growth_tracker = 0;  // consecutive clean steps since the last change
  std::uint64_t skipped_steps = 0;  // steps skipped for non-finite gradients
};

class STOKE_API LossScaler {
 public:
  // Checks the options (check_loss_scale_options) and resolves kAuto for a
  // step that computes in `training` precision.
  explicit LossScaler(const LossScaleOptions& options = {}, Precision training = Precision::kFp32);

  bool enabled() const noexcept { return mode_ != LossScaleMode::kOff; }
  LossScaleMode mode() const noexcept { return mode_; }  // never kAuto
  // The scale the next backward multiplies the loss gradient by; 1 when off.
  float scale() const noexcept { return enabled() ? scale_ : 1.0f; }
  // 1/scale rounded to float from double, as GradScaler's unscale_ computes it.
  float inverse_scale() const noexcept;
  std::int64_t growth_tracker() const noexcept { return growth_tracker_; }
  std::uint64_t skipped_steps() const noexcept { return skipped_; }

  // After a step's gradients were checked: true when the optimizer steps.
  // Non-finite: counted as skipped, the scale times the backoff factor (not
  // in kFixed), the clean-step count back to 0. Finite: the count grows, and
  // at growth_interval the scale is multiplied by the growth factor (kept
  // only when the product is finite) and the count restarts. NonFinite when
  // the backoff has driven the scale to 0 (every step overflowed).
  bool update(bool finite);

  LossScalerState state() const noexcept;
  // A state from state(): CorruptFile naming `where` for a scale that is not
  // finite and > 0 or a negative tracker. kFixed keeps its own scale.
  void restore(const LossScalerState& state, const std::string& where);

 private:
  LossScaleOptions options_;
  LossScaleMode mode_;
  float scale_;
  std::int64_t growth_tracker_ = 0;
  std::uint64_t skipped_ = 0;
};

}  // namespace stoke
