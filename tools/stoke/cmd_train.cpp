// stoke train: a folder of images (one subfolder per class) -> a model file.
// Ctrl-C stops after the current step and writes the stop checkpoint.
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "args.hpp"
#include "commands.hpp"
#include "duplicates.hpp"
#include "inputs.hpp"
#include "launch.hpp"
#include "stoke/distributed.hpp"
#include "stoke/interchange.hpp"
#include "stoke/stoke.hpp"

namespace {

constexpr const char* kUsage =
    R"(usage: stoke train --data DIR --out MODEL [--val DIR | --split 80,20] [--size N]
                   [--channels 1|3] [--epochs N] [--batch N|auto] [--accumulate N]
                   [--lr X (0.002)] [--optimizer sgd|adam(default)|adamw] [--weight-decay X]
                   [--decay-norm-and-bias 0|1]
                   [--normalize minmax|imagenet|mean=a:b:c,std=a:b:c]
                   [--augment hflip,vflip,crop,brightness=X,contrast=X] [--arch resnet|plain]
                   [--seed N] [--report DIR] [--json] [--log FILE.json|FILE.csv]
                   [--resume CHECKPOINT [--force]] [--class-weights balanced|w0,w1,...]
                   [--balanced-sampler] [--skip-corrupt] [--no-reference-images]
                   [--nproc N [--bucket-kb K]] [--init FILE --arch resnet18|resnet34|resnet50 [--width-mult M]
                   [--freeze K]] [--precision fp32|bf16|fp16|auto] [--loss-scale off|dynamic|auto|S]
       stoke train --task anomaly ... (stoke train --task anomaly --help)
  Writes the best model (by validation accuracy) to MODEL, or the final one without validation;
  Ctrl-C writes MODEL.stop and exits. --accumulate N accumulates the gradients of N batches
  per update (an effective batch of N x --batch). --report DIR evaluates MODEL on the
  validation set. --weight-decay: SGD 5e-4, Adam 0, AdamW 0.01 by default; AdamW leaves biases
  and batch-norm parameters undecayed unless --decay-norm-and-bias 1 (SGD decays them unless 0).
  --log writes the per-epoch train log (loss, accuracy, images/s, each profiler stage's time).
  --resume continues a MODEL.stop checkpoint exactly (or a best MODEL, with a fresh optimizer),
  on the dataset it trained on (another is refused unless --force; a finished checkpoint is
  refused: raise --epochs).
  DIR/<class>/ may hold subfolders (their images belong to the class); every entry not used is
  listed on stderr with the reason. --skip-corrupt leaves unreadable images out (listed) up to
  max(10, 1 %) of them instead of stopping at the first. --out, --log and --report are checked
  for writing before the first epoch; one run at a time writes MODEL (MODEL.lock). SIGINT and
  SIGTERM write MODEL.stop and exit 130. MODEL embeds up to four training or validation images
  (their paths, pixels and files up to 256 KiB, for the predictor's self-check) and the --data
  path; --no-reference-images leaves them out (no self-check) for models that leave the building.
  --nproc N trains data-parallel
  with N processes on this machine (CPU ranks sharing the cores, or one per device of a
  STOKE_GPU_DEVICE list; a list without --nproc starts one rank per listed device; see
  docs/distributed.md); CPU ranks average gradients in buckets of K KiB (25600) while backward
  runs, 0 = one allreduce after it. --init starts from pretrained weights (a .safetensors with torchvision
  names or an .onnx export, docs/interchange.md) with a new head for the folder's classes;
  --freeze K keeps the stem and the first K stages fixed. --precision bf16 trains in mixed
  precision: convolutions on bf16 inputs with fp32 accumulation, fp32 weights, optimizer state,
  batch norm and loss; MODEL is an ordinary fp32 model. Only on CPUs with AVX512-BF16 or AMX
  (elsewhere refused, naming what is missing: emulated bf16 is slower than fp32) and on CUDA
  GPUs of compute capability 8.0 and later; fp16 (with dynamic loss scaling) only on CUDA GPUs
  of compute capability 7.0 and later, refused on CPUs. fp32 is the default and
  auto trains in fp32: whether bf16 keeps your accuracy is your call (docs/precision.md).
  --loss-scale: dynamic loss scaling as PyTorch's GradScaler (from 65536, halved on NaN or
  infinite gradients, whose step is skipped, doubled after 2000 clean steps), a fixed scale S,
  or off; auto (default) is dynamic for fp16 training, off in fp32 (docs/precision.md).
)";

stoke::Trainer* g_trainer = nullptr;  // for the signal handler only
extern "C" void on_interrupt(int) {
  if (g_trainer) g_trainer->request_stop();  // an atomic store: async-signal-safe
}

// One finite number of a list option (NaN and infinities are no setting).
float finite_number(const std::string& item, const std::string& what) {
  char* end = nullptr;
  const float v = std::strtof(item.c_str(), &end);
  if (item.empty() || *end || !std::isfinite(v))
    throw stoke_cli::UsageError(what + ": '" + item + "' is not a finite number");
  return v;
}

std::vector<float> floats(const std::string& text, const std::string& what) {
  std::vector<float> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ':');) out.push_back(finite_number(item, what));
  if (out.size() != 1 && out.size() != 3)
    throw stoke_cli::UsageError(what + ": one value or three (a:b:c), got '" + text + "'");
  return out;
}

}  // namespace

