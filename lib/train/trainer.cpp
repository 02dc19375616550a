#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

#include "backend/prefetch_device.hpp"
#include "stoke/cuda.hpp"
#include "stoke/error.hpp"
#include "stoke/log.hpp"
#include "stoke/deploy.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/prefetch.hpp"
#include "stoke/train.hpp"
#include "train/async_logger.hpp"

namespace stoke {
namespace {

std::unique_ptr<nn::Optimizer> make_optimizer(const nn::Model& model, const TrainerOptions& o) {
  switch (o.optimizer) {
    case OptimizerKind::kSgd: return std::make_unique<nn::Sgd>(model, o.sgd);
    case OptimizerKind::kAdam: {
      auto adam = o.adam;
      adam.decoupled_weight_decay = false;
      return std::make_unique<nn::Adam>(model, adam);
    }
    case OptimizerKind::kAdamW: {
      auto adam = o.adam;
      adam.decoupled_weight_decay = true;
      return std::make_unique<nn::Adam>(model, adam);
    }
  }
  throw InvalidArgument("unknown optimizer kind");
}

// The models compute in float32: the loader delivers float32, or uint8 HWC
// that a GPU backend's prefetcher normalizes on the device.
void check_loader_dtype(OutputDtype dtype, Backend& backend) {
  if (dtype == OutputDtype::kFloat16 || dtype == OutputDtype::kBFloat16) {
    throw InvalidArgument(std::string("Trainer::fit: the loader's output dtype is ") + to_string(dtype) +
                          "; the models compute in float32: use OutputDtype::kFloat32 (or kUint8 on a GPU backend)");
  }
  if (dtype == OutputDtype::kUint8 && !as_gpu_backend(backend)) {
    throw InvalidArgument("Trainer::fit: the loader's output dtype is uint8 (HWC), which a GPU backend normalizes "
                          "on the device; the model runs on " + backend.name() + ": use OutputDtype::kFloat32");
  }
}

// The prefetcher's device normalize for uint8 batches: the loader's affine
// normalization (pixel * scale + bias) as (x / 255 - mean) / std.
DeviceNormalize device_normalize_for(const PreprocessOptions& pre) {
  DeviceNormalize dn;
  dn.enabled = true;
  dn.height = pre.height;
  dn.width = pre.width;
  dn.channels = pre.channels;
  for (int c = 0; c < pre.channels; ++c) {
    float scale = 1.0f, bias = 0.0f;
    pre.normalization.affine(c, scale, bias);
    const float std_dev = 1.0f / (255.0f * scale);
    dn.std[static_cast<std::size_t>(c)] = std_dev;
    dn.mean[static_cast<std::size_t>(c)] = -bias * std_dev;
  }
  return dn;
}

// One epoch of `loader` through a prefetch ring: on a GPU backend into its
// device slots, handed over on the backend's compute stream (uint8 batches
// normalized on the device); on the CPU backend from the host slots.
PrefetchOptions prefetch_options(const Settings& settings, const Loader& loader, std::uint64_t epoch,
                                 std::uint64_t max_batches, GpuBackend* gpu) {
  PrefetchOptions po = PrefetchOptions::from_settings(settings);
  po.sample_bytes = loader.sample_bytes();
  po.batch_size = loader.batch_size();
  po.batches_per_epoch = loader.batches_per_epoch();
  if (max_batches > 0) po.batches_per_epoch = std::min<std::uint64_t>(po.batches_per_epoch, max_batches);
  po.first_epoch = epoch;
  po.epochs = 1;
  po.device = gpu ? gpu->device() : -1;
  if (gpu) po.compute_stream = gpu->compute_stream();
  if (loader.dtype() == OutputDtype::kUint8) po.device_normalize = device_normalize_for(loader.options().preprocess);
  return po;
}

// Starts the ring in `ring`. A backend may bring the prefetcher's device
// handle (test doubles); otherwise the prefetcher opens po.device itself.
void open_prefetcher(std::optional<Prefetcher>& ring, const PrefetchOptions& po, Loader& loader,
                     const Backend& backend) {
  FillBatch fill = [&loader](std::uint64_t e, std::uint64_t b, std::span<std::byte> images,
                             std::span<std::int32_t> labels) { return loader.fill_batch(e, b, images, labels); };
  const auto* source = dynamic_cast<const detail::PrefetchDeviceSource*>(&backend);
  if (po.device >= 0 && source) {
    ring.emplace(po, std::move(fill), source->prefetch_device());
  } else {
    ring.emplace(po, std::move(fill));
  }
}

// The batch into x and labels: a device-to-device copy from the slot on a
// GPU, an upload from the host slot otherwise.
void copy_batch_in(Backend& backend, const Batch& batch, Tensor& x, Tensor& labels) {
  if (batch.device_images()) {
    backend.copy(x.raw(), batch.device_images(), x.bytes(), CopyKind::kDeviceToDevice);
    backend.copy(labels.raw(), batch.device_labels(), labels.bytes(), CopyKind::kDeviceToDevice);
  } else {
    x.copy_from_host(batch.images().data());
    labels.copy_from_host(batch.labels().data());
  }
}

void check_options(const TrainerOptions& o) {
  if (o.epochs < 1) throw InvalidArgument("TrainerOptions::epochs must be >= 1, got " + std::to_string(o.epochs));
  if (o.batch_size < 0) throw InvalidArgument("TrainerOptions::batch_size must be >= 0 (0 = auto)");
  if (o.batch_multiplier < 1) {
    throw InvalidArgument("TrainerOptions::batch_multiplier must be >= 1, got " +
                          std::to_string(o.batch_multiplier));
  }
}

// Marks one step's work on the GPU's compute stream as device-busy time and
// hands the intervals completed so far to the profiler (no host sync).
class DeviceBusySpan {
 public:
  DeviceBusySpan(GpuBackend* gpu, Profiler& profiler) : gpu_(gpu), profiler_(profiler) {
    if (gpu_) gpu_->begin_busy();
  }
  ~DeviceBusySpan() { end(); }
  // Right after the step's last op is issued: a stop event recorded later
  // (after a logging sync) would count the idle stream as busy.
  void end() noexcept {
    if (!gpu_) return;
    GpuBackend* gpu = std::exchange(gpu_, nullptr);
    try {
      gpu->end_busy();
      profiler_.add_device_busy(gpu->take_busy_seconds(false));
    } catch (const std::exception& e) {
      log_warn(std::string("device-busy timing failed: ") + e.what());
    }
  }
  DeviceBusySpan(const DeviceBusySpan&) = delete;
  DeviceBusySpan& operator=(const DeviceBusySpan&) = delete;

