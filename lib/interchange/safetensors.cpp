// safetensors (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length, a JSON header {name: {dtype, shape,
// data_offsets}, "__metadata__": {...}}, then the raw little-endian data.
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/float16.hpp"
#include "core/text.hpp"
#include "interchange/assign.hpp"
#include "stoke/error.hpp"

namespace stoke::interchange {

namespace {

// Just enough JSON for the header: objects, arrays, strings, integers.
struct Json {
  enum class Kind { kNull, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  double number = 0;
  std::string text;
  std::vector<Json> items;        // an array's elements, or an object's values
  std::vector<std::string> keys;  // an object's keys, keys[i] naming items[i]
  // (not a vector of pair<string, Json>: a pair needs the complete type,
  // a vector does not, so clang's libstdc++ checks accept this one)
};

class JsonParser {
 public:
  JsonParser(std::string_view s, std::string what) : s_(s), what_(std::move(what)) {}
  Json parse() {
    Json j = value();
    skip();
    if (pos_ != s_.size()) fail("trailing characters");
    return j;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw CorruptFile(what_ + ": header JSON: " + why + " at offset " + std::to_string(pos_));
  }
  void skip() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
      ++pos_;
  }
  char peek() {
    skip();
    if (pos_ >= s_.size()) fail("unexpected end");
    return s_[pos_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) fail("bad escape");
        c = s_[pos_++];
        if (c == 'u') {  // names are ASCII in practice; keep the escape as text
          out.push_back('\\');
          out.push_back('u');
          continue;
        }
        c = c == 'n'   ? '\n'
            : c == 't' ? '\t'
            : c == 'r' ? '\r'
            : c == 'b' ? '\b'
            : c == 'f' ? '\f'
                       : c;
      }
      out += c;
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }
  Json value(int depth = 0) {
    if (depth > 8) fail("nested too deeply");
    Json j;
    const char c = peek();
    if (c == '{') {
      j.kind = Json::Kind::kObject;
      ++pos_;
      if (peek() == '}') return ++pos_, j;
      for (;;) {
        std::string key = string();
        expect(':');
        j.keys.push_back(std::move(key));
        j.items.push_back(value(depth + 1));
        if (peek() == '}') return ++pos_, j;
        expect(',');
      }
    }
    if (c == '[') {
      j.kind = Json::Kind::kArray;
      ++pos_;
      if (peek() == ']') return ++pos_, j;
      for (;;) {
        j.items.push_back(value(depth + 1));
        if (peek() == ']') return ++pos_, j;
        expect(',');
      }
    }
    if (c == '"') {
      j.kind = Json::Kind::kString;
      j.text = string();
      return j;
    }
    const std::size_t start = pos_;
    while (pos_ < s_.size() && std::strchr("+-0123456789.eE", s_[pos_])) ++pos_;
    if (start == pos_) fail("unexpected character");
    j.kind = Json::Kind::kNumber;
    try {
      j.number = std::stod(std::string(s_.substr(start, pos_ - start)));
    } catch (const std::exception&) {
      fail("bad number");
    }
    return j;
  }
  std::string_view s_;
  std::size_t pos_ = 0;
  std::string what_;
};

const Json* member(const Json& o, const std::string& key) {
  for (std::size_t i = 0; i < o.keys.size(); ++i) {
    if (o.keys[i] == key) return &o.items[i];
  }
  return nullptr;
}

// Element size and conversion of one safetensors dtype to float.
std::vector<float> to_floats(const std::string& dtype, const char* p, std::size_t n,
                             const std::string& where) {
  std::vector<float> out(n);
  if (dtype == "F32") {
    std::memcpy(out.data(), p, n * 4);
  } else if (dtype == "F64") {
    for (std::size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      out[i] = static_cast<float>(d);
    }
  } else if (dtype == "F16" || dtype == "BF16") {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] =
          dtype == "F16" ? stoke::detail::half_to_float(h) : stoke::detail::bfloat16_to_float(h);
    }
  } else {
    throw InvalidArgument(where + ": dtype " + dtype +
                          " is not a float type (F32, F16, BF16, F64)");
  }
  return out;
}

std::size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

std::int64_t integer(const Json& j, const std::string& where) {
  if (j.kind != Json::Kind::kNumber || j.number < 0 ||
      j.number != static_cast<double>(static_cast<std::int64_t>(j.number))) {
    throw CorruptFile(where + ": expected a non-negative integer");
  }
  return static_cast<std::int64_t>(j.number);
}

