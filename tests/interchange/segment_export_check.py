"""A segmentation model file (the U-Net, tests/tools/segment_export_tool.cpp)
exported by `stoke export`, batch norm kept and folded (the latter with
--softmax), run in ONNX Runtime on a batch of 2 random inputs against the
eval-mode logits stoke computes. For each file: onnx.checker (full check)
passes, the outputs are "logits" (N, classes, H, W), "labels" (N, H, W) int64
(and "probabilities" with --softmax), and the logits match stoke's within
1e-4 relative to max(1, the largest |logit|); the labels are the arg-max of
ONNX Runtime's logits, and agree with stoke's arg-max wherever its top two
logits are further apart than the tolerance.

That the check can fail: the same graph with its Resize nodes made bilinear
(half-pixel) instead of nearest is run too and must differ by more than
1e-2 relative; the measured differences are printed."""
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

tool, work, stoke = sys.argv[1], sys.argv[2], sys.argv[3]
subprocess.run([tool, work], check=True)
n, c, h, w, classes = (int(v) for v in open(f"{work}/case.txt").read().split())
x = np.fromfile(f"{work}/input.bin", dtype=np.float32).reshape(n, c, h, w)
want = np.fromfile(f"{work}/logits.bin", dtype=np.float32).reshape(n, classes, h, w)
scale = max(1.0, float(np.max(np.abs(want))))
failures = []


def run(model):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # one summation order on every machine
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"input": x})))


def check(name, flags):
    path = f"{work}/{name}.onnx"
    subprocess.run([stoke, "export", "--model", f"{work}/seg.stoke", "--onnx", path] + flags,
                   check=True)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    outs = [o.name for o in model.graph.output]
    expected = ["logits", "labels"] + (["probabilities"] if "--softmax" in flags else [])
    if outs != expected:
        failures.append(f"{name}: outputs {outs}, expected {expected}")
        return model
    meta = {p.key: p.value for p in model.metadata_props}
    if meta.get("class_names") != '["background", "scratch", "dent"]':
        failures.append(f"{name}: class_names metadata {meta.get('class_names')!r}")
    got = run(model)
    logits, labels = got["logits"], got["labels"]
    if logits.shape != want.shape or labels.shape != (n, h, w) or labels.dtype != np.int64:
        failures.append(f"{name}: logits {logits.shape}, labels {labels.shape} {labels.dtype}")
        return model
    diff = float(np.max(np.abs(logits - want))) / scale
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-4 * scale
    wrong = int(np.sum((labels != np.argmax(want, axis=1)) & clear))
    print(f"{name:9s} {' '.join(flags) or '(no flags)':18s} batch {n}: max rel |logit diff| "
          f"{diff:.2e} (logits up to {scale:.2f}), labels differing where clear: {wrong}")
    if not diff <= 1e-4:
        failures.append(f"{name}: logits differ by {diff:.2e} relative")
    if not np.array_equal(labels, np.argmax(logits, axis=1)):
        failures.append(f"{name}: labels are not the arg-max of the logits")
    if wrong:
        failures.append(f"{name}: {wrong} labels differ from stoke's arg-max")
    if "--softmax" in flags:
        p = got["probabilities"]
        e = np.exp(want - want.max(axis=1, keepdims=True))
        dp = float(np.max(np.abs(p - e / e.sum(axis=1, keepdims=True))))
        if not dp <= 1e-4:
            failures.append(f"{name}: probabilities differ by {dp:.2e}")
    if len(np.unique(np.argmax(want, axis=1))) < 2:  # every pixel one class says little
        failures.append(f"{name}: stoke's labels are all one class")
    return model


model = check("seg", [])
check("seg_fold", ["--fold-bn", "--softmax"])
# --fp16: float16 weights and activations, float32 at both ends (Resize's scales stay float32,
# as ONNX types them); within 1e-2 of the logits' scale (fp16 keeps 11 bits: tests/interchange/
# fp16_check.py), and the labels stoke's where its top two classes are 2e-2 of the scale apart.
subprocess.run([stoke, "export", "--model", f"{work}/seg.stoke", "--onnx", f"{work}/seg16.onnx",
                "--fp16"], check=True)
half = onnx.load(f"{work}/seg16.onnx")
onnx.checker.check_model(half, full_check=True)
got16 = run(half)
diff16 = float(np.max(np.abs(got16["logits"] - want))) / scale
top2 = np.sort(want, axis=1)[:, -2:]
wrong16 = int(np.sum((got16["labels"] != np.argmax(want, axis=1)) & ((top2[:, 1] - top2[:, 0]) > 2e-2 * scale)))
print(f"seg16     --fp16             batch {n}: max rel |logit diff| {diff16:.2e}, labels differing "
      f"where clear: {wrong16}")
if not diff16 <= 1e-2 or wrong16 or got16["logits"].dtype != np.float32:
    failures.append(f"--fp16: logits differ by {diff16:.2e} relative ({got16['logits'].dtype}), "
                    f"{wrong16} clear labels differ")
resizes = [node for node in model.graph.node if node.op_type == "Resize"]
if len(resizes) != 5:
    failures.append(f"{len(resizes)} Resize nodes, expected 5 (one per decoder block)")
for node in resizes:
    for a in node.attribute:
        if a.name == "mode":
            a.s = b"linear"
        if a.name == "coordinate_transformation_mode":
            a.s = b"half_pixel"
bilinear = float(np.max(np.abs(run(model)["logits"] - want))) / scale
print(f"the same graph with bilinear Resize: max rel |logit diff| {bilinear:.2e}")
if not bilinear > 1e-2:
    failures.append(f"a bilinear Resize differs by only {bilinear:.2e}: the check cannot tell")
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"OK: the exported U-Net matches stoke in ONNX Runtime within 1e-4 relative")
