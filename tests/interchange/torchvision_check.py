"""A real torchvision ResNet-18 (random weights, small input): its state_dict
saved with safetensors-format bytes and exported with torch.onnx.export (batch
norm folded, as the exporter does in eval mode); stoke imports both and its
logits equal PyTorch's within 1e-4. Runs only where PyTorch is installed."""
import subprocess
import sys

import os

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.dirname(__file__))
from safetensors_np import save_safetensors  # noqa: E402
from torch_batch_norm import perturb_batch_norm  # noqa: E402

tool, work = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = torchvision.models.resnet18(num_classes=6).eval()
perturb_batch_norm(model)
x = torch.rand(2, 3, 64, 64) * 2 - 1
with torch.no_grad():
    want = model(x).numpy()
save_safetensors({k: v.numpy() for k, v in model.state_dict().items()}, f"{work}/r18.safetensors")
torch.onnx.export(model, x, f"{work}/r18.onnx", opset_version=13, dynamic_axes={"x": {0: "n"}}, input_names=["x"])
x.numpy().tofile(f"{work}/in.bin")
failures = []
for kind, path in (("safetensors", f"{work}/r18.safetensors"), ("onnx", f"{work}/r18.onnx")):
    r = subprocess.run([tool, "import", kind, path, "resnet18", "1", "3", "64", "6", f"{work}/in.bin", f"{work}/out.bin"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        failures.append(f"{kind}: {r.stderr.strip()}")
        continue
    got = np.fromfile(f"{work}/out.bin", dtype=np.float32).reshape(2, 6)
    diff = float(np.max(np.abs(got - want)))
    print(f"torchvision resnet18 {kind:12s} max|logit diff| {diff:.2e}")
    if not diff <= 1e-4:
        failures.append(f"{kind}: {diff:.3e} > 1e-4")
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("OK: torchvision ResNet-18 imports with PyTorch's logits within 1e-4")
