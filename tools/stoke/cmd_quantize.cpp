// stoke quantize: a model file in a reduced precision, written only when it
// agrees with fp32 on a validation folder (docs/precision.md, the gate): bf16
// (oneDNN's bf16 kernels) or int8 (oneDNN's int8 kernels, activation ranges
// calibrated on --calibrate DIR; classifiers only).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "stoke/anomaly.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/stoke.hpp"

namespace {

namespace fs = std::filesystem;
using stoke_cli::UsageError;

constexpr const char* kUsage =
    "usage: stoke quantize --model MODEL --val DIR --out MODEL_OUT [--precision bf16|int8]\n"
    "                      [--calibrate DIR] [--good CLASS] [--max-disagreement F (0.005)]\n"
    "                      [--force] [--json]\n"
    "  Runs MODEL on the images of DIR (one subfolder per class) in fp32 and in the reduced\n"
    "  precision, and writes MODEL_OUT (MODEL set to run in that precision, the comparison in its\n"
    "  metrics) only when at most F of the decisions differ, the escape rate does not rise\n"
    "  (classifiers with --good CLASS: defect images passed as CLASS; anomaly models: defects\n"
    "  scored below the threshold, --good is the good subfolder) and an anomaly model's image\n"
    "  AUROC falls by at most 0.005. --force writes it anyway, with a warning. The Predictor,\n"
    "  stoke predict and eval run MODEL_OUT in its precision unless STOKE_PRECISION says\n"
    "  otherwise. --precision int8 (classifiers, CPU with oneDNN) needs --calibrate DIR: the\n"
    "  images (any folder layout) whose fp32 activations set each convolution's input scale\n"
    "  (max-abs); the ranges and the calibration's folder, image count, method and date go\n"
    "  into MODEL_OUT. Calibrate on images like the line's, not on --val itself.\n";

struct Labelled {
  fs::path file;
  std::string truth;  // its class folder
};

std::vector<Labelled> labelled_images(const fs::path& root) {
  std::vector<Labelled> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw stoke::IoError("--val: '" + root.string() + "' is not a folder");
  std::vector<fs::path> classes;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) classes.push_back(it->path());
  std::sort(classes.begin(), classes.end());
  for (const auto& dir : classes)
    for (const auto& f : stoke_cli::list_images("quantize", dir))
      out.push_back({f, dir.filename().string()});
  if (out.empty()) throw UsageError("--val " + root.string() + ": no images in class subfolders");
  return out;
}

stoke::Context with_precision(const stoke::Context& base, const char* precision) {
  stoke::Config c = base.config();
  c.set("STOKE_PRECISION", precision);
  return stoke::Context(c);
}

// `reduced`: the model file to run in `precision` (int8: the calibrated candidate).
stoke::PrecisionGateResult measure_classifier(const std::string& model, const std::string& reduced,
                                              const char* precision,
                                              const std::vector<Labelled>& images,
                                              const std::string& good, const stoke::Context& base) {
  stoke::PredictorOptions o32, o16;
  o32.context = with_precision(base, "fp32");
  o16.context = with_precision(base, precision);
  stoke::Predictor fp32(model, o32), bf16(reduced, o16);
  const auto& names = fp32.info().class_names;
  if (!good.empty() && std::find(names.begin(), names.end(), good) == names.end())
    throw UsageError("--good " + good + ": the model has no such class");
  stoke::PrecisionGateResult g;
  g.precision = bf16.self_check().precision;
  std::uint64_t defects = 0, escaped32 = 0, escaped16 = 0;
  // Each image decoded and preprocessed once (both predictors read the same
  // model file: the same preprocessing), then run in both precisions.
  auto session = fp32.session();
  std::vector<float> x(fp32.sample_size());
  for (const auto& im : images) {
    session.preprocess_file(im.file, x);
    const auto a = fp32.forward(x, 1).front(), b = bf16.forward(x, 1).front();
    ++g.images;
    g.disagreements += a.label != b.label;
    if (!good.empty() && im.truth != good) {
      ++defects;
      escaped32 += a.class_name == good;
      escaped16 += b.class_name == good;
    }
  }
  if (defects) {
    g.escape_fp32 = static_cast<double>(escaped32) / static_cast<double>(defects);
    g.escape_reduced = static_cast<double>(escaped16) / static_cast<double>(defects);
  }
  return g;
}

