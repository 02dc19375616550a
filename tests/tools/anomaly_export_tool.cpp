// The anomaly ONNX export test's stoke side (tests/interchange/anomaly_export_check.py):
// per case a random half-width ResNet-18 on 96 x 96 inputs (seeded), PatchCore
// or PaDiM fitted on synthetic good parts and calibrated, saved as a model
// file and loaded back (the CLI's path), exported to ONNX; then for a few
// good and defect images (and one with a painted spot) the preprocessed
// input, stoke's score and map as float32 files, and one manifest line per
// case: NAME METHOD IMAGES C H W THRESHOLD. The tiled cases (tiles of the
// input size, 64 apart, on 176 x 144 parts at SIZE 96 and in proportion at
// another SIZE: 3 x 2 overlapping tiles) export the whole image; their inputs are the decoded parts
// normalized at full size, stoke's results score_pixels' of the same pixels (the spot painted into
// the pixels).
//   anomaly_export_tool OUTDIR [SIZE]  (SIZE: the input's side, 96 by default)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "stoke/stoke.hpp"

namespace {

namespace fs = std::filesystem;
using Paths = std::vector<fs::path>;

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!f) throw stoke::IoError("cannot write " + path);
}

int kSize = 96;
// The tiled cases' parts and tile stride, from the input side (176 x 144 and 64 at 96).
int kTiledW = 176, kTiledH = 144, kTileStride = 64;

std::unique_ptr<stoke::nn::Model> backbone(std::uint64_t seed) {
  stoke::nn::ModelSpec spec;
  spec.architecture = stoke::nn::Architecture::kResNet18;
  spec.width_multiplier = 0.5f;
  spec.in_channels = 3;
  spec.height = spec.width = kSize;
  spec.classes = 2;
  return stoke::nn::build_model(stoke::cpu_backend(), spec, seed);
}

struct Case {
  const char* name;
  stoke::anomaly::AnomalyMethod method;
  bool fold;
  int neighbors;
  bool tiled;
};

// The synthetic parts of `size` under dir: (good, defect), sorted.
std::pair<Paths, Paths> parts(const fs::path& dir, int width, int height) {
  stoke::SyntheticOptions so;
  so.width = width;
  so.height = height;
  so.defect_fraction = 0.4;
  so.format = stoke::SyntheticOptions::Format::kPng;
  so.seed = 11;
  const fs::path root = stoke::write_synthetic_dataset(dir, 20, so);
  Paths good, defect;
  for (const auto& e : fs::directory_iterator(root / "ok")) good.push_back(e.path());
  for (const auto& e : fs::directory_iterator(root / "defect")) defect.push_back(e.path());
  std::sort(good.begin(), good.end());
  std::sort(defect.begin(), defect.end());
  if (good.size() < 10 || defect.size() < 3)
    throw stoke::InvalidArgument("the synthetic set has too few good or defect parts");
  return {good, defect};
}

// A tiled case's inputs and stoke's results: each part decoded, normalized at
// its full size (what the graph takes), scored from the same pixels; the last
// is the first part with a dark 12 x 12 spot painted into its pixels.
void tiled_inputs(stoke::anomaly::PatchCore& core, const Paths& test, std::vector<float>& inputs,
                  std::vector<float>& scores, std::vector<float>& maps) {
  stoke::Decoder decoder;
  stoke::Resampler resampler(stoke::default_simd_level());
  stoke::DecodeOptions d;
  d.channels = 3;
  std::vector<stoke::Image> images;
  for (const auto& f : test) {
    images.emplace_back();
    decoder.decode_file(f, d, images.back());
  }
  stoke::Image& spot = images.emplace_back(images.front().width(), images.front().height(), 3);
  std::copy_n(images.front().data(), spot.size_bytes(), spot.data());
  for (int y = 40; y < 52; ++y)
    for (int x = 100; x < 112; ++x)
      for (int c = 0; c < 3; ++c)
        spot.data()[y * spot.stride() + static_cast<std::size_t>(x * 3 + c)] = 0;
  const std::size_t sample = static_cast<std::size_t>(3 * kTiledW * kTiledH);
  for (const stoke::Image& image : images) {
    if (image.width() != kTiledW || image.height() != kTiledH)
      throw stoke::InvalidArgument("a tiled part is not " + std::to_string(kTiledW) + " x " +
                                   std::to_string(kTiledH));
    const std::size_t at = inputs.size();
    inputs.resize(at + sample);
    resampler.resize_normalize_chw(image.view(), kTiledW, kTiledH, core.preprocess().filter,
                                   core.preprocess().normalization, stoke::OutputDtype::kFloat32,
                                   inputs.data() + at);
    const auto r = core.score_pixels(
        {image.data(), kTiledW, kTiledH, stoke::PixelFormat::kRgb8, image.stride()});
    scores.push_back(r.score);
    maps.insert(maps.end(), r.map.begin(), r.map.end());
  }
}

