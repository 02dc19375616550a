"""PatchCore and PaDiM parity: seeded random torchvision backbones (ResNet-18
and Wide-ResNet-50-2, batch-norm statistics away from the identity) saved as
safetensors; stoke and a PyTorch reference fit PatchCore with coreset ratio 1
(ResNet-18 and Wide-ResNet-50-2) and PaDiM (ResNet-18, stoke's channel subset
passed to the reference) on the same raw inputs, and the embeddings, anomaly
maps and image scores agree within 1e-4 relative.

  parity.py TOOL WORKDIR [patchcore] [padim]   (both without a method)

The reference is anomalib's PatchcoreModel (pre_trained=False, the same
weights loaded into its timm feature extractor) where anomalib imports;
otherwise the same definitions written out in plain PyTorch below
(anomalib 2.x's torch_model.py, anomaly_map.py and GaussianBlur2d), which is
what CI runs: anomalib and its dependencies are too heavy to install there."""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interchange"))
from safetensors_np import save_safetensors  # noqa: E402
from torch_batch_norm import perturb_batch_norm  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import padim_reference  # noqa: E402
import patchcore_reference  # noqa: E402
from patchcore_reference import blur, embed  # noqa: E402

tool, work = sys.argv[1], sys.argv[2]
methods = sys.argv[3:] or ["patchcore", "padim"]
SIZE, NTRAIN, NTEST = 64, 3, 2
PADIM_NTRAIN = 6


def backbone(arch):
    torch.manual_seed(0)
    return perturb_batch_norm(getattr(torchvision.models, arch)().eval())


def euclidean_dist(x, y):
    # anomalib's formula, in float64: its float32 cancellation error reaches 1e-4 relative at
    # Wide-ResNet's feature norms, and stoke measures the neighbours it found exactly.
    return patchcore_reference.euclidean_dist(x, y, torch.float64)


def reference_plain(net, train, test):
    with torch.no_grad():
        bank, _ = embed(net, train)
        out = []
        for i in range(NTEST):
            e, grid = embed(net, test[i : i + 1])
            scores, locs = euclidean_dist(e, bank).min(1)
            j = int(torch.argmax(scores))
            support = euclidean_dist(bank[locs[j]][None], bank).topk(9, largest=False).indices[0]
            w = 1 - F.softmax(euclidean_dist(e[j][None], bank[support]), 1)[0, 0]
            amap = blur(F.interpolate(scores.reshape(1, 1, *grid), size=(SIZE, SIZE)))
            out.append((e, amap.flatten(), float(w * scores[j])))
        return bank, out


def reference_anomalib(net, arch, train, test):
    from anomalib.models.image.patchcore.torch_model import PatchcoreModel

    model = PatchcoreModel(layers=["layer2", "layer3"], backbone=arch, pre_trained=False)
    model.feature_extractor.feature_extractor.load_state_dict(net.state_dict(), strict=False)
    with torch.no_grad():
        model.train()
        model(train)
        bank = torch.vstack(model.embedding_store)
        model.subsample_embedding(1.0)
        out = []
        for i in range(NTEST):
            model.eval()
            r = model(test[i : i + 1])
            model.train()
            e = model(test[i : i + 1])
            model.embedding_store.clear()
            out.append((e, r.anomaly_map.flatten(), float(r.pred_score)))
        return bank, out


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def check(arch, failures):
    net = backbone(arch)
    weights = f"{work}/{arch}.safetensors"
    save_safetensors({k: v.numpy() for k, v in net.state_dict().items()}, weights)
    train = torch.rand(NTRAIN, 3, SIZE, SIZE) * 2 - 1
    test = torch.rand(NTEST, 3, SIZE, SIZE) * 2 - 1
    test[1, :, 20:30, 20:30] += 2.0  # a bright square: patches far from the bank
    train.numpy().tofile(f"{work}/train.bin")
    test.numpy().tofile(f"{work}/test.bin")
    try:
        import anomalib

        reference, (bank, results) = f"anomalib {anomalib.__version__}", reference_anomalib(net, arch, train, test)
    except ImportError:
        reference, (bank, results) = "plain PyTorch (anomalib's definitions)", reference_plain(net, train, test)
    r = subprocess.run([tool, weights, arch, str(SIZE), f"{work}/train.bin", str(NTRAIN), f"{work}/test.bin",
                        str(NTEST), work], capture_output=True, text=True)
    os.remove(weights)
    if r.returncode != 0:
        failures.append(f"{arch}: anomaly_tool: {r.stderr.strip()}")
        return
    width = bank.shape[1]
    got_bank = np.fromfile(f"{work}/train_embeddings.bin", dtype=np.float32).reshape(-1, width)
    got_emb = np.fromfile(f"{work}/test_embeddings.bin", dtype=np.float32).reshape(NTEST, -1, width)
    got_maps = np.fromfile(f"{work}/maps.bin", dtype=np.float32).reshape(NTEST, -1)
    got_scores = np.fromfile(f"{work}/scores.bin", dtype=np.float32)
    checks = [("train embeddings", rel(got_bank, bank.numpy()))]
    for i, (e, amap, score) in enumerate(results):
        checks += [(f"test {i} embeddings", rel(got_emb[i], e.numpy())),
                   (f"test {i} anomaly map", rel(got_maps[i], amap.numpy())),
                   (f"test {i} image score", abs(float(got_scores[i]) - score) / max(1.0, abs(score)))]
    for name, d in checks:
        print(f"{arch:16s} {name:20s} max rel diff {d:.2e} (against {reference})")
        if not d <= 1e-4:
            failures.append(f"{arch} {name}: {d:.3e} > 1e-4 against {reference}")
    print(f"{arch:16s} scores stoke {[float(s) for s in got_scores]} reference {[s for _, _, s in results]}")
    if not got_scores[1] > got_scores[0]:
        failures.append(f"{arch}: the test image with the bright square does not score higher")


