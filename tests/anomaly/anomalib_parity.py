"""PatchCore and PaDiM parity with anomalib 2.7 itself (its PatchcoreModel and
PadimModel, pre_trained=False, in eval mode on the same preprocessed inputs):
a seeded random torchvision ResNet-18 (and, for PatchCore, Wide-ResNet-50-2),
batch-norm statistics away from the identity, saved as safetensors and loaded
into stoke (stoke_anomaly_tool) and into anomalib's timm feature extractor
(timm's ResNets use torchvision's parameter names: every backbone parameter
must load, only layer4 and fc are left over).

  anomalib_parity.py TOOL WORKDIR patchcore|padim

- PatchCore, coreset ratio 1.0 (anomalib: the model's forward in training
  mode, then subsample_embedding(1.0), as its Lightning module fits): the
  training embeddings, and per test input the embeddings, the anomaly map and
  the image score within 1e-4 relative (the map and the score plus anomalib's
  own nearest-distance rounding, measured against float64 in the same run:
  own_distance_error).
- PaDiM (anomalib's idx buffer set to the channels stoke drew; forward in
  training mode, then fit()): the same within 1e-4 relative, anomalib's own
  float32 arithmetic.
- The AUROC set: 64x64 striped textures (random phase and period, noise
  0.05), 64 good training images, 50 good and 50 defective test images (a
  6-14 pixel square offset by +-0.09..0.28 or a 1-pixel scratch 0.21..0.42
  dark). PaDiM (no random draw but the channel subset, which anomalib takes
  from stoke): the image AUROC of stoke and anomalib agree within 0.005.
  PatchCore with coreset ratio 0.1: each side draws its own coreset, and the
  draw alone moves the AUROC a lot here (seeds 0..15: stoke sd 0.030,
  anomalib sd 0.019, spanning 0.10 and 0.07), far more than a fixed 0.005
  gate on one draw per side allows: a single pair passing would be luck or a
  picked seed. So each side draws AUROC_DRAWS coresets (stoke seeds 0..K-1,
  anomalib torch/numpy seeds 0..K-1) and the gate is on the means:
  |mean stoke - mean anomalib| <= max(0.005, 2 x SE), SE = sqrt(s_stoke^2/K +
  s_anomalib^2/K) the standard error of the difference of the two means from
  the draws' sample standard deviations. If both sides' draws come from one
  distribution, the difference of the means is about normal with standard
  deviation SE, so 2 SE holds it about 95% of the time (nearer 90% with
  K = 4's few degrees of freedom) while still catching a real shift of a few
  SE (here SE is about 0.013: a shift of the mean by about 0.03 fails); the
  0.005 floor keeps a chance tight cluster of draws from making the gate
  stricter than the old one-draw gate. The seeds are fixed, so a run is
  deterministic; seeds 0..3 are simply the first K, not chosen.
  And one coreset in both (stoke's seed-0 bank set as anomalib's memory bank):
  the image AUROC within 0.005, anomalib run in float64 (shared_coreset says
  why; its float32 AUROC is printed beside)."""
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "interchange"))
from safetensors_np import save_safetensors  # noqa: E402
from torch_batch_norm import perturb_batch_norm  # noqa: E402

import anomalib  # noqa: E402
from anomalib.models.image.padim.torch_model import PadimModel  # noqa: E402
from anomalib.models.image.patchcore.torch_model import PatchcoreModel  # noqa: E402

tool, work, method = sys.argv[1], sys.argv[2], sys.argv[3]
SIZE, NTRAIN, NTEST, PADIM_NTRAIN = 64, 3, 2, 6
AUROC_TRAIN, AUROC_GOOD, AUROC_BAD = 64, 50, 50
AUROC_DRAWS = 4  # PatchCore's coreset draws per side on the AUROC set (seeds 0..K-1)
NOISE, DEFECT = 0.05, 0.35  # the texture's noise; the defects' strength
REFERENCE = f"anomalib {anomalib.__version__} (torch {torch.__version__})"
torch.set_num_threads(int(os.environ.get("STOKE_CPU_THREADS", "2")))