stoke::Normalization stoke_cli::parse_normalization(const std::string& text) {
  if (text == "minmax") return stoke::Normalization::min_max(0.f, 1.f);
  if (text == "imagenet") {
    return stoke::Normalization::mean_std(std::vector<float>{0.485f, 0.456f, 0.406f},
                                          std::vector<float>{0.229f, 0.224f, 0.225f});
  }
  // mean=a:b:c,std=a:b:c (or one value each)
  const auto comma = text.find(",std=");
  if (text.rfind("mean=", 0) != 0 || comma == std::string::npos) {
    throw stoke_cli::UsageError("--normalize is minmax, imagenet or mean=a:b:c,std=a:b:c");
  }
  auto mean = floats(text.substr(5, comma - 5), "--normalize mean");
  auto sd = floats(text.substr(comma + 5), "--normalize std");
  if (mean.size() == 1) mean.assign(3, mean[0]);
  if (sd.size() == 1) sd.assign(3, sd[0]);
  for (float v : sd) {
    if (!(v > 0)) throw stoke_cli::UsageError("--normalize std: every value must be above 0");
  }
  return stoke::Normalization::mean_std(mean, sd);
}

namespace {

void augment(const std::string& text, stoke::LoaderOptions& l) {
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    const float value =
        eq == std::string::npos ? 0.1f : finite_number(item.substr(eq + 1), "--augment " + name);
    if ((name == "brightness" || name == "contrast") && !(value >= 0 && value <= 1))
      throw stoke_cli::UsageError("--augment " + name + " must be in [0, 1], got " + item);
    if (eq != std::string::npos && name != "brightness" && name != "contrast")
      throw stoke_cli::UsageError("--augment " + name + " takes no value");
    if (name == "hflip") {
      l.augment.hflip_probability = 0.5f;
    } else if (name == "vflip") {
      l.augment.vflip_probability = 0.5f;
    } else if (name ==
               "crop") {  // random crop of a 1/8 larger resize (centre crop when validating)
      l.augment.random_crop = true;
      l.preprocess.resize_width = l.preprocess.width + std::max(1, l.preprocess.width / 8);
      l.preprocess.resize_height = l.preprocess.height + std::max(1, l.preprocess.height / 8);
    } else if (name == "brightness") {
      l.augment.brightness = value;
    } else if (name == "contrast") {
      l.augment.contrast = value;
    } else if (!name.empty() && name != "none") {
      throw stoke_cli::UsageError("--augment: unknown '" + name +
                                  "' (hflip, vflip, crop, brightness=X, contrast=X)");
    }
  }
}

