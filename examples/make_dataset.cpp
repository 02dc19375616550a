// Writes the synthetic industrial-inspection dataset (ok / defect classes,
// brushed metal with scratches and spots) into a folder, to try stoke without
// data of one's own.
//
//   make_dataset <root> [count] [width] [height] [jpg|png]
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "stoke/stoke.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <root> [count] [width] [height] [jpg|png]\n", argv[0]);
    return 2;
  }
  try {
    stoke::init();
    stoke::SyntheticOptions options;
    const std::size_t count = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 100;
    if (argc > 3) options.width = std::atoi(argv[3]);
    if (argc > 4) options.height = std::atoi(argv[4]);
    if (argc > 5 && std::strcmp(argv[5], "png") == 0)
      options.format = stoke::SyntheticOptions::Format::kPng;
    const auto root = stoke::write_synthetic_dataset(argv[1], count, options);
    std::printf("wrote %zu %dx%d images under %s\n", count, options.width, options.height,
                root.c_str());
    return 0;
  } catch (const stoke::Error& e) {
    std::fprintf(stderr, "make_dataset: %s\n", e.what());
    return 1;
  }
}
