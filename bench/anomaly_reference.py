"""PatchCore fit (embeddings + coreset) or PaDiM fit (embeddings + Gaussians,
--method padim) and per-image scoring: stoke
(stoke_bench_anomaly) beside the same definitions in PyTorch (anomalib 2.x's
PatchcoreModel, KCenterGreedy with its SparseRandomProjection at eps 0.9,
euclidean_dist in float32, the 9-neighbour re-weighting, nearest upsampling
and the sigma-4 blur; PaDiM: layer1..layer3 at layer1's grid, 100 of 448
channels, the per-position mean and inverse covariance in float32 (the
covariances as one einsum, where anomalib loops over the positions: a faster
PyTorch side), the Mahalanobis distance, bilinear upsampling, the blur and the
map's maximum), on one seeded random torchvision backbone, the same raw
inputs and threads, interleaved in rounds. Prints one JSON line per run and a
table of medians (minima) and the ratios stoke / PyTorch.
  anomaly_reference.py STOKE_BENCH_ANOMALY WORKDIR [--arch resnet18] [--size 224]
                       [--train 16] [--test 8] [--coreset 0.1] [--rounds 3] [--threads 2]
                       [--method patchcore|padim]"""
import argparse
import json
import math
import statistics
import subprocess
import sys
import time
import os

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "interchange"))
from safetensors_np import save_safetensors  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "anomaly"))
from patchcore_reference import blur, embed, euclidean_dist  # noqa: E402 (float32, as anomalib)
import padim_reference  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("tool")
p.add_argument("work")
p.add_argument("--arch", default="resnet18")
p.add_argument("--size", type=int, default=224)
p.add_argument("--train", type=int, default=16)
p.add_argument("--test", type=int, default=8)
p.add_argument("--coreset", type=float, default=0.1)
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--method", choices=("patchcore", "padim"), default="patchcore")
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
net = getattr(torchvision.models, a.arch)().eval()
weights = f"{a.work}/backbone.safetensors"
save_safetensors({k: v.numpy() for k, v in net.state_dict().items()}, weights)
train = torch.rand(a.train, 3, a.size, a.size) * 2 - 1
test = torch.rand(a.test, 3, a.size, a.size) * 2 - 1
train.numpy().tofile(f"{a.work}/train.bin")
test.numpy().tofile(f"{a.work}/test.bin")


def projection(n, width):  # anomalib's SparseRandomProjection(eps=0.9)
    eps = 0.9
    dim = min(width, int(4 * math.log(n) / (eps**2 / 2 - eps**3 / 3)))
    density = 1 / math.sqrt(width)
    mask = torch.rand(dim, width) < density
    signs = torch.where(torch.rand(dim, width) < 0.5, -1.0, 1.0)
    return (mask * signs) * math.sqrt(1 / density) / math.sqrt(dim)


def coreset(bank, ratio):  # anomalib's KCenterGreedy
    keep = int(bank.shape[0] * ratio)
    features = bank @ projection(bank.shape[0], bank.shape[1]).T
    idx = int(torch.randint(high=bank.shape[0], size=(1,)).item())
    min_d, chosen = None, []
    for _ in range(keep):
        d = F.pairwise_distance(features, features[idx : idx + 1], p=2).reshape(-1, 1)
        min_d = d if min_d is None else torch.minimum(min_d, d)
        idx = int(torch.argmax(min_d).item())
        min_d[idx] = 0
        chosen.append(idx)
    return bank[chosen]


def score(bank, x):
    e, grid = embed(net, x)
    scores, locs = euclidean_dist(e, bank).min(1)
    j = int(torch.argmax(scores))
    support = euclidean_dist(bank[locs[j]][None], bank).topk(9, largest=False).indices[0]
    w = 1 - F.softmax(euclidean_dist(e[j][None], bank[support]), 1)[0, 0]
    blur(F.interpolate(scores.reshape(1, 1, *grid), size=(a.size, a.size)))
    return float(w * scores[j])


def torch_run():
    with torch.no_grad():
        embed(net, train[:1])  # warm-up, as stoke builds its plan first
        t0 = time.perf_counter()
        bank = torch.cat([embed(net, train[i : i + 8])[0] for i in range(0, a.train, 8)])
        embed_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        bank = coreset(bank, a.coreset) if a.coreset < 1 else bank
        coreset_s = time.perf_counter() - t0
        ms = []
        for i in range(a.test):
            t0 = time.perf_counter()
            score(bank, test[i : i + 1])
            ms.append(1000 * (time.perf_counter() - t0))
    return {"impl": "pytorch", "threads": a.threads, "embed_s": embed_s, "coreset_s": coreset_s,
            "fit_s": embed_s + coreset_s, "bank_rows": int(bank.shape[0]), "infer_ms": statistics.median(ms)}


def padim_run():
    idx = torch.randperm(448)[:100].sort().values  # anomalib's resnet18 default: 100 of 448
    with torch.no_grad():
        padim_reference.embed(net, train[:1], idx)  # warm-up
        t0 = time.perf_counter()
        e = torch.cat([padim_reference.embed(net, train[i : i + 8], idx) for i in range(0, a.train, 8)])
        embed_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        mean, inv = padim_reference.fit(e, torch.float32)
        gaussians_s = time.perf_counter() - t0
        ms = []
        for i in range(a.test):
            t0 = time.perf_counter()
            x = padim_reference.embed(net, test[i : i + 1], idx)
            float(padim_reference.anomaly_map(padim_reference.distance(x, mean, inv), (a.size, a.size)).max())
            ms.append(1000 * (time.perf_counter() - t0))
    return {"impl": "pytorch", "threads": a.threads, "embed_s": embed_s, "gaussians_s": gaussians_s,
            "fit_s": embed_s + gaussians_s, "positions": int(mean.shape[1]), "infer_ms": statistics.median(ms)}


def stoke_run():
    env = dict(os.environ, STOKE_CPU_THREADS=str(a.threads), STOKE_LOG_LEVEL="error")
    r = subprocess.run([a.tool, weights, a.arch, str(a.size), f"{a.work}/train.bin", str(a.train),
                        f"{a.work}/test.bin", str(a.test), str(a.coreset), a.method],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"stoke_bench_anomaly failed: {r.stderr}")
    return json.loads(r.stdout)


runs = []
print(f"load average before: {os.getloadavg()[0]:.2f}")
for _ in range(a.rounds):
    for run in (stoke_run, padim_run if a.method == "padim" else torch_run):
        runs.append(run())
        print(json.dumps(runs[-1]))
print(f"load average after: {os.getloadavg()[0]:.2f}")
what = "PaDiM 100 features" if a.method == "padim" else f"coreset {a.coreset}"
print(f"| {a.arch} {a.size}², {a.train} train / {a.test} test images, {what}, {a.threads} threads "
      f"| stoke median (min) | PyTorch median (min) | stoke / PyTorch |")
print("| --- | --- | --- | --- |")
for key in ("embed_s", "gaussians_s" if a.method == "padim" else "coreset_s", "fit_s", "infer_ms"):
    s = [r[key] for r in runs if r["impl"] == "stoke"]
    t = [r[key] for r in runs if r["impl"] == "pytorch"]
    print(f"| {key} | {statistics.median(s):.3f} ({min(s):.3f}) | {statistics.median(t):.3f} ({min(t):.3f}) "
          f"| {statistics.median(s) / statistics.median(t):.2f} |")
