#!/usr/bin/python3
"""Fine-tune vs from scratch on Fashion-MNIST (Debian's dataset-fashion-mnist):
task A = classes 0-4 (pretraining), task B = classes 5-9 (a small training
set, the test set's images of those classes). Writes the splits as raw
float32 32x32 (the 28x28 images padded by 2) and runs bench_finetune.

    python3 bench/finetune_bench.py --stoke build/bin/bench_finetune [--pre N] [--ft N] [--threads 2] [...]
"""
import argparse
import gzip
import json
import subprocess
import tempfile

import numpy as np

ROOT = "/usr/share/datasets/fashion-mnist"


def idx(name):
    with gzip.open(f"{ROOT}/{name}", "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def write(d, name, x, y):
    x = np.pad(x.astype(np.float32) / 255.0 - 0.5, ((0, 0), (2, 2), (2, 2)))[:, None]
    np.ascontiguousarray(x, dtype=np.float32).tofile(f"{d}/{name}_x.bin")
    y.astype(np.int32).tofile(f"{d}/{name}_y.bin")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stoke", required=True)
    ap.add_argument("--pre", type=int, default=3000)
    ap.add_argument("--ft", type=int, default=500)
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--pre-epochs", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--width", type=float, default=0.25)
    a = ap.parse_args()
    x, y = idx("train-images-idx3-ubyte.gz"), idx("train-labels-idx1-ubyte.gz")
    tx, ty = idx("t10k-images-idx3-ubyte.gz"), idx("t10k-labels-idx1-ubyte.gz")
    a_mask, b_mask = y < 5, y >= 5
    with tempfile.TemporaryDirectory() as d:
        write(d, "pre", x[a_mask][:a.pre], y[a_mask][:a.pre])
        write(d, "ft", x[b_mask][:a.ft], y[b_mask][:a.ft] - 5)
        write(d, "test", tx[ty >= 5][:a.test], ty[ty >= 5][:a.test] - 5)
        out = subprocess.run([a.stoke, d, "--threads", str(a.threads), "--pre-epochs", str(a.pre_epochs),
                              "--epochs", str(a.epochs), "--width", str(a.width)],
                             check=True, capture_output=True, text=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    starts = [r["start"] for r in rows if "start" in r and r["epoch"] == 1]
    print(f"task A: {a.pre} images of classes 0-4, {a.pre_epochs} epochs; task B: {a.ft} training images of "
          f"classes 5-9, test accuracy on {a.test} test images of classes 5-9; ResNet-18 width {a.width}, 32x32 gray")
    print("| epoch | " + " | ".join(starts) + " |")
    print("| --- |" + " --- |" * len(starts))
    for e in range(1, a.epochs + 1):
        accs = [next(r["test_accuracy"] for r in rows if r.get("start") == s and r["epoch"] == e) for s in starts]
        print(f"| {e} | " + " | ".join(f"{v * 100:.1f} %" for v in accs) + " |")


if __name__ == "__main__":
    main()
