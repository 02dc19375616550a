// RAM and file-backed caches of deterministic-stage results (see cache.hpp).
#include "data/cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/threads.hpp"

namespace stoke::data_detail {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'O', 'K', 'E', 'C', 'H', '1'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 4096;

struct FileHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_bytes;
  std::uint64_t key;
  std::uint64_t count;
  std::uint64_t entry_bytes;
  std::uint64_t complete;
  std::uint64_t payload_checksum;  // over the per-entry checksum table
  std::uint64_t header_checksum;   // over every field above
};

std::uint64_t header_checksum(const FileHeader& h) {
  return checksum64(&h, offsetof(FileHeader, header_checksum));
}

inline std::uint64_t rotl(std::uint64_t v, int r) {
  return (v << r) | (v >> (64 - r));
}

// Throws unless the file open on `fd` is empty or begins with the cache's
// magic: STOKE_CACHE=file:PATH pointing at a model or an image must not
// destroy it. `fd` is closed when this throws. partial: PATH.partial, which a
// run killed after sizing it leaves zero-filled (that one is ours to reuse).
void refuse_foreign(int fd, std::size_t size, const std::string& path, bool partial = false) {
  char magic[sizeof kMagic] = {};
  const std::size_t n = std::min(size, sizeof magic);
  if (n == 0) return;
  const bool read = pread(fd, magic, n, 0) == static_cast<ssize_t>(n);
  if (read && std::memcmp(magic, kMagic, n) == 0) return;
  constexpr char kZero[sizeof kMagic] = {};
  if (read && partial && std::memcmp(magic, kZero, n) == 0) return;
  close(fd);
  throw IoError("cache file '" + path + "' exists and is not a stoke cache file (" +
                std::to_string(size) +
                " bytes); refusing to replace it: point STOKE_CACHE=file:PATH at a "
                "path of its own, or remove the file");
}

// Another loader holds PATH.partial (a lock on the open file): it is
// building the same cache file right now.
struct CacheBusy {};

class RamCache final : public SampleCache {
 public:
  RamCache(std::size_t count, std::size_t entry_bytes, std::uint64_t budget)
      : entry_bytes_(entry_bytes),
        capacity_(budget == 0 ? count
                              : std::min<std::size_t>(
                                    count, budget / std::max<std::size_t>(1, entry_bytes))),
        // Uninitialized: pages are touched only when an entry is written.
        storage_(capacity_ ? new std::uint8_t[capacity_ * entry_bytes] : nullptr),
        slot_of_(count),
        ready_(count) {
    for (auto& s : slot_of_) s.store(-1, std::memory_order_relaxed);
    for (auto& r : ready_) r.store(0, std::memory_order_relaxed);
  }

  const std::uint8_t* find(std::size_t index) const override {
    if (!ready_[index].load(std::memory_order_acquire)) return nullptr;
    return storage_.get() +
           static_cast<std::size_t>(slot_of_[index].load(std::memory_order_relaxed)) * entry_bytes_;
  }
  std::uint8_t* reserve(std::size_t index) override {
    std::int64_t slot = slot_of_[index].load(std::memory_order_relaxed);
    if (slot < 0) {
      if (next_.load(std::memory_order_relaxed) >= capacity_) return nullptr;
      const std::size_t taken = next_.fetch_add(1, std::memory_order_relaxed);
      if (taken >= capacity_) return nullptr;
      slot = static_cast<std::int64_t>(taken);
      slot_of_[index].store(slot, std::memory_order_relaxed);
    }
    return storage_.get() + static_cast<std::size_t>(slot) * entry_bytes_;
  }
  void commit(std::size_t index) override {
    if (!ready_[index].exchange(1, std::memory_order_release))
      committed_.fetch_add(1, std::memory_order_relaxed);
  }
  std::size_t entries() const override { return committed_.load(std::memory_order_relaxed); }
  std::size_t bytes() const override { return entries() * entry_bytes_; }

 private:
  std::size_t entry_bytes_;
  std::size_t capacity_;
  std::unique_ptr<std::uint8_t[]> storage_;
  std::vector<std::atomic<std::int64_t>> slot_of_;
  std::vector<std::atomic<std::uint8_t>> ready_;
  std::atomic<std::size_t> next_{0};
  std::atomic<std::size_t> committed_{0};
};