stoke::nn::ModelSpec model_spec(const stoke_cli::Args& args, int channels, int size, int classes) {
  stoke::nn::ModelSpec spec;
  spec.in_channels = channels;
  spec.height = spec.width = size;
  spec.classes = classes;
  const std::string arch = args.get("arch", "resnet");
  if (arch == "plain") {
    spec.architecture = stoke::nn::Architecture::kPlainCnn;
    spec.widths = {16, 32, 64};
  } else if (arch == "resnet") {
    spec.stem_width = 16;
    spec.widths = {16, 32, 64};
    spec.blocks_per_stage = 1;
  } else if (arch == "resnet18" || arch == "resnet34" || arch == "resnet50" ||
             arch == "wide_resnet50_2") {
    spec.architecture =
        stoke::nn::architecture_from_name(arch);  // torchvision's topology and names
    spec.width_multiplier = static_cast<float>(args.get_double("width-mult", 1.0, 0.01, 16));
  } else {
    throw stoke_cli::UsageError(
        "--arch is resnet, plain, resnet18, resnet34, resnet50 or wide_resnet50_2");
  }
  return spec;
}

stoke::TrainerOptions trainer_options(const stoke_cli::Args& args, std::uint64_t seed) {
  stoke::TrainerOptions o;
  o.epochs = args.get_int("epochs", 10, 1, 1000000000);
  o.batch_size = args.get("batch", "32") == "auto" ? 0 : args.get_int("batch", 32, 1, 1 << 20);
  o.seed = seed;
  o.schedule.kind = stoke::nn::ScheduleKind::kCosine;
  // Adam at 2e-3 with a cosine schedule: a default that learns the synthetic
  // inspection set in a few epochs (SGD at 0.05 stayed at the majority class).
  const double lr = args.get_double("lr", 0.002);
  // !(lr > 0) also refuses NaN, which every comparison lets through.
  if (!(lr > 0.0) || !std::isfinite(lr) || lr > 10.0)
    throw stoke_cli::UsageError("--lr must be a number in (0, 10], got " + args.get("lr"));
  o.schedule.base_lr = static_cast<float>(lr);
  const std::string opt = args.get("optimizer", "adam");
  if (opt != "sgd" && opt != "adam" && opt != "adamw")
    throw stoke_cli::UsageError("--optimizer is sgd, adam or adamw");
  o.optimizer = opt == "sgd"    ? stoke::OptimizerKind::kSgd
                : opt == "adam" ? stoke::OptimizerKind::kAdam
                                : stoke::OptimizerKind::kAdamW;
  o.batch_multiplier = args.get_int("accumulate", 1, 1, 1 << 16);
  if (args.has("weight-decay")) {  // the optimizer's own default otherwise
    const auto wd = static_cast<float>(args.get_double("weight-decay", 0.0, 0.0, 1.0));
    o.sgd.weight_decay = wd;
    o.adam.weight_decay = wd;
  }
  if (args.has("decay-norm-and-bias")) {  // unset: excluded for AdamW, decayed for SGD
    const bool decay_all = args.get_int("decay-norm-and-bias", 0, 0, 1) == 1;
    o.sgd.exclude_norm_and_bias_from_decay = !decay_all;
    o.adam.exclude_norm_and_bias_from_decay = !decay_all;
  }
  o.log_every_steps = 0;
  o.stop_checkpoint = args.get("out") + ".stop";
  o.resume = args.get("resume", "");
  o.freeze_stages = args.get_int("freeze", 0);
  o.gradient_bucket_bytes = static_cast<std::size_t>(args.get_int(
                                "bucket-kb", static_cast<int>(o.gradient_bucket_bytes >> 10)))
                            << 10;
  const std::string precision = args.get("precision", "fp32");
  o.precision = precision == "bf16"   ? stoke::Precision::kBf16
                : precision == "fp16" ? stoke::Precision::kFp16
                                      : stoke::Precision::kFp32;
  if (args.has("loss-scale")) {
    try {
      o.loss_scale = stoke::parse_loss_scale(args.get("loss-scale"), o.loss_scale, "--loss-scale");
    } catch (const stoke::InvalidArgument& e) {
      throw stoke_cli::UsageError(e.what());
    }
  }
  o.balanced_sampler = args.has("balanced-sampler");
  o.embed_training_images = !args.has("no-reference-images");
  const std::string weights = args.get("class-weights", "");
  if (weights == "balanced") {
    o.balanced_class_weights = true;
  } else if (!weights.empty()) {
    std::stringstream ss(weights);
    for (std::string item; std::getline(ss, item, ',');) {
      char* end = nullptr;
      o.class_weights.push_back(std::strtof(item.c_str(), &end));
      if (item.empty() || *end)
        throw stoke_cli::UsageError("--class-weights: '" + item + "' is not a number");
    }
  }
  return o;
}

