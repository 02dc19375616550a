#!/usr/bin/env bash
# The `stoke` command's anomaly path end to end on a small synthetic set:
# train --task anomaly on the good parts -> eval (image AUROC, false-reject and
# escape rates; pixel AUROC and AUPRO from the generator's masks) -> predict
# --json (file, score, anomalous; --heatmaps) -> export to ONNX, the memory cap
# naming its option, bad options refused by name; then the same for
# --method padim.
#   stoke_cli_anomaly.sh <stoke binary>
set -euo pipefail
stoke=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error
fail() { echo "FAIL: $1"; shift; for f in "$@"; do cat "$f"; done; exit 1; }

"$stoke" dataset --out "$work/data" --count 40 --size 192x192 --format png --defects 0.4 --seed 5 \
  --masks "$work/masks" >/dev/null
"$stoke" train --task anomaly --data "$work/data/ok" --arch resnet18 --width-mult 0.5 --size 96 --coreset 0.2 \
  --out "$work/m.stoke" --json >"$work/train.json" 2>"$work/train.err" || fail "train --task anomaly" "$work/train.err"
grep -q '"bank_rows"' "$work/train.json" || fail "train json" "$work/train.json"
grep -q 'full bank .* MiB' "$work/train.err" || fail "no memory figure before the coreset" "$work/train.err"

"$stoke" eval --model "$work/m.stoke" --data "$work/data" --good ok --json >"$work/eval.json" 2>"$work/eval.err" \
  || fail "eval" "$work/eval.err"
for key in image_auroc false_reject_rate escape_rate threshold; do
  grep -q "\"$key\"" "$work/eval.json" || fail "eval json has no $key" "$work/eval.json"
done
# A number in [0, 1] (the set's good parts include the training ones, so its value says
# nothing about detection: the unit tests and the parity test check that).
auroc=$(sed 's/.*"image_auroc": \([0-9.]*\).*/\1/' "$work/eval.json")
awk -v a="$auroc" 'BEGIN { exit !(a >= 0 && a <= 1) }' || fail "image AUROC '$auroc' not in [0, 1]" "$work/eval.json"

one=$(find "$work/data/defect" -name '*.png' | sort | head -1)
"$stoke" predict --model "$work/m.stoke" "$one" --json >"$work/predict.json" 2>/dev/null || fail "predict" "$work/predict.json"
grep -q '"file".*"score".*"anomalous": \(true\|false\)' "$work/predict.json" || fail "predict json" "$work/predict.json"

# The threshold from an escape target when --val holds defects: none of them passes at
# --escape 0; every prediction carries its normalized score (the threshold at 0.5) and its
# defect pixels (above the stored pixel threshold).
"$stoke" train --task anomaly --data "$work/data/ok" --val "$work/data" --escape 0 --arch resnet18 \
  --width-mult 0.5 --size 96 --coreset 0.2 --out "$work/esc.stoke" --json >"$work/esc.json" 2>"$work/esc.err" \
  || fail "train --escape" "$work/esc.err"
"$stoke" predict --model "$work/esc.stoke" --data "$work/data" --json >"$work/esc-predict.json" 2>"$work/esc-predict.err" \
  || fail "predict on the --escape model" "$work/esc-predict.err"
python3 - "$work/esc.json" "$work/esc-predict.json" <<'PY' || fail "escape threshold" "$work/esc.json" "$work/esc-predict.json"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["threshold_from"] == "escape" and t["val_defects"] > 0 and t["val_escapes"] == 0, t
assert t["pixel_threshold"] > 0, t
rows = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
assert rows, "no predictions"
for r in rows:
    assert 0 <= r["normalized_score"] <= 1 and r["defect_pixels"] >= 0, r
    assert r["anomalous"] == (r["score"] > t["threshold"]), (r, t["threshold"])
    if r["anomalous"]:
        assert r["normalized_score"] >= 0.5, r
    else:
        assert r["normalized_score"] <= 0.5, r
