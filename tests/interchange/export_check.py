"""stoke's ONNX export against ONNX Runtime: every architecture, gray and RGB,
batch norm kept and folded. For each file: onnx.checker (full check) passes,
ONNX Runtime's logits equal stoke's within 1e-4 at the exported batch size and
at batch 1 (the batch dimension is dynamic; for folded files stoke runs the
file's folded weights, and the fold itself stays within 1e-3 of the model), the metadata carries the class
names and preprocessing, and the optional Softmax output sums to one."""
import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

tool, work = sys.argv[1], sys.argv[2]
subprocess.run([tool, "export", work], check=True)
failures = []
count = 0
for line in open(f"{work}/manifest.txt"):
    name, n, c, h, w, k = line.split()
    n, c, h, w, k = int(n), int(c), int(h), int(w), int(k)
    path = f"{work}/{name}.onnx"
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    meta = {p.key: p.value for p in model.metadata_props}
    if json.loads(meta.get("class_names", "[]")) != ["good", "scratch", "dent", "stain", "crack"]:
        failures.append(f"{name}: class_names metadata {meta.get('class_names')!r}")
    if "preprocessing" not in meta:
        failures.append(f"{name}: no preprocessing metadata")
    if model.opset_import[0].version < 13:
        failures.append(f"{name}: opset {model.opset_import[0].version}")
    x = np.fromfile(f"{work}/{name}.input.bin", dtype=np.float32).reshape(n, c, h, w)
    want = np.fromfile(f"{work}/{name}.logits.bin", dtype=np.float32).reshape(n, k)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # one summation order on every machine
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    outs = sess.run(None, {"input": x})
    diff = float(np.max(np.abs(outs[0] - want)))
    one = sess.run(None, {"input": x[:1]})[0]
    diff1 = float(np.max(np.abs(one - want[:1])))
    print(f"{name:24s} max|logit diff| {diff:.2e} (batch {n}), {diff1:.2e} (batch 1); max|logit| {np.max(np.abs(want)):.2f}")
    if not diff <= 1e-4 or not diff1 <= 1e-4:
        failures.append(f"{name}: max |logit diff| {max(diff, diff1):.3e} > 1e-4")
    if name.endswith("_folded"):  # the fold's own rounding, against the model with its norms
        unfolded = np.fromfile(f"{work}/{name}.unfolded.bin", dtype=np.float32).reshape(n, k)
        fold_diff = float(np.max(np.abs(outs[0] - unfolded)))
        print(f"{'':24s} folded file vs unfolded model {fold_diff:.2e}")
        if not fold_diff <= 1e-3:
            failures.append(f"{name}: folding changed the logits by {fold_diff:.3e} > 1e-3")
    if len(outs) > 1:
        probs = outs[1]
        if not np.allclose(probs.sum(axis=1), 1.0, atol=1e-5):
            failures.append(f"{name}: probabilities do not sum to 1")
    count += 1
if count < 20:
    failures.append(f"only {count} models exported")
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"OK: {count} exported models match ONNX Runtime within 1e-4")