struct Sets {
  stoke::Dataset train, val;
};

// --resume continues a run on the dataset it trained on: the checkpoint
// holds that dataset's fingerprint (its files, sizes, modification times and
// labels); another one is refused unless --force.
void check_resume_dataset(const stoke_cli::Args& args, const stoke::Dataset& train) {
  if (!args.has("resume")) return;
  const auto metadata = stoke::nn::read_checkpoint_info(args.get("resume")).metadata;
  const auto it = metadata.find("model.provenance.dataset_fingerprint");
  if (it == metadata.end() || it->second == std::to_string(train.fingerprint())) return;
  const std::string what = "--resume " + args.get("resume") +
                           " was trained on another dataset than --data " + args.get("data") +
                           " (other files, sizes, modification times or labels)";
  if (!args.has("force")) throw stoke_cli::UsageError(what + "; --force continues anyway");
  std::fprintf(stderr, "stoke train: warning: %s; continuing (--force)\n", what.c_str());
}

// --split train,val[,test]: percentages in [0, 100] that sum to 100.
std::vector<double> split_percents(const std::string& text) {
  std::vector<double> pct;
  std::stringstream ss(text);
  double sum = 0;
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end || !(v >= 0 && v <= 100))
      throw stoke_cli::UsageError("--split: '" + item + "' is not a percentage in [0, 100]");
    pct.push_back(v);
    sum += v;
  }
  if (pct.size() < 2 || pct.size() > 3 || std::abs(sum - 100) > 1e-6)
    throw stoke_cli::UsageError("--split is train,val[,test] percentages summing to 100, got " +
                                text);
  return pct;
}

// --data (and --val, whose classes must be some of the training classes:
// its labels index those) by the folder rule every command shares.
Sets datasets(const stoke_cli::Args& args, std::uint64_t seed, const stoke::Context& context) {
  stoke_cli::FolderRequest request;
  request.skip_corrupt = args.has("skip-corrupt");
  request.context = context;
  const auto data = stoke_cli::load_folder("train", args.required("data"), request);
  if (args.has("val")) {
    if (args.has("split")) throw stoke_cli::UsageError("--val and --split exclude each other");
    request.classes = data.class_names();
    return {data, stoke_cli::load_folder("train", args.get("val"), request)};
  }
  const auto split =
      stoke::stratified_split(data, split_percents(args.get("split", "80,20")), seed);
  if (split.train.empty()) {
    throw stoke_cli::UsageError("--split " + args.get("split", "80,20") + " leaves no training " +
                                "images of the " + std::to_string(data.size()));
  }
  return {data.subset(split.train), data.subset(split.val)};
}