def check_padim(failures):
    """stoke's PaDiM against anomalib's definitions: the Gaussians fitted and the distances
    measured in float64 from the float32 mean and inverse stoke stores (stoke computes the
    inverse in double); the maps from anomalib's own float32 arithmetic are printed beside,
    not gated (their rounding depends on the covariance's conditioning)."""
    arch = "resnet18"
    net = backbone(arch)
    weights = f"{work}/padim_{arch}.safetensors"
    save_safetensors({k: v.numpy() for k, v in net.state_dict().items()}, weights)
    torch.manual_seed(1)
    train = torch.rand(PADIM_NTRAIN, 3, SIZE, SIZE) * 2 - 1
    test = torch.rand(NTEST, 3, SIZE, SIZE) * 2 - 1
    test[1, :, 20:30, 20:30] += 2.0
    train.numpy().tofile(f"{work}/train.bin")
    test.numpy().tofile(f"{work}/test.bin")
    r = subprocess.run([tool, weights, arch, str(SIZE), f"{work}/train.bin", str(PADIM_NTRAIN),
                        f"{work}/test.bin", str(NTEST), work, "padim"], capture_output=True, text=True)
    os.remove(weights)
    if r.returncode != 0:
        failures.append(f"padim {arch}: anomaly_tool: {r.stderr.strip()}")
        return
    idx = torch.from_numpy(np.fromfile(f"{work}/channels.bin", dtype=np.int64))
    if not (len(idx) == 100 and bool((idx[1:] > idx[:-1]).all()) and int(idx[-1]) < 448):
        failures.append(f"padim {arch}: channels are not 100 ascending of 448: {idx.tolist()}")
        return
    reference = "plain PyTorch (anomalib's PaDiM definitions, fit and distances in float64)"
    with torch.no_grad():
        bank = padim_reference.embed(net, train, idx)
        mean, inv = padim_reference.fit(bank)
        mean32, inv32 = padim_reference.fit(bank, torch.float32)  # anomalib's arithmetic
        stored = (mean.float().double(), inv.float().double())  # what stoke keeps
        k = bank.size(1)
        got_bank = np.fromfile(f"{work}/train_embeddings.bin", dtype=np.float32)
        got_bank = got_bank.reshape(PADIM_NTRAIN, -1, k)
        got_emb = np.fromfile(f"{work}/test_embeddings.bin", dtype=np.float32).reshape(NTEST, -1, k)
        got_maps = np.fromfile(f"{work}/maps.bin", dtype=np.float32).reshape(NTEST, -1)
        got_scores = np.fromfile(f"{work}/scores.bin", dtype=np.float32)
        rows = bank.permute(0, 2, 3, 1).reshape(PADIM_NTRAIN, -1, k)
        checks = [("train embeddings", rel(got_bank, rows.numpy()))]
        scores = []
        for i in range(NTEST):
            e = padim_reference.embed(net, test[i : i + 1], idx)
            amap = padim_reference.anomaly_map(padim_reference.distance(e, *stored), (SIZE, SIZE))
            loose = padim_reference.anomaly_map(padim_reference.distance(e, mean32, inv32), (SIZE, SIZE))
            score = float(amap.max())
            scores.append(score)
            checks += [(f"test {i} embeddings", rel(got_emb[i], e.permute(0, 2, 3, 1).reshape(-1, k).numpy())),
                       (f"test {i} anomaly map", rel(got_maps[i], amap.flatten().numpy())),
                       (f"test {i} image score", abs(float(got_scores[i]) - score) / max(1.0, abs(score)))]
            print(f"padim {arch:10s} test {i} map against anomalib's float32 arithmetic: "
                  f"{rel(got_maps[i], loose.flatten().numpy()):.2e} (not gated)")
    for name, d in checks:
        print(f"padim {arch:10s} {name:20s} max rel diff {d:.2e} (against {reference})")
        if not d <= 1e-4:
            failures.append(f"padim {arch} {name}: {d:.3e} > 1e-4 against {reference}")
    print(f"padim {arch:10s} scores stoke {[float(s) for s in got_scores]} reference {scores}")
    if not got_scores[1] > got_scores[0]:
        failures.append(f"padim {arch}: the test image with the bright square does not score higher")


failures = []
if "patchcore" in methods:
    for arch in ("resnet18", "wide_resnet50_2"):
        check(arch, failures)
if "padim" in methods:
    check_padim(failures)
if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"OK: {' and '.join(methods)} embeddings, maps and scores equal the reference within 1e-4")