def backbone(arch):
    torch.manual_seed(0)
    return perturb_batch_norm(getattr(torchvision.models, arch)().eval())


def load_into(model, net, failures):
    """net's torchvision weights into anomalib's timm extractor; every key it has must load."""
    r = model.feature_extractor.feature_extractor.load_state_dict(net.state_dict(), strict=False)
    extra = [k for k in r.unexpected_keys if not k.startswith(("layer4.", "fc."))]
    if r.missing_keys or extra:
        failures.append(f"weights into anomalib's extractor: missing {r.missing_keys}, unexpected {extra}")
    model.eval()


def rel(a, b):
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def run_tool(weights, arch, train, test, extra):
    train.numpy().tofile(f"{work}/train.bin")
    test.numpy().tofile(f"{work}/test.bin")
    r = subprocess.run([tool, weights, arch, str(SIZE), f"{work}/train.bin", str(len(train)),
                        f"{work}/test.bin", str(len(test)), work] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"anomaly_tool {' '.join(extra)}: {r.stderr.strip()}")
    out = {k: np.fromfile(f"{work}/{k}.bin", dtype=np.float32)
           for k in ("train_embeddings", "test_embeddings", "maps", "scores")}
    if os.path.exists(f"{work}/bank.bin"):
        out["bank"] = np.fromfile(f"{work}/bank.bin", dtype=np.float32)
    if os.path.exists(f"{work}/channels.bin"):
        out["channels"] = np.fromfile(f"{work}/channels.bin", dtype=np.int64)
    return out


def gate(name, checks, failures):
    """(what, relative difference[, the reference's own measured error]): within 1e-4 (plus it)."""
    for what, d, *own in checks:
        bound = 1e-4 + (own[0] if own else 0.0)
        note = f"; bound 1e-4 + anomalib's own {own[0]:.2e}" if own else ""
        print(f"{name:22s} {what:20s} max rel diff {d:.2e} (against {REFERENCE}{note})")
        if not d <= bound:
            failures.append(f"{name} {what}: {d:.3e} > {bound:.3e} against {REFERENCE}")


def own_distance_error(model, e):
    """anomalib's nearest-patch distances (torch.cdist's |a|^2 + |b|^2 - 2ab form in float32)
    against the same distances in float64, relative to max(1, the largest): its own rounding,
    which at Wide-ResNet-50-2's feature norms reaches 1e-4 on some CPUs' GEMM kernels. stoke
    measures the distances it keeps directly in double (lib/anomaly/knn.hpp), so its maps and
    scores may differ from anomalib's by that much more than the 1e-4 their definitions allow."""
    got = model.nearest_neighbors(e, n_neighbors=1)[0].double().numpy().ravel()
    a, b = e.double().numpy(), model.memory_bank.double().numpy()
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    exact = np.sqrt(np.maximum(sq.min(1), 0.0))
    return float(np.max(np.abs(got - exact)) / max(1.0, float(np.max(exact))))


def random_inputs(seed):
    torch.manual_seed(seed)
    train = torch.rand(NTRAIN if seed == 0 else PADIM_NTRAIN, 3, SIZE, SIZE) * 2 - 1
    test = torch.rand(NTEST, 3, SIZE, SIZE) * 2 - 1
    test[1, :, 20:30, 20:30] += 2.0  # a bright square: patches far from the training ones
    return train, test


def texture(g):
    """A good part: stripes of a random phase and a small period jitter, plus noise."""
    y, x = torch.meshgrid(torch.arange(SIZE, dtype=torch.float32), torch.arange(SIZE, dtype=torch.float32),
                          indexing="ij")
    period = 8.0 + float(torch.rand(1, generator=g))
    phase = 2 * math.pi * float(torch.rand(1, generator=g))
    base = 0.5 * torch.sin(2 * math.pi * (x + 0.3 * y) / period + phase)
    img = base[None].repeat(3, 1, 1) * torch.tensor([1.0, 0.8, 0.6])[:, None, None]
    return img + NOISE * torch.randn(3, SIZE, SIZE, generator=g)


