// stoke import FILE --arch NAME --out MODEL [--classes N | --class-names FILE]
//              [--channels C] [--size S | --height H --width W] [--width-mult M]
//              [--normalize ...] [--resize R | --resize WxH] [--crop S] [--new-head]
// Builds a stoke model of the named architecture and loads pretrained weights
// into it from a safetensors file (torchvision state_dict names) or an ONNX
// file (matched by graph topology). By default it writes a self-describing
// model file (class names, preprocessing, reference inputs) that `stoke
// predict`, `eval` and the Predictor run; an ONNX file that `stoke export`
// wrote brings its class names and preprocessing along. --new-head keeps a
// fresh classifier for --classes classes and writes a plain checkpoint to
// fine-tune from (the C++ API's load_checkpoint); a 1-channel model takes RGB
// stem weights summed over channels.
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "inputs.hpp"
#include "stoke/interchange.hpp"
#include "stoke/nn/checkpoint.hpp"
#include "stoke/stoke.hpp"

namespace {

using stoke_cli::UsageError;

constexpr const char* kUsage =
    "usage: stoke import FILE --arch resnet18|resnet34|resnet50|resnet|plain_cnn --out MODEL\n"
    "                    [--classes N | --class-names FILE] [--channels 1|3]\n"
    "                    [--size S | --height H --width W] [--width-mult M] [--seed N]\n"
    "                    [--normalize minmax|imagenet|mean=a:b:c,std=a:b:c]\n"
    "                    [--resize R | --resize WxH] [--crop S] [--new-head]\n"
    "  FILE          .safetensors (torchvision state_dict names) or .onnx (matched by topology)\n"
    "  --class-names a text file, one class name per line in label order (sets --classes);\n"
    "                default: an ONNX file's class_names (stoke export), else class0..classN-1\n"
    "  --classes     classes of the model (default 1000, or the class names' count)\n"
    "  --channels    input channels (default 3; 1 sums RGB stem weights)\n"
    "  --size/--crop the network's input size (default 224); --crop S is --size S\n"
    "  --resize      the resize before the centre crop to the input size (default: the input\n"
    "                size itself; --resize 256 --crop 224 is torchvision's Resize + CenterCrop\n"
    "                of a square image). At most 2x the input size + 8.\n"
    "  --normalize   default: an ONNX file's (stoke export), else imagenet for resnet18/34/50\n"
    "                (torchvision's weights) and minmax for stoke's own architectures\n"
    "  Writes a model file that stoke predict, eval and the Predictor run (its self-check\n"
    "  compares two seeded noise inputs with this machine's logits). --new-head: a fresh\n"
    "  classifier for --classes classes, written as a plain checkpoint to fine-tune from.\n";

// One class name per line (a trailing newline and \r\n endings allowed).
std::vector<std::string> read_class_names(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw stoke::IoError("--class-names: cannot open '" + path + "'");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty())
      throw UsageError("--class-names " + path + ": line " + std::to_string(names.size() + 1) +
                       " is empty");
    names.push_back(line);
  }
  if (names.empty()) throw UsageError("--class-names " + path + ": no class names");
  return names;
}

void append_utf8(std::string& out, unsigned code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xC0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code & 0x3F));
  }
}

// The JSON list of strings stoke export writes as "class_names".
std::vector<std::string> json_string_list(const std::string& text, const std::string& what) {
  const auto bad = [&] {
    return stoke::CorruptFile(what + ": \"class_names\" is not a JSON list of strings");
  };
  std::vector<std::string> out;
  std::size_t i = 0;
  const auto space = [&] {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t')) ++i;
  };
  space();
  if (i >= text.size() || text[i++] != '[') throw bad();
  space();
  if (i < text.size() && text[i] == ']') return out;
  for (;;) {
    space();
    if (i >= text.size() || text[i++] != '"') throw bad();
    std::string s;
    while (i < text.size() && text[i] != '"') {
      char c = text[i++];
      if (c != '\\') {
        s += c;
        continue;
      }
      if (i >= text.size()) throw bad();
      c = text[i++];
      if (c == 'u') {
        if (i + 4 > text.size()) throw bad();
        append_utf8(s, static_cast<unsigned>(std::stoul(text.substr(i, 4), nullptr, 16)));
        i += 4;
      } else {
        const std::string from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
        const auto k = from.find(c);
        if (k == std::string::npos) throw bad();
        s += to[k];
      }
    }
    if (i++ >= text.size()) throw bad();
    out.push_back(std::move(s));
    space();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == ']') return out;
    throw bad();
  }
}

// --resize R or WxH; 0 = the input size.
void parse_resize(const std::string& text, stoke::PreprocessOptions& p) {
  if (text.empty()) return;
  const auto x = text.find('x');
  char* end = nullptr;
  const long w = std::strtol(text.c_str(), &end, 10);
  const long h = x == std::string::npos ? w : std::strtol(text.c_str() + x + 1, &end, 10);
  if (*end || w <= 0 || h <= 0 || w > (1 << 20) || h > (1 << 20))
    throw UsageError("--resize: '" + text + "' is not R or WxH with positive sizes");
  p.resize_width = static_cast<int>(w);
  p.resize_height = static_cast<int>(h);
  if (p.resize_width < p.width || p.resize_height < p.height || p.resize_width > 2 * p.width + 8 ||
      p.resize_height > 2 * p.height + 8) {
    throw UsageError("--resize " + text + ": from the input size " + std::to_string(p.width) + "x" +
                     std::to_string(p.height) +
                     " up to 2x + 8 (the centre crop takes the input size)");
  }
}

bool torchvision_arch(stoke::nn::Architecture a) {
  return a == stoke::nn::Architecture::kResNet18 || a == stoke::nn::Architecture::kResNet34 ||
         a == stoke::nn::Architecture::kResNet50;
}