 private:
  GpuBackend* gpu_;
  Profiler& profiler_;
};

// The pool's and the staging's figures for the epoch's profile (the advisor's
// pool-hoarding, batch-too-small and transfer-bound rules read them).
MemoryFigures memory_figures(const Backend& backend, GpuBackend* gpu, const PrefetchStats& prefetch) {
  MemoryFigures m;
  if (gpu) {
    const PoolStats pool = gpu->pool_stats();
    m.device_total = gpu->device_memory_bytes();
    m.pool_cap = pool.cap;
    m.pool_reserved = pool.reserved;
    m.pool_in_use = pool.in_use;
    m.pool_peak = pool.peak_in_use;
  } else {
    const MemoryStats stats = backend.memory_stats();
    m.pool_in_use = stats.in_use_bytes;
    m.pool_peak = stats.peak_bytes;
  }
  m.pinned_bytes = prefetch.staging.pinned_bytes;
  m.pinned_fallback = prefetch.staging.fell_back;
  return m;
}

float read_scalar(const Tensor& t) {
  float v = 0;
  t.copy_to_host(&v);
  return v;
}

}  // namespace

// Per-fit state: tensors reused across steps, the logger, sums for the epoch.
struct Trainer::State {
  std::unique_ptr<detail::AsyncLogger> logger;
  Tensor x, labels, probs, dlogits, loss, correct, loss_sum, correct_sum, grad_acc;
  std::int64_t batch = 0;
  std::int64_t total_steps = 0;
  int micro = 0;  // device batches accumulated toward the next optimizer step
  std::int64_t graph_steps = 0;  // steps that ran as a replayed CUDA graph
  std::string graph_note;        // why steps ran eagerly on a GPU
  double best_val_accuracy = -1;
  int epochs_without_improvement = 0;
  std::string chrome_trace;
  ModelInfo model_info;  // what every checkpoint of this fit says about the model (lib/deploy)
};

Trainer::Trainer(nn::Model& model, TrainerOptions options, Callbacks callbacks)
    : model_(model),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)),
      profiler_(ProfilerOptions{options_.trace_steps}),
      state_(std::make_unique<State>()) {
  check_options(options_);
  optimizer_ = make_optimizer(model_, options_);
}

Trainer::~Trainer() = default;

