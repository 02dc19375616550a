#!/usr/bin/env python3
"""Writes small test images without any imaging library (issue 25's folder cases):
  tiny_images.py png FILE [SEED]     an 8x8 gray PNG
  tiny_images.py bmp FILE [SEED]     an 8x8 24-bit BMP
  tiny_images.py classes DIR N       DIR/cNNNN/0.png for N classes (one image each)"""
import os
import struct
import sys
import zlib


def pixels(seed):
    return bytes((x * 29 + y * 13 + seed * 7) % 256 for y in range(8) for x in range(8))


def png(path, seed=0):
    px = pixels(seed)
    raw = b"".join(b"\x00" + px[y * 8:(y + 1) * 8] for y in range(8))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    open(path, "wb").write(data)


def bmp(path, seed=0):
    px = pixels(seed)
    rows = b"".join(bytes(v for x in range(8) for v in (px[y * 8 + x],) * 3) for y in reversed(range(8)))
    header = b"BM" + struct.pack("<IHHI", 54 + len(rows), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, 8, 8, 1, 24, 0, len(rows), 2835, 2835, 0, 0)
    open(path, "wb").write(header + info + rows)


kind = sys.argv[1]
if kind == "png":
    png(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
elif kind == "bmp":
    bmp(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
elif kind == "classes":
    root, n = sys.argv[2], int(sys.argv[3])
    for c in range(n):
        os.makedirs(os.path.join(root, "c%04d" % c), exist_ok=True)
        png(os.path.join(root, "c%04d" % c, "0.png"), c)
else:
    sys.exit("unknown kind " + kind)
