// Small helpers the subcommands share: options, image listing, progress with
// ETA, JSON strings.
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace stoke_cli {

// A usage error: printed with the subcommand's usage, exit status 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --name value / --name=value options, --flag switches and positionals.
class Args {
 public:
  // `values`: options that take a value; `flags`: switches.
  Args(int argc, char** argv, std::set<std::string> values, std::set<std::string> flags);
  bool has(const std::string& name) const { return options_.count(name) != 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::string required(const std::string& name) const;
  int get_int(const std::string& name, int fallback) const;
  double get_double(const std::string& name, double fallback) const;
  // The same, refusing a value outside [lo, hi] with a message naming the range.
  int get_int(const std::string& name, int fallback, int lo, int hi) const;
  double get_double(const std::string& name, double fallback, double lo, double hi) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> options_;
  std::vector<std::string> positional_;
};

// `s` as a JSON string literal.
std::string json_string(const std::string& s);

// A progress line on stderr, every 2 s on a terminal and every 15 s into a
// file: "what done/total (p %) rate unit/s ETA m:ss" plus a detail string;
// the first and the last update always print.
class Progress {
 public:
  Progress(std::string what, std::size_t total, std::string unit);
  void update(std::size_t done, const std::string& detail = "");
  void finish(const std::string& detail = "");

 private:
  std::string what_, unit_;
  std::size_t total_;
  std::chrono::steady_clock::time_point start_, last_;
  bool printed_ = false;
};

// Runs body(); prints stoke errors as "stoke <cmd>: message" (status 1) and
// usage errors with `usage` (status 2).
int run_guarded(const char* command, const char* usage, int (*body)(int, char**), int argc,
                char** argv);

}  // namespace stoke_cli
