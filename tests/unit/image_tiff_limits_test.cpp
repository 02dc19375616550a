// TIFF headers that claim more than the file holds: more strips or tiles than
// the offset arrays list (libtiff pads them with zeros and may estimate the byte
// counts, so without the check the decoder sized a 134 MB image and read every
// missing tile from offset 0), and uncompressed strips or tiles shorter than
// their pixels. Each is a DecodeError before the image is sized; valid files
// that libtiff presents differently from their directory (one large
// uncompressed strip read as many, BigTIFF) still decode exactly.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "stoke/error.hpp"
#include "stoke/image.hpp"
#include "unit/image_test_files.hpp"
#include "unit/image_tiff_files.hpp"

namespace stoke {
namespace {

using testing::decode_error;
using testing::encode_tiff;
using testing::tiff_samples;
using testing::TiffSpec;

// Sets value `index` of tag `tag` (SHORT, LONG or LONG8, inline or not) in the
// first directory of a little-endian classic or BigTIFF file; false when absent.
bool set_tag_value(std::vector<std::uint8_t>& bytes, int tag, std::uint64_t index,
                   std::uint64_t value) {
  auto get = [&](std::size_t at, int n) {
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = v << 8 | bytes.at(at + i);
    return v;
  };
  const bool big = get(2, 2) == 43;
  const int count_bytes = big ? 8 : 2, entry_bytes = big ? 20 : 12, field = big ? 8 : 4;
  const std::size_t ifd = big ? get(8, 8) : get(4, 4);
  for (std::uint64_t e = 0, entries = get(ifd, count_bytes); e < entries; ++e) {
    const std::size_t at = ifd + count_bytes + e * entry_bytes;
    if (get(at, 2) != static_cast<std::uint64_t>(tag)) continue;
    const std::uint64_t type = get(at + 2, 2), count = get(at + 4, field);
    const int size = type == TIFF_SHORT ? 2 : type == TIFF_LONG ? 4 : type == TIFF_LONG8 ? 8 : 0;
    if (size == 0 || index >= count) return false;
    const std::size_t values = count * size <= static_cast<std::uint64_t>(field)
                                   ? at + 4 + field
                                   : get(at + 4 + field, field);
    for (int i = 0; i < size; ++i)
      bytes.at(values + index * size + i) = static_cast<std::uint8_t>(value >> (8 * i));
    return true;
  }
  return false;
}

struct Refusal {
  std::string message;
  double seconds = 0;
  std::size_t capacity = 0;  // of the output image after the refusal
};

Refusal refuse(const std::vector<std::uint8_t>& bytes, const std::string& name,
               DecodeOptions options = {}) {
  Image out;
  const auto start = std::chrono::steady_clock::now();
  Refusal r{decode_error(bytes, name, out, options)};
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.capacity = out.capacity();
  return r;
}

// The fuzzer's slow input: a 64568x1042 16-bit tiled header (266,376 tiles of
// 16x16) over a file holding 4 tiles. With a first byte count unlike the
// second, libtiff replaces the uncompressed byte counts by estimates, so every
// missing tile looked like 512 bytes at offset 0.
TEST(ImageTiffLimits, TiledHeaderClaimingMoreTilesThanListedIsRefusedFast) {
  for (bool big_tiff : {false, true}) {
    for (std::uint16_t compression : {COMPRESSION_NONE, COMPRESSION_ADOBE_DEFLATE}) {
      for (bool estimated_counts : {false, true}) {
        TiffSpec s{.width = 32,
                   .height = 32,
                   .channels = 1,
                   .bits = 16,
                   .compression = compression,
                   .tile = 16,
                   .big_tiff = big_tiff};
        auto bytes = encode_tiff(s, tiff_samples(s));
        ASSERT_TRUE(set_tag_value(bytes, TIFFTAG_IMAGEWIDTH, 0, 64568));
        ASSERT_TRUE(set_tag_value(bytes, TIFFTAG_IMAGELENGTH, 0, 1042));
        if (estimated_counts) {
          ASSERT_TRUE(set_tag_value(bytes, TIFFTAG_TILEBYTECOUNTS, 0, 100));
        }
        const Refusal r = refuse(bytes, "tiles.tif");
        const std::string what = std::string(big_tiff ? "BigTIFF " : "TIFF ") +
                                 (compression == COMPRESSION_NONE ? "none" : "deflate") +
                                 (estimated_counts ? " estimated" : "") + ": " + r.message;
        EXPECT_NE(r.message.find("cannot decode image 'tiles.tif'"), std::string::npos) << what;
        EXPECT_NE(r.message.find("the header claims 266376 tiles but the file lists offsets "
                                 "for 4"),
                  std::string::npos)
            << what;
        EXPECT_EQ(r.capacity, 0u) << what;
        EXPECT_LT(r.seconds, 1.0) << what;  // a 134 MB image and 266k tile reads before
      }
    }
  }
}

TEST(ImageTiffLimits, StripHeaderClaimingMoreStripsThanListedIsRefused) {
  for (std::uint16_t compression : {COMPRESSION_NONE, COMPRESSION_LZW}) {
    // 8x8, 2 rows per strip: 4 strips listed; a height of 800 claims 400.
    TiffSpec s{.width = 8, .height = 8, .compression = compression, .rows_per_strip = 2};
    auto bytes = encode_tiff(s, tiff_samples(s));
    ASSERT_TRUE(set_tag_value(bytes, TIFFTAG_IMAGELENGTH, 0, 800));
    const Refusal r = refuse(bytes, "strips.tif");
    EXPECT_NE(r.message.find("cannot decode image 'strips.tif'"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("claims 400 strips but the file lists offsets for 4"),
              std::string::npos)
        << r.message;
    EXPECT_EQ(r.capacity, 0u);
  }
  // One strip listed where the header claims 4 (not one strip libtiff chops up).
  TiffSpec one{.width = 8, .height = 8, .rows_per_strip = 8};
  auto bytes = encode_tiff(one, tiff_samples(one));
  ASSERT_TRUE(set_tag_value(bytes, TIFFTAG_ROWSPERSTRIP, 0, 2));
  const Refusal r = refuse(bytes, "one.tif");
  EXPECT_NE(r.message.find("claims 4 strips but the file lists offsets for 1"), std::string::npos)
      << r.message;
}

// Uncompressed data shorter than its pixels, inside the file: libtiff would
// refuse it only when reading, after the image is sized.
TEST(ImageTiffLimits, ShortUncompressedStripsAndTilesAreRefusedBeforeAllocating) {
  struct Case {
    TiffSpec spec;
    int tag;  // the byte count array, its value `index` set to `value`
    std::uint64_t index, value;
    const char* expected;
  };
  const Case cases[] = {
      {{.width = 16, .height = 8, .channels = 1, .bits = 16, .rows_per_strip = 4},
       TIFFTAG_STRIPBYTECOUNTS,
       0,
       64,
       "strip 0 of 2 holds 64 bytes but its pixels take 128 uncompressed"},
      // 8 rows in strips of 3: the last strip holds 2 rows and needs only those.
      {{.width = 16, .height = 8, .channels = 1, .bits = 16, .rows_per_strip = 3},
       TIFFTAG_STRIPBYTECOUNTS,
       2,
       63,
       "strip 2 of 3 holds 63 bytes but its pixels take 64 uncompressed"},
      {{.width = 32, .height = 16, .channels = 3, .bits = 8, .tile = 16},
       TIFFTAG_TILEBYTECOUNTS,
       1,
       700,
       "tile 1 of 2 holds 700 bytes but its pixels take 768 uncompressed"},
  };
  for (const Case& c : cases) {
    auto bytes = encode_tiff(c.spec, tiff_samples(c.spec));
    ASSERT_TRUE(set_tag_value(bytes, c.tag, c.index, c.value));
    const Refusal r = refuse(bytes, "short.tif");
    EXPECT_NE(r.message.find("cannot decode image 'short.tif'"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.expected), std::string::npos) << r.message;
    EXPECT_EQ(r.capacity, 0u) << r.message;
  }
}

// The number of strips libtiff presents for `bytes`.
std::uint32_t libtiff_strips(const std::vector<std::uint8_t>& bytes) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("stoke_tiff_strips_" + std::to_string(::getpid()) + ".tif");
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  TIFF* tif = TIFFOpen(path.c_str(), "r");
  const std::uint32_t strips = tif ? TIFFNumberOfStrips(tif) : 0;
  if (tif) TIFFClose(tif);
  std::filesystem::remove(path);
  return strips;
}

// One large uncompressed strip: its directory lists one offset, libtiff reads it
// as many strips of about 8 KB.
TEST(ImageTiffLimits, OneLargeUncompressedStripStillDecodesExactly) {
  Decoder decoder;
  Image out;
  for (int bits : {8, 16}) {
    TiffSpec s{.width = 200, .height = 150, .channels = 3, .bits = bits, .rows_per_strip = 150};
    const auto samples = tiff_samples(s);
    const auto bytes = encode_tiff(s, samples);
    ASSERT_GT(libtiff_strips(bytes), 1u) << "libtiff no longer chops the strip: test is moot";
    decoder.decode(bytes, "big_strip.tif", {.keep_16_bit = true}, out);
    ASSERT_EQ(out.size_bytes(), samples.size() * (bits / 8));
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const std::uint16_t v =
          bits == 8 ? out.data()[i] : reinterpret_cast<const std::uint16_t*>(out.data())[i];
      ASSERT_EQ(v, samples[i]) << bits << " bit, sample " << i;
    }
  }
}

TEST(ImageTiffLimits, BigTiffStripsAndTilesDecodeExactly) {
  Decoder decoder;
  Image out;
  for (std::uint16_t compression : {COMPRESSION_NONE, COMPRESSION_LZW}) {
    for (int tile : {0, 16}) {
      TiffSpec s{.width = 37,
                 .height = 21,
                 .channels = 1,
                 .bits = 8,
                 .compression = compression,
                 .tile = tile,
                 .big_tiff = true};
      const auto samples = tiff_samples(s);
      const auto bytes = encode_tiff(s, samples);
      ASSERT_EQ(bytes.at(2), 43) << "not a BigTIFF";
      decoder.decode(bytes, "big.tif", {}, out);
      ASSERT_EQ(out.size_bytes(), samples.size());
      for (std::size_t i = 0; i < samples.size(); ++i) ASSERT_EQ(out.data()[i], samples[i]);
    }
  }
}

}  // namespace
}  // namespace stoke
