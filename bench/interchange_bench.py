#!/usr/bin/python3
"""ResNet-18 at 224x224 on the CPU, same threads: stoke (bench_resnet) beside
PyTorch (torchvision.models.resnet18, train step with SGD and inference) and
the file stoke exported, run in ONNX Runtime. Bench-only: PyTorch and ONNX
Runtime are never build dependencies of stoke.

    /usr/bin/python3 bench/interchange_bench.py --stoke build/bin/bench_resnet --threads 2 [--batch 8] [--steps 3] \
        [--ort-python ~/.cache/stoke/venv-onnx/bin/python]

PyTorch runs in this Python (Debian's python3-torch, python3-torchvision);
ONNX Runtime in --ort-python (the venv tests/interchange/run.sh makes).
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time


def median_ms(reps, f):
    t = []
    for _ in range(reps):
        a = time.perf_counter()
        f()
        t.append((time.perf_counter() - a) * 1e3)
    return sorted(t)[len(t) // 2]


ORT_SNIPPET = r"""
import json, sys, time
import numpy as np, onnxruntime as ort
path, threads, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
o = ort.SessionOptions(); o.intra_op_num_threads = threads; o.inter_op_num_threads = 1
s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
def med(reps, x):
    s.run(None, {"input": x}); t = []
    for _ in range(reps):
        a = time.perf_counter(); s.run(None, {"input": x}); t.append((time.perf_counter() - a) * 1e3)
    return sorted(t)[len(t) // 2]
x1 = np.random.rand(1, 3, 224, 224).astype(np.float32) - 0.5
xb = np.random.rand(batch, 3, 224, 224).astype(np.float32) - 0.5
print(json.dumps({"ort_version": ort.__version__, "infer_b1_ms": med(steps + 2, x1), "infer_batch_ms": med(steps, xb)}))
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stoke", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--ort-python", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        onnx_path = f"{d}/resnet18.onnx"
        out = subprocess.run([a.stoke, onnx_path, "--threads", str(a.threads), "--batch", str(a.batch),
                              "--steps", str(a.steps)], check=True, capture_output=True, text=True).stdout
        st = json.loads(out)
        ort = None
        if a.ort_python:
            r = subprocess.run([a.ort_python, "-c", ORT_SNIPPET, onnx_path, str(a.threads), str(a.batch), str(a.steps)],
                               check=True, capture_output=True, text=True)
            ort = json.loads(r.stdout)
    import torch
    import torchvision
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    net = torchvision.models.resnet18(num_classes=1000)
    x1 = torch.rand(1, 3, 224, 224) - 0.5
    xb = torch.rand(a.batch, 3, 224, 224) - 0.5
    y = torch.arange(a.batch) % 1000
    net.eval()
    with torch.no_grad():
        net(x1)
        pt_b1 = median_ms(a.steps + 2, lambda: net(x1))
        pt_b = median_ms(a.steps, lambda: net(xb))
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(xb), y).backward()
        opt.step()
    step()
    pt_train = median_ms(a.steps, step)
    rows = [("inference, batch 1", st["infer_b1_ms"], pt_b1, ort and ort["infer_b1_ms"]),
            (f"inference, batch {a.batch}", st["infer_batch_ms"], pt_b, ort and ort["infer_batch_ms"]),
            (f"train step (SGD), batch {a.batch}", st["train_step_ms"], pt_train, None)]
    print(f"ResNet-18, 224x224, {a.threads} threads; PyTorch {torch.__version__}"
          + (f", ONNX Runtime {ort['ort_version']}" if ort else ""))
    print("| what | stoke ms | PyTorch ms | stoke / PyTorch | ONNX Runtime ms (stoke's export) | stoke / ORT |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, s, p, o in rows:
        ort_cols = f"{o:.1f} | {s / o:.2f}" if o else "– | –"
        print(f"| {name} | {s:.1f} | {p:.1f} | {s / p:.2f} | {ort_cols} |")


if __name__ == "__main__":
    sys.exit(main())
