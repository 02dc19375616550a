// stoke-bench: the field notes' experiment in one command. Trains the
// ResNet-style net on the embedded synthetic inspection dataset (or a folder
// the user names) with a baseline configuration and with the autotuner's, and
// prints one table, the end-to-end bound check and the advisor's report.
//
//   stoke-bench [--data DIR] [--images N] [--size S] [--epochs E] [--json]
//               [--steps-per-trial K] [--config-out FILE]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "bench/bench_report.hpp"
#include "core/progress.hpp"
#include "stoke/stoke.hpp"

namespace fs = std::filesystem;
using namespace stoke;

namespace {

struct Args {
  fs::path data;           // user's folder dataset; empty = synthetic
  std::size_t images = 0;  // 0 = default for the device
  int size = 0;            // network input side; 0 = default for the device
  int epochs = 0;          // 0 = default
  std::size_t steps_per_trial = 4;
  bool json = false;
  fs::path config_out;  // empty = <cache root>/stoke-tuned.conf, never the working directory
};

[[noreturn]] void usage(const char* argv0, int status = 2) {
  std::fprintf(
      status == 0 ? stdout : stderr,
      "usage: %s [--data DIR] [--images N] [--size S] [--epochs E] [--steps-per-trial K]\n"
      "          [--config-out FILE] [--json]\n"
      "  --data DIR            a folder of images, one subfolder per class (default: the\n"
      "                        synthetic inspection dataset, generated once under ~/.cache/stoke)\n"
      "  --images N            images to use (default: 200 on the CPU, 400 on a GPU)\n"
      "  --size S              network input S x S (default: 32 on the CPU, 224 on a GPU)\n"
      "  --epochs E            epochs per run (default 2)\n"
      "  --steps-per-trial K   optimizer steps per autotuner trial epoch (default 4)\n"
      "  --config-out FILE     where the tuned settings go (default "
      "$XDG_CACHE_HOME/stoke/stoke-tuned.conf,\n"
      "                        else ~/.cache/stoke/stoke-tuned.conf)\n"
      "  --json                one JSON object on stdout instead of tables\n",
      argv0);
  std::exit(status);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(argv[0]);
      return argv[++i];
    };
    try {
      if (arg == "--data")
        a.data = value();
      else if (arg == "--images")
        a.images = std::stoul(value());
      else if (arg == "--size")
        a.size = std::stoi(value());
      else if (arg == "--epochs")
        a.epochs = std::stoi(value());
      else if (arg == "--steps-per-trial")
        a.steps_per_trial = std::stoul(value());
      else if (arg == "--config-out")
        a.config_out = value();
      else if (arg == "--json")
        a.json = true;
      else if (arg == "--help" || arg == "-h")
        usage(argv[0], 0);
      else
        usage(argv[0]);
    } catch (const std::logic_error&) {
      std::fprintf(stderr, "%s: bad value for %s\n", argv[0], arg.c_str());
      std::exit(2);
    }
  }
  return a;
}

fs::path cache_root() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "stoke";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "stoke";
  return fs::temp_directory_path() / "stoke";
}

// The embedded default dataset: generated once, reused while its marker says
// it is complete with these parameters.
fs::path synthetic_dataset(std::size_t count, bool quiet) {
  SyntheticOptions o;  // 2448 x 2048 JPEG, quality 90, 30 % defects
  const fs::path dir = cache_root() / "datasets" /
                       ("inspection-" + std::to_string(o.width) + "x" + std::to_string(o.height) +
                        "-" + std::to_string(count) + "-q" + std::to_string(o.jpeg_quality) + "-s" +
                        std::to_string(o.seed));
  const fs::path marker = dir / ".complete";
  if (fs::exists(marker)) return dir;
  fs::remove_all(dir);
  fs::create_directories(dir);
  if (!quiet) {
    std::fprintf(stderr, "generating %zu synthetic %dx%d inspection images (once) into %s\n", count,
                 o.width, o.height, dir.c_str());
  }
  // In chunks, so that the progress line moves.
  detail::ProgressLine progress("dataset", count, "images");
  const std::size_t chunk = 16;
  for (std::size_t done = 0; done < count; done += chunk) {
    SyntheticOptions part = o;
    part.first = done;
    const std::size_t n = std::min(chunk, count - done);
    write_synthetic_dataset(dir, n, part);
    progress.update(done + n);
  }
  progress.finish();
  std::ofstream(marker) << count << "\n";
  return dir;
}

