// GPU step time of the ResNet-style net (stoke's builder, 3x224x224, 1000
// classes) on the CUDA backend: forward + softmax cross-entropy + backward +
// SGD per step, eager and replayed as a CUDA graph, timed with CUDA events
// around `steps` steps (one synchronization per measurement). Prints the
// cuDNN algorithms chosen for every convolution and their workspace.
// bench/pytorch_gpu_step.py runs the same net in PyTorch for the comparison.
//
//   stoke_bench_cuda_step [--batches 64,256] [--steps 20] [--warmup 3]
//                         [--modes eager,graph] [--strict] [--heuristic]
//                         [--workspace-mb N] [--precision fp32|bf16|fp16] [--json FILE]
// --workspace-mb: the convolution workspace limit (0, the default: the
// backend's automatic limit), for an A/B of the limit in one run.
// Exits 0 with a "skipped" line where no CUDA device is usable.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "stoke/cuda.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/optim.hpp"
#include "stoke/system.hpp"

namespace {

using namespace stoke;

struct Args {
  std::vector<int> batches = {64, 256};
  int steps = 20;
  int warmup = 3;
  std::vector<std::string> modes = {"eager", "graph"};
  bool strict = false;
  bool benchmark_algos = true;
  std::size_t workspace_mb = 0;
  Precision precision = Precision::kFp32;  // the convolutions' (set_training_precision)
  std::string json;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgument("missing value after " + k);
      return argv[++i];
    };
    if (k == "--batches") {
      a.batches.clear();
      for (const auto& b : split(value())) a.batches.push_back(std::stoi(b));
    } else if (k == "--steps") {
      a.steps = std::stoi(value());
    } else if (k == "--warmup") {
      a.warmup = std::stoi(value());
    } else if (k == "--modes") {
      a.modes = split(value());
    } else if (k == "--strict") {
      a.strict = true;
    } else if (k == "--heuristic") {
      a.benchmark_algos = false;
    } else if (k == "--workspace-mb") {
      a.workspace_mb = std::stoul(value());
    } else if (k == "--precision") {
      const std::string p = value();
      if (p != "fp32" && p != "bf16" && p != "fp16")
        throw InvalidArgument("--precision " + p + ": expected fp32, bf16 or fp16");
      a.precision = p == "bf16"   ? Precision::kBf16
                    : p == "fp16" ? Precision::kFp16
                                  : Precision::kFp32;
    } else if (k == "--json") {
      a.json = value();
    } else {
      throw InvalidArgument("unknown argument " + k +
                            " (use --batches --steps --warmup --modes --strict --heuristic "
                            "--workspace-mb --precision "
                            "--json)");
    }
  }
  return a;
}

nn::ModelSpec resnet224() {
  nn::ModelSpec spec;
  spec.architecture = nn::Architecture::kResNet;
  spec.in_channels = 3;
  spec.height = 224;
  spec.width = 224;
  spec.classes = 1000;
  spec.stem_width = 32;
  spec.widths = {64, 128, 256, 512};
  spec.strides = {2, 2, 2, 2};
  spec.blocks_per_stage = 2;
  return spec;
}