def defect(img, g):
    img = img.clone()
    if float(torch.rand(1, generator=g)) < 0.5:
        s = int(torch.randint(6, 15, (1,), generator=g))
        y0, x0 = (int(v) for v in torch.randint(4, SIZE - 4 - s, (2,), generator=g))
        sign = 1.0 if float(torch.rand(1, generator=g)) < 0.5 else -1.0
        img[:, y0 : y0 + s, x0 : x0 + s] += sign * DEFECT * (0.25 + 0.55 * float(torch.rand(1, generator=g)))
    else:
        x0 = int(torch.randint(8, SIZE - 8, (1,), generator=g))
        img[:, 8 : SIZE - 8, x0] -= DEFECT * (0.6 + 0.6 * float(torch.rand(1, generator=g)))
    return img


def auroc_set():
    g = torch.Generator().manual_seed(7)
    train = torch.stack([texture(g) for _ in range(AUROC_TRAIN)])
    good = [texture(g) for _ in range(AUROC_GOOD)]
    bad = [defect(texture(g), g) for _ in range(AUROC_BAD)]
    return train, torch.stack(good + bad), np.array([0] * AUROC_GOOD + [1] * AUROC_BAD)


def auroc(scores, labels):
    """Mann-Whitney: the share of (defective, good) pairs ordered right, ties counted half."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    return float(((pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum())
                 / (len(pos) * len(neg)))


def compare_auroc(name, stoke_scores, ref_scores, labels, failures):
    a, b = auroc(np.asarray(stoke_scores), labels), auroc(np.asarray(ref_scores), labels)
    print(f"{name:22s} image AUROC stoke {a:.4f} anomalib {b:.4f} (|diff| {abs(a - b):.4f}; "
          f"{AUROC_GOOD} good / {AUROC_BAD} defective test images)")
    if not abs(a - b) <= 0.005:
        failures.append(f"{name}: image AUROC stoke {a:.4f} anomalib {b:.4f} differ by more than 0.005")


def compare_auroc_means(name, stoke_aurocs, ref_aurocs, failures):
    """The means of K coreset draws per side, gated within max(0.005, 2 SE of their difference)."""
    a, b = np.asarray(stoke_aurocs), np.asarray(ref_aurocs)
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    bound = max(0.005, 2 * se)
    diff = abs(float(a.mean() - b.mean()))
    print(f"{name:22s} image AUROC per coreset draw (seeds 0..{len(a) - 1}): stoke "
          + ", ".join(f"{v:.4f}" for v in a) + "; anomalib " + ", ".join(f"{v:.4f}" for v in b))
    print(f"{name:22s} mean image AUROC stoke {a.mean():.4f} (sd {a.std(ddof=1):.4f}) anomalib {b.mean():.4f} "
          f"(sd {b.std(ddof=1):.4f}); |diff| {diff:.4f}, bound max(0.005, 2 SE = {2 * se:.4f}) = {bound:.4f} "
          f"({AUROC_GOOD} good / {AUROC_BAD} defective test images)")
    if not diff <= bound:
        failures.append(f"{name}: mean image AUROC stoke {a.mean():.4f} anomalib {b.mean():.4f} "
                        f"differ by {diff:.4f} > {bound:.4f}")


def patchcore_anomalib_on_bank(net, arch, bank, test, failures, dtype):
    """anomalib's image scores with its memory bank set to `bank` (stoke's coreset), in `dtype`."""
    model = PatchcoreModel(layers=["layer2", "layer3"], backbone=arch, pre_trained=False)
    load_into(model, net, failures)
    model.memory_bank = torch.from_numpy(bank)
    model = model.to(dtype).eval()
    with torch.no_grad():
        return np.asarray([float(model(test[i : i + 1].to(dtype)).pred_score) for i in range(len(test))])


def patchcore_anomalib(net, arch, train, test, ratio, failures, seed=0):
    model = PatchcoreModel(layers=["layer2", "layer3"], backbone=arch, pre_trained=False)
    load_into(model, net, failures)
    # KCenterGreedy's starting patch and the projection's signs and row counts come from torch's
    # generator, the projection's columns from numpy's (sklearn's sample_without_replacement).
    torch.manual_seed(seed)
    np.random.seed(seed)
    with torch.no_grad():
        model.train()
        for i in range(0, len(train), 8):
            model(train[i : i + 8])
        bank = torch.vstack(model.embedding_store)
        model.subsample_embedding(ratio)
        model.eval()
        out = []
        for i in range(len(test)):
            r = model(test[i : i + 1])
            e = model.reshape_embedding(model.generate_embedding(
                {k: model.feature_pooler(v) for k, v in model.feature_extractor(test[i : i + 1]).items()}))
            out.append((e, r.anomaly_map.flatten(), float(r.pred_score), own_distance_error(model, e)))
    if ratio >= 1.0:
        same = torch.equal(model.memory_bank.sort(0).values, bank.sort(0).values)
        print(f"{arch:22s} anomalib's k-center at ratio 1 keeps every patch: {same}")
    return bank, out


def shared_coreset(net, arch, got, test, labels, failures):
    """One coreset in both: anomalib scoring with stoke's bank. The image score re-weights the
    patch of the largest distance, so two patches within rounding of each other (2e-4 apart here)
    can give scores 10% apart; in float32 anomalib's own GEMM-form distances round by that much,
    in float64 they do not. Gated: the float64 AUROC within 0.005; the float32 one printed."""
    width = got["test_embeddings"].size // (len(test) * (SIZE // 8) ** 2)  # layer2's grid
    bank = got["bank"].reshape(-1, width)
    name = f"patchcore {arch} coreset 0.1, stoke's coreset in both"
    for dtype in (torch.float32, torch.float64):
        shared = patchcore_anomalib_on_bank(net, arch, bank, test, failures, dtype)
        flips = int(np.sum(np.abs(got["scores"] - shared) > 1e-3 * np.maximum(1.0, np.abs(shared))))
        print(f"{name}, anomalib in {dtype}: image scores max rel diff {rel(got['scores'], shared):.2e}, "
              f"{flips} of {len(test)} beyond 1e-3")
        if dtype == torch.float64:
            compare_auroc(name + " (anomalib in float64)", got["scores"], shared, labels, failures)
        else:
            print(f"{name:22s} image AUROC stoke {auroc(got['scores'], labels):.4f} anomalib in float32 "
                  f"{auroc(shared, labels):.4f} (not gated)")


def check_patchcore(arch, failures):
    net = backbone(arch)
    weights = f"{work}/{arch}.safetensors"
    save_safetensors({k: v.numpy() for k, v in net.state_dict().items()}, weights)
    train, test = random_inputs(0)
    got = run_tool(weights, arch, train, test, ["patchcore", "1"])
    bank, results = patchcore_anomalib(net, arch, train, test, 1.0, failures)
    width = bank.shape[1]
    emb = got["test_embeddings"].reshape(NTEST, -1, width)
    maps = got["maps"].reshape(NTEST, -1)
    checks = [("train embeddings", rel(got["train_embeddings"].reshape(-1, width), bank.numpy()))]
    for i, (e, amap, score, own) in enumerate(results):
        checks += [(f"test {i} embeddings", rel(emb[i], e.numpy())),
                   (f"test {i} anomaly map", rel(maps[i], amap.numpy()), own),
                   (f"test {i} image score", abs(float(got["scores"][i]) - score) / max(1.0, abs(score)), own)]
    gate(f"patchcore {arch}", checks, failures)
    print(f"patchcore {arch:12s} scores stoke {got['scores'].tolist()} anomalib {[r[2] for r in results]}")
    if not got["scores"][1] > got["scores"][0]:
        failures.append(f"patchcore {arch}: the test input with the bright square does not score higher")
    if arch == "resnet18":
        train, test, labels = auroc_set()
        ours, theirs = [], []
        for seed in range(AUROC_DRAWS):
            got = run_tool(weights, arch, train, test, ["patchcore", "0.1", str(seed)])
            ours.append(auroc(got["scores"], labels))
            if seed == 0:
                shared_coreset(net, arch, got, test, labels, failures)
            _, results = patchcore_anomalib(net, arch, train, test, 0.1, failures, seed)
            theirs.append(auroc(np.asarray([r[2] for r in results]), labels))
        compare_auroc_means(f"patchcore {arch} coreset 0.1", ours, theirs, failures)
    os.remove(weights)


def padim_anomalib(net, train, test, channels, failures):
    model = PadimModel(backbone="resnet18", layers=["layer1", "layer2", "layer3"], pre_trained=False)
    load_into(model, net, failures)
    model.idx = torch.from_numpy(channels)  # the channels stoke drew (see docs/anomaly.md)
    with torch.no_grad():
        model.train()
        for i in range(0, len(train), 8):
            model(train[i : i + 8])
        bank = torch.vstack(model.memory_bank)
        model.fit()
        model.eval()
        out = []
        for i in range(len(test)):
            r = model(test[i : i + 1])
            e = model.generate_embedding(model.feature_extractor(test[i : i + 1]))
            out.append((e, r.anomaly_map.flatten(), float(r.pred_score)))
    return bank, out


def check_padim(failures):
    arch = "resnet18"
    net = backbone(arch)
    weights = f"{work}/padim_{arch}.safetensors"
    save_safetensors({k: v.numpy() for k, v in net.state_dict().items()}, weights)
    train, test = random_inputs(1)
    got = run_tool(weights, arch, train, test, ["padim"])
    idx = got["channels"]
    if not (len(idx) == 100 and bool((idx[1:] > idx[:-1]).all()) and int(idx[-1]) < 448):
        failures.append(f"padim {arch}: channels are not 100 ascending of 448: {idx.tolist()}")
        return
    bank, results = padim_anomalib(net, train, test, idx, failures)
    k = bank.size(1)
    rows = bank.permute(0, 2, 3, 1).reshape(len(train), -1, k).numpy()
    emb = got["test_embeddings"].reshape(NTEST, -1, k)
    maps = got["maps"].reshape(NTEST, -1)
    checks = [("train embeddings", rel(got["train_embeddings"].reshape(len(train), -1, k), rows))]
    for i, (e, amap, score) in enumerate(results):
        checks += [(f"test {i} embeddings", rel(emb[i], e.permute(0, 2, 3, 1).reshape(-1, k).numpy())),
                   (f"test {i} anomaly map", rel(maps[i], amap.numpy())),
                   (f"test {i} image score", abs(float(got["scores"][i]) - score) / max(1.0, abs(score)))]
    gate(f"padim {arch}", checks, failures)
    print(f"padim {arch:16s} scores stoke {got['scores'].tolist()} anomalib {[s for _, _, s in results]}")
    if not got["scores"][1] > got["scores"][0]:
        failures.append(f"padim {arch}: the test input with the bright square does not score higher")
    train, test, labels = auroc_set()
    got = run_tool(weights, arch, train, test, ["padim"])
    _, results = padim_anomalib(net, train, test, got["channels"], failures)
    compare_auroc(f"padim {arch}", got["scores"], [s for _, _, s in results], labels, failures)
    os.remove(weights)


def main():
    failures = []
    try:
        if method == "patchcore":
            for arch in ("resnet18", "wide_resnet50_2"):
                check_patchcore(arch, failures)
        else:
            check_padim(failures)
    except RuntimeError as err:
        failures.append(str(err))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    auroc_gate = ("image AUROC on a shared coreset within 0.005, mean image AUROC over coreset draws "
                  "within max(0.005, 2 SE)" if method == "patchcore"
                  else "image AUROC within 0.005")
    print(f"OK: {method} embeddings, maps and scores equal {REFERENCE}'s within 1e-4 relative, {auroc_gate}")


if __name__ == "__main__":
    main()
