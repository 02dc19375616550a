"""PatchCore fit (embeddings + coreset) or PaDiM fit (embeddings + Gaussians,
--method padim) and per-image scoring: stoke (stoke_bench_anomaly) beside
anomalib 2.7 itself (PatchcoreModel / PadimModel, pre_trained=False, the same
seeded random torchvision backbone loaded into its timm feature extractor),
the same raw inputs and threads (torch.set_num_threads, STOKE_CPU_THREADS),
interleaved in rounds. anomalib's fit as its Lightning module runs it: the
model's forward in training mode over batches of 8, then subsample_embedding
(KCenterGreedy) or fit() (MultiVariateGaussian); scoring: the forward in eval
mode, one image at a time (anomaly map and image score). Prints one JSON line
per run and a table of medians (minima) and the ratios stoke / anomalib.
  anomalib_reference.py STOKE_BENCH_ANOMALY WORKDIR [--arch resnet18] [--size 224]
                        [--train 16] [--test 8] [--coreset 0.1] [--rounds 3] [--threads 2]
                        [--method patchcore|padim]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "interchange"))
from safetensors_np import save_safetensors  # noqa: E402

import anomalib  # noqa: E402
from anomalib.models.image.padim.torch_model import PadimModel  # noqa: E402
from anomalib.models.image.patchcore.torch_model import PatchcoreModel  # noqa: E402

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


def model():
    if a.method == "padim":
        m = PadimModel(backbone=a.arch, layers=["layer1", "layer2", "layer3"], pre_trained=False)
    else:
        m = PatchcoreModel(layers=["layer2", "layer3"], backbone=a.arch, pre_trained=False)
    r = m.feature_extractor.feature_extractor.load_state_dict(net.state_dict(), strict=False)
    if r.missing_keys:
        sys.exit(f"anomalib's feature extractor lacks {r.missing_keys}")
    return m.eval()


def anomalib_run():
    m = model()
    with torch.no_grad():
        m.feature_extractor(train[:1])  # warm-up, as stoke builds its plan first
        m.train()
        t0 = time.perf_counter()
        for i in range(0, a.train, 8):
            m(train[i : i + 8])
        embed_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        if a.method == "padim":
            m.fit()
        else:
            m.subsample_embedding(a.coreset)
        second_s = time.perf_counter() - t0
        m.eval()
        ms = []
        for i in range(a.test):
            t0 = time.perf_counter()
            float(m(test[i : i + 1]).pred_score)
            ms.append(1000 * (time.perf_counter() - t0))
    second = "gaussians_s" if a.method == "padim" else "coreset_s"
    size = {"positions": int(m.gaussian.mean.shape[1])} if a.method == "padim" else {
        "bank_rows": int(m.memory_bank.shape[0])}
    return {"impl": "anomalib", "threads": a.threads, "embed_s": embed_s, second: second_s,
            "fit_s": embed_s + second_s, **size, "infer_ms": statistics.median(ms)}


def stoke_run():
    env = dict(os.environ, STOKE_CPU_THREADS=str(a.threads), STOKE_LOG_LEVEL="error")
    r = subprocess.run([a.tool, weights, a.arch, str(a.size), f"{a.work}/train.bin", str(a.train),
                        f"{a.work}/test.bin", str(a.test), str(a.coreset), a.method],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"stoke_bench_anomaly failed: {r.stderr}")
    return json.loads(r.stdout)


runs = []
print(f"anomalib {anomalib.__version__}, torch {torch.__version__}, {a.threads} threads")
print(f"load average before: {os.getloadavg()[0]:.2f}")
for _ in range(a.rounds):
    for run in (stoke_run, anomalib_run):
        runs.append(run())
        print(json.dumps(runs[-1]), flush=True)
print(f"load average after: {os.getloadavg()[0]:.2f}")
what = "PaDiM" if a.method == "padim" else f"PatchCore coreset {a.coreset}"
print(f"| {a.arch} {a.size}², {a.train} train / {a.test} test images, {what}, {a.threads} threads "
      f"| stoke median (min) | anomalib median (min) | stoke / anomalib |")
print("| --- | --- | --- | --- |")
for key in ("embed_s", "gaussians_s" if a.method == "padim" else "coreset_s", "fit_s", "infer_ms"):
    s = [r[key] for r in runs if r["impl"] == "stoke"]
    t = [r[key] for r in runs if r["impl"] == "anomalib"]
    print(f"| {key} | {statistics.median(s):.3f} ({min(s):.3f}) | {statistics.median(t):.3f} ({min(t):.3f}) "
          f"| {statistics.median(s) / statistics.median(t):.2f} |")
