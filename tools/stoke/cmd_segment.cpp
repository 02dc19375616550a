// stoke train --task segment: a U-Net (stoke/nn/segmentation.hpp) trained
// on a folder of images and masks (SegmentationLoader), written as a
// segmentation model file (stoke/segment.hpp). stoke eval and stoke predict
// on such a file are in cmd_segment_use.cpp. docs/segmentation-cli.md.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>

#include "args.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "stoke/stoke.hpp"

namespace {

namespace fs = std::filesystem;
using stoke_cli::UsageError;

constexpr const char* kTrainUsage =
    R"(usage: stoke train --task segment --data DIR [--val DIR] --arch resnet18|resnet34|resnet50
                   [--width F (1)] [--init ENCODER.safetensors] --size N [--channels 1|3 (3)]
                   [--normalize imagenet(default)|minmax|mean=..,std=..] [--epochs E (10)]
                   [--batch B (8)] [--lr LR (0.001)] [--dice W (0.5)] [--hflip P (0.5)]
                   [--class-weights none|auto|W0,W1,... (none)]
                   [--seed S (0)] --out MODEL [--json]
  Trains a U-Net (smp's Unet on a torchvision ResNet encoder; --width scales the encoder and
  the decoder's channels) on DIR/images/<name> with DIR/masks/<name>.png (class indices, 255 =
  ignored) and DIR/classes.txt (background first), with Adam, cross-entropy plus --dice x soft
  Dice, and horizontal flips. --init loads a torchvision backbone's weights (safetensors,
  torchvision names, the same --arch and --width; its fc.* left out) into the encoder; the
  decoder starts from random weights. --class-weights weighs the cross-entropy per class: auto gives
  class c 1/sqrt(its share of the training pixels), scaled so the most common class has 1 (at
  most 100); a list gives one weight per class. Images are resized to N x N (a multiple of 32). Each epoch prints
  the training loss and, with --val, the validation loss, pixel accuracy and mean IoU (at N x N).
  MODEL is written atomically after the last epoch, or after the batch running when SIGINT or
  SIGTERM arrives.
)";