void report(const stoke_cli::Args& args, const stoke::Dataset& val) {
  if (!args.has("report") || val.empty()) return;
  stoke::Predictor predictor(args.get("out"));
  const auto evaluation = stoke::evaluate(predictor, val);
  stoke::write_evaluation_report(args.get("report"), evaluation, predictor.info());
  std::fprintf(stderr, "report: %s/report.html (validation accuracy %.4f)\n",
               args.get("report").c_str(), evaluation.accuracy);
}

// SIGINT and SIGTERM (what timeout, systemd, docker stop, Kubernetes and
// SLURM send) stop the trainer after its current step with the stop
// checkpoint, while this guard lives.
struct StopOnSignal {
  explicit StopOnSignal(stoke::Trainer& trainer) {
    g_trainer = &trainer;
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
  }
  ~StopOnSignal() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    g_trainer = nullptr;
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
};

void print_result(const stoke_cli::Args& args, const stoke::FitResult& result, const Sets& sets,
                  bool stopped) {
  const std::string out = args.get("out");
  if (args.has("json")) {
    std::printf(
        "{\"model\": %s, \"stop_checkpoint\": %s, \"reason\": %s, \"epochs\": %zu, \"batch_size\": "
        "%d, "
        "\"best_val_accuracy\": %.6f, \"train_samples\": %zu, \"val_samples\": %zu, "
        "\"skipped_steps\": %llu, \"loss_scale\": %g, \"precision\": %s}\n",
        stoke_cli::json_string(out).c_str(),
        stoke_cli::json_string(stopped ? out + ".stop" : "").c_str(),
        stoke_cli::json_string(stoke::to_string(result.reason)).c_str(), result.log.epochs.size(),
        result.batch_size, result.best_val_accuracy, sets.train.size(), sets.val.size(),
        static_cast<unsigned long long>(result.skipped_steps), result.loss_scale,
        stoke_cli::json_string(stoke::to_string(result.precision)).c_str());
  } else {
    std::printf("%s: %s (best validation accuracy %.4f, trained in %s)\n",
                stopped ? "stopped; checkpoint" : "model", (stopped ? out + ".stop" : out).c_str(),
                result.best_val_accuracy, stoke::to_string(result.precision));
  }
}

// After fit() on rank 0: the log, the model (without validation the final
// one; with it the trainer wrote the best), the report, the result line.
int conclude(const stoke_cli::Args& args, const stoke::FitResult& result, const Sets& sets,
             const stoke::LoaderOptions& loader, const stoke::TrainerOptions& o,
             stoke::nn::Model& model, stoke_cli::Progress& progress) {
  const std::string out = args.get("out");
  const bool validate = !sets.val.empty();
  stoke_cli::print_skipped("train", result.corrupt_samples);
  if (args.has("log")) result.log.save(args.get("log"));
  if (result.reason == stoke::StopReason::kCorruptData)
    throw stoke::DecodeError(result.message + " (stop checkpoint " + out + ".stop)");
  if (!validate && result.reason == stoke::StopReason::kCompleted) {
    stoke::ModelInfo info = stoke::describe_training(sets.train, nullptr, loader, o);
    if (!result.log.epochs.empty() && args.has("resume")) {  // the resumed run's earlier epochs
      info.history =
          stoke::history_before(stoke::nn::read_checkpoint_info(args.get("resume")).metadata,
                                result.log.epochs.front().epoch);
    }
    for (const auto& r : result.log.epochs) stoke::record_epoch(info, r);
    stoke::save_model(out, model, info);
  }
  const bool stopped = result.reason == stoke::StopReason::kRequested ||
                       result.reason == stoke::StopReason::kOutOfMemory;
  progress.finish(std::string("stopped: ") + stoke::to_string(result.reason));
  if (!stopped) report(args, sets.val);
  print_result(args, result, sets, stopped);
  return stopped ? 130 : 0;
}

