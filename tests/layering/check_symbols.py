#!/usr/bin/env python3
"""Checks that every module of libstoke calls only into the modules it declares.

usage: check_symbols.py MODULES_FILE OBJECT_ROOT

MODULES_FILE (written by lib/CMakeLists.txt) has one line per module,
"name: dep dep ..." with its transitive dependencies; OBJECT_ROOT holds the
object libraries' folders (stoke_<name>.dir). A symbol that one module's
objects use and another module's objects define is a call across modules; it
must go down the graph. Exits 1 naming each call that does not.
"""
import os
import subprocess
import sys


def symbols(path, defined):
    flags = ["--defined-only", "--extern-only"] if defined else ["--undefined-only"]
    out = subprocess.run(["nm", "-C", *flags, path], capture_output=True, text=True, check=True).stdout
    result = set()
    for line in out.splitlines():
        parts = line.split(None, 2) if defined else line.split(None, 1)
        if defined and len(parts) == 3 and parts[1] not in "VvWwu":
            result.add(parts[2])
        elif not defined and len(parts) == 2:
            result.add(parts[1])
    return result


def main():
    modules_file, object_root = sys.argv[1], sys.argv[2]
    uses = {}
    for line in open(modules_file):
        name, _, deps = line.partition(":")
        uses[name.strip()] = set(deps.split())
    objects = {name: [] for name in uses}
    for name in uses:
        for root, _, files in os.walk(os.path.join(object_root, "stoke_%s.dir" % name)):
            objects[name] += [os.path.join(root, f) for f in files if f.endswith(".o")]
    if not any(objects.values()):
        print("no object files under %s" % object_root)
        return 1
    owner = {}
    for name, paths in objects.items():
        for path in paths:
            for symbol in symbols(path, True):
                owner.setdefault(symbol, name)
    bad = []
    for name, paths in objects.items():
        for path in paths:
            for symbol in symbols(path, False):
                target = owner.get(symbol)
                if target and target != name and target not in uses[name]:
                    bad.append("%s (module %s) calls %s of module %s" %
                               (os.path.basename(path), name, symbol, target))
    for line in sorted(bad):
        print(line)
    checked = sum(len(p) for p in objects.values())
    print("%d objects of %d modules checked, %d calls against the module graph" % (checked, len(uses), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
