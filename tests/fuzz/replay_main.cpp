// Replays fuzz inputs without libFuzzer (any compiler): each argument is a
// file or a folder whose files are fed, in sorted order, to the target's
// LLVMFuzzerTestOneInput. A defect shows as a crash, a sanitizer report or an
// escaping exception (std::terminate), so the test fails; a clean run prints
// how many inputs it replayed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    if (fs::is_directory(arg)) {
      for (const auto& e : fs::recursive_directory_iterator(arg)) {
        if (e.is_regular_file() && e.path().filename() != "README.md") inputs.push_back(e.path());
      }
    } else if (fs::exists(arg)) {
      inputs.push_back(arg);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  for (const auto& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                  std::istreambuf_iterator<char>()};
    // A copy in its own allocation, so a read past the end is a real overrun.
    std::vector<std::uint8_t> data(bytes.begin(), bytes.end());
    std::printf("replay %s (%zu bytes)\n", path.string().c_str(), data.size());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(data.empty() ? nullptr : data.data(), data.size());
  }
  std::printf("replayed %zu inputs\n", inputs.size());
  return inputs.empty() ? 1 : 0;
}
