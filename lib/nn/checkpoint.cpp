// Checkpoint writer and bounds-checked reader.
#include "stoke/nn/checkpoint.hpp"

#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/regular_file.hpp"
#include "stoke/error.hpp"

namespace stoke::nn {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'O', 'K', 'E', 'C', 'K', 'P'};
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8;
// No flag is defined: a version-1 file has flags 0.
constexpr std::uint32_t kCheckpointFlags = 0;

class Writer {
 public:
  template <class T>
  void pod(T v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    buf.insert(buf.end(), p, p + sizeof(T));
  }
  void bytes(const void* p, std::size_t n) {
    buf.insert(buf.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  }
  void str(const std::string& s) {
    pod(static_cast<std::uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void map(const std::map<std::string, std::string>& m) {
    pod(static_cast<std::uint32_t>(m.size()));
    for (const auto& [k, v] : m) {
      str(k);
      str(v);
    }
  }
  std::vector<char> buf;
};

class Reader {
 public:
  Reader(const std::string& path, const char* data, std::size_t size)
      : path_(path), p_(data), end_(data + size) {}
  void need(std::size_t n, const char* what) {
    if (static_cast<std::size_t>(end_ - p_) < n) {
      throw CorruptFile("checkpoint '" + path_ + "': payload ends while reading " + what +
                        " (needs " + std::to_string(n) + " bytes, " + std::to_string(end_ - p_) +
                        " left)");
    }
  }
  template <class T>
  T pod(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    const auto n = pod<std::uint32_t>(what);
    need(n, what);
    std::string s(p_, n);
    p_ += n;
    return s;
  }
  std::map<std::string, std::string> map(const char* what) {
    std::map<std::string, std::string> m;
    const auto n = pod<std::uint32_t>(what);
    for (std::uint32_t i = 0; i < n; ++i) {
      std::string k = str(what);
      m[k] = str(what);
    }
    return m;
  }
  const char* take(std::size_t n, const char* what) {
    need(n, what);
    const char* at = p_;
    p_ += n;
    return at;
  }
  bool done() const { return p_ == end_; }

 private:
  std::string path_;
  const char* p_;
  const char* end_;
};

struct StoredTensor {
  DType dtype;
  Shape shape;
  const char* data;
  std::size_t bytes;
};

struct Parsed {
  CheckpointInfo info;
  std::vector<char> file;
  std::map<std::string, StoredTensor> tensors;
};

// The whole file, read only once it is a regular file whose magic and size
// agree with its header (a model file is input, like an image: /dev/zero, a
// FIFO or a 50 GB sparse file must not be read whole or block).
std::vector<char> read_checked(const std::string& path) {
  const detail::RegularFile file(path, "checkpoint");
  if (file.size() < kHeaderBytes + 4) {
    throw CorruptFile("checkpoint '" + path + "': " + std::to_string(file.size()) +
                      " bytes is shorter than a header; the file is truncated or not a checkpoint");
  }
  char head[kHeaderBytes];
  file.read_at(0, head, sizeof head);
  if (std::memcmp(head, kMagic, 8) != 0)
    throw CorruptFile("checkpoint '" + path + "': not a stoke checkpoint (bad magic)");
  std::uint64_t payload = 0;
  std::memcpy(&payload, head + 16, sizeof payload);
  if (payload != file.size() - kHeaderBytes - 4) {
    throw CorruptFile("checkpoint '" + path + "': header says " + std::to_string(payload) +
                      " payload bytes, file has " + std::to_string(file.size() - kHeaderBytes - 4) +
                      "; the file is truncated or was extended");
  }
  std::vector<char> bytes;
  try {
    bytes.resize(file.size());
  } catch (const std::bad_alloc&) {
    throw OutOfMemory("checkpoint '" + path + "': no memory to read its " +
                          std::to_string(file.size()) + " bytes",
                      file.size(), 0, 0);
  }
  file.read_at(0, bytes.data(), bytes.size());
  return bytes;
}

// CorruptFile unless every value of a float32 tensor is finite: a diverged
// model is refused where it is read, whichever command reads it.
void check_finite(const std::string& path, const std::string& name, const StoredTensor& t) {
  if (t.dtype != DType::kFloat32) return;
  for (std::size_t i = 0; i < t.bytes / sizeof(float); ++i) {
    float v;
    std::memcpy(&v, t.data + i * sizeof(float), sizeof v);
    if (!std::isfinite(v)) {
      throw CorruptFile("checkpoint '" + path + "': tensor '" + name +
                        "' holds NaN or infinite values (the training that wrote it diverged)");
    }
  }
}

// CorruptFile unless every size in the spec is within what any model stoke
// builds uses: the spec sizes allocations before the tensors are compared,
// so a crafted value (a CRC is no signature) must not reach build_model.
void check_spec_bounds(const std::string& path, const ModelSpec& s) {
  const auto within = [&](const char* key, double v, double lo, double hi) {
    if (!(v >= lo && v <= hi)) {
      throw CorruptFile("checkpoint '" + path + "': model." + key + " = " + std::to_string(v) +
                        " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  };
  within("in_channels", s.in_channels, 1, 64);
  within("height", s.height, 1, 16384);
  within("width", s.width, 1, 16384);
  within("classes", s.classes, 1, 1 << 20);
  within("stem_width", s.stem_width, 1, 8192);
  within("blocks_per_stage", s.blocks_per_stage, 0, 64);
  within("stages", static_cast<double>(s.widths.size()), 0, 16);
  within("strides", static_cast<double>(s.strides.size()), 0, 16);
  for (int w : s.widths) within("widths", w, 1, 8192);
  for (int v : s.strides) within("strides", v, 1, 8);
  within("decoder_channels", static_cast<double>(s.decoder_channels.size()), 0, 16);
  for (int d : s.decoder_channels) within("decoder_channels", d, 1, 8192);
  within("dropout", s.dropout, 0, 1);
  within("width_multiplier", s.width_multiplier, 1e-3, 16);
}

Parsed parse(const std::string& path) {
  Parsed out;
  out.file = read_checked(path);
  const std::vector<char>& f = out.file;
  Reader header(path, f.data() + 8, kHeaderBytes - 8);
  const auto version = header.pod<std::uint32_t>("version");
  const auto flags = header.pod<std::uint32_t>("flags");
  const auto payload = header.pod<std::uint64_t>("payload length");
  if (version != kCheckpointVersion) {
    throw CorruptFile("checkpoint '" + path + "': version " + std::to_string(version) +
                      ", this build reads version " + std::to_string(kCheckpointVersion));
  }
  // Every header field has exactly one valid value for this file (the CRC
  // covers the payload only), so a flipped flags byte is refused, not ignored.
  if (flags != kCheckpointFlags) {
    throw CorruptFile("checkpoint '" + path + "': header flags are " + std::to_string(flags) +
                      ", this build writes and reads " + std::to_string(kCheckpointFlags) +
                      "; the header is corrupt");
  }
  if (payload != f.size() - kHeaderBytes - 4) {
    throw CorruptFile(
        "checkpoint '" + path + "': header says " + std::to_string(payload) +
        " payload bytes, file has " +
        std::to_string(f.size() >= kHeaderBytes + 4 ? f.size() - kHeaderBytes - 4 : 0) +
        "; the file is truncated or was extended");
  }
  const char* body = f.data() + kHeaderBytes;
  std::uint32_t stored_crc;
  std::memcpy(&stored_crc, body + payload, 4);
  const auto crc = static_cast<std::uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(body), static_cast<uInt>(payload)));
  if (crc != stored_crc)
    throw CorruptFile("checkpoint '" + path + "': checksum mismatch; the file is corrupt");
  Reader r(path, body, payload);
  out.info.version = version;
  try {
    out.info.spec = ModelSpec::from_map(r.map("model spec"));
  } catch (const InvalidArgument& e) {
    throw CorruptFile("checkpoint '" + path + "': bad model spec: " + e.what());
  }
  check_spec_bounds(path, out.info.spec);
  out.info.metadata = r.map("metadata");
  out.info.optimizer_kind = r.str("optimizer kind");
  out.info.optimizer_steps = r.pod<std::int64_t>("optimizer steps");
  const auto count = r.pod<std::uint32_t>("tensor count");
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string name = r.str("tensor name");
    StoredTensor t{};
    const auto dtype = r.pod<std::uint8_t>("tensor dtype");
    if (dtype > static_cast<std::uint8_t>(DType::kUInt8)) {
      throw CorruptFile("checkpoint '" + path + "': tensor '" + name + "' has unknown dtype " +
                        std::to_string(dtype));
    }
    t.dtype = static_cast<DType>(dtype);
    const auto rank = r.pod<std::uint8_t>("tensor rank");
    for (int d = 0; d < rank; ++d) {
      const auto dim = r.pod<std::int64_t>("tensor shape");
      if (dim < 0)
        throw CorruptFile("checkpoint '" + path + "': tensor '" + name +
                          "' has a negative dimension");
      t.shape.push_back(dim);
    }
    t.bytes = r.pod<std::uint64_t>("tensor size");
    // The element count in unsigned arithmetic with an overflow check: a
    // corrupt shape must not overflow shape_numel's signed product.
    std::uint64_t expected = dtype_size(t.dtype);
    bool overflow = false;
    for (std::int64_t d : t.shape)
      overflow |= __builtin_mul_overflow(expected, static_cast<std::uint64_t>(d), &expected);
    if (overflow || t.bytes != expected) {
      throw CorruptFile("checkpoint '" + path + "': tensor '" + name + "' " +
                        shape_to_string(t.shape) + " claims " + std::to_string(t.bytes) + " bytes");
    }
    t.data = r.take(t.bytes, "tensor data");
    check_finite(path, name, t);
    out.tensors.emplace(std::move(name), t);
  }
  if (!r.done())
    throw CorruptFile("checkpoint '" + path + "': trailing bytes after the last tensor");
  return out;
}

void restore(const std::string& path, const std::map<std::string, StoredTensor>& stored,
             const std::string& name, Tensor& target) {
  auto it = stored.find(name);
  if (it == stored.end()) {
    throw CorruptFile("checkpoint '" + path + "': tensor '" + name +
                      "' is missing; the file was saved from another model");
  }
  if (it->second.shape != target.shape() || it->second.dtype != target.dtype()) {
    throw CorruptFile("checkpoint '" + path + "': tensor '" + name + "' is " +
                      to_string(it->second.dtype) + " " + shape_to_string(it->second.shape) +
                      ", the model has " + to_string(target.dtype()) + " " +
                      shape_to_string(target.shape()));
  }
  if (target.bytes()) target.copy_from_host(it->second.data);
}

}  // namespace

void save_checkpoint(const std::string& path, const Model& model, const Optimizer* optimizer,
                     const std::map<std::string, std::string>& metadata) {
  Writer w;
  w.map(model.spec().to_map());
  w.map(metadata);
  w.str(optimizer ? optimizer->kind() : "");
  w.pod<std::int64_t>(optimizer ? optimizer->steps() : 0);
  std::vector<NamedTensor> tensors;
  for (auto& t : model.named_parameters()) tensors.push_back({"param:" + t.name, t.tensor});
  for (auto& t : model.named_buffers()) tensors.push_back({"buffer:" + t.name, t.tensor});
  if (optimizer) {
    for (auto& t : optimizer->state()) tensors.push_back({"optim:" + t.name, t.tensor});
  }
  w.pod(static_cast<std::uint32_t>(tensors.size()));
  std::vector<char> host;
  for (const NamedTensor& t : tensors) {
    w.str(t.name);
    w.pod(static_cast<std::uint8_t>(t.tensor.dtype()));
    w.pod(static_cast<std::uint8_t>(t.tensor.rank()));
    for (std::int64_t d : t.tensor.shape()) w.pod(d);
    w.pod(static_cast<std::uint64_t>(t.tensor.bytes()));
    host.resize(t.tensor.bytes());
    if (!host.empty()) t.tensor.copy_to_host(host.data());
    w.bytes(host.data(), host.size());
  }
  const auto crc = static_cast<std::uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(w.buf.data()), static_cast<uInt>(w.buf.size())));
  std::string file;
  file.reserve(8 + 4 + 4 + 8 + w.buf.size() + 4);
  const std::uint32_t version = kCheckpointVersion, flags = kCheckpointFlags;
  const std::uint64_t payload = w.buf.size();
  file.append(kMagic, 8);
  file.append(reinterpret_cast<const char*>(&version), 4);
  file.append(reinterpret_cast<const char*>(&flags), 4);
  file.append(reinterpret_cast<const char*>(&payload), 8);
  file.append(w.buf.data(), w.buf.size());
  file.append(reinterpret_cast<const char*>(&crc), 4);
  // Temporary file, fsync, rename, fsync of the directory: a crash at any
  // moment leaves the previous checkpoint or this one, never a broken file.
  detail::write_file_atomically(path, file);
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return parse(path).info;
}

