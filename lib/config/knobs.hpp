// The knob table behind Config: one row per STOKE_* knob, and the name
// lookups Config uses (canonical names, near-miss suggestions).
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "stoke/config.hpp"

namespace stoke::detail {

// One row of DESIGN.md's knob table: parse `value` into Settings and return the
// canonical text shown in reports.
struct Knob {
  const char* name;
  const char* default_text;
  const char* accepted;
  const char* meaning;
  std::string (*apply)(Settings&, std::string_view);
};

// Every knob, in the table's order.
std::span<const Knob> knobs();

// "cpu_threads" -> "STOKE_CPU_THREADS"; full names pass through upper-cased.
std::string canonical_name(std::string_view name);

// The knob of a canonical name, or nullptr.
const Knob* find_knob(std::string_view canonical);

// STOKE_* names the library reads that are not knobs (STOKE_CONFIG, ...).
bool is_auxiliary(std::string_view canonical);

// The nearest known name for a near miss, "" otherwise.
std::string nearest_name(std::string_view unknown);

// " (did you mean STOKE_X?)" for a near miss of `nearest`, "" when it is empty.
std::string did_you_mean(const std::string& nearest);

// did_you_mean(nearest_name(unknown)).
std::string suggestion(std::string_view unknown);

}  // namespace stoke::detail
