// A minimal protocol-buffers wire-format writer and reader: just what ONNX
// files need (varints, 32-bit floats, length-delimited fields). stoke writes
// and reads ONNX with it instead of linking libprotobuf, so an application
// that links its own protobuf never meets a second copy (docs/interchange.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stoke/export.hpp"

namespace stoke::interchange::pb {

enum class Wire : std::uint8_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// Appends fields to a byte string; nested messages are written first and then
// added with message().
class STOKE_INTERNAL Writer {
 public:
  void varint(int field, std::uint64_t value);
  void int64(int field, std::int64_t value) { varint(field, static_cast<std::uint64_t>(value)); }
  void bytes(int field, std::string_view value);
  void message(int field, const Writer& m) { bytes(field, m.data_); }
  void float32(int field, float value);
  void packed_int64(int field, const std::vector<std::int64_t>& values);
  const std::string& data() const noexcept { return data_; }

 private:
  void raw_varint(std::uint64_t value);
  void tag(int field, Wire wire) {
    raw_varint(static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire));
  }
  std::string data_;
};

// One field as read: its number, wire type, and value (varint or fixed bits
// in `number`, the bytes of a length-delimited field in `bytes`).
struct STOKE_INTERNAL Field {
  int field = 0;
  Wire wire = Wire::kVarint;
  std::uint64_t number = 0;
  std::string_view bytes;
  float as_float() const noexcept;
};

// Iterates the fields of one message. next() returns false at the end;
// CorruptFile naming `what` for a truncated or malformed field.
class STOKE_INTERNAL Reader {
 public:
  Reader(std::string_view data, std::string what) : data_(data), what_(std::move(what)) {}
  bool next(Field& f);

 private:
  std::uint64_t read_varint();
  std::string_view data_;
  std::size_t pos_ = 0;
  std::string what_;
};

// Repeated int64 either packed (one bytes field) or one varint per field.
STOKE_INTERNAL void append_int64s(const Field& f, std::vector<std::int64_t>& out,
                                  const std::string& what);
// Repeated float either packed or one fixed32 per field.
STOKE_INTERNAL void append_floats(const Field& f, std::vector<float>& out, const std::string& what);

}  // namespace stoke::interchange::pb
