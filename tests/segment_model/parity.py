"""stoke's U-Net (build_model with decoder_channels, CPU backend, through
unet_parity_tool) against segmentation_models_pytorch's Unet written out in
plain PyTorch (the package is not installed here): smp 0.3's ResNetEncoder
(torchvision's ResNet without avgpool/fc, features after the stem, layer1..4),
UnetDecoder (per block: nearest 2x upsampling, concatenation with the skip,
two Conv2dReLU of 3x3 conv without bias, batch norm, ReLU; no center block)
and SegmentationHead (3x3 conv with bias, no upsampling, no activation).
Seeded random weights and batch-norm statistics are written by name (smp's
state_dict names), the same input and mask go to both; compared: the eval-mode
logits, the training-mode logits, the loss (weighted pixel cross-entropy with
an ignore label + 0.5 x smp's multiclass Dice) and, after one backward, the
gradients of the input and of every parameter.

usage: parity.py TOOL WORKDIR"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# Each comparison: max |stoke - torch| / max |torch| over the tensor. The two
# run the same float32 arithmetic in different summation orders (oneDNN's
# convolutions against PyTorch's, batch-norm means and variances reduced in
# other orders); through ~30 layers, with batch norm in training mode
# renormalizing small batches (layer4 is 2x2 pixels x 2 images), rounding
# differences of ~1e-7 per op grow. Measured here: logits 2.6e-6 (eval) and
# 5.1e-6 (training), the input gradient 1.0e-5, the worst parameter gradient
# 1.7e-5 (encoder.layer4.1.conv2.weight, the deepest, smallest batch). 1e-4
# leaves about 6x that margin, while a wrong skip order, upsampling mode or
# gradient path gives errors of order 1 (bilinear instead of nearest: 3.8 in
# the logits).
TOL = 1e-4

ARCH, WIDTH, IN_CH, H, W, N, CLASSES = "resnet18", 0.25, 3, 64, 64, 2, 3
DECODER = (32, 16, 16, 8, 8)
IGNORE, DICE_WEIGHT = 255, 0.5
CLASS_WEIGHTS = (0.5, 1.0, 2.0)


class BasicBlock(nn.Module):
    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or cin != planes:
            self.downsample = nn.Sequential(nn.Conv2d(cin, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (self.downsample(x) if self.downsample is not None else x))


class ResNetEncoder(nn.Module):
    """smp's ResNetEncoder (resnet18 layout), depth 5: features x, stem, layer1..4."""

    def __init__(self, in_ch, base):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, base, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(base)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = base
        for i, stride in enumerate((1, 2, 2, 2)):
            planes = base << i
            setattr(self, f"layer{i + 1}",
                    nn.Sequential(BasicBlock(cin, planes, stride), BasicBlock(planes, planes, 1)))
            cin = planes
        self.out_channels = (in_ch, base, base, 2 * base, 4 * base, 8 * base)

    def forward(self, x):
        f1 = self.relu(self.bn1(self.conv1(x)))
        f2 = self.layer1(self.maxpool(f1))
        f3 = self.layer2(f2)
        f4 = self.layer3(f3)
        f5 = self.layer4(f4)
        return [x, f1, f2, f3, f4, f5]


def conv2d_relu(cin, cout):
    """smp's Conv2dReLU with use_batchnorm=True."""
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())


class DecoderBlock(nn.Module):
    def __init__(self, cin, skip, cout):
        super().__init__()
        self.conv1 = conv2d_relu(cin + skip, cout)
        self.conv2 = conv2d_relu(cout, cout)

    def forward(self, x, skip=None):
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        if skip is not None:
            x = torch.cat([x, skip], dim=1)
        return self.conv2(self.conv1(x))


class UnetDecoder(nn.Module):
    def __init__(self, encoder_channels, decoder_channels):
        super().__init__()
        encoder_channels = encoder_channels[1:][::-1]
        head = encoder_channels[0]
        ins = [head] + list(decoder_channels[:-1])
        skips = list(encoder_channels[1:]) + [0]
        self.blocks = nn.ModuleList(
            DecoderBlock(i, s, o) for i, s, o in zip(ins, skips, decoder_channels))

    def forward(self, *features):
        features = features[1:][::-1]
        x, skips = features[0], features[1:]
        for i, block in enumerate(self.blocks):
            x = block(x, skips[i] if i < len(skips) else None)
        return x


class Unet(nn.Module):
    def __init__(self, in_ch, base, decoder_channels, classes):
        super().__init__()
        self.encoder = ResNetEncoder(in_ch, base)
        self.decoder = UnetDecoder(self.encoder.out_channels, decoder_channels)
        self.segmentation_head = nn.Sequential(
            nn.Conv2d(decoder_channels[-1], classes, 3, padding=1))

    def forward(self, x):
        return self.segmentation_head(self.decoder(*self.encoder(x)))


