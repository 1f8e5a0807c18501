#!/usr/bin/env python3
"""Bit-exact cross-check of memra's dequantizers against the gguf package.

gguf.quants.dequantize is the llama.cpp project's reference dequantizer.
memra's values come from the plain build's bridge program
(build/tests/dequant_tool, or $MEMRA_DEQUANT_TOOL), which runs
memra_dequant_row. Checked:
  (a) every tensor of every .gguf in ../shared/fixtures (skipped when absent);
  (b) 4096 random blocks of every supported type (fixed seed; random bytes,
      with the fp16 scale fields forced finite);
  (c) memra_fp32_to_fp16 / memra_fp32_to_bf16 against numpy's float16 cast
      and the gguf package's BF16 quantizer, on random and edge-case floats.
Values are compared as float32 bit patterns; NaN only has to be NaN in both.
Prints "test_quant_gguf: N passed, N failed" and exits non-zero on failure.
"""
import os
import subprocess
import sys

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.environ.get("MEMRA_DEQUANT_TOOL") or os.path.join(ROOT, "build", "tests", "dequant_tool")
FIXTURES = os.environ.get("MEMRA_FIXTURES") or os.path.join(ROOT, "..", "shared", "fixtures")

BLOCKS_PER_TYPE = 4096
SEED = 20260

# The types memra computes with, and the byte offsets of their fp16 fields
# (scales and offsets) inside one block, which the random test keeps finite.
SUPPORTED = {
    T.F32: [], T.F16: [], T.BF16: [],
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0], T.MXFP4: [], T.NVFP4: [],
}

passed = 0
failed = 0


