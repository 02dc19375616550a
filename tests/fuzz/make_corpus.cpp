// Writes the fuzz seed corpus with stoke's own encoders, writers and loader:
//   stoke_fuzz_make_corpus OUT_DIR [FASHION_MNIST_DIR]
// creates OUT_DIR/<target>/<seed> for every target in targets.cmake. The
// output is deterministic (fixed seeds), so the committed corpus under
// tests/fuzz/corpus/ can be regenerated and compared.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../unit/image_test_files.hpp"
#include "../unit/image_tiff_files.hpp"
#include "fuzz_fixtures.hpp"
#include "stoke/backend.hpp"
#include "stoke/config.hpp"
#include "stoke/data.hpp"
#include "stoke/image.hpp"
#include "stoke/nn.hpp"

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

namespace {

void put(const fs::path& dir, const std::string& name, const Bytes& bytes) {
  fs::create_directories(dir);
  stoke::fuzz::write_bytes(dir / name, bytes.data(), bytes.size());
}
void put(const fs::path& dir, const std::string& name, const std::string& text) {
  put(dir, name, Bytes(text.begin(), text.end()));
}
// The mode byte a checkpoint or cache input starts with, then the file.
Bytes with_mode(std::uint8_t mode, const Bytes& file) {
  Bytes in(1 + file.size(), mode);
  std::copy(file.begin(), file.end(), in.begin() + 1);
  return in;
}
Bytes read(const fs::path& path) {
  Bytes out;
  stoke::read_file(path, out);
  return out;
}
Bytes gzip(const Bytes& plain, const fs::path& scratch) {
  const auto path = (scratch / "tmp.gz").string();
  gzFile f = gzopen(path.c_str(), "wb9");
  gzwrite(f, plain.data(), static_cast<unsigned>(plain.size()));
  gzclose(f);
  return read(path);
}

void images(const fs::path& out) {
  struct Shape {
    int w, h, c;
  };
  for (const Shape s : {Shape{8, 8, 3}, Shape{17, 13, 3}, Shape{16, 16, 1}, Shape{33, 9, 1}}) {
    stoke::Image rgb, img;
    stoke::synthetic_inspection_image(s.w, s.h, 7, s.w % 2 == 1, rgb);
    if (s.c == 1) {
      stoke::convert_channels(rgb.view(), 1, img);
    } else {
      img = std::move(rgb);
    }
    const std::string base =
        std::to_string(s.w) + "x" + std::to_string(s.h) + "x" + std::to_string(s.c);
    for (int q : {30, 90})
      put(out / "jpeg", base + "_q" + std::to_string(q) + ".jpg",
          stoke::encode_jpeg(img.view(), q));
    for (int depth : {8, 16}) {
      put(out / "png", base + "_" + std::to_string(depth) + "bit.png",
          stoke::encode_png(img.view(), depth));
    }
  }
}

// Input layout of fuzz_idx: u16 split, images file, labels file.
Bytes idx_input(const Bytes& images, const Bytes& labels) {
  Bytes in = {static_cast<std::uint8_t>(images.size() & 0xFF),
              static_cast<std::uint8_t>(images.size() >> 8)};
  in.insert(in.end(), images.begin(), images.end());
  in.insert(in.end(), labels.begin(), labels.end());
  return in;
}

void idx(const fs::path& out, const fs::path& scratch, const fs::path& mnist) {
  // Two real Fashion-MNIST samples when the dataset is installed, else two
  // synthetic 28x28 images: the same file format either way.
  Bytes pixels(2 * 28 * 28), labels = {0, 0};
  const auto images_gz = mnist / "t10k-images-idx3-ubyte.gz",
             labels_gz = mnist / "t10k-labels-idx1-ubyte.gz";
  if (fs::exists(images_gz) && fs::exists(labels_gz)) {
    const stoke::Dataset d = stoke::Dataset::from_idx(images_gz, labels_gz);
    for (std::size_t i = 0; i < 2; ++i) {
      const stoke::ImageView v = d.pixels(i);
      for (int y = 0; y < 28; ++y)
        std::copy_n(v.data + y * v.stride, 28, pixels.begin() + (i * 28 + y) * 28);
      labels[i] = static_cast<std::uint8_t>(d.label(i));
    }
  } else {
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 13);
    labels = {3, 9};
  }
  Bytes image_file = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28};
  image_file.insert(image_file.end(), pixels.begin(), pixels.end());
  Bytes label_file = {0, 0, 8, 1, 0, 0, 0, 2};
  label_file.insert(label_file.end(), labels.begin(), labels.end());
  put(out / "idx", "fashion2_plain", idx_input(image_file, label_file));
  put(out / "idx", "fashion2_gzip",
      idx_input(gzip(image_file, scratch), gzip(label_file, scratch)));
  const Bytes one_image = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6};
  put(out / "idx", "tiny_2x3", idx_input(one_image, Bytes{0, 0, 8, 1, 0, 0, 0, 1, 7}));
}

