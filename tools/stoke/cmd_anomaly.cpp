// stoke train --task anomaly, and stoke predict / stoke eval on an anomaly
// model file (PatchCore or PaDiM, stoke/anomaly.hpp; docs/anomaly.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <set>

#include "anomaly_report.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "stoke/interchange.hpp"
#include "stoke/stoke.hpp"

namespace {

namespace fs = std::filesystem;
using stoke_cli::UsageError;

constexpr const char* kTrainUsage =
    R"(usage: stoke train --task anomaly --data GOOD_DIR [--val GOOD_OR_MIXED_DIR]
                   --arch resnet18|resnet34|resnet50|wide_resnet50_2 [--init WEIGHTS|MODEL.stoke] --size N
                   [--channels 1|3] [--normalize imagenet(default)|minmax|mean=..,std=..]
                   [--method patchcore|padim] [--coreset RATIO (0.1, patchcore)]
                   [--patches-per-image K (patchcore)] [--features N (padim)]
                   [--max-bank BYTES[K|M|G] (4G)]
                   [--false-reject R (0.005)] [--escape E] [--tile SIZE [--stride S]] [--seed N]
                   --out MODEL [--json]
  Fits PatchCore's memory bank (the default) or PaDiM's per-position Gaussians (--method padim,
  at least 2 images; --features: the channels kept of layer1..layer3, default 100 for
  resnet18/34, 550 for resnet50/wide_resnet50_2) on the good images of GOOD_DIR (images under
  a subfolder other than good/ or ok/ are listed and left out). --max-bank caps the bank, or
  PaDiM's Gaussians and training features. --patches-per-image K keeps K seeded grid positions
  of each image (tile) before the coreset (default: all): memory and coreset time for thousands
  of images. The threshold rejects at most R of the good
  images of --val (its good/ or ok/ subfolder, or the folder itself); without --val every 10th
  training image is held out for it. With --escape E and defect images in --val (its other
  subfolders) the threshold instead passes at most E of those defects as good (the highest
  such threshold). The validation scores' range (the normalized score) and a pixel threshold
  (a good part shows a pixel above it at rate R) are stored too. --init loads torchvision-named safetensors (or ONNX) into
  --arch, or takes the backbone of a classifier stoke trained (MODEL.stoke, its size and channels).
  --tile SIZE cuts each image at its full resolution into SIZE x SIZE tiles S apart (default S =
  SIZE; the last tile of a row or column ends at the edge), each resized to --size: small defects
  of camera images stay visible. Training, the threshold, predict and eval use the same tiles;
  maps (--heatmaps, pixel metrics) are then at the image's size.
)";

constexpr const char* kPredictUsage =
    "usage: stoke predict --model ANOMALY_MODEL (FILE... | --data DIR) [--json] [--heatmaps DIR]\n"
    "                     [--precision fp32|bf16|auto]\n"
    "  prints file, score and anomalous (score above the model's threshold) per image; --json\n"
    "  adds normalized_score (0..1, the threshold at 0.5) and defect_pixels (map pixels above\n"
    "  the model's pixel threshold).\n"
    "  --heatmaps DIR writes each image's anomaly map as DIR/<name>.png at the model's input\n"
    "  size (8-bit gray: 128 = the model's threshold, 255 = twice it or more; \"heatmap\" in "
    "--json).\n";

constexpr const char* kEvalUsage =
    "usage: stoke eval --model ANOMALY_MODEL --data DIR --good CLASS [--masks MASK_DIR] [--json]\n"
    "                  [--report DIR] [--precision fp32|bf16|auto]\n"
    "  DIR holds one subfolder per class; CLASS is the good one, every other is a defect.\n"
    "  Reports image_auroc and, at the model's threshold, the false-reject and escape rates.\n"
    "  With ground-truth masks (MASK_DIR/<class>/<name>_mask.png or <name>.png, 0 = good pixel;\n"
    "  default: DIR/../ground_truth when it exists, MVTec AD's layout) also pixel_auroc and\n"
    "  aupro (up to a false-positive rate of 0.3). Every defect image needs its mask; a good\n"
    "  image without one is all good pixels. --report DIR writes DIR/report.json and\n"
    "  DIR/report.html (score histogram, ROC, the worst parts with their maps over them).\n"
    "  --precision: as stoke predict.\n";

