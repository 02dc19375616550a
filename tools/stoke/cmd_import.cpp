// stoke import FILE --arch NAME --out MODEL [--classes N] [--channels C]
//              [--size S | --height H --width W] [--width-mult M] [--new-head]
// Builds a stoke model of the named architecture and loads pretrained weights
// into it from a safetensors file (torchvision state_dict names) or an ONNX
// file (matched by graph topology), then saves it as a stoke checkpoint for
// `stoke train --init`. --new-head keeps a fresh classifier for --classes
// classes; a 1-channel model takes RGB stem weights summed over channels.
#include <cstdio>
#include <string>

#include "args.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "stoke/interchange.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/stoke.hpp"

namespace {

constexpr const char* kUsage =
    "usage: stoke import FILE --arch resnet18|resnet34|resnet50|resnet|plain_cnn --out MODEL\n"
    "                    [--classes N] [--channels 1|3] [--size S | --height H --width W]\n"
    "                    [--width-mult M] [--new-head] [--seed N]\n"
    "  FILE        .safetensors (torchvision state_dict names) or .onnx (matched by topology)\n"
    "  --classes   classes of the model (default 1000); with --new-head the file's head is not "
    "loaded\n"
    "  --channels  input channels (default 3; 1 sums RGB stem weights)\n"
    "  --size      input height and width (default 224)\n";

int run(int argc, char** argv) {
  const stoke_cli::Args args(
      argc, argv,
      {"arch", "out", "classes", "channels", "size", "height", "width", "width-mult", "seed"},
      {"new-head"});
  if (args.positional().size() != 1) throw stoke_cli::UsageError("expected one FILE to import");
  const std::string file = args.positional()[0], out = args.required("out");
  stoke::nn::ModelSpec spec;
  spec.architecture = stoke::nn::architecture_from_name(args.required("arch"));
  spec.classes = args.get_int("classes", 1000, 1, 1000000);
  spec.in_channels = args.get_int("channels", 3, 1, 3);
  if (spec.in_channels == 2) throw stoke_cli::UsageError("--channels is 1 or 3");
  const int size = args.get_int("size", 224, 1, 1 << 20);
  spec.height = args.get_int("height", size, 1, 1 << 20);
  spec.width = args.get_int("width", size, 1, 1 << 20);
  spec.width_multiplier = static_cast<float>(args.get_double("width-mult", 1.0, 0.01, 16));
  stoke_cli::check_writable("--out", out);
  auto model = stoke::nn::build_model(stoke::cpu_backend(), spec,
                                      static_cast<std::uint64_t>(args.get_int("seed", 1)));
  stoke::interchange::ImportOptions o;
  o.load_classifier = !args.has("new-head");
  const bool onnx = file.size() >= 5 && file.compare(file.size() - 5, 5, ".onnx") == 0;
  const stoke::interchange::ImportReport r =
      onnx ? stoke::interchange::import_onnx(*model, file, o)
           : stoke::interchange::load_safetensors(*model, file, o);
  stoke::nn::save_checkpoint(out, *model, nullptr, {{"interchange.source", file}});
  std::printf("wrote %s: %s, %zu tensors loaded from %s%s%s\n", out.c_str(),
              stoke::nn::architecture_name(spec.architecture), r.loaded.size(), file.c_str(),
              r.kept.empty() ? "" : ", new classifier head",
              r.stem_summed ? ", RGB stem summed to gray" : "");
  return 0;
}

}  // namespace

int cmd_import(int argc, char** argv) {
  return stoke_cli::run_guarded("import", kUsage, run, argc, argv);
}
