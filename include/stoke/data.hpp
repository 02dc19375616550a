// Datasets (folder per class, CSV manifest, IDX), seeded stratified splits, the
// synthetic industrial-inspection generator, and the Loader: a oneTBB pipeline
// read -> decode -> deterministic preprocess -> cache -> augment -> batch that
// fills caller-provided batch buffers, identically for any thread count; and
// for segmentation, image + class-mask datasets and their SegmentationLoader.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stoke/config.hpp"
#include "stoke/context.hpp"
#include "stoke/export.hpp"
#include "stoke/image.hpp"
#include "stoke/profile.hpp"

namespace stoke {

// ---- Datasets -----------------------------------------------------------------

enum class Split : std::int8_t { kNone = -1, kTrain = 0, kVal = 1, kTest = 2 };
STOKE_API const char* to_string(Split split) noexcept;

// Files that were skipped (skip_corrupt) and why; nothing is dropped silently:
// every entry seen is used or skipped (candidates == used + skipped.size()),
// including files with other extensions, directories named like images,
// dangling symbolic links, special and unreadable files.
struct STOKE_API DatasetReport {
  std::string source;          // the folder, manifest or IDX file
  std::size_t candidates = 0;  // entries seen
  std::size_t used = 0;
  struct Skipped {
    std::string path;
    std::string reason;
  };
  std::vector<Skipped> skipped;
  std::vector<std::string> empty_classes;
  std::string to_string() const;
};

struct DatasetOptions {
  // Bad entries (missing file, unsupported format, corrupt header, unknown
  // label) are listed in the report and skipped instead of throwing; an empty
  // class is listed instead of throwing.
  bool skip_corrupt = false;
  // Decode every image fully at load (catches corrupt pixel data, not only a
  // corrupt header); slower. Off: headers only.
  bool verify_decode = false;
  // Images whose header claims more pixels are refused at load (the reason
  // names STOKE_MAX_IMAGE_PIXELS); empty: the context's value. 0: no limit.
  std::optional<std::uint64_t> max_image_pixels;
  // Where STOKE_MAX_IMAGE_PIXELS comes from when max_image_pixels is empty
  // (runtime.context; the default context holds the default limit).
  Context context;
  // Manifest: the accepted labels in label order; empty: the sorted distinct
  // labels found (numerically sorted when all are integers). Folder: the
  // classes in label order (a model's, the training set's); every class
  // folder must be one of them (InvalidArgument naming it and the classes
  // otherwise); empty: the sorted class folder names.
  std::vector<std::string> classes;
  // With `classes` given: a class without images (no folder, no manifest
  // line) is listed in report.empty_classes instead of an error (a validation
  // or evaluation set may hold only some of the classes).
  bool allow_missing_classes = false;
  // Folder source: file extensions taken as images (lower case).
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff"};
};

// The files a folder contributes, the one rule every folder source and the
// `stoke` command use: every entry under `root`, in its subfolders too
// (symbolic links to folders are not followed), whose extension (lower case)
// is one of `extensions`, sorted; such an entry that turns out to be no
// readable image (a dangling link, a FIFO) is the reader's to report. Every
// other entry is appended to `skipped` with the reason. IoError when `root`
// is not a folder.
STOKE_API std::vector<std::filesystem::path> list_image_files(
    const std::filesystem::path& root, const std::vector<std::string>& extensions,
    std::vector<DatasetReport::Skipped>& skipped);

// Pixel layouts of application-held frames (camera buffers). Mono16 keeps its
// 16-bit samples (native byte order) through resize and normalization, as
// 16-bit PNG and TIFF files do, in datasets and in the predictor alike
// (normalized as v / 65535; see docs/pipeline.md).
enum class PixelFormat { kMono8, kMono16, kRgb8, kBgr8 };
STOKE_API const char* to_string(PixelFormat format) noexcept;

// One application-held image: `stride` bytes between rows (0: packed,
// width * bytes per pixel). Read (copied) when the Dataset is built.
struct ImageBuffer {
  const std::uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  PixelFormat format = PixelFormat::kMono8;
  std::size_t stride = 0;
};

// A list of labelled images: files (folder, manifest) or in-memory pixels
// (IDX, application buffers). Cheap to copy (shares its storage).
class STOKE_API Dataset {
 public:
  Dataset();

