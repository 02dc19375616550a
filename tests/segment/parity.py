"""Segmentation ops against PyTorch: stoke's upsampling, per-pixel
cross-entropy and soft Dice (CPU backend, through segment_ops_tool) on seeded
random inputs against F.interpolate, F.cross_entropy and
segmentation_models_pytorch's DiceLoss (multiclass, from logits) written out in
plain PyTorch (the package is not installed here). Forward values and
gradients must agree within 1e-5 of each output's scale.

usage: parity.py TOOL WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

TOL = 1e-5


def write(path, array):
    array.tofile(path)


def read(path, shape, dtype=np.float32):
    return np.fromfile(path, dtype=dtype).reshape(shape)


def smp_dice_loss(logits, labels, ignore, smooth):
    """DiceLoss(mode='multiclass', from_logits=True, smooth, ignore_index), as
    segmentation_models_pytorch 0.3 defines it."""
    bs, k = logits.shape[:2]
    y_pred = logits.log_softmax(dim=1).exp().view(bs, k, -1)
    y_true = labels.view(bs, -1)
    mask = y_true != ignore
    y_pred = y_pred * mask.unsqueeze(1)
    y_true = F.one_hot((y_true * mask).to(torch.long), k).permute(0, 2, 1) * mask.unsqueeze(1)
    dims = (0, 2)
    inter = torch.sum(y_pred * y_true, dim=dims)
    card = torch.sum(y_pred + y_true, dim=dims)
    score = (2.0 * inter + smooth) / (card + smooth).clamp_min(1e-7)
    loss = (1.0 - score) * (y_true.sum(dims) > 0).to(score.dtype)
    return loss.mean()


def compare(name, got, want, failures):
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    err = float(np.max(np.abs(got - want))) / scale if want.size else 0.0
    status = "ok" if err <= TOL else "FAIL"
    print(f"{status} {name}: max error {err:.2e} of scale {scale:.3g}")
    if err > TOL:
        failures.append(name)


def main():
    tool, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    lines, ups, pixel = [], [], []
    for i, (mode, n, c, h, w, oh, ow) in enumerate([
            ("nearest", 2, 3, 5, 7, 10, 14), ("bilinear", 2, 3, 5, 7, 10, 14),
            ("nearest", 1, 2, 7, 5, 3, 11), ("bilinear", 1, 2, 7, 5, 3, 11),
            ("bilinear", 1, 1, 1, 1, 4, 4), ("nearest", 2, 2, 6, 6, 9, 13),
            ("bilinear", 2, 2, 6, 6, 9, 13), ("bilinear", 1, 4, 16, 12, 32, 24)]):
        name = f"up{i}"
        x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
        dy = rng.uniform(-1, 1, (n, c, oh, ow)).astype(np.float32)
        write(f"{work}/{name}.x", x)
        write(f"{work}/{name}.dy", dy)
        lines.append(f"upsample {name} {mode} {n} {c} {h} {w} {oh} {ow}")
        ups.append((name, mode, x, dy))
    for i, (n, k, h, w, ignore, smooth, weighted, every) in enumerate([
            (2, 3, 4, 5, -100, 0.0, 0, 0), (2, 4, 6, 3, 255, 0.0, 1, 3),
            (1, 5, 7, 7, 255, 1.0, 1, 4), (3, 2, 5, 4, -1, 0.5, 0, 2)]):
        name = f"px{i}"
        logits = rng.uniform(-3, 3, (n, k, h, w)).astype(np.float32)
        labels = rng.integers(0, k, (n, h, w)).astype(np.int32)
        if every:
            labels.reshape(-1)[::every] = ignore
        weights = rng.uniform(0.2, 2.0, (k,)).astype(np.float32)
        write(f"{work}/{name}.logits", logits)
        write(f"{work}/{name}.labels", labels)
        if weighted:
            write(f"{work}/{name}.weights", weights)
        lines.append(f"losses {name} {n} {k} {h} {w} {ignore} {smooth} {weighted}")
        pixel.append((name, logits, labels, weights if weighted else None, ignore, smooth))
    with open(f"{work}/cases.txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run([tool, work], check=True)

    failures = []
    for name, mode, x, dy in ups:
        xt = torch.tensor(x, requires_grad=True)
        kwargs = {"align_corners": False} if mode == "bilinear" else {}
        y = F.interpolate(xt, size=dy.shape[2:], mode=mode, **kwargs)
        y.backward(torch.tensor(dy))
        compare(f"{name} {mode} y", read(f"{work}/{name}.y", dy.shape), y.detach().numpy(),
                failures)
        compare(f"{name} {mode} dx", read(f"{work}/{name}.dx", x.shape), xt.grad.numpy(),
                failures)
    for name, logits, labels, weights, ignore, smooth in pixel:
        lt = torch.tensor(logits, requires_grad=True)
        lab = torch.tensor(labels, dtype=torch.long)
        wt = torch.tensor(weights) if weights is not None else None
        ce = F.cross_entropy(lt, lab, weight=wt, ignore_index=ignore)
        ce.backward()
        kept = lab != ignore
        per_pixel = (wt[lab * kept] if wt is not None
                     else torch.ones_like(lab, dtype=torch.float32))
        total_w = float((per_pixel * kept).sum())
        compare(f"{name} cross-entropy", read(f"{work}/{name}.ce", (2,)),
                np.array([ce.item(), total_w], dtype=np.float32), failures)
        compare(f"{name} cross-entropy dlogits", read(f"{work}/{name}.dce", logits.shape),
                lt.grad.numpy(), failures)
        lt2 = torch.tensor(logits, requires_grad=True)
        dice = smp_dice_loss(lt2, lab, ignore, smooth)
        dice.backward()
        compare(f"{name} dice", read(f"{work}/{name}.dice", (1,)),
                np.array([dice.item()], dtype=np.float32), failures)
        compare(f"{name} dice dlogits", read(f"{work}/{name}.ddice", logits.shape),
                lt2.grad.numpy(), failures)
    if failures:
        print(f"{len(failures)} comparisons failed: {', '.join(failures)}")
        return 1
    print("all comparisons within", TOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
