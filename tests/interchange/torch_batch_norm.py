"""Batch-norm statistics and affine parameters away from the identity, so that
a test of folded or imported weights sees them matter (PyTorch needed)."""
import torch


def perturb_batch_norm(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model