defects = [r for r in rows if "/defect/" in r["file"]]
assert defects and all(r["anomalous"] for r in defects), "a defect passed at --escape 0"
PY
"$stoke" train --task anomaly --data "$work/data/ok" --escape 1.5 --arch resnet18 --size 96 --out "$work/x.stoke" \
  >/dev/null 2>"$work/bad-escape.err" && fail "--escape 1.5 accepted"
grep -q -- "--escape" "$work/bad-escape.err" || fail "--escape 1.5 not named" "$work/bad-escape.err"

# Ground-truth masks (the generator's, MVTec's layout): pixel AUROC and AUPRO in [0, 1].
defects=$(find "$work/data/defect" -name '*.png' | wc -l)
test "$(find "$work/masks/defect" -name '*_mask.png' | wc -l)" -eq "$defects" || fail "one mask per defect image"
"$stoke" eval --model "$work/m.stoke" --data "$work/data" --good ok --masks "$work/masks" --json \
  >"$work/pixel.json" 2>"$work/pixel.err" || fail "eval --masks" "$work/pixel.err"
python3 - "$work/pixel.json" "$defects" <<'PY' || fail "pixel metrics" "$work/pixel.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert 0 <= r["pixel_auroc"] <= 1 and 0 <= r["aupro"] <= 1, r
assert r["masks"] == int(sys.argv[2]) and r["defect_regions"] >= r["masks"], r
PY
# The report: report.json is the --json object, report.html the histogram, the ROC and
# the worst parts with their maps (escaped defects first).
"$stoke" eval --model "$work/m.stoke" --data "$work/data" --good ok --masks "$work/masks" --report "$work/report" \
  >/dev/null 2>"$work/report.err" || fail "eval --report" "$work/report.err"
python3 - "$work/report" "$work/pixel.json" <<'PY' || fail "anomaly report" "$work/report.err"
import json, re, sys
d = sys.argv[1]
assert json.load(open(d + "/report.json")) == json.load(open(sys.argv[2]))
page = open(d + "/report.html").read()
assert page.count("<svg") == 2, page.count("<svg")
figures = re.findall(r"<figure>(.*?)</figure>", page)
assert 1 <= len(figures) <= 12 and all("data:image/png;base64," in f for f in figures), len(figures)
r = json.load(open(sys.argv[2]))
if r["escape_rate"] > 0:  # the first shown is an escaped defect
    assert "defect" in figures[0] and "(wrong)" in figures[0], figures[0][-80:]
PY

# A defect image without its mask is an error naming it; a mask of another size too.
first_mask=$(find "$work/masks/defect" -name '*_mask.png' | sort | head -1)
cp "$first_mask" "$work/first_mask.png"
rm "$first_mask"
if "$stoke" eval --model "$work/m.stoke" --data "$work/data" --good ok --masks "$work/masks" \
  >/dev/null 2>"$work/nomask.err"; then fail "a missing mask was accepted" "$work/nomask.err"; fi
grep -q 'no mask for the defect image' "$work/nomask.err" || fail "missing mask message" "$work/nomask.err"
python3 "$(dirname "$0")/tiny_images.py" png "$first_mask"
if "$stoke" eval --model "$work/m.stoke" --data "$work/data" --good ok --masks "$work/masks" \
  >/dev/null 2>"$work/size.err"; then fail "a mask of another size was accepted" "$work/size.err"; fi
grep -q 'is 8x8, its image 192x192' "$work/size.err" || fail "mask size message" "$work/size.err"
cp "$work/first_mask.png" "$first_mask"

# Heatmaps: one PNG per image at the input size, named in the JSON; an input is never replaced.
"$stoke" predict --model "$work/m.stoke" --data "$work/data/defect" --heatmaps "$work/maps" --json \
  >"$work/maps.json" 2>"$work/maps.err" || fail "predict --heatmaps" "$work/maps.err"
test "$(find "$work/maps" -name '*.png' | wc -l)" -eq "$defects" || fail "one heatmap per image" "$work/maps.json"
grep -q '"heatmap": ".*maps/.*\.png"' "$work/maps.json" || fail "heatmap not in the JSON" "$work/maps.json"
mkdir -p "$work/inplace" && cp "$one" "$work/inplace/a.png" && cp "$work/inplace/a.png" "$work/keep.png"
"$stoke" predict --model "$work/m.stoke" "$work/inplace/a.png" --heatmaps "$work/inplace" >/dev/null 2>&1 \
  || fail "predict --heatmaps into the input's folder"
