#!/usr/bin/env python3
"""Prints what a stoke checkpoint or model file holds apart from its metadata
(which records timings of the run that wrote it): the model spec, the
optimizer's kind and step count, and each tensor's name, dtype, shape and the
SHA-256 of its bytes. Two files with equal output hold the same weights bit
for bit.
  model_tensors.py FILE
Format: lib/nn/checkpoint.cpp (header of 24 bytes, payload, CRC-32)."""
import hashlib
import struct
import sys
import zlib

data = open(sys.argv[1], "rb").read()
assert data[:8] == b"STOKECKP", "not a stoke checkpoint"
(size,) = struct.unpack_from("<Q", data, 16)
payload = data[24:24 + size]
assert len(payload) == size and zlib.crc32(payload) == struct.unpack_from("<I", data, 24 + size)[0]
at = 0


def take(fmt):
    global at
    values = struct.unpack_from("<" + fmt, payload, at)
    at += struct.calcsize("<" + fmt)
    return values[0] if len(values) == 1 else values


def text():
    global at
    n = take("I")
    at += n
    return payload[at - n:at].decode("utf-8", "replace")


def mapping():
    return [(text(), text()) for _ in range(take("I"))]


for key, value in mapping():
    print(f"spec {key} = {value}")
mapping()  # metadata: the run's timings, provenance and history
print(f"optimizer {text() or '-'} steps {take('q')}")
for _ in range(take("I")):
    name = text()
    dtype, rank = take("B"), take("B")
    shape = [take("q") for _ in range(rank)]
    nbytes = take("Q")
    digest = hashlib.sha256(payload[at:at + nbytes]).hexdigest()
    at += nbytes
    print(f"tensor {name} dtype {dtype} shape {shape} sha256 {digest}")
assert at == len(payload), "trailing bytes"
