// Protocol-buffers wire format (https://protobuf.dev/programming-guides/encoding/).
#include "interchange/protobuf.hpp"

#include <cstring>

#include "stoke/error.hpp"

namespace stoke::interchange::pb {

void Writer::raw_varint(std::uint64_t value) {
  while (value >= 0x80) {
    data_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  data_.push_back(static_cast<char>(value));
}

void Writer::varint(int field, std::uint64_t value) {
  tag(field, Wire::kVarint);
  raw_varint(value);
}

void Writer::bytes(int field, std::string_view value) {
  tag(field, Wire::kBytes);
  raw_varint(value.size());
  data_.append(value);
}

void Writer::float32(int field, float value) {
  tag(field, Wire::kFixed32);
  char b[4];
  std::memcpy(b, &value, 4);  // protobuf is little-endian, as are stoke's targets
  data_.append(b, 4);
}

void Writer::packed_int64(int field, const std::vector<std::int64_t>& values) {
  Writer body;
  for (std::int64_t v : values) body.raw_varint(static_cast<std::uint64_t>(v));
  bytes(field, body.data_);
}

float Field::as_float() const noexcept {
  const auto bits = static_cast<std::uint32_t>(number);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint64_t Reader::read_varint() {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= data_.size())
      throw CorruptFile(what_ + ": truncated varint at byte " + std::to_string(pos_));
    const auto b = static_cast<unsigned char>(data_[pos_++]);
    v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  throw CorruptFile(what_ + ": varint longer than 10 bytes at byte " + std::to_string(pos_));
}

bool Reader::next(Field& f) {
  if (pos_ >= data_.size()) return false;
  const std::uint64_t key = read_varint();
  f.field = static_cast<int>(key >> 3);
  f.wire = static_cast<Wire>(key & 7);
  f.bytes = {};
  f.number = 0;
  const auto need = [&](std::uint64_t n) {
    if (n > data_.size() - pos_) {
      throw CorruptFile(what_ + ": field " + std::to_string(f.field) + " needs " +
                        std::to_string(n) + " bytes at byte " + std::to_string(pos_) + ", " +
                        std::to_string(data_.size() - pos_) + " remain");
    }
  };
  switch (f.wire) {
    case Wire::kVarint:
      f.number = read_varint();
      return true;
    case Wire::kFixed64:
    case Wire::kFixed32: {
      const std::size_t n = f.wire == Wire::kFixed64 ? 8 : 4;
      need(n);
      std::uint64_t v = 0;
      std::memcpy(&v, data_.data() + pos_, n);
      f.number = v;
      pos_ += n;
      return true;
    }
    case Wire::kBytes: {
      const std::uint64_t n = read_varint();
      need(n);
      f.bytes = data_.substr(pos_, n);
      pos_ += n;
      return true;
    }
  }
  throw CorruptFile(what_ + ": unsupported wire type " + std::to_string(key & 7) + " for field " +
                    std::to_string(f.field) + " at byte " + std::to_string(pos_));
}

void append_int64s(const Field& f, std::vector<std::int64_t>& out, const std::string& what) {
  if (f.wire == Wire::kVarint) {
    out.push_back(static_cast<std::int64_t>(f.number));
    return;
  }
  // A packed run is varints back to back; read them as field-less values.
  std::string_view rest = f.bytes;
  while (!rest.empty()) {
    std::uint64_t x = 0;
    int shift = 0;
    std::size_t i = 0;
    for (;; ++i, shift += 7) {
      if (i >= rest.size() || shift >= 64) throw CorruptFile(what + ": truncated packed int64");
      const auto b = static_cast<unsigned char>(rest[i]);
      x |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) break;
    }
    out.push_back(static_cast<std::int64_t>(x));
    rest.remove_prefix(i + 1);
  }
}

void append_floats(const Field& f, std::vector<float>& out, const std::string& what) {
  if (f.wire == Wire::kFixed32) {
    out.push_back(f.as_float());
    return;
  }
  if (f.wire != Wire::kBytes || f.bytes.size() % 4)
    throw CorruptFile(what + ": packed floats of a size not a multiple of 4");
  const std::size_t n = f.bytes.size() / 4, at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, f.bytes.data(), f.bytes.size());
}

}  // namespace stoke::interchange::pb