class FileCache final : public SampleCache {
 public:
  FileCache(const std::string& path, std::size_t count, std::size_t entry_bytes, std::uint64_t key)
      : path_(path), count_(count), entry_bytes_(entry_bytes), key_(key), ready_(count) {
    file_bytes_ = kHeaderBytes + count * entry_bytes + count * sizeof(std::uint64_t);
    for (auto& r : ready_) r.store(0, std::memory_order_relaxed);
    note_ = try_reuse();
    if (note_.empty()) {
      reused_ = true;
      for (auto& r : ready_) r.store(1, std::memory_order_relaxed);
      committed_ = count;
      return;
    }
    create();
  }

  ~FileCache() override {
    if (map_) munmap(map_, file_bytes_);
    if (fd_ >= 0) close(fd_);
  }

  const std::uint8_t* find(std::size_t index) const override {
    return ready_[index].load(std::memory_order_acquire) ? entry(index) : nullptr;
  }
  std::uint8_t* reserve(std::size_t index) override { return reused_ ? nullptr : entry(index); }
  void commit(std::size_t index) override {
    if (reused_ || ready_[index].exchange(1, std::memory_order_acq_rel)) return;
    checksums()[index] = checksum64(entry(index), entry_bytes_);
    // The last committer sees every other entry's writes (acq_rel chain).
    if (committed_.fetch_add(1, std::memory_order_acq_rel) + 1 == count_) finalize();
  }
  std::size_t entries() const override { return committed_.load(std::memory_order_relaxed); }
  std::size_t bytes() const override { return entries() * entry_bytes_; }
  bool reused() const override { return reused_; }
  std::string note() const override { return note_; }

 private:
  std::uint8_t* entry(std::size_t index) const {
    return map_ + kHeaderBytes + index * entry_bytes_;
  }
  std::uint64_t* checksums() const {
    return reinterpret_cast<std::uint64_t*>(map_ + kHeaderBytes + count_ * entry_bytes_);
  }

  // "" when the file is valid and mapped read-only; else why it is not.
  std::string try_reuse() {
    // O_NONBLOCK: a FIFO at PATH must not block the open (it is refused below).
    const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
      return errno == ENOENT ? "no cache file yet"
                             : std::string("cannot open: ") + std::strerror(errno);
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      throw IoError("cache file '" + path_ + "' is not a regular file; refusing to replace it " +
                    "(STOKE_CACHE=file:PATH needs a path of its own)");
    }
    refuse_foreign(fd, static_cast<std::size_t>(st.st_size), path_);
    FileHeader h{};
    if (static_cast<std::size_t>(st.st_size) < sizeof h ||
        pread(fd, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) {
      close(fd);
      return "truncated: " + std::to_string(st.st_size) + " bytes, shorter than the header";
    }
    std::string why;
    if (h.header_checksum != header_checksum(h))
      why = "header checksum mismatch";
    else if (h.version != kVersion)
      why = "cache format version " + std::to_string(h.version);
    else if (h.key != key_)
      why = "stale: the dataset listing or preprocessing parameters changed";
    else if (h.count != count_ || h.entry_bytes != entry_bytes_)
      why = "stale: sample count or size changed";
    else if (!h.complete)
      why = "incomplete (the run that wrote it stopped early)";
    else if (static_cast<std::size_t>(st.st_size) != file_bytes_) {
      why = "truncated: " + std::to_string(st.st_size) + " bytes, expected " +
            std::to_string(file_bytes_);
    }
    if (!why.empty()) {
      close(fd);
      return why;
    }
    void* map = mmap(nullptr, file_bytes_, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      close(fd);
      return std::string("mmap failed: ") + std::strerror(errno);
    }
    map_ = static_cast<std::uint8_t*>(map);
    fd_ = fd;
    // Verify every entry once per run; a torn or edited file is rebuilt.
    std::atomic<bool> bad{false};
    parallel_for(0, count_, 64, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e && !bad.load(std::memory_order_relaxed); ++i) {
        if (checksum64(entry(i), entry_bytes_) != checksums()[i]) bad = true;
      }
    });
    if (!bad && checksum64(checksums(), count_ * sizeof(std::uint64_t)) != h.payload_checksum)
      bad = true;
    if (bad) {
      munmap(map_, file_bytes_);
      close(fd_);
      map_ = nullptr;
      fd_ = -1;
      return "entry checksum mismatch (corrupt)";
    }
    return "";
  }

  // Builds into PATH.partial and renames it over PATH once complete, so a
  // process still mapping an old file never sees it change under it.
  void create() {
    const std::string partial = path_ + ".partial";
    // No O_TRUNC before the lock: another loader (the validation set's, a
    // second process) may have this file mapped, and shrinking it under
    // that mapping is SIGBUS.
    fd_ = open(partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd_ < 0)
      throw IoError("cache file '" + path_ + "': cannot create " + partial + ": " +
                    std::strerror(errno) + " (STOKE_CACHE)");
    struct stat st {};
    if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd_);
      fd_ = -1;
      throw IoError("cache file '" + partial + "' is not a regular file (STOKE_CACHE)");
    }
    const int fd = fd_;
    fd_ = -1;
    refuse_foreign(fd, static_cast<std::size_t>(st.st_size), partial, true);
    fd_ = fd;
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      close(fd_);
      fd_ = -1;
      throw CacheBusy{};
    }
    if (ftruncate(fd_, 0) != 0 || ftruncate(fd_, static_cast<off_t>(file_bytes_)) != 0) {
      throw IoError("cache file '" + path_ + "': cannot size to " + std::to_string(file_bytes_) +
                    " bytes: " + std::strerror(errno));
    }
    void* map = mmap(nullptr, file_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (map == MAP_FAILED)
      throw IoError("cache file '" + path_ + "': mmap failed: " + std::strerror(errno));
    map_ = static_cast<std::uint8_t*>(map);
    FileHeader h{};
    std::memcpy(h.magic, kMagic, 8);
    h.version = kVersion;
    h.header_bytes = kHeaderBytes;
    h.key = key_;
    h.count = count_;
    h.entry_bytes = entry_bytes_;
    h.complete = 0;
    h.header_checksum = header_checksum(h);
    std::memcpy(map_, &h, sizeof h);
    if (count_ == 0) finalize();
  }

  void finalize() {
    FileHeader h{};
    std::memcpy(&h, map_, sizeof h);
    h.payload_checksum = checksum64(checksums(), count_ * sizeof(std::uint64_t));
    h.complete = 1;
    h.header_checksum = header_checksum(h);
    msync(map_, file_bytes_, MS_SYNC);  // entries first, then the header that vouches for them
    std::memcpy(map_, &h, sizeof h);
    msync(map_, kHeaderBytes, MS_SYNC);
    std::rename((path_ + ".partial").c_str(), path_.c_str());
  }

  std::string path_;
  std::size_t count_;
  std::size_t entry_bytes_;
  std::uint64_t key_;
  std::size_t file_bytes_ = 0;
  int fd_ = -1;
  std::uint8_t* map_ = nullptr;
  bool reused_ = false;
  std::string note_;
  std::vector<std::atomic<std::uint8_t>> ready_;
  std::atomic<std::size_t> committed_{0};
};

}  // namespace

