#!/usr/bin/env python3
"""`stoke predict`'s file path (read + decode + preprocess + forward, batch 1,
through Predictor::predict_file: bench/predict_latency.cpp) against ONNX
Runtime running stoke's own ONNX export of the same model with PIL decoding
and resizing (with and without PIL's JPEG `draft`, its DCT-domain downscale),
on a camera-size JPEG (2448x2048) and a 256x256 one; and the images/s of two
threads calling one Predictor against one thread's. Rounds alternate the two
sides; medians and minima of the per-round medians, the load beside them.

    python3 bench/predict_reference.py --build build [--threads 2] [--rounds 5] [--size 224]
        [--iterations 20]

The model is what `stoke train` makes (the default net: stem 16, widths
16/32/64) at --size, ImageNet normalization, trained one epoch on a small
synthetic dataset. Creates build/bench-venv (onnxruntime, numpy, pillow) and
re-runs itself inside it. Bench-only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_reference import ensure_venv  # noqa: E402


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_model(stoke, work, size):
    run([stoke, "dataset", "--out", f"{work}/data", "--count", "24", "--size", "256x256"])
    run([stoke, "train", "--data", f"{work}/data", "--out", f"{work}/model.stoke", "--size", str(size),
         "--epochs", "1", "--batch", "8", "--normalize", "imagenet"])
    run([stoke, "export", "--model", f"{work}/model.stoke", "--onnx", f"{work}/model.onnx"])
    run([stoke, "dataset", "--out", f"{work}/big", "--count", "1", "--size", "2448x2048", "--defects", "0"])
    find = lambda d: next(os.path.join(r, f) for r, _, fs in os.walk(d) for f in sorted(fs) if f.endswith(".jpg"))
    return find(f"{work}/big"), find(f"{work}/data")


def ort_path(model, size, threads):
    import numpy as np
    import onnxruntime as ort
    from PIL import Image
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    mean = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)

    def predict(image, draft):
        img = Image.open(image)
        if draft:
            img.draft("RGB", (size, size))
        img = img.convert("RGB").resize((size, size), Image.BILINEAR)
        x = (np.asarray(img, np.float32).transpose(2, 0, 1) / 255.0 - mean) / std
        return sess.run(None, {name: x[None]})[0]
    return predict


def timed(fn, iterations):
    for _ in range(3):
        fn()
    ms = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--venv", default=None)
    a = ap.parse_args()
    a.venv = a.venv or os.path.join(a.build, "bench-venv")
    a.torch = False
    ensure_venv(a, {"onnxruntime": "onnxruntime", "numpy": "numpy", "PIL": "pillow"})
    stoke = os.path.join(a.build, "bin", "stoke")
    env = dict(os.environ, STOKE_LOG_LEVEL="error", STOKE_CPU_THREADS=str(a.threads))
    os.environ.update(env)
    with tempfile.TemporaryDirectory() as work:
        big, small = make_model(stoke, work, a.size)
        predict = ort_path(f"{work}/model.onnx", a.size, a.threads)
        rows = []
        for label, image in (("2448x2048 JPEG", big), ("256x256 JPEG", small)):
            s_ms, o_ms, od_ms, one, two = [], [], [], [], []
            for _ in range(a.rounds):
                out = subprocess.run([os.path.join(a.build, "bin", "stoke_bench_predict"), "--model",
                                      f"{work}/model.stoke", "--image", image, "--iterations",
                                      str(a.iterations), "--concurrent", "2"],
                                     check=True, capture_output=True, text=True, env=env).stdout
                r = json.loads(out)
                s_ms.append(r["total_ms"])
                one.append(r["one_caller_images_per_s"])
                two.append(r["concurrent_images_per_s"])
                o_ms.append(timed(lambda: predict(image, False), a.iterations))
                od_ms.append(timed(lambda: predict(image, True), a.iterations))
            rows.append((label, s_ms, o_ms, od_ms, one, two))
    load = os.getloadavg()[0]
    print(f"# {a.threads} threads, model {a.size}x{a.size} (stoke train's default net), "
          f"medians (min) of {a.rounds} interleaved rounds of {a.iterations}-call medians, "
          f"load average {load:.1f} at the end")
    print("| image | stoke predict_file ms | ORT + PIL ms | ORT + PIL draft ms | stoke / ORT+PIL draft "
          "| 1 caller img/s | 2 callers img/s | 2 / 1 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    med = statistics.median
    for label, s_ms, o_ms, od_ms, one, two in rows:
        print(f"| {label} | {med(s_ms):.1f} ({min(s_ms):.1f}) | {med(o_ms):.1f} ({min(o_ms):.1f}) | "
              f"{med(od_ms):.1f} ({min(od_ms):.1f}) | {med(s_ms) / med(od_ms):.2f} | {med(one):.1f} | "
              f"{med(two):.1f} | {med(two) / med(one):.2f} |")


if __name__ == "__main__":
    main()
