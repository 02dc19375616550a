// stoke eval and stoke predict on a segmentation model file (stoke train
// --task segment; stoke/segment.hpp): both run the Predictor's segment_file.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "args.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "segment_report.hpp"
#include "stoke/stoke.hpp"

namespace {

namespace fs = std::filesystem;
using stoke_cli::UsageError;

constexpr const char* kEvalUsage =
    "usage: stoke eval --model SEGMENTATION_MODEL --data DIR [--json] [--report DIR]\n"
    "  DIR: images/, masks/ and classes.txt as for stoke train --task segment (the model's\n"
    "  classes). Every image is segmented as stoke predict does and compared with its mask at\n"
    "  the image's own size (mask value 255 ignored): mean_iou, per_class_iou, pixel_accuracy,\n"
    "  the pixel confusion_matrix (rows: truth, columns: predicted) and area_error (per image,\n"
    "  |predicted - true| share of non-background pixels; the mean and each image).\n"
    "  --report DIR writes DIR/report.json and DIR/report.html (the figures, the confusion\n"
    "  matrix, and the worst images with their true and predicted masks over them).\n";

constexpr const char* kPredictUsage =
    "usage: stoke predict --model SEGMENTATION_MODEL (FILE... | --data DIR) [--masks OUTDIR]\n"
    "                     [--tile-stride S] [--json]\n"
    "  Per image: pixels per class and the connected regions (8-connected) of every class but\n"
    "  the background, with bounding boxes [x, y, w, h] at the image's size. --masks OUTDIR "
    "writes\n"
    "  each label map as OUTDIR/<name>.png (8-bit gray, pixel value = class index, the image's\n"
    "  size; <name> relative to DIR, or DIR/images when it has one). --json: one object per "
    "line.\n"
    "  --tile-stride S: cut each image at its own resolution into tiles of the model's input\n"
    "  size, S pixels apart, and average the overlapping tiles' logits (for models trained\n"
    "  on crops at the camera's scale).\n";

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return std::isfinite(v) ? buf : "null";
}

int eval(int argc, char** argv) {
  stoke_cli::Args args(argc, argv, {"model", "data", "report"}, {"json"});
  const std::string model = args.required("model");
  const std::string data = args.required("data");
  if (args.has("report")) stoke_cli::check_writable("--report", args.get("report"), true);
  stoke::Runtime runtime = stoke::init();
  stoke::Predictor predictor(model);
  const auto dataset = stoke::SegmentationDataset::from_folder(data);
  if (dataset.class_names() != predictor.info().class_names)
    throw UsageError("--data: its classes.txt names other classes than the model's");
  stoke_cli::Progress progress("eval", dataset.size(), "img");
  const auto e = stoke::evaluate_segmentation(
      predictor, dataset, [&](std::size_t done, std::size_t) { progress.update(done); });
  progress.finish();
  if (args.has("report"))
    stoke_cli::write_segmentation_report(args.get("report"), model, e, dataset, predictor);
  if (args.has("json")) {
    std::fputs(e.to_json().c_str(), stdout);
    return 0;
  }
  std::printf("%llu images, %llu pixels: mean IoU %s, pixel accuracy %s, area error %s\n",
              static_cast<unsigned long long>(e.images), static_cast<unsigned long long>(e.pixels),
              number(e.mean_iou).c_str(), number(e.pixel_accuracy).c_str(),
              number(e.area_error).c_str());
  for (std::size_t c = 0; c < e.class_names.size(); ++c)
    std::printf("  %-16s IoU %s\n", e.class_names[c].c_str(), number(e.per_class_iou[c]).c_str());
  return 0;
}

// OUTDIR/<rel>.png for an image at `rel` below the listing's root.
fs::path mask_path(const fs::path& outdir, const fs::path& file, const fs::path& root) {
  fs::path rel = root.empty() ? file.filename() : file.lexically_relative(root);
  rel.replace_extension(".png");
  return outdir / rel;
}

