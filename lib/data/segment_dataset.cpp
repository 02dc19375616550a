// Segmentation datasets: image + class-mask pairs from images/ + masks/ (+
// classes.txt), or MVTec AD's per-defect binary masks. Every mask is decoded
// and checked at load (channels, size against its image's header, values), so
// a bad pair is an error naming its files before training starts.
#include <algorithm>
#include <cctype>
#include <exception>
#include <fstream>
#include <map>
#include <set>

#include "stoke/data.hpp"
#include "stoke/error.hpp"
#include "stoke/threads.hpp"

namespace stoke {
namespace fs = std::filesystem;

struct SegmentationDataset::Storage {
  std::vector<Sample> samples;
  std::vector<std::string> classes;
  std::int32_t ignore = kSegmentationIgnoreLabel;
  std::vector<std::uint64_t> class_pixels;
  std::uint64_t ignored = 0;
  DatasetReport report;
};

namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// `file` relative to `dir`, without its extension: the name pairing image and mask.
std::string stem_key(const fs::path& file, const fs::path& dir) {
  fs::path rel = file.lexically_relative(dir);
  rel.replace_extension();
  return rel.generic_string();
}

// The values one mask holds: each with its pixel count and first pixel.
struct ValueSeen {
  std::uint32_t value = 0;
  std::uint64_t count = 0;
  int x = 0, y = 0;
};

// Per-thread scratch: a count per possible value, the values touched.
struct Tally {
  std::vector<std::uint64_t> count = std::vector<std::uint64_t>(65536, 0);
  std::vector<std::pair<int, int>> where = std::vector<std::pair<int, int>>(65536);
  std::vector<std::uint32_t> touched;
  void add(std::uint32_t value, int x, int y, std::uint64_t n = 1) {
    if (count[value] == 0) {
      where[value] = {x, y};
      touched.push_back(value);
    }
    count[value] += n;
  }
  // The values seen since the last take, in value order; resets.
  std::vector<ValueSeen> take() {
    std::sort(touched.begin(), touched.end());
    std::vector<ValueSeen> out;
    for (auto v : touched) {
      out.push_back({v, count[v], where[v].first, where[v].second});
      count[v] = 0;
    }
    touched.clear();
    return out;
  }
};

// Decodes and checks one sample's mask against its image's header, tallying
// its values (MVTec masks mapped to their class).
void check_sample(const SegmentationDataset::Sample& s, const SegmentationOptions& options,
                  Decoder& decoder, std::vector<std::uint8_t>& bytes, Image& mask, Tally& tally) {
  read_file(s.image, bytes);
  DecodeOptions header;
  header.max_pixels = options.max_image_pixels;
  const ImageInfo info = decoder.output_info(bytes, s.image, header);
  if (s.mask.empty()) {
    tally.add(0, 0, 0, static_cast<std::uint64_t>(info.width) * info.height);
    return;
  }
  DecodeOptions d;
  d.max_pixels = options.max_image_pixels;
  d.keep_16_bit = true;
  decoder.decode_file(s.mask, d, mask);
  if (mask.channels() != 1) {
    throw InvalidArgument("mask '" + s.mask + "' has " + std::to_string(mask.channels()) +
                          " colour channels: a mask is one channel of class indices (an 8- or "
                          "16-bit gray PNG), not a colour image");
  }
  if (mask.width() != info.width || mask.height() != info.height) {
    throw InvalidArgument("mask '" + s.mask + "' is " + std::to_string(mask.width()) + "x" +
                          std::to_string(mask.height()) + " but its image '" + s.image + "' is " +
                          std::to_string(info.width) + "x" + std::to_string(info.height));
  }
  const ImageView v = mask.view();
  for (int y = 0; y < v.height; ++y) {
    for (int x = 0; x < v.width; ++x) {
      std::uint32_t value = v.bit_depth == 16 ? v.row16(y)[x] : v.row(y)[x];
      if (s.mask_class >= 0) {
        if (value != 0 && value != 255) {
          throw InvalidArgument("mask '" + s.mask + "': value " + std::to_string(value) +
                                " at pixel (" + std::to_string(x) + ", " + std::to_string(y) +
                                ") in a binary (MVTec) mask, which holds only 0 and 255");
        }
        value = value == 255 ? static_cast<std::uint32_t>(s.mask_class) : 0;
      }
      tally.add(value, x, y);
    }
  }
}

// Checks every sample in parallel (a decoder and tally per chunk); then, in
// sample order, throws the first sample's error or the first value outside
// the classes, so the error does not depend on the thread count.
std::shared_ptr<SegmentationDataset::Storage> check_all(
    std::vector<SegmentationDataset::Sample> samples, std::vector<std::string> classes,
    const SegmentationOptions& options, DatasetReport report) {
  if (options.ignore_label >= 0 && !classes.empty() &&
      options.ignore_label < static_cast<std::int32_t>(classes.size())) {
    throw InvalidArgument("segmentation dataset " + report.source + ": the ignore label " +
                          std::to_string(options.ignore_label) + " is a class index (" +
                          std::to_string(classes.size()) + " classes)");
  }
  std::vector<std::vector<ValueSeen>> seen(samples.size());
  std::vector<std::exception_ptr> errors(samples.size());
  parallel_for(0, samples.size(), 4, [&](std::size_t begin, std::size_t end) {
    Decoder decoder;
    std::vector<std::uint8_t> bytes;
    Image mask;
    Tally tally;
    for (std::size_t i = begin; i < end; ++i) {
      try {
        check_sample(samples[i], options, decoder, bytes, mask, tally);
      } catch (...) {
        errors[i] = std::current_exception();
      }
      seen[i] = tally.take();
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  const auto is_ignore = [&](std::uint32_t v) {
    return options.ignore_label >= 0 && v == static_cast<std::uint32_t>(options.ignore_label);
  };
  if (classes.empty()) {  // names up to the largest value found
    std::uint32_t top = 1;
    for (const auto& values : seen)
      for (const auto& v : values)
        if (!is_ignore(v.value)) top = std::max(top, v.value);
    classes.push_back("background");
    for (std::uint32_t k = 1; k <= top; ++k) classes.push_back("class_" + std::to_string(k));
  }
  auto st = std::make_shared<SegmentationDataset::Storage>();
  st->class_pixels.assign(classes.size(), 0);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    for (const auto& v : seen[i]) {
      if (is_ignore(v.value)) {
        st->ignored += v.count;
      } else if (v.value < classes.size()) {
        st->class_pixels[v.value] += v.count;
      } else {
        throw InvalidArgument("mask '" + samples[i].mask + "': value " + std::to_string(v.value) +
                              " at pixel (" + std::to_string(v.x) + ", " + std::to_string(v.y) +
                              ") is not a class index (" + std::to_string(classes.size()) +
                              " classes: 0.." + std::to_string(classes.size() - 1) +
                              ") nor the ignore label " + std::to_string(options.ignore_label));
      }
    }
  }
  report.used = samples.size();
  st->samples = std::move(samples);
  st->classes = std::move(classes);
  st->ignore = options.ignore_label;
  st->report = std::move(report);
  return st;
}

void require_folder(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw IoError("segmentation dataset: " + what + " '" + dir.string() + "' is not a folder");
}

}  // namespace

std::vector<std::string> read_class_names(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw IoError("cannot read class names '" + file.string() + "': not a readable file");
  std::ifstream in(file);
  if (!in) throw IoError("cannot read class names '" + file.string() + "'");
  std::vector<std::string> names;
  std::set<std::string> seen;
  std::string line;
  std::size_t blank_at = 0, number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string name = trim(line);
    if (name.empty()) {
      if (!blank_at) blank_at = number;
      continue;
    }
    if (blank_at) {
      throw InvalidArgument("class names '" + file.string() + "': line " +
                            std::to_string(blank_at) +
                            " is blank between names (one name per line, background first)");
    }
    if (!seen.insert(name).second) {
      throw InvalidArgument("class names '" + file.string() + "': line " + std::to_string(number) +
                            " repeats the class '" + name + "'");
    }
    names.push_back(name);
  }
  if (in.bad()) throw IoError("cannot read class names '" + file.string() + "'");
  if (names.size() < 2) {
    throw InvalidArgument("class names '" + file.string() + "': " + std::to_string(names.size()) +
                          " name(s); at least 2 (background first, then the classes)");
  }
  return names;
}

SegmentationDataset::SegmentationDataset() : storage_(std::make_shared<Storage>()) {}

SegmentationDataset SegmentationDataset::from_folder(const fs::path& root,
                                                     const SegmentationOptions& options) {
  const fs::path images_dir = root / "images", masks_dir = root / "masks";
  require_folder(images_dir, "images folder");
  DatasetReport report;
  report.source = root.string();
  const auto images = list_image_files(images_dir, options.extensions, report.skipped);
  std::vector<fs::path> masks;
  std::error_code ec;
  if (fs::exists(masks_dir, ec) || !options.missing_mask_is_background) {
    require_folder(masks_dir, "masks folder");
    masks = list_image_files(masks_dir, {".png"}, report.skipped);
  }
  report.candidates = images.size() + masks.size() + report.skipped.size();
  if (images.empty()) {
    throw IoError("segmentation dataset '" + root.string() + "': no images in '" +
                  images_dir.string() + "'");
  }
  std::map<std::string, std::string> mask_by_key;
  for (const auto& m : masks) mask_by_key.emplace(stem_key(m, masks_dir), m.string());
  std::map<std::string, std::string> image_by_key;
  std::vector<Sample> samples;
  for (const auto& image : images) {
    const std::string key = stem_key(image, images_dir);
    if (auto [it, fresh] = image_by_key.emplace(key, image.string()); !fresh) {
      throw InvalidArgument("segmentation dataset: images '" + it->second + "' and '" +
                            image.string() + "' share the name '" + key + "' (one mask, masks/" +
                            key + ".png, cannot belong to both)");
    }
    Sample s;
    s.image = image.string();
    if (auto it = mask_by_key.find(key); it != mask_by_key.end()) {
      s.mask = it->second;
    } else if (!options.missing_mask_is_background) {
      throw IoError("image '" + s.image + "' has no mask: expected '" +
                    (masks_dir / (key + ".png")).string() + "'");
    }
    samples.push_back(std::move(s));
  }
  for (const auto& [key, mask] : mask_by_key) {
    if (!image_by_key.count(key)) {
      throw IoError("mask '" + mask + "' has no image: expected '" + (images_dir / key).string() +
                    "' with one of the image extensions");
    }
  }
  std::vector<std::string> classes = options.classes;
  if (const fs::path names = root / "classes.txt"; fs::exists(fs::symlink_status(names, ec)))
    classes = read_class_names(names);
  SegmentationDataset d;
  d.storage_ = check_all(std::move(samples), std::move(classes), options, std::move(report));
  return d;
}

SegmentationDataset SegmentationDataset::from_mvtec(const fs::path& root,
                                                    const SegmentationOptions& options) {
  const fs::path test = root / "test", truth = root / "ground_truth";
  require_folder(test, "MVTec test folder");
  std::vector<std::string> defects;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(test, ec)) {
    if (e.is_directory() && e.path().filename() != "good")
      defects.push_back(e.path().filename().string());
  }
  if (ec) throw IoError("cannot list '" + test.string() + "': " + ec.message());
  std::sort(defects.begin(), defects.end());
  DatasetReport report;
  report.source = root.string();
  std::vector<Sample> samples;
  std::vector<std::string> classes = {"background"};
  const auto add = [&](const std::string& folder, std::int32_t k) {
    const auto images = list_image_files(test / folder, options.extensions, report.skipped);
    std::set<std::string> used_masks;
    for (const auto& image : images) {
      Sample s;
      s.image = image.string();
      s.mask_class = k;
      if (k > 0) {
        const std::string key = stem_key(image, test / folder);
        const fs::path mask = truth / folder / (key + "_mask.png");
        if (fs::exists(mask, ec)) {
          s.mask = mask.string();
          used_masks.insert(s.mask);
        } else if (!options.missing_mask_is_background) {
          throw IoError("image '" + s.image + "' has no mask: expected '" + mask.string() + "'");
        }
      }
      samples.push_back(std::move(s));
    }
    if (k > 0 && fs::is_directory(truth / folder, ec)) {
      for (const auto& m : list_image_files(truth / folder, {".png"}, report.skipped)) {
        if (!used_masks.count(m.string()))
          throw IoError("mask '" + m.string() + "' has no image in '" + (test / folder).string() +
                        "' (expected <name>_mask.png for <name>.png)");
      }
    }
    report.candidates += images.size() + (k > 0 ? used_masks.size() : 0);
  };
  if (fs::is_directory(test / "good", ec)) add("good", 0);
  for (const auto& d : defects) {
    classes.push_back(d);
    add(d, static_cast<std::int32_t>(classes.size() - 1));
  }
  report.candidates += report.skipped.size();
  if (samples.empty())
    throw IoError("MVTec category '" + root.string() + "': no images under '" + test.string() +
                  "'");
  SegmentationDataset out;
  out.storage_ = check_all(std::move(samples), std::move(classes), options, std::move(report));
  return out;
}