bench::RunFigures run(const char* name, nn::Model& model, const Dataset& data, LoaderOptions loader,
                      TrainerOptions options, const Runtime& runtime, bool quiet) {
  model.backend().reset_peak();
  detail::ProgressLine progress(std::string(name) + " run",
                                static_cast<std::uint64_t>(options.epochs), "epochs");
  Callbacks cb;
  int epochs_done = 0;
  cb.on_epoch = [&](const EpochRecord&) { progress.update(++epochs_done); };
  if (quiet) cb.on_epoch = nullptr;
  Trainer trainer(model, options, cb);
  const auto fit = trainer.fit(data, nullptr, loader);
  if (!quiet) progress.finish();
  bench::RunFigures f =
      bench::summarize(fit.log, model.backend().memory_stats(), runtime.system.cpu);
  f.batch_size = fit.batch_size;
  return f;
}

// Train steps on one random batch already in memory: the compute bound.
double compute_only(nn::Model& model, int batch, int steps,
                    const std::array<std::size_t, 4>& shape) {
  Backend& be = model.backend();
  const std::int64_t n = batch;
  Tensor x(be, {n, static_cast<std::int64_t>(shape[1]), static_cast<std::int64_t>(shape[2]),
                static_cast<std::int64_t>(shape[3])});
  Tensor y(be, {n}, DType::kInt32);
  std::vector<float> xs(static_cast<std::size_t>(x.numel()));
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  for (auto& v : xs) v = dist(rng);
  std::vector<std::int32_t> ys(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<std::int32_t>(i % 2);
  x.copy_from_host(xs.data());
  y.copy_from_host(ys.data());
  nn::Sgd sgd(model);
  nn::TrainStep step(model, sgd);
  step.run(x, y, 0.0f);  // warm-up: allocations and workspaces
  be.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step.run(x, y, 0.0f);
  be.synchronize();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return seconds > 0 ? steps * batch / seconds : 0;
}

// The loader alone, two epochs (the second warm when the cache is on).
double pipeline_only(const Dataset& data, LoaderOptions loader, int batch) {
  loader.batch_size = static_cast<std::size_t>(batch);
  Loader l(data, loader);
  std::vector<std::byte> images(l.batch_size() * l.sample_bytes());
  std::vector<std::int32_t> labels(l.batch_size());
  double rate = 0;
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    std::size_t samples = 0;
    for (std::uint64_t b = 0; b < l.batches_per_epoch(); ++b)
      samples += l.fill_batch(epoch, b, images, labels);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rate = s > 0 ? samples / s : 0;
  }
  return rate;
}

// What both runs share: the runtime, the dataset, the model's shape, the
// loader and the trainer options of the experiment.
struct Experiment {
  Runtime runtime;
  bool quiet = false;
  int size = 0;
  fs::path root;
  Dataset data;
  nn::ModelSpec spec;
  LoaderOptions loader;
  TrainerOptions base;
};

Dataset load_dataset(const Args& args, const fs::path& root) {
  Dataset data = Dataset::from_folder(root);
  if (!args.data.empty() && args.images && args.images < data.size()) {
    std::vector<std::size_t> first(args.images);
    for (std::size_t i = 0; i < first.size(); ++i) first[i] = i;
    data = data.subset(first);
  }
  return data;
}

