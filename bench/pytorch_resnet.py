"""The ResNet-style net of stoke's model builder, in PyTorch: the reference for
bench/pytorch_step.py (CPU) and bench/pytorch_gpu_step.py (GPU). Bench-only."""

import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.shortcut is None else self.shortcut(x)))


def resnet(in_channels, classes=10, stem=32, widths=(32, 64, 128), strides=(1, 2, 2), blocks=2):
    layers = [nn.Conv2d(in_channels, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU()]
    c = stem
    for w, s in zip(widths, strides):
        for b in range(blocks):
            layers.append(BasicBlock(c, w, s if b == 0 else 1))
            c = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*layers)


def resnet18(in_channels=3, classes=1000):
    """torchvision's ResNet-18 topology (7x7/2 stem, 3x3/2 max pool, basic blocks
    2-2-2-2 at 64/128/256/512, GAP, fc): stoke's Architecture::kResNet18."""
    layers = [nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    c = 64
    for w, s in zip((64, 128, 256, 512), (1, 2, 2, 2)):
        for b in range(2):
            layers.append(BasicBlock(c, w, s if b == 0 else 1))
            c = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes)]
    return nn.Sequential(*layers)