// --init FILE: pretrained weights into every layer but the classifier, which
// stays new for the folder's classes (1-channel input sums RGB stem weights).
void initialize_from(const std::string& file, stoke::nn::Model& model) {
  stoke::interchange::ImportOptions o;
  o.load_classifier = false;
  const bool onnx = file.size() >= 5 && file.compare(file.size() - 5, 5, ".onnx") == 0;
  const auto r = onnx ? stoke::interchange::import_onnx(model, file, o)
                      : stoke::interchange::load_safetensors(model, file, o);
  std::fprintf(stderr, "init: %zu tensors from %s, new classifier head%s\n", r.loaded.size(),
               file.c_str(), r.stem_summed ? ", RGB stem summed to gray" : "");
}

// --nproc N from the command line: the launcher starts N ranks of this same
// command (without --nproc) and waits for them; rank r gets device r of a
// STOKE_GPU_DEVICE list.
int launch(int argc, char** argv, int nproc, const std::vector<int>& devices) {
  std::vector<std::string> rank_args = {"train"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nproc") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0) continue;
    rank_args.push_back(a);
  }
  return stoke_cli::launch_ranks(nproc, rank_args, devices);
}

// How many processes to train with: --nproc, else one per device of a
// STOKE_GPU_DEVICE list (environment or config file), else one.
int process_count(const stoke_cli::Args& args, const std::vector<int>& devices) {
  if (args.has("nproc")) {
    const int nproc = args.get_int("nproc", 1);
    if (nproc < 1) throw stoke_cli::UsageError("--nproc must be at least 1");
    // Every rank needs images of its own, and CPU ranks share the cores: more
    // would start processes that only cost memory.
    const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    if (devices.size() <= 1 && nproc > cpus) {
      throw stoke_cli::UsageError("--nproc " + std::to_string(nproc) + ": CPU ranks share the " +
                                  std::to_string(cpus) + " logical CPUs; at most " +
                                  std::to_string(cpus));
    }
    std::vector<stoke::DatasetReport::Skipped> ignored;
    const std::size_t images =
        stoke::list_image_files(args.required("data"), stoke::DatasetOptions{}.extensions, ignored)
            .size();
    if (static_cast<std::size_t>(nproc) > images) {
      throw stoke_cli::UsageError("--nproc " + std::to_string(nproc) + ": " + args.get("data") +
                                  " holds " + std::to_string(images) +
                                  " images, fewer than one per rank");
    }
    return nproc;
  }
  if (devices.size() > 1) {
    std::fprintf(stderr,
                 "stoke train: STOKE_GPU_DEVICE lists %zu devices: training data-parallel, one "
                 "rank per device (as --nproc %zu)\n",
                 devices.size(), devices.size());
  }
  return std::max<int>(1, static_cast<int>(devices.size()));
}

// An output that names an input (--out onto a training image, --log onto
// --out) would destroy it: refused before anything runs, naming both.
void refuse_outputs_onto_inputs(const stoke_cli::Args& args) {
  namespace fs = std::filesystem;
  const auto same = [](const fs::path& a, const fs::path& b) {
    std::error_code ec;
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec) || fs::equivalent(a, b, ec);
  };
  std::vector<std::pair<std::string, std::string>> outputs = {{"--out", args.get("out")}};
  if (args.has("log")) outputs.emplace_back("--log", args.get("log"));
  if (args.has("out")) outputs.emplace_back("--out .stop", args.get("out") + ".stop");
  std::vector<std::pair<std::string, std::string>> inputs;
  for (const char* name : {"resume", "init"})
    if (args.has(name)) inputs.emplace_back(std::string("--") + name, args.get(name));
  for (const char* name : {"data", "val"}) {
    if (!args.has(name)) continue;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(args.get(name), ec), end; !ec && it != end;
         it.increment(ec))
      if (it->is_regular_file(ec)) inputs.emplace_back(std::string("--") + name, it->path());
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      if (same(outputs[i].second, outputs[j].second))
        throw stoke_cli::UsageError(outputs[i].first + " and " + outputs[j].first + " both name " +
                                    outputs[i].second);
    }
    for (const auto& [flag, path] : inputs) {
      if (flag != "--resume" && same(outputs[i].second, path))
        throw stoke_cli::UsageError(outputs[i].first + " " + outputs[i].second + " is the input " +
                                    flag + " file " + path + "; refusing to overwrite it");
    }
  }
}