HostTensor read_entry(const std::string& path, const std::string& name, const Json& e,
                      std::string_view data) {
  const std::string where = path + ": tensor '" + name + "'";
  const Json* dtype = member(e, "dtype");
  const Json* shape = member(e, "shape");
  const Json* offsets = member(e, "data_offsets");
  if (!dtype || dtype->kind != Json::Kind::kString || !shape || shape->kind != Json::Kind::kArray ||
      !offsets || offsets->kind != Json::Kind::kArray || offsets->items.size() != 2) {
    throw CorruptFile(where +
                      ": needs dtype (string), shape (list) and data_offsets ([begin, end])");
  }
  HostTensor t;
  std::int64_t n = 1;
  for (const Json& d : shape->items) {
    t.shape.push_back(integer(d, where + " shape"));
    n *= t.shape.back();
  }
  const std::int64_t begin = integer(offsets->items[0], where),
                     end = integer(offsets->items[1], where);
  const std::size_t size = dtype_bytes(dtype->text);
  if (size == 0) throw CorruptFile(where + ": unknown dtype " + dtype->text);
  if (end < begin || static_cast<std::uint64_t>(end) > data.size() ||
      static_cast<std::uint64_t>(end - begin) != static_cast<std::uint64_t>(n) * size) {
    throw CorruptFile(where + ": data_offsets [" + std::to_string(begin) + ", " +
                      std::to_string(end) + ") do not hold " + std::to_string(n) + " x " +
                      dtype->text + " within the " + std::to_string(data.size()) + " data bytes");
  }
  t.data = to_floats(dtype->text, data.data() + begin, static_cast<std::size_t>(n), where);
  return t;
}

}  // namespace

std::map<std::string, HostTensor> read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError("load_safetensors: cannot open '" + path + "'");
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8)
    throw CorruptFile(path + ": " + std::to_string(bytes.size()) +
                      " bytes, not a safetensors file");
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8) {
    throw CorruptFile(path + ": header length " + std::to_string(n) + " exceeds the file (" +
                      std::to_string(bytes.size()) + " bytes)");
  }
  const Json header = JsonParser(std::string_view(bytes).substr(8, n), path).parse();
  if (header.kind != Json::Kind::kObject)
    throw CorruptFile(path + ": the header is not a JSON object");
  const std::string_view data = std::string_view(bytes).substr(8 + n);
  std::map<std::string, HostTensor> out;
  for (std::size_t i = 0; i < header.keys.size(); ++i) {
    const std::string& name = header.keys[i];
    const Json& e = header.items[i];
    if (name == "__metadata__" || name.ends_with("num_batches_tracked")) continue;
    if (e.kind != Json::Kind::kObject)
      throw CorruptFile(path + ": entry '" + name + "' is not an object");
    out[name] = read_entry(path, name, e, data);
  }
  return out;
}

ImportReport load_safetensors(nn::Model& model, const std::string& path,
                              const ImportOptions& options) {
  return assign_weights(model, read_safetensors(path), options, "load_safetensors '" + path + "'",
                        false);
}

void save_safetensors(const nn::Model& model, const std::string& path) {
  std::vector<nn::NamedTensor> all = model.named_parameters();
  for (auto& b : model.named_buffers()) all.push_back(b);
  std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"producer\":\"stoke\"}";
  std::string data;
  for (const auto& t : all) {
    const std::vector<float> v = t.tensor.to_vector();
    std::string dims;
    for (std::int64_t d : t.tensor.shape()) {
      if (!dims.empty()) dims += ',';
      dims += std::to_string(d);
    }
    header += ',';
    header += detail::json_quote(t.name);
    header += ":{\"dtype\":\"F32\",\"shape\":[" + dims + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + v.size() * 4) + "]}";
    data.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  }
  header += "}";
  while ((header.size() + 8) % 8)
    header += ' ';  // the format pads the header with spaces to 8 bytes
  const std::uint64_t n = header.size();
  std::string file(reinterpret_cast<const char*>(&n), 8);
  file += header;
  file += data;
  detail::write_file_atomically(path, file);  // never a partial file under the final name
}

}  // namespace stoke::interchange
