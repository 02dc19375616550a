// Writes stoke models as ONNX with inputs and stoke's logits, and imports
// weight files and writes the logits, for the ONNX Runtime parity scripts
// (tests/interchange/*.py):
//   interchange_tool export DIR
//       every architecture x {gray, RGB} x {batch norm kept, folded}: DIR/<name>.onnx,
//       <name>.input.bin, <name>.logits.bin (float32; folded files: stoke's logits with the
//       file's folded weights, and <name>.unfolded.bin the model's own), one line per model in
//       DIR/manifest.txt: "name batch channels height width classes"
//   interchange_tool import onnx|safetensors FILE ARCH WIDTH_MULT CHANNELS SIZE CLASSES INPUT
//   OUTPUT [new-head]
//       imports FILE into the model and writes its inference logits on INPUT (batch inferred)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "stoke/stoke.hpp"

namespace {

using namespace stoke;

std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw IoError("cannot open " + path);
  std::vector<float> v(static_cast<std::size_t>(f.tellg()) / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

void write_floats(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  if (!f) throw IoError("cannot write " + path);
}

// Batch-norm parameters and statistics away from the identity (so a wrong
// mapping shows in the logits), drawn as tests/interchange/torchvision_like.py
// draws them.
void perturb_batch_norms(nn::Model& model, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.5f, 1.5f), shift(-0.2f, 0.2f);
  auto params = model.named_parameters();
  for (std::size_t i = 0; i + 1 < params.size();
       ++i) {  // rank-1 parameters but the head's bias: the norms'
    if (params[i].tensor.rank() != 1) continue;
    const bool gamma = params[i].name.ends_with(".gamma") || params[i].name.ends_with(".weight");
    std::vector<float> v(static_cast<std::size_t>(params[i].tensor.numel()));
    for (float& x : v) x = gamma ? scale(rng) : shift(rng);
    params[i].tensor.copy_from_host(v.data());
  }
  for (auto& t : model.named_buffers()) {
    std::vector<float> v(static_cast<std::size_t>(t.tensor.numel()));
    for (float& x : v) x = t.name.ends_with("running_var") ? scale(rng) : shift(rng);
    t.tensor.copy_from_host(v.data());
  }
}

// Scales the (linear) head so the logits on `input` are at most 3 in
// magnitude: the activations grow through deep random nets, and 1e-4 should
// be a tight bound on logits of the size a trained model gives.
void scale_head(nn::Model& model, const std::vector<float>& input);

std::vector<float> logits(nn::Model& model, const std::vector<float>& input) {
  const std::int64_t per = shape_numel(model.input_shape(1));
  Tensor x(model.backend(), model.input_shape(static_cast<std::int64_t>(input.size()) / per));
  x.copy_from_host(input.data());
  return model.forward(x, false).to_vector();
}

void scale_head(nn::Model& model, const std::vector<float>& input) {
  float most = 1.0f;
  for (float v : logits(model, input)) most = std::max(most, std::fabs(v));
  auto params = model.named_parameters();
  for (std::size_t i = params.size() - 2; i < params.size(); ++i) {  // the head's weight and bias
    std::vector<float> v = params[i].tensor.to_vector();
    for (float& x : v) x *= 3.0f / most;
    params[i].tensor.copy_from_host(v.data());
  }
}

nn::ModelSpec spec_for(const std::string& arch, float width, int channels, int size, int classes) {
  nn::ModelSpec s;
  s.architecture = nn::architecture_from_name(arch);
  s.width_multiplier = width;
  s.in_channels = channels;
  s.height = s.width = size;
  s.classes = classes;
  if (!nn::is_torchvision_resnet(s.architecture)) {
    s.stem_width = 6;
    s.widths = {6, 10};
    s.strides = {1, 2};
    s.blocks_per_stage = 1;
    s.dropout = s.architecture == nn::Architecture::kPlainCnn ? 0.3f : 0.0f;
  }
  return s;
}

int export_all(const std::string& dir) {
  std::ofstream manifest(dir + "/manifest.txt");
  std::uint32_t seed = 1;
  for (const char* arch : {"resnet", "plain_cnn", "resnet18", "resnet34", "resnet50"}) {
    for (int channels : {1, 3}) {
      for (bool fold : {false, true}) {
        const bool torch = std::string(arch).starts_with("resnet") && std::string(arch) != "resnet";
        const int size = torch ? 32 : 12, classes = 5, batch = 3;
        auto model = nn::build_model(cpu_backend(),
                                     spec_for(arch, 0.0625f, channels, size, classes), ++seed);
        perturb_batch_norms(*model, seed);
        const std::string name =
            std::string(arch) + (channels == 1 ? "_gray" : "_rgb") + (fold ? "_folded" : "");
        interchange::OnnxExportOptions o;
        o.fold_batch_norm = fold;
        o.softmax = fold;  // the optional output, on half the files
        o.class_names = {"good", "scratch", "dent", "stain", "crack"};
        o.metadata = {{"preprocessing", "{\"mean\": [0.5], \"std\": [0.25]}"}};
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<float> input(static_cast<std::size_t>(shape_numel(model->input_shape(batch))));
        for (float& x : input) x = u(rng);
        scale_head(*model, input);
        interchange::export_onnx(*model, dir + "/" + name + ".onnx", o);
        write_floats(dir + "/" + name + ".input.bin", input);
        const std::vector<float> own = logits(*model, input);
        if (fold) {
          // The file computes with the folded weights rounded to float32; stoke
          // computes the same after importing them (the norms become the
          // identity). That is the 1e-4 comparison; the unfolded model's logits
          // go beside it to bound the fold's own rounding.
          auto folded = nn::build_model(cpu_backend(), model->spec(), seed + 1000);
          interchange::import_onnx(*folded, dir + "/" + name + ".onnx");
          write_floats(dir + "/" + name + ".logits.bin", logits(*folded, input));
          write_floats(dir + "/" + name + ".unfolded.bin", own);
        } else {
          write_floats(dir + "/" + name + ".logits.bin", own);
        }
        manifest << name << ' ' << batch << ' ' << channels << ' ' << size << ' ' << size << ' '
                 << classes << '\n';
      }
    }
  }
  return 0;
}

int import_one(int argc, char** argv) {
  if (argc < 11) return 2;
  const std::string kind = argv[2], file = argv[3];
  auto model = nn::build_model(cpu_backend(),
                               spec_for(argv[4], std::stof(argv[5]), std::stoi(argv[6]),
                                        std::stoi(argv[7]), std::stoi(argv[8])),
                               99);
  interchange::ImportOptions o;
  o.load_classifier = !(argc > 11 && std::string(argv[11]) == "new-head");
  const interchange::ImportReport r = kind == "onnx"
                                          ? interchange::import_onnx(*model, file, o)
                                          : interchange::load_safetensors(*model, file, o);
  std::printf("loaded %zu tensors, kept %zu, stem summed: %s\n", r.loaded.size(), r.kept.size(),
              r.stem_summed ? "yes" : "no");
  write_floats(argv[10], logits(*model, read_floats(argv[9])));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc >= 3 && std::string(argv[1]) == "export") return export_all(argv[2]);
    if (argc >= 2 && std::string(argv[1]) == "import") return import_one(argc, argv);
    std::fprintf(stderr,
                 "usage: interchange_tool export DIR | import KIND FILE ARCH WIDTH CHANNELS SIZE "
                 "CLASSES INPUT OUTPUT [new-head]\n");
    return 2;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
