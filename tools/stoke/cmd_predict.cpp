// stoke predict: classify image files with a model file, using the model's
// own preprocessing; a table, CSV or JSON lines.
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "stoke/stoke.hpp"

namespace {

constexpr const char* kUsage =
    "usage: stoke predict --model MODEL (FILE... | --data DIR) [--json | --csv] [--no-self-check]\n"
    "                     [--precision fp32|bf16|auto]\n"
    "  prints file, class and confidence per image (--json: one JSON object per line with every\n"
    "  class probability). The model's self-check runs first and must pass unless "
    "--no-self-check.\n"
    "  An image that cannot be read is reported (stderr, and an error row) and the others are\n"
    "  classified; the exit status is then 1. --data DIR takes every JPEG, PNG, BMP and TIFF "
    "under\n"
    "  DIR (subfolders too); other entries are listed on stderr as skipped.\n"
    "  --precision: what the convolutions compute in (STOKE_PRECISION; default fp32; bf16 where\n"
    "  oneDNN has bf16 kernels, auto = bf16 where native): see docs/precision.md.\n";

// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv(const std::string& field) {
  if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void print(const std::string& mode, const std::filesystem::path& file, const stoke::Prediction& p,
           const stoke::ModelInfo& info) {
  if (mode == "json") {
    // %.9g: nine significant digits give every float back exactly, so a host
    // of the C ABI can check that it computes the same probabilities bit for bit.
    std::printf("{\"file\": %s, \"class\": %s, \"confidence\": %.9g, \"probabilities\": {",
                stoke_cli::json_string(file.string()).c_str(),
                stoke_cli::json_string(p.class_name).c_str(), p.confidence);
    for (std::size_t c = 0; c < p.probabilities.size(); ++c) {
      std::printf("%s%s: %.9g", c ? ", " : "", stoke_cli::json_string(info.class_names[c]).c_str(),
                  p.probabilities[c]);
    }
    std::printf("}}\n");
  } else if (mode == "csv") {
    std::printf("%s,%s,%.6f,\n", csv(file.string()).c_str(), csv(p.class_name).c_str(),
                p.confidence);
  } else {
    std::printf("%-48s %-12s %6.2f %%\n", file.c_str(), p.class_name.c_str(), 100.0 * p.confidence);
  }
}

void print_error(const std::string& mode, const std::filesystem::path& file,
                 const std::string& what) {
  std::fprintf(stderr, "stoke predict: %s\n", what.c_str());
  if (mode == "json") {
    std::printf("{\"file\": %s, \"error\": %s}\n", stoke_cli::json_string(file.string()).c_str(),
                stoke_cli::json_string(what).c_str());
  } else if (mode == "csv") {
    std::printf("%s,,,%s\n", csv(file.string()).c_str(), csv(what).c_str());
  } else {
    std::printf("%-48s error (see stderr)\n", file.c_str());
  }
}

int run(int argc, char** argv) {
  stoke_cli::Args args(argc, argv, {"model", "data", "precision"},
                       {"json", "csv", "no-self-check"});
  if (args.has("json") && args.has("csv"))
    throw stoke_cli::UsageError("--json and --csv exclude each other");
  std::vector<std::filesystem::path> files;
  for (const auto& p : args.positional()) files.emplace_back(p);
  if (args.has("data")) {
    const auto found = stoke_cli::list_images("predict", args.get("data"));
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty()) throw stoke_cli::UsageError("no images: give FILE... or --data DIR");
  const auto runtime = stoke_cli::init_with_precision(args.get("precision"));
  stoke::PredictorOptions po;
  po.context = runtime.context;  // STOKE_MAX_IMAGE_PIXELS
  po.require_self_check = !args.has("no-self-check");
  stoke::Predictor predictor(args.required("model"), po);
  std::fprintf(stderr, "%s\n", predictor.self_check().message.c_str());
  const std::string mode = args.has("json") ? "json" : args.has("csv") ? "csv" : "table";
  if (mode == "csv") std::printf("file,class,confidence,error\n");
  stoke_cli::Progress progress("predict", files.size(), "images");
  std::size_t failed = 0;
  constexpr std::size_t kChunk = 64;
  for (std::size_t first = 0; first < files.size(); first += kChunk) {
    const auto chunk = std::span(files).subspan(first, std::min(kChunk, files.size() - first));
    try {
      const auto preds = predictor.predict_files(chunk);
      for (std::size_t i = 0; i < chunk.size(); ++i)
        print(mode, chunk[i], preds[i], predictor.info());
    } catch (const stoke::Error&) {
      // One bad file: classify the chunk one by one and report the bad ones.
      for (const auto& file : chunk) {
        try {
          print(mode, file, predictor.predict_file(file), predictor.info());
        } catch (const stoke::Error& e) {
          ++failed;
          print_error(mode, file, e.what());
        }
      }
    }
    if (files.size() > kChunk) progress.update(first + chunk.size());
  }
  if (failed)
    std::fprintf(stderr, "stoke predict: %zu of %zu images could not be classified\n", failed,
                 files.size());
  return failed ? 1 : 0;
}

}  // namespace

int cmd_predict(int argc, char** argv) {
  if (stoke_cli::is_anomaly_model(argc, argv)) return stoke_cli::anomaly_predict(argc, argv);
  if (stoke_cli::is_segmentation_model(argc, argv)) return stoke_cli::segment_predict(argc, argv);
  return stoke_cli::run_guarded("predict", kUsage, run, argc, argv);
}
