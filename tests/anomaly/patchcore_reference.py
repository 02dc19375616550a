"""anomalib 2.x's PatchCore definitions in plain PyTorch, shared by the parity
test (tests/anomaly/parity.py) and the speed bench (bench/anomaly_reference.py):
the embedding of a torchvision ResNet's layer2 and layer3, the euclidean
distance in anomalib's GEMM form, and GaussianBlur2d."""
import torch
import torch.nn.functional as F


def embed(net, x):
    """Patch embeddings (rows: image, y, x) and the grid of a batch x."""
    h = net.layer1(net.maxpool(net.relu(net.bn1(net.conv1(x)))))
    l2 = net.layer2(h)
    l3 = net.layer3(l2)
    pool = torch.nn.AvgPool2d(3, 1, 1)
    e = pool(l2)
    e = torch.cat((e, F.interpolate(pool(l3), size=e.shape[-2:], mode="bilinear")), 1)
    return e.permute(0, 2, 3, 1).reshape(-1, e.size(1)), e.shape[-2:]


def euclidean_dist(x, y, dtype=torch.float32):
    """anomalib's formula; in float32 as anomalib runs it, or float64."""
    x, y = x.to(dtype), y.to(dtype)
    res = -2 * x @ y.T + x.pow(2).sum(-1, keepdim=True) + y.pow(2).sum(-1, keepdim=True).T
    return res.clamp_min(0).sqrt().float()


def blur(m, sigma=4.0):
    """GaussianBlur2d: 2 int(4 sigma + 0.5) + 1 taps, reflect padding."""
    k = 2 * int(4.0 * sigma + 0.5) + 1
    t = torch.arange(k, dtype=torch.float32) - k // 2
    g = torch.exp(-(t**2) / (2 * sigma**2))
    g = g / g.sum()
    kernel = (g[:, None] * g[None, :]).view(1, 1, k, k)
    return F.conv2d(F.pad(m, (k // 2,) * 4, mode="reflect"), kernel)
