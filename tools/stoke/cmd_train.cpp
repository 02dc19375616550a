// stoke train: a folder of images (one subfolder per class) -> a model file.
// Ctrl-C stops after the current step and writes the stop checkpoint.
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "args.hpp"
#include "commands.hpp"
#include "launch.hpp"
#include "stoke/distributed.hpp"
#include "stoke/interchange.hpp"
#include "stoke/recipe.hpp"
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
                   [--resume CHECKPOINT] [--class-weights balanced|w0,w1,...] [--balanced-sampler]
                   [--nproc N [--bucket-kb K]] [--init FILE --arch resnet18|resnet34|resnet50 [--width-mult M]
                   [--freeze K]]
  Writes the best model (by validation accuracy) to MODEL, or the final one without validation;
  Ctrl-C writes MODEL.stop and exits. --accumulate N accumulates the gradients of N batches
  per update (an effective batch of N x --batch). --report DIR evaluates MODEL on the
  validation set. --weight-decay: SGD 5e-4, Adam 0, AdamW 0.01 by default; AdamW leaves biases
  and batch-norm parameters undecayed unless --decay-norm-and-bias 1 (SGD decays them unless 0).
  --log writes the per-epoch train log (loss, accuracy, images/s, each profiler stage's time).
  --resume continues a MODEL.stop (or best) checkpoint exactly. --nproc N trains data-parallel
  with N processes on this machine (CPU ranks sharing the cores, or one per device of a
  STOKE_GPU_DEVICE list; a list without --nproc starts one rank per listed device; see
  docs/distributed.md); CPU ranks average gradients in buckets of K KiB (25600) while backward
  runs, 0 = one allreduce after it. --init starts from pretrained weights (a .safetensors with torchvision
  names or an .onnx export, docs/interchange.md) with a new head for the folder's classes;
  --freeze K keeps the stem and the first K stages fixed.
)";

stoke::Trainer* g_trainer = nullptr;  // for the signal handler only
extern "C" void on_interrupt(int) {
  if (g_trainer) g_trainer->request_stop();  // an atomic store: async-signal-safe
}

// The options that describe the run (stoke/recipe.hpp, shared with the C
// ABI); a bad value is a usage error naming the flag.
stoke::TrainRecipe recipe(const stoke_cli::Args& args) {
  std::map<std::string, std::string> options;
  for (const auto& key : stoke::train_recipe_keys())
    if (args.has(key)) options[key] = args.get(key);
  try {
    return stoke::parse_train_recipe(options);
  } catch (const stoke::InvalidArgument& e) {
    throw stoke_cli::UsageError(std::string("--") + e.what());
  }
}

void report(const stoke_cli::Args& args, const stoke::Dataset& val) {
  if (!args.has("report") || val.empty()) return;
  stoke::Predictor predictor(args.get("out"));
  const auto evaluation = stoke::evaluate(predictor, val);
  stoke::write_evaluation_report(args.get("report"), evaluation, predictor.info());
  std::fprintf(stderr, "report: %s/report.html (validation accuracy %.4f)\n",
               args.get("report").c_str(), evaluation.accuracy);
}

