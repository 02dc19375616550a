// IDX (MNIST / Fashion-MNIST) images and labels, gzip-compressed or plain:
// zlib's gz* functions read both transparently.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <memory>

#include "data/dataset_storage.hpp"
#include "data/rng.hpp"
#include "stoke/error.hpp"

namespace stoke {
namespace {

struct GzFile {
  gzFile file = nullptr;
  explicit GzFile(const std::filesystem::path& path) : file(gzopen(path.c_str(), "rb")) {}
  ~GzFile() {
    if (file) gzclose(file);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
};

void read_exact(GzFile& in, void* out, std::size_t bytes, const std::filesystem::path& path,
                const char* what) {
  auto* p = static_cast<unsigned char*>(out);
  while (bytes > 0) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(bytes, 1u << 30));
    const int got = gzread(in.file, p, chunk);
    if (got <= 0) {
      int err = 0;
      const char* msg = gzerror(in.file, &err);
      throw CorruptFile("IDX file '" + path.string() + "': truncated or corrupt while reading " +
                        what +
                        (err != Z_OK && msg ? std::string(" (") + msg + ")" : std::string()));
    }
    p += got;
    bytes -= static_cast<std::size_t>(got);
  }
}

// Reads `total` bytes into `out`, growing it as the data arrives: a header
// that claims more than the file holds fails as truncated instead of first
// allocating what it claims (up to 2^64 bytes).
void read_growing(GzFile& in, std::vector<std::uint8_t>& out, std::size_t total,
                  const std::filesystem::path& path, const char* what) {
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  out.clear();
  out.reserve(
      std::min(total, std::size_t{64} << 20));  // address space only; pages are touched as read
  while (out.size() < total) {
    const std::size_t at = out.size();
    out.resize(at + std::min(kChunk, total - at));
    read_exact(in, out.data() + at, out.size() - at, path, what);
  }
}

// Returns the dimensions after checking the magic (ubyte data, `rank` dims).
std::vector<std::uint32_t> read_header(GzFile& in, const std::filesystem::path& path, int rank) {
  if (!in.file) throw IoError("cannot open IDX file '" + path.string() + "'");
  std::array<unsigned char, 4> magic{};
  read_exact(in, magic.data(), 4, path, "the header");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] != rank) {
    throw CorruptFile("IDX file '" + path.string() +
                      "': bad magic (expected unsigned-byte data of rank " + std::to_string(rank) +
                      ")");
  }
  std::vector<std::uint32_t> dims(rank);
  for (auto& d : dims) {
    unsigned char b[4];
    read_exact(in, b, 4, path, "the header");
    d = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
        b[3];
  }
  return dims;
}

}  // namespace

namespace {

Dataset idx_dataset(const std::filesystem::path& images, const std::filesystem::path& labels) {
  auto storage = std::make_shared<Dataset::Storage>();
  auto& s = *storage;
  s.report.source = images.string();
  GzFile image_file(images);
  const auto dims = read_header(image_file, images, 3);
  GzFile label_file(labels);
  const auto label_dims = read_header(label_file, labels, 1);
  if (label_dims[0] != dims[0]) {
    throw CorruptFile("IDX files disagree: '" + images.string() + "' has " +
                      std::to_string(dims[0]) + " images, '" + labels.string() + "' " +
                      std::to_string(label_dims[0]) + " labels");
  }
  if (dims[1] == 0 || dims[2] == 0 || dims[1] > 65536 || dims[2] > 65536) {
    throw CorruptFile("IDX file '" + images.string() + "': implausible image size " +
                      std::to_string(dims[1]) + "x" + std::to_string(dims[2]));
  }
  s.pixel_height = static_cast<int>(dims[1]);
  s.pixel_width = static_cast<int>(dims[2]);
  read_growing(image_file, s.pixels, static_cast<std::size_t>(dims[0]) * dims[1] * dims[2], images,
               "pixels");
  std::vector<std::uint8_t> raw;
  read_growing(label_file, raw, dims[0], labels, "labels");
  int max_label = 0;
  for (auto v : raw) max_label = std::max<int>(max_label, v);
  for (int c = 0; c <= max_label; ++c) s.classes.push_back(std::to_string(c));
  s.labels.assign(raw.begin(), raw.end());
  s.splits.assign(raw.size(), Split::kNone);
  // Identity: content hash per sample (the images have no paths).
  const std::size_t bytes = static_cast<std::size_t>(dims[1]) * dims[2];
  s.identity.resize(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    s.identity[i] =
        data_detail::fnv1a(&raw[i], 1, data_detail::fnv1a(s.pixels.data() + i * bytes, bytes));
  }
  s.report.candidates = s.report.used = raw.size();
  return Dataset::from_storage(std::move(storage));
}

}  // namespace

Dataset Dataset::from_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                          const DatasetOptions& options) {
  (void)options;  // IDX has no per-file failures to skip
  return data_detail::guarded("IDX '" + images.string() + "'",
                              [&] { return idx_dataset(images, labels); });
}

}  // namespace stoke
