#include "core/progress.hpp"

#include <unistd.h>

namespace stoke::detail {

ProgressLine::ProgressLine(std::string what, std::uint64_t total, std::string unit, std::FILE* out)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      out_(out),
      terminal_(::isatty(::fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressLine::~ProgressLine() {
  if (!finished_ && terminal_) std::fputc('\n', out_);
}

void ProgressLine::update(std::uint64_t done) {
  const auto now = std::chrono::steady_clock::now();
  if (terminal_) {
    if (now - last_draw_ < std::chrono::milliseconds(200) && done < total_) return;
    last_draw_ = now;
    draw(done, false);
    return;
  }
  const int quarter = total_ ? static_cast<int>(4 * done / total_) : 4;
  if (quarter > last_quarter_ && quarter < 4) {
    last_quarter_ = quarter;
    draw(done, false);
  }
}

void ProgressLine::finish() {
  if (finished_) return;
  finished_ = true;
  draw(total_, true);
}

void ProgressLine::draw(std::uint64_t done, bool final) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = seconds > 0 ? done / seconds : 0;
  const double eta = rate > 0 && total_ > done ? (total_ - done) / rate : 0;
  if (terminal_) {
    std::fprintf(out_, "\r%s: %llu/%llu %s, %.1f %s/s, %s %.0f s   %s", what_.c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                 unit_.c_str(), rate, unit_.c_str(), final ? "took" : "ETA", final ? seconds : eta,
                 final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s: %llu/%llu %s, %.1f %s/s, %s %.0f s\n", what_.c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                 unit_.c_str(), rate, unit_.c_str(), final ? "took" : "ETA", final ? seconds : eta);
  }
  std::fflush(out_);
}

}  // namespace stoke::detail