void manifests(const fs::path& out) {
  const fs::path dir = out / "manifest";
  put(dir, "header_splits.csv",
      "path,label,split\na.jpg,ok,train\nb.png,defect,val\na.jpg,defect,test\n");
  put(dir, "numeric_labels.csv", "a.jpg,1\nb.png,10\nb.png,2\n");
  put(dir, "bad_entries.csv",
      "path,label\nbad.jpg,ok\nmissing.png,ok\nb.png,defect\n\"a.jpg\",ok\n");
  put(dir, "crlf_blank.csv", "a.jpg,ok,train\r\n\r\nb.png,defect,train\r\n");
}

void configs(const fs::path& out) {
  const stoke::Config defaults;
  std::string file = "# every knob at its default\n";
  std::string env;
  const auto names = stoke::Config::known_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& value = defaults.knob(names[i]).value;
    file += names[i] + " = " + value + "\n";
    env += static_cast<char>(i);
    env += value + "\n";
  }
  put(out / "config_file", "defaults.conf", file);
  put(out / "config_file", "some.conf",
      "STOKE_CPU_THREADS = 2\nSTOKE_GPU_MEM_PERCENT = 50%\nSTOKE_GPU_MEM_MAX = 512MiB\n"
      "STOKE_CACHE = ram:64M\nSTOKE_LOG_LEVEL = warn\n  # indented comment\n");
  put(out / "config_env", "defaults.env", env);
  put(out / "config_env", "named.env",
      "STOKE_CPU_THREADS=3\nSTOKE_CACHE=file:/nonexistent/"
      "x.cache\nSTOKE_GPU_MEM_MAX=1G\nSTOKE_CPU_THREDS=2\n");
}

void checkpoints(const fs::path& out, const fs::path& scratch) {
  auto model = stoke::nn::build_model(stoke::cpu_backend(), stoke::fuzz::tiny_spec(), 5);
  stoke::nn::Sgd sgd(*model);
  const auto path = (scratch / "tiny.ckpt").string();
  stoke::nn::save_checkpoint(path, *model, &sgd, {{"preprocess.width", "8"}});
  const Bytes file = read(path);
  for (std::uint8_t mode : {0, 1, 3}) {
    put(out / "checkpoint", "tiny_sgd_mode" + std::to_string(mode), with_mode(mode, file));
  }
  stoke::nn::save_checkpoint(path, *model, nullptr);
  put(out / "checkpoint", "tiny_weights_only", with_mode(1, read(path)));
}

void cache(const fs::path& out, const fs::path& scratch) {
  const stoke::Dataset dataset = stoke::fuzz::tiny_idx_dataset(scratch);
  const auto path = scratch / "loader.cache";
  {
    stoke::Loader loader(dataset, stoke::fuzz::cache_loader_options(path));
    std::vector<std::byte> batch(loader.batch_size() * loader.sample_bytes());
    std::vector<std::int32_t> labels(loader.batch_size());
    loader.fill_batch(0, 0, batch, labels);
  }
  const Bytes file = read(path);
  for (std::uint8_t mode : {0, 7}) {
    put(out / "cache", "complete_mode" + std::to_string(mode), with_mode(mode, file));
  }
}

}  // namespace

