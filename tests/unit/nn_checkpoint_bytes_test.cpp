// Checkpoint integrity, byte by byte: every single-byte change anywhere in a
// small checkpoint (header, payload or checksum) and every cut is refused with
// a CorruptFile naming the file; nothing loads silently.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "stoke/backend.hpp"
#include "stoke/error.hpp"
#include "stoke/nn/checkpoint.hpp"

namespace stoke {
namespace {

namespace fs = std::filesystem;

class CheckpointBytesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("stoke_ckpt_bytes_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::create_directories(dir_);
    path_ = (dir_ / "tiny.ckpt").string();
    nn::ModelSpec spec;
    spec.architecture = nn::Architecture::kPlainCnn;
    spec.in_channels = 1;
    spec.height = spec.width = 4;
    spec.classes = 2;
    spec.widths = {2};
    auto model = nn::build_model(cpu_backend(), spec, 5);
    nn::save_checkpoint(path_, *model, nullptr, {{"k", "v"}});
    std::ifstream in(path_, std::ios::binary);
    good_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::vector<char>& bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  // True when reading the file is refused with a CorruptFile naming it.
  bool refused() const {
    try {
      nn::read_checkpoint_info(path_);
      return false;
    } catch (const CorruptFile& e) {
      return std::string(e.what()).find(path_) != std::string::npos;
    }
  }

  fs::path dir_;
  std::string path_;
  std::vector<char> good_;
};

TEST_F(CheckpointBytesTest, TheUntouchedFileLoads) {
  ASSERT_GT(good_.size(), 24u + 4u);
  EXPECT_NO_THROW(nn::read_checkpoint_info(path_));
}

// Bytes are changed in place (rewriting the whole file per case is slow on
// a loaded disk).
TEST_F(CheckpointBytesTest, EverySingleByteFlipIsRefused) {
  std::FILE* f = std::fopen(path_.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  for (const unsigned char mask : {0x01, 0x80, 0xFF}) {
    for (std::size_t i = 0; i < good_.size(); ++i) {
      const auto at = static_cast<long>(i);
      std::fseek(f, at, SEEK_SET);
      std::fputc(static_cast<unsigned char>(good_[i]) ^ mask, f);
      std::fflush(f);
      EXPECT_TRUE(refused()) << "byte " << i << " of " << good_.size() << " xor " << int(mask)
                             << " loaded";
      std::fseek(f, at, SEEK_SET);
      std::fputc(static_cast<unsigned char>(good_[i]), f);
      std::fflush(f);
    }
  }
  std::fclose(f);
  EXPECT_FALSE(refused()) << "the restored file";
}

TEST_F(CheckpointBytesTest, EveryCutAndEveryExtensionIsRefused) {
  for (std::size_t len = good_.size(); len-- > 0;) {
    fs::resize_file(path_, len);
    EXPECT_TRUE(refused()) << "cut to " << len << " bytes loaded";
  }
  std::vector<char> longer = good_;
  longer.push_back('\0');
  write(longer);
  EXPECT_TRUE(refused()) << "one trailing byte loaded";
}

TEST_F(CheckpointBytesTest, AFlippedFlagsByteNamesTheHeader) {
  std::vector<char> bad = good_;
  bad[12] = 1;  // flags, after the 8-byte magic and the 4-byte version
  write(bad);
  try {
    nn::read_checkpoint_info(path_);
    FAIL() << "flags byte ignored";
  } catch (const CorruptFile& e) {
    EXPECT_NE(std::string(e.what()).find("flags"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stoke