Experiment prepare(const Args& args) {
  Experiment e;
  e.runtime = init();
  const bool gpu = e.runtime.device.use_gpu && default_backend().name() != "cpu";
  // CPU: a small input and image count so that the whole experiment takes a
  // few minutes on 2 cores; a GPU gets the field notes' sizes.
  const std::size_t images = args.images ? args.images : (gpu ? 400 : 200);
  e.size = args.size ? args.size : (gpu ? 224 : 32);
  const int epochs = args.epochs ? args.epochs : 2;
  e.quiet = args.json;
  if (!e.quiet) {
    std::printf("stoke-bench %s on %s\n", version(),
                describe(e.runtime.device, e.runtime.system.cuda.gpus).c_str());
    std::printf("input %dx%d RGB, %d epochs per run, %s\n", e.size, e.size, epochs,
                gpu ? "GPU sizes"
                    : "CPU sizes (small input and image count to finish in minutes on 2 cores)");
    std::fflush(stdout);
  }
  e.root = args.data.empty() ? synthetic_dataset(images, e.quiet) : args.data;
  e.data = load_dataset(args, e.root);
  if (!e.quiet) {
    std::printf("dataset %s: %zu images, %zu classes\n\n", e.root.c_str(), e.data.size(),
                e.data.class_names().size());
    std::fflush(stdout);
  }
  e.spec.in_channels = 3;
  e.spec.height = e.spec.width = e.size;
  e.spec.classes = static_cast<int>(e.data.class_names().size());
  e.loader.preprocess.width = e.loader.preprocess.height = e.size;
  e.loader.preprocess.channels = 3;
  e.loader.preprocess.normalization = Normalization::mean_std(
      std::vector<float>{0.5f, 0.5f, 0.5f}, std::vector<float>{0.25f, 0.25f, 0.25f});
  e.base.epochs = epochs;
  e.base.validate_every_epochs = 0;
  e.base.log_every_steps = 0;
  e.base.schedule.base_lr = 0.02f;
  return e;
}

// The field notes' untuned state.
Config baseline_config(const Config& from) {
  Config c = from;
  c.set("STOKE_CPU_THREADS", "1");
  c.set("STOKE_CPU_SIMD", "scalar");
  c.set("STOKE_CACHE", "off");
  c.set("STOKE_PREFETCH_DEPTH", "1");
  c.set("STOKE_HOST_PINNED", "off");
  c.set("STOKE_GPU_STREAMS", "off");
  c.set("STOKE_GPU_GRAPH", "off");
  c.set("STOKE_GPU_JIT", "off");
  return c;
}

bench::RunFigures run_baseline(const Experiment& e, const Config& config) {
  LoaderOptions loader = e.loader;
  loader.cache = CacheSpec{};
  loader.simd = SimdLevel::kScalar;
  loader.preprocess.dct_scaling = false;
  TrainerOptions options = e.base;
  options.batch_size = 2;
  options.settings = config.settings();
  set_thread_count(1);
  auto model = nn::build_model(default_backend(), e.spec, 1);
  return run("baseline", *model, e.data, loader, options, e.runtime, e.quiet);
}

TuneResult tune_settings(const Experiment& e, nn::Model& model, const Args& args) {
  TuneOptions tune;
  tune.steps_per_trial = args.steps_per_trial;
  std::optional<detail::ProgressLine> progress;
  if (!e.quiet) progress.emplace("tuning", 9, "trials");
  int trials = 0;
  tune.on_trial = [&](const TrialResult&) {
    if (progress) progress->update(++trials);
  };
  TrainerOptions base = e.base;
  base.settings = e.runtime.config.settings();
  LoaderOptions loader = e.loader;
  loader.simd = e.runtime.simd;
  TuneResult choice = autotune(model, e.data, loader, base, tune);
  if (progress) progress->finish();
  return choice;
}

