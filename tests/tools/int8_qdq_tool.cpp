// The model file's side of the QDQ int8 parity check
// (tests/interchange/int8_qdq_check.py) and of bench/int8_ort_bench.sh:
//   int8_qdq_tool MODEL IMAGES OUT
// preprocesses every .jpg and .png under IMAGES (sorted by path) with the
// file's own preprocessing into OUT/input.bin (float32, N x C x H x W) and
// writes the Predictor's logits on them to OUT/logits.bin (float32, N x
// classes), in the precision it runs (STOKE_PRECISION, else the file's own);
// prints "precision N C H W classes".
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "stoke/stoke.hpp"

namespace {

namespace fs = std::filesystem;

void write_floats(const fs::path& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  if (!f) throw stoke::IoError("cannot write " + path.string());
}

int run(const fs::path& model, const fs::path& images, const fs::path& out) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(images)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".jpg" || ext == ".png")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw stoke::InvalidArgument("no .jpg or .png under " + images.string());
  stoke::Predictor predictor(model);
  auto session = predictor.session();
  const std::size_t per = predictor.sample_size();
  std::vector<float> input(files.size() * per);
  for (std::size_t i = 0; i < files.size(); ++i)
    session.preprocess_file(files[i], std::span<float>(input.data() + i * per, per));
  const std::vector<float> logits = predictor.logits(input, files.size());
  fs::create_directories(out);
  write_floats(out / "input.bin", input);
  write_floats(out / "logits.bin", logits);
  const stoke::nn::ModelSpec& s = predictor.spec();
  std::printf("%s %zu %d %d %d %zu\n", stoke::to_string(predictor.self_check().precision),
              files.size(), s.in_channels, s.height, s.width, logits.size() / files.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: int8_qdq_tool MODEL IMAGES OUT\n");
    return 2;
  }
  try {
    return run(argv[1], argv[2], argv[3]);
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
