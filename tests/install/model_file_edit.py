#!/usr/bin/env python3
"""Writes a crafted copy of a stoke model file whose CRC is valid again:
  model_file_edit.py nan|resize_width|blocks_per_stage IN OUT
nan: the first float32 parameter becomes NaN; the others set one value of
the spec or the metadata far out of range (issue 25, items 3 and 8)."""
import struct
import sys
import zlib

kind, src, dst = sys.argv[1:4]
data = open(src, "rb").read()
head, payload = data[:24], bytearray(data[24:-4])


def set_value(buf, key, value):
    k = key.encode()
    at = buf.find(struct.pack("<I", len(k)) + k)
    assert at >= 0, key
    v = at + 4 + len(k)
    n = struct.unpack_from("<I", buf, v)[0]
    return buf[:v] + struct.pack("<I", len(value)) + value.encode() + buf[v + 4 + n:]


if kind == "nan":
    name = b"param:"
    at = payload.find(name)
    assert at >= 0
    end = payload.find(b"\x00", at)  # the name ends where dtype 0 (float32) follows
    n = struct.unpack_from("<I", payload, at - 4)[0]
    p = at + n  # dtype, rank, dims, size, data
    rank = payload[p + 1]
    data_at = p + 2 + 8 * rank + 8
    payload[data_at:data_at + 4] = struct.pack("<f", float("nan"))
elif kind == "resize_width":
    payload = set_value(payload, "model.preprocess.resize_width", "2000000000")
elif kind == "blocks_per_stage":
    payload = set_value(payload, "blocks_per_stage", "100000000")
head = head[:16] + struct.pack("<Q", len(payload))
crc = zlib.crc32(bytes(payload)) & 0xFFFFFFFF
open(dst, "wb").write(head + bytes(payload) + struct.pack("<I", crc))
