// Embedding stoke in a trainer: train the ResNet-style net on a folder of
// images (root/<class>/*.jpg|png), validate, keep the best checkpoint, and
// print where the time went. Ctrl-C stops after the current step and still
// writes the log.
//
//   train_folder <root> [epochs] [input size]
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "stoke/stoke.hpp"

namespace {
stoke::Trainer* g_trainer = nullptr;  // for the signal handler only
extern "C" void on_interrupt(int) {
  if (g_trainer) g_trainer->request_stop();  // an atomic store: async-signal-safe
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <root> [epochs] [input size]\n", argv[0]);
    return 2;
  }
  try {
    const auto runtime = stoke::init();  // device, threads and SIMD from STOKE_* / STOKE_CONFIG
    const int size = argc > 3 ? std::atoi(argv[3]) : 128;
    auto data = stoke::Dataset::from_folder(argv[1]);
    const auto split = stoke::stratified_split(data, std::vector<double>{80, 20}, /*seed=*/42);
    const auto train = data.subset(split.train), val = data.subset(split.val);

    stoke::nn::ModelSpec spec;  // ResNet-style: widths 32/64/128, two blocks per stage
    spec.in_channels = 3;
    spec.height = spec.width = size;
    spec.classes = static_cast<int>(data.class_names().size());
    auto model = stoke::nn::build_model(stoke::default_backend(), spec, /*seed=*/42);

    stoke::LoaderOptions loader;
    loader.preprocess.width = loader.preprocess.height = size;
    loader.augment.hflip_probability = 0.5f;
    stoke::TrainerOptions options;
    options.context =
        runtime.context;  // settings, SIMD level and arena for the trainer and its loaders
    options.epochs = argc > 2 ? std::atoi(argv[2]) : 5;
    options.batch_size = 0;  // auto: the largest batch whose memory plan fits
    options.best_checkpoint = "best.ckpt";
    options.schedule.kind = stoke::nn::ScheduleKind::kCosine;

    stoke::Trainer trainer(*model, options);
    g_trainer = &trainer;
    std::signal(SIGINT, on_interrupt);
    const auto result = trainer.fit(train, &val, loader);
    g_trainer = nullptr;

    result.log.save("train-log.json");
    std::cout << "stopped: " << stoke::to_string(result.reason) << ", batch " << result.batch_size
              << ", best validation accuracy " << result.best_val_accuracy << "\n"
              << stoke::format_profile(result.log.epochs.back().profile);
    return 0;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "train_folder: %s\n", e.what());
    return 1;
  }
}
