#!/usr/bin/env python3
"""PyTorch reference for bench/cuda_step_bench.cpp: the same ResNet-style net
(stoke's builder: stem conv3x3(3->32, stride 1)-BN-ReLU, 4 stages of 2 basic
blocks with widths 64/128/256/512 and first-block stride 2, 1x1 projection
shortcuts, global average pool, linear 512->1000), SGD (momentum 0.9, weight
decay 5e-4, lr 0.05), softmax cross-entropy, on 3x224x224 inputs.

Per batch size: the eager step and the step captured as one CUDA graph
(torch.cuda.graph), each timed with CUDA events around --steps steps.
cudnn.benchmark on and TF32 allowed, as stoke's defaults in the bench.

  python3 bench/pytorch_gpu_step.py [--batches 64,256] [--steps 20] [--warmup 3]
                                    [--modes eager,graph] [--strict] [--json FILE]
"""
import argparse
import json
import os
import sys

try:
    import torch
    import torch.nn as nn
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from pytorch_resnet import BasicBlock
except ImportError as e:  # the CPU machines have no PyTorch
    print(f"skipped: PyTorch not available ({e})")
    sys.exit(0)


def resnet224(classes=1000, stem=32, widths=(64, 128, 256, 512), strides=(2, 2, 2, 2), blocks=2):
    layers = [nn.Conv2d(3, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU()]
    cin = stem
    for w, s in zip(widths, strides):
        for b in range(blocks):
            layers.append(BasicBlock(cin, w, s if b == 0 else 1))
            cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def main():
    sys.stdout.reconfigure(line_buffering=True)  # a run cut off by a timeout keeps its lines
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--modes", default="eager,graph")
    ap.add_argument("--strict", action="store_true", help="no TF32")
    ap.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off",
                    help="torch.autocast on the forward and the loss (fp16: with GradScaler)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("skipped: torch.cuda.is_available() is False")
        return 0
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = not a.strict
    torch.backends.cuda.matmul.allow_tf32 = not a.strict
    dev = torch.device("cuda:0")
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{'strict FP32' if a.strict else 'TF32 allowed'}, autocast {a.amp}")
    results = []
    for batch in [int(b) for b in a.batches.split(",") if b]:
        torch.manual_seed(1)
        model = resnet224().to(dev).to(memory_format=torch.contiguous_format)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
        loss_fn = nn.CrossEntropyLoss()
        # A fixed device slot and static inputs, as in the stoke bench.
        slot_x = torch.randn(batch, 3, 224, 224, device=dev)
        slot_y = torch.randint(0, 1000, (batch,), device=dev)
        x = torch.empty_like(slot_x)
        y = torch.empty_like(slot_y)

        amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.amp)
        scaler = torch.cuda.amp.GradScaler() if a.amp == "fp16" else None

        def step():
            x.copy_(slot_x)
            y.copy_(slot_y)
            opt.zero_grad(set_to_none=False)
            with torch.autocast("cuda", dtype=amp_dtype, enabled=amp_dtype is not None):
                loss = loss_fn(model(x), y)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            return loss

        for mode in [m for m in a.modes.split(",") if m]:
            run = step
            note = ""
            if mode == "graph":
                # Warm up on a side stream, as torch.cuda.graph requires.
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(a.warmup):
                        step()
                torch.cuda.current_stream().wait_stream(s)
                try:
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        static_loss = step()
                    run = g.replay
                except Exception as e:  # report, time eager instead
                    note = f"capture failed, eager: {e}"
                    run = step
            for _ in range(a.warmup):
                run()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(a.steps):
                run()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end) / a.steps
            loss_value = (static_loss if mode == "graph" and not note else step()).item()
            results.append({"batch": batch, "mode": mode, "ms_per_step": ms, "images_per_s": batch * 1000.0 / ms,
                            "graph_ok": not note})
            print(f"batch {batch:4d} {mode:<5s} {ms:9.3f} ms/step {batch * 1000.0 / ms:9.1f} img/s  "
                  f"loss {loss_value:.4f}{'  ' + note if note else ''}")
        print(f"batch {batch:4d} peak memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
        del model, opt
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bench": "pytorch_step", "net": "resnet224", "strict": a.strict, "results": results}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