bool is_good_folder(const std::string& name) {
  return name == "good" || name == "ok";
}

// The images of `root`: those directly in it or under good/ or ok/ as good,
// the others (under any other subfolder) as defects.
void split_folder(const fs::path& root, std::vector<fs::path>& good,
                  std::vector<fs::path>& defect) {
  for (const auto& f : stoke_cli::list_images("train", root)) {
    const fs::path rel = f.lexically_relative(root);
    const bool top = rel.parent_path().empty();
    (top || is_good_folder(rel.begin()->string()) ? good : defect).push_back(f);
  }
}

std::uint64_t byte_count(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  double scale = 1.0;
  if (*end == 'K' || *end == 'k') scale = 1024.0;
  if (*end == 'M' || *end == 'm') scale = 1024.0 * 1024.0;
  if (*end == 'G' || *end == 'g') scale = 1024.0 * 1024.0 * 1024.0;
  if (text.empty() || end == text.c_str() || (*end && end[1]) || !(v > 0) || !std::isfinite(v))
    throw UsageError("--max-bank: '" + text + "' is not a byte count (e.g. 512M, 4G)");
  return static_cast<std::uint64_t>(v * scale);
}

stoke::nn::Architecture backbone(const stoke_cli::Args& args) {
  const std::string arch = args.required("arch");
  const auto a = stoke::nn::architecture_from_name(arch);
  if (!stoke::nn::is_torchvision_resnet(a))
    throw UsageError("--arch for anomaly is resnet18, resnet34, resnet50 or wide_resnet50_2");
  return a;
}

stoke::anomaly::PatchCoreOptions patchcore_options(const stoke_cli::Args& args) {
  const std::string method = args.get("method", "patchcore");
  if (method != "patchcore" && method != "padim")
    throw UsageError("--method: '" + method + "' is not patchcore or padim");
  if (args.has("stride") && !args.has("tile")) throw UsageError("--stride needs --tile");
  stoke::anomaly::PatchCoreOptions o;
  o.method = stoke::anomaly::anomaly_method_from_name(method);
  const bool padim = o.method == stoke::anomaly::AnomalyMethod::kPadim;
  if (padim && args.has("coreset")) throw UsageError("--coreset is for --method patchcore");
  if (!padim && args.has("features")) throw UsageError("--features is for --method padim");
  if (padim && args.has("patches-per-image"))
    throw UsageError("--patches-per-image is for --method patchcore");
  if (args.has("patches-per-image"))
    o.patches_per_image = args.get_int("patches-per-image", 0, 1, 1 << 20);
  if (args.has("features")) o.padim_features = args.get_int("features", 0, 1, 1 << 16);
  if (args.has("tile")) {
    o.tile = args.get_int("tile", 0, 1, 65536);
    o.tile_stride = args.get_int("stride", o.tile, 1, o.tile);
  }
  o.coreset_ratio = args.get_double("coreset", 0.1);
  o.target_false_reject = args.get_double("false-reject", 0.005);
  if (args.has("escape")) {
    o.target_escape = args.get_double("escape", 0.0);
    if (!(o.target_escape >= 0.0 && o.target_escape < 1.0))
      throw UsageError("--escape: " + args.get("escape") + " is not in [0, 1)");
  }
  o.seed = static_cast<std::uint64_t>(args.get_int("seed", 0));
  if (args.has("max-bank")) o.max_bank_bytes = byte_count(args.get("max-bank"));
  return o;
}