int predict(int argc, char** argv) {
  stoke_cli::Args args(argc, argv, {"model", "data", "masks", "tile-stride"}, {"json"});
  const std::string model = args.required("model");
  stoke::PredictorOptions options;
  if (args.has("tile-stride"))
    options.segment_tile_stride = args.get_int("tile-stride", 0, 1, 1 << 20);
  std::vector<fs::path> files;
  fs::path root;
  for (const auto& p : args.positional()) files.emplace_back(p);
  if (args.has("data")) {
    root = args.get("data");
    if (fs::is_directory(root / "images")) root /= "images";  // a segmentation dataset
    const auto found = stoke_cli::list_images("predict", root);
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty()) throw UsageError("no images: give FILE... or --data DIR");
  const bool json = args.has("json");
  const std::string masks = args.get("masks");
  if (args.has("masks")) stoke_cli::check_writable("--masks", masks, true);
  stoke::Runtime runtime = stoke::init();
  stoke::Predictor predictor(model, options);
  const auto& names = predictor.info().class_names;
  std::set<fs::path> taken;  // the inputs and the masks written: a mask replaces neither
  if (!masks.empty())
    for (const auto& f : files) taken.insert(fs::weakly_canonical(f));
  for (const auto& f : files) {
    const stoke::SegmentationResult r = predictor.segment_file(f);
    std::string written;
    if (!masks.empty()) {
      const fs::path out = stoke_cli::unique_output(
          mask_path(masks, f,
                    f.string().rfind(root.string(), 0) == 0 && !root.empty() ? root : fs::path()),
          taken);
      fs::create_directories(out.parent_path());
      const stoke::ImageView view{r.labels.data(), r.width, r.height, 1,
                                  static_cast<std::size_t>(r.width)};
      stoke::write_file(out, stoke::encode_png(view));
      written = out.string();
    }
    if (json) {
      std::string line = "{\"file\": " + stoke_cli::json_string(f.string()) +
                         ", \"width\": " + std::to_string(r.width) +
                         ", \"height\": " + std::to_string(r.height);
      if (!written.empty()) line += ", \"mask\": " + stoke_cli::json_string(written);
      line += ", \"areas\": {";
      for (std::size_t c = 0; c < names.size(); ++c)
        line +=
            (c ? ", " : "") + stoke_cli::json_string(names[c]) + ": " + std::to_string(r.areas[c]);
      line += "}, \"regions\": [";
      for (std::size_t i = 0; i < r.regions.size(); ++i) {
        const auto& g = r.regions[i];
        line += std::string(i ? ", " : "") + "{\"class\": " + stoke_cli::json_string(g.class_name) +
                ", \"area\": " + std::to_string(g.area) + ", \"bbox\": [" + std::to_string(g.x) +
                ", " + std::to_string(g.y) + ", " + std::to_string(g.w) + ", " +
                std::to_string(g.h) + "]}";
      }
      std::printf("%s]}\n", line.c_str());
    } else {
      std::string areas;
      for (std::size_t c = 1; c < names.size(); ++c)
        areas += " " + names[c] + " " + std::to_string(r.areas[c]) + " px";
      std::printf("%s: %zu regions;%s%s%s\n", f.string().c_str(), r.regions.size(), areas.c_str(),
                  written.empty() ? "" : " -> ", written.c_str());
    }
  }
  return 0;
}

}  // namespace

namespace stoke_cli {

bool is_segmentation_model(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string path;
    if (a == "--model" && i + 1 < argc) path = argv[i + 1];
    if (a.rfind("--model=", 0) == 0) path = a.substr(8);
    if (path.empty()) continue;
    try {
      return stoke::is_segmentation_metadata(stoke::nn::read_checkpoint_info(path).metadata);
    } catch (const stoke::Error&) {
      return false;  // the classifier path reports the file's problem
    }
  }
  return false;
}

int segment_predict(int argc, char** argv) {
  return run_guarded("predict", kPredictUsage, predict, argc, argv);
}
int segment_eval(int argc, char** argv) {
  return run_guarded("eval", kEvalUsage, eval, argc, argv);
}

}  // namespace stoke_cli