  // root/<class>/<image> (images in subfolders of a class folder belong to
  // it; list_image_files); classes in sorted folder-name order, or
  // options.classes.
  static Dataset from_folder(const std::filesystem::path& root, const DatasetOptions& options = {});
  // CSV lines `path,label[,split]` (a header line starting with `path` is
  // skipped); relative paths are relative to the manifest's folder. split is
  // train/val/test.
  static Dataset from_manifest(const std::filesystem::path& csv,
                               const DatasetOptions& options = {});
  // IDX (MNIST format) images (ubyte, rank 3) and labels (ubyte, rank 1),
  // gzip-compressed or plain.
  static Dataset from_idx(const std::filesystem::path& images, const std::filesystem::path& labels,
                          const DatasetOptions& options = {});
  // Images an application already holds, copied (Mono8 as gray, RGB8 and
  // BGR8 as RGB), with their labels (indices into class_names). Sizes may
  // differ per image. InvalidArgument naming the image for a null pointer, a
  // non-positive size, a stride below the row size, a label out of range or a
  // size above max_image_pixels; DatasetOptions::skip_corrupt does not apply.
  static Dataset from_buffers(std::span<const ImageBuffer> images,
                              std::span<const std::int32_t> labels,
                              std::vector<std::string> class_names,
                              const DatasetOptions& options = {});

  std::size_t size() const noexcept;
  bool empty() const noexcept { return size() == 0; }
  const std::vector<std::string>& class_names() const noexcept;
  std::int32_t label(std::size_t index) const;
  Split split(std::size_t index) const;
  // The file of a file-backed sample; for IDX "<images file>#<index>".
  std::string path(std::size_t index) const;
  // The stored file path without a copy; empty for in-memory samples.
  const std::string& file(std::size_t index) const;
  // In-memory samples: the pixels (IDX: gray; buffers: gray or RGB; Mono16:
  // 16-bit gray); empty view for file-backed datasets.
  ImageView pixels(std::size_t index) const;
  // The sample depth the loader carries (with a float output dtype): 16 for
  // 16-bit samples (16-bit PNG or TIFF, from the header at load; Mono16
  // buffers), else 8.
  int bit_depth(std::size_t index) const;
  bool in_memory() const noexcept;
  const DatasetReport& report() const noexcept;
  // The DatasetOptions::skip_corrupt it was loaded with (subsets keep it):
  // what a Loader does with a file found bad while reading, unless told otherwise.
  bool skip_corrupt() const noexcept;

  // The samples at `indices` (in that order), sharing storage.
  Dataset subset(std::span<const std::size_t> indices) const;
  // Hash of every sample's identity (path, file size and mtime, label; IDX:
  // content), used in cache keys: a changed listing changes it.
  std::uint64_t fingerprint() const;

  // Internal: the sources build a Storage (lib/data/dataset_storage.hpp).
  struct Storage;
  static Dataset from_storage(std::shared_ptr<const Storage> storage);

 private:
  std::uint32_t row(std::size_t index) const;

