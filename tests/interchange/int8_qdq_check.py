"""stoke's QDQ int8 export in ONNX Runtime against stoke's own int8 logits.

A small model is trained and quantized (stoke quantize --precision int8, the
training images as calibration) and exported (stoke export writes the int8
file as QDQ, the fp32 file as before); ONNX Runtime runs the QDQ file on a
second synthetic set, preprocessed by stoke.

The bound: the QDQ graph computes what stoke's int8 convolutions compute (the
same codes, scales and fp32 bias), but not bit for bit: ONNX Runtime divides
by the scale where oneDNN multiplies by its inverse, and sums in another order,
so an activation that falls within a rounding of a code's tie may take the
neighbouring code, and that one step travels on through the later layers; and
ONNX Runtime's graph optimizer (on by default) rounds each fp32 bias to int32
codes of s_x * s_w (its bias quantization), where stoke keeps the bias in fp32:
up to half a code per output channel, and runs its fp32 convolutions in
another order, which moves its own logits by code steps (a block's identity
shortcut adds its input's codes, in stoke as in the QDQ graph, so a step
taken there reaches the add directly). So the logits are compared in units
of stoke's own quantization error (the largest |int8 - fp32| logit
difference over the set): the QDQ file as written (ORT's optimizer off) must
be far nearer stoke's int8 logits than int8 is to fp32 (max |ORT - int8| <=
0.25 of it), ORT's optimized run within 0.5 of it (its distance to its own
unoptimized run is printed), and both give stoke int8's top-1 decision on
all but at most one image in 48. A file with one activation scale off by
1.5x must fail the first bound."""
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

stoke, work, tool = sys.argv[1], sys.argv[2], sys.argv[3]
RELATIVE_BOUND = 0.25  # of stoke's own int8-vs-fp32 logit error
OPTIMIZED_BOUND = 0.5  # the same for ORT's optimized graph
MAX_FLIPS = 1  # top-1 decisions that may differ out of the set


def run(*args, env=None, capture=True):
    r = subprocess.run([str(a) for a in args], capture_output=capture, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, args))} (status {r.returncode})\n{r.stdout}{r.stderr}")
    return r.stdout


run(stoke, "dataset", "--out", f"{work}/d", "--count", 48, "--size", "48x48")
run(stoke, "dataset", "--out", f"{work}/v", "--count", 48, "--size", "48x48", "--seed", 4)
# ImageNet normalization: the first convolution's input has negatives (int8 codes), the rest
# follow ReLUs (uint8 codes).
run(stoke, "train", "--data", f"{work}/d", "--out", f"{work}/m.stoke", "--epochs", 4, "--size", 32,
    "--batch", 8, "--normalize", "imagenet")
q = subprocess.run([stoke, "quantize", "--model", f"{work}/m.stoke", "--val", f"{work}/v",
                    "--precision", "int8", "--calibrate", f"{work}/d", "--out", f"{work}/q8.stoke",
                    "--force"], capture_output=True, text=True)
if q.returncode != 0 and "has no int8 kernels here" in q.stderr:
    print("SKIP: oneDNN has no int8 kernels on this CPU")
    sys.exit(77)
if q.returncode != 0:
    sys.exit(f"FAIL: stoke quantize\n{q.stdout}{q.stderr}")

out = run(stoke, "export", "--model", f"{work}/q8.stoke", "--onnx", f"{work}/q8.onnx")
print(out.strip())
if "int8 QDQ" not in out:
    sys.exit("FAIL: stoke export of the int8 file does not say it wrote QDQ int8")
out = run(stoke, "export", "--model", f"{work}/m.stoke", "--onnx", f"{work}/fp32.onnx")
model = onnx.load(f"{work}/q8.onnx")
onnx.checker.check_model(model, full_check=True)
ops = [n.op_type for n in model.graph.node]
fp32_ops = [n.op_type for n in onnx.load(f"{work}/fp32.onnx").graph.node]
if "QuantizeLinear" in fp32_ops or "int8 QDQ" in out:
    sys.exit("FAIL: the fp32 file's export changed: " + out)
convs = ops.count("Conv")
if ops.count("QuantizeLinear") != convs or ops.count("DequantizeLinear") != 2 * convs:
    sys.exit(f"FAIL: {convs} Conv, {ops.count('QuantizeLinear')} QuantizeLinear, "
             f"{ops.count('DequantizeLinear')} DequantizeLinear")
inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
zero_types = [inits[n.input[2]].dtype.name for n in model.graph.node if n.op_type == "QuantizeLinear"]
print(f"{convs} convolutions; input codes: {', '.join(zero_types)}")
# The network's input is normalized (negatives: int8); after a ReLU: uint8.
if zero_types[0] != "int8" or "uint8" not in zero_types:
    sys.exit("FAIL: expected int8 codes on the normalized input and uint8 after ReLUs")

line = run(tool, f"{work}/q8.stoke", f"{work}/v", f"{work}/int8").split()
precision, n, c, h, w, k = line[0], *map(int, line[1:])
if precision != "int8":
    print(f"SKIP: stoke runs the int8 file in {precision} here (int8 emulated: no VNNI)")
    sys.exit(77)
run(tool, f"{work}/m.stoke", f"{work}/v", f"{work}/fp32")
x = np.fromfile(f"{work}/int8/input.bin", dtype=np.float32).reshape(n, c, h, w)
int8 = np.fromfile(f"{work}/int8/logits.bin", dtype=np.float32).reshape(n, k)
fp32 = np.fromfile(f"{work}/fp32/logits.bin", dtype=np.float32).reshape(n, k)


def ort_logits(m, optimize=True):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    if not optimize:  # the QDQ ops as written, no rewriting
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(["logits"], {"input": x})[0]


quant_error = float(np.max(np.abs(int8 - fp32)))


def compare(label, got, relative=RELATIVE_BOUND):
    bound = relative * quant_error
    diff = float(np.max(np.abs(got - int8)))
    flips = int(np.sum(got.argmax(1) != int8.argmax(1)))
    ok = diff <= bound and flips <= MAX_FLIPS
    print(f"{label}: max |ORT - stoke int8| {diff:.5f} (bound {bound:.5f} = {relative} x "
          f"stoke's int8-vs-fp32 {quant_error:.5f}); top-1 differs on {flips} of {n} "
          f"(stoke int8 vs fp32: {int(np.sum(fp32.argmax(1) != int8.argmax(1)))})")
    return ok


unoptimized = ort_logits(model, optimize=False)
optimized = ort_logits(model)
print(f"ORT optimized vs its own unoptimized run: max difference "
      f"{float(np.max(np.abs(optimized - unoptimized))):.5f}")
plain = compare("QDQ file, ORT optimizer off", unoptimized)
if not compare("QDQ file, ORT default", optimized, OPTIMIZED_BOUND) or not plain:
    sys.exit("FAIL: ONNX Runtime's QDQ logits are not stoke's int8 logits")
# Shown to fail: one activation scale (the third convolution's input) 1.5x too large.
bad = onnx.load(f"{work}/q8.onnx")
scales = [n.input[1] for n in bad.graph.node if n.op_type == "QuantizeLinear"]
for i in bad.graph.initializer:
    if i.name == scales[min(2, len(scales) - 1)]:
        i.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(i) * np.float32(1.5), i.name))
if compare("one scale 1.5x (must fail)", ort_logits(bad, optimize=False)):
    sys.exit("FAIL: a wrong activation scale passed the bound")
print("ok")