void print_result(const stoke_cli::Args& args, const stoke::FitResult& result,
                  const stoke::TrainSets& sets, bool stopped) {
  const std::string out = args.get("out");
  if (args.has("json")) {
    std::printf(
        "{\"model\": %s, \"stop_checkpoint\": %s, \"reason\": %s, \"epochs\": %zu, \"batch_size\": "
        "%d, "
        "\"best_val_accuracy\": %.6f, \"train_samples\": %zu, \"val_samples\": %zu}\n",
        stoke_cli::json_string(out).c_str(),
        stoke_cli::json_string(stopped ? out + ".stop" : "").c_str(),
        stoke_cli::json_string(stoke::to_string(result.reason)).c_str(), result.log.epochs.size(),
        result.batch_size, result.best_val_accuracy, sets.train.size(), sets.val.size());
  } else {
    std::printf("%s: %s (best validation accuracy %.4f)\n",
                stopped ? "stopped; checkpoint" : "model", (stopped ? out + ".stop" : out).c_str(),
                result.best_val_accuracy);
  }
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

// The options with a value: the recipe's (stoke/recipe.hpp) and the command's own.
std::set<std::string> value_options() {
  std::set<std::string> names(stoke::train_recipe_keys().begin(), stoke::train_recipe_keys().end());
  names.erase("balanced-sampler");  // a switch here
  names.insert({"report", "nproc", "init", "log"});
  return names;
}

int run(int argc, char** argv) {
  stoke_cli::Args args(argc, argv, value_options(), {"json", "balanced-sampler"});
  const std::string out = args.required("out");
  refuse_outputs_onto_inputs(args);
  const stoke::TrainRecipe plan = recipe(args);
  const stoke::Config config = stoke::Config::load();  // read once: the launch and this process
  if (!stoke_cli::launched_as_rank()) {
    const auto& request = config.settings().gpu_device;
    const std::vector<int> devices =
        request.kind == stoke::DeviceRequest::Kind::kList ? request.indices : std::vector<int>{};
    const int nproc = process_count(args, devices);
    if (nproc > 1) return launch(argc, argv, nproc, devices);
  }
  const auto runtime = stoke::init(config);
  // A rank started by a launcher (ours or torchrun/mpirun): its communicator.
  const auto dist = stoke::DistributedOptions::from_environment();
  std::unique_ptr<stoke::Communicator> comm;
  if (dist.world_size > 1) comm = stoke::make_communicator(dist);
  const bool rank0 = !comm || comm->rank() == 0;
  const stoke::TrainSets sets = stoke::recipe_datasets(plan);
  stoke::LoaderOptions loader = plan.loader;

  const bool validate = !sets.val.empty();
  loader.context = runtime.context;
  stoke::TrainerOptions o = stoke::recipe_trainer_options(plan, validate);
  o.context = runtime.context;
  o.communicator = comm.get();

  const auto spec =
      stoke::recipe_model_spec(plan, static_cast<int>(sets.train.class_names().size()));
  auto model = stoke::nn::build_model(stoke::default_backend(), spec, plan.seed);
  if (args.has("init")) initialize_from(args.get("init"), *model);
  const std::size_t batch = (o.batch_size ? static_cast<std::size_t>(o.batch_size) : 32) *
                            static_cast<std::size_t>(o.batch_multiplier);  // auto: an estimate
  const std::size_t steps_per_epoch = (sets.train.size() + batch - 1) / batch;
  stoke_cli::Progress progress("train", steps_per_epoch * static_cast<std::size_t>(o.epochs),
                               "steps");
  stoke::Callbacks cb;
  cb.on_step = [&](const stoke::StepInfo& s) {
    if (!rank0) return;  // rank 0 alone reports
    progress.update(s.step, "epoch " + std::to_string(s.epoch + 1));
  };
  cb.on_epoch = [&](const stoke::EpochRecord& r) {
    if (!rank0) return;
    std::fprintf(stderr, "epoch %d/%d: loss %.4f acc %.4f%s (%.1f images/s)\n", r.epoch + 1,
                 o.epochs, r.train_loss, r.train_accuracy,
                 r.validated ? (", val acc " + std::to_string(r.val_accuracy)).c_str() : "",
                 r.images_per_second);
  };
  stoke::Trainer trainer(*model, o, cb);
  g_trainer = &trainer;
  std::signal(SIGINT, on_interrupt);
  // SIGTERM is what timeout, systemd, docker stop, Kubernetes and SLURM send:
  // the same stop checkpoint as Ctrl-C.
  std::signal(SIGTERM, on_interrupt);
  const auto result = trainer.fit(sets.train, validate ? &sets.val : nullptr, loader);
  g_trainer = nullptr;
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!rank0)
    return result.reason == stoke::StopReason::kRequested ? 130 : 0;  // rank 0 writes and reports
  if (args.has("log")) result.log.save(args.get("log"));
  stoke::save_final_model(plan, sets, loader, o, *model, result);
  const bool stopped = result.reason == stoke::StopReason::kRequested ||
                       result.reason == stoke::StopReason::kOutOfMemory;
  progress.finish(std::string("stopped: ") + stoke::to_string(result.reason));
  if (!stopped) report(args, sets.val);
  print_result(args, result, sets, stopped);
  return stopped ? 130 : 0;
}

}  // namespace

int cmd_train(int argc, char** argv) {
  return stoke_cli::run_guarded("train", kUsage, run, argc, argv);
}