std::uint64_t checksum64(const void* data, std::size_t bytes) noexcept {
  constexpr std::uint64_t kPrime1 = 0x9E3779B185EBCA87ull, kPrime2 = 0xC2B2AE3D27D4EB4Full;
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t lane[4] = {kPrime1, kPrime2, ~kPrime1, ~kPrime2};
  std::size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int k = 0; k < 4; ++k) {
      std::uint64_t v;
      std::memcpy(&v, p + i + 8 * k, 8);
      lane[k] = rotl(lane[k] + v * kPrime2, 31) * kPrime1;
    }
  }
  std::uint64_t h =
      rotl(lane[0], 1) + rotl(lane[1], 7) + rotl(lane[2], 12) + rotl(lane[3], 18) + bytes;
  for (; i < bytes; ++i) h = rotl(h ^ (p[i] * kPrime1), 11) * kPrime2;
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  return h;
}

std::unique_ptr<SampleCache> SampleCache::create(const CacheSpec& spec, std::size_t count,
                                                 std::size_t entry_bytes, std::uint64_t key) {
  switch (spec.kind) {
    case CacheSpec::Kind::kOff:
      return nullptr;
    case CacheSpec::Kind::kRam:
      return std::make_unique<RamCache>(count, entry_bytes, spec.ram_budget);
    case CacheSpec::Kind::kFile:
      try {
        return std::make_unique<FileCache>(spec.path, count, entry_bytes, key);
      } catch (const CacheBusy&) {
        // A RAM cache with room for nothing keeps the staged path (the same
        // preprocessing as a cached run) without holding any image.
        log_warn("cache file '" + spec.path +
                 "' is being built by another loader or process; this one runs uncached");
        return std::make_unique<RamCache>(count, entry_bytes, 1);
      }
  }
  return nullptr;
}

}  // namespace stoke::data_detail
