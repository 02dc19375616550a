// Dataset sources: folder per class and CSV manifest (file-backed, each file's
// format and header checked at load). The accessors and the splits live in
// dataset_access.cpp, IDX in idx.cpp, application buffers in buffers.cpp.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "data/dataset_storage.hpp"
#include "data/rng.hpp"
#include "image/tiff.hpp"
#include "stoke/error.hpp"
#include "stoke/threads.hpp"

namespace stoke {
namespace fs = std::filesystem;
using data_detail::fnv1a;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// Why a path that is not a readable regular file cannot be used, or "".
std::string check_file_kind(const fs::path& path) {
  std::error_code ec;
  const auto link = fs::symlink_status(path, ec);
  if (ec || !fs::exists(link)) return "file not found";
  const auto status = fs::status(path, ec);
  if (fs::is_symlink(link) && (ec || !fs::exists(status))) return "dangling symbolic link";
  if (ec) return "cannot stat: " + ec.message();
  if (fs::is_directory(status)) return "is a directory";
  if (!fs::is_regular_file(status)) return "not a regular file (a device, FIFO or socket)";
  return "";
}

// Why the file cannot be used, or "" when it is fine (then `bit_depth` is the
// depth the loader carries it at: 16 for 16-bit samples, else 8). Reads the first 64 KiB
// for the header (the whole file when the header lies further in, or when a
// full decode is asked for; for a TIFF, only what libtiff reads of its
// directory). The header must describe an image the decoder
// would accept: a frame header, a positive size within max_pixels, a
// supported sampling.
std::string check_image_file(const fs::path& path, const DatasetOptions& options,
                             std::uint64_t max_pixels, Decoder& decoder,
                             std::vector<std::uint8_t>& buffer, Image& scratch,
                             std::uint8_t& bit_depth) {
  bit_depth = 8;
  if (std::string kind = check_file_kind(path); !kind.empty()) return kind;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return "cannot stat: " + ec.message();
  if (size == 0) return "file is empty";
  try {
    DecodeOptions decode_options;
    decode_options.max_pixels = max_pixels;
    decode_options.keep_16_bit = true;
    if (options.verify_decode) {
      decoder.decode_file(path, decode_options, scratch);
      bit_depth = static_cast<std::uint8_t>(scratch.bit_depth());
      return "";
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::string("cannot open: ") + std::strerror(errno);
    buffer.resize(std::min<std::uintmax_t>(size, 64 * 1024));
    in.read(reinterpret_cast<char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() != static_cast<std::streamsize>(buffer.size())) return "short read";
    if (sniff_format(buffer) == ImageFormat::kUnknown)
      return "unsupported format (not JPEG, PNG, BMP or TIFF)";
    ImageInfo info;
    try {
      info = decoder.output_info(buffer, path.string(), decode_options);
    } catch (const DecodeError&) {
      if (size <= buffer.size()) throw;
      if (sniff_format(buffer) ==
          ImageFormat::kTiff) {  // directory past 64 KiB: read only the header parts
        info = detail::tiff_file_info(path);
        check_image_size(path.string(), info.width, info.height, max_pixels);
      } else {
        read_file(path, buffer);
        info = decoder.output_info(buffer, path.string(), decode_options);
      }
    }
    bit_depth = info.bit_depth > 8 ? 16 : 8;
  } catch (const Error& e) {
    return e.what();
  } catch (const std::bad_alloc&) {
    return "out of memory while checking the image";
  }
  return "";
}

// Checks every file in parallel (one Decoder per chunk); then, in index
// order, throws for the first bad one or moves bad ones to the report.
void validate_files(Dataset::Storage& s, const DatasetOptions& options) {
  const std::uint64_t max_pixels = options.max_image_pixels
                                       ? *options.max_image_pixels
                                       : options.context.settings().max_image_pixels.value_or(0);
  std::vector<std::string> problems(s.paths.size());
  s.bit_depths.assign(s.paths.size(), 8);
  parallel_for(0, s.paths.size(), 16, [&](std::size_t begin, std::size_t end) {
    Decoder decoder;
    std::vector<std::uint8_t> buffer;
    Image scratch;
    for (std::size_t i = begin; i < end; ++i) {
      problems[i] = check_image_file(s.paths[i], options, max_pixels, decoder, buffer, scratch,
                                     s.bit_depths[i]);
    }
  });
  std::size_t kept = 0;
  for (std::size_t i = 0; i < s.paths.size(); ++i) {
    if (!problems[i].empty()) {
      if (!options.skip_corrupt) {
        throw DecodeError("dataset " + s.report.source + ": image '" + s.paths[i] +
                          "': " + problems[i] +
                          " (skip_corrupt, the stoke command's --skip-corrupt, skips and lists "
                          "such files)");
      }
      s.report.skipped.push_back({s.paths[i], problems[i]});
      continue;
    }
    if (kept != i) {  // never self-move: it empties the string
      s.paths[kept] = std::move(s.paths[i]);
      s.labels[kept] = s.labels[i];
      s.splits[kept] = s.splits[i];
      s.bit_depths[kept] = s.bit_depths[i];
    }
    ++kept;
  }
  s.paths.resize(kept);
  s.bit_depths.resize(kept);
  s.labels.resize(kept);
  s.splits.resize(kept);
}

// Identity per file: path, size, modification time and label.
void compute_identities(Dataset::Storage& s) {
  s.identity.resize(s.paths.size());
  for (std::size_t i = 0; i < s.paths.size(); ++i) {
    std::error_code ec;
    const std::uint64_t size = fs::file_size(s.paths[i], ec);
    const auto mtime = fs::last_write_time(s.paths[i], ec).time_since_epoch().count();
    std::uint64_t h = fnv1a(s.paths[i].data(), s.paths[i].size());
    h = fnv1a(&size, sizeof size, h);
    h = fnv1a(&mtime, sizeof mtime, h);
    s.identity[i] = fnv1a(&s.labels[i], sizeof s.labels[i], h);
  }
}

void check_classes_nonempty(Dataset::Storage& s, const DatasetOptions& options) {
  std::vector<std::size_t> counts(s.classes.size(), 0);
  for (auto label : s.labels) ++counts[label];
  for (std::size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] != 0) continue;
    if (!options.skip_corrupt && !(options.allow_missing_classes && !options.classes.empty())) {
      throw InvalidArgument(
          "dataset " + s.report.source + ": class '" + s.classes[c] +
          "' has no usable images (skip_corrupt, the stoke command's --skip-corrupt, lists it "
          "in the report instead)");
    }
    s.report.empty_classes.push_back(s.classes[c]);
  }
}

