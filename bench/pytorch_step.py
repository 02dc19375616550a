#!/usr/bin/python3
"""Times the CPU train step (forward + cross-entropy + backward + SGD update)
of the same nets as bench_engine's BM_train_step in PyTorch, as the reference
for bench/RESULTS.md: the ResNet-style net of bench/pytorch_resnet.py (stem 32,
widths 32/64/128, two basic blocks per stage, 10 classes; stoke's default
ModelSpec) and torchvision's ResNet-18 topology (1000 classes; stoke's
Architecture::kResNet18). Three PyTorch variants: eager NCHW-contiguous
("eager"), eager channels-last ("channels_last") and torch.compile of the
model ("compile"); and mixed precision, eager under
torch.autocast("cpu", dtype=torch.bfloat16) ("autocast_bf16", the reference
for stoke's bf16 training step; bench/bf16_step.py). Bench-only: PyTorch is
never a build dependency of stoke.

    build/bench-venv/bin/python3 bench/pytorch_step.py --threads 2 [--steps 5] [--stoke build/bin/bench_engine]

bench/engine_reference.py --torch uses make_step/time_step/peak_gflops/step_gflop
for its interleaved table.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_resnet import resnet, resnet18  # noqa: E402

MODES = ("eager", "channels_last", "compile")
ALL_MODES = MODES + ("autocast_bf16",)


def build_net(arch, channels):
    torch.manual_seed(1)
    return resnet18(channels) if arch == "resnet18" else resnet(channels)


def make_step(arch, channels, size, batch, mode):
    """One SGD step (momentum 0.9, weight decay 5e-4, as stoke's bench) as a closure."""
    net = build_net(arch, channels)
    classes = 1000 if arch == "resnet18" else 10
    x = torch.randn(batch, channels, size, size)
    y = torch.randint(0, classes, (batch,))
    if mode == "channels_last":
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    model = torch.compile(net) if mode == "compile" else net

    def step():
        opt.zero_grad(set_to_none=True)
        if mode == "autocast_bf16":
            # PyTorch's CPU mixed precision: convolutions and linear layers in
            # bf16, fp32 weights and optimizer; the loss outside the region.
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(x)
            loss = F.cross_entropy(logits.float(), y)
        else:
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def time_step(step, steps):
    """Mean ms per step over `steps` steps (call warm-ups before)."""
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps * 1000.0


def step_gflop(arch, channels, size, batch):
    """GFLOP of one train step (forward + both backward passes of every
    convolution and matmul), counted by torch.utils.flop_counter."""
    from torch.utils.flop_counter import FlopCounterMode
    net = build_net(arch, channels)
    x = torch.randn(batch, channels, size, size)
    y = torch.randint(0, 10, (batch,))
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(net(x), y).backward()
    return counter.get_total_flops() / 1e9


def peak_gflops(n=2048, reps=5):
    """Best FP32 GFLOP/s of an n x n x n torch.mm (torch's CPU BLAS, MKL on
    x86) at the current thread count: the machine's measured FP32 peak."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n ** 3 / best / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--stoke", help="path of bench_engine to run for the side-by-side figures")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, of " + ", ".join(ALL_MODES))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    shapes = [("1x28x28/b64", "resnet", 1, 28, 64), ("3x128x128/b16", "resnet", 3, 128, 16),
              ("3x224x224/b8", "resnet", 3, 224, 8), ("resnet18/3x224x224/b8", "resnet18", 3, 224, 8)]
    stoke_ms = {}
    if args.stoke:
        out = subprocess.run([args.stoke, "--benchmark_filter=BM_train_step", "--benchmark_format=json"],
                             capture_output=True, text=True, check=True,
                             env=dict(os.environ, STOKE_CPU_THREADS=str(args.threads)))
        for b in json.loads(out.stdout)["benchmarks"]:
            if "/f32/" not in b["name"]:
                continue  # the bf16 steps: bench/bf16_step.py
            stoke_ms[b["name"].split("/f32/")[1].split("/real_time")[0].split("/min_time")[0]] = b["real_time"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, peak {peak_gflops():.0f} GFLOP/s")
    for name, arch, c, s, n in shapes:
        for mode in args.modes.split(","):
            step = make_step(arch, c, s, n, mode)
            step()
            step()
            ms = time_step(step, args.steps)
            line = f"train step {name} {mode}: pytorch {ms:.1f} ms"
            if name in stoke_ms:
                line += f", stoke {stoke_ms[name]:.1f} ms, ratio stoke/pytorch {stoke_ms[name] / ms:.2f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