cmp -s "$work/inplace/a.png" "$work/keep.png" || fail "the heatmap replaced its input image"
test -s "$work/inplace/a-2.png" || fail "no heatmap beside the input"

# Tiles at native resolution: maps at the image's size (heatmaps, pixel metrics);
# a tile larger than the images is refused naming one.
"$stoke" train --task anomaly --data "$work/data/ok" --arch resnet18 --width-mult 0.25 --size 64 --tile 96 \
  --stride 64 --coreset 0.2 --out "$work/tiled.stoke" >/dev/null 2>"$work/tiled.err" || fail "train --tile" "$work/tiled.err"
grep -q '9 tiles per image' "$work/tiled.err" || fail "the bank figure does not count the tiles" "$work/tiled.err"
"$stoke" predict --model "$work/tiled.stoke" "$one" --heatmaps "$work/tiled-maps" >/dev/null 2>&1 || fail "tiled predict"
python3 - "$work/tiled-maps/$(basename "$one")" <<'PY' || fail "the tiled heatmap is not 192x192"
import struct, sys
head = open(sys.argv[1], "rb").read(24)
assert struct.unpack(">II", head[16:24]) == (192, 192), struct.unpack(">II", head[16:24])
PY
"$stoke" eval --model "$work/tiled.stoke" --data "$work/data" --good ok --masks "$work/masks" --json \
  >"$work/tiled-eval.json" 2>"$work/tiled-eval.err" || fail "tiled eval --masks" "$work/tiled-eval.err"
grep -q '"aupro": [0-9]' "$work/tiled-eval.json" || fail "tiled eval has no AUPRO" "$work/tiled-eval.json"
if "$stoke" train --task anomaly --data "$work/data/ok" --arch resnet18 --width-mult 0.25 --size 64 --tile 256 \
  --out "$work/big-tile.stoke" >/dev/null 2>"$work/big-tile.err"; then fail "a tile larger than the images" "$work/big-tile.err"; fi
grep -q 'smaller than a 256x256 tile' "$work/big-tile.err" || fail "big tile message" "$work/big-tile.err"
test ! -e "$work/big-tile.stoke" || fail "a model was written with a tile larger than the images"

# stoke export of an anomaly model: the scoring graph (Interchange.AnomalyOnnxRuntimeParity
# runs it in ONNX Runtime); a tiling model with --image-size (refused without it or below a tile),
# --softmax and a truncated file refused by name.
"$stoke" export --model "$work/m.stoke" --onnx "$work/m.onnx" >"$work/export.out" 2>"$work/export.err" \
  || fail "export of an anomaly model" "$work/export.err"
grep -q 'anomaly patchcore on resnet18, input 1x3x96x96, outputs score and anomaly_map' "$work/export.out" \
  || fail "anomaly export summary" "$work/export.out"
test -s "$work/m.onnx" || fail "no ONNX file written"
if "$stoke" export --model "$work/tiled.stoke" --onnx "$work/tiled.onnx" >/dev/null 2>"$work/tiled-export.err"; then
  fail "export of a tiling model without --image-size accepted" "$work/tiled-export.err"
fi
grep -q 'the model tiles its images (tile 96).*--image-size WxH' "$work/tiled-export.err" \
  || fail "the tiling refusal names neither the tile nor --image-size" "$work/tiled-export.err"
if "$stoke" export --model "$work/tiled.stoke" --onnx "$work/tiled.onnx" --image-size 192x192 \
  >/dev/null 2>"$work/tiled-export.err"; then
  fail "export of 96-pixel tiles of a 64-pixel model accepted" "$work/tiled-export.err"
fi
grep -q "tile 96 is not the model's input size 64x64" "$work/tiled-export.err" \
  || fail "the tile-size refusal names neither size" "$work/tiled-export.err"