Dataset finish(std::shared_ptr<Dataset::Storage> storage, const DatasetOptions& options) {
  auto& s = *storage;
  s.splits.resize(s.paths.size(), Split::kNone);
  validate_files(s, options);
  check_classes_nonempty(s, options);
  compute_identities(s);
  s.report.used = s.paths.size();
  return Dataset::from_storage(std::move(storage));
}

}  // namespace

namespace {

// The entries of one folder, recursively (images_under's worker).
void collect_images(const fs::path& dir, const std::vector<std::string>& extensions,
                    std::vector<fs::path>& files, std::vector<DatasetReport::Skipped>& skipped) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  if (ec) {
    skipped.push_back({dir.string(), "ignored: cannot list the folder: " + ec.message()});
    return;
  }
  for (; it != end; it.increment(ec)) {
    const fs::path& path = it->path();
    std::error_code kind_ec;
    if (it->is_symlink(kind_ec) && it->is_directory(kind_ec)) {
      skipped.push_back({path.string(), "ignored: a symbolic link to a folder (not followed)"});
    } else if (it->is_directory(kind_ec)) {
      collect_images(path, extensions, files, skipped);
    } else if (std::find(extensions.begin(), extensions.end(), lower(path.extension().string())) ==
               extensions.end()) {
      skipped.push_back({path.string(), "ignored: extension not taken as an image"});
    } else {
      files.push_back(path);
    }
  }
  if (ec) skipped.push_back({dir.string(), "ignored: listing stopped: " + ec.message()});
}

// One class folder: every image under it (list_image_files); labels index
// into options.classes when given.
void list_class_folder(Dataset::Storage& s, const fs::path& dir, const DatasetOptions& options) {
  const std::string name = dir.filename().string();
  std::int32_t label = static_cast<std::int32_t>(s.classes.size());
  if (options.classes.empty()) {
    s.classes.push_back(name);
  } else {
    const auto it = std::find(options.classes.begin(), options.classes.end(), name);
    if (it == options.classes.end()) {
      std::string known;
      for (const auto& c : options.classes) known += (known.empty() ? "" : ",") + c;
      throw InvalidArgument("dataset folder '" + s.report.source + "': class folder '" + name +
                            "' is not one of the classes (" + known + ")");
    }
    label = static_cast<std::int32_t>(it - options.classes.begin());
  }
  const std::size_t skipped_before = s.report.skipped.size();
  const auto files = list_image_files(dir, options.extensions, s.report.skipped);
  s.report.candidates += files.size() + (s.report.skipped.size() - skipped_before);
  for (const auto& f : files) {
    s.paths.push_back(f.string());
    s.labels.push_back(label);
  }
}

