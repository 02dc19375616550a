// The autotuner: coordinate search over batch size, threads, cache and
// prefetch depth, one short measured trial per candidate.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "core/atomic_file.hpp"
#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/threads.hpp"
#include "stoke/tune.hpp"

namespace stoke {
namespace {

// The model's weights and buffers on the host, to undo the trials' training.
struct ModelSnapshot {
  explicit ModelSnapshot(nn::Model& model) : model_(model) {
    params_ = model.parameters().to_vector();
    for (const auto& b : model.named_buffers()) buffers_.push_back(b.tensor.to_vector());
  }
  void restore() {
    model_.parameters().copy_from_host(params_.data());
    auto buffers = model_.named_buffers();
    for (std::size_t i = 0; i < buffers.size(); ++i)
      buffers[i].tensor.copy_from_host(buffers_[i].data());
  }

 private:
  nn::Model& model_;
  std::vector<float> params_;
  std::vector<std::vector<float>> buffers_;
};

std::vector<int> default_threads(int cores) {
  std::vector<int> t = {1, std::max(1, cores / 2), std::max(1, cores - 1), cores};
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

class Tuner {
 public:
  Tuner(nn::Model& model, const Dataset& data, const LoaderOptions& loader,
        const TrainerOptions& trainer, const TuneOptions& options)
      : model_(model), data_(data), loader_(loader), trainer_(trainer), options_(options) {
    base_settings_ = trainer.settings ? *trainer.settings : trainer.context.settings();
  }

  TrialResult run(TrialSettings s) {
    TrialResult r;
    r.settings = s;
    try {
      // With CUDA graphs each prefetch slot runs once eagerly and is captured
      // once per epoch before it replays: those steps come on top, so the
      // measured epoch reaches steady-state replay.
      const std::size_t graph_warmup = !model_.backend().is_host() && s.gpu_graph
                                           ? 2 * (static_cast<std::size_t>(s.prefetch_depth) + 1)
                                           : 0;
      const std::size_t samples =
          std::min(data_.size(), (options_.steps_per_trial + graph_warmup) *
                                     static_cast<std::size_t>(s.batch_size));
      std::vector<std::size_t> first(samples);
      std::iota(first.begin(), first.end(), std::size_t{0});
      const Dataset subset = data_.subset(first);
      LoaderOptions lo = loader_;
      lo.cache = s.cache ? CacheSpec{CacheSpec::Kind::kRam, 0, {}} : CacheSpec{};
      if (!model_.backend().is_host())
        lo.preprocess.dtype = s.uint8_upload ? OutputDtype::kUint8 : OutputDtype::kFloat32;
      TrainerOptions to = trainer_;
      to.epochs = 2;  // the first warms caches and allocations, the second is measured
      to.batch_size = s.batch_size;
      to.batch_multiplier = 1;
      to.validate_every_epochs = 0;
      to.log_every_steps = 0;
      to.early_stopping_patience = 0;
      to.best_checkpoint.clear();
      to.trace_steps = 0;
      to.max_steps_per_epoch = 0;
      Settings settings = base_settings_;
      settings.prefetch_depth = s.prefetch_depth;
      if (!model_.backend().is_host())
        settings.gpu_graph = s.gpu_graph ? Toggle::kOn : Toggle::kOff;
      settings.cpu_threads = s.cpu_threads;
      // The trial runs in a context of its own: the trainer's with these
      // settings (its arena has the trial's thread count).
      to.context = trainer_.context.with_settings(settings);
      to.settings.reset();
      Trainer trainer(model_, to);
      const auto fit = trainer.fit(subset, nullptr, lo);
      const auto& measured = fit.log.epochs.back();
      r.images_per_second = measured.images_per_second;
      r.data_wait_share = measured.profile.share(Stage::kDataWait);
    } catch (const Error& e) {
      r.failed = true;
      r.error = e.what();
    }
    model_.backend().release_workspace();
    if (options_.on_trial) options_.on_trial(r);
    return r;
  }

  nn::Model& model_;
  const Dataset& data_;
  const LoaderOptions& loader_;
  const TrainerOptions& trainer_;
  const TuneOptions& options_;
  Settings base_settings_;
};

}  // namespace

TuneResult autotune(nn::Model& model, const Dataset& data, const LoaderOptions& loader,
                    const TrainerOptions& trainer, const TuneOptions& options) {
  if (data.empty()) throw InvalidArgument("autotune: the dataset is empty");
  ModelSnapshot snapshot(model);
  Tuner tuner(model, data, loader, trainer, options);
  TuneResult result;
  const int cores = std::max(1, query_cpu().physical_cores);
  const bool host = model.backend().is_host();
  TrialSettings current;
  current.cpu_threads = host ? cores : std::max(1, cores - 1);
  current.cache = true;
  current.prefetch_depth = std::max(2, tuner.base_settings_.prefetch_depth);
  current.gpu_graph = !host && tuner.base_settings_.gpu_graph != Toggle::kOff;
  current.uint8_upload = !host && loader.preprocess.dtype == OutputDtype::kUint8;
  result.gpu = !host;

  auto consider = [&](TrialSettings s) {
    auto r = tuner.run(std::move(s));
    result.trials.push_back(r);
    if (!r.failed && r.images_per_second > result.best_images_per_second) {
      result.best_images_per_second = r.images_per_second;
      result.best = r.settings;
    }
  };

  // 1. Batch: powers of two up to the largest that fits the cap with headroom.
  std::uint64_t cap = options.max_memory ? options.max_memory : trainer.max_memory;
  if (cap == 0) cap = 2ull << 30;
  const int slots = trainer.optimizer == OptimizerKind::kSgd ? 1 : 2;
  const auto budget = static_cast<std::uint64_t>(static_cast<double>(cap) * options.headroom);
  const int largest = std::min(options.max_batch, auto_batch_size(model, slots, budget));
  for (int b = std::max(1, largest / 8); b <= largest; b *= 2) {
    TrialSettings s = current;
    s.batch_size = b;
    s.label = "batch " + std::to_string(b);
    consider(s);
  }
  if (result.best_images_per_second == 0) {
    snapshot.restore();
    throw Error(ErrorCode::kInternal,
                "autotune: every batch-size trial failed; first error: " +
                    (result.trials.empty() ? std::string("none") : result.trials[0].error));
  }
  current = result.best;

  // 2. Threads.
  auto threads =
      options.thread_candidates.empty() ? default_threads(cores) : options.thread_candidates;
  for (int t : threads) {
    if (t == current.cpu_threads) continue;
    TrialSettings s = current;
    s.cpu_threads = t;
    s.label = std::to_string(t) + " threads";
    consider(s);
  }
  current = result.best;

  // 3. Cache A/B, 4. prefetch depth.
  {
    TrialSettings s = current;
    s.cache = !current.cache;
    s.label = s.cache ? "cache ram" : "cache off";
    consider(s);
    current = result.best;
  }
  {
    TrialSettings s = current;
    s.prefetch_depth = current.prefetch_depth + 1;
    s.label = "prefetch depth " + std::to_string(s.prefetch_depth);
    consider(s);
    current = result.best;
  }
  // 5. CUDA graphs A/B (the trainer replays one graph per prefetch slot),
  // 6. uint8 upload A/B (normalize on the device, 4x fewer bytes to copy).
  if (!host) {
    TrialSettings s = current;
    s.gpu_graph = !current.gpu_graph;
    s.label = s.gpu_graph ? "cuda graphs on" : "cuda graphs off";
    consider(s);
    current = result.best;
    s = current;
    s.uint8_upload = !current.uint8_upload;
    s.label = s.uint8_upload ? "uint8 upload" : "float32 upload";
    consider(s);
  }

  if (host) {
    result.not_tried = {
        "uint8 upload: the CPU backend copies nothing to a device",
        "STOKE_GPU_JIT: the CPU backend runs no CUDA kernels",
        "STOKE_GPU_GRAPH: the CPU backend has no CUDA graphs",
    };
  } else {
    result.not_tried = {
        "STOKE_GPU_JIT: fixed when the backend is created; JIT and precompiled kernels compute the "
        "same "
        "and differ only in start-up time",
    };
  }
  result.best.label = "best";
  snapshot.restore();
  Settings best = tuner.base_settings_;
  best.cpu_threads = result.best.cpu_threads;
  best.prefetch_depth = result.best.prefetch_depth;
  result.context = trainer.context.with_settings(best);
  return result;
}

std::string TuneResult::table() const {
  std::ostringstream out;
  char line[200];
  const auto graph = [&](const TrialSettings& s) {
    return gpu ? (s.gpu_graph ? "on" : "off") : "-";
  };
  std::snprintf(line, sizeof line, "%-20s %6s %8s %6s %6s %6s %12s %8s\n", "trial", "batch",
                "threads", "cache", "depth", "graph", "images/s", "wait %");
  out << line;
  for (const auto& t : trials) {
    const auto& s = t.settings;
    if (t.failed) {
      std::snprintf(line, sizeof line, "%-20s %6d %8d %6s %6d %6s %12s   %s\n", s.label.c_str(),
                    s.batch_size, s.cpu_threads, s.cache ? "ram" : "off", s.prefetch_depth,
                    graph(s), "failed", t.error.substr(0, 60).c_str());
    } else {
      std::snprintf(line, sizeof line, "%-20s %6d %8d %6s %6d %6s %12.1f %7.1f%%\n",
                    s.label.c_str(), s.batch_size, s.cpu_threads, s.cache ? "ram" : "off",
                    s.prefetch_depth, graph(s), t.images_per_second, 100.0 * t.data_wait_share);
    }
    out << line;
  }
  std::snprintf(line, sizeof line,
                "best: batch %d, %d threads, cache %s, prefetch depth %d%s%s: %.1f images/s\n",
                best.batch_size, best.cpu_threads, best.cache ? "ram" : "off", best.prefetch_depth,
                gpu ? (best.gpu_graph ? ", cuda graphs on" : ", cuda graphs off") : "",
                gpu ? (best.uint8_upload ? ", uint8 upload" : ", float32 upload") : "",
                best_images_per_second);
  out << line;
  for (const auto& n : not_tried) out << "not tried: " << n << "\n";
  return out.str();
}

std::string TuneResult::config_text() const {
  std::ostringstream out;
  out << "# Written by stoke's autotuner (" << best_images_per_second
      << " images/s in its trials).\n"
      << "# Load with STOKE_CONFIG=<this file>. Trainer options (not variables):\n"
      << "#   batch size " << best.batch_size << "\n";
  if (gpu) {
    out << "#   loader output dtype "
        << (best.uint8_upload ? "uint8 (normalized on the GPU)" : "float32") << "\n";
  }
  out << "STOKE_CPU_THREADS = " << best.cpu_threads << "\n"
      << "STOKE_CACHE = " << (best.cache ? "ram" : "off") << "\n"
      << "STOKE_PREFETCH_DEPTH = " << best.prefetch_depth << "\n";
  if (gpu) out << "STOKE_GPU_GRAPH = " << (best.gpu_graph ? "on" : "off") << "\n";
  return out.str();
}

void TuneResult::write_config(const std::filesystem::path& path) const {
  detail::write_file_atomically(path, config_text());
}

}  // namespace stoke
