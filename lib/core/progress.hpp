// A one-line progress indicator for long runs (dataset generation, epochs,
// tuning trials): on a terminal it redraws one line with the rate and ETA;
// otherwise it prints a plain line every 25 % so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "stoke/export.hpp"

namespace stoke::detail {

class STOKE_INTERNAL ProgressLine {
 public:
  ProgressLine(std::string what, std::uint64_t total, std::string unit, std::FILE* out = stderr);
  ~ProgressLine();
  void update(std::uint64_t done);
  void finish();

 private:
  void draw(std::uint64_t done, bool final);

  std::string what_, unit_;
  std::uint64_t total_;
  std::FILE* out_;
  bool terminal_;
  bool finished_ = false;
  int last_quarter_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace stoke::detail