stoke::PrecisionGateResult measure_anomaly(const std::string& model,
                                           const std::vector<Labelled>& images,
                                           const std::string& good) {
  if (good.empty()) throw UsageError("an anomaly model needs --good CLASS (the good subfolder)");
  auto core = stoke::anomaly::PatchCore::load(model, stoke::default_backend());
  core.set_precision(stoke::Precision::kFp32);  // the reference, whatever the file says
  std::vector<float> s32, s16;
  for (const auto& im : images) s32.push_back(core.score_file(im.file).score);
  core.set_precision(stoke::Precision::kBf16);
  for (const auto& im : images) s16.push_back(core.score_file(im.file).score);
  stoke::PrecisionGateResult g;
  g.precision = core.precision();
  const float t = core.threshold();
  std::vector<float> good32, good16, bad32, bad16;
  std::uint64_t escaped32 = 0, escaped16 = 0;
  for (std::size_t i = 0; i < images.size(); ++i) {
    ++g.images;
    g.disagreements += (s32[i] > t) != (s16[i] > t);
    const bool is_good = images[i].truth == good;
    (is_good ? good32 : bad32).push_back(s32[i]);
    (is_good ? good16 : bad16).push_back(s16[i]);
    if (!is_good) escaped32 += !(s32[i] > t), escaped16 += !(s16[i] > t);
  }
  if (good32.empty()) throw UsageError("--good " + good + ": no such subfolder with images");
  if (!bad32.empty()) {
    g.escape_fp32 = static_cast<double>(escaped32) / static_cast<double>(bad32.size());
    g.escape_reduced = static_cast<double>(escaped16) / static_cast<double>(bad32.size());
    g.auroc_fp32 = stoke::anomaly::image_auroc(good32, bad32);
    g.auroc_reduced = stoke::anomaly::image_auroc(good16, bad16);
  }
  return g;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

int run(int argc, char** argv) {
  const stoke_cli::Args args(
      argc, argv, {"model", "val", "out", "precision", "good", "max-disagreement", "calibrate"},
      {"force", "json"});
  const std::string model = args.required("model"), out = args.required("out");
  const std::string precision = args.get("precision", "bf16");
  if (precision != "bf16" && precision != "int8")
    throw UsageError("--precision: '" + precision + "' is not bf16 or int8");
  const bool int8 = precision == "int8";
  if (args.has("calibrate") && !int8)
    throw UsageError("--calibrate is for int8 activation scales; bf16 needs none");
  if (int8 && !args.has("calibrate"))
    throw UsageError("--precision int8 needs --calibrate DIR (images for the activation scales)");
  std::error_code ec;
  if (fs::weakly_canonical(out, ec) == fs::weakly_canonical(model, ec))
    throw UsageError("--out " + out + " is the input --model " + model);
  stoke_cli::check_writable("--out", out);
  stoke::PrecisionGateLimits limits;
  limits.max_disagreement = args.get_double("max-disagreement", 0.005, 0.0, 1.0);
  const auto images = labelled_images(args.required("val"));
  const auto runtime = stoke::init();
  stoke::Backend& backend = stoke::default_backend();
  const stoke::Precision wanted = int8 ? stoke::Precision::kInt8 : stoke::Precision::kBf16;
  if (backend.inference_precision(wanted) == stoke::PrecisionSupport::kNone) {
    throw stoke::Unsupported("--precision " + precision + ": " + backend.name() + " has no " +
                             precision +
                             " kernels here (oneDNN's bf16 ones need AVX-512, its int8 ones "
                             "AVX2; stoke info reports \"bf16\"), so there is nothing to "
                             "compare with fp32");
  }
  const bool anomaly = stoke::nn::read_checkpoint_info(model).metadata.count("anomaly.method") != 0;
  if (anomaly && int8)
    throw stoke::Unsupported("--precision int8: '" + model +
                             "' is an anomaly model; int8 is built for classifiers only");
  const std::string good = args.get("good");
  stoke::nn::CheckpointInfo ck;
  auto net = stoke::nn::load_model(model, stoke::cpu_backend(), &ck);
  // int8: the calibration into a candidate file beside --out, which the
  // gate runs in int8 (removed on every path).
  std::string reduced = model;
  struct Candidate {
    std::string path;
    ~Candidate() {
      std::error_code ignored;
      if (!path.empty()) fs::remove(path, ignored);
    }
  } candidate;
  if (int8) {
    const std::string dir = args.get("calibrate");
    stoke::PredictorOptions options;
    options.context = runtime.context;
    const auto calibration =
        stoke::calibrate_int8(model, stoke_cli::list_images("quantize", dir), dir, options);
    stoke::add_int8_metadata(ck.metadata, calibration);
    ck.metadata["model.precision"] = "int8";
    candidate.path = reduced = out + ".candidate";
    stoke::nn::save_checkpoint(reduced, *net, nullptr, ck.metadata);
  }
  const stoke::PrecisionGateResult gate = stoke::judge_precision(
      anomaly
          ? measure_anomaly(model, images, good)
          : measure_classifier(model, reduced, precision.c_str(), images, good, runtime.context),
      limits);
  const bool write = gate.passed || args.has("force");
  if (write) {
    stoke::add_precision_metadata(ck.metadata, gate);
    stoke::nn::save_checkpoint(out, *net, nullptr, ck.metadata);
  }
  if (args.has("json")) {
    std::printf(
        "{\"precision\": \"%s\", \"images\": %llu, \"disagreements\": %llu, \"disagreement\": %s, "
        "\"escape_fp32\": %s, \"escape_reduced\": %s, \"auroc_fp32\": %s, \"auroc_reduced\": %s, "
        "\"passed\": %s, \"written\": %s, \"reasons\": %s}\n",
        stoke::to_string(gate.precision), static_cast<unsigned long long>(gate.images),
        static_cast<unsigned long long>(gate.disagreements), json_number(gate.disagreement).c_str(),
        json_number(gate.escape_fp32).c_str(), json_number(gate.escape_reduced).c_str(),
        json_number(gate.auroc_fp32).c_str(), json_number(gate.auroc_reduced).c_str(),
        gate.passed ? "true" : "false", write ? "true" : "false",
        stoke_cli::json_string(gate.reasons).c_str());
  } else {
    std::printf("%s against fp32 on %llu images: %llu decisions differ (%.3g %%)%s\n",
                stoke::to_string(gate.precision), static_cast<unsigned long long>(gate.images),
                static_cast<unsigned long long>(gate.disagreements), 100 * gate.disagreement,
                gate.passed ? ": passed" : "");
  }
  if (!gate.passed) {
    const std::string what = write ? "failed; --force wrote " + out + " anyway" : "refused " + out;
    std::fprintf(stderr, "stoke quantize: the gate %s: %s\n", what.c_str(), gate.reasons.c_str());
    return write ? 0 : 1;
  }
  if (!args.has("json"))
    std::printf("wrote %s (runs in %s)\n", out.c_str(), stoke::to_string(gate.precision));
  return 0;
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
  return stoke_cli::run_guarded("quantize", kUsage, run, argc, argv);
}