test ! -e "$work/tiled.onnx" || fail "an ONNX file was written for a refused tiling model"
# Tiles of the input size export: the graph takes the whole 192 x 192 image.
"$stoke" train --task anomaly --data "$work/data/ok" --arch resnet18 --width-mult 0.25 --size 64 --tile 64 \
  --stride 48 --coreset 0.2 --out "$work/tiled64.stoke" >/dev/null 2>"$work/tiled64.err" \
  || fail "train --tile 64" "$work/tiled64.err"
if "$stoke" export --model "$work/tiled64.stoke" --onnx "$work/tiled64.onnx" --image-size 48x192 \
  >/dev/null 2>"$work/tiled-small.err"; then
  fail "a tiled export smaller than a tile accepted" "$work/tiled-small.err"
fi
grep -q -- "--image-size 48x192' is 48x192, smaller than a 64x64 tile" "$work/tiled-small.err" \
  || fail "the small image size is not named" "$work/tiled-small.err"
"$stoke" export --model "$work/tiled64.stoke" --onnx "$work/tiled64.onnx" --image-size 192x192 \
  >"$work/tiled-export.out" 2>"$work/tiled-export.err" || fail "tiled export" "$work/tiled-export.err"
grep -q 'input 1x3x192x192, tiles of 64' "$work/tiled-export.out" \
  || fail "tiled export summary" "$work/tiled-export.out"
test -s "$work/tiled64.onnx" || fail "no tiled ONNX file written"
if "$stoke" export --model "$work/m.stoke" --onnx "$work/x.onnx" --softmax >/dev/null 2>"$work/softmax.err"; then
  fail "--softmax accepted for an anomaly model" "$work/softmax.err"
fi
grep -q -- '--softmax: an anomaly model' "$work/softmax.err" || fail "--softmax message" "$work/softmax.err"
head -c 20000 "$work/m.stoke" >"$work/cut.stoke"
if "$stoke" export --model "$work/cut.stoke" --onnx "$work/x.onnx" >/dev/null 2>"$work/cut.err"; then
  fail "export of a truncated model file accepted" "$work/cut.err"
fi
grep -q "cut.stoke.*truncated" "$work/cut.err" || fail "the truncated file is not named" "$work/cut.err"

# The backbone of a classifier stoke trained (its size and channels come with it).
"$stoke" train --data "$work/data" --arch resnet18 --width-mult 0.25 --size 48 --epochs 1 --batch 8 \
  --out "$work/cls.stoke" >/dev/null 2>"$work/cls.err" || fail "classifier training" "$work/cls.err"
"$stoke" train --task anomaly --data "$work/data/ok" --init "$work/cls.stoke" --coreset 0.5 \
  --out "$work/from_cls.stoke" --json >"$work/from_cls.json" 2>"$work/from_cls.err" \
  || fail "train --task anomaly --init MODEL.stoke" "$work/from_cls.err"
grep -q '"bank_width": 96' "$work/from_cls.json" || fail "bank width of resnet18/4 is not 32 + 64" "$work/from_cls.json"

# Gray input: a 1-channel backbone, the images read as gray.
"$stoke" train --task anomaly --data "$work/data/ok" --arch resnet18 --width-mult 0.25 --size 64 --channels 1 \
  --out "$work/gray.stoke" >/dev/null 2>"$work/gray.err" || fail "train --channels 1" "$work/gray.err"
"$stoke" predict --model "$work/gray.stoke" "$one" --json 2>/dev/null | grep -q '"score"' || fail "gray predict"

# The bank over the cap: an error naming the option, no model written.
if "$stoke" train --task anomaly --data "$work/data/ok" --arch resnet18 --width-mult 0.5 --size 96 --max-bank 1K \
  --out "$work/capped.stoke" >/dev/null 2>"$work/cap.err"; then
  fail "a bank over --max-bank was accepted" "$work/cap.err"
fi
grep -q 'max_bank_bytes (--max-bank)' "$work/cap.err" || fail "the cap error does not name --max-bank" "$work/cap.err"
test ! -e "$work/capped.stoke" || fail "a model was written past the cap"

# PaDiM: the same commands, the same JSON, its memory figure and its own refusals.
"$stoke" train --task anomaly --method padim --data "$work/data/ok" --arch resnet18 --width-mult 0.5 --size 96 \
  --out "$work/padim.stoke" --json >"$work/padim-train.json" 2>"$work/padim-train.err" \
  || fail "train --method padim" "$work/padim-train.err"
