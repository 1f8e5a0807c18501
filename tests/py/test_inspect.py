#!/usr/bin/env python3
"""Checks `memra inspect` against the gguf Python package's reader.

For each fixture model (and a small file written here with the gguf package,
so the test runs without fixtures): --json must list the same keys, types,
tensors, shapes, byte sizes and offsets as gguf.GGUFReader, and the summary's
parameter count and bytes-per-token must match an independent computation.
Damaged copies must print what could be read, one 'stopped' line naming an
offset, and exit 1; a missing file or a non-GGUF exits 1 with one line; usage
errors exit 2. Run from the repo root; MEMRA_BIN picks the binary
(default build/memra)."""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("MEMRA_BIN", os.path.join(ROOT, "build", "memra"))
FIX = os.environ.get("MEMRA_FIXTURES") or os.path.join(ROOT, "..", "shared", "fixtures")

passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {msg}", file=sys.stderr)


def run(*args):
    p = subprocess.run([BIN, "inspect", *args], capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


TYPE_NAMES = {
    gguf.GGUFValueType.UINT8: "u8", gguf.GGUFValueType.INT8: "i8", gguf.GGUFValueType.UINT16: "u16",
    gguf.GGUFValueType.INT16: "i16", gguf.GGUFValueType.UINT32: "u32", gguf.GGUFValueType.INT32: "i32",
    gguf.GGUFValueType.FLOAT32: "f32", gguf.GGUFValueType.BOOL: "bool", gguf.GGUFValueType.STRING: "str",
    gguf.GGUFValueType.ARRAY: "arr", gguf.GGUFValueType.UINT64: "u64", gguf.GGUFValueType.INT64: "i64",
    gguf.GGUFValueType.FLOAT64: "f64",
}


def expected_per_token(r):
    """Bytes one decoded token reads, by the rule inspect documents: every
    trunk tensor once; token_embd one row (plus all of it when there is no
    output.weight); n_used/n_expert of each *_exps tensor; MTP layers skipped."""
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("GGUF.")}
    arch = f["general.architecture"]
    blocks = f[f"{arch}.block_count"]
    nextn = f.get(f"{arch}.nextn_predict_layers", 0)
    n_exp = f.get(f"{arch}.expert_count", 0)
    n_used = f.get(f"{arch}.expert_used_count", 0)
    names = {t.name for t in r.tensors}
    total = 0
    for t in r.tensors:
        m = re.match(r"blk\.(\d+)\.", t.name)
        if m and int(m.group(1)) >= blocks - nextn:
            continue
        if t.name == "token_embd.weight":
            total += int(t.n_bytes) // int(t.shape[1])
            if "output.weight" not in names:
                total += int(t.n_bytes)
        elif "_exps" in t.name and n_exp and int(t.shape[-1]) == n_exp:
            total += int(t.n_bytes) // n_exp * n_used
        else:
            total += int(t.n_bytes)
    return total