// --init MODEL.stoke: a classifier stoke trained (its backbone, input size and
// channels); --init FILE.safetensors|.onnx: torchvision weights into --arch;
// no --init: --arch with random weights.
std::unique_ptr<stoke::nn::Model> load_backbone(const stoke_cli::Args& args, std::uint64_t seed) {
  const std::string f = args.get("init");
  const auto ends = [&](const char* tail) {
    const std::string t = tail;
    return f.size() > t.size() && f.compare(f.size() - t.size(), t.size(), t) == 0;
  };
  if (ends(".stoke")) {
    auto model = stoke::nn::load_model(f, stoke::default_backend());
    const auto& s = model->spec();
    if (!stoke::nn::is_torchvision_resnet(s.architecture))
      throw UsageError(
          "--init " + f + ": a " + stoke::nn::architecture_name(s.architecture) +
          " classifier; anomaly needs resnet18, resnet34, resnet50 or wide_resnet50_2");
    if ((args.has("size") && args.get_int("size", 0) != s.height) ||
        (args.has("channels") && args.get_int("channels", 0) != s.in_channels))
      throw UsageError("--init " + f + " takes " + std::to_string(s.in_channels) + "x" +
                       std::to_string(s.height) + "x" + std::to_string(s.width) +
                       " inputs: leave out --size/--channels or give those");
    std::fprintf(stderr, "init: the backbone of the classifier %s (%s, %dx%d)\n", f.c_str(),
                 stoke::nn::architecture_name(s.architecture), s.height, s.width);
    return model;
  }
  stoke::nn::ModelSpec spec;
  spec.architecture = backbone(args);
  spec.in_channels = args.get_int("channels", 3);
  spec.height = spec.width = args.get_int("size", 224);
  spec.classes = 1000;  // torchvision's head: unused, kept so a classifier's file loads whole
  spec.width_multiplier = static_cast<float>(args.get_double("width-mult", 1.0));
  auto model = stoke::nn::build_model(stoke::default_backend(), spec, seed);
  if (f.empty()) {
    std::fprintf(stderr, "stoke train: no --init: random backbone weights (seed %llu)\n",
                 static_cast<unsigned long long>(seed));
    return model;
  }
  stoke::interchange::ImportOptions io;
  io.load_classifier = false;
  const auto r = ends(".onnx") ? stoke::interchange::import_onnx(*model, f, io)
                               : stoke::interchange::load_safetensors(*model, f, io);
  std::fprintf(stderr, "init: %zu tensors from %s%s\n", r.loaded.size(), f.c_str(),
               r.stem_summed ? ", RGB stem summed to gray" : "");
  return model;
}

