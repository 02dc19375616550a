// stoke: one command for the whole workflow, git-style subcommands.
//
//   stoke <command> [options]      stoke help      stoke <command> --help
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "commands.hpp"
#include "stoke/version.hpp"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

// One line per subcommand; other helpers' subcommands add theirs here.
constexpr Command kCommands[] = {
    {"info", cmd_info, "the machine, the devices and the effective configuration"},
    {"bench", cmd_bench, "baseline vs tuned training on the synthetic inspection set"},
    {"dataset", cmd_dataset, "write the synthetic inspection dataset into a folder"},
    {"train", cmd_train, "train a model on a folder of images and write a model file"},
    {"predict", cmd_predict, "classify images with a model file"},
    {"eval", cmd_eval, "evaluate a model file on a labelled folder; JSON + HTML report"},
    {"export", cmd_export, "write a model file as ONNX"},
    {"import", cmd_import,
     "a model trained elsewhere (safetensors/ONNX) as a deployable model file"},
    {"quantize", cmd_quantize, "a model file in bf16, written when it agrees with fp32"},
    {"audit", cmd_audit, "duplicates, leaks across splits, imbalance and bad files of a dataset"},
};

int usage(std::FILE* out) {
  std::fprintf(
      out, "stoke %s\nusage: stoke <command> [options]   (stoke <command> --help)\n\ncommands:\n",
      stoke::version());
  for (const auto& c : kCommands) std::fprintf(out, "  %-9s %s\n", c.name, c.summary);
  return out == stdout ? 0 : 2;
}

// OpenBLAS starts its worker threads when it is loaded, before main(), and
// each maps a 128 MiB buffer at once; under an address-space limit
// (ulimit -v) a worker whose mapping fails retries forever and the process
// never exits. stoke calls BLAS on one thread per task anyway (blas.cpp), so
// the command runs itself again with OPENBLAS_NUM_THREADS=1 (the variable
// OpenBLAS reads at load; the ranks of --nproc inherit it) unless the user
// set it. If the exec fails, the command goes on as it is.
void pin_openblas_to_one_thread(char** argv) {
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr) return;
  if (setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) return;
  execv("/proc/self/exe", argv);
}

}  // namespace

int main(int argc, char** argv) {
  pin_openblas_to_one_thread(argv);
  // Past `ulimit -f` a write fails with EFBIG (and the atomic writer says so)
  // instead of SIGXFSZ killing the process with a partial file behind.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) return usage(stderr);
  const std::string_view name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") return usage(stdout);
  if (name == "--version" || name == "version") {
    std::printf("stoke %s\n", stoke::version());
    return 0;
  }
  for (const auto& c : kCommands) {
    if (name == c.name) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "stoke: unknown command '%s'\n", argv[1]);
  return usage(stderr);
}