int run(int argc, char** argv) {
  const stoke_cli::Args args(argc, argv,
                             {"arch", "out", "classes", "class-names", "channels", "size", "height",
                              "width", "width-mult", "seed", "normalize", "resize", "crop"},
                             {"new-head"});
  if (args.positional().size() != 1) throw UsageError("expected one FILE to import");
  const std::string file = args.positional()[0], out = args.required("out");
  const bool onnx = file.size() >= 5 && file.compare(file.size() - 5, 5, ".onnx") == 0;
  const bool deployable = !args.has("new-head");
  if (!deployable) {
    for (const char* o : {"class-names", "normalize", "resize", "crop"})
      if (args.has(o))
        throw UsageError(
            std::string("--") + o +
            " describes a deployable model; --new-head writes a checkpoint to fine-tune from");
  }
  stoke::nn::ModelSpec spec;
  spec.architecture = stoke::nn::architecture_from_name(args.required("arch"));
  // What stoke export wrote into an ONNX file: the defaults below.
  const std::map<std::string, std::string> meta = onnx && deployable
                                                      ? stoke::interchange::onnx_metadata(file)
                                                      : std::map<std::string, std::string>{};
  std::vector<std::string> names;
  if (args.has("class-names")) {
    names = read_class_names(args.get("class-names"));
  } else if (const auto it = meta.find("class_names"); it != meta.end()) {
    names = json_string_list(it->second, file);
  }
  const int default_classes = names.empty() ? 1000 : static_cast<int>(names.size());
  spec.classes = args.get_int("classes", default_classes, 1, 1000000);
  if (!names.empty() && static_cast<std::size_t>(spec.classes) != names.size()) {
    throw UsageError("--classes " + std::to_string(spec.classes) + ", but " +
                     std::to_string(names.size()) + " class names");
  }
  for (int c = static_cast<int>(names.size()); c < spec.classes && deployable; ++c)
    names.push_back("class" + std::to_string(c));
  const bool stored = meta.count("model.preprocess.channels") != 0;
  stoke::PreprocessOptions p =
      stored ? stoke::read_preprocess_metadata(meta, file) : stoke::PreprocessOptions{};
  if (args.has("size") && args.has("crop") && args.get("size") != args.get("crop"))
    throw UsageError("--size and --crop are the same setting: give one");
  const int size =
      args.get_int("crop", args.get_int("size", stored ? p.width : 224, 1, 1 << 20), 1, 1 << 20);
  spec.in_channels = args.get_int("channels", stored ? p.channels : 3, 1, 3);
  if (spec.in_channels == 2) throw UsageError("--channels is 1 or 3");
  spec.height = args.get_int(
      "height", stored && !args.has("size") && !args.has("crop") ? p.height : size, 1, 1 << 20);
  spec.width = args.get_int(
      "width", stored && !args.has("size") && !args.has("crop") ? p.width : size, 1, 1 << 20);
  spec.width_multiplier = static_cast<float>(args.get_double("width-mult", 1.0, 0.01, 16));
  const bool resized = p.width != spec.width || p.height != spec.height;
  p.channels = spec.in_channels;
  p.width = spec.width;
  p.height = spec.height;
  if (!stored || resized) p.resize_width = p.resize_height = 0;
  parse_resize(args.get("resize"), p);
  if (args.has("normalize")) {
    p.normalization = stoke_cli::parse_normalization(args.get("normalize"));
  } else if (!stored) {
    p.normalization =
        stoke_cli::parse_normalization(torchvision_arch(spec.architecture) ? "imagenet" : "minmax");
  }
  stoke_cli::check_writable("--out", out);
  stoke::init();
  auto model = stoke::nn::build_model(stoke::cpu_backend(), spec,
                                      static_cast<std::uint64_t>(args.get_int("seed", 1)));
  stoke::interchange::ImportOptions o;
  o.load_classifier = deployable;
  const stoke::interchange::ImportReport r =
      onnx ? stoke::interchange::import_onnx(*model, file, o)
           : stoke::interchange::load_safetensors(*model, file, o);
  if (!deployable) {
    stoke::nn::save_checkpoint(out, *model, nullptr, {{"interchange.source", file}});
  } else {
    stoke::save_model(out, *model, stoke::describe_import(names, p, file), nullptr,
                      {{"interchange.source", file}});
  }
  std::printf("wrote %s: %s, %zu tensors loaded from %s%s%s\n", out.c_str(),
              stoke::nn::architecture_name(spec.architecture), r.loaded.size(), file.c_str(),
              r.kept.empty() ? "" : ", new classifier head",
              r.stem_summed ? ", RGB stem summed to gray" : "");
  if (deployable) {
    const auto& n = p.normalization;
    char norm[160];
    if (n.kind == stoke::Normalization::Kind::kMeanStd) {
      std::snprintf(norm, sizeof norm, "mean=%g:%g:%g,std=%g:%g:%g", n.mean[0], n.mean[1],
                    n.mean[2], n.std[0], n.std[1], n.std[2]);
    } else {
      std::snprintf(norm, sizeof norm, "min-max to [%g, %g]", n.lo, n.hi);
    }
    std::printf("  %d classes (%s ... %s), input %dx%dx%d centre-cropped from a %dx%d resize, %s\n",
                spec.classes, names.front().c_str(), names.back().c_str(), p.channels, p.height,
                p.width, p.resize_width ? p.resize_width : p.width,
                p.resize_height ? p.resize_height : p.height, norm);
  }
  return 0;
}

}  // namespace

int cmd_import(int argc, char** argv) {
  return stoke_cli::run_guarded("import", kUsage, run, argc, argv);
}