// The options every rank trains with, from the command line: a bad value is
// a usage error here, before a dataset is read or a rank is started.
struct Plan {
  std::uint64_t seed = 42;
  int size = 64, channels = 3;
  stoke::LoaderOptions loader;
  stoke::TrainerOptions trainer;
};

Plan plan(const stoke_cli::Args& args) {
  Plan p;
  p.seed = static_cast<std::uint64_t>(args.get_int("seed", 42));
  p.size = args.get_int("size", 64, 1, 1 << 20);
  p.channels = args.get_int("channels", 3, 1, 3);
  if (p.channels == 2) throw stoke_cli::UsageError("--channels is 1 or 3");
  p.loader.seed = p.seed;
  p.loader.preprocess.width = p.loader.preprocess.height = p.size;
  p.loader.preprocess.channels = p.channels;
  p.loader.preprocess.normalization =
      stoke_cli::parse_normalization(args.get("normalize", "minmax"));
  augment(args.get("augment", ""), p.loader);
  p.trainer = trainer_options(args, p.seed);
  if (!args.has("val")) split_percents(args.get("split", "80,20"));
  model_spec(args, p.channels, p.size, 2);  // --arch, --width-mult
  return p;
}

// Progress and the per-epoch line, on rank 0 alone.
stoke::Callbacks progress_callbacks(stoke_cli::Progress& progress, int epochs, bool rank0) {
  stoke::Callbacks cb;
  if (!rank0) return cb;
  cb.on_step = [&progress](const stoke::StepInfo& s) {
    progress.update(s.step, "epoch " + std::to_string(s.epoch + 1));
  };
  cb.on_epoch = [epochs](const stoke::EpochRecord& r) {
    char scaling[80] = "";
    if (r.loss_scale > 0) {
      std::snprintf(scaling, sizeof scaling, ", loss scale %g, %llu steps skipped", r.loss_scale,
                    static_cast<unsigned long long>(r.skipped_steps));
    }
    std::fprintf(stderr, "epoch %d/%d: loss %.4f acc %.4f%s (%.1f images/s%s)\n", r.epoch + 1,
                 epochs, r.train_loss, r.train_accuracy,
                 r.validated ? (", val acc " + std::to_string(r.val_accuracy)).c_str() : "",
                 r.images_per_second, scaling);
  };
  return cb;
}

