#!/usr/bin/python3
"""Per-image latency at batch 1 of the same network as a `stoke train` model
in PyTorch, with the usual PIL preprocessing: open + decode, convert, resize
(bilinear) to the model's input, normalize, forward under inference_mode.
The reference for bench/RESULTS.md ("Prediction latency"); bench-only.

    /usr/bin/python3 bench/pytorch_predict.py --image FILE --size 128 --threads 2 \
        [--stem 16 --widths 16,32,64 --blocks 1] [--iterations 50] [--draft] \
        [--device cpu|cuda] [--batch N]

--device cuda runs the forward on the GPU (the input copied up each call, the
result waited for); --batch N adds the forward of N images at once.

--draft lets PIL's JPEG decoder downscale in the DCT domain (Image.draft), as
stoke's decoder does; without it PIL decodes at full size (the common path).
Prints one JSON object.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_resnet import resnet  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", required=True)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--channels", type=int, default=3)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--stem", type=int, default=16)
    ap.add_argument("--widths", default="16,32,64")
    ap.add_argument("--blocks", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--draft", action="store_true")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    widths = tuple(int(w) for w in a.widths.split(","))
    dev = torch.device(a.device)
    net = resnet(a.channels, a.classes, a.stem, widths, (1,) + (2,) * (len(widths) - 1), a.blocks).eval().to(dev)
    mean = np.array([0.485, 0.456, 0.406], np.float32)[: a.channels].reshape(-1, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32)[: a.channels].reshape(-1, 1, 1)

    def preprocess():
        img = Image.open(a.image)
        if a.draft:
            img.draft("RGB" if a.channels == 3 else "L", (a.size, a.size))
        img = img.convert("RGB" if a.channels == 3 else "L").resize((a.size, a.size), Image.BILINEAR)
        x = np.asarray(img, np.float32).reshape(a.size, a.size, a.channels).transpose(2, 0, 1) / 255.0
        return torch.from_numpy((x - mean) / std).unsqueeze(0)

    def forward(x):
        y = net(x.to(dev)).cpu()  # the result on the host, as stoke's logits
        return y

    def timed(fn, iterations=None):
        iterations = iterations or a.iterations
        for _ in range(a.warmup):
            fn()
        ms = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            fn()
            ms.append((time.perf_counter() - t0) * 1000.0)
        ms.sort()
        return statistics.median(ms), ms[min(len(ms) - 1, len(ms) * 9 // 10)]

    x = preprocess()
    with torch.inference_mode():
        total, total_p90 = timed(lambda: forward(preprocess()))
        pre, _ = timed(preprocess)
        fwd, _ = timed(lambda: forward(x))
        fwd_batch = 0.0
        if a.batch > 1:
            xs = x.repeat(a.batch, 1, 1, 1)
            fwd_batch, _ = timed(lambda: forward(xs), max(3, a.iterations // a.batch))
    print(json.dumps({"impl": "pytorch " + torch.__version__ + (" +draft" if a.draft else ""),
                      "device": a.device, "threads": a.threads, "input": f"{a.channels}x{a.size}x{a.size}",
                      "image": a.image, "total_ms": round(total, 3), "total_p90_ms": round(total_p90, 3),
                      "decode_preprocess_ms": round(pre, 3), "forward_ms": round(fwd, 3),
                      "batch": a.batch, "forward_batch_ms": round(fwd_batch, 3)}))


if __name__ == "__main__":
    main()
