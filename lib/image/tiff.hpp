// TIFF reading through libtiff, from the bytes in memory (TIFFClientOpenExt
// over the buffer, no file handle): the first image of the file, 8- or 16-bit
// unsigned samples, gray (min-is-black or min-is-white) or RGB, extra samples
// (alpha) dropped, chunky or single-plane, strips or tiles, any compression
// libtiff decodes (none, LZW, Deflate, PackBits, ...). 16-bit samples are
// kept (keep_16_bit) or reduced to 8 bits as 16-bit PNG is (rounded v * 255 / 65535).
//
// libtiff's errors and warnings go to per-file handlers that collect them into
// the DecodeError message; nothing is printed. The size limit is checked from
// the header, the directory must list an offset and a byte count for every
// strip or tile the header claims, every strip or tile must lie inside the
// file, and uncompressed ones must hold their pixels, before the output or any
// strip buffer is sized.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "stoke/image.hpp"

namespace stoke::detail {

// The stored format (format kTiff, channels 1 or 3, bit_depth 8 or 16).
// DecodeError naming `name` for anything malformed or unsupported.
ImageInfo tiff_info(std::span<const std::uint8_t> bytes, std::string_view name);

// The same for the TIFF file at `path`, reading (pread) only what libtiff asks
// for: the header, the first directory and its tag arrays, not the pixels. For
// the header check at dataset load, where a TIFF's directory usually lies at
// the end of the file. IoError when it cannot be opened or is not a regular file.
ImageInfo tiff_file_info(const std::filesystem::path& path);

// Decodes into `out` with `channels` (0: as stored, 1 or 3), 16-bit when the
// samples are 16-bit and keep_16_bit, else 8-bit; `scratch` holds
// one strip or tile and is reused. DecodeError naming `name` (and the
// STOKE_MAX_IMAGE_PIXELS knob when the header claims more than max_pixels,
// 0: no limit) before anything is sized.
void decode_tiff(std::span<const std::uint8_t> bytes, std::string_view name,
                 std::uint64_t max_pixels, int channels, bool keep_16_bit,
                 std::vector<std::uint8_t>& scratch, Image& out);

}  // namespace stoke::detail
