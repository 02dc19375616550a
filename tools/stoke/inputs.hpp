// What the subcommands read and write, checked the same way everywhere
// (issue 25): image folders by the library's one rule (list_image_files),
// what was skipped printed with the reason, the corruption budget of
// --skip-corrupt, and outputs proven writable before any work starts.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "stoke/context.hpp"
#include "stoke/data.hpp"
#include "stoke/runtime.hpp"

namespace stoke_cli {

// Prints every skipped entry ("stoke <command>: skipped PATH: REASON") on
// stderr, the first 20 in full and a count of the rest.
void print_skipped(const char* command, const std::vector<stoke::DatasetReport::Skipped>& skipped);
// The same for images found bad while training or evaluating.
void print_skipped(const char* command, const std::vector<stoke::CorruptSample>& skipped);

// How a folder dataset is read: --skip-corrupt, the context (it carries
// STOKE_MAX_IMAGE_PIXELS) and, for a validation or evaluation set, the
// classes its labels must index (some may be missing).
struct FolderRequest {
  bool skip_corrupt = false;
  stoke::Context context;
  std::vector<std::string> classes;
};

// root/<class>/<image> as a Dataset, its skipped entries printed. Without
// skip_corrupt a bad image is an error that names --skip-corrupt; with it,
// more bad images than the loader's budget are one too.
stoke::Dataset load_folder(const char* command, const std::filesystem::path& root,
                           const FolderRequest& request);

// The images of `root` (predict --data): the same rule, skipped entries printed.
std::vector<std::filesystem::path> list_images(const char* command,
                                               const std::filesystem::path& root);

// `wanted`, or <stem>-2<ext>, <stem>-3<ext>, ... beside it: the first whose
// canonical path is not in `taken` (the run's inputs and what it already
// wrote), which it is then added to. An output never replaces an input or an
// earlier output of the same run (predict's heatmaps and masks).
std::filesystem::path unique_output(const std::filesystem::path& wanted,
                                    std::set<std::filesystem::path>& taken);

// An error from reading data (DecodeError, IoError) met while training or
// evaluating without --skip-corrupt: the hint appended. Other errors unchanged.
[[noreturn]] void rethrow_with_skip_hint(bool skip_corrupt);

// Throws UsageError naming `flag` when `path` cannot be written: its folder
// missing or not writable (a probe file is created and removed), or `path`
// a folder. A folder output (`is_folder`, --report DIR) is created and probed.
void check_writable(const std::string& flag, const std::filesystem::path& path,
                    bool is_folder = false);

// Whether and which file is at a path: a rename over it (the atomic writer)
// or a rewrite changes the stamp.
struct FileStamp {
  bool exists = false;
  unsigned long long inode = 0;
  long long modified_ns = 0;
  static FileStamp of(const std::filesystem::path& path);
  bool operator==(const FileStamp&) const = default;
};

// One writer per output: holds an exclusive lock on PATH.lock (flock, so a
// killed run leaves no stale lock) for its lifetime; UsageError naming `flag`
// and the other run's pid when another process holds it. The lock file is
// removed when released.
class OutputLock {
 public:
  OutputLock(const std::string& flag, const std::filesystem::path& path);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

// init() with --precision (fp32, bf16, fp16, auto) as this run's
// STOKE_PRECISION when the flag was given; a bad value is a UsageError.
stoke::Runtime init_with_precision(const std::string& precision);

}  // namespace stoke_cli