  std::shared_ptr<const Storage> storage_;
  std::vector<std::uint32_t> rows_;  // indices into storage_
};

// Indices into a Dataset per split.
struct SplitIndices {
  std::vector<std::size_t> train;
  std::vector<std::size_t> val;
  std::vector<std::size_t> test;
};

// Per class, shuffles that class's indices with a generator seeded by (seed,
// class) and cuts them by the percentages (which must sum to 100; 2 or 3
// values: train/val[/test]); every split gets floor(count * pct / 100) and the
// remainders go to train. Same seed: same split on any machine or thread count.
STOKE_API SplitIndices stratified_split(const Dataset& dataset, std::span<const double> percents,
                                        std::uint64_t seed);
// The split column of a manifest.
STOKE_API SplitIndices manifest_split(const Dataset& dataset);

// ---- Synthetic industrial-inspection images ----------------------------------

struct SyntheticOptions {
  int width = 2448;
  int height = 2048;
  double defect_fraction = 0.3;  // share of images labelled defect
  std::uint64_t seed = 1;
  enum class Format { kJpeg, kPng } format = Format::kJpeg;
  int jpeg_quality = 90;
  std::size_t first = 0;  // write images [first, first + count): lets a caller write in chunks
  // Not empty: each defect image's ground-truth mask as
  // mask_root/defect/NNNNNN_mask.png (MVTec AD's ground_truth layout; 8-bit,
  // 255 where a defect changes the pixel by 8 levels or more, else 0).
  std::filesystem::path mask_root;
};

// One RGB image: a brushed-metal texture with low-frequency shading and grain;
// with `defect`, scratches and spots. Deterministic in (seed, defect). With
// `mask`: a 1-channel image of the same size, 255 on the defect pixels.
STOKE_API void synthetic_inspection_image(int width, int height, std::uint64_t seed, bool defect,
                                          Image& out, Image* mask = nullptr);

// Writes `count` images as root/ok/NNNNNN.{jpg,png} and root/defect/...,
// in parallel on the library arena; image i depends only on (options.seed, i).
// Returns the folder-per-class root (for Dataset::from_folder).
STOKE_API std::filesystem::path write_synthetic_dataset(const std::filesystem::path& root,
                                                        std::size_t count,
                                                        const SyntheticOptions& options = {});

// ---- Loader ---------------------------------------------------------------------

// The deterministic part, computed once per sample (and cached).
struct PreprocessOptions {
  int width = 224;  // output
  int height = 224;
  int channels = 3;  // 1 or 3
  // Resize target before the crop to (width, height); 0: the output size.
  int resize_width = 0;
  int resize_height = 0;
  ResizeFilter filter = ResizeFilter::kAuto;
  Normalization normalization;  // default: min-max to [0, 1]
  OutputDtype dtype = OutputDtype::kFloat32;
  // JPEG: decode at the smallest DCT scale (1/8 .. 1) still covering the
  // resize target. Off decodes every image at full size (stoke-bench's
  // baseline, and the "decoded far above the training size" case).
  bool dct_scaling = true;
};

// Random per (seed, epoch, sample); off by default.
struct AugmentOptions {
  bool random_crop = false;  // else the centre crop
  float hflip_probability = 0.f;
  float vflip_probability = 0.f;
  float brightness = 0.f;  // shift uniform in [-brightness, brightness] of full scale
  float contrast = 0.f;    // factor uniform in [1 - contrast, 1 + contrast]
  bool enabled() const noexcept {
    return random_crop || hflip_probability > 0 || vflip_probability > 0 || brightness > 0 ||
           contrast > 0;
  }
};

struct LoaderOptions {
  PreprocessOptions preprocess;
  AugmentOptions augment;
  std::size_t batch_size = 32;
  bool shuffle = true;
  // Class-balanced epochs instead of the shuffle: every class drawn equally
  // often (rare classes repeat), deterministic per seed and epoch.
  bool balanced_sampler = false;
  bool drop_last = false;  // drop a short last batch
  // Data-parallel training: this loader visits shard `shard_index` of
  // `shard_count` of each epoch's order (after the shuffle or the balanced
  // sampler, which every rank draws alike). Whole steps (training): rank r
  // takes the r-th batch of every global step of shard_count batches, equal
  // steps on every rank; otherwise (validation) batches r, r + count, ... so
  // every sample is seen once. See stoke/shards.hpp.
  int shard_index = 0;
  int shard_count = 1;
  bool shard_whole_steps = true;
  std::uint64_t seed = 0;
  std::size_t max_in_flight = 0;  // images being processed at once; 0: 2 x the context's threads
  // Settings, SIMD level and thread arena (the pipeline runs in the
  // context's arena); a trainer puts its own here.
  Context context;
  std::optional<CacheSpec> cache;  // empty: the context's STOKE_CACHE
  std::optional<SimdLevel> simd;   // empty: the context's SIMD level
  // Receives read/decode/preprocess/cache/augment/batch-assembly spans; may be
  // null. Must outlive the Loader.
  Profiler* profiler = nullptr;
  // A sample that cannot be read or decoded when it is met (a header that was
  // fine at load but a truncated tail, a missing end marker, a damaged scan):
  // with skip_corrupt its slot is filled from the next sample of the epoch
  // order that decodes (deterministic: the same files are always corrupt), and
  // the file and reason go into stats().corrupt; without it, fill_batch throws
  // the DecodeError/IoError naming the file. Empty: the dataset's policy
  // (the DatasetOptions::skip_corrupt it was loaded with), so one setting
  // covers both the files refused at load and those found bad while training.
  std::optional<bool> skip_corrupt;
  // The corruption budget (with skip_corrupt): fill_batch throws DecodeError
  // ("too many corrupt samples", listing them) once more than
  // max(max_corrupt_samples, floor(max_corrupt_fraction * dataset size))
  // distinct samples were found corrupt.
  std::size_t max_corrupt_samples = 10;
  double max_corrupt_fraction = 0.01;
  // STOKE_MAX_IMAGE_PIXELS for decoding; empty: Config::load()'s value. 0: no limit.
  std::optional<std::uint64_t> max_image_pixels;
};

// A sample skipped during training, and why.
struct CorruptSample {
  std::string path;
  std::string reason;
};

struct LoaderStats {
  std::uint64_t decoded = 0;         // images read and decoded
  std::uint64_t worker_threads = 0;  // distinct threads that have processed samples
  std::uint64_t cache_hits = 0;      // deterministic results taken from the cache
  std::uint64_t cache_entries = 0;
  std::uint64_t cache_bytes = 0;
  bool cache_file_reused = false;  // file cache found valid at construction
  std::string cache_note;          // why a cache file was rebuilt, if it was
  // skip_corrupt: the samples found corrupt so far, in dataset order.
  std::vector<CorruptSample> corrupt;
  bool corrupt_budget_exceeded = false;  // fill_batch threw "too many corrupt samples"
};

// Turns a Dataset into batches of (N, C, H, W) tensors of the configured dtype.
// Thread-safe for one caller at a time; the work runs on the library arena.
class STOKE_API Loader {
 public:
  Loader(Dataset dataset, LoaderOptions options);
  ~Loader();
  Loader(Loader&&) noexcept;
  Loader& operator=(Loader&&) noexcept;