// This process's part: the whole run, or one rank of a data-parallel one.
int train_here(const stoke_cli::Args& args, const stoke::Config& config, Plan p) {
  const std::string out = args.get("out");
  const stoke_cli::FileStamp before = stoke_cli::FileStamp::of(out);
  const auto runtime = stoke::init(config);
  // A rank started by a launcher (ours or torchrun/mpirun): its communicator.
  const auto dist = stoke::DistributedOptions::from_environment();
  std::unique_ptr<stoke::Communicator> comm;
  if (dist.world_size > 1) comm = stoke::make_communicator(dist);
  const bool rank0 = !comm || comm->rank() == 0;
  const Sets sets = datasets(args, p.seed, runtime.context);
  check_resume_dataset(args, sets.train);
  if (rank0) stoke_cli::warn_shared_duplicates("train", sets.train, sets.val);
  const bool validate = !sets.val.empty();
  p.loader.context = p.trainer.context = runtime.context;
  p.trainer.communicator = comm.get();
  if (validate) p.trainer.best_checkpoint = out;  // the best model by validation accuracy
  const auto spec =
      model_spec(args, p.channels, p.size, static_cast<int>(sets.train.class_names().size()));
  auto model = stoke::nn::build_model(stoke::default_backend(), spec, p.seed);
  if (args.has("init")) initialize_from(args.get("init"), *model);
  const std::size_t batch = p.trainer.batch_size ? static_cast<std::size_t>(p.trainer.batch_size)
                                                 : 32;  // auto: an estimate
  stoke_cli::Progress progress(
      "train", (sets.train.size() + batch - 1) / batch * static_cast<std::size_t>(p.trainer.epochs),
      "steps");
  stoke::Trainer trainer(*model, p.trainer, progress_callbacks(progress, p.trainer.epochs, rank0));
  stoke::FitResult result;
  {
    const StopOnSignal stop_on_signal(trainer);
    try {
      result = trainer.fit(sets.train, validate ? &sets.val : nullptr, p.loader);
    } catch (const stoke::Error&) {
      stoke_cli::rethrow_with_skip_hint(args.has("skip-corrupt"));
    }
  }
  if (!rank0)
    return result.reason == stoke::StopReason::kRequested ? 130 : 0;  // rank 0 writes and reports
  const int status = conclude(args, result, sets, p.loader, p.trainer, *model, progress);
  // Success is claimed only for a model this run wrote.
  if (status == 0 && stoke_cli::FileStamp::of(out) == before) {
    throw stoke::IoError("no model was written to " + out +
                         (args.has("resume") ? ": no epoch improved the validation accuracy of "
                                               "the resumed checkpoint " +
                                                   args.get("resume")
                                             : std::string()));
  }
  return status;
}

int run(int argc, char** argv) {
  stoke_cli::Args args(
      argc, argv,
      {"data",
       "val",
       "split",
       "out",
       "size",
       "channels",
       "epochs",
       "batch",
       "lr",
       "optimizer",
       "normalize",
       "augment",
       "arch",
       "seed",
       "report",
       "resume",
       "class-weights",
       "nproc",
       "init",
       "freeze",
       "width-mult",
       "log",
       "bucket-kb",
       "accumulate",
       "weight-decay",
       "decay-norm-and-bias",
       "precision",
       "loss-scale"},
      {"json", "balanced-sampler", "skip-corrupt", "force", "no-reference-images"});
  const std::string out = args.required("out");
  args.required("data");
  refuse_outputs_onto_inputs(args);
  if (const std::string precision = args.get("precision");
      !precision.empty() && precision != "fp32" && precision != "auto" && precision != "bf16" &&
      precision != "fp16") {
    throw stoke_cli::UsageError("--precision " + precision + ": expected fp32, bf16, fp16 or auto");
  }
  const Plan p = plan(args);
  // Every output proven writable before the first epoch, and one run per --out.
  stoke_cli::check_writable("--out", out);
  if (args.has("log")) stoke_cli::check_writable("--log", args.get("log"));
  if (args.has("report")) stoke_cli::check_writable("--report", args.get("report"), true);
  std::optional<stoke_cli::OutputLock> lock;
  if (!stoke_cli::launched_as_rank()) lock.emplace("--out", out);
  const stoke::Config config = stoke::Config::load();  // read once: the launch and this process
  if (!stoke_cli::launched_as_rank()) {
    const auto& request = config.settings().gpu_device;
    const std::vector<int> devices =
        request.kind == stoke::DeviceRequest::Kind::kList ? request.indices : std::vector<int>{};
    const int nproc = process_count(args, devices);
    if (nproc > 1) return launch(argc, argv, nproc, devices);
  }
  return train_here(args, config, p);
}

}  // namespace

int cmd_train(int argc, char** argv) {
  if (stoke_cli::wants_anomaly_task(argc, argv)) return stoke_cli::anomaly_train(argc, argv);
  if (stoke_cli::wants_segment_task(argc, argv)) return stoke_cli::segment_train(argc, argv);
  return stoke_cli::run_guarded("train", kUsage, run, argc, argv);
}
