// The loss scaler's bookkeeping (stoke/loss_scale.hpp): the update rule is
// PyTorch's _amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu),
// in float as GradScaler keeps its scale.
#include "stoke/loss_scale.hpp"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "stoke/error.hpp"

namespace stoke {
namespace {

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

const char* to_string(LossScaleMode mode) noexcept {
  switch (mode) {
    case LossScaleMode::kAuto:
      return "auto";
    case LossScaleMode::kOff:
      return "off";
    case LossScaleMode::kDynamic:
      return "dynamic";
    case LossScaleMode::kFixed:
      return "fixed";
  }
  return "unknown";
}

void check_loss_scale_options(const LossScaleOptions& o) {
  // Written so that NaN fails every test.
  if (!(std::isfinite(o.init_scale) && o.init_scale > 0.0f)) {
    throw InvalidArgument("LossScaleOptions::init_scale must be finite and > 0, got " +
                          number(o.init_scale));
  }
  if (!(std::isfinite(o.growth_factor) && o.growth_factor > 1.0f)) {
    throw InvalidArgument("LossScaleOptions::growth_factor must be finite and > 1, got " +
                          number(o.growth_factor));
  }
  if (!(o.backoff_factor > 0.0f && o.backoff_factor < 1.0f)) {
    throw InvalidArgument("LossScaleOptions::backoff_factor must be in (0, 1), got " +
                          number(o.backoff_factor));
  }
  if (o.growth_interval < 1) {
    throw InvalidArgument("LossScaleOptions::growth_interval must be >= 1, got " +
                          std::to_string(o.growth_interval));
  }
}

LossScaleOptions parse_loss_scale(const std::string& text, LossScaleOptions base,
                                  const std::string& what) {
  if (text == "dynamic") {
    base.mode = LossScaleMode::kDynamic;
  } else if (text == "off") {
    base.mode = LossScaleMode::kOff;
  } else if (text == "auto") {
    base.mode = LossScaleMode::kAuto;
  } else {
    char* end = nullptr;
    const float v = std::strtof(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(std::isfinite(v) && v > 0.0f)) {
      throw InvalidArgument(what +
                            " is dynamic, off, auto or a fixed scale (a finite number > 0), "
                            "got '" +
                            text + "'");
    }
    base.mode = LossScaleMode::kFixed;
    base.init_scale = v;
  }
  return base;
}

LossScaler::LossScaler(const LossScaleOptions& options, Precision training)
    : options_(options), mode_(options.mode), scale_(options.init_scale) {
  check_loss_scale_options(options_);
  if (mode_ == LossScaleMode::kAuto)
    mode_ = training == Precision::kFp16 ? LossScaleMode::kDynamic : LossScaleMode::kOff;
}

float LossScaler::inverse_scale() const noexcept {
  return static_cast<float>(1.0 / static_cast<double>(scale()));
}

bool LossScaler::update(bool finite) {
  if (!enabled()) return true;
  if (!finite) {
    ++skipped_;
    growth_tracker_ = 0;
    if (mode_ == LossScaleMode::kDynamic) {
      scale_ *= options_.backoff_factor;
      if (!(scale_ > 0.0f)) {
        throw NonFinite("loss scaling: the scale fell to 0 after " + std::to_string(skipped_) +
                        " skipped steps: the gradients are NaN or infinite at every scale "
                        "(the loss or the model diverged: lower the learning rate)");
      }
    }
    return false;
  }
  if (mode_ == LossScaleMode::kFixed) return true;
  if (++growth_tracker_ == options_.growth_interval) {
    const float grown = scale_ * options_.growth_factor;
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
  return true;
}

LossScalerState LossScaler::state() const noexcept {
  if (!enabled()) return {};
  return {scale_, growth_tracker_, skipped_};
}

void LossScaler::restore(const LossScalerState& s, const std::string& where) {
  if (!(std::isfinite(s.scale) && s.scale > 0.0f) || s.growth_tracker < 0) {
    throw CorruptFile(where + ": the loss scaler's state is out of range (scale " +
                      number(s.scale) + ", clean steps " + std::to_string(s.growth_tracker) + ")");
  }
  if (mode_ == LossScaleMode::kDynamic) scale_ = s.scale;
  growth_tracker_ = s.growth_tracker;
  skipped_ = s.skipped_steps;
}

}  // namespace stoke