int train(int argc, char** argv) {
  stoke_cli::Args args(
      argc, argv, {"task",     "data",         "val",    "arch",    "init",     "size",
                   "channels", "normalize",    "method", "coreset", "features", "patches-per-image",
                   "max-bank", "false-reject", "escape", "seed",    "out",      "tile",
                   "stride",   "width-mult"},
      {"json"});
  const std::string out = args.required("out");
  std::vector<fs::path> good, mixed_in;
  split_folder(args.required("data"), good, mixed_in);
  if (!mixed_in.empty()) {
    std::fprintf(stderr, "stoke train: %zu images under non-good subfolders of %s are left out:\n",
                 mixed_in.size(), args.get("data").c_str());
    for (const auto& f : mixed_in) std::fprintf(stderr, "  %s\n", f.c_str());
  }
  std::vector<fs::path> val, val_defects;
  if (args.has("val")) {
    split_folder(args.get("val"), val, val_defects);
  } else if (good.size() >= 10) {
    std::vector<fs::path> fit;
    for (std::size_t i = 0; i < good.size(); ++i) (i % 10 == 9 ? val : fit).push_back(good[i]);
    good = std::move(fit);
  } else {
    std::fprintf(stderr,
                 "stoke train: fewer than 10 images and no --val: the threshold comes "
                 "from the training images themselves (optimistic)\n");
    val = good;
  }
  if (good.empty() || val.empty())
    throw UsageError("no good images to train on or to calibrate with");
  const auto options = patchcore_options(args);
  stoke::init();
  auto model = load_backbone(args, options.seed);
  const stoke::nn::ModelSpec& spec = model->spec();
  stoke::PreprocessOptions pre;
  pre.width = pre.height = spec.height;
  pre.channels = spec.in_channels;
  pre.normalization = stoke_cli::parse_normalization(args.get("normalize", "imagenet"));
  stoke::set_log_level(stoke::LogLevel::kInfo);  // the bank's memory figure and the coreset
  stoke::anomaly::PatchCore core(std::move(model), pre, options);
  core.fit(good);
  if (options.target_escape >= 0 && val_defects.empty()) {
    std::fprintf(stderr,
                 "stoke train: --escape without defect images in --val: the threshold "
                 "comes from --false-reject\n");
  }
  core.calibrate(val, val_defects);
  core.save(out);
  std::size_t escapes = 0;
  for (const auto& f : val_defects) escapes += core.score_file(f).anomalous ? 0 : 1;
  // What was fitted: PatchCore's bank rows x width, PaDiM's positions x features.
  const bool padim = options.method == stoke::anomaly::AnomalyMethod::kPadim;
  const long long rows = padim ? core.padim_positions() : core.bank_rows();
  const long long width =
      padim ? static_cast<long long>(core.padim_channels().size()) : core.bank_width();
  if (args.has("json")) {
    std::printf(
        "{\"model\": %s, \"method\": \"%s\", \"train_images\": %zu, \"val_images\": %zu, "
        "\"%s\": %lld, \"%s\": %lld, \"threshold\": %.9g, \"val_defects\": %zu, "
        "\"val_escapes\": %zu, \"threshold_from\": \"%s\", \"pixel_threshold\": %.9g}\n",
        stoke_cli::json_string(out).c_str(), stoke::anomaly::method_name(options.method),
        good.size(), val.size(), padim ? "positions" : "bank_rows", rows,
        padim ? "features" : "bank_width", width, core.threshold(), val_defects.size(), escapes,
        options.target_escape >= 0 && !val_defects.empty() ? "escape" : "false_reject",
        core.pixel_threshold());
  } else {
    std::printf("model: %s (%s, %zu good images, %s %lld x %lld, threshold %.6g from %zu good)\n",
                out.c_str(), stoke::anomaly::method_name(options.method), good.size(),
                padim ? "Gaussians at positions x features" : "bank", rows, width, core.threshold(),
                val.size());
  }
  return 0;
}

// DIR/<name>.png (<name>-2.png, ... for a name this run wrote already):
// the map at the input size, 128 = `threshold`, 255 = twice it or more.
fs::path write_heatmap(const fs::path& dir, const fs::path& file,
                       const stoke::anomaly::AnomalyResult& r, float threshold,
                       std::set<fs::path>& written) {
  const fs::path out = stoke_cli::unique_output(dir / (file.stem().string() + ".png"), written);
  stoke::Image gray(r.width, r.height, 1);
  const float scale = threshold > 0 ? 128.0f / threshold : 0.0f;
  for (int y = 0; y < r.height; ++y) {
    for (int x = 0; x < r.width; ++x) {
      const float v = r.map[static_cast<std::size_t>(y) * static_cast<std::size_t>(r.width) +
                            static_cast<std::size_t>(x)];
      gray.data()[static_cast<std::size_t>(y) * gray.stride() + static_cast<std::size_t>(x)] =
          static_cast<std::uint8_t>(std::clamp(v * scale, 0.0f, 255.0f) + 0.5f);
    }
  }
  stoke::write_file(out, stoke::encode_png(gray.view()));
  return out;
}

