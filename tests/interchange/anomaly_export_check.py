"""stoke's anomaly models exported to ONNX, run in ONNX Runtime against
stoke's own scores and maps (PatchCore with and without the neighbourhood
re-weighting, PaDiM; batch norm kept and folded; both methods tiling 176 x 144
parts into 3 x 2 overlapping tiles of the input size, the graph taking the
whole image, cutting, stitching and averaging the overlaps). For each file: onnx.checker
(full check) passes, the outputs are "score" (1) and "anomaly_map"
(1, 1, H, W), the metadata carries the method and the threshold, and per
image the score and the map match stoke's within the tolerance below.

Tolerance: 1e-4 relative to max(1, the largest value). ONNX Runtime's backbone
sums in another order than stoke's inference plan (the classifier export
check sees ~1e-5 on logits of order 1), and that difference passes through
the distances (PatchCore: the nearest row is chosen in the GEMM form
|x|^2 - 2 x.b + |b|^2 and its distance measured again directly, as stoke
does; only a near-tie between two rows could choose another, at a distance
equal within the same rounding; PaDiM: x^T S^-1 x in float instead of stoke's
double accumulation). The measured differences are printed; they were ~1e-6
relative here (scores of 5..240), two orders below the bound, while a wrong
op (a blur border, a resize mode, the re-weighting) moves them by 1e-2 or more."""
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

tool, work = sys.argv[1], sys.argv[2]
subprocess.run([tool, work], check=True)
failures = []
count = 0
for line in open(f"{work}/manifest.txt"):
    name, method, n, c, h, w, threshold = line.split()
    n, c, h, w = int(n), int(c), int(h), int(w)
    path = f"{work}/{name}.onnx"
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    meta = {p.key: p.value for p in model.metadata_props}
    if meta.get("anomaly.method") != method:
        failures.append(f"{name}: anomaly.method metadata {meta.get('anomaly.method')!r}")
    if abs(float(meta.get("anomaly.threshold", "nan")) - float(threshold)) > 1e-4 * max(1, abs(float(threshold))):
        failures.append(f"{name}: anomaly.threshold {meta.get('anomaly.threshold')} != {threshold}")
    outs = [o.name for o in model.graph.output]
    if outs != ["score", "anomaly_map"]:
        failures.append(f"{name}: outputs {outs}")
    if name.endswith("_tiled") and meta.get("anomaly.image_size") != f"{w}x{h}":
        failures.append(f"{name}: anomaly.image_size metadata {meta.get('anomaly.image_size')!r}")
    x = np.fromfile(f"{work}/{name}.input.bin", dtype=np.float32).reshape(n, c, h, w)
    want_scores = np.fromfile(f"{work}/{name}.scores.bin", dtype=np.float32)
    want_maps = np.fromfile(f"{work}/{name}.maps.bin", dtype=np.float32).reshape(n, 1, 1, h, w)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # one summation order on every machine
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    worst_score = worst_map = 0.0
    for i in range(n):
        score, amap = sess.run(["score", "anomaly_map"], {"input": x[i:i + 1]})
        if score.shape != (1,) or amap.shape != (1, 1, h, w):
            failures.append(f"{name}[{i}]: shapes {score.shape} {amap.shape}")
            continue
        ds = abs(float(score[0]) - float(want_scores[i])) / max(1.0, abs(float(want_scores[i])))
        dm = float(np.max(np.abs(amap - want_maps[i]))) / max(1.0, float(np.max(np.abs(want_maps[i]))))
        worst_score, worst_map = max(worst_score, ds), max(worst_map, dm)
        if not ds <= 1e-4:
            failures.append(f"{name}[{i}]: score {score[0]:.6f}, stoke {want_scores[i]:.6f} (rel {ds:.2e})")
        if not dm <= 1e-4:
            failures.append(f"{name}[{i}]: map differs by {dm:.2e} relative")
    spread = float(np.max(want_scores) - np.min(want_scores))
    print(f"{name:22s} {method:9s} {n} images: max rel |score diff| {worst_score:.2e}, "
          f"max rel |map diff| {worst_map:.2e}; scores {np.min(want_scores):.4f}..{np.max(want_scores):.4f}")
    if not spread > 1e-3:  # the images must score differently, or the check says little
        failures.append(f"{name}: stoke's scores hardly differ ({spread:.2e})")
    count += 1
if count < 6:
    failures.append(f"only {count} models exported (4 whole-image, 2 tiled)")
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"OK: {count} exported anomaly models match ONNX Runtime within 1e-4 relative")
