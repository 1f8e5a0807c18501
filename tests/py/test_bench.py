#!/usr/bin/env python3
"""Checks `memra bench` and `memra gate model` on the CPU backend.

bench: on tests/data/tiny-dense.bf16.gguf and tiny-moe.bf16.gguf with tiny
sizes, the CSV must have its header once and every metric (copy_bw, prefill
per length, decode / decode_bytes / decode_gbps per depth) with finite
positive values; the decode bytes per token must equal an independent
computation from the GGUF (gguf package: trunk tensors once, token_embd one
row, expert tensors n_used/n_expert, MTP layers left out; KV rows and GDN
state from the shapes), bytes = weights + kv + state, GB/s = bytes / time,
fraction = GB/s / copy_bw. Bad options exit 2.

gate model: passes on tests/data, and fails (exit 1) when the tolerance is
set below what float32 can reach, so the gate can fail.

bench/ablate.py: parses a stored CUDA decode profile, and runs on the CPU.

bench/timeline.py: cuts a made-up launch CSV (memra bench --timeline's columns) into steps and adds up a step's
work and gaps as defined; memra bench refuses --timeline on a backend without one, before loading.

Run from the repo root; MEMRA_BIN picks the binary (default build/memra)."""
import csv
import io
import math
import os
import subprocess
import sys

import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("MEMRA_BIN", os.path.join(ROOT, "build", "memra"))
DATA = os.path.join(ROOT, "tests", "data")

passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {msg}", file=sys.stderr)


def run(*args, timeout=60):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, errors="replace", timeout=timeout, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


def field(r, key):
    f = r.get_field(key)
    return None if f is None else f.contents()


def expected_bytes(path, depth, n_steps):
    """Weight, KV and state bytes of one decode step averaged over the steps at depth .. depth+n_steps-1."""
    r = gguf.GGUFReader(path)
    arch = field(r, "general.architecture")
    n_layer = field(r, f"{arch}.block_count")
    n_trunk = n_layer - (field(r, f"{arch}.nextn_predict_layers") or 0)
    n_expert = field(r, f"{arch}.expert_count") or 0
    n_used = field(r, f"{arch}.expert_used_count") or 0
    t = {x.name: x for x in r.tensors}
    emb = t["token_embd.weight"]
    w = emb.n_bytes / int(emb.shape[1])  # one row
    w += t["output_norm.weight"].n_bytes
    w += (t.get("output.weight") or emb).n_bytes  # tied: the lm_head streams the embedding
    n_attn = n_gdn = 0
    for name, x in t.items():
        if not name.startswith("blk."):
            continue
        il = int(name.split(".")[1])
        if il >= n_trunk:
            continue
        if name.endswith("_exps.weight"):
            w += x.n_bytes * n_used / n_expert
        else:
            w += x.n_bytes
        if name.endswith(".attn_q.weight"):
            n_attn += 1
        if name.endswith(".ssm_a"):
            n_gdn += 1
    hd = field(r, f"{arch}.attention.key_length")
    n_kv = field(r, f"{arch}.attention.head_count_kv")
    if isinstance(n_kv, list):
        n_kv = max(n_kv)
    kv_row = n_kv * hd * 4
    kv = sum(n_attn * (2 * kv_row * (p + 1) + 2 * kv_row) for p in range(depth, depth + n_steps)) / n_steps
    conv = t["blk.0.ssm_conv1d.weight"]
    d_conv, conv_dim = int(conv.shape[0]), int(conv.shape[1])
    n_v = int(t["blk.0.ssm_a"].shape[0])
    d_v = int(t["blk.0.ssm_norm.weight"].shape[0])
    d_k = field(r, f"{arch}.ssm.state_size")
    state = n_gdn * 2 * (n_v * d_v * d_k * 4 + conv_dim * (d_conv - 1) * 4)
    return w, kv, state


def close(a, b, rel=1e-4):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1.0)


