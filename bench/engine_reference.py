#!/usr/bin/env python3
"""stoke's CPU inference and train step against ONNX Runtime (and, with
--torch, PyTorch eager) on the ResNet-style net of bench/pytorch_resnet.py, in
one table with ratios (stoke / reference; under 1: stoke faster).

    python3 bench/engine_reference.py --build build [--threads 2] [--rounds 3] [--batches 1,32] [--torch]
        [--skip-infer] [--skip-train] [--shapes 1x28x28/b64,3x128x128/b16,3x224x224/b8,resnet18/3x224x224/b8]
        [--baseline OTHER_BUILD]

Creates its own virtual environment (default build/bench-venv) with
onnxruntime, onnx and numpy from PyPI (torch only with --torch; PyPI's torch
wheel may be large) and re-runs itself inside it. Bench-only: nothing here is a
build or test dependency of stoke.

Inference: the ONNX graph is the same net built with onnx.helper (random
weights, random batch-norm statistics); ONNX Runtime folds and fuses it itself
(ORT_ENABLE_ALL). stoke runs build/bin/bench_engine_infer ("fused": Model::forward(x,
false), the inference plan every eval path runs). Rounds alternate stoke and the references, medians
are reported. Train steps (only with --torch): build/bin/bench_engine
(BM_train_step, one shape per run) against bench/pytorch_step.py's step in
three variants (eager NCHW, channels-last, torch.compile), interleaved shape by
shape and round by round, with stoke's GFLOP/s as a share of the FP32 peak
measured in the same run (torch.mm 2048^3). --baseline times a second build's
bench_engine in the same rounds (stoke before and after a change, same conditions).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def ensure_venv(args, need=None):
    """Re-runs this script inside args.venv with the modules `need` (module:
    PyPI name pairs) installed there."""
    if os.environ.get("STOKE_BENCH_IN_VENV") == "1":
        return
    venv = os.path.abspath(args.venv)
    py = os.path.join(venv, "bin", "python3")
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    if need is None:
        need = {m: m for m in ["onnxruntime", "onnx", "numpy"] + (["torch"] if args.torch else [])}
    missing = [pip for m, pip in need.items()
               if subprocess.run([py, "-c", f"import {m}"], capture_output=True).returncode != 0]
    if missing:
        subprocess.run([py, "-m", "pip", "install", "-q"] + missing, check=True)
    os.execve(py, [py] + sys.argv, dict(os.environ, STOKE_BENCH_IN_VENV="1"))


def resnet_onnx(channels, classes=10, stem=32, widths=(32, 64, 128), strides=(1, 2, 2), blocks=2, seed=1,
                stem_kernel=3, stem_stride=1, maxpool=False):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    counter = [0]

    def name(prefix):
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def conv_bn(x, cin, cout, k, stride, relu):
        w = name("w")
        fan = cin * k * k
        inits.append(numpy_helper.from_array((rng.standard_normal((cout, cin, k, k)) * (2.0 / fan) ** 0.5)
                                             .astype(np.float32), w))
        c = name("conv")
        nodes.append(helper.make_node("Conv", [x, w], [c], kernel_shape=[k, k], strides=[stride, stride],
                                      pads=[k // 2] * 4))
        bn_in = [c]
        for what, lo, hi in (("gamma", 0.5, 1.5), ("beta", -0.5, 0.5), ("mean", -0.5, 0.5), ("var", 0.5, 1.5)):
            t = name(what)
            inits.append(numpy_helper.from_array(rng.uniform(lo, hi, cout).astype(np.float32), t))
            bn_in.append(t)
        b = name("bn")
        nodes.append(helper.make_node("BatchNormalization", bn_in, [b], epsilon=1e-5))
        if not relu:
            return b
        r = name("relu")
        nodes.append(helper.make_node("Relu", [b], [r]))
        return r

    x = conv_bn("input", channels, stem, stem_kernel, stem_stride, True)
    if maxpool:  # torchvision's stem: 3x3 max pool, stride 2, pad 1
        nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
        x = "pool"
    c = stem
    for w, s in zip(widths, strides):
        for i in range(blocks):
            st = s if i == 0 else 1
            y = conv_bn(conv_bn(x, c, w, 3, st, True), w, w, 3, 1, False)
            sc = conv_bn(x, c, w, 1, st, False) if (st != 1 or c != w) else x
            a = name("add")
            nodes.append(helper.make_node("Add", [y, sc], [a]))
            x = name("relu")
            nodes.append(helper.make_node("Relu", [a], [x]))
            c = w
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    inits.append(numpy_helper.from_array((rng.standard_normal((classes, c)) * 0.1).astype(np.float32), "fc_w"))
    inits.append(numpy_helper.from_array(np.zeros(classes, np.float32), "fc_b"))
    nodes.append(helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1))
    graph = helper.make_graph(nodes, "stoke_resnet",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", channels, "H", "W"])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


# --arch: the net of bench/pytorch_resnet.py, or torchvision's ResNet-18 (1000 classes).
ONNX_NETS = {
    "resnet": {},
    "resnet18": dict(classes=1000, stem=64, widths=(64, 128, 256, 512), strides=(1, 2, 2, 2),
                     stem_kernel=7, stem_stride=2, maxpool=True),
}


def stoke_infer_ms(build, size, batch, threads, arch="resnet", fused_only=True, calls=1):
    # fused_only: the headline, `calls` back-to-back calls after a warm-up (their median);
    # otherwise one round that also times the plain forward, 1 thread and the NCHW path.
    extra = ["--fused-only"] if fused_only else []
    extra += ["--arch", arch]
    out = subprocess.run([os.path.join(build, "bin", "bench_engine_infer"), "--size", str(size), "--batch",
                          str(batch), "--rounds", str(calls), "--threads", str(threads), "--json"] + extra,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


CALLS = 3  # back-to-back calls per side and round (after a warm-up call)


def inference_rows(args):
    import numpy as np
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(resnet_onnx(3, **ONNX_NETS[args.arch]), opts, providers=["CPUExecutionProvider"])
    rows = []
    for batch in args.batches:
        x = np.random.default_rng(2).standard_normal((batch, 3, 224, 224)).astype(np.float32)
        sess.run(None, {"input": x})  # warm-up
        st, ref, st1, st2, nchw = [], [], [], [], []
        for _ in range(args.rounds):  # interleaved; each side: the median of CALLS warm calls
            st.append(stoke_infer_ms(args.build, 224, batch, args.threads, args.arch,
                                     calls=CALLS)["fused_ms"])
            if batch == 1:  # 1 thread and the NCHW path, one call each
                s = stoke_infer_ms(args.build, 224, batch, args.threads, args.arch, fused_only=False)
                st1.append(s["fused_1t_ms"])
                st2.append(s["fused_ms"])  # the same round's 2-thread call: the speed-up's base
                nchw.append(s.get("nchw_ms", 0.0))
            sess.run(None, {"input": x})  # warm again after the other process
            calls = []
            for _ in range(CALLS):
                t0 = time.perf_counter()
                sess.run(None, {"input": x})
                calls.append((time.perf_counter() - t0) * 1e3)
            ref.append(median(calls))
        rows.append((f"{args.arch} inference 3x224x224, batch {batch}", median(st), "onnxruntime " + ort.__version__,
                     median(ref)))
        if batch == 1:
            rows.append((f"  (stoke 1 thread; {args.threads}-thread speed-up {median(st1) / median(st2):.2f}x)",
                         median(st1), "", None))
            rows.append(("  (stoke, NCHW between layers: before)", median(nchw), "onnxruntime " + ort.__version__,
                         median(ref)))
    return rows


TRAIN_SHAPES = ["1x28x28/b64", "3x128x128/b16", "3x224x224/b8", "resnet18/3x224x224/b8"]


def stoke_step_ms(build, key, threads):
    out = subprocess.run([os.path.join(build, "bin", "bench_engine"),
                          f"--benchmark_filter=BM_train_step/cpu/f32/{key}/", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True, env=dict(os.environ, STOKE_CPU_THREADS=str(threads)))
    return json.loads(out.stdout)["benchmarks"][0]["real_time"]


def torch_steps(key, modes):
    """PyTorch's variants of the step for one shape, warmed up (torch.compile compiles here)."""
    from pytorch_step import make_step
    arch = "resnet18" if key.startswith("resnet18/") else "resnet"
    shape, batch = key.split("/")[-2:]
    c, h, _ = (int(v) for v in shape.split("x"))
    steps = {}
    for mode in modes:
        try:
            t0 = time.perf_counter()
            fn = make_step(arch, c, h, int(batch[1:]), mode)
            fn()
            warm = time.perf_counter()
            fn()
            one = (time.perf_counter() - warm) * 1e3
            steps[mode] = (fn, max(1, min(5, round(3000 / one))))
            print(f"# {key} {mode}: first step + setup {warm - t0:.1f} s", file=sys.stderr, flush=True)
        except Exception as e:  # torch.compile may lack a toolchain: report, do not hide
            print(f"# {key} {mode}: failed: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr, flush=True)
    return arch, c, h, int(batch[1:]), steps


def fmt_range(v):
    return f"{median(v):.0f} ({min(v):.0f}–{max(v):.0f})"


def train_table(args):
    """Interleaved rounds, shape by shape: stoke, then PyTorch eager, channels-last, torch.compile."""
    import torch
    sys.path.insert(0, HERE)
    from pytorch_step import MODES, peak_gflops, step_gflop, time_step
    torch.set_num_threads(args.threads)
    peaks = [peak_gflops()]
    print(f"# torch {torch.__version__}; FP32 peak (torch.mm 2048^3, {args.threads} threads) measured before each "
          f"shape; GFLOP/step by torch.utils.flop_counter", flush=True)
    extra = " baseline ms | baseline/best |" if args.baseline else ""
    print("| train step | stoke ms | eager ms | channels-last ms | compile ms | stoke/best | stoke GFLOP/s (% peak) |"
          + extra)
    print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- | --- |" if args.baseline else ""))
    for key in args.shapes:
        arch, c, h, n, steps = torch_steps(key, args.modes)
        st, base, ref = [], [], {m: [] for m in steps}
        for _ in range(args.rounds):
            st.append(stoke_step_ms(args.build, key, args.threads))
            if args.baseline:
                base.append(stoke_step_ms(args.baseline, key, args.threads))
            for m, (fn, k) in steps.items():
                ref[m].append(time_step(fn, k))
            peaks.append(peak_gflops())
        del steps
        best = min(median(v) for v in ref.values()) if ref else None
        gflop = step_gflop(arch, c, h, n)
        peak = max(peaks)
        rate = gflop / (median(st) / 1e3)
        cols = [fmt_range(ref[m]) if m in ref else ("failed" if m in args.modes else "not run") for m in MODES]
        ratio = f"{median(st) / best:.2f}" if best else "—"
        extra = ""
        if base:
            extra = f" {fmt_range(base)} | {median(base) / best:.2f} |" if best else f" {fmt_range(base)} | — |"
        print(f"| {key} | {fmt_range(st)} | {' | '.join(cols)} | {ratio} | {rate:.0f} ({100 * rate / peak:.0f} %) |"
              + extra, flush=True)
    print(f"# peak GFLOP/s over the run: {min(peaks):.0f}–{max(peaks):.0f} (max used); load average "
          f"{os.getloadavg()[0]:.1f} at the end; medians (min–max) of {args.rounds} rounds", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--baseline", default="", help="another build whose bench_engine is timed in the same rounds "
                    "(before/after a change)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--venv", default="build/bench-venv")
    ap.add_argument("--torch", action="store_true", help="also install torch and time PyTorch's train step")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--skip-infer", action="store_true")
    ap.add_argument("--shapes", default=",".join(TRAIN_SHAPES), help="train-step shapes (needs --torch)")
    ap.add_argument("--modes", default="eager,channels_last,compile", help="PyTorch variants of the train step")
    ap.add_argument("--batches", default="1,32", help="inference batch sizes at 224x224")
    ap.add_argument("--arch", default="resnet", choices=sorted(ONNX_NETS), help="inference net")
    args = ap.parse_args()
    ensure_venv(args)
    args.build = os.path.abspath(args.build)
    args.baseline = os.path.abspath(args.baseline) if args.baseline else ""
    args.batches = [int(b) for b in args.batches.split(",")]
    args.shapes = args.shapes.split(",")
    args.modes = args.modes.split(",")
    if args.torch and not args.skip_train:
        train_table(args)
    if args.skip_infer:
        return
    rows = inference_rows(args)
    load = os.getloadavg()[0]
    print(f"# {args.threads} threads, {os.cpu_count()} CPUs, load average {load:.1f} at the end; medians of "
          f"{args.rounds} interleaved rounds (inference: each side's median of {CALLS} warm calls a round)")
    print(f"| {'work':44} | {'stoke ms':>9} | {'reference':22} | {'ref ms':>9} | {'stoke/ref':>9} |")
    print(f"| {'-' * 44} | {'-' * 9}: | {'-' * 22} | {'-' * 9}: | {'-' * 9}: |")
    for work, st, ref_name, ref in rows:
        ratio = f"{st / ref:.2f}" if ref else "—"
        ref_s = f"{ref:.1f}" if ref else "—"
        print(f"| {work:44} | {st:9.1f} | {ref_name:22} | {ref_s:>9} | {ratio:>9} |")


if __name__ == "__main__":
    main()
