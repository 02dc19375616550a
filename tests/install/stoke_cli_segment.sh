#!/usr/bin/env bash
# stoke train --task segment -> stoke eval -> stoke predict --masks on the
# synthetic segmentation set (issue 30, item 4; docs/segmentation-cli.md):
# eval's JSON keys and a mean IoU above what predicting background
# everywhere scores, one mask PNG per image at the image's size whose pixels
# give the JSON's areas and regions, and usage errors naming the flag.
#   stoke_cli_segment.sh <stoke binary>
set -uo pipefail
stoke=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STOKE_LOG_LEVEL=error
# shellcheck source=test_lib.sh
source "$(dirname "$0")/test_lib.sh"

set_options=(--size 96x80 --format png --defects 0.8)
"$stoke" dataset --task segment --out "$work/train" --count 48 --seed 1 "${set_options[@]}" \
  >/dev/null 2>&1 || fail "dataset (train)"
"$stoke" dataset --task segment --out "$work/val" --count 12 --seed 2 "${set_options[@]}" \
  >/dev/null 2>&1 || fail "dataset (val)"

expect_usage() {  # expect_usage WHAT ARGS...: status 2, WHAT in the message, no model written
  local what=$1
  shift
  "$stoke" train --task segment --data "$work/train" --out "$work/x.stoke" "$@" >/dev/null 2>"$work/err"
  test $? -eq 2 && grep -q -- "$what" "$work/err" || { cat "$work/err"; fail "usage: $what"; }
  test ! -e "$work/x.stoke" || fail "a refused command wrote the model ($what)"
}
expect_usage '--arch' --arch vgg16 --size 64
expect_usage '--size' --arch resnet18 --size 50
expect_usage '--size is required' --arch resnet18
expect_usage '--class-weights' --arch resnet18 --size 64 --class-weights 1,2
expect_usage '--lr' --arch resnet18 --size 64 --lr -1

# Measured on 2 shared cores: about 4 s of CPU for training; eval mean IoU
# 0.454, the same every run (background everywhere scores 0.33: background's
# IoU ~0.98 and 0 for the two defects).
"$stoke" train --task segment --data "$work/train" --val "$work/val" --arch resnet18 --width 0.25 \
  --size 64 --epochs 14 --batch 8 --lr 0.01 --class-weights auto --out "$work/m.stoke" --json \
  >"$work/train.json" 2>"$work/train.err" || { cat "$work/train.err"; fail "train"; }
grep -q '^epoch 14/14: loss' "$work/train.err" || { cat "$work/train.err"; fail "no epoch lines"; }
test "$(json_field epochs_run <"$work/train.json")" = 14 || fail "epochs_run"

"$stoke" eval --model "$work/m.stoke" --data "$work/val" --json >"$work/eval.json" 2>"$work/eval.err" \
  || { cat "$work/eval.err"; fail "eval"; }
python3 - "$work/eval.json" <<'PY' || fail "eval --json"
import json, sys
e = json.load(open(sys.argv[1]))
names = ["background", "scratch", "spot"]
for key in ("per_class_iou", "mean_iou", "pixel_accuracy", "confusion_matrix", "area_error"):
    assert key in e, key
assert list(e["per_class_iou"]) == names, e["per_class_iou"]
assert e["confusion_matrix"]["classes"] == names
rows = e["confusion_matrix"]["rows"]
assert sum(map(sum, rows)) == e["pixels"] == 12 * 96 * 80, e["pixels"]
assert abs(e["pixel_accuracy"] - sum(rows[i][i] for i in range(3)) / e["pixels"]) < 1e-6
assert len(e["area_error"]["images"]) == 12
mean = sum(i["error"] for i in e["area_error"]["images"]) / 12
assert abs(mean - e["area_error"]["mean"]) < 1e-6
assert e["mean_iou"] > 0.40, "mean IoU %s" % e["mean_iou"]
print("mean_iou", e["mean_iou"])
PY

# --report: the same JSON, and a page with the worst images' overlays.
"$stoke" eval --model "$work/m.stoke" --data "$work/val" --report "$work/report" >/dev/null \
  2>"$work/report.err" || { cat "$work/report.err"; fail "eval --report"; }
cmp -s "$work/eval.json" "$work/report/report.json" || fail "report.json is not eval --json's object"
grep -q 'Worst images' "$work/report/report.html" || fail "report.html has no worst images"
test "$(grep -o 'data:image/png;base64' "$work/report/report.html" | wc -l)" -eq 24 \
  || fail "report.html: not 2 overlays for each of the 12 images"

