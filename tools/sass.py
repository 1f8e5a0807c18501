#!/usr/bin/env python3
"""The SASS of CUDA kernels, counted on the dev machine (no GPU): registers, instructions, and each kernel's
innermost loop that holds tensor-core instructions, with its opcode histogram.

CUDA's apt install here has nvcc and ptxas but no cuobjdump. NVIDIA publishes it on PyPI
(nvidia-cuda-cuobjdump, and nvidia-cuda-nvdisasm, which it runs); --fetch downloads both wheels once into
~/.cache/memra-tools (development tools, never a dependency of memra or its tests). $CUOBJDUMP or a cuobjdump on
PATH are used first.

    python3 tools/sass.py build-dev/src/backend/cuda/matmul.o --kernel 'k_mmvq_tmILi1ELi1ELi2ELi2ELi256ELi12E'
    python3 tools/sass.py OBJ --kernel REGEX --list          # names only
    python3 tools/sass.py OBJ --kernel REGEX --dump          # the loop's instructions

Why: an instruction count of a kernel's loop from PTX (2026-12-07g, section 4) is a guess at what ptxas keeps;
this is what it kept. The loop is the shortest span between a backward branch and its target that holds an
IMMA / HMMA / HGMMA (the main loop, not its divergent copies); its length counts every path through it, so two
builds compare like for like, not as executed instructions. "past its last wait" counts from the loop's last
DEPBAR (a cp.async ring's wait) to its back branch: what every iteration executes after its data has landed (the
decode matvecs' super-block step, bench/results/2026-12-08-not-run.md).
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import zipfile

CACHE = os.path.join(os.path.expanduser("~"), ".cache", "memra-tools")
MMA = ("IMMA", "HMMA", "HGMMA", "IGMMA")


def cuobjdump(fetch):
    """The cuobjdump to use, or None."""
    for c in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"):
        if c and os.access(c, os.X_OK):
            return c
    found = glob.glob(os.path.join(CACHE, "**", "bin", "cuobjdump"), recursive=True)
    if not found and fetch:
        os.makedirs(CACHE, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", CACHE,
                        "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"], check=True)
        for whl in glob.glob(os.path.join(CACHE, "nvidia_cuda_*.whl")):
            zipfile.ZipFile(whl).extractall(CACHE)
        found = glob.glob(os.path.join(CACHE, "**", "bin", "cuobjdump"), recursive=True)
    if not found:
        return None
    bindir = os.path.dirname(found[0])
    for f in os.listdir(bindir):
        os.chmod(os.path.join(bindir, f), 0o755)
    os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")  # cuobjdump runs nvdisasm
    return found[0]


def run(tool, flag, obj):
    r = subprocess.run([tool, flag, obj], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"sass.py: {tool} {flag} {obj}: {r.stderr.strip() or 'exit %d' % r.returncode}")
    return r.stdout


def functions(tool, obj):
    """{mangled name: [(address, instruction text)]} of every kernel in obj."""
    out = run(tool, "-sass", obj)
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2)))
    return funcs


def registers(tool, obj):
    """{mangled name: registers}"""
    out = run(tool, "-res-usage", obj)
    regs, name = {}, None
    for line in out.splitlines():
        m = re.search(r"Function (\S+):", line)
        if m:
            name = m.group(1)
        m = re.search(r"REG:(\d+)", line)
        if m and name:
            regs[name] = int(m.group(1))
    return regs


def opcode(text):
    """The opcode of an instruction without its predicate and modifiers."""
    t = text.split()
    op = t[1] if t[0].startswith("@") and len(t) > 1 else t[0]
    return op.split(".")[0]


def mma_loop(ins):
    """The shortest backward-branch span holding an MMA: (first index, last index), or None."""
    where = {a: i for i, (a, _) in enumerate(ins)}
    best = None
    for i, (a, text) in enumerate(ins):
        m = re.search(r"BRA\s+(?:\S+,\s*)?0x([0-9a-f]+)", text)
        if not m:
            continue
        j = where.get(int(m.group(1), 16))
        if j is None or j >= i or not any(opcode(t) in MMA for _, t in ins[j:i + 1]):
            continue
        if best is None or i - j < best[1] - best[0]:
            best = (j, i)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("obj", help="an object file or cubin built by nvcc")
    ap.add_argument("--kernel", default=".", help="regex on the mangled kernel names (default: all)")
    ap.add_argument("--list", action="store_true", help="print the matching names only")
    ap.add_argument("--dump", action="store_true", help="print each matching kernel's MMA loop")
    ap.add_argument("--fetch", action="store_true", help="download cuobjdump from PyPI if none is found")
    a = ap.parse_args()
    tool = cuobjdump(a.fetch)
    if not tool:
        sys.exit("sass.py: no cuobjdump ($CUOBJDUMP, PATH, /usr/local/cuda/bin, ~/.cache/memra-tools); "
                 "--fetch downloads it from PyPI")
    funcs = functions(tool, a.obj)
    names = [n for n in funcs if re.search(a.kernel, n)]
    if not names:
        sys.exit(f"sass.py: no kernel of {a.obj} matches {a.kernel!r}")
    regs = {} if a.list else registers(tool, a.obj)
    for n in names:
        ins = funcs[n]
        if a.list:
            print(n)
            continue
        loop = mma_loop(ins)
        print(f"{n}: {regs.get(n, '?')} registers, {len(ins)} instructions", end="")
        if not loop:
            print(", no MMA loop")
            continue
        body = ins[loop[0]:loop[1] + 1]
        hist = collections.Counter(opcode(t) for _, t in body)
        waits = [k for k, (_, t) in enumerate(body) if opcode(t) == "DEPBAR"]
        past = f", {len(body) - waits[-1]} past its last wait" if waits else ""
        print(f", MMA loop {len(body)} ({ins[loop[0]][0]:#x}..{ins[loop[1]][0]:#x}){past}")
        print("  " + " ".join(f"{op} {k}" for op, k in hist.most_common()))
        if a.dump:
            for addr, text in body:
                print(f"  {addr:#06x}  {text}")


if __name__ == "__main__":
    main()