// The tuned run with the autotuner's pick (its loader and options returned
// for the bounds measured after it).
bench::RunFigures run_tuned(const Experiment& e, nn::Model& model, const TuneResult& choice,
                            LoaderOptions& loader, TrainerOptions& options) {
  Config config = e.runtime.config;
  config.set("STOKE_CPU_THREADS", std::to_string(choice.best.cpu_threads));
  config.set("STOKE_CACHE", choice.best.cache ? "ram" : "off");
  config.set("STOKE_PREFETCH_DEPTH", std::to_string(choice.best.prefetch_depth));
  loader = e.loader;
  loader.simd = e.runtime.simd;
  loader.cache = choice.best.cache ? CacheSpec{CacheSpec::Kind::kRam, 0, {}} : CacheSpec{};
  if (choice.gpu) {  // the GPU trials' picks
    config.set("STOKE_GPU_GRAPH", choice.best.gpu_graph ? "on" : "off");
    if (choice.best.uint8_upload) loader.preprocess.dtype = OutputDtype::kUint8;
  }
  options = e.base;
  options.batch_size = choice.best.batch_size;
  options.settings = config.settings();
  return run("tuned", model, e.data, loader, options, e.runtime, e.quiet);
}

// The advisor reads the baseline.
std::vector<Advice> advise_baseline(const Experiment& e, const bench::RunFigures& baseline,
                                    const Config& config, const nn::Model& model) {
  AdvisorInput in;
  in.profile = baseline.last_profile;
  in.system = e.runtime.system;
  in.config = config;
  in.device = e.runtime.device;
  in.cpu_threads = 1;
  in.simd = SimdLevel::kScalar;
  in.batch_size = 2;
  in.max_batch_size = auto_batch_size(model, 1, 2ull << 30);
  in.decoded_pixels_per_image = 2448.0 * 2048.0;
  in.training_pixels_per_image = static_cast<double>(e.size) * e.size;
  in.class_counts = class_counts(e.data, static_cast<int>(e.data.class_names().size()));
  in.bf16 = model.backend().inference_precision(Precision::kBf16);
  if (in.bf16 == PrecisionSupport::kNative)
    in.bf16_time_ratio = measured_time_ratio(model.backend(), Precision::kBf16);
  return advise(in);
}

fs::path write_tuned_config(const Args& args, const TuneResult& choice) {
  const fs::path out =
      args.config_out.empty() ? cache_root() / "stoke-tuned.conf" : args.config_out;
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  choice.write_config(out);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    const Experiment e = prepare(args);
    const Config baseline = baseline_config(e.runtime.config);
    const bench::RunFigures b = run_baseline(e, baseline);
    set_thread_count(e.runtime.cpu_threads);
    auto model = nn::build_model(default_backend(), e.spec, 1);
    const TuneResult choice = tune_settings(e, *model, args);
    const fs::path config_out = write_tuned_config(args, choice);
    LoaderOptions loader;
    TrainerOptions tuned;
    const bench::RunFigures t = run_tuned(e, *model, choice, loader, tuned);
    // The bounds the tuned end-to-end rate is compared with, in the same run.
    const double pipeline_rate = pipeline_only(e.data, loader, tuned.batch_size);
    const auto side = static_cast<std::size_t>(e.size);
    // In the tuned context: the arena of the pick's thread count, as the tuned run.
    double compute_rate = 0;
    choice.context.run([&] {
      compute_rate = compute_only(*model, tuned.batch_size, 6,
                                  {static_cast<std::size_t>(tuned.batch_size), 3, side, side});
    });
    bench::Report report{b,
                         t,
                         pipeline_rate,
                         compute_rate,
                         choice,
                         advise_baseline(e, b, baseline, *model),
                         e.size,
                         e.data.size(),
                         e.root.string(),
                         config_out.string()};
    std::cout << (args.json ? bench::to_json(report) + "\n" : bench::to_text(report));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "stoke-bench: %s\n", e.what());
    return 1;
  }
}
