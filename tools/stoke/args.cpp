// Shared helpers of the stoke subcommands.
#include "args.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string_view>

#include "core/text.hpp"
#include "stoke/error.hpp"

namespace stoke_cli {

Args::Args(int argc, char** argv, std::set<std::string> values, std::set<std::string> flags) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flags.count(name)) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
      options_[name] = std::string(1, '1');
    } else if (values.count(name)) {
      if (!inline_value) {
        if (i + 1 >= argc) throw UsageError("--" + name + " needs a value");
        value = argv[++i];
      }
      options_[name] = value;
    } else {
      throw UsageError("unknown option --" + name);
    }
  }
}

namespace {
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

int Args::get_int(const std::string& name, int fallback, int lo, int hi) const {
  const int n = get_int(name, fallback);
  if (n < lo || n > hi) {
    throw UsageError("--" + name + " must be in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "], got " + get(name));
  }
  return n;
}

double Args::get_double(const std::string& name, double fallback, double lo, double hi) const {
  const double d = get_double(name, fallback);
  if (d < lo || d > hi) {
    throw UsageError("--" + name + " must be in [" + number_text(lo) + ", " + number_text(hi) +
                     "], got " + get(name));
  }
  return d;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = options_.find(name);
  return it == options_.end() ? fallback : it->second;
}

std::string Args::required(const std::string& name) const {
  if (!has(name)) throw UsageError("--" + name + " is required");
  if (get(name).empty()) throw UsageError("--" + name + " is empty");
  return get(name);
}

int Args::get_int(const std::string& name, int fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < 0 || n > 1000000000)
    throw UsageError("--" + name + " '" + v + "' is not a count");
  return static_cast<int>(n);
}

double Args::get_double(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string v = get(name);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  // NaN and infinities are no value any option takes.
  if (v.empty() || *end != '\0' || !std::isfinite(d))
    throw UsageError("--" + name + " '" + v + "' is not a finite number");
  return d;
}

// The library's one JSON string escaper (core/text.hpp).
std::string json_string(const std::string& s) {
  return stoke::detail::json_quote(s);
}

Progress::Progress(std::string what, std::size_t total, std::string unit)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

void Progress::update(std::size_t done, const std::string& detail) {
  const auto now = std::chrono::steady_clock::now();
  // A terminal gets a line every 2 s, a log file one every 15 s.
  static const bool terminal = isatty(fileno(stderr)) != 0;
  if (printed_ && now - last_ < std::chrono::seconds(terminal ? 2 : 15) && done < total_) return;
  last_ = now;
  printed_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? double(done) / elapsed : 0.0;
  const double eta = rate > 0 && total_ > done ? double(total_ - done) / rate : 0.0;
  std::fprintf(stderr, "%s %zu/%zu (%.0f %%) %.1f %s/s ETA %d:%02d%s%s\n", what_.c_str(), done,
               total_, total_ ? 100.0 * double(done) / double(total_) : 100.0, rate, unit_.c_str(),
               int(eta) / 60, int(eta) % 60, detail.empty() ? "" : "  ", detail.c_str());
}

void Progress::finish(const std::string& detail) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "%s done in %.1f s%s%s\n", what_.c_str(), elapsed,
               detail.empty() ? "" : "  ", detail.c_str());
}

int run_guarded(const char* command, const char* usage, int (*body)(int, char**), int argc,
                char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
  }
  try {
    return body(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "stoke %s: %s\n%s", command, e.what(), usage);
    return 2;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "stoke %s: %s\n", command, e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // A foreign exception must not abort the process: it ends as a message.
    std::fprintf(stderr, "stoke %s: out of memory (the sizes asked for do not fit)\n", command);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stoke %s: internal error: %s\n", command, e.what());
    return 1;
  }
}

}  // namespace stoke_cli