int auto_batch_size(const nn::Model& model, int optimizer_slots, std::uint64_t max_memory) {
  int best = 1;
  for (int batch = 1; batch <= 4096; batch *= 2) {
    if (model.memory_plan(batch, optimizer_slots).total() > max_memory) break;
    best = batch;
  }
  return best;
}

FitResult Trainer::fit(const Dataset& train, const Dataset* val, LoaderOptions loader_options) {
  check_loader_dtype(loader_options.preprocess.dtype, model_.backend());
  stop_requested_.store(false);
  auto& st = *state_;
  st = State{};
  st.logger = std::make_unique<detail::AsyncLogger>(options_.log_stream);

  // Read the environment once per fit, not per epoch (its warnings too).
  if (!options_.settings) options_.settings = Config::load().settings();
  const bool auto_batch = options_.batch_size == 0;
  int batch = options_.batch_size;
  if (auto_batch) {
    const std::uint64_t cap = options_.max_memory ? options_.max_memory : (2ull << 30);
    batch = auto_batch_size(model_, optimizer_->slots(), cap);
    log_info("batch size auto: " + std::to_string(batch) + " (memory plan under " +
             std::to_string(cap >> 20) + " MiB)");
  }
  loader_options.profiler = &profiler_;
  std::optional<Loader> train_loader, val_loader;
  std::optional<Dataset> val_data;
  if (val && !val->empty() && options_.validate_every_epochs > 0) {
    if (options_.validation_subset > 0 && options_.validation_subset < val->size()) {
      std::vector<std::size_t> first(options_.validation_subset);
      for (std::size_t i = 0; i < first.size(); ++i) first[i] = i;
      val_data = val->subset(first);
    } else {
      val_data = *val;
    }
  }
  // (Re)builds the loaders for the current device batch.
  auto build_loaders = [&] {
    loader_options.batch_size = static_cast<std::size_t>(batch);
    train_loader.emplace(train, loader_options);
    if (val_data) {
      LoaderOptions vo = loader_options;
      vo.shuffle = false;
      vo.drop_last = false;
      vo.augment = {};
      vo.profiler = nullptr;  // validation is one span of its own
      val_loader.emplace(*val_data, vo);
    }
  };
  build_loaders();
  if (!options_.best_checkpoint.empty() || !options_.stop_checkpoint.empty()) {
    st.model_info = describe_training(train, val_data ? &*val_data : nullptr, loader_options, options_);
  }

  std::uint64_t batches = train_loader->batches_per_epoch();
  if (options_.max_steps_per_epoch > 0) {
    batches = std::min<std::uint64_t>(batches, options_.max_steps_per_epoch * options_.batch_multiplier);
  }
  if (options_.schedule.total_steps <= 1) {
    options_.schedule.total_steps = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(batches / options_.batch_multiplier) * options_.epochs);
  }

  FitResult result;
  // Out of memory: in auto mode halve the batch (doubling the multiplier) and
  // say to retry; otherwise checkpoint and stop.
  auto recover = [&](const OutOfMemory& e, int epoch) {
    release_step_memory();
    if (auto_batch && batch > 1) {
      batch /= 2;
      options_.batch_multiplier *= 2;
      ++result.out_of_memory_retries;
      log_warn("out of memory at batch size " + std::to_string(batch * 2) + "; continuing with batch " +
               std::to_string(batch) + " x " + std::to_string(options_.batch_multiplier) +
               " accumulated (same effective batch): " + e.what());
      build_loaders();
      return true;
    }
    save_stop_checkpoint(epoch, "out of memory");
    result.reason = StopReason::kOutOfMemory;
    result.message = e.what();
    return false;
  };

  std::uint64_t step = 0;
  for (int epoch = 0; epoch < options_.epochs; ++epoch) {
    EpochRecord record;
    bool stopped_by_oom = false;
    while (true) {
      try {
        record = run_epoch(epoch, *train_loader, step);
        const bool validate_now = val_loader && ((epoch + 1) % options_.validate_every_epochs == 0 ||
                                                 epoch + 1 == options_.epochs);
        if (validate_now && !stop_requested_.load()) {
          auto span = profiler_.span(Stage::kValidation);
          validate(*val_loader, record);
        }
        break;
      } catch (const OutOfMemory& e) {
        if (!recover(e, epoch)) {
          stopped_by_oom = true;
          break;
        }
      }
    }
    if (stopped_by_oom) break;
    record.profile = profiler_.summary();
    result.log.epochs.push_back(record);
    record_epoch(st.model_info, record);
    if (record.validated) {
      if (callbacks_.on_validation) callbacks_.on_validation(record);
      if (record.val_accuracy > st.best_val_accuracy) {
        st.best_val_accuracy = record.val_accuracy;
        st.epochs_without_improvement = 0;
        if (!options_.best_checkpoint.empty()) {
          save_model(options_.best_checkpoint, model_, st.model_info, optimizer_.get(),
                     {{"epoch", std::to_string(epoch)}, {"val_accuracy", std::to_string(record.val_accuracy)}});
        }
      } else {
        ++st.epochs_without_improvement;
      }
    }
    if (callbacks_.on_epoch) callbacks_.on_epoch(record);
    {
      char line[256];
      std::snprintf(line, sizeof line, "epoch %d: loss %.4f acc %.4f%s, %.1f images/s, %.2f s", epoch,
                    record.train_loss, record.train_accuracy,
                    record.validated ? (", val acc " + std::to_string(record.val_accuracy)).c_str() : "",
                    record.images_per_second, record.seconds);
      st.logger->push(line);
    }
    if (stop_requested_.load()) {
      result.reason = StopReason::kRequested;
      save_stop_checkpoint(epoch, "stop requested");
      break;
    }
    if (options_.early_stopping_patience > 0 &&
        st.epochs_without_improvement >= options_.early_stopping_patience) {
      result.reason = StopReason::kEarlyStopping;
      break;
    }
  }
  st.logger->flush();
  result.batch_size = batch;
  result.batch_multiplier = options_.batch_multiplier;
  result.best_val_accuracy = std::max(0.0, st.best_val_accuracy);
  result.chrome_trace = st.chrome_trace;
  result.graph_steps = st.graph_steps;
  result.graph_note = st.graph_note;
  if (as_gpu_backend(model_.backend())) {
    log_info("CUDA graphs: " + std::to_string(st.graph_steps) + " steps replayed" +
             (st.graph_note.empty() ? std::string() : "; eager steps because " + st.graph_note));
  }
  return result;
}

