#!/usr/bin/env python3
"""Compares a C ABI host's predictions with `stoke predict --json`'s, bit for bit.

usage: compare_predictions.py STOKE_JSON HOST_JSON [VIA...]

Both files are JSON lines {"file", "class", "confidence", "probabilities":
{name: p}}; the host's also carry "via" (how the image reached the library:
file, bytes, buffer-...). Every host line must have the class, and the
confidence and each probability as the same float32 (9 significant digits
give a float back exactly), as stoke's line for its file; each VIA must occur.
Exits 1 naming each difference.
"""
import json
import struct
import sys


def f32(x):
    return struct.pack("<f", float(x))


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    stoke = {}
    for line in open(sys.argv[1], encoding="utf-8"):
        if line.strip():
            row = json.loads(line)
            stoke[row["file"]] = row
    problems, seen, checked = [], set(), 0
    for line in open(sys.argv[2], encoding="utf-8"):
        if not line.strip():
            continue
        row = json.loads(line)
        seen.add(row["via"])
        where = "%s via %s" % (row["file"], row["via"])
        ref = stoke.get(row["file"])
        if ref is None:
            problems.append("%s: stoke predict gave no result" % where)
            continue
        if row["class"] != ref["class"]:
            problems.append("%s: class %s, stoke predict %s" % (where, row["class"], ref["class"]))
        if f32(row["confidence"]) != f32(ref["confidence"]):
            problems.append("%s: confidence %r, stoke predict %r" % (where, row["confidence"], ref["confidence"]))
        if sorted(row["probabilities"]) != sorted(ref["probabilities"]):
            problems.append("%s: classes %s, stoke predict %s" % (where, sorted(row["probabilities"]),
                                                                 sorted(ref["probabilities"])))
        for name, p in ref["probabilities"].items():
            q = row["probabilities"].get(name)
            if q is not None and f32(q) != f32(p):
                problems.append("%s: p(%s) %r, stoke predict %r" % (where, name, q, p))
        checked += 1
    for via in sys.argv[3:]:
        if via not in seen:
            problems.append("no prediction via %s" % via)
    for p in problems:
        print(p)
    print("%d host predictions compared with stoke predict: %d differences" % (checked, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