def test_bench(model, prefill, depths, n_dec, extra=()):
    """extra: more bench arguments (--ctx: a larger context changes no row's bytes)"""
    path = os.path.join(DATA, model)
    rc, out, err = run("bench", "-m", path, "--backend", "cpu", "--threads", "2", "--prefill",
                       ",".join(map(str, prefill)), "--depth", ",".join(map(str, depths)), "--decode-tokens",
                       str(n_dec), "--reps", "2", "--copy-mib", "16", "--chunk", "16", "--csv", *extra)
    check(rc == 0, f"{model}: bench exit {rc}: {err[-500:]}")
    lines = out.strip().splitlines()
    check(len(lines) > 1 and lines[0].startswith("model,backend,metric,value,unit,ceiling_gbps,fraction"),
          f"{model}: CSV header: {lines[:1]}")
    check(sum(1 for l in lines if l.startswith("model,")) == 1, f"{model}: header printed once")
    rows = list(csv.DictReader(io.StringIO(out)))
    check("decode" in err and "copy bandwidth" in err, f"{model}: human table on stderr with --csv")
    by = {}
    for r in rows:
        by.setdefault(r["metric"], []).append(r)
        check(r["model"] == model and r["backend"] == "cpu", f"{model}: row names model and backend: {r}")
        v = float(r["value"])
        check(math.isfinite(v) and v > 0, f"{model}: {r['metric']} value {r['value']} is finite and positive")
        c = float(r["ceiling_gbps"])
        check(math.isfinite(c) and c > 0, f"{model}: {r['metric']} ceiling {r['ceiling_gbps']}")
    check(len(by.get("copy_bw", [])) == 1, f"{model}: one copy_bw row")
    ceiling = float(by["copy_bw"][0]["value"]) if by.get("copy_bw") else float("nan")
    check(sorted(int(r["n_tokens"]) for r in by.get("prefill", [])) == sorted(prefill),
          f"{model}: a prefill row per length")
    for r in by.get("prefill", []):
        T, tps, ms = int(r["n_tokens"]), float(r["value"]), float(r["ms_per_token"])
        check(close(tps * ms / 1e3, 1.0, 1e-3), f"{model}: prefill {T}: tok/s x ms/tok = 1")
    for metric in ("decode", "decode_bytes", "decode_gbps"):
        check(sorted(int(r["depth"]) for r in by.get(metric, [])) == sorted(depths),
              f"{model}: a {metric} row per depth")
    for r in by.get("decode", []):
        d = int(r["depth"])
        check(int(r["n_tokens"]) == n_dec, f"{model}: depth {d}: {n_dec} decode tokens")
        w, kv, st = expected_bytes(path, d, n_dec)
        bw, bkv, bst, b = (float(r[k]) for k in ("weight_bytes", "kv_bytes", "state_bytes", "bytes_per_token"))
        check(close(bw, w), f"{model}: depth {d}: weight bytes {bw:.0f}, from the GGUF {w:.0f}")
        check(close(bkv, kv), f"{model}: depth {d}: kv bytes {bkv:.0f}, expected {kv:.0f}")
        check(close(bst, st), f"{model}: depth {d}: state bytes {bst:.0f}, expected {st:.0f}")
        check(close(b, bw + bkv + bst), f"{model}: depth {d}: bytes/token = weights + kv + state")
        tps, ms, frac = float(r["value"]), float(r["ms_per_token"]), float(r["fraction"])
        check(close(tps * ms / 1e3, 1.0, 1e-3), f"{model}: depth {d}: tok/s x ms/tok = 1")
        gbps = b / (ms / 1e3) / 1e9
        check(close(frac, gbps / ceiling, 1e-2), f"{model}: depth {d}: fraction {frac} = {gbps:.4g} / {ceiling:.4g}")
        g = [x for x in by.get("decode_gbps", []) if int(x["depth"]) == d]
        check(len(g) == 1 and close(float(g[0]["value"]), gbps, 1e-3), f"{model}: depth {d}: decode_gbps")
    if len(depths) > 1 and len(by.get("decode_bytes", [])) == len(depths):
        kvs = [float(r["kv_bytes"]) for r in sorted(by["decode_bytes"], key=lambda r: int(r["depth"]))]
        check(all(a < b for a, b in zip(kvs, kvs[1:])), f"{model}: KV bytes grow with depth: {kvs}")


