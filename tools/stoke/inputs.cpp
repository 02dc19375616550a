// Inputs and outputs of the subcommands; see inputs.hpp.
#include "inputs.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "args.hpp"
#include "stoke/error.hpp"

namespace stoke_cli {
namespace fs = std::filesystem;

namespace {

// Entries the folder rule ignores ("ignored: ...") are not bad images: they
// are listed but count against no budget.
bool is_bad_image(const stoke::DatasetReport::Skipped& s) {
  return s.reason.rfind("ignored:", 0) != 0;
}

// LoaderOptions' corruption budget, over the entries of a folder.
void check_budget(const fs::path& root, const stoke::DatasetReport& report) {
  const stoke::LoaderOptions defaults;
  std::size_t bad = 0;
  for (const auto& s : report.skipped) bad += is_bad_image(s);
  const std::size_t budget =
      std::max(defaults.max_corrupt_samples,
               static_cast<std::size_t>(defaults.max_corrupt_fraction *
                                        static_cast<double>(report.candidates)));
  if (bad > budget) {
    throw stoke::DecodeError("dataset folder '" + root.string() + "': " + std::to_string(bad) +
                             " unreadable images, more than --skip-corrupt's budget of " +
                             std::to_string(budget) + " (max(10, 1 % of the entries))");
  }
}

}  // namespace

void print_skipped(const char* command, const std::vector<stoke::DatasetReport::Skipped>& skipped) {
  constexpr std::size_t kShown = 20;
  for (std::size_t i = 0; i < skipped.size() && i < kShown; ++i) {
    std::fprintf(stderr, "stoke %s: skipped %s: %s\n", command, skipped[i].path.c_str(),
                 skipped[i].reason.c_str());
  }
  if (skipped.size() > kShown) {
    std::fprintf(stderr, "stoke %s: ... and %zu more skipped entries (%zu in all)\n", command,
                 skipped.size() - kShown, skipped.size());
  }
}

void print_skipped(const char* command, const std::vector<stoke::CorruptSample>& skipped) {
  std::vector<stoke::DatasetReport::Skipped> entries;
  for (const auto& c : skipped) entries.push_back({c.path, c.reason});
  print_skipped(command, entries);
}

stoke::Dataset load_folder(const char* command, const fs::path& root,
                           const FolderRequest& request) {
  stoke::DatasetOptions options;
  options.skip_corrupt = request.skip_corrupt;
  options.context = request.context;
  options.classes = request.classes;
  options.allow_missing_classes = !request.classes.empty();
  stoke::Dataset dataset;
  try {
    dataset = stoke::Dataset::from_folder(root, options);
  } catch (const stoke::Error&) {
    rethrow_with_skip_hint(request.skip_corrupt);
  }
  const auto& report = dataset.report();
  print_skipped(command, report.skipped);
  for (const auto& c : report.empty_classes) {
    std::fprintf(stderr, "stoke %s: %s holds no images of class '%s'\n", command,
                 root.string().c_str(), c.c_str());
  }
  if (request.skip_corrupt) check_budget(root, report);
  return dataset;
}

std::vector<fs::path> list_images(const char* command, const fs::path& root) {
  std::vector<stoke::DatasetReport::Skipped> skipped;
  auto files = stoke::list_image_files(root, stoke::DatasetOptions{}.extensions, skipped);
  print_skipped(command, skipped);
  return files;
}

void rethrow_with_skip_hint(bool skip_corrupt) {
  try {
    throw;
  } catch (const stoke::Error& e) {
    const bool data = e.code() == stoke::ErrorCode::kDecode || e.code() == stoke::ErrorCode::kIo;
    if (skip_corrupt || !data || std::strstr(e.what(), "--skip-corrupt")) throw;
    const std::string message =
        std::string(e.what()) + " (--skip-corrupt skips unreadable images and lists them)";
    if (e.code() == stoke::ErrorCode::kDecode) throw stoke::DecodeError(message);
    throw stoke::IoError(message);
  }
}

void check_writable(const std::string& flag, const fs::path& path, bool is_folder) {
  if (path.empty()) throw UsageError(flag + " is empty");
  std::error_code ec;
  const auto status = fs::status(path, ec);
  fs::path dir = is_folder ? path : path.parent_path();
  if (dir.empty()) dir = ".";
  if (!is_folder && fs::is_directory(status))
    throw UsageError(flag + " " + path.string() + " is a folder, not a file");
  if (is_folder && fs::exists(status) && !fs::is_directory(status))
    throw UsageError(flag + " " + path.string() + " is a file, not a folder");
  // A folder output that does not exist yet is created when written: its
  // nearest existing parent must take it.
  while (is_folder && !fs::exists(dir, ec) && dir.has_relative_path() && dir != dir.parent_path())
    dir = dir.parent_path();
  if (dir.empty()) dir = ".";  // a relative folder to create here ("--report out")
  if (!fs::is_directory(dir, ec))
    throw UsageError(flag + " " + path.string() + ": the folder " + dir.string() +
                     " does not exist");
  std::string probe = (dir / ".stoke-write-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    throw UsageError(flag + " " + path.string() + ": cannot write into " + dir.string() + ": " +
                     std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

FileStamp FileStamp::of(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {true, static_cast<unsigned long long>(st.st_ino),
          static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec};
}

OutputLock::OutputLock(const std::string& flag, const fs::path& path)
    : path_(path.string() + ".lock") {
  // A lock file another run removed between our open and our flock is not the
  // one at the path any more: try again with the new one.
  for (int attempt = 0; attempt < 100; ++attempt) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      throw UsageError(flag + " " + path.string() + ": cannot create the lock file " + path_ +
                       ": " + std::strerror(errno));
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      char pid[32] = {};
      const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
      ::close(fd_);
      fd_ = -1;
      throw UsageError(flag + " " + path.string() + " is being written by another run (pid " +
                       std::string(pid, n > 0 ? static_cast<std::size_t>(n) : 0) + ", lock " +
                       path_ + "); give each run its own --out");
    }
    struct stat held {
    }, at_path{};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &at_path) == 0 &&
        held.st_ino == at_path.st_ino) {
      const std::string pid = std::to_string(::getpid());
      if (::ftruncate(fd_, 0) == 0) {  // the pid is only a courtesy to a second run's user
        [[maybe_unused]] const ssize_t wrote = ::pwrite(fd_, pid.data(), pid.size(), 0);
      }
      return;
    }
    ::close(fd_);
    fd_ = -1;
  }
  throw UsageError(flag + " " + path.string() + ": the lock file " + path_ + " keeps changing");
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while held: a waiting run retries with a fresh file
  ::close(fd_);
}

stoke::Runtime init_with_precision(const std::string& precision) {
  stoke::Config config = stoke::Config::load();
  if (!precision.empty()) {
    if (precision != "fp32" && precision != "bf16" && precision != "fp16" && precision != "auto" &&
        precision != "int8")
      throw UsageError("--precision: '" + precision +
                       "' is not one of fp32, bf16, fp16, int8, auto");
    config.set("STOKE_PRECISION", precision);
  }
  return stoke::init(config);
}

std::filesystem::path unique_output(const std::filesystem::path& wanted,
                                    std::set<std::filesystem::path>& taken) {
  std::filesystem::path out = wanted;
  for (int n = 2; taken.count(std::filesystem::weakly_canonical(out)); ++n)
    out = wanted.parent_path() /
          (wanted.stem().string() + "-" + std::to_string(n) + wanted.extension().string());
  taken.insert(std::filesystem::weakly_canonical(out));
  return out;
}

}  // namespace stoke_cli
