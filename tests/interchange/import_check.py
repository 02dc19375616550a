"""Import of torchvision-style files into stoke, files made here with onnx and
numpy (no PyTorch): for ResNet-18/34/50 at a small width, the state_dict as
safetensors and the ONNX graph with batch norm kept and folded. stoke's
logits after import equal ONNX Runtime's on the ONNX file within 1e-4; a gray
model takes the RGB stem summed (reference: the gray image on all three
channels); a new head for other classes loads; a wrong architecture is an
error that lists what differs; a weight read through an Identity node (as
torch.onnx.export writes deduplicated initializers) imports."""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(__file__))
import torchvision_like as tv  # noqa: E402

tool, work = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(5)
width, size, classes, batch = 0.0625, 32, 4, 2
failures = []


def stoke_logits(kind, path, arch, channels, x, k=classes, extra=()):
    np.ascontiguousarray(x, dtype=np.float32).tofile(f"{work}/in.bin")
    r = subprocess.run([tool, "import", kind, path, arch, str(width), str(channels), str(size), str(k),
                        f"{work}/in.bin", f"{work}/out.bin", *extra], capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return np.fromfile(f"{work}/out.bin", dtype=np.float32).reshape(x.shape[0], k), r.stdout.strip()


def compare(label, got, want):
    diff = float(np.max(np.abs(got - want)))
    print(f"{label:44s} max|logit diff| {diff:.2e}; max|logit| {np.max(np.abs(want)):.1f}")
    if not diff <= 1e-4:
        failures.append(f"{label}: {diff:.3e} > 1e-4")


for arch in ("resnet18", "resnet34", "resnet50"):
    sd = tv.make_state_dict(arch, width, 3, classes, rng)
    x = rng.uniform(-1, 1, (batch, 3, size, size)).astype(np.float32)
    # Random statistics let the activations grow through the blocks; scale the
    # (linear) head so the logits are O(1) and 1e-4 is a tight bound on them.
    probe = ort.InferenceSession(tv.make_onnx(sd, arch, 3, size, False).SerializeToString(),
                                 providers=["CPUExecutionProvider"]).run(None, {"input.1": x})[0]
    scale = np.float32(3.0 / max(1.0, float(np.max(np.abs(probe)))))
    sd["fc.weight"] = sd["fc.weight"] * scale
    sd["fc.bias"] = sd["fc.bias"] * scale
    st = f"{work}/{arch}.safetensors"
    tv.save_safetensors(sd, st)
    gray = rng.uniform(-1, 1, (batch, 1, size, size)).astype(np.float32)
    for fold in (False, True):
        path = f"{work}/{arch}{'_folded' if fold else ''}.onnx"
        m = tv.make_onnx(sd, arch, 3, size, fold)
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, path)
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        want = sess.run(None, {"input.1": x})[0]
        got, msg = stoke_logits("onnx", path, arch, 3, x)
        if got is None:
            failures.append(f"{arch} onnx fold={fold}: {msg}")
            continue
        compare(f"{arch} ONNX{' (BN folded)' if fold else ''}", got, want)
        if not fold:
            got, msg = stoke_logits("safetensors", st, arch, 3, x)
            if got is None:
                failures.append(f"{arch} safetensors: {msg}")
            else:
                compare(f"{arch} safetensors", got, want)
        if arch == "resnet18":  # gray model from RGB weights
            want_gray = sess.run(None, {"input.1": np.repeat(gray, 3, axis=1)})[0]
            for kind, f in (("onnx", path), ("safetensors", st)):
                got, msg = stoke_logits(kind, f, arch, 1, gray)
                if got is None or "stem summed: yes" not in msg:
                    failures.append(f"{arch} gray from {kind}: {msg}")
                else:
                    compare(f"{arch} gray from RGB {kind}{' (folded)' if fold else ''}", got, want_gray)

# torch.onnx.export deduplicates equal initializers: the second user reads the
# first one's through an Identity node. Here layer1.1.conv2 reads
# layer1.0.conv2's weight that way (ONNX Runtime runs the same file).
m = tv.make_onnx(tv.make_state_dict("resnet18", width, 3, classes, rng), "resnet18", 3, size, True)
convs = [n for n in m.graph.node if n.op_type == "Conv"]
inits = {i.name: i for i in m.graph.initializer}
shape = lambda n: tuple(inits[n.input[1]].dims)  # noqa: E731
a, b = next((a, b) for i, a in enumerate(convs) for b in convs[i + 1:] if shape(a) == shape(b))
m.graph.initializer.remove(inits[b.input[1]])
m.graph.node.insert(0, onnx.helper.make_node("Identity", [a.input[1]], ["onnx::Conv_dedup"]))
b.input[1] = "onnx::Conv_dedup"
onnx.checker.check_model(m, full_check=True)
onnx.save(m, f"{work}/dedup.onnx")
x = rng.uniform(-1, 1, (batch, 3, size, size)).astype(np.float32)
want = ort.InferenceSession(f"{work}/dedup.onnx", providers=["CPUExecutionProvider"]).run(None, {"input.1": x})[0]
got, msg = stoke_logits("onnx", f"{work}/dedup.onnx", "resnet18", 3, x)
if got is None:
    failures.append(f"deduplicated initializer through Identity: {msg}")
else:
    compare("resnet18 ONNX, a weight through Identity", got, want)

# A new head for 7 classes loads everything but fc; the wrong architecture lists the differences.
got, msg = stoke_logits("safetensors", f"{work}/resnet18.safetensors", "resnet18", 3,
                        rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32), k=7, extra=("new-head",))
if got is None or "kept 2" not in msg:
    failures.append(f"new head: {msg}")
_, msg = stoke_logits("safetensors", f"{work}/resnet18.safetensors", "resnet34", 3, np.zeros((1, 3, size, size)))
if "missing layer1.2.conv1.weight" not in msg:
    failures.append(f"wrong architecture not reported as expected: {msg[:300]}")
_, msg = stoke_logits("onnx", f"{work}/resnet50.onnx", "resnet18", 3, np.zeros((1, 3, size, size)))
if "stoke layer" not in msg:
    failures.append(f"wrong ONNX topology not reported as expected: {msg[:300]}")
print("wrong-architecture message:", msg.splitlines()[0][:200])
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("OK: torchvision-style safetensors and ONNX files import with logits within 1e-4")