def test_usage():
    rc, _, err = run("bench")
    check(rc == 2 and "-m FILE" in err, f"bench without -m: exit {rc}")
    rc, _, _ = run("bench", "-m", os.path.join(DATA, "tiny-dense.bf16.gguf"), "--prefill", "12,x")
    check(rc == 2, f"bench --prefill 12,x: exit {rc}")
    rc, _, _ = run("bench", "-m", os.path.join(DATA, "tiny-dense.bf16.gguf"), "--backend", "tpu")
    check(rc == 2, f"bench --backend tpu: exit {rc}")
    rc, _, _ = run("bench", "-m", os.path.join(DATA, "tiny-dense.bf16.gguf"), "--ctx", "0")
    check(rc == 2, f"bench --ctx 0: exit {rc}")
    rc, _, err = run("bench", "-m", os.path.join(DATA, "missing.gguf"), "--backend", "cpu")
    check(rc == 1 and "missing.gguf" in err, f"bench on a missing file: exit {rc}, {err.strip()[:200]}")


def test_gate():
    rc, out, err = run("gate", "model", "--backend", "cpu", "--fixtures", DATA, timeout=120)
    if rc == 2 and "model" not in out + err.split("usage")[0]:
        check(False, "`memra gate model` is not wired into cli/cmd_gate.c (memra_gate_model in cli/gate_model.h)")
        return
    check(rc == 0, f"gate model --backend cpu on tests/data: exit {rc}\n{out[-2000:]}{err[-500:]}")
    rows = [l for l in out.splitlines() if l.split()[:1] and l.split()[0] in ("tiny-dense", "tiny-moe")]
    files = {l.split()[1] for l in rows}
    want = {f for f in os.listdir(DATA) if f.startswith(("tiny-dense.", "tiny-moe.")) and f.endswith(".gguf")}
    check(files == want, f"gate model ran every tests/data model: {sorted(files)} vs {sorted(want)}")
    for metric in ("prefill", "decode", "greedy"):
        n = sum(1 for l in rows if l.split()[2] == metric and " ok " in l)
        check(n == len(want), f"gate model: {metric} ok for {n} of {len(want)} files")
    # a bar float32 cannot reach: the gate must fail, and say so
    rc, out, _ = run("gate", "model", "--backend", "cpu", "--fixtures", DATA, "--tol", "1e-9", "--only", "tiny-dense.f32",
                     timeout=120)
    check(rc == 1 and "FAIL" in out, f"gate model with --tol 1e-9 fails: exit {rc}")
    rc, _, _ = run("gate", "model", "--backend", "cpu", "--fixtures", os.path.join(DATA, "no-such-dir"))
    check(rc == 1, f"gate model on an empty folder: exit {rc} (nothing checked is a failure)")


def test_ablate():
    """bench/ablate.py: the op rows of a stored CUDA profile, and a CPU run with --ops (a GDN layer's op left out
    saves time; an unknown name is no op and the run still succeeds)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import ablate
    text = """copy bandwidth       3030.3 GB/s   (read + write of 2048 MiB, median of 9)