  // Writes the samples of batch `batch_index` of `epoch` into images
  // ((N, C, H, W), N = batch_size) and labels (N), and returns how many it
  // wrote (the last batch may be short). The batch's content depends only on
  // the options, the epoch and the index. requires: images.size() >=
  // batch_size * sample_bytes(), labels.size() >= batch_size,
  // batch_index < batches_per_epoch() (InvalidArgument otherwise). Throws
  // DecodeError/IoError naming the file when a sample cannot be read (with
  // skip_corrupt: only past the corruption budget, see LoaderOptions).
  std::size_t fill_batch(std::uint64_t epoch, std::uint64_t batch_index,
                         std::span<std::byte> images, std::span<std::int32_t> labels);

  std::size_t batches_per_epoch() const noexcept;
  std::size_t batch_size() const noexcept;
  std::size_t sample_bytes() const noexcept;                 // C * H * W * dtype size
  std::array<std::size_t, 4> output_shape() const noexcept;  // {batch_size, C, H, W}
  OutputDtype dtype() const noexcept;
  const LoaderOptions& options() const noexcept;
  SimdLevel simd() const noexcept;  // the level its pixel kernels use
  const Dataset& dataset() const noexcept;
  LoaderStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// ---- Segmentation: images with per-pixel class masks ------------------------------
// (docs/segmentation.md)

// The mask value that marks pixels no loss counts (PixelLossParams::ignore_label).
inline constexpr std::int32_t kSegmentationIgnoreLabel = 255;

struct SegmentationOptions {
  // Image files taken from images/ (lower case); masks are always PNG.
  std::vector<std::string> extensions = {".png", ".jpg", ".jpeg", ".bmp"};
  // Mask pixels with this value count in no class (a negative value: none do).
  // Must not be a class index.
  std::int32_t ignore_label = kSegmentationIgnoreLabel;
  // The class names, background first, when the folder has no classes.txt
  // (ignored when it has one); both empty: "background", "class_1", ...
  // up to the largest mask value found.
  std::vector<std::string> classes;
  // An image without a mask is all background instead of an error (MVTec's
  // good images always are).
  bool missing_mask_is_background = false;
  // Images whose header claims more pixels are refused; 0: no limit.
  std::uint64_t max_image_pixels = kDefaultMaxImagePixels;
};

// classes.txt: one class name per line, background (index 0) first; leading
// and trailing blanks (and a CR) are trimmed, blank lines after the last name
// are ignored. IoError naming the file when it cannot be read; InvalidArgument
// naming the file and line for a blank line between names, a duplicate name,
// or fewer than 2 names.
STOKE_API std::vector<std::string> read_class_names(const std::filesystem::path& file);

// Image + mask pairs whose masks were all read and checked at load: same size
// as the image (after a JPEG's EXIF orientation), one channel of 8 or 16 bits,
// every value a class index or the ignore label. Cheap to copy.
class STOKE_API SegmentationDataset {
 public:
  struct Sample {
    std::string image;
    std::string mask;  // empty: all background (missing_mask_is_background)
    // -1: the mask's values are class indices. k >= 1: a binary mask (MVTec),
    // 0 background and 255 class k.
    std::int32_t mask_class = -1;
  };

