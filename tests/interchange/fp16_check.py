"""stoke's fp16 ONNX export (stoke export --fp16) in ONNX Runtime.

A small model of each of two architectures (the default net and ResNet-18) is
trained and exported twice, fp32 and --fp16. The fp16 file must pass
onnx.checker, hold only float16 weight initializers, keep float32 at its input
and output (a Cast to float16 first, a Cast to float32 before the logits), and
its logits in ONNX Runtime must stay near stoke's fp32 logits on a second
synthetic set, preprocessed by stoke.

The bound: float16 keeps 11 significant bits (unit roundoff 2^-11, about
4.9e-4). Every weight and every activation between ops is rounded to it, a
relative error of that order per op that random-sign sums keep at a few times
that through the few layers here, so the logits may move by about 1e-3 of their
scale; the gate allows 1e-2 of the largest |logit| (an fp16 export that is
broken, one weight tensor 1.5x, moves them by far more and must fail it), and
the top-1 decision must be stoke's on all but at most one image in 48. The fp16
logits must also differ from the fp32 file's: the graph computes in float16."""
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

stoke, work, tool = sys.argv[1], sys.argv[2], sys.argv[3]
RELATIVE_BOUND = 1e-2  # of the largest |fp32 logit|
MAX_FLIPS = 1


def run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, args))} (status {r.returncode})\n{r.stdout}{r.stderr}")
    return r.stdout


def ort_logits(model, x):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(["logits"], {"input": x})[0]


run(stoke, "dataset", "--out", f"{work}/d", "--count", 48, "--size", "48x48")
run(stoke, "dataset", "--out", f"{work}/v", "--count", 48, "--size", "48x48", "--seed", 4)
failures = []
for arch in ["default", "resnet18"]:
    m = f"{work}/{arch}.stoke"
    extra = [] if arch == "default" else ["--arch", arch]
    run(stoke, "train", "--data", f"{work}/d", "--out", m, "--epochs", 2, "--size", 32, "--batch", 8,
        *extra)
    out = run(stoke, "export", "--model", m, "--onnx", f"{work}/{arch}-fp16.onnx", "--fp16")
    print(out.strip())
    if "float16" not in out:
        failures.append(f"{arch}: stoke export --fp16 does not say it wrote float16")
    run(stoke, "export", "--model", m, "--onnx", f"{work}/{arch}-fp32.onnx", "--fold-bn")
    model = onnx.load(f"{work}/{arch}-fp16.onnx")
    onnx.checker.check_model(model, full_check=True)
    g = model.graph
    kinds = {onnx.TensorProto.DataType.Name(i.data_type) for i in g.initializer}
    io = [onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type) for v in [*g.input, *g.output]]
    casts = [(n.op_type, n.attribute[0].i) for n in g.node if n.op_type == "Cast"]
    print(f"{arch}: initializers {sorted(kinds)}, inputs and outputs {io}, casts {casts}")
    if kinds != {"FLOAT16"}:
        failures.append(f"{arch}: initializers of types {sorted(kinds)}, not only FLOAT16")
    if set(io) != {"FLOAT"}:
        failures.append(f"{arch}: graph inputs/outputs {io}, not float32")
    if casts != [("Cast", 10), ("Cast", 1)] or g.node[0].op_type != "Cast":
        failures.append(f"{arch}: casts {casts}: expected one to float16 first, one to float32 last")
    meta = {p.key: p.value for p in model.metadata_props}
    if meta.get("stoke.precision") != "fp16":
        failures.append(f"{arch}: metadata stoke.precision {meta.get('stoke.precision')!r}")

    line = run("env", "STOKE_PRECISION=fp32", tool, m, f"{work}/v", f"{work}/{arch}-ref").split()
    n, c, h, w, k = map(int, line[1:])
    x = np.fromfile(f"{work}/{arch}-ref/input.bin", dtype=np.float32).reshape(n, c, h, w)
    want = np.fromfile(f"{work}/{arch}-ref/logits.bin", dtype=np.float32).reshape(n, k)
    bound = RELATIVE_BOUND * float(np.max(np.abs(want)))

    def check(label, got):
        diff = float(np.max(np.abs(got - want)))
        flips = int(np.sum(got.argmax(1) != want.argmax(1)))
        print(f"{arch} {label}: max |ORT fp16 - stoke fp32| {diff:.5f} (bound {bound:.5f}); "
              f"top-1 differs on {flips} of {n}")
        return diff <= bound and flips <= MAX_FLIPS

    got = ort_logits(model, x)
    if got.dtype != np.float32:
        failures.append(f"{arch}: ONNX Runtime returned {got.dtype} logits")
    if not check("fp16 file", got):
        failures.append(f"{arch}: the fp16 file's logits are not stoke's within the bound")
    fp32 = ort_logits(onnx.load(f"{work}/{arch}-fp32.onnx"), x)
    if np.array_equal(got, fp32):
        failures.append(f"{arch}: the fp16 file gave the fp32 file's bits")
    # Shown to fail: the first convolution's weights 1.5x.
    conv_w = next(nd.input[1] for nd in g.node if nd.op_type == "Conv")
    for i in g.initializer:
        if i.name == conv_w:
            i.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(i) * np.float16(1.5), i.name))
    if check("one weight 1.5x (must fail)", ort_logits(model, x)):
        failures.append(f"{arch}: a wrong weight passed the bound")
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ok")
