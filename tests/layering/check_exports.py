#!/usr/bin/env python3
"""Checks that libstoke.so exports the public API and nothing internal.

usage: check_exports.py LIBSTOKE INCLUDE_DIR LIB_DIR [PLUGIN]

Every name in the stoke namespace that an exported symbol carries (the
function or object itself, its enclosing classes and namespaces, and stoke
types in its template arguments) must be declared in the public headers
(INCLUDE_DIR/stoke/**), or be one of the internals the CUDA plugin calls in
its host (declared STOKE_PLUGIN_HOST in LIB_DIR/**/*.hpp). Symbols without a
stoke name are the standard library's template instantiations, which
libstdc++ declares with default visibility. The check is by name: an
internal that shares its name with a public declaration passes, one that
only lib/ headers declare (stoke::cpu::CpuBackend, stoke::detail::json_quote)
fails.

Symbols without C++ mangling are the C ABI: each must be a function declared
STOKE_C_API in INCLUDE_DIR/stoke/stoke.h, and each function declared there
must be exported (a header function the library lacks fails to link in a C
host, or fails at run time in a P/Invoke or ctypes one).

With PLUGIN (libstoke_cuda.so), also: every stoke symbol the plugin imports
is exported by LIBSTOKE, so the plugin loads (it is built without -z defs,
which sanitizer builds cannot use). Exits 1 naming each violation.
"""
import os
import re
import subprocess
import sys

CHAIN = re.compile(r"\bstoke((?:::~?[A-Za-z_]\w*)+)")
IDENT = re.compile(r"~?[A-Za-z_]\w*")


def strip_code(text):
    """The header without comments and string or character literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'", " ", text)


def headers(root):
    for folder, _, files in os.walk(root):
        for name in files:
            if name.endswith((".hpp", ".h")):
                yield os.path.join(folder, name)


def public_names(include_dir):
    names = set()
    for path in headers(os.path.join(include_dir, "stoke")):
        names.update(IDENT.findall(strip_code(open(path, encoding="utf-8").read())))
    return names


def plugin_host_names(lib_dir):
    """Identifiers declared with STOKE_PLUGIN_HOST: the function or class name."""
    names = set()
    for path in headers(lib_dir):
        code = strip_code(open(path, encoding="utf-8").read())
        for match in re.finditer(r"STOKE_PLUGIN_HOST\b([^;{(]*)", code):
            found = IDENT.findall(match.group(1))
            if found:
                names.add(found[-1])
    names.discard("define")
    return names


def c_api_names(include_dir):
    """The functions stoke.h declares STOKE_C_API."""
    code = strip_code(open(os.path.join(include_dir, "stoke", "stoke.h"), encoding="utf-8").read())
    return set(re.findall(r"\bSTOKE_C_API\b[^;(]*?\b(stoke_\w+)\s*\(", code))


def dynamic_symbols(path, defined):
    flags = ["--defined-only"] if defined else ["--undefined-only"]
    out = subprocess.run(["nm", "-D", *flags, path], capture_output=True, text=True, check=True).stdout
    mangled = [line.split()[-1] for line in out.splitlines() if line.strip()]
    if not mangled:
        return {}
    demangled = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True,
                               check=True).stdout.splitlines()
    return dict(zip(mangled, demangled))


def internal_names(demangled, allowed):
    """The stoke names in `demangled` that are not in `allowed`."""
    bad = []
    for chain in CHAIN.findall(demangled):
        for name in chain.split("::")[1:]:
            if name not in allowed and name != "operator":
                bad.append(name)
    return bad


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    lib, include_dir, lib_dir = sys.argv[1:4]
    public = public_names(include_dir)
    host = plugin_host_names(lib_dir)
    exported = {m: d for m, d in dynamic_symbols(lib, True).items() if m not in ("_init", "_fini")}
    problems = []
    stoke_symbols = 0
    host_symbols = 0
    c_api = c_api_names(include_dir)
    c_symbols = 0
    for name in sorted(c_api - set(exported)):
        problems.append("stoke.h declares %s, which %s does not export" % (name, os.path.basename(lib)))
    for mangled, demangled in sorted(exported.items(), key=lambda item: item[1]):
        if not mangled.startswith("_Z") and not mangled.startswith("_"):
            if mangled in c_api:
                c_symbols += 1
                continue
            if mangled.startswith("stoke"):
                problems.append("exports %s (unmangled, not a STOKE_C_API function of stoke.h)" % mangled)
                continue
        if CHAIN.search(demangled):
            stoke_symbols += 1
        bad = internal_names(demangled, public | host)
        if bad:
            problems.append("exports %s (%s: declared in no public header)" % (demangled, ", ".join(bad)))
        elif internal_names(demangled, public):
            host_symbols += 1
    if len(sys.argv) == 5:
        imports = dynamic_symbols(sys.argv[4], False)
        for mangled, demangled in sorted(imports.items(), key=lambda item: item[1]):
            if CHAIN.search(demangled) and mangled not in exported:
                problems.append("the plugin imports %s, which %s does not export (mark it STOKE_PLUGIN_HOST)" %
                                (demangled, os.path.basename(lib)))
    for line in problems:
        print(line)
    print("%s exports %d symbols: %d name stoke (%d of them plugin-host internals: %s), %d the C ABI "
          "(stoke.h), %d the standard library's; %d problems" %
          (os.path.basename(lib), len(exported), stoke_symbols, host_symbols, " ".join(sorted(host)) or "none",
           c_symbols, len(exported) - stoke_symbols - c_symbols, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