def compare(path, label):
    rc, out, err = run("--json", path)
    check(rc == 0, f"{label}: --json exit {rc}: {err.strip()}")
    try:
        d = json.loads(out)
    except ValueError as e:
        check(False, f"{label}: --json output does not parse: {e}")
        return
    r = gguf.GGUFReader(path)
    check(d["error"] is None, f"{label}: error {d['error']}")
    check(d["file_size"] == os.path.getsize(path), f"{label}: file_size")
    check(d["version"] == int(r.fields["GGUF.version"].contents()), f"{label}: version")
    kvs = [(k, v) for k, v in r.fields.items() if not k.startswith("GGUF.")]
    check([m["key"] for m in d["metadata"]] == [k for k, _ in kvs], f"{label}: metadata keys")
    for m, (k, v) in zip(d["metadata"], kvs):
        check(m["type"] == TYPE_NAMES[v.types[0]], f"{label}: {k} type {m['type']}")
        if v.types[0] == gguf.GGUFValueType.ARRAY:
            n = len(v.data)
            head = v.contents(slice(0, len(m["head"])))
            check(m["elem_type"] == TYPE_NAMES[v.types[1]], f"{label}: {k} elem_type")
            check(m["count"] == n, f"{label}: {k} count {m['count']} vs {n}")
            if v.types[1] in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
                check(np.allclose(m["head"], head, rtol=0, atol=0), f"{label}: {k} head")
            else:
                check(m["head"] == head, f"{label}: {k} head {m['head'][:3]} vs {head[:3]}")
            check(len(m["head"]) == min(n, 8), f"{label}: {k} head length")
        elif v.types[0] in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
            check(m["value"] == float(v.contents()), f"{label}: {k} value")
        else:
            check(m["value"] == v.contents(), f"{label}: {k} value {str(m['value'])[:40]}")
    check(len(d["tensors"]) == len(r.tensors), f"{label}: tensor count")
    data_start = min((int(t.data_offset) for t in r.tensors), default=0)
    for jt, t in zip(d["tensors"], r.tensors):
        check(jt["name"] == t.name, f"{label}: tensor name {jt['name']}")
        check(jt["type"] == t.tensor_type.name, f"{label}: {t.name} type {jt['type']}")
        check(jt["shape"] == [int(x) for x in t.shape], f"{label}: {t.name} shape")
        check(jt["bytes"] == int(t.n_bytes), f"{label}: {t.name} bytes")
        check(jt["file_offset"] == int(t.data_offset), f"{label}: {t.name} file offset")
        check(jt["file_offset"] - jt["offset"] == d["data_offset"], f"{label}: {t.name} offset")
    check(not r.tensors or d["data_offset"] <= data_start, f"{label}: data_offset")
    s = d["summary"]
    arch = r.fields["general.architecture"].contents()
    check(s["architecture"] == arch, f"{label}: architecture")
    check(s["parameters"] == sum(int(t.n_elements) for t in r.tensors), f"{label}: parameters")
    if arch in ("qwen35", "qwen35moe", "qwen3next") and r.tensors:
        want = expected_per_token(r)
        check(s["bytes_per_token"] == want, f"{label}: bytes_per_token {s['bytes_per_token']} vs {want}")
        check("MTP" in s["bytes_per_token_counts"], f"{label}: per-token description")
    else:
        check(s["bytes_per_token"] is None, f"{label}: bytes_per_token for {arch}")

    rc, out, err = run(path)
    check(rc == 0 and err == "", f"{label}: text exit {rc}: {err.strip()}")
    check("summary" in out and f"architecture     {arch}" in out, f"{label}: text summary")
    check(all(t.name in out for t in r.tensors), f"{label}: text lists every tensor")


def damaged(path, label, cut):
    with open(path, "rb") as f:
        data = f.read()
    with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as tmp:
        tmp.write(data[:cut])
    try:
        rc, out, err = run(tmp.name)
        lines = err.strip().splitlines()
        check(rc == 1, f"{label} cut at {cut}: exit {rc}")
        check(len(lines) == 1 and "stopped" in lines[0] and "offset" in lines[0],
              f"{label} cut at {cut}: stderr {err.strip()[:200]}")
        check("metadata" in out and "general.architecture" in out, f"{label} cut at {cut}: metadata not shown")
        rc, out, err = run("--json", tmp.name)
        check(rc == 1, f"{label} cut at {cut}: --json exit {rc}")
        try:
            d = json.loads(out)
            check(isinstance(d["error"], str) and "offset" in d["error"], f"{label} cut at {cut}: json error")
            check(any(m["key"] == "general.architecture" for m in d["metadata"]), f"{label}: json metadata")
        except ValueError as e:
            check(False, f"{label} cut at {cut}: --json does not parse: {e}")
    finally:
        os.unlink(tmp.name)