// BMP layouts, and size-claiming headers (valid PNG CRCs) for image_size,
// each behind a limit byte (low 5 bits: log2 of the limit).
void bmp_and_sizes(const fs::path& out) {
  using stoke::testing::encode_bmp;
  using stoke::testing::gradient_image;
  const stoke::Image gray = gradient_image(13, 7, 1), rgb = gradient_image(9, 6, 3, 5);
  for (bool top_down : {false, true}) {
    const std::string tag = top_down ? "_topdown" : "";
    put(out / "bmp", "gray8" + tag + ".bmp", encode_bmp(gray.view(), 8, top_down));
    put(out / "bmp", "rgb24" + tag + ".bmp", encode_bmp(rgb.view(), 24, top_down));
    put(out / "bmp", "rgb32" + tag + ".bmp", encode_bmp(rgb.view(), 32, top_down));
  }
  put(out / "bmp", "bomb60k.bmp", encode_bmp(rgb.view(), 24, false, 60000, 60000));
  auto limited = [](std::uint8_t limit, const Bytes& image) { return with_mode(limit, image); };
  const stoke::Image small = gradient_image(16, 16, 3);
  put(out / "image_size", "png_60k.bin", limited(28, stoke::testing::bomb_png(60000, 60000)));
  put(out / "image_size", "png_100k.bin", limited(31, stoke::testing::bomb_png(100000, 100000)));
  put(out / "image_size", "png_fits.bin", limited(12, stoke::testing::bomb_png(64, 32)));
  put(out / "image_size", "jpeg_60k.bin", limited(28, stoke::testing::bomb_jpeg(60000, 60000)));
  put(out / "image_size", "jpeg_real.bin", limited(0x28, stoke::encode_jpeg(small.view(), 80)));
  put(out / "image_size", "jpeg_exif6.bin",
      limited(0x48,
              stoke::testing::with_exif_orientation(stoke::encode_jpeg(small.view(), 80), 6)));
  put(out / "image_size", "bmp_100k.bin",
      limited(31, encode_bmp(gray.view(), 8, true, 100000, 100000)));
  put(out / "image_size", "bmp_real.bin", limited(10, encode_bmp(rgb.view(), 32)));
}

// TIFF layouts written with libtiff, a header bomb, and a TIFF behind a limit byte for image_size.
void tiffs(const fs::path& out) {
  using stoke::testing::encode_tiff;
  using stoke::testing::TiffSpec;
  int phase = 0;
  for (int channels : {1, 3}) {
    for (int bits : {8, 16}) {
      for (std::uint16_t compression :
           {COMPRESSION_NONE, COMPRESSION_LZW, COMPRESSION_ADOBE_DEFLATE}) {
        const bool tiled = phase % 2 == 1;
        const TiffSpec s{.width = tiled ? 20 : 9,
                         .height = tiled ? 18 : 7,
                         .channels = channels,
                         .bits = bits,
                         .compression = compression,
                         .tile = tiled ? 16 : 0,
                         .big_endian = phase % 3 == 2};
        const std::string name = (channels == 1 ? "gray" : "rgb") + std::to_string(bits) + "_c" +
                                 std::to_string(compression) + (tiled ? "_tiles" : "_strips") +
                                 (s.big_endian ? "_mm" : "") + ".tif";
        put(out / "tiff", name, encode_tiff(s, stoke::testing::tiff_samples(s, phase++)));
      }
    }
  }
  const TiffSpec bomb{.width = 4, .height = 4, .claimed_width = 100000, .claimed_height = 100000};
  put(out / "tiff", "bomb100k.tif", encode_tiff(bomb, {}));
  put(out / "image_size", "tiff_100k.bin", with_mode(31, encode_tiff(bomb, {})));
  const TiffSpec real{
      .width = 9, .height = 7, .channels = 3, .bits = 16, .compression = COMPRESSION_LZW};
  put(out / "image_size", "tiff_real.bin",
      with_mode(10, encode_tiff(real, stoke::testing::tiff_samples(real))));
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR [FASHION_MNIST_DIR]\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path mnist = argc > 2 ? argv[2] : "/usr/share/datasets/fashion-mnist";
  const fs::path& scratch = stoke::fuzz::scratch_dir();
  images(out);
  idx(out, scratch, mnist);
  manifests(out);
  configs(out);
  checkpoints(out, scratch);
  cache(out, scratch);
  bmp_and_sizes(out);
  tiffs(out);
  std::printf("corpus written to %s\n", out.string().c_str());
  return 0;
}