void write_cases(const std::vector<Case>& cases, const stoke::PreprocessOptions& pre,
                 const Paths& train, const Paths& val, const Paths& test, const fs::path& out,
                 std::ofstream& manifest) {
  for (const Case& c : cases) {
    stoke::anomaly::PatchCoreOptions o;
    o.method = c.method;
    o.coreset_ratio = 0.25;
    o.num_neighbors = c.neighbors;
    o.seed = 5;
    if (c.tiled) {
      o.tile = kSize;
      o.tile_stride = kTileStride;
    }
    stoke::anomaly::PatchCore fitted(backbone(7), pre, o);
    fitted.fit(train);
    fitted.calibrate(val);
    const std::string model_file = (out / (std::string(c.name) + ".stoke")).string();
    fitted.save(model_file);
    stoke::anomaly::PatchCore core =
        stoke::anomaly::PatchCore::load(model_file, stoke::cpu_backend());
    stoke::anomaly::AnomalyOnnxOptions eo;
    eo.fold_batch_norm = c.fold;
    if (c.tiled) {
      eo.image_width = kTiledW;
      eo.image_height = kTiledH;
    }
    stoke::anomaly::export_onnx(core, (out / (std::string(c.name) + ".onnx")).string(), eo);
    std::vector<float> inputs, scores, maps;
    int h = kSize, w = kSize;
    if (c.tiled) {
      tiled_inputs(core, test, inputs, scores, maps);
      h = kTiledH;
      w = kTiledW;
    } else {
      for (const auto& f : test) {
        std::vector<float> x = core.preprocess_file(f);
        inputs.insert(inputs.end(), x.begin(), x.end());
      }
      // A dark 12 x 12 spot on the first good part: a defect the random features see.
      std::vector<float> spot(inputs.begin(), inputs.begin() + 3 * kSize * kSize);
      for (int ch = 0; ch < 3; ++ch)
        for (int y = 30; y < 42; ++y)
          for (int x = 50; x < 62; ++x)
            spot[static_cast<std::size_t>((ch * kSize + y) * kSize + x)] = -2.0f;
      inputs.insert(inputs.end(), spot.begin(), spot.end());
      const std::size_t sample = 3 * kSize * kSize, n = inputs.size() / sample;
      for (std::size_t i = 0; i < n; ++i) {
        const auto r = core.score_input(std::span<const float>(inputs).subspan(i * sample, sample));
        scores.push_back(r.score);
        maps.insert(maps.end(), r.map.begin(), r.map.end());
      }
    }
    const std::string base = (out / c.name).string();
    write_floats(base + ".input.bin", inputs);
    write_floats(base + ".scores.bin", scores);
    write_floats(base + ".maps.bin", maps);
    manifest << c.name << ' ' << stoke::anomaly::method_name(c.method) << ' ' << scores.size()
             << " 3 " << h << ' ' << w << ' ' << core.threshold() << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: anomaly_export_tool OUTDIR [SIZE]\n");
    return 2;
  }
  if (argc == 3) kSize = std::stoi(argv[2]);
  kTiledW = kSize + kSize * 5 / 6;
  kTiledH = kSize * 3 / 2;
  kTileStride = kSize * 2 / 3;
  try {
    stoke::init();
    const fs::path out = argv[1];
    stoke::PreprocessOptions pre;
    pre.width = pre.height = kSize;
    pre.channels = 3;
    pre.normalization = stoke::Normalization::mean_std(std::vector<float>{0.485f, 0.456f, 0.406f},
                                                       std::vector<float>{0.229f, 0.224f, 0.225f});
    std::ofstream manifest(out / "manifest.txt");
    {
      const auto [good, defect] = parts(out / "data", 160, 160);
      Paths test = {good.back(), good[7]};
      test.insert(test.end(), defect.begin(), defect.begin() + 3);
      write_cases(
          {{"patchcore", stoke::anomaly::AnomalyMethod::kPatchCore, false, 9, false},
           {"patchcore_folded_k1", stoke::anomaly::AnomalyMethod::kPatchCore, true, 1, false},
           {"padim", stoke::anomaly::AnomalyMethod::kPadim, false, 9, false},
           {"padim_folded", stoke::anomaly::AnomalyMethod::kPadim, true, 9, false}},
          pre, {good.begin(), good.begin() + 6}, {good.begin() + 6, good.begin() + 9}, test, out,
          manifest);
    }
    {  // tiling models: larger parts, tiles of the input size
      const auto [good, defect] = parts(out / "data_tiled", kTiledW, kTiledH);
      Paths test = {good.back(), good[7]};
      test.insert(test.end(), defect.begin(), defect.begin() + 3);
      write_cases({{"patchcore_tiled", stoke::anomaly::AnomalyMethod::kPatchCore, false, 9, true},
                   {"padim_tiled", stoke::anomaly::AnomalyMethod::kPadim, true, 9, true}},
                  pre, {good.begin(), good.begin() + 6}, {good.begin() + 6, good.begin() + 9}, test,
                  out, manifest);
    }
    return 0;
  } catch (const stoke::Error& err) {
    std::fprintf(stderr, "anomaly_export_tool: %s\n", err.what());
    return 1;
  }
}
