"""Deployable import (issue 29 item 3): a torchvision ResNet-18 (seeded random
weights, batch-norm statistics perturbed) saved as safetensors and exported
with torch.onnx.export, imported by `stoke import` with class names and
ImageNet normalization, run by `stoke predict --json` on RGB PNG files at the
input size: every class probability within 1e-4 of PyTorch's softmax on the
same pixels, the self-check passing, and the class names as given. Runs only
where PyTorch is installed."""
import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_np import save_safetensors  # noqa: E402
from torch_batch_norm import perturb_batch_norm  # noqa: E402

stoke, work = sys.argv[1], sys.argv[2]
size, names = 64, ["good", "scratch", "dent"]
torch.manual_seed(3)
model = torchvision.models.resnet18(num_classes=len(names)).eval()
perturb_batch_norm(model)
save_safetensors({k: v.numpy() for k, v in model.state_dict().items()}, f"{work}/r18.safetensors")
torch.onnx.export(model, torch.rand(1, 3, size, size), f"{work}/r18.onnx", opset_version=13,
                  input_names=["x"], dynamic_axes={"x": {0: "n"}})
with open(f"{work}/names.txt", "w") as f:
    f.write("\n".join(names) + "\n")


def write_png(path, rgb):
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


rng = np.random.default_rng(11)
images = []
for i in range(4):  # smooth gradients plus noise: not all one class
    yy, xx = np.mgrid[0:size, 0:size]
    base = np.stack([(xx * (i + 1) * 3) % 256, (yy * (5 - i) * 2) % 256, (xx + yy) * 2 % 256], -1)
    rgb = np.clip(base + rng.integers(-40, 40, base.shape), 0, 255).astype(np.uint8)
    path = f"{work}/img{i}.png"
    write_png(path, rgb)
    images.append((path, rgb))

mean = np.array([0.485, 0.456, 0.406], np.float32)
std = np.array([0.229, 0.224, 0.225], np.float32)
x = torch.from_numpy(np.stack([((rgb / 255.0 - mean) / std).transpose(2, 0, 1) for _, rgb in images]).astype(np.float32))
with torch.no_grad():
    want = torch.softmax(model(x), dim=1).numpy()

failures = []
for kind in ("safetensors", "onnx"):
    out = f"{work}/{kind}.stoke"
    r = subprocess.run([stoke, "import", f"{work}/r18.{kind}", "--arch", "resnet18", "--size", str(size),
                        "--class-names", f"{work}/names.txt", "--out", out], capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"import {kind}: {r.stderr.strip()}")
        continue
    r = subprocess.run([stoke, "predict", "--model", out, "--json"] + [p for p, _ in images],
                       capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"predict {kind}: {r.stderr.strip()}")
        continue
    if "self-check passed" not in r.stderr:
        failures.append(f"predict {kind}: no passing self-check in: {r.stderr.strip()[:300]}")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    got = np.array([[row["probabilities"][n] for n in names] for row in rows], np.float32)
    diff = float(np.max(np.abs(got - want)))
    print(f"imported from {kind:12s} stoke predict vs PyTorch softmax: max|p diff| {diff:.2e}; "
          f"classes {[row['class'] for row in rows]}")
    if not diff <= 1e-4:
        failures.append(f"{kind}: probabilities differ by {diff:.3e} > 1e-4")
    if [row["class"] for row in rows] != [names[i] for i in want.argmax(1)]:
        failures.append(f"{kind}: classes differ from PyTorch's")
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("OK: imported torchvision ResNet-18 predicts PyTorch's probabilities within 1e-4")