"$stoke" predict --model "$work/m.stoke" --data "$work/val" --masks "$work/masks" --json \
  >"$work/predict.json" 2>"$work/predict.err" || { cat "$work/predict.err"; fail "predict"; }
python3 - "$work/predict.json" "$work/masks" "$work/val/images" <<'PY' || fail "predict --masks"
import json, os, struct, sys, zlib

def read_png(path):  # (width, height, bit depth, colour type, rows of 8-bit gray)
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    if colour != 0 or depth != 8:
        return w, h, depth, colour, None
    raw, rows, prev = zlib.decompress(idat), [], bytearray(w)
    for y in range(h):
        f, line = raw[y * (w + 1)], bytearray(raw[y * (w + 1) + 1:(y + 1) * (w + 1)])
        for x in range(w):
            a = line[x - 1] if x else 0
            b, c = prev[x], prev[x - 1] if x else 0
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + b) & 255
            elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, depth, colour, rows

def regions(rows, w, h):
    seen, out = set(), []
    for y in range(h):
        for x in range(w):
            v = rows[y][x]
            if v == 0 or (x, y) in seen:
                continue
            stack, area, xs, ys = [(x, y)], 0, [], []
            seen.add((x, y))
            while stack:
                px, py = stack.pop()
                area += 1; xs.append(px); ys.append(py)
                for dy in (-1, 0, 1):
                    for dx in (-1, 0, 1):
                        q = (px + dx, py + dy)
                        if 0 <= q[0] < w and 0 <= q[1] < h and q not in seen and rows[q[1]][q[0]] == v:
                            seen.add(q); stack.append(q)
            out.append((v, area, [min(xs), min(ys), max(xs) - min(xs) + 1, max(ys) - min(ys) + 1]))
    return out

names = ["background", "scratch", "spot"]
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 12, len(lines)
assert sorted(os.listdir(sys.argv[2])) == sorted(os.listdir(sys.argv[3])), os.listdir(sys.argv[2])
for r in lines:
    iw, ih = read_png(r["file"])[:2]
    w, h, depth, colour, rows = read_png(r["mask"])
    assert (w, h) == (iw, ih) == (r["width"], r["height"]), (r["file"], w, h, iw, ih)
    assert (depth, colour) == (8, 0), r["mask"]
    counts = [sum(row.count(c) for row in rows) for c in range(3)]
    assert counts == [r["areas"][n] for n in names], (r["file"], counts, r["areas"])
    want = [(names.index(g["class"]), g["area"], g["bbox"]) for g in r["regions"]]
    assert regions(rows, w, h) == want, r["file"]
print("ok", len(lines), "masks")
PY

# --masks naming the input folder: a mask never replaces an input image (it
# gets <name>-2.png), and the input's bytes are unchanged.
one=$(ls "$work/val/images" | head -1)
mkdir -p "$work/same" && cp "$work/val/images/$one" "$work/same/"
before=$(sha256sum "$work/same/$one" | cut -d' ' -f1)
"$stoke" predict --model "$work/m.stoke" "$work/same/$one" --masks "$work/same" --json \
  >"$work/same.json" 2>"$work/same.err" || { cat "$work/same.err"; fail "predict --masks into the input folder"; }
[ "$(sha256sum "$work/same/$one" | cut -d' ' -f1)" = "$before" ] || fail "predict --masks replaced its input image"
grep -q "\"mask\": \"$work/same/${one%.*}-2.png\"" "$work/same.json" || { cat "$work/same.json"; fail "the mask beside its input is not <name>-2.png"; }
[ -f "$work/same/${one%.*}-2.png" ] || fail "the mask <name>-2.png was not written"
# --tile-stride: tiles of the model's 64 x 64 input at the images' own 96 x 80,
# 32 apart; the map is at the image's size and covers it. A stride past the
# tile is refused by name (exit 2 or 1 with the option named), nothing written.
"$stoke" predict --model "$work/m.stoke" "$work/val/images/$one" --tile-stride 32 --json \
  >"$work/tiled.json" 2>"$work/tiled.err" || { cat "$work/tiled.err"; fail "predict --tile-stride"; }
python3 - "$work/tiled.json" <<'PY' || fail "predict --tile-stride: the map"
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert (r["width"], r["height"]) == (96, 80), r
assert sum(r["areas"].values()) == 96 * 80, r["areas"]
PY
if "$stoke" predict --model "$work/m.stoke" "$work/val/images/$one" --tile-stride 65 \
  >"$work/bad.json" 2>"$work/bad.err"; then
  fail "--tile-stride 65 over a 64 tile was taken"
fi
grep -q 'segment_tile_stride 65' "$work/bad.err" || { cat "$work/bad.err"; fail "the refusal names the stride"; }
echo "ok"
