// The anomaly parity test's stoke side (tests/anomaly/parity.py): a
// torchvision-named safetensors backbone, PatchCore fitted with coreset
// ratio 1 (or CORESET, drawn from SEED, default 0; or PaDiM: its channel
// subset written to channels.bin as int64) on raw float inputs, then per test
// input its embeddings, anomaly map and image score, written as float32 files
// (PatchCore: its bank too, bank.bin)
// (tests/anomaly/parity.py and tests/anomaly/anomalib_parity.py).
//   anomaly_tool WEIGHTS ARCH SIZE TRAIN.bin NTRAIN TEST.bin NTEST OUTDIR [patchcore|padim
//   [CORESET [SEED]]]
#include <cstdio>
#include <cstdlib>
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

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!f) throw stoke::IoError("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 9 || argc > 12) {
    std::fprintf(stderr,
                 "usage: anomaly_tool WEIGHTS ARCH SIZE TRAIN.bin NTRAIN TEST.bin NTEST OUTDIR "
                 "[patchcore|padim [CORESET [SEED]]]\n");
    return 2;
  }
  try {
    stoke::init();
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
    o.coreset_ratio = 1.0;
    if (argc >= 10) o.method = stoke::anomaly::anomaly_method_from_name(argv[9]);
    if (argc >= 11) {
      char* end = nullptr;
      o.coreset_ratio = std::strtod(argv[10], &end);
      if (end == argv[10] || *end != '\0')
        throw stoke::InvalidArgument(std::string("anomaly_tool: CORESET '") + argv[10] +
                                     "' is not a number");
    }
    if (argc == 12) o.seed = std::stoull(argv[11]);
    stoke::anomaly::PatchCore core(std::move(model), pre, o);
    const auto sample = static_cast<std::size_t>(3 * spec.height * spec.width);
    const int ntrain = std::stoi(argv[5]), ntest = std::stoi(argv[7]);
    const auto train = read_floats(argv[4], sample * static_cast<std::size_t>(ntrain));
    const stoke::anomaly::Embeddings e = core.embed(train, ntrain);
    core.fit_embeddings(e);
    const auto test = read_floats(argv[6], sample * static_cast<std::size_t>(ntest));
    std::vector<float> emb, maps, scores;
    for (int i = 0; i < ntest; ++i) {
      const std::span<const float> x(test.data() + static_cast<std::size_t>(i) * sample, sample);
      const auto te = core.embed(x, 1);
      emb.insert(emb.end(), te.rows.begin(), te.rows.end());
      const auto r = core.score_input(x);
      maps.insert(maps.end(), r.map.begin(), r.map.end());
      scores.push_back(r.score);
    }
    const std::string out = argv[8];
    write_floats(out + "/train_embeddings.bin", e.rows);
    write_floats(out + "/test_embeddings.bin", emb);
    write_floats(out + "/maps.bin", maps);
    write_floats(out + "/scores.bin", scores);
    if (o.method == stoke::anomaly::AnomalyMethod::kPatchCore)
      write_floats(out + "/bank.bin", core.bank());  // the coreset's rows
    if (o.method == stoke::anomaly::AnomalyMethod::kPadim) {
      const auto& channels = core.padim_channels();
      std::ofstream f(out + "/channels.bin", std::ios::binary);
      f.write(reinterpret_cast<const char*>(channels.data()),
              static_cast<std::streamsize>(channels.size() * sizeof(std::int64_t)));
      if (!f) throw stoke::IoError("cannot write " + out + "/channels.bin");
    }
    std::printf("%lld %lld %lld\n", static_cast<long long>(e.grid_h),
                static_cast<long long>(e.grid_w), static_cast<long long>(e.width));
    return 0;
  } catch (const stoke::Error& err) {
    std::fprintf(stderr, "anomaly_tool: %s\n", err.what());
    return 1;
  }
}
