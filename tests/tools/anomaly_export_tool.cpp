// The anomaly ONNX export test's stoke side (tests/interchange/anomaly_export_check.py):
// per case a random half-width ResNet-18 on 96 x 96 inputs (seeded), PatchCore
// or PaDiM fitted on synthetic good parts and calibrated, saved as a model
// file and loaded back (the CLI's path), exported to ONNX; then for a few
// good and defect images (and one with a painted spot) the preprocessed
// input, stoke's score and map as float32 files, and one manifest line per
// case: NAME METHOD IMAGES C H W.
//   anomaly_export_tool OUTDIR [SIZE]  (SIZE: the input's side, 96 by default)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "stoke/stoke.hpp"

namespace {

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!f) throw stoke::IoError("cannot write " + path);
}

int kSize = 96;

std::unique_ptr<stoke::nn::Model> backbone(std::uint64_t seed) {
  stoke::nn::ModelSpec spec;
  spec.architecture = stoke::nn::Architecture::kResNet18;
  spec.width_multiplier = 0.5f;
  spec.in_channels = 3;
  spec.height = spec.width = kSize;
  spec.classes = 2;
  return stoke::nn::build_model(stoke::cpu_backend(), spec, seed);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: anomaly_export_tool OUTDIR [SIZE]\n");
    return 2;
  }
  if (argc == 3) kSize = std::stoi(argv[2]);
  try {
    stoke::init();
    const std::filesystem::path out = argv[1];
    stoke::SyntheticOptions so;
    so.width = so.height = 160;
    so.defect_fraction = 0.4;
    so.format = stoke::SyntheticOptions::Format::kPng;
    so.seed = 11;
    const std::filesystem::path root = stoke::write_synthetic_dataset(out / "data", 20, so);
    std::vector<std::filesystem::path> good, defect;
    for (const auto& e : std::filesystem::directory_iterator(root / "ok")) good.push_back(e.path());
    for (const auto& e : std::filesystem::directory_iterator(root / "defect"))
      defect.push_back(e.path());
    std::sort(good.begin(), good.end());
    std::sort(defect.begin(), defect.end());
    if (good.size() < 10 || defect.size() < 3)
      throw stoke::InvalidArgument("the synthetic set has too few good or defect parts");
    const std::vector<std::filesystem::path> train(good.begin(), good.begin() + 6);
    const std::vector<std::filesystem::path> val(good.begin() + 6, good.begin() + 9);
    std::vector<std::filesystem::path> test = {good.back(), good[7]};
    test.insert(test.end(), defect.begin(), defect.begin() + 3);

    stoke::PreprocessOptions pre;
    pre.width = pre.height = kSize;
    pre.channels = 3;
    pre.normalization = stoke::Normalization::mean_std(std::vector<float>{0.485f, 0.456f, 0.406f},
                                                       std::vector<float>{0.229f, 0.224f, 0.225f});
    struct Case {
      const char* name;
      stoke::anomaly::AnomalyMethod method;
      bool fold;
      int neighbors;
    };
    const Case cases[] = {
        {"patchcore", stoke::anomaly::AnomalyMethod::kPatchCore, false, 9},
        {"patchcore_folded_k1", stoke::anomaly::AnomalyMethod::kPatchCore, true, 1},
        {"padim", stoke::anomaly::AnomalyMethod::kPadim, false, 9},
        {"padim_folded", stoke::anomaly::AnomalyMethod::kPadim, true, 9}};
    std::ofstream manifest(out / "manifest.txt");
    for (const Case& c : cases) {
      stoke::anomaly::PatchCoreOptions o;
      o.method = c.method;
      o.coreset_ratio = 0.25;
      o.num_neighbors = c.neighbors;
      o.seed = 5;
      stoke::anomaly::PatchCore fitted(backbone(7), pre, o);
      fitted.fit(train);
      fitted.calibrate(val);
      const std::string model_file = (out / (std::string(c.name) + ".stoke")).string();
      fitted.save(model_file);
      stoke::anomaly::PatchCore core =
          stoke::anomaly::PatchCore::load(model_file, stoke::cpu_backend());
      stoke::anomaly::AnomalyOnnxOptions eo;
      eo.fold_batch_norm = c.fold;
      stoke::anomaly::export_onnx(core, (out / (std::string(c.name) + ".onnx")).string(), eo);
      std::vector<float> inputs, scores, maps;
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
      const std::string base = (out / c.name).string();
      write_floats(base + ".input.bin", inputs);
      write_floats(base + ".scores.bin", scores);
      write_floats(base + ".maps.bin", maps);
      manifest << c.name << ' ' << stoke::anomaly::method_name(c.method) << ' ' << n << " 3 "
               << kSize << ' ' << kSize << ' ' << core.threshold() << '\n';
    }
    return 0;
  } catch (const stoke::Error& err) {
    std::fprintf(stderr, "anomaly_export_tool: %s\n", err.what());
    return 1;
  }
}
