// stoke eval: a model file on a labelled folder -> metrics, report.json and
// one self-contained report.html.
#include <cmath>
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "stoke/stoke.hpp"

namespace {

constexpr const char* kUsage =
    "usage: stoke eval --model MODEL --data DIR [--good CLASS [--escape-rate R]] [--report DIR] "
    "[--json]\n"
    "                  [--skip-corrupt] [--precision fp32|bf16|auto]\n"
    "  DIR holds one subfolder per class (the model's classes, or some of them; images in\n"
    "  subfolders of a class folder belong to it). With --good, the defect-vs-good ROC,\n"
    "  AUC, and the threshold passing at most R of the defects (default 0.01) with its "
    "false-reject\n"
    "  rate. --report DIR writes DIR/report.json and DIR/report.html. --skip-corrupt leaves\n"
    "  unreadable images out (listed on stderr and under \"skipped\"; at most max(10, 1 %))\n"
    "  instead of stopping at the first. --precision: as stoke predict (docs/precision.md).\n";

void summary(const stoke::Evaluation& e) {
  std::printf("%llu images, accuracy %.4f, macro F1 %.4f\n",
              static_cast<unsigned long long>(e.samples), e.accuracy, e.macro_f1);
  if (!e.skipped.empty()) std::printf("%zu files skipped (see stderr)\n", e.skipped.size());
  std::printf("%-14s %8s %9s %7s %7s\n", "class", "support", "precision", "recall", "F1");
  for (std::size_t c = 0; c < e.class_names.size(); ++c) {
    const auto& m = e.per_class[c];
    std::printf("%-14s %8llu %9.4f %7.4f %7.4f\n", e.class_names[c].c_str(),
                static_cast<unsigned long long>(m.support), m.precision, m.recall, m.f1);
  }
  if (e.good_label >= 0) {
    std::printf(
        "defect vs %s: AUC %.4f; threshold %s meets the target escape rate %.4f: escape rate %.4f, "
        "false-reject rate %.4f\n",
        e.class_names[static_cast<std::size_t>(e.good_label)].c_str(), e.auc,
        std::isfinite(e.threshold) ? std::to_string(e.threshold).c_str() : "none",
        e.target_escape_rate, e.escape_rate, e.false_reject_rate);
  }
  std::printf("%zu misclassified\n", e.misclassified.size());
}

int run(int argc, char** argv) {
  stoke_cli::Args args(argc, argv, {"model", "data", "precision", "good", "escape-rate", "report"},
                       {"json", "skip-corrupt"});
  const std::string model = args.required("model"), data = args.required("data");
  stoke::EvaluationOptions o;
  o.good_class = args.get("good");
  o.escape_rate = args.get_double("escape-rate", 0.01, 0, 1);
  if (args.has("escape-rate") && o.good_class.empty())
    throw stoke_cli::UsageError("--escape-rate needs --good");
  if (args.has("report")) stoke_cli::check_writable("--report", args.get("report"), true);
  const auto runtime = stoke_cli::init_with_precision(args.get("precision"));
  stoke::PredictorOptions po;
  po.context = runtime.context;  // STOKE_MAX_IMAGE_PIXELS
  stoke::Predictor predictor(model, po);
  std::fprintf(stderr, "%s\n", predictor.self_check().message.c_str());
  stoke_cli::FolderRequest request;
  request.skip_corrupt = args.has("skip-corrupt");
  o.skip_corrupt = request.skip_corrupt;
  request.context = runtime.context;
  request.classes = predictor.info().class_names;  // the model's, or some of them
  const auto dataset = stoke_cli::load_folder("eval", data, request);
  stoke_cli::Progress progress("eval", dataset.size(), "images");
  stoke::Evaluation e;
  try {
    e = stoke::evaluate(predictor, dataset, o,
                        [&](std::size_t done, std::size_t) { progress.update(done); });
  } catch (const stoke::Error&) {
    stoke_cli::rethrow_with_skip_hint(*o.skip_corrupt);
  }
  // The dataset's own skipped entries were printed as it loaded.
  stoke_cli::print_skipped(
      "eval", std::vector<stoke::CorruptSample>(
                  e.skipped.begin() + static_cast<std::ptrdiff_t>(dataset.report().skipped.size()),
                  e.skipped.end()));
  if (args.has("report")) {
    stoke::write_evaluation_report(args.get("report"), e, predictor.info());
    std::fprintf(stderr, "report: %s/report.html\n", args.get("report").c_str());
  }
  if (args.has("json")) {
    std::fputs(e.to_json().c_str(), stdout);
  } else {
    summary(e);
  }
  return 0;
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  if (stoke_cli::is_anomaly_model(argc, argv)) return stoke_cli::anomaly_eval(argc, argv);
  if (stoke_cli::is_segmentation_model(argc, argv)) return stoke_cli::segment_eval(argc, argv);
  return stoke_cli::run_guarded("eval", kUsage, run, argc, argv);
}