decode profile at depth 63 (one uncaptured step; launch gaps included):
profile: 340 ops, 9.913 ms from the first op's start to the last op's end
op                        count   total_us      us/op  share
post_norm+ffn gate+up swiglu     64     2965.5      46.34  29.9%
attn_norm+ssm_in (qkv z beta alpha)     48     1592.8      33.18  16.1%
gdn                          48      572.4      11.92   5.8%
output                        1      407.6     407.65   4.1%
decode  depth 0        118.9 tok/s      8.412 ms/tok    16.139 GB/tok    1918.7 GB/s   63.3% of copy
"""  # from bench/results/logs/2026-12-07d-run1-rows.txt (27b), shortened
    ops = ablate.profile_ops(text)
    check(ops == [("post_norm+ffn gate+up swiglu", 64), ("attn_norm+ssm_in (qkv z beta alpha)", 48), ("gdn", 48),
                  ("output", 1)], f"ablate.profile_ops: {ops}")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "ablate.py"), "-m",
                        os.path.join(DATA, "tiny-dense.bf16.gguf"), "--backend", "cpu", "--memra", BIN,
                        "--ops", "gdn,no_such_op"], capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"ablate.py on the CPU: exit {r.returncode}: {r.stderr[-500:]}")
    rows = {l.split()[0]: l.split() for l in r.stdout.splitlines()[2:] if l.split()}
    check(set(rows) == {"gdn", "no_such_op"}, f"ablate.py rows: {r.stdout}")
    if "gdn" in rows:
        check(float(rows["gdn"][3]) > 0, f"ablate.py: the step without gdn is faster: {rows['gdn']}")


def test_timeline():
    """bench/timeline.py on three steps of known launches; bench --timeline on the CPU backend"""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import tempfile

    import timeline
    # step k starts at 1000 k: launch A waits at +0 and exits at +10 (median +6), B waits at +12 and exits at +30,
    # the argmax waits at +31 and exits at +35; the next step's A waits 965 us later (the host's share)
    lines = ["launch,kernel,blocks,arrive_us,wait_us,wait_last_us,exit_median_us,exit_last_us"]
    for k in range(3):
        b = 1000.0 * k
        lines += [f'{3 * k},"k_a<1, 2>",8,{b - 2},{b},{b + 0.5},{b + 6},{b + 10}',
                  f'{3 * k + 1},"k_b",4,{b + 1},{b + 12},{b + 12},{b + 20},{b + 30}',
                  f'{3 * k + 2},"k_argmax",1,{b + 29},{b + 31},{b + 31},{b + 35},{b + 35}']
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        steps = timeline.split_steps(timeline.load(f.name), "k_argmax")
        check(len(steps) == 3 and [len(s) for s in steps] == [3, 3, 3], f"timeline steps: {steps}")
        rows, tot = timeline.step_rows(steps[0], steps[1][0])
        works = [round(w, 3) for _, w, _, _ in rows]
        gaps = [round(g, 3) for _, _, g, _ in rows]
        check(works == [10, 18, 4] and gaps == [2, 1, 965], f"timeline work {works}, gaps {gaps}")
        check(abs(tot["length"] - 1000) < 1e-9 and abs(tot["host"] - 965) < 1e-9 and abs(tot["work"] - 32) < 1e-9
              and abs(tot["gaps"] - 968) < 1e-9, f"timeline totals {tot}")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "timeline.py"), f.name, "--first", "1"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "of which 965.0 after the step's last launch" in r.stdout,
              f"timeline.py: exit {r.returncode}: {r.stdout[-300:]} {r.stderr[-300:]}")
    finally:
        os.unlink(f.name)
    code, out, err = run("bench", "-m", os.path.join(DATA, "tiny-dense.bf16.gguf"), "--backend", "cpu",
                         "--timeline", "/tmp/memra-test-timeline")
    check(code != 0 and "has no kernel timeline" in err and "decode" not in out, f"bench --timeline on the CPU: "
          f"exit {code}: {err[-300:]}")


def main():
    if not os.path.exists(BIN):
        print(f"test_bench: {BIN} is missing (run make)", file=sys.stderr)
        print("test_bench: 0 passed, 1 failed")
        return 1
    test_usage()
    test_bench("tiny-dense.bf16.gguf", [8, 40], [0, 24], 6)
    test_bench("tiny-moe.bf16.gguf", [20], [0, 5], 4)
    test_bench("tiny-dense.bf16.gguf", [8], [0, 24], 4, ["--ctx", "300"])
    test_gate()
    test_ablate()
    test_timeline()
    print(f"test_bench: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