std::atomic<bool> g_stop{false};
extern "C" void on_segment_interrupt(int) {
  g_stop.store(true);  // lock-free atomic store: async-signal-safe
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct Batch {
  std::vector<float> images;
  std::vector<std::int32_t> labels;
  stoke::Tensor x, y;
};

// Batch `b` of `loader` into tensors of its real size on `backend`.
std::size_t load_batch(stoke::SegmentationLoader& loader, std::uint64_t epoch, std::uint64_t b,
                       stoke::Backend& backend, Batch& batch) {
  const auto is = loader.image_shape();
  const auto ls = loader.label_shape();
  batch.images.resize(is[0] * is[1] * is[2] * is[3]);
  batch.labels.resize(ls[0] * ls[1] * ls[2]);
  const std::size_t n = loader.fill_batch(epoch, b, batch.images, batch.labels);
  const auto i64 = [](std::size_t v) { return static_cast<std::int64_t>(v); };
  const stoke::Shape xs{i64(n), i64(is[1]), i64(is[2]), i64(is[3])};
  const stoke::Shape ys{i64(n), i64(ls[1]), i64(ls[2])};
  if (!batch.x.defined() || batch.x.shape() != xs) batch.x = stoke::Tensor(backend, xs);
  if (!batch.y.defined() || batch.y.shape() != ys)
    batch.y = stoke::Tensor(backend, ys, stoke::DType::kInt32);
  batch.x.copy_from_host(batch.images.data());
  batch.y.copy_from_host(batch.labels.data());
  return n;
}

struct ValResult {
  double loss = 0, pixel_accuracy = 0, mean_iou = 0;
  std::vector<double> iou;
};

// The validation set at the network's size: eval-mode losses and the pixel
// confusion matrix of the arg-max labels.
ValResult validate(stoke::SegmentationLoader& loader, stoke::nn::Model& model,
                   stoke::nn::SegmentationStep& step, int classes, std::int32_t ignore) {
  Batch batch;
  std::vector<std::uint64_t> confusion;
  std::vector<float> logits;
  std::vector<std::uint8_t> predicted;
  double loss = 0;
  std::size_t samples = 0;
  for (std::size_t b = 0; b < loader.batches_per_epoch(); ++b) {
    const std::size_t n = load_batch(loader, 0, b, model.backend(), batch);
    loss += step.evaluate(batch.x, batch.y).loss * static_cast<double>(n);
    samples += n;
    const stoke::Tensor& l = step.logits();
    logits.resize(static_cast<std::size_t>(l.numel()));
    l.copy_to_host(logits.data());
    const auto h = static_cast<int>(l.shape()[2]), w = static_cast<int>(l.shape()[3]);
    predicted.resize(n * static_cast<std::size_t>(h) * w);
    stoke::argmax_labels(logits, n, classes, h, w, predicted);
    stoke::add_confusion(std::span(batch.labels).first(predicted.size()), predicted, classes,
                         ignore, confusion);
  }
  ValResult r;
  r.loss = samples ? loss / static_cast<double>(samples) : NAN;
  std::uint64_t all = 0, right = 0;
  const auto k = static_cast<std::size_t>(classes);
  for (std::size_t i = 0; i < confusion.size(); ++i) {
    all += confusion[i];
    if (i / k == i % k) right += confusion[i];
  }
  r.pixel_accuracy = all ? static_cast<double>(right) / static_cast<double>(all) : NAN;
  r.iou = stoke::class_iou(confusion, classes);
  r.mean_iou = stoke::mean_iou(r.iou);
  return r;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return std::isfinite(v) ? buf : "null";
}

// --class-weights: none, auto (1/sqrt(share), the most common class 1, at
// most 100) or one positive number per class.
std::vector<float> class_weights(const std::string& text, const stoke::SegmentationDataset& data) {
  const auto& pixels = data.class_pixels();
  const std::size_t k = data.class_names().size();
  std::vector<float> w;
  if (text == "none") return w;
  if (text == "auto") {
    const std::uint64_t top = *std::max_element(pixels.begin(), pixels.end());
    for (std::uint64_t n : pixels)
      w.push_back(n ? std::min(100.0f, static_cast<float>(std::sqrt(double(top) / double(n))))
                    : 1.0f);
    return w;
  }
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const float v = std::strtof(item.c_str(), &end);
    if (item.empty() || *end || !(v > 0) || !std::isfinite(v))
      throw UsageError("--class-weights: '" + item + "' is not a positive number");
    w.push_back(v);
    at = comma + 1;
  }
  if (w.size() != k)
    throw UsageError("--class-weights: " + std::to_string(w.size()) + " weights for " +
                     std::to_string(k) + " classes (or none, auto)");
  return w;
}

