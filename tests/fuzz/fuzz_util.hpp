// Shared helpers for the fuzz targets: a per-process scratch folder (on
// /dev/shm when present, so file-based entry points stay fast), writing the
// input to a file, and the accepted outcome (a stoke::Error) versus a defect
// (anything else escapes and libFuzzer or the replay test reports it).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>

#include "stoke/error.hpp"
#include "stoke/log.hpp"

namespace stoke::fuzz {

// Removed at normal exit (a static's destructor: it owns its own copy of the
// path, unlike an atexit handler that would run after the path is destroyed).
struct ScratchDir {
  std::filesystem::path dir;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

inline const std::filesystem::path& scratch_dir() {
  static const ScratchDir scratch{[] {
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm")
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    auto d = base / ("stoke_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    // Warnings for every odd input would dominate the run time and the log
    // (Config::load resets the level, so the sink drops them).
    set_log_level(LogLevel::kError);
    set_log_sink([](LogLevel, std::string_view) {});
    return d;
  }()};
  return scratch.dir;
}

inline void write_bytes(const std::filesystem::path& path, const std::uint8_t* data,
                        std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

// A stoke::Error is the documented outcome for bad input; anything else
// (another exception, a crash, a sanitizer report) is a defect.
template <class Fn>
void accept_stoke_errors(Fn&& fn) {
  try {
    fn();
  } catch (const stoke::Error&) {
  }
}

}  // namespace stoke::fuzz
