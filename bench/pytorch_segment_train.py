"""The PyTorch side of bench/segment_iou.sh: the U-Net `stoke train --task segment`
builds (smp's Unet layout on a width-scaled torchvision ResNet-18, written out in
plain PyTorch in tests/segment_model/parity.py, whose forward, loss and gradients
match stoke's there), trained on the same folders with the same schedule as
docs/segmentation-cli.md states stoke's: images resized to N x N (bilinear, masks
nearest), ImageNet normalization, horizontal flips with probability 0.5, Adam at
--lr, batches of --batch in a shuffled order per epoch, loss = weighted pixel
cross-entropy (ignore label 255) + --dice x soft Dice, class weights `auto`
(1/sqrt(share) relative to the most common class, at most 100). Evaluated as
`stoke eval` does: argmax at N x N, the label map resized nearest-neighbour to
the image's own size, one pixel confusion matrix over the folder, mean IoU over
the classes present in the masks or the predictions.

--encoder FILE.safetensors starts the encoder from the weights stoke's --init
reads (this script writes them with --write-encoder); the decoder starts from
PyTorch's default initialization under --seed.

usage: pytorch_segment_train.py --train DIR --val DIR [--size 64] [--width 0.25]
         [--epochs 14] [--batch 8] [--lr 0.01] [--dice 0.5] [--hflip 0.5] [--seed 0]
         [--threads 2] [--encoder FILE] [--write-encoder FILE]
prints one JSON object: mean_iou, per_class_iou, pixel_accuracy, seconds."""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "segment_model"))
import parity  # noqa: E402  (the U-Net and smp's Dice loss)

MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
IGNORE = 255


def nearest_index(out, size):
    """stoke's resize_labels_nearest: source floor((d + 0.5) * in / out)."""
    return ((2 * np.arange(out) + 1) * size) // (2 * out)


def resize_labels(mask, width, height):
    ys = nearest_index(height, mask.shape[0])
    xs = nearest_index(width, mask.shape[1])
    return mask[ys][:, xs]


def load_folder(folder, size):
    names = sorted(os.listdir(os.path.join(folder, "images")))
    with open(os.path.join(folder, "classes.txt")) as f:
        classes = [line.strip() for line in f if line.strip()]
    xs, ys, natives = [], [], []
    for name in names:
        image = Image.open(os.path.join(folder, "images", name)).convert("RGB")
        stem = os.path.splitext(name)[0]
        mask = np.array(Image.open(os.path.join(folder, "masks", stem + ".png")), dtype=np.int64)
        x = np.asarray(image.resize((size, size), Image.BILINEAR), np.float32) / 255.0
        xs.append(((x - MEAN) / STD).transpose(2, 0, 1))
        ys.append(resize_labels(mask, size, size))
        natives.append(mask)
    return classes, np.stack(xs), np.stack(ys), natives


def auto_class_weights(natives, classes):
    counts = np.zeros(classes, np.float64)
    for m in natives:
        counted = m[m != IGNORE]
        counts += np.bincount(counted, minlength=classes)[:classes]
    share = counts / counts.sum()
    top = share.max()
    return [min(100.0, float(np.sqrt(top / s))) if s > 0 else 1.0 for s in share]


def torchvision_init(encoder, seed):
    """torchvision's ResNet initialization: He normal (fan_out) convs, BN 1 and 0."""
    g = torch.Generator().manual_seed(seed)
    for m in encoder.modules():
        if isinstance(m, nn.Conv2d):
            fan_out = m.out_channels * m.kernel_size[0] * m.kernel_size[1]
            with torch.no_grad():
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * np.sqrt(2.0 / fan_out))
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        data = t.detach().contiguous().numpy().astype(np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        b, e = h["data_offsets"]
        out[name] = torch.tensor(np.frombuffer(data[b:e], np.float32).reshape(h["shape"]))
    return out


def encoder_tensors(encoder):
    return {k: v for k, v in encoder.state_dict().items() if not k.endswith("num_batches_tracked")}


def evaluate(model, xs, natives, classes):
    confusion = np.zeros((classes, classes), np.int64)
    model.eval()
    with torch.no_grad():
        for x, mask in zip(xs, natives):
            labels = model(torch.from_numpy(x[None])).argmax(1)[0].numpy()
            full = resize_labels(labels, mask.shape[1], mask.shape[0])
            counted = mask != IGNORE
            np.add.at(confusion, (mask[counted], full[counted]), 1)
    ious = {}
    for c in range(classes):
        tp = confusion[c, c]
        union = confusion[c, :].sum() + confusion[:, c].sum() - tp
        ious[c] = float(tp / union) if union > 0 else None
    present = [v for v in ious.values() if v is not None]
    return ious, float(np.mean(present)), float(np.trace(confusion) / confusion.sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train")
    ap.add_argument("--val")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--width", type=float, default=0.25)
    ap.add_argument("--epochs", type=int, default=14)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--dice", type=float, default=0.5)
    ap.add_argument("--hflip", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--encoder")
    ap.add_argument("--write-encoder")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    base = max(1, round(64 * a.width))
    decoder = tuple(max(1, round(c * a.width)) for c in (256, 128, 64, 32, 16))

    if a.write_encoder:
        model = parity.Unet(3, base, decoder, a.classes)
        torchvision_init(model.encoder, a.seed)
        write_safetensors(a.write_encoder, encoder_tensors(model.encoder))
        return

    classes, xs, ys, natives = load_folder(a.train, a.size)
    _, vxs, _, vnatives = load_folder(a.val, a.size)
    model = parity.Unet(3, base, decoder, len(classes))
    if a.encoder:
        missing, unexpected = model.encoder.load_state_dict(read_safetensors(a.encoder),
                                                            strict=False)
        missing = [m for m in missing if not m.endswith("num_batches_tracked")]
        if missing or unexpected:
            sys.exit(f"{a.encoder}: missing {missing}, unexpected {unexpected}")
    weights = torch.tensor(auto_class_weights(natives, len(classes)), dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    g = torch.Generator().manual_seed(a.seed)
    start = time.perf_counter()
    for _ in range(a.epochs):
        model.train()
        order = torch.randperm(len(xs), generator=g).numpy()
        for b in range(0, len(order), a.batch):
            idx = order[b:b + a.batch]
            x = torch.from_numpy(xs[idx].copy())
            y = torch.from_numpy(ys[idx].copy())
            flip = torch.rand(len(idx), generator=g) < a.hflip
            x[flip] = x[flip].flip(-1)
            y[flip] = y[flip].flip(-1)
            logits = model(x)
            loss = F.cross_entropy(logits, y, weight=weights, ignore_index=IGNORE)
            if a.dice > 0:
                loss = loss + a.dice * parity.smp_dice_loss(logits, y, IGNORE)
            opt.zero_grad()
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - start
    ious, mean_iou, accuracy = evaluate(model, vxs, vnatives, len(classes))
    print(json.dumps({"mean_iou": mean_iou, "pixel_accuracy": accuracy, "seconds": seconds,
                      "per_class_iou": {classes[c]: v for c, v in ious.items()},
                      "class_weights": weights.tolist()}))


if __name__ == "__main__":
    main()