grep -q '"method": "padim".*"positions": 576, "features": 50' "$work/padim-train.json" \
  || fail "padim train json (24 x 24 positions, 50 of 224 channels)" "$work/padim-train.json"
grep -q 'PaDiM Gaussians 576 positions x 50^2 floats = 5.5 MiB' "$work/padim-train.err" \
  || fail "no Gaussians memory figure before fitting" "$work/padim-train.err"
"$stoke" eval --model "$work/padim.stoke" --data "$work/data" --good ok --masks "$work/masks" --json \
  >"$work/padim-eval.json" 2>"$work/padim-eval.err" || fail "padim eval --masks" "$work/padim-eval.err"
python3 - "$work/padim-eval.json" "$defects" <<'PY' || fail "padim eval json" "$work/padim-eval.json"
import json, sys
r = json.load(open(sys.argv[1]))
for key in ("image_auroc", "false_reject_rate", "escape_rate", "threshold", "pixel_auroc", "aupro"):
    assert key in r and r[key] is not None, key
assert 0 <= r["image_auroc"] <= 1 and 0 <= r["pixel_auroc"] <= 1 and 0 <= r["aupro"] <= 1, r
assert r["masks"] == int(sys.argv[2]), r
PY
"$stoke" predict --model "$work/padim.stoke" --data "$work/data/defect" --heatmaps "$work/padim-maps" --json \
  >"$work/padim-predict.json" 2>"$work/padim-predict.err" || fail "padim predict --heatmaps" "$work/padim-predict.err"
test "$(grep -c '"file".*"score".*"anomalous": \(true\|false\).*"heatmap"' "$work/padim-predict.json")" -eq "$defects" \
  || fail "padim predict json: file, score, anomalous, heatmap per image" "$work/padim-predict.json"
test "$(find "$work/padim-maps" -name '*.png' | wc -l)" -eq "$defects" || fail "one padim heatmap per image"
# Refused by name: a method that does not exist, PatchCore's option, one image, the cap.
if "$stoke" train --task anomaly --method padlm --data "$work/data/ok" --arch resnet18 --size 96 \
  --out "$work/x.stoke" >/dev/null 2>"$work/method.err"; then fail "--method padlm accepted" "$work/method.err"; fi
grep -q "'padlm' is not patchcore or padim" "$work/method.err" || fail "bad --method message" "$work/method.err"
if "$stoke" train --task anomaly --method padim --coreset 0.5 --data "$work/data/ok" --arch resnet18 --size 96 \
  --out "$work/x.stoke" >/dev/null 2>"$work/coreset.err"; then fail "--coreset with padim accepted" "$work/coreset.err"; fi
grep -q -- '--coreset is for --method patchcore' "$work/coreset.err" || fail "--coreset message" "$work/coreset.err"
mkdir -p "$work/one" && cp "$one" "$work/one/"
if "$stoke" train --task anomaly --method padim --data "$work/one" --arch resnet18 --width-mult 0.25 --size 64 \
  --out "$work/x.stoke" >/dev/null 2>"$work/one.err"; then fail "padim on one image accepted" "$work/one.err"; fi
grep -q 'needs at least 2' "$work/one.err" || fail "one-image message" "$work/one.err"
if "$stoke" train --task anomaly --method padim --data "$work/data/ok" --arch resnet18 --width-mult 0.5 --size 96 \
  --max-bank 1M --out "$work/x.stoke" >/dev/null 2>"$work/padim-cap.err"; then
  fail "padim Gaussians over --max-bank accepted" "$work/padim-cap.err"
fi
grep -q "PaDiM's Gaussians need .*max_bank_bytes.*(--max-bank)" "$work/padim-cap.err" \
  || fail "the padim cap error does not name --max-bank" "$work/padim-cap.err"
test ! -e "$work/x.stoke" || fail "a model was written by a refused padim training"
echo "OK: stoke train --task anomaly [--method padim] -> eval (AUROC $auroc) -> predict"