void print_result(bool json, const fs::path& file, const stoke::anomaly::AnomalyResult& r,
                  const fs::path& heatmap) {
  if (json) {
    std::printf(
        "{\"file\": %s, \"score\": %.9g, \"anomalous\": %s, \"normalized_score\": "
        "%.6g, \"defect_pixels\": %lld%s%s}\n",
        stoke_cli::json_string(file.string()).c_str(), r.score, r.anomalous ? "true" : "false",
        r.normalized_score, static_cast<long long>(r.defect_pixels),
        heatmap.empty() ? "" : ", \"heatmap\": ",
        heatmap.empty() ? "" : stoke_cli::json_string(heatmap.string()).c_str());
  } else {
    std::printf("%-48s %12.6g %s\n", file.c_str(), r.score, r.anomalous ? "anomalous" : "good");
  }
}

// Whether --precision / STOKE_PRECISION asked for a precision (else the model file's).
bool precision_asked(const stoke::Runtime& runtime) {
  return runtime.context.config().knob("STOKE_PRECISION").source != stoke::ConfigSource::kDefault;
}

// Logs the reference image's score change in the precision asked for.
void log_precision(stoke::Precision precision, double change) {
  if (precision == stoke::Precision::kFp32) return;
  char text[160];
  std::snprintf(text, sizeof text,
                "anomaly model in %s: the reference image scores %.3g (relative) away from "
                "fp32's",
                stoke::to_string(precision), change);
  stoke::log_info(text);
}

// The anomaly model of --model in the precision of --precision /
// STOKE_PRECISION (docs/precision.md): its self-check ran in fp32; in bf16
// the reference image's score change is logged.
stoke::anomaly::PatchCore load_model(const stoke_cli::Args& args) {
  const auto runtime = stoke_cli::init_with_precision(args.get("precision"));
  auto core = stoke::anomaly::PatchCore::load(args.required("model"), stoke::default_backend());
  if (precision_asked(runtime)) {  // else the model file's (PatchCore::load)
    const double change = core.set_precision(runtime.context.settings().precision);
    log_precision(core.precision(), change);
  }
  return core;
}

// The same through the Predictor (what stoke predict scores with): the same
// precision, the same bits; STOKE_MAX_IMAGE_PIXELS applies as for a classifier.
std::unique_ptr<stoke::Predictor> open_predictor(const stoke_cli::Args& args) {
  const auto runtime = stoke_cli::init_with_precision(args.get("precision"));
  stoke::PredictorOptions po;
  po.context = runtime.context;
  auto predictor = std::make_unique<stoke::Predictor>(args.required("model"), po);
  if (precision_asked(runtime)) {
    const stoke::SelfCheckResult& check = predictor->self_check();
    log_precision(check.precision, check.precision_max_error);
  }
  return predictor;
}

int predict(int argc, char** argv) {
  stoke_cli::Args args(argc, argv, {"model", "data", "precision", "heatmaps"}, {"json"});
  std::vector<fs::path> files(args.positional().begin(), args.positional().end());
  if (args.has("data")) {
    const auto found = stoke_cli::list_images("predict", args.get("data"));
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty()) throw UsageError("no images: give FILE... or --data DIR");
  const auto predictor = open_predictor(args);
  const fs::path heatmaps = args.get("heatmaps");
  if (!heatmaps.empty()) {
    stoke_cli::check_writable("--heatmaps", heatmaps.string(), true);
    std::error_code ec;
    fs::create_directories(heatmaps, ec);
    if (ec)
      throw stoke::IoError("--heatmaps: cannot create '" + heatmaps.string() +
                           "': " + ec.message());
  }
  std::set<fs::path> written;  // and the inputs: a heatmap never replaces one
  if (!heatmaps.empty())
    for (const auto& f : files) written.insert(fs::weakly_canonical(f));
  std::size_t failed = 0;
  for (const auto& f : files) {
    try {
      const auto r = predictor->score_file(f);
      const fs::path map =
          heatmaps.empty()
              ? fs::path()
              : write_heatmap(heatmaps, f, r, predictor->anomaly_info().threshold, written);
      print_result(args.has("json"), f, r, map);
    } catch (const stoke::Error& e) {
      ++failed;
      std::fprintf(stderr, "stoke predict: %s\n", e.what());
      if (args.has("json"))
        std::printf("{\"file\": %s, \"error\": %s}\n", stoke_cli::json_string(f.string()).c_str(),
                    stoke_cli::json_string(e.what()).c_str());
    }
  }
  return failed ? 1 : 0;
}