def own_file(dirname):
    """A small qwen35moe-like file made by the gguf package (no fixtures needed)."""
    path = os.path.join(dirname, "own.gguf")
    w = gguf.GGUFWriter(path, "qwen35moe")
    w.add_uint32("qwen35moe.block_count", 3)
    w.add_uint32("qwen35moe.nextn_predict_layers", 1)
    w.add_uint32("qwen35moe.expert_count", 4)
    w.add_uint32("qwen35moe.expert_used_count", 2)
    w.add_float64("t.f64", 0.125)
    w.add_int64("t.i64", -5)
    w.add_bool("t.bool", True)
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(10)])
    w.add_array("t.f32s", [0.5, 1.5, 2.5])
    w.add_string("t.odd", "tab\there \"quoted\" \u00e9")
    w.add_tensor("token_embd.weight", np.zeros((10, 32), dtype=np.float32))
    w.add_tensor("output.weight", np.zeros((10, 32), dtype=np.float16))
    for b in range(3):
        w.add_tensor(f"blk.{b}.ffn_up_exps.weight", np.zeros((4, 16, 32), dtype=np.float32))
        w.add_tensor(f"blk.{b}.attn_norm.weight", np.ones(32, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def main():
    if not os.access(BIN, os.X_OK):
        print(f"FAIL no binary at {BIN}", file=sys.stderr)
        print("test_inspect: 0 passed, 1 failed")
        return 1
    with tempfile.TemporaryDirectory() as d:
        p = own_file(d)
        compare(p, "own.gguf")
        size = os.path.getsize(p)
        r = gguf.GGUFReader(p)
        damaged(p, "own.gguf", size - 16)  # inside the last tensor's data
        damaged(p, "own.gguf", int(r.tensors[0].data_offset) - 40)  # inside the tensor directory
        # every key of the own file, to check its exact value
        rc, out, _ = run("--json", p)
        s = json.loads(out)["summary"]
        # trunk = blk.0, blk.1; per layer: 2/4 of 4*16*32*4 bytes + 128 bytes of norm; one token_embd row; output
        want = 2 * (4 * 16 * 32 * 4 // 4 * 2 + 32 * 4) + 32 * 4 + 10 * 32 * 2
        check(s["bytes_per_token"] == want, f"own.gguf: bytes_per_token {s['bytes_per_token']} vs {want}")

        missing = os.path.join(d, "missing.gguf")
        rc, out, err = run(missing)
        check(rc == 1 and out == "" and len(err.strip().splitlines()) == 1 and "missing.gguf" in err,
              f"missing file: exit {rc}, stderr {err!r}")
        notgguf = os.path.join(d, "not.gguf")
        with open(notgguf, "w") as f:
            f.write("hello, this is not a gguf file\n")
        rc, out, err = run(notgguf)
        check(rc == 1 and out == "" and len(err.strip().splitlines()) == 1 and "not a GGUF" in err,
              f"not a GGUF: exit {rc}, stderr {err!r}")
    rc, _, _ = run()
    check(rc == 2, f"no file: exit {rc}")
    rc, _, _ = run("--frobnicate", "x.gguf")
    check(rc == 2, f"unknown option: exit {rc}")
    rc, _, _ = run("a.gguf", "b.gguf")
    check(rc == 2, f"two files: exit {rc}")

    if os.path.isdir(FIX):
        names = sorted(n for n in os.listdir(FIX) if n.endswith(".gguf"))
        for n in names:
            if "vocab" in n:
                # gguf.GGUFReader needs minutes for 300k strings: check inspect alone
                rc, out, err = run("--json", os.path.join(FIX, n))
                m = {x["key"]: x for x in json.loads(out)["metadata"]} if rc == 0 else {}
                check(rc == 0 and m["tokenizer.ggml.tokens"]["count"] == 151936 and
                      m["tokenizer.ggml.merges"]["count"] == 151387, f"{n}: exit {rc}, token/merge counts")
                continue
            compare(os.path.join(FIX, n), n)
        model = os.path.join(FIX, "qwen35-tiny-moe.Q8_0.gguf")
        if os.path.exists(model):
            damaged(model, "tiny-moe", os.path.getsize(model) // 2)
    else:
        print("test_inspect: no fixture folder, fixture checks skipped")
    print(f"test_inspect: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