int train(int argc, char** argv) {
  stoke_cli::Args args(
      argc, argv,
      {"task", "data", "val", "arch", "width", "init", "size", "channels", "normalize", "epochs",
       "batch", "lr", "dice", "hflip", "seed", "out", "class-weights"},
      {"json"});
  const std::string out = args.required("out");
  const std::string data = args.required("data");
  const std::string arch_name = args.required("arch");
  const auto arch =
      arch_name == "resnet18"   ? stoke::nn::Architecture::kResNet18
      : arch_name == "resnet34" ? stoke::nn::Architecture::kResNet34
      : arch_name == "resnet50"
          ? stoke::nn::Architecture::kResNet50
          : throw UsageError("--arch: '" + arch_name + "' is not resnet18, resnet34 or resnet50");
  if (!args.has("size")) throw UsageError("--size is required (a multiple of 32)");
  const int size = args.get_int("size", 0, 32, 8192);
  if (size % 32 != 0)
    throw UsageError("--size: " + std::to_string(size) + " is not a multiple of 32");
  const double width = args.get_double("width", 1.0, 1.0 / 64, 4.0);
  const int channels = args.get_int("channels", 3, 1, 3);
  if (channels == 2) throw UsageError("--channels: 2 is not 1 or 3");
  const int epochs = args.get_int("epochs", 10, 1, 100000);
  const int batch_size = args.get_int("batch", 8, 1, 4096);
  const double lr = args.get_double("lr", 1e-3, 1e-9, 10.0);
  const double dice = args.get_double("dice", 0.5, 0.0, 100.0);
  const double hflip = args.get_double("hflip", 0.5, 0.0, 1.0);
  const auto seed = static_cast<std::uint64_t>(args.get_int("seed", 0, 0, 1 << 30));
  const bool json = args.has("json");
  stoke_cli::check_writable("--out", out);
  stoke_cli::OutputLock lock("--out", out);

  stoke::init();
  const auto train_set = stoke::SegmentationDataset::from_folder(data);
  std::optional<stoke::SegmentationDataset> val_set;
  if (args.has("val")) {
    val_set = stoke::SegmentationDataset::from_folder(args.get("val"));
    if (val_set->class_names() != train_set.class_names())
      throw UsageError("--val: its classes.txt names other classes than --data's");
  }
  const auto& names = train_set.class_names();
  const int classes = static_cast<int>(names.size());
  if (classes > stoke::kMaxSegmentationClasses)
    throw UsageError("--data: " + std::to_string(classes) + " classes; at most 255");
  std::fprintf(stderr, "%s\n", train_set.report_string().c_str());

  stoke::nn::ModelSpec spec;
  spec.architecture = arch;
  spec.in_channels = channels;
  spec.height = spec.width = size;
  spec.classes = classes;
  spec.width_multiplier = static_cast<float>(width);
  for (int c : {256, 128, 64, 32, 16})
    spec.decoder_channels.push_back(std::max(1, static_cast<int>(std::lround(c * width))));
  stoke::Backend& backend = stoke::default_backend();
  auto model = stoke::nn::build_model(backend, spec, seed + 1);
  if (args.has("init")) {
    const auto r = stoke::interchange::load_encoder_safetensors(*model, args.get("init"));
    std::fprintf(stderr, "init: %zu encoder tensors from %s%s\n", r.loaded.size(),
                 args.get("init").c_str(), r.stem_summed ? ", RGB stem summed to gray" : "");
  }

  stoke::PreprocessOptions pre;
  pre.width = pre.height = size;
  pre.channels = channels;
  pre.normalization = stoke_cli::parse_normalization(args.get("normalize", "imagenet"));
  stoke::SegmentationLoaderOptions lo;
  lo.preprocess = pre;
  lo.batch_size = static_cast<std::size_t>(batch_size);
  lo.seed = seed;
  lo.augment.hflip_probability = static_cast<float>(hflip);
  stoke::SegmentationLoader loader(train_set, lo);
  stoke::SegmentationLoaderOptions vo = lo;
  vo.augment = {};
  vo.shuffle = false;
  std::optional<stoke::SegmentationLoader> val_loader;
  if (val_set) val_loader.emplace(*val_set, vo);

  stoke::nn::SegmentationLossOptions loss;
  loss.dice_weight = static_cast<float>(dice);
  const std::string weights_text = args.get("class-weights", "none");
  loss.class_weights = class_weights(weights_text, train_set);
  loss.ignore_label = train_set.ignore_label() >= 0 ? train_set.ignore_label() : -100;
  stoke::nn::SegmentationStep step(*model, loss);
  stoke::nn::Adam adam(*model);

  stoke::ModelInfo info;
  info.class_names = names;
  info.preprocess = pre;
  info.staged = true;
  info.stoke_version = stoke::version();
  info.created = utc_now();
  info.dataset_source = fs::absolute(data).string();
  info.reference_backend = backend.name();
  info.validation_samples = val_set ? val_set->size() : 0;
  info.trainer_options = {{"task", "segment"},
                          {"arch", arch_name},
                          {"width", number(width)},
                          {"size", std::to_string(size)},
                          {"epochs", std::to_string(epochs)},
                          {"batch", std::to_string(batch_size)},
                          {"lr", number(lr)},
                          {"dice", number(dice)},
                          {"hflip", number(hflip)},
                          {"seed", std::to_string(seed)},
                          {"optimizer", "adam"},
                          {"init", args.get("init", "none")},
                          {"class_weights", weights_text}};

  std::signal(SIGINT, on_segment_interrupt);
  std::signal(SIGTERM, on_segment_interrupt);
  Batch batch;
  std::string epochs_json;
  int done = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int e = 0; e < epochs && !g_stop.load(); ++e) {
    double sum = 0, acc = 0;
    std::size_t seen = 0;
    for (std::size_t b = 0; b < loader.batches_per_epoch() && !g_stop.load(); ++b) {
      const std::size_t n = load_batch(loader, static_cast<std::uint64_t>(e), b, backend, batch);
      const auto s = step.step(batch.x, batch.y, adam, static_cast<float>(lr));
      if (!std::isfinite(s.loss))
        throw stoke::NonFinite("stoke train: the loss is " + number(s.loss) + " at epoch " +
                               std::to_string(e + 1) + " batch " + std::to_string(b + 1) +
                               " (lower --lr)");
      sum += s.loss * static_cast<double>(n);
      acc += s.pixel_accuracy * static_cast<double>(n);
      seen += n;
    }
    if (g_stop.load() && seen < train_set.size()) break;  // a partial epoch is not reported
    ++done;
    const double train_loss = seen ? sum / static_cast<double>(seen) : NAN;
    const double train_acc = seen ? acc / static_cast<double>(seen) : NAN;
    ValResult v;
    v.loss = v.pixel_accuracy = v.mean_iou = NAN;
    if (val_loader) v = validate(*val_loader, *model, step, classes, val_set->ignore_label());
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr,
                 "epoch %d/%d: loss %.4f pixel accuracy %.4f | val loss %s pixel accuracy %s "
                 "mean IoU %s (%.1f s)\n",
                 e + 1, epochs, train_loss, train_acc, number(v.loss).c_str(),
                 number(v.pixel_accuracy).c_str(), number(v.mean_iou).c_str(), secs);
    info.history.push_back(std::to_string(e + 1) + "," + number(train_loss) + "," +
                           number(train_acc) + "," + number(v.loss) + "," +
                           number(v.pixel_accuracy));
    info.metrics["train_loss"] = number(train_loss);
    info.metrics["val_mean_iou"] = number(v.mean_iou);
    info.metrics["val_pixel_accuracy"] = number(v.pixel_accuracy);
    epochs_json += std::string(epochs_json.empty() ? "" : ", ") +
                   "{\"epoch\": " + std::to_string(e + 1) + ", \"loss\": " + number(train_loss) +
                   ", \"pixel_accuracy\": " + number(train_acc) +
                   ", \"val_loss\": " + number(v.loss) +
                   ", \"val_pixel_accuracy\": " + number(v.pixel_accuracy) +
                   ", \"val_mean_iou\": " + number(v.mean_iou) + "}";
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  const bool interrupted = g_stop.load();

  // The self-check reference: the first validation (else training) image as
  // the validation loader feeds it.
  stoke::SegmentationLoaderOptions ro = vo;
  ro.batch_size = 1;
  stoke::SegmentationLoader ref_loader(val_set ? *val_set : train_set, ro);
  std::vector<float> ref(static_cast<std::size_t>(channels) * size * size);
  std::vector<std::int32_t> ref_labels(static_cast<std::size_t>(size) * size);
  ref_loader.fill_batch(0, 0, ref, ref_labels);
  stoke::save_segmentation_model(out, *model, info, ref, train_set.ignore_label());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (json) {
    std::printf(
        "{\"model\": %s, \"task\": \"segment\", \"classes\": %d, \"train_images\": %zu, "
        "\"val_images\": %zu, \"epochs_run\": %d, \"interrupted\": %s, \"seconds\": %.3f, "
        "\"epochs\": [%s]}\n",
        stoke_cli::json_string(out).c_str(), classes, train_set.size(),
        val_set ? val_set->size() : 0, done, interrupted ? "true" : "false", secs,
        epochs_json.c_str());
  } else {
    std::printf("%s: %d of %d epochs in %.1f s%s, written to %s\n",
                interrupted ? "interrupted" : "trained", done, epochs, secs,
                val_set ? (", val mean IoU " + info.metrics["val_mean_iou"]).c_str() : "",
                out.c_str());
  }
  return interrupted ? 130 : 0;
}

}  // namespace

namespace stoke_cli {

bool wants_segment_task(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--task=segment" ||
        (a == "--task" && i + 1 < argc && std::string(argv[i + 1]) == "segment"))
      return true;
  }
  return false;
}

int segment_train(int argc, char** argv) {
  return run_guarded("train", kTrainUsage, train, argc, argv);
}

}  // namespace stoke_cli