def smp_dice_loss(logits, labels, ignore, smooth=0.0):
    """DiceLoss(mode='multiclass', from_logits=True, smooth, ignore_index), smp 0.3."""
    bs, k = logits.shape[:2]
    y_pred = logits.log_softmax(dim=1).exp().view(bs, k, -1)
    y_true = labels.view(bs, -1)
    mask = y_true != ignore
    y_pred = y_pred * mask.unsqueeze(1)
    y_true = F.one_hot((y_true * mask).to(torch.long), k).permute(0, 2, 1) * mask.unsqueeze(1)
    inter = torch.sum(y_pred * y_true, dim=(0, 2))
    card = torch.sum(y_pred + y_true, dim=(0, 2))
    score = (2.0 * inter + smooth) / (card + smooth).clamp_min(1e-7)
    loss = (1.0 - score) * (y_true.sum((0, 2)) > 0).to(score.dtype)
    return loss.mean()


def read(path, shape):
    return np.fromfile(path, dtype=np.float32).reshape(shape)


def compare(name, got, want, failures, worst, quiet=False):
    scale = float(np.max(np.abs(want)))
    err = float(np.max(np.abs(got - want))) / max(scale, 1e-30)
    if err >= worst[0]:
        worst[:] = [err, name]
    status = "ok" if err <= TOL else "FAIL"
    if err > TOL or not quiet:
        print(f"{status} {name}: max error {err:.2e} of scale {scale:.3g}")
    if err > TOL:
        failures.append(name)


def main():
    tool, work = sys.argv[1], sys.argv[2]
    os.makedirs(f"{work}/w", exist_ok=True)
    torch.manual_seed(11)
    rng = np.random.default_rng(11)
    model = Unet(IN_CH, max(1, round(64 * WIDTH)), DECODER, CLASSES)
    with torch.no_grad():
        for name, t in model.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            if name.endswith("running_mean") or name.endswith(".bias"):
                t.copy_(torch.tensor(rng.uniform(-0.2, 0.2, t.shape), dtype=torch.float32))
            elif name.endswith("running_var") or t.dim() == 1:
                t.copy_(torch.tensor(rng.uniform(0.5, 1.5, t.shape), dtype=torch.float32))
            else:  # conv weights: He-uniform scale
                bound = np.sqrt(6.0 / (t[0].numel()))
                t.copy_(torch.tensor(rng.uniform(-bound, bound, t.shape), dtype=torch.float32))
            t.numpy().astype(np.float32).tofile(f"{work}/w/{name}.bin")
    x = rng.uniform(-1, 1, (N, IN_CH, H, W)).astype(np.float32)
    labels = rng.integers(0, CLASSES, (N, H, W)).astype(np.int32)
    labels.reshape(-1)[::7] = IGNORE
    x.tofile(f"{work}/x.bin")
    labels.tofile(f"{work}/labels.bin")
    with open(f"{work}/case.txt", "w") as f:
        f.write(f"{ARCH} {WIDTH} {IN_CH} {H} {W} {N} {CLASSES} {' '.join(map(str, DECODER))} "
                f"{IGNORE} {DICE_WEIGHT} {' '.join(map(str, CLASS_WEIGHTS))}\n")
    subprocess.run([tool, work], check=True)

    failures, worst = [], [0.0, ""]
    model.eval()
    with torch.no_grad():
        eval_logits = model(torch.tensor(x)).numpy()
    compare("eval logits", read(f"{work}/eval_logits.bin", eval_logits.shape), eval_logits,
            failures, worst)
    model.train()
    xt = torch.tensor(x, requires_grad=True)
    logits = model(xt)
    lab = torch.tensor(labels, dtype=torch.long)
    ce = F.cross_entropy(logits, lab, weight=torch.tensor(CLASS_WEIGHTS), ignore_index=IGNORE)
    dice = smp_dice_loss(logits, lab, IGNORE)
    loss = ce + DICE_WEIGHT * dice
    loss.backward()
    compare("train logits", read(f"{work}/logits.bin", logits.shape), logits.detach().numpy(),
            failures, worst)
    compare("loss (total, cross-entropy, dice)", read(f"{work}/loss.bin", (3,)),
            np.array([loss.item(), ce.item(), dice.item()], dtype=np.float32), failures, worst)
    compare("grad input", read(f"{work}/dx.bin", x.shape), xt.grad.numpy(), failures, worst)
    params = 0
    for name, p in model.named_parameters():
        compare(f"grad {name}", read(f"{work}/g/{name}.bin", p.shape), p.grad.numpy(), failures,
                worst, quiet=True)
        params += 1
    print(f"{params} parameter gradients compared; the largest relative error of all "
          f"comparisons: {worst[0]:.2e} ({worst[1]})")
    if failures:
        print(f"{len(failures)} comparisons failed: {', '.join(failures)}")
        return 1
    print("all comparisons within", TOL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