struct Result {
  int batch;
  std::string mode;
  double ms_per_step;
  double images_per_s;
  std::string note;
};

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered even into a file: a run cut off by a timeout keeps its lines.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    const Args args = parse(argc, argv);
    const SystemInfo sys = query_system();
    if (sys.cuda.gpus.empty()) {
      std::printf("skipped: no CUDA device (%s)\n", sys.cuda.device_error.empty()
                                                        ? sys.cuda.plugin_error.c_str()
                                                        : sys.cuda.device_error.c_str());
      return 0;
    }
    const Config config = Config::load();
    std::printf("device: %s, cuDNN %d, %s, convolutions in %s, conv algorithms by %s\n",
                sys.cuda.gpus[0].name.c_str(), sys.cuda.cudnn_version,
                args.strict ? "strict FP32" : "TF32 allowed", to_string(args.precision),
                args.benchmark_algos ? "benchmark (cudnnFind)" : "heuristics");
    const nn::ModelSpec spec = resnet224();
    std::vector<Result> results;
    int failures = 0;
    for (int batch : args.batches) {
      // One batch size failing (out of memory, a library error) is reported
      // and the next one still runs.
      try {
        CudaBackendOptions options = cuda_backend_options(config.settings());
        options.strict_fp32 = args.strict;
        options.conv_benchmark = args.benchmark_algos;
        options.conv_workspace_limit = args.workspace_mb << 20;
        // A fresh backend (and pool) per batch size: the larger batch does not
        // inherit the smaller one's fragmentation.
        auto gpu = create_cuda_backend(0, config.settings(), options);
        // bf16/fp16: the convolutions' passes in that type, fp32 elsewhere
        // (no loss scaling here: a fixed net on fixed data, timed).
        gpu->set_training_precision(args.precision);
        auto model = nn::build_model(*gpu, spec, 1);
        nn::SgdOptions sgd_options;
        nn::Sgd sgd(*model, sgd_options);
        nn::TrainStep train(*model, sgd);

        // The batch sits in a fixed device slot (as the prefetcher's); the step
        // copies it into its static input, so graph replays read new batches.
        const Shape xs = model->input_shape(batch);
        Tensor slot_x(*gpu, xs), slot_y(*gpu, {batch}, DType::kInt32);
        Tensor x(*gpu, xs), y(*gpu, {batch}, DType::kInt32);
        {
          std::vector<float> hx(static_cast<std::size_t>(shape_numel(xs)));
          std::vector<std::int32_t> hy(static_cast<std::size_t>(batch));
          std::mt19937 rng(42);
          std::normal_distribution<float> dist(0.0f, 1.0f);
          for (auto& v : hx) v = dist(rng);
          for (auto& v : hy) v = static_cast<std::int32_t>(rng() % 1000);
          slot_x.copy_from_host(hx.data());
          slot_y.copy_from_host(hy.data());
        }
        // As a training loop runs it: the step's values outside the graph,
        // the copies from the fixed slot, forward, backward and update inside.
        const auto body = [&] {
          gpu->copy(x.raw(), slot_x.raw(), x.bytes(), CopyKind::kDeviceToDevice);
          gpu->copy(y.raw(), slot_y.raw(), y.bytes(), CopyKind::kDeviceToDevice);
          train.issue(x, y);
        };
        std::size_t algos_printed = 0;
        for (const std::string& mode : args.modes) {
          GraphedStep graphed(*gpu, mode == "graph" ? Toggle::kOn : Toggle::kOff);
          const auto step = [&] {
            train.prepare(0.05f);
            graphed.run(body);
          };
          for (int i = 0; i < args.warmup + 2; ++i) step();  // +2: warm-up and capture
          gpu->synchronize();
          std::string note;
          if (mode == "graph" && !graphed.replaying())
            note = "capture failed, eager: " + graphed.eager_reason();
          const float ms = gpu->time_ms(step, args.steps);
          const nn::StepStats stats = train.stats();
          results.push_back({batch, mode, ms, batch * 1000.0 / ms, note});
          std::printf("batch %4d %-5s %9.3f ms/step %9.1f img/s  loss %.4f%s%s\n", batch,
                      mode.c_str(), static_cast<double>(ms), batch * 1000.0 / ms,
                      static_cast<double>(stats.loss), note.empty() ? "" : "  ", note.c_str());
          const auto algos = gpu->conv_algorithms();
          for (; algos_printed < algos.size(); ++algos_printed) {
            const ConvAlgoChoice& a = algos[algos_printed];
            std::printf("  cudnn %-15s %-22s ws %10zu B %s%s  %s\n", a.pass.c_str(),
                        a.algorithm_name.c_str(), a.workspace_bytes,
                        a.benchmarked ? "timed" : "heuristic", a.tensor_ops ? " tc" : "",
                        a.key.c_str());
          }
        }
        const MemoryStats mem = gpu->memory_stats();
        // Beside the peak, what the model's plan says a step needs (the
        // activations include the input gradients the backward keeps).
        const nn::MemoryPlan plan = model->memory_plan(batch, 0);
        const auto gib = [](std::size_t b) { return static_cast<double>(b) / (1ull << 30); };
        std::printf(
            "batch %4d peak pool memory %.2f GiB (plan %.2f GiB: activations %.2f, "
            "workspace %.2f, parameters and gradients %.2f), kernels: %s\n",
            batch, gib(mem.peak_bytes), gib(plan.total()), gib(plan.activations),
            gib(plan.workspace), gib(plan.parameters + plan.gradients),
            gpu->kernel_origin().c_str());
      } catch (const std::exception& e) {
        ++failures;
        std::printf("batch %4d FAILED: %s\n", batch, e.what());
      }
    }
    // The summary last: the device-check script keeps the tail of the output.
    std::printf("summary (stoke, %s, convolutions in %s):\n",
                args.strict ? "strict FP32" : "TF32 allowed", to_string(args.precision));
    for (const Result& r : results) {
      std::printf("  batch %4d %-5s %9.3f ms/step %9.1f img/s%s\n", r.batch, r.mode.c_str(),
                  r.ms_per_step, r.images_per_s, r.note.empty() ? "" : "  (capture failed, eager)");
    }
    if (!args.json.empty()) {
      std::ofstream out(args.json);
      out << "{\"bench\":\"stoke_cuda_step\",\"net\":\"resnet224\",\"strict\":"
          << (args.strict ? "true" : "false") << ",\"results\":[";
      for (std::size_t i = 0; i < results.size(); ++i) {
        const Result& r = results[i];
        out << (i ? "," : "") << "{\"batch\":" << r.batch << ",\"mode\":\"" << r.mode
            << "\",\"ms_per_step\":" << r.ms_per_step << ",\"images_per_s\":" << r.images_per_s
            << ",\"graph_ok\":" << (r.note.empty() ? "true" : "false") << "}";
      }
      out << "]}\n";
    }
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stoke_bench_cuda_step: %s\n", e.what());
    return 1;
  }
}
