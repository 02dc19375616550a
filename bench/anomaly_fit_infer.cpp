// PatchCore's fit (embeddings + coreset) or PaDiM's (embeddings + Gaussians)
// and per-image scoring time on raw
// float inputs, the stoke side of bench/anomaly_bench.sh (beside the same
// definitions in PyTorch, bench/anomaly_reference.py). Prints one JSON object.
//   stoke_bench_anomaly WEIGHTS ARCH SIZE TRAIN.bin NTRAIN TEST.bin NTEST CORESET [patchcore|padim]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "stoke/stoke.hpp"

namespace {

std::vector<float> read_floats(const std::string& path, std::size_t count) {
  std::vector<float> v(count);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(float)));
  if (!f) throw stoke::IoError("cannot read " + std::to_string(count) + " floats from " + path);
  return v;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9 && argc != 10) {
    std::fprintf(stderr,
                 "usage: stoke_bench_anomaly WEIGHTS ARCH SIZE TRAIN.bin NTRAIN TEST.bin "
                 "NTEST CORESET [patchcore|padim]\n");
    return 2;
  }
  try {
    const auto runtime = stoke::init();
    stoke::nn::ModelSpec spec;
    spec.architecture = stoke::nn::architecture_from_name(argv[2]);
    spec.in_channels = 3;
    spec.height = spec.width = std::stoi(argv[3]);
    spec.classes = 1000;
    auto model = stoke::nn::build_model(stoke::default_backend(), spec, 1);
    stoke::interchange::ImportOptions io;
    io.load_classifier = false;
    stoke::interchange::load_safetensors(*model, argv[1], io);
    stoke::PreprocessOptions pre;
    pre.width = pre.height = spec.height;
    stoke::anomaly::PatchCoreOptions o;
    if (argc == 10) o.method = stoke::anomaly::anomaly_method_from_name(argv[9]);
    const bool padim = o.method == stoke::anomaly::AnomalyMethod::kPadim;
    if (!padim) o.coreset_ratio = std::stod(argv[8]);
    stoke::anomaly::PatchCore core(std::move(model), pre, o);
    const auto sample = static_cast<std::size_t>(3 * spec.height * spec.width);
    const int ntrain = std::stoi(argv[5]), ntest = std::stoi(argv[7]);
    const auto train = read_floats(argv[4], sample * static_cast<std::size_t>(ntrain));
    const auto test = read_floats(argv[6], sample * static_cast<std::size_t>(ntest));
    core.embed(std::span<const float>(train).first(sample), 1);  // the plan built, as a warm-up
    auto t0 = std::chrono::steady_clock::now();
    stoke::anomaly::Embeddings all;
    for (int i = 0; i < ntrain; i += 8) {  // batches of 8, as PatchCore::fit embeds files
      const int n = std::min(8, ntrain - i);
      auto e =
          core.embed(std::span<const float>(train).subspan(static_cast<std::size_t>(i) * sample,
                                                           static_cast<std::size_t>(n) * sample),
                     n);
      if (all.count == 0) {
        all = std::move(e);
      } else {
        all.count += e.count;
        all.rows.insert(all.rows.end(), e.rows.begin(), e.rows.end());
      }
    }
    const double embed_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    core.fit_embeddings(all);
    const double coreset_s = seconds_since(t0);
    std::vector<double> ms;
    float last = 0;
    for (int i = 0; i < ntest; ++i) {
      const std::span<const float> x(test.data() + static_cast<std::size_t>(i) * sample, sample);
      t0 = std::chrono::steady_clock::now();
      last = core.score_input(x).score;
      ms.push_back(1000 * seconds_since(t0));
    }
    std::sort(ms.begin(), ms.end());
    std::printf(
        "{\"impl\": \"stoke\", \"threads\": %d, \"embed_s\": %.4f, \"%s\": %.4f, "
        "\"fit_s\": %.4f, \"%s\": %lld, \"infer_ms\": %.3f, \"last_score\": %.6g}\n",
        runtime.cpu_threads, embed_s, padim ? "gaussians_s" : "coreset_s", coreset_s,
        embed_s + coreset_s, padim ? "positions" : "bank_rows",
        static_cast<long long>(padim ? core.padim_positions() : core.bank_rows()),
        ms[ms.size() / 2], last);
    return 0;
  } catch (const stoke::Error& err) {
    std::fprintf(stderr, "stoke_bench_anomaly: %s\n", err.what());
    return 1;
  }
}