Dataset folder_dataset(const fs::path& root, const DatasetOptions& options) {
  auto storage = std::make_shared<Dataset::Storage>();
  storage->skip_corrupt = options.skip_corrupt;
  auto& s = *storage;
  s.report.source = root.string();
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    throw IoError("dataset folder '" + root.string() + "' does not exist or is not a directory");
  }
  std::vector<fs::path> class_dirs;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory(ec)) {
      class_dirs.push_back(entry.path());
    } else {
      ++s.report.candidates;
      s.report.skipped.push_back(
          {entry.path().string(), "ignored: not in a class folder (root/<class>/<image>)"});
    }
  }
  std::sort(class_dirs.begin(), class_dirs.end());
  if (class_dirs.empty()) {
    throw InvalidArgument("dataset folder '" + root.string() +
                          "' has no class subfolders (expected root/<class>/<image>)");
  }
  if (!options.classes.empty()) s.classes = options.classes;
  for (const auto& dir : class_dirs) list_class_folder(s, dir, options);
  return finish(std::move(storage), options);
}

}  // namespace

std::vector<fs::path> list_image_files(const fs::path& root,
                                       const std::vector<std::string>& extensions,
                                       std::vector<DatasetReport::Skipped>& skipped) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw IoError("'" + root.string() + "' does not exist or is not a folder");
  std::vector<fs::path> files;
  collect_images(root, extensions, files, skipped);
  std::sort(files.begin(), files.end());
  return files;
}

Dataset Dataset::from_folder(const fs::path& root, const DatasetOptions& options) {
  return data_detail::guarded("dataset folder '" + root.string() + "'",
                              [&] { return folder_dataset(root, options); });
}

namespace {

Dataset manifest_dataset(const fs::path& csv, const DatasetOptions& options) {
  auto storage = std::make_shared<Dataset::Storage>();
  storage->skip_corrupt = options.skip_corrupt;
  auto& s = *storage;
  s.report.source = csv.string();
  if (std::string kind = check_file_kind(csv); !kind.empty()) {
    throw IoError("cannot read manifest '" + csv.string() + "': " + kind);
  }
  std::ifstream in(csv);
  if (!in) throw IoError("cannot open manifest '" + csv.string() + "': " + std::strerror(errno));
  const fs::path base = csv.parent_path();
  struct Row {
    std::string path, label;
    Split split;
    int line;
  };
  std::vector<Row> rows;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string text = trim(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> fields;
    std::stringstream ss(text);
    for (std::string f; std::getline(ss, f, ',');) fields.push_back(trim(f));
    if (number == 1 && !fields.empty() && lower(fields[0]) == "path") continue;
    const std::string where = csv.string() + ":" + std::to_string(number);
    if (fields.size() < 2 || fields.size() > 3 || fields[0].empty() || fields[1].empty()) {
      throw InvalidArgument("manifest " + where + ": expected `path,label[,split]`, got '" + text +
                            "'");
    }
    Split split = Split::kNone;
    if (fields.size() == 3) {
      const std::string v = lower(fields[2]);
      if (v == "train")
        split = Split::kTrain;
      else if (v == "val" || v == "valid" || v == "validation")
        split = Split::kVal;
      else if (v == "test")
        split = Split::kTest;
      else if (!v.empty())
        throw InvalidArgument("manifest " + where + ": unknown split '" + fields[2] +
                              "' (train, val, test)");
    }
    fs::path p = fields[0];
    if (p.is_relative()) p = base / p;
    rows.push_back({p.string(), fields[1], split, number});
  }
  s.report.candidates = rows.size();
  if (!options.classes.empty()) {
    s.classes = options.classes;
  } else {
    std::set<std::string> distinct;
    for (const auto& r : rows) distinct.insert(r.label);
    s.classes.assign(distinct.begin(), distinct.end());
    const bool numeric = std::all_of(s.classes.begin(), s.classes.end(), [](const std::string& v) {
      // Only labels that fit a long long: std::stoll below throws on the rest.
      long long x;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      return ec == std::errc() && end == v.data() + v.size();
    });
    if (numeric) {
      std::sort(s.classes.begin(), s.classes.end(), [](const std::string& a, const std::string& b) {
        return std::stoll(a) < std::stoll(b);
      });
    }
  }
  std::map<std::string, std::int32_t> index;
  for (std::size_t c = 0; c < s.classes.size(); ++c)
    index[s.classes[c]] = static_cast<std::int32_t>(c);
  for (const auto& r : rows) {
    const auto it = index.find(r.label);
    if (it == index.end()) {
      const std::string reason =
          "unknown label '" + r.label + "' (line " + std::to_string(r.line) + ")";
      if (!options.skip_corrupt) {
        throw InvalidArgument("manifest " + csv.string() + ":" + std::to_string(r.line) +
                              ": image '" + r.path + "': " + reason);
      }
      s.report.skipped.push_back({r.path, reason});
      continue;
    }
    s.paths.push_back(r.path);
    s.labels.push_back(it->second);
    s.splits.push_back(r.split);
  }
  return finish(std::move(storage), options);
}

}  // namespace

Dataset Dataset::from_manifest(const fs::path& csv, const DatasetOptions& options) {
  return data_detail::guarded("manifest '" + csv.string() + "'",
                              [&] { return manifest_dataset(csv, options); });
}

}  // namespace stoke