def check(ok, label, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {label}{': ' + detail if detail else ''}")


def run_tool(args, data=None):
    r = subprocess.run([TOOL, *args], input=data, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(f"dequant_tool {' '.join(args)} exited {r.returncode}: {r.stderr.decode().strip()}")
    return r.stdout


def same_f32(expected, got):
    """(ok, detail): equal float32 bit patterns, NaN only needs to be NaN in both."""
    e = np.ascontiguousarray(expected, dtype=np.float32).ravel()
    g = np.ascontiguousarray(got, dtype=np.float32).ravel()
    if e.shape != g.shape:
        return False, f"{g.size} values, expected {e.size}"
    en, gn = np.isnan(e), np.isnan(g)
    diff = (en != gn) | (~en & (e.view(np.uint32) != g.view(np.uint32)))
    if not diff.any():
        return True, ""
    i = int(np.flatnonzero(diff)[0])
    return False, (f"{int(diff.sum())} of {e.size} differ; first at {i}: "
                   f"expected {e[i]!r} (0x{int(e.view(np.uint32)[i]):08x}) "
                   f"got {g[i]!r} (0x{int(g.view(np.uint32)[i]):08x})")


def tensor_count(path):
    """The header's tensor count (magic, u32 version, u64 n_tensors), or -1."""
    with open(path, "rb") as f:
        head = f.read(16)
    if len(head) < 16 or head[:4] != b"GGUF":
        return -1
    return int.from_bytes(head[8:16], "little")


def check_fixtures():
    if not os.path.isdir(FIXTURES):
        print(f"note: {FIXTURES} not found, skipping the fixture tensors")
        return
    names = sorted(f for f in os.listdir(FIXTURES) if f.endswith(".gguf"))
    for name in names:
        path = os.path.join(FIXTURES, name)
        if tensor_count(path) == 0:
            continue  # vocab-only file: GGUFReader would spend long parsing 150k tokens for nothing
        reader = GGUFReader(path)
        for t in reader.tensors:
            label = f"{name}:{t.name} ({t.tensor_type.name})"
            if t.tensor_type not in SUPPORTED:
                check(False, label, "tensor type not covered by memra")
                continue
            try:
                got = np.frombuffer(run_tool([str(int(t.tensor_type)), path, str(t.data_offset),
                                              str(t.n_bytes)]), dtype=np.float32)
            except RuntimeError as e:
                check(False, label, str(e))
                continue
            with np.errstate(all="ignore"):
                expected = dequantize(t.data, t.tensor_type)
            ok, detail = same_f32(expected, got)
            check(ok, label, detail)


def random_blocks(qtype, rng):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(BLOCKS_PER_TYPE, block_bytes), dtype=np.uint8)
    for off in SUPPORTED[qtype]:
        h = raw[:, off:off + 2].copy().view(np.uint16)
        # exponent all ones (inf/NaN) -> clear its top bit: a finite value
        h = np.where((h & 0x7C00) == 0x7C00, h & 0xBFFF, h).astype(np.uint16)
        raw[:, off:off + 2] = h.view(np.uint8).reshape(BLOCKS_PER_TYPE, 2)
    return raw


def check_random():
    for qtype in SUPPORTED:
        rng = np.random.default_rng(SEED + int(qtype))
        raw = random_blocks(qtype, rng)
        label = f"random {BLOCKS_PER_TYPE} blocks of {qtype.name}"
        try:
            got = np.frombuffer(run_tool([str(int(qtype))], raw.tobytes()), dtype=np.float32)
        except RuntimeError as e:
            check(False, label, str(e))
            continue
        with np.errstate(all="ignore"):
            expected = dequantize(raw, qtype)
        ok, detail = same_f32(expected, got)
        check(ok, label, detail)


def check_conversions():
    rng = np.random.default_rng(SEED)
    all_h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    h_vals = all_h.view(np.float16).astype(np.float32)
    finite = np.isfinite(h_vals)
    # every fp16 value, the midpoints between neighbours (ties) and points
    # just off them, random bit patterns, and the overflow edge
    a = h_vals[finite].astype(np.float64)
    a = np.sort(a[a >= 0])
    mid = ((a[:-1] + a[1:]) / 2).astype(np.float32)
    mid_bits = mid.view(np.uint32)
    edge = np.array([65504.0, 65519.99, 65520.0, 65536.0, 1e9, np.inf, -np.inf, np.nan,
                     2.0 ** -24, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 2.0 ** -26, 0.0, -0.0],
                    dtype=np.float32)
    x = np.concatenate([h_vals, mid, -mid, (mid_bits + 1).view(np.float32), (mid_bits - 1).view(np.float32),
                        rng.integers(0, 2 ** 32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        edge]).astype(np.float32)

    try:
        got16 = np.frombuffer(run_tool(["--to-f16"], x.tobytes()), dtype=np.uint16)
        with np.errstate(all="ignore"):
            exp16 = x.astype(np.float16)
        ok, detail = same_f32(exp16.astype(np.float32), got16.view(np.float16).astype(np.float32))
        # same_f32 compares after widening; also require identical codes off NaN
        nn = ~np.isnan(x)
        if ok and not np.array_equal(exp16.view(np.uint16)[nn], got16[nn]):
            ok, detail = False, "fp16 codes differ"
        check(ok, f"fp32->fp16 on {x.size} values vs numpy", detail)
    except RuntimeError as e:
        check(False, "fp32->fp16", str(e))

    try:
        got_bf = np.frombuffer(run_tool(["--to-bf16"], x.tobytes()), dtype=np.uint16)
        exp_bf = quantize(x.reshape(1, -1), T.BF16).view(np.uint16).ravel()
        diff = np.flatnonzero(exp_bf != got_bf)
        detail = ""
        if diff.size:
            i = int(diff[0])
            detail = (f"{diff.size} differ; first x=0x{int(x.view(np.uint32)[i]):08x}: "
                      f"expected 0x{int(exp_bf[i]):04x} got 0x{int(got_bf[i]):04x}")
        check(diff.size == 0, f"fp32->bf16 on {x.size} values vs gguf BF16 quantize (NaN bits too)", detail)
    except RuntimeError as e:
        check(False, "fp32->bf16", str(e))


def main():
    if not os.access(TOOL, os.X_OK):
        print(f"FAIL {TOOL} not built (make tests-bin)")
        print("test_quant_gguf: 0 passed, 1 failed")
        return 1
    check_random()
    check_conversions()
    check_fixtures()
    print(f"test_quant_gguf: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