void Trainer::release_step_memory() {
  auto& st = *state_;
  st.x = Tensor();
  st.labels = Tensor();
  st.probs = Tensor();
  st.dlogits = Tensor();
  st.loss = Tensor();
  st.correct = Tensor();
  st.grad_acc = Tensor();
  st.batch = 0;
  st.micro = 0;
  model_.release_activations();
  model_.backend().release_workspace();
}

void Trainer::save_stop_checkpoint(int epoch, const char* why) {
  if (options_.stop_checkpoint.empty()) return;
  try {
    save_model(options_.stop_checkpoint, model_, state_->model_info, optimizer_.get(),
               {{"epoch", std::to_string(epoch)}, {"stopped", why}});
    log_info("checkpoint written to " + options_.stop_checkpoint.string() + " (" + why + ")");
  } catch (const Error& e) {
    log_error("could not write the stop checkpoint " + options_.stop_checkpoint.string() + ": " + e.what());
  }
}

EpochRecord Trainer::run_epoch(int epoch, Loader& loader, std::uint64_t& step) {
  auto& st = *state_;
  Backend& be = model_.backend();
  const Settings& settings = *options_.settings;  // set once by fit()
  // On a GPU the prefetcher uploads each batch on its copy stream into a slot
  // at a fixed device address (uint8 HWC batches, 4x fewer bytes, become float
  // CHW there), handed over on the compute stream.
  GpuBackend* gpu = as_gpu_backend(be);
  const PrefetchOptions po = prefetch_options(settings, loader, static_cast<std::uint64_t>(epoch),
                                              options_.max_steps_per_epoch * options_.batch_multiplier, gpu);
  // CUDA graphs: one per slot (each slot has its own fixed address), for
  // full-size batches of one optimizer step each. A batch of another size
  // reallocates the input and activations, so it drops the graphs for the
  // rest of the epoch.
  // Dropout draws each step's mask from a host-side seed, which a replay
  // would freeze: such models run eagerly.
  const bool dropout = model_.spec().dropout > 0.0f;
  const bool graphs_allowed =
      gpu && settings.gpu_graph != Toggle::kOff && options_.batch_multiplier == 1 && !dropout;
  std::map<int, std::unique_ptr<GraphedStep>> graphs;
  bool graphs_ended = false;
  if (gpu && !graphs_allowed) {
    st.graph_note = settings.gpu_graph == Toggle::kOff ? "STOKE_GPU_GRAPH is off"
                    : dropout ? "the model has dropout (a new mask each step; a replay would repeat one)"
                              : "batch multiplier > 1 (gradient accumulation runs eagerly)";
  }

  if (!st.loss_sum.defined()) {
    st.loss_sum = Tensor(be, {1});
    st.correct_sum = Tensor(be, {1});
  }
  be.fill(st.loss_sum, 0.0f);
  be.fill(st.correct_sum, 0.0f);

  EpochRecord record;
  record.epoch = epoch;
  profiler_.start();
  {
    std::optional<Prefetcher> ring;
    open_prefetcher(ring, po, loader, be);
    Prefetcher& prefetcher = *ring;
    const auto shape = loader.output_shape();
    while (!stop_requested_.load()) {
      std::optional<Batch> batch;
      {
        auto span = profiler_.span(Stage::kDataWait);
        batch = prefetcher.next();
      }
      if (!batch) break;
      DeviceBusySpan busy(gpu, profiler_);
      const auto n = static_cast<std::int64_t>(batch->count());
      if (graphs_allowed && !graphs_ended && n != static_cast<std::int64_t>(po.batch_size)) {
        graphs.clear();
        graphs_ended = true;
      }
      if (st.batch != n) {
        st.x = Tensor(be, {n, static_cast<std::int64_t>(shape[1]), static_cast<std::int64_t>(shape[2]),
                           static_cast<std::int64_t>(shape[3])});
        st.labels = Tensor(be, {n}, DType::kInt32);
        st.batch = n;
      }
      // The batch into the static input: a device-to-device copy from the
      // slot (captured into the graph) or an upload from the host slot.
      const bool on_device = batch->device_images() != nullptr;
      const auto copy_in = [&] { copy_batch_in(be, *batch, st.x, st.labels); };
      const auto forward = [&] {
        const Tensor& logits = model_.forward(st.x, true);
        if (!st.probs.defined() || st.probs.shape() != logits.shape()) {
          st.probs = Tensor(be, logits.shape());
          st.dlogits = Tensor(be, logits.shape());
          st.loss = Tensor(be, {1});
          st.correct = Tensor(be, {1});
        }
        be.softmax_cross_entropy_forward(logits, st.labels, st.probs, st.loss, st.correct);
        be.softmax_cross_entropy_backward(st.probs, st.labels, st.dlogits);
        be.accumulate(st.correct_sum, st.correct);
        be.scale(st.loss, static_cast<float>(n));  // loss is a batch mean: sum it per sample
        be.accumulate(st.loss_sum, st.loss);
      };
      const bool graphed = graphs_allowed && !graphs_ended && on_device;
      if (graphed) {
        // prepare() writes this step's rate outside the graph; the replay
        // reads it. The whole step replays at once: it is reported as forward.
        const float lr = options_.schedule.lr(static_cast<std::int64_t>(step));
        optimizer_->prepare(lr);
        auto& g = graphs[batch->slot()];
        if (!g) g = std::make_unique<GraphedStep>(be, settings.gpu_graph);
        try {
          auto span = profiler_.span(Stage::kForward);
          g->run([&] {
            copy_in();
            forward();
            model_.backward(st.dlogits);
            optimizer_->apply(model_);
          });
        } catch (...) {
          optimizer_->set_steps(optimizer_->steps() - 1);  // the step did not happen
          throw;
        }
        busy.end();
        batch->release();
        if (g->replaying()) {
          ++st.graph_steps;
        } else if (!g->eager_reason().empty()) {
          st.graph_note = g->eager_reason();
        }
        record.images += static_cast<std::uint64_t>(n);
        profiler_.step_done(static_cast<std::uint64_t>(n));
        finish_step(epoch, step, record, lr, n);
        continue;
      }
      {
        auto span = profiler_.span(Stage::kHostToDevice);
        copy_in();
      }
      batch->release();
      {
        auto span = profiler_.span(Stage::kForward);
        forward();
      }
      {
        auto span = profiler_.span(Stage::kBackward);
        model_.backward(st.dlogits);
      }
      record.images += static_cast<std::uint64_t>(n);
      const bool last_micro = ++st.micro == options_.batch_multiplier;
      if (options_.batch_multiplier > 1) {
        auto span = profiler_.span(Stage::kUpdate);
        Tensor& grads = model_.gradients();
        if (!st.grad_acc.defined()) st.grad_acc = Tensor(be, grads.shape());
        if (st.micro == 1) {
          be.copy(st.grad_acc.raw(), grads.raw(), grads.bytes(), CopyKind::kDeviceToDevice);
        } else {
          be.accumulate(st.grad_acc, grads);
        }
        if (last_micro) {
          be.copy(grads.raw(), st.grad_acc.raw(), grads.bytes(), CopyKind::kDeviceToDevice);
          be.scale(grads, 1.0f / static_cast<float>(options_.batch_multiplier));
        }
      }
      profiler_.step_done(static_cast<std::uint64_t>(n));
      if (!last_micro) {
        busy.end();
        continue;
      }
      st.micro = 0;
      const float lr = options_.schedule.lr(static_cast<std::int64_t>(step));
      {
        auto span = profiler_.span(Stage::kUpdate);
        optimizer_->step(model_, lr);
      }
      busy.end();
      finish_step(epoch, step, record, lr, n);
    }
    prefetcher.stop();
    profiler_.set_memory(memory_figures(be, gpu, prefetcher.stats()));
  }
  be.synchronize();
  if (gpu) profiler_.add_device_busy(gpu->take_busy_seconds(true));
  if (st.micro != 0) {
    log_warn("epoch " + std::to_string(epoch) + " ended with " + std::to_string(st.micro) + " of " +
             std::to_string(options_.batch_multiplier) +
             " accumulated device batches; their gradients are discarded, not applied");
    st.micro = 0;
  }
  const auto summary = profiler_.summary();
  record.seconds = summary.wall_seconds;
  record.images_per_second = summary.images_per_second();
  if (record.images > 0) {
    record.train_loss = read_scalar(st.loss_sum) / static_cast<double>(record.images);
    record.train_accuracy = read_scalar(st.correct_sum) / static_cast<double>(record.images);
  }
  if (options_.trace_steps > 0) st.chrome_trace = profiler_.chrome_trace();
  return record;
}