std::size_t SegmentationDataset::size() const noexcept {
  return storage_->samples.size();
}

const SegmentationDataset::Sample& SegmentationDataset::sample(std::size_t index) const {
  if (index >= size()) {
    throw InvalidArgument("segmentation sample " + std::to_string(index) + " of " +
                          std::to_string(size()));
  }
  return storage_->samples[index];
}

const std::vector<std::string>& SegmentationDataset::class_names() const noexcept {
  return storage_->classes;
}
std::int32_t SegmentationDataset::ignore_label() const noexcept {
  return storage_->ignore;
}
const std::vector<std::uint64_t>& SegmentationDataset::class_pixels() const noexcept {
  return storage_->class_pixels;
}
std::uint64_t SegmentationDataset::ignored_pixels() const noexcept {
  return storage_->ignored;
}
const DatasetReport& SegmentationDataset::report() const noexcept {
  return storage_->report;
}

std::string SegmentationDataset::report_string() const {
  std::string out = report().to_string();
  std::uint64_t total = ignored_pixels();
  for (auto n : class_pixels()) total += n;
  const auto share = [&](std::uint64_t n) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.2f %%)", total ? 100.0 * n / total : 0.0);
    return std::string(buf);
  };
  out += "\nclass pixels:";
  for (std::size_t k = 0; k < class_names().size(); ++k)
    out += "\n  " + class_names()[k] + ": " + std::to_string(class_pixels()[k]) +
           share(class_pixels()[k]);
  if (ignore_label() >= 0)
    out += "\n  ignored (" + std::to_string(ignore_label()) +
           "): " + std::to_string(ignored_pixels()) + share(ignored_pixels());
  return out;
}

}  // namespace stoke