  SegmentationDataset();
  // root/images/<name>.{png,jpg,jpeg,bmp} (subfolders too) and
  // root/masks/<name>.png, the same relative name with the .png extension;
  // root/classes.txt if present. Errors, each naming the file(s): image
  // without a mask or mask without an image (IoError), two images with one
  // name (InvalidArgument), a mask with colour channels, of another size than
  // its image, or with a value >= the class count that is not the ignore label
  // (InvalidArgument with the value and the class count), no images (IoError),
  // an unreadable image header or mask (DecodeError/IoError).
  static SegmentationDataset from_folder(const std::filesystem::path& root,
                                         const SegmentationOptions& options = {});
  // MVTec AD's layout of one category: root/test/<defect>/NNN.png with the
  // binary masks root/ground_truth/<defect>/NNN_mask.png (0 or 255; any other
  // value is an error), root/test/good/ all background. Classes: background,
  // then the defect folder names sorted.
  static SegmentationDataset from_mvtec(const std::filesystem::path& root,
                                        const SegmentationOptions& options = {});

  std::size_t size() const noexcept;
  const Sample& sample(std::size_t index) const;
  const std::vector<std::string>& class_names() const noexcept;
  std::int32_t ignore_label() const noexcept;
  // Pixels per class over all masks at their stored size (an image without a
  // mask counts as background), and the ignored pixels.
  const std::vector<std::uint64_t>& class_pixels() const noexcept;
  std::uint64_t ignored_pixels() const noexcept;
  // Entries of images/ and masks/ that are no image file (other extensions).
  const DatasetReport& report() const noexcept;
  // Adds the class pixel counts to report().to_string().
  std::string report_string() const;

  struct Storage;

 private:
  std::shared_ptr<const Storage> storage_;
};

// Nearest-neighbour resize of a 1-channel label map (8 or 16 bit) to
// (width, height) int32 values, pixel centres aligned as the bilinear resize:
// source x = floor((x + 0.5) * in / out). Never mixes values.
STOKE_API void resize_labels_nearest(ImageView mask, int width, int height,
                                     std::span<std::int32_t> out);

// Batches of (N, C, H, W) float images and (N, H, W) int32 label maps (the
// labels pixel_cross_entropy and dice_loss take). Preprocessing as the Loader:
// decode, resize to resize_width x resize_height (filter; the mask nearest),
// crop (centre, or random_crop) to width x height; the flips of `augment` move
// image and mask alike, brightness and contrast touch only the image. Uses
// preprocess.{width, height, channels, resize_*, filter, normalization,
// dct_scaling}; the dtype must be kFloat32; 16-bit images are read at 8 bits.
// Content depends only on (options, epoch, batch index).
struct SegmentationLoaderOptions {
  PreprocessOptions preprocess;
  AugmentOptions augment;
  std::size_t batch_size = 8;
  bool shuffle = true;
  bool drop_last = false;
  std::uint64_t seed = 0;
};

class STOKE_API SegmentationLoader {
 public:
  SegmentationLoader(SegmentationDataset dataset, SegmentationLoaderOptions options);

  // requires images.size() >= batch_size * C * H * W, labels.size() >=
  // batch_size * H * W, batch_index < batches_per_epoch() (InvalidArgument
  // otherwise). Returns the samples written (the last batch may be short).
  std::size_t fill_batch(std::uint64_t epoch, std::uint64_t batch_index, std::span<float> images,
                         std::span<std::int32_t> labels);

  std::size_t batches_per_epoch() const noexcept;
  std::array<std::size_t, 4> image_shape() const noexcept;  // {batch_size, C, H, W}
  std::array<std::size_t, 3> label_shape() const noexcept;  // {batch_size, H, W}
  const SegmentationDataset& dataset() const noexcept { return dataset_; }

 private:
  void load(std::size_t index, std::uint64_t epoch, float* image, std::int32_t* labels) const;

  SegmentationDataset dataset_;
  SegmentationLoaderOptions options_;
  SimdLevel level_;
  int resize_width_ = 0, resize_height_ = 0;
};

// The synthetic set for segmentation: root/images/NNNNNN.{jpg,png},
// root/masks/NNNNNN.png (0 background, 1 scratch, 2 spot: the pixels a
// defect changes by 8 levels or more) and root/classes.txt. Uses width,
// height, defect_fraction (images with defects), seed, format, jpeg_quality
// and first of `options` (not mask_root). Returns root.
STOKE_API std::filesystem::path write_synthetic_segmentation_dataset(
    const std::filesystem::path& root, std::size_t count, const SyntheticOptions& options = {});

}  // namespace stoke