void Trainer::finish_step(int epoch, std::uint64_t& step, EpochRecord& record, float lr, std::int64_t n) {
  auto& st = *state_;
  ++step;
  ++record.steps;
  StepInfo info{epoch, step, 0.0f, 0.0f, false, lr};
  if (options_.log_every_steps > 0 && step % static_cast<std::uint64_t>(options_.log_every_steps) == 0) {
    auto span = profiler_.span(Stage::kLogging);
    // st.loss holds the batch's loss sum (scaled by n for the epoch sums).
    info.loss = read_scalar(st.loss) / static_cast<float>(n);
    info.accuracy = read_scalar(st.correct) / static_cast<float>(n);
    info.has_loss = true;
    char line[160];
    std::snprintf(line, sizeof line, "epoch %d step %llu: loss %.4f acc %.4f lr %.5f", epoch,
                  static_cast<unsigned long long>(step), info.loss, info.accuracy, lr);
    st.logger->push(line);
  }
  if (callbacks_.on_step) callbacks_.on_step(info);
}

void Trainer::validate(Loader& loader, EpochRecord& record) {
  // Through a prefetch ring like training: the next batches are prepared (and
  // on a GPU uploaded) while the model evaluates the current one.
  Backend& be = model_.backend();
  const auto shape = loader.output_shape();
  const PrefetchOptions po = prefetch_options(*options_.settings, loader, 0, 0, as_gpu_backend(be));
  std::optional<Prefetcher> ring;
  open_prefetcher(ring, po, loader, be);
  Tensor x, y;
  double loss_sum = 0, correct_sum = 0;
  std::uint64_t seen = 0;
  while (std::optional<Batch> batch = ring->next()) {
    const auto count = static_cast<std::int64_t>(batch->count());
    if (!x.defined() || x.dim(0) != count) {
      x = Tensor(be, {count, static_cast<std::int64_t>(shape[1]), static_cast<std::int64_t>(shape[2]),
                      static_cast<std::int64_t>(shape[3])});
      y = Tensor(be, {count}, DType::kInt32);
    }
    copy_batch_in(be, *batch, x, y);
    batch->release();
    const auto stats = nn::evaluate(model_, x, y);
    loss_sum += static_cast<double>(stats.loss) * count;
    correct_sum += static_cast<double>(stats.accuracy) * count;
    seen += static_cast<std::uint64_t>(count);
  }
  record.validated = seen > 0;
  if (seen > 0) {
    record.val_loss = loss_sum / static_cast<double>(seen);
    record.val_accuracy = correct_sum / static_cast<double>(seen);
  }
}

}  // namespace stoke
