#!/usr/bin/env python3
"""PyTorch reference for bench/segment_step.cpp: the same U-Net
(segmentation_models_pytorch's Unet on ResNet-18, written out in
tests/segment_model/parity.py; decoder 256/128/64/32/16), RGB inputs,
per-pixel cross-entropy, SGD (momentum 0.9, lr 0.01). Each timed step reads
the loss back (as stoke's step does). Prints one JSON object.

  python3 bench/pytorch_segment_step.py [--size 512] [--batch 4] [--classes 3]
      [--steps 3] [--warmup 1] [--threads 2] [--device cpu|cuda]
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "segment_model"))
from parity import Unet  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)
    model = Unet(3, 64, (256, 128, 64, 32, 16), a.classes).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(7)
    x = torch.tensor(rng.uniform(-1, 1, (a.batch, 3, a.size, a.size)).astype(np.float32), device=dev)
    y = torch.tensor(rng.integers(0, a.classes, (a.batch, a.size, a.size)), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    loss = 0.0
    for _ in range(a.warmup):
        loss = step()
    ms = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        loss = step()
        ms.append((time.perf_counter() - t0) * 1000.0)
    ms.sort()
    peak = torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0
    print(json.dumps({"impl": "pytorch " + torch.__version__, "device": a.device, "threads": a.threads,
                      "size": a.size, "batch": a.batch, "classes": a.classes, "steps": a.steps,
                      "median_ms": round(ms[len(ms) // 2], 3), "min_ms": round(ms[0], 3),
                      "peak_bytes": peak, "loss": round(loss, 5)}))


if __name__ == "__main__":
    main()
