// stoke dataset: writes the synthetic industrial-inspection dataset (ok /
// defect: brushed metal with scratches and spots) as a folder per class.
#include <cstdio>
#include <filesystem>

#include "args.hpp"
#include "commands.hpp"
#include "stoke/stoke.hpp"

namespace {

constexpr const char* kUsage =
    "usage: stoke dataset --out DIR [--count N] [--size WxH] [--format jpg|png] [--defects F] "
    "[--seed S]\n"
    "                     [--masks MASK_DIR] [--task classify|segment]\n"
    "  writes DIR/ok/*.jpg and DIR/defect/*.jpg (default 200 images of 256x256, 30 % defects);\n"
    "  --masks: each defect image's ground-truth mask as MASK_DIR/defect/NNNNNN_mask.png (MVTec\n"
    "  AD's layout: 255 on defect pixels), outside DIR; stoke eval --masks reads them.\n"
    "  --task segment: the segmentation layout instead: DIR/images/NNNNNN.jpg, "
    "DIR/masks/NNNNNN.png\n"
    "  (class index per pixel: 0 background, 1 scratch, 2 spot) and DIR/classes.txt; --defects is\n"
    "  the share of images with defects (docs/segmentation.md).\n";

int run(int argc, char** argv) {
  stoke_cli::Args args(argc, argv,
                       {"out", "count", "size", "format", "defects", "seed", "masks", "task"}, {});
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
  const std::string task = args.get("task", "classify");
  if (task != "classify" && task != "segment")
    throw stoke_cli::UsageError("--task is classify or segment");
  if (task == "segment") {
    if (args.has("masks")) throw stoke_cli::UsageError("--masks is for --task classify");
    const auto root = stoke::write_synthetic_segmentation_dataset(args.required("out"), count, o);
    std::printf("wrote %zu %dx%d images and their masks under %s\n", count, o.width, o.height,
                root.c_str());
    return 0;
  }
  if (args.has("masks")) {
    o.mask_root = args.get("masks");
    const auto out = std::filesystem::weakly_canonical(args.get("out"));
    const auto masks = std::filesystem::weakly_canonical(o.mask_root);
    const auto rel = masks.lexically_relative(out);
    if (!rel.empty() && *rel.begin() != "..")
      throw stoke_cli::UsageError("--masks " + o.mask_root.string() + " is inside --out " +
                                  args.get("out") + " (it would be read as a class folder)");
  }
  const auto root = stoke::write_synthetic_dataset(args.required("out"), count, o);
  std::printf("wrote %zu %dx%d images under %s\n", count, o.width, o.height, root.c_str());
  return 0;
}

}  // namespace

int cmd_dataset(int argc, char** argv) {
  return stoke_cli::run_guarded("dataset", kUsage, run, argc, argv);
}
