#!/usr/bin/env python3
"""The Python host of stoke's C ABI (stoke_ctypes, ctypes only).

usage: example.py MODEL FRAMES_DIR DATA_DIR IMAGE...

Prints one JSON line per prediction, as `stoke predict --json` does, plus
"via": each IMAGE from its file and from its bytes; two synthetic camera
frames (Mono8 and BGR8, rows padded past the image) from Python buffers, the
BGR8 one also as RGB8 with the channels swapped, and, when numpy is
installed, the same frames as numpy arrays (zero copy). The frames are also
written to FRAMES_DIR as BMP (lossless), so `stoke predict` can classify the
same pixels: tests/capi/hosts_test.sh checks every line against it bit for bit.
Then it trains on DATA_DIR for one epoch through stoke_ctypes.train, counting
the progress callbacks, and loads the result.
"""
import json
import os
import struct
import sys

import stoke_ctypes as stoke

WIDTH, HEIGHT, PAD = 50, 38, 5  # a width whose BMP rows need padding; 5 bytes of row padding


def sample(x, y, c):
    return (x * 13 + y * 29 + c * 71 + (x * y) % 17) & 0xFF


def frame(channels):
    """A HEIGHT x WIDTH frame, rows stride = WIDTH * channels + PAD apart (padding 0xCD)."""
    stride = WIDTH * channels + PAD
    buf = bytearray(b"\xcd" * (stride * HEIGHT))
    for y in range(HEIGHT):
        for x in range(WIDTH):
            for c in range(channels):
                buf[y * stride + x * channels + c] = sample(x, y, c)
    return buf, stride


def write_bmp(path, buf, stride, channels):
    """An 8-bit gray-palette (channels 1) or 24-bit BGR (channels 3) BMP, bottom-up."""
    row = (WIDTH * channels + 3) // 4 * 4
    palette = b"".join(bytes((i, i, i, 0)) for i in range(256)) if channels == 1 else b""
    offset = 14 + 40 + len(palette)
    header = struct.pack("<2sIHHI", b"BM", offset + row * HEIGHT, 0, 0, offset)
    info = struct.pack("<IiiHHIIiiII", 40, WIDTH, HEIGHT, 1, 8 * channels, 0, row * HEIGHT, 2835, 2835,
                       256 if channels == 1 else 0, 0)
    rows = b"".join(bytes(buf[y * stride:y * stride + WIDTH * channels]).ljust(row, b"\0")
                    for y in reversed(range(HEIGHT)))
    with open(path, "wb") as f:
        f.write(header + info + palette + rows)


def line(file, via, p, classes):
    print(json.dumps({"file": file, "via": via, "class": p.class_name, "confidence": p.confidence,
                      "probabilities": dict(zip(classes, p.probabilities))}))


def main():
    if len(sys.argv) < 5:
        print(__doc__)
        return 2
    model, frames_dir, data, images = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    os.makedirs(frames_dir, exist_ok=True)
    print("stoke %s through %s" % (stoke.version(), stoke.library()._name), file=sys.stderr)
    with stoke.Predictor(model) as predictor:
        for image in images:
            line(image, "file", predictor.predict_file(image), predictor.classes)
            with open(image, "rb") as f:
                line(image, "bytes", predictor.predict_bytes(f.read()), predictor.classes)

        mono, mono_stride = frame(1)
        mono_file = os.path.join(frames_dir, "frame_mono8.bmp")
        write_bmp(mono_file, mono, mono_stride, 1)
        line(mono_file, "buffer-mono8",
             predictor.predict_pixels(mono, "mono8", WIDTH, HEIGHT, mono_stride), predictor.classes)

        bgr, bgr_stride = frame(3)
        bgr_file = os.path.join(frames_dir, "frame_bgr8.bmp")
        write_bmp(bgr_file, bgr, bgr_stride, 3)
        line(bgr_file, "buffer-bgr8",
             predictor.predict_pixels(bytes(bgr), "bgr8", WIDTH, HEIGHT, bgr_stride), predictor.classes)
        rgb = bytearray(bgr)
        for y in range(HEIGHT):
            for x in range(WIDTH):
                at = y * bgr_stride + x * 3
                rgb[at], rgb[at + 2] = bgr[at + 2], bgr[at]
        line(bgr_file, "buffer-rgb8",
             predictor.predict_pixels(rgb, "rgb8", WIDTH, HEIGHT, bgr_stride), predictor.classes)

        try:  # an error crosses as a StokeError with the library's message
            predictor.predict_file(os.path.join(frames_dir, "missing.png"))
            print("FAIL: a missing file was classified", file=sys.stderr)
            return 1
        except stoke.StokeError as e:
            if e.name != "STOKE_ERROR_IO" or "missing.png" not in e.message:
                print("FAIL: a missing file gave %s" % e, file=sys.stderr)
                return 1

        try:
            import numpy as np
        except ImportError:
            print("numpy absent: the zero-copy array path did not run", file=sys.stderr)
            return train(data, os.path.join(frames_dir, "trained.stoke"))
        # Views into the padded buffers: the row stride comes from the array, nothing is copied.
        mono_view = np.frombuffer(mono, np.uint8).reshape(HEIGHT, mono_stride)[:, :WIDTH]
        line(mono_file, "numpy-mono8", predictor.predict_pixels(mono_view, "mono8"), predictor.classes)
        bgr_view = np.frombuffer(bgr, np.uint8).reshape(HEIGHT, bgr_stride)[:, :WIDTH * 3]
        line(bgr_file, "numpy-bgr8", predictor.predict_pixels(bgr_view.reshape(HEIGHT, WIDTH, 3), "bgr8"),
             predictor.classes)
    return train(data, os.path.join(frames_dir, "trained.stoke"))


def train(data, model):
    seen = {stoke.Progress.STEP: 0, stoke.Progress.EPOCH: 0}

    def progress(p):
        seen[p.kind] += 1
        return False

    result = stoke.train(data, model, {"epochs": 1, "size": 16, "batch": 4, "arch": "plain"}, progress)
    print("trained: %d steps, %d epoch, %s" % (seen[0], seen[1], result), file=sys.stderr)
    if seen[stoke.Progress.STEP] == 0 or seen[stoke.Progress.EPOCH] != 1 or result["epochs"] != 1 \
            or result["wrote_model"] != 1:
        print("FAIL: training reported %s" % seen, file=sys.stderr)
        return 1
    with stoke.Predictor(model) as trained:
        return 0 if len(trained.classes) >= 2 else 1


if __name__ == "__main__":
    sys.exit(main())
