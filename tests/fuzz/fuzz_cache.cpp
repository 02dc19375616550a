// The loader's file cache (STOKE_CACHE=file:PATH): a Loader over a tiny IDX
// dataset finds a fuzzed cache file at construction, then fills one batch
// (from the file when it was accepted, else rebuilding it). Input: one mode
// byte, then the file. Mode bits fix up, in this order, the per-entry
// checksums (1), the payload checksum (2) and the header checksum (4) from the
// header's own count and entry size, so mutations get past the checksums to
// the size, key and completeness checks behind them.
#include <cstring>
#include <vector>

#include "data/cache.hpp"
#include "fuzz_fixtures.hpp"

namespace {

constexpr std::size_t kHeaderBytes = 4096;  // lib/data/cache.cpp
constexpr std::size_t kCountAt = 24, kEntryBytesAt = 32, kPayloadSumAt = 48, kHeaderSumAt = 56;

std::uint64_t load64(const std::vector<std::uint8_t>& f, std::size_t at) {
  std::uint64_t v;
  std::memcpy(&v, f.data() + at, 8);
  return v;
}
void store64(std::vector<std::uint8_t>& f, std::size_t at, std::uint64_t v) {
  std::memcpy(f.data() + at, &v, 8);
}

void fix_checksums(std::vector<std::uint8_t>& f, unsigned mode) {
  using stoke::data_detail::checksum64;
  if (f.size() < kHeaderBytes) return;
  const std::uint64_t count = load64(f, kCountAt), entry = load64(f, kEntryBytesAt);
  const std::size_t room = f.size() - kHeaderBytes;
  const bool sized = count <= room / 8 && (entry == 0 || count <= room / entry) &&
                     count * entry + count * 8 <= room;
  if (sized) {
    std::uint8_t* entries = f.data() + kHeaderBytes;
    std::uint8_t* sums = entries + count * entry;
    if (mode & 1) {
      for (std::uint64_t i = 0; i < count; ++i) {
        const std::uint64_t s = checksum64(entries + i * entry, entry);
        std::memcpy(sums + i * 8, &s, 8);
      }
    }
    if (mode & 2) store64(f, kPayloadSumAt, checksum64(sums, count * 8));
  }
  if (mode & 4) store64(f, kHeaderSumAt, checksum64(f.data(), kHeaderSumAt));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fz = stoke::fuzz;
  if (size < 1) return 0;
  static const stoke::Dataset dataset = fz::tiny_idx_dataset(fz::scratch_dir());
  std::vector<std::uint8_t> file(data + 1, data + size);
  fix_checksums(file, data[0]);
  const auto path = fz::scratch_dir() / "cache.bin";
  std::filesystem::remove(fz::scratch_dir() / "cache.bin.partial");
  fz::write_bytes(path, file.data(), file.size());
  const stoke::LoaderOptions options = fz::cache_loader_options(path);
  fz::accept_stoke_errors([&] {
    stoke::Loader loader(dataset, options);
    std::vector<std::byte> batch(loader.batch_size() * loader.sample_bytes());
    std::vector<std::int32_t> labels(loader.batch_size());
    (void)loader.fill_batch(0, 0, batch, labels);
    (void)loader.stats();
  });
  return 0;
}
