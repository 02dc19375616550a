#!/usr/bin/python3
"""Times the CPU train step (forward + cross-entropy + backward + SGD update)
of the same ResNet-style net as bench_engine's BM_train_step in PyTorch, as
the reference for bench/RESULTS.md (section "CPU engine"). Bench-only: PyTorch is never a
build dependency of stoke.

    /usr/bin/python3 bench/pytorch_step.py --threads 2 [--steps 20] [--stoke build/bin/bench_engine]

With --stoke, also runs stoke's benchmark binary and prints both step times
and their ratio.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_resnet import BasicBlock, resnet  # noqa: E402


def time_step(channels, size, batch, steps):
    torch.manual_seed(1)
    net = resnet(channels)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(batch, channels, size, size)
    y = torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--stoke", help="path of bench_engine to run for the side-by-side figures")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    shapes = [("1x28x28/b64", 1, 28, 64), ("3x128x128/b16", 3, 128, 16)]
    stoke_ms = {}
    if args.stoke:
        out = subprocess.run([args.stoke, "--benchmark_filter=BM_train_step", "--benchmark_format=json"],
                             capture_output=True, text=True, check=True,
                             env=dict(os.environ, STOKE_CPU_THREADS=str(args.threads)))
        for b in json.loads(out.stdout)["benchmarks"]:
            stoke_ms[b["name"].split("/f32/")[1].split("/real_time")[0].split("/min_time")[0]] = b["real_time"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, c, s, n in shapes:
        ms = time_step(c, s, n, args.steps)
        line = f"train step {name}: pytorch {ms:.1f} ms"
        if name in stoke_ms:
            line += f", stoke {stoke_ms[name]:.1f} ms, ratio stoke/pytorch {stoke_ms[name] / ms:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
