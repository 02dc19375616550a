// read_checkpoint_info and load_checkpoint (into a tiny ResNet and its SGD
// optimizer) on a fuzzed checkpoint file. Input: one mode byte, then the file.
// Mode bit 0 rewrites the header's payload length and the trailing CRC-32 to
// fit the bytes, so mutations reach the payload parser instead of stopping at
// the checksum (the real reader still checks both).
#include <zlib.h>

#include <cstring>
#include <vector>

#include "fuzz_fixtures.hpp"
#include "stoke/backend.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fz = stoke::fuzz;
  if (size < 1) return 0;
  static const std::unique_ptr<stoke::nn::Model> model =
      stoke::nn::build_model(stoke::cpu_backend(), fz::tiny_spec(), 1);
  static stoke::nn::Sgd sgd(*model);
  std::vector<std::uint8_t> file(data + 1, data + size);
  constexpr std::size_t kHeader = 24;
  if ((data[0] & 1) && file.size() >= kHeader + 4) {
    const std::uint64_t payload = file.size() - kHeader - 4;
    std::memcpy(file.data() + 16, &payload, 8);
    const auto crc =
        static_cast<std::uint32_t>(crc32(0L, file.data() + kHeader, static_cast<uInt>(payload)));
    std::memcpy(file.data() + kHeader + payload, &crc, 4);
  }
  const auto path = fz::scratch_dir() / "model.ckpt";
  fz::write_bytes(path, file.data(), file.size());
  fz::accept_stoke_errors([&] { (void)stoke::nn::read_checkpoint_info(path.string()); });
  fz::accept_stoke_errors([&] {
    (void)stoke::nn::load_checkpoint(path.string(), *model, (data[0] & 2) ? &sgd : nullptr);
  });
  return 0;
}