// The maps and input-grid masks of an evaluation (stoke eval --masks).
struct PixelSet {
  std::vector<float> maps;
  std::vector<std::uint8_t> masks;
  std::vector<stoke::anomaly::MapSize> sizes;
  std::size_t with_mask = 0;
  stoke::Decoder decoder;
  std::vector<std::uint8_t> bytes;

  // The mask of `file` (under `data`): masks/<rel dir>/<stem>_mask.png or
  // <stem>.png; a defect image must have one, a good one without is all good.
  void add(const stoke::anomaly::AnomalyResult& r, const fs::path& file, const fs::path& data,
           const fs::path& masks, bool good, const stoke::PreprocessOptions& p) {
    const fs::path rel = file.lexically_relative(data).parent_path();
    const std::string stem = file.stem().string();
    const fs::path tried[] = {masks / rel / (stem + "_mask.png"), masks / rel / (stem + ".png")};
    std::error_code ec;
    const fs::path* found = nullptr;
    for (const auto& t : tried)
      if (!found && fs::is_regular_file(t, ec)) found = &t;
    maps.insert(maps.end(), r.map.begin(), r.map.end());
    sizes.push_back({r.height, r.width});
    if (!found) {
      if (!good) {
        throw stoke::IoError("--masks: no mask for the defect image '" + file.string() +
                             "' (looked for '" + tried[0].string() + "' and '" + tried[1].string() +
                             "')");
      }
      masks_zero(r.map.size());
      return;
    }
    stoke::read_file(file, bytes);
    const stoke::ImageInfo image = decoder.output_info(bytes, file.string(), {});
    stoke::Image mask;
    stoke::DecodeOptions o;
    o.channels = 1;
    decoder.decode_file(*found, o, mask);
    // A tiled model maps the image at its own size: the mask as it is.
    stoke::PreprocessOptions grid = p;
    if (r.width != p.width || r.height != p.height) {
      grid.width = grid.resize_width = r.width;
      grid.height = grid.resize_height = r.height;
    }
    const auto m = stoke::anomaly::mask_to_input(mask.view(), image.width, image.height, grid,
                                                 found->string());
    this->masks.insert(this->masks.end(), m.begin(), m.end());
    ++with_mask;
  }
  void masks_zero(std::size_t n) { masks.insert(masks.end(), n, 0); }
};