CheckpointInfo load_checkpoint(const std::string& path, Model& model, Optimizer* optimizer) {
  Parsed p = parse(path);
  if (p.info.spec.to_map() != model.spec().to_map()) {
    throw CorruptFile(
        "checkpoint '" + path +
        "': saved for a different model spec (architecture, input size, widths or classes differ)");
  }
  for (auto& t : model.named_parameters()) restore(path, p.tensors, "param:" + t.name, t.tensor);
  for (auto& t : model.named_buffers()) restore(path, p.tensors, "buffer:" + t.name, t.tensor);
  if (optimizer && !p.info.optimizer_kind.empty()) {
    if (p.info.optimizer_kind != optimizer->kind()) {
      throw CorruptFile("checkpoint '" + path + "': optimizer state is '" + p.info.optimizer_kind +
                        "', the optimizer is '" + optimizer->kind() + "'");
    }
    for (auto& t : optimizer->state()) restore(path, p.tensors, "optim:" + t.name, t.tensor);
    optimizer->set_steps(p.info.optimizer_steps);
  }
  return p.info;
}

std::unique_ptr<Model> load_model(const std::string& path, Backend& backend, CheckpointInfo* info) {
  const CheckpointInfo header = read_checkpoint_info(path);
  auto model = build_model(backend, header.spec, 0, Initialization::kNone);  // all loaded below
  CheckpointInfo loaded = load_checkpoint(path, *model, nullptr);
  if (info) *info = std::move(loaded);
  return model;
}

}  // namespace stoke::nn
