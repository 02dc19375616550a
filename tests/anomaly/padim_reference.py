"""anomalib 2.x's PaDiM definitions in plain PyTorch (PadimModel.generate_embedding,
MultiVariateGaussian, AnomalyMapGenerator), for the parity test
(tests/anomaly/parity.py): the embedding of a torchvision ResNet's layer1,
layer2 and layer3 reduced to a channel subset, the per-position Gaussians,
the Mahalanobis distance, and the map (bilinear, align_corners=False, then
GaussianBlur2d) whose maximum is the image score."""
import torch
import torch.nn.functional as F

from patchcore_reference import blur


def embed(net, x, idx):
    """(N, K, H, W): layer1, layer2 and layer3 at layer1's grid (nearest), channels idx."""
    e = net.layer1(net.maxpool(net.relu(net.bn1(net.conv1(x)))))
    l2 = net.layer2(e)
    l3 = net.layer3(l2)
    for f in (l2, l3):
        e = torch.cat((e, F.interpolate(f, size=e.shape[-2:], mode="nearest")), 1)
    return torch.index_select(e, 1, idx)


def fit(e, dtype=torch.float64):
    """Per position: mean (K, P) and inverse covariance (P, K, K) of
    cov = (X - mean)^T (X - mean) / (N - 1) + 0.01 I + 1e-5 I (anomalib 2.7's
    stabilized_covariance); anomalib runs it in float32."""
    n, k, h, w = e.shape
    v = e.reshape(n, k, h * w).to(dtype)
    mean = v.mean(0)
    d = v - mean
    cov = torch.einsum("nip,njp->pij", d, d) / (n - 1) + (0.01 + 1e-5) * torch.eye(k, dtype=dtype)
    return mean, torch.linalg.inv(cov)


def distance(e, mean, inv):
    """compute_distance: (B, 1, H, W) Mahalanobis distances, in the dtype of mean and inv."""
    b, c, h, w = e.shape
    delta = (e.reshape(b, c, h * w).to(mean.dtype) - mean).permute(2, 0, 1)
    d = (torch.matmul(delta, inv) * delta).sum(2).permute(1, 0)
    return d.reshape(b, 1, h, w).clamp(0).sqrt()


def anomaly_map(dist, size, sigma=4.0):
    """Upsampled bilinearly (align_corners=False), then blurred; the image score is its max."""
    return blur(F.interpolate(dist.float(), size=size, mode="bilinear", align_corners=False), sigma)