int eval(int argc, char** argv) {
  stoke_cli::Args args(argc, argv, {"model", "data", "good", "precision", "masks", "report"},
                       {"json"});
  const fs::path data = args.required("data");
  const std::string good_class = args.required("good");
  if (args.has("report")) stoke_cli::check_writable("--report", args.get("report"), true);
  stoke_cli::AnomalyReport report;
  report.model = args.required("model");
  std::vector<float> good, defect;
  std::vector<fs::path> classes;
  std::error_code ec;
  if (!fs::is_directory(data, ec)) throw stoke::IoError("'" + data.string() + "' is not a folder");
  for (fs::directory_iterator it(data, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) classes.push_back(it->path());
  if (ec) throw stoke::IoError("cannot list '" + data.string() + "': " + ec.message());
  std::sort(classes.begin(), classes.end());
  auto core = load_model(args);
  fs::path masks = args.get("masks");
  if (masks.empty() && fs::is_directory(data.parent_path() / "ground_truth", ec))
    masks = data.parent_path() / "ground_truth";  // MVTec AD: test/ beside ground_truth/
  if (!masks.empty() && !fs::is_directory(masks, ec))
    throw stoke::IoError("--masks: '" + masks.string() + "' is not a folder");
  PixelSet pixels;
  bool found_good = false;
  for (const auto& dir : classes) {
    const bool is_good = dir.filename() == good_class;
    found_good |= is_good;
    for (const auto& f : stoke_cli::list_images("eval", dir)) {
      const auto r = core.score_file(f);
      (is_good ? good : defect).push_back(r.score);
      report.parts.push_back({f, r.score, is_good});
      if (!masks.empty()) pixels.add(r, f, data, masks, is_good, core.preprocess());
    }
  }
  if (!found_good)
    throw UsageError("--good " + good_class + ": no such subfolder of " + data.string());
  std::string pixel_json = ", \"pixel_auroc\": null, \"aupro\": null";
  if (!masks.empty()) {
    const auto m = stoke::anomaly::pixel_metrics(pixels.maps, pixels.masks, pixels.sizes);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  ", \"pixel_auroc\": %.6f, \"aupro\": %.6f, \"masks\": %zu, \"defect_regions\": "
                  "%llu",
                  m.auroc, m.aupro, pixels.with_mask, static_cast<unsigned long long>(m.regions));
    pixel_json = buf;
    if (!args.has("json")) {
      std::printf(
          "pixels: AUROC %.4f, AUPRO (FPR <= 0.3) %.4f over %llu defect regions (%zu masks "
          "from %s)\n",
          m.auroc, m.aupro, static_cast<unsigned long long>(m.regions), pixels.with_mask,
          masks.c_str());
    }
  }
  const float t = core.threshold();
  std::size_t rejected = 0, escaped = 0;
  for (float s : good) rejected += s > t;
  for (float s : defect) escaped += !(s > t);
  const double frr =
      good.empty() ? 0.0 : static_cast<double>(rejected) / static_cast<double>(good.size());
  const double esc =
      defect.empty() ? 0.0 : static_cast<double>(escaped) / static_cast<double>(defect.size());
  const double auroc =
      good.empty() || defect.empty() ? NAN : stoke::anomaly::image_auroc(good, defect);
  char head[320];
  std::snprintf(head, sizeof head,
                "{\"good\": %zu, \"defect\": %zu, \"image_auroc\": %s, \"threshold\": %.9g, "
                "\"false_reject_rate\": %.6f, \"escape_rate\": %.6f",
                good.size(), defect.size(),
                std::isfinite(auroc) ? std::to_string(auroc).c_str() : "null", t, frr, esc);
  report.json = head + pixel_json + "}";
  if (args.has("report")) {
    report.threshold = t;
    stoke_cli::write_anomaly_report(args.get("report"), report, core);
  }
  if (args.has("json")) {
    std::printf("%s\n", report.json.c_str());
  } else {
    std::printf(
        "%zu good, %zu defect: image AUROC %.4f; threshold %.6g: false-reject rate %.4f, "
        "escape rate %.4f\n",
        good.size(), defect.size(), auroc, t, frr, esc);
  }
  return 0;
}

}  // namespace

namespace stoke_cli {

bool wants_anomaly_task(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--task=anomaly" ||
        (a == "--task" && i + 1 < argc && std::string(argv[i + 1]) == "anomaly"))
      return true;
  }
  return false;
}

bool is_anomaly_model(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string path;
    if (a == "--model" && i + 1 < argc) path = argv[i + 1];
    if (a.rfind("--model=", 0) == 0) path = a.substr(8);
    if (path.empty()) continue;
    try {
      return stoke::nn::read_checkpoint_info(path).metadata.count("anomaly.method") != 0;
    } catch (const stoke::Error&) {
      return false;  // the classifier path reports the file's problem
    }
  }
  return false;
}

int anomaly_train(int argc, char** argv) {
  return run_guarded("train", kTrainUsage, train, argc, argv);
}
int anomaly_predict(int argc, char** argv) {
  return run_guarded("predict", kPredictUsage, predict, argc, argv);
}
int anomaly_eval(int argc, char** argv) {
  return run_guarded("eval", kEvalUsage, eval, argc, argv);
}

}  // namespace stoke_cli
