#!/usr/bin/python3
"""Mixed-precision training step on the CPU (issue 28): stoke fp32, stoke bf16
(bench_engine's BM_train_step/cpu/{f32,bf16}/...) and PyTorch's
torch.autocast("cpu", dtype=torch.bfloat16) step (bench/pytorch_step.py,
mode autocast_bf16), on the default net and ResNet-18 at 3x224x224, batch 8.
Rounds interleave the three so that the machine's load falls on each alike;
prints every round, then the median and minimum per row, the ratios the
target names (bf16 images/s over fp32's; bf16 time over PyTorch's) and the
load average before and after. Bench-only.

    /usr/bin/python3 bench/bf16_step.py --stoke build/bin/bench_engine --threads 2 --rounds 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_step import make_step, time_step  # noqa: E402

NETS = (("default", "resnet", "3x224x224/b8"), ("resnet18", "resnet18", "resnet18/3x224x224/b8"))


def stoke_ms(binary, precision, key, threads, min_time):
    out = subprocess.run(
        [binary, f"--benchmark_filter=^BM_train_step/cpu/{precision}/{key}/",
         "--benchmark_format=json", f"--benchmark_min_time={min_time}"],
        capture_output=True, text=True, check=True,
        env=dict(os.environ, STOKE_CPU_THREADS=str(threads)))
    runs = json.loads(out.stdout)["benchmarks"]
    if not runs or runs[0].get("error_occurred"):
        raise SystemExit(f"{precision} {key}: " + (runs[0].get("error_message", "") if runs else "no run"))
    return runs[0]["real_time"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stoke", required=True, help="bench_engine")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5, help="PyTorch steps timed per round")
    ap.add_argument("--min-time", type=float, default=5.0, help="stoke seconds per round")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads, load average {os.getloadavg()}", flush=True)
    times = {}
    steps = {}
    for r in range(args.rounds):
        for net, arch, key in NETS:
            for name in ("stoke fp32", "stoke bf16", "pytorch autocast bf16"):
                if name.startswith("stoke"):
                    ms = stoke_ms(args.stoke, name.split()[1].replace("fp32", "f32"), key,
                                  args.threads, args.min_time)
                else:
                    if net not in steps:
                        steps[net] = make_step(arch, 3, 224, 8, "autocast_bf16")
                        steps[net]()
                        steps[net]()
                    ms = time_step(steps[net], args.steps)
                times.setdefault((net, name), []).append(ms)
                print(f"round {r + 1} {net} {name}: {ms:.1f} ms", flush=True)
    print(f"load average after: {os.getloadavg()}")
    for net, _, _ in NETS:
        med = {}
        for name in ("stoke fp32", "stoke bf16", "pytorch autocast bf16"):
            t = times[(net, name)]
            med[name] = statistics.median(t)
            print(f"{net} {name}: median {med[name]:.1f} ms, min {min(t):.1f} ms, "
                  f"{8000.0 / med[name]:.2f} images/s")
        fp32, bf16, torch_ms = med["stoke fp32"], med["stoke bf16"], med["pytorch autocast bf16"]
        print(f"{net}: stoke bf16 / fp32 images/s {fp32 / bf16:.2f} (target >= 1.6); "
              f"stoke bf16 / PyTorch autocast time {bf16 / torch_ms:.2f} (target <= 0.8)")


if __name__ == "__main__":
    main()
