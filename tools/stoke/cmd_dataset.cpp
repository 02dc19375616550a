// stoke dataset: writes the synthetic industrial-inspection dataset (ok /
// defect: brushed metal with scratches and spots) as a folder per class.
#include <cstdio>

#include "args.hpp"
#include "commands.hpp"
#include "stoke/stoke.hpp"

namespace {

constexpr const char* kUsage =
    "usage: stoke dataset --out DIR [--count N] [--size WxH] [--format jpg|png] [--defects F] "
    "[--seed S]\n"
    "  writes DIR/ok/*.jpg and DIR/defect/*.jpg (default 200 images of 256x256, 30 % defects)\n";

int run(int argc, char** argv) {
  stoke_cli::Args args(argc, argv, {"out", "count", "size", "format", "defects", "seed"}, {});
  stoke::init();
  stoke::SyntheticOptions o;
  const std::string size = args.get("size", "256x256");
  if (std::sscanf(size.c_str(), "%dx%d", &o.width, &o.height) != 2 || o.width <= 0 ||
      o.height <= 0) {
    throw stoke_cli::UsageError("--size '" + size + "' is not WxH");
  }
  const std::string format = args.get("format", "jpg");
  if (format != "jpg" && format != "png") throw stoke_cli::UsageError("--format is jpg or png");
  o.format = format == "png" ? stoke::SyntheticOptions::Format::kPng
                             : stoke::SyntheticOptions::Format::kJpeg;
  o.defect_fraction = args.get_double("defects", 0.3, 0, 1);
  o.seed = static_cast<std::uint64_t>(args.get_int("seed", 1));
  const auto count = static_cast<std::size_t>(args.get_int("count", 200, 1, 1000000000));
  const auto root = stoke::write_synthetic_dataset(args.required("out"), count, o);
  std::printf("wrote %zu %dx%d images under %s\n", count, o.width, o.height, root.c_str());
  return 0;
}

}  // namespace

int cmd_dataset(int argc, char** argv) {
  return stoke_cli::run_guarded("dataset", kUsage, run, argc, argv);
}
