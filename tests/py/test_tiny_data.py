#!/usr/bin/env python3
"""Consistency of the bundled test data in tests/data (made by tools/make_tiny_model.py).

Cheap and torch-free (CI installs gguf, numpy and tokenizers only). Checked:
  (a) every tiny-*.gguf opens with gguf.GGUFReader and follows the converter's layout rules
      (tensor names, shapes from the metadata, ggml types per file type; make_tiny_model.py's
      check_layout), with block_count - nextn_predict_layers trunk layers, the MTP layer as
      blk.N.nextn.*, and the value rules: ssm_a < 0, norms stored as 1+w (mean near 1), the
      tokenizer keys (gpt2 / qwen35, specials CONTROL, [PADn] UNUSED, add_bos false);
  (b) the same rules accept the converter-made fixtures in ../shared/fixtures (when present),
      and reject a file that breaks them (a norm stored BF16, ssm_a positive): the rules can fail;
  (c) the F32 and BF16 dense files hold identical values (the weights are bf16-exact), and the
      Q8_0 MoE file dequantizes to the BF16 file within Q8_0's rounding;
  (d) each NAME.ref.json: the blobs tile NAME.ref.f32 exactly, shapes agree with the GGUF
      metadata, greedy[i] is the argmax of greedy_logits[i], the cached first greedy step agrees
      with the uncached prefill, and the prompts are in the vocabulary;
  (e) the GGUF vocabulary equals tokenizer-bundled.json, the chat template equals
      qwen35-chat-template.jinja, and HF tokenizers reproduces tokenizer-bundled.cases.json.
Prints "test_tiny_data: N passed, N failed" and exits non-zero on failure.
"""
import glob
import importlib.util
import json
import os
import sys
import tempfile

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
FIXTURES = os.environ.get("MEMRA_FIXTURES") or os.path.join(ROOT, "..", "shared", "fixtures")

spec = importlib.util.spec_from_file_location("make_tiny_model",
                                              os.path.join(ROOT, "tools", "make_tiny_model.py"))
mtm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mtm)

passed = 0
failed = 0


def check(ok, label, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {label}{': ' + detail if detail else ''}")


def strings(r, key):
    f = r.fields[key]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def tensors_of(r):
    out = {}
    for t in r.tensors:
        shape = tuple(int(s) for s in reversed(t.shape))
        x = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
        out[t.name] = np.asarray(x, dtype=np.float32).reshape(shape)
    return out


def check_model_file(path):
    name = os.path.basename(path)
    try:
        r = gguf.GGUFReader(path)
    except Exception as e:  # noqa: BLE001 - any reader failure is the finding
        check(False, f"{name}: opens", str(e))
        return None
    check(True, f"{name}: opens")
    bad = mtm.check_layout(path)
    check(not bad, f"{name}: converter layout", "; ".join(bad[:8]))
    m = mtm.gguf_meta(r)
    trunk = 8 if m["arch"] == "qwen35" else 4
    check(m["n_nextn"] == 1 and m["n_trunk"] == trunk, f"{name}: block_count - nextn = {trunk} trunk layers",
          f"block_count {m['n_block']} nextn {m['n_nextn']}")
    names = {t.name for t in r.tensors}
    mtp = f"blk.{m['n_trunk']}."
    check(all(mtp + s in names for s in ("nextn.eh_proj.weight", "nextn.enorm.weight",
                                         "nextn.hnorm.weight", "nextn.shared_head_norm.weight",
                                         "attn_q.weight")), f"{name}: MTP layer is {mtp}nextn.*")
    check(not any(n.startswith(f"blk.{m['n_block']}.") for n in names), f"{name}: no layer past block_count")
    gdn = [i for i in range(m["n_trunk"]) if f"blk.{i}.ssm_a" in names]
    check(gdn == [i for i in range(m["n_trunk"]) if (i + 1) % m["interval"] != 0],
          f"{name}: GDN layers follow full_attention_interval", str(gdn))
    check(m["n_v"] > m["n_k"], f"{name}: v-head ratio > 1 (exercises the tiled reorder)")
    t = tensors_of(r)
    a = np.concatenate([v.ravel() for k, v in t.items() if k.endswith("ssm_a")])
    check(bool(np.all(a < 0)), f"{name}: ssm_a = -exp(A_log) < 0", f"max {a.max()}")
    norms = [k for k in t if k.endswith("norm.weight") and not k.endswith("ssm_norm.weight")]
    means = [float(t[k].mean()) for k in norms]
    check(all(0.8 < x < 1.2 for x in means), f"{name}: zero-centred norms stored as 1+w",
          f"means {min(means):.3f}..{max(means):.3f}")
    f = r.fields
    check(f["tokenizer.ggml.model"].contents() == "gpt2" and f["tokenizer.ggml.pre"].contents() == "qwen35",
          f"{name}: tokenizer gpt2 / qwen35")
    toks = strings(r, "tokenizer.ggml.tokens")
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    check(len(toks) == len(types) == t["token_embd.weight"].shape[0], f"{name}: vocab size = embedding rows")
    ctrl = {toks[i] for i, ty in enumerate(types) if ty == gguf.TokenType.CONTROL}
    check(ctrl == set(mtm.SPECIALS), f"{name}: special tokens are CONTROL", str(sorted(ctrl)))
    check(all((ty == gguf.TokenType.UNUSED) == s.startswith("[PAD") for s, ty in zip(toks, types)),
          f"{name}: [PADn] rows are UNUSED")
    eos, pad = f["tokenizer.ggml.eos_token_id"].contents(), f["tokenizer.ggml.padding_token_id"].contents()
    bos = f["tokenizer.ggml.bos_token_id"].contents()
    check(toks[eos] == "<|im_end|>" and toks[pad] == "<|endoftext|>" and toks[bos] == "<|endoftext|>",
          f"{name}: eos/pad/bos ids", f"{eos} {pad} {bos}")
    check(f["tokenizer.ggml.add_bos_token"].contents() is False, f"{name}: add_bos_token false")
    return r, m, t


def check_rules_can_fail():
    """A file that breaks the rules must be flagged: write a small copy of the dense file with a
    norm stored BF16 and one positive ssm_a."""
    src = gguf.GGUFReader(os.path.join(DATA, "tiny-dense.f32.gguf"))
    t = tensors_of(src)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "broken.gguf")
        w = gguf.GGUFWriter(path, "qwen35")
        for k, fld in src.fields.items():
            if k.startswith("GGUF.") or k == "general.architecture":
                continue
            vt = fld.types[0]
            if vt == gguf.GGUFValueType.ARRAY:
                w.add_key_value(k, fld.contents(), vt, sub_type=fld.types[-1])
            else:
                w.add_key_value(k, fld.contents(), vt)
        for ti in src.tensors:
            x = t[ti.name]
            if ti.name == "blk.0.attn_norm.weight":
                w.add_tensor(ti.name, gguf.quants.quantize(x, gguf.GGMLQuantizationType.BF16),
                             raw_dtype=gguf.GGMLQuantizationType.BF16)
            elif ti.name == "blk.0.ssm_dt.bias":
                continue                                   # a missing tensor
            else:
                w.add_tensor(ti.name, x)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        bad = mtm.check_layout(path)
    check(any("blk.0.attn_norm.weight: type BF16" in b for b in bad), "rules flag a BF16 norm", str(bad))
    check(any("blk.0.ssm_dt.bias: missing" in b for b in bad), "rules flag a missing tensor", str(bad))


def check_refs(name, meta, vocab):
    with open(os.path.join(DATA, name + ".ref.json")) as f:
        ref = json.load(f)
    data = np.fromfile(os.path.join(DATA, ref["data"]), dtype="<f4")
    blobs = []
    for c in ref["cases"]:
        for k in ("prefill_logits", "greedy_logits", "hidden_states"):
            if k in c:
                blobs.append((c[k]["offset"], int(np.prod(c[k]["shape"]))))
    blobs.sort()
    pos, tiled = 0, True
    for off, n in blobs:
        tiled &= off == pos
        pos = off + n
    check(tiled and pos == data.size, f"{name}: blobs tile ref.f32", f"{pos} floats vs file {data.size}")
    check(all(os.path.exists(os.path.join(DATA, g)) for g in ref["gguf"]), f"{name}: listed GGUFs exist")
    hf = ref["hf_config"]
    check(hf["hidden_size"] == meta["H"] and hf["vocab_size"] == vocab and
          hf["num_hidden_layers"] == meta["n_trunk"], f"{name}: hf_config matches the GGUF")
    get = lambda b: data[b["offset"]:b["offset"] + int(np.prod(b["shape"]))].reshape(b["shape"])
    lens = []
    for c in ref["cases"]:
        T = len(c["prompt"])
        lens.append(T)
        lab = f"{name} case T={T}"
        check(all(0 <= i < vocab for i in c["prompt"]), f"{lab}: prompt ids in vocab")
        pl, gl = get(c["prefill_logits"]), get(c["greedy_logits"])
        check(pl.shape == (T, vocab) and gl.shape == (len(c["greedy"]), vocab), f"{lab}: shapes")
        check(bool(np.all(np.isfinite(pl)) and np.all(np.isfinite(gl))), f"{lab}: finite")
        check(list(np.argmax(gl, axis=1)) == c["greedy"], f"{lab}: greedy = argmax(greedy_logits)")
        d = float(np.max(np.abs(pl[-1] - gl[0])) / np.max(np.abs(pl[-1])))
        check(d < 1e-4, f"{lab}: cached first step = uncached last prefill row", f"{d:.2e}")
        check(float(pl.std()) > 0.3, f"{lab}: logits not degenerate", f"std {pl.std():.3f}")
        if "hidden_states" in c:
            hs = get(c["hidden_states"])
            check(hs.shape == (meta["n_trunk"] + 1, T, meta["H"]), f"{lab}: hidden_states shape")
    check(max(lens) > 64, f"{name}: a prompt crosses the GDN chunk size 64", str(lens))


def check_vocab_and_template(r):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("note: tokenizers not installed, skipping the tokenizer cases")
        return
    tok = Tokenizer.from_file(os.path.join(DATA, "tokenizer-bundled.json"))
    tokens, _, merges = mtm.gguf_vocab(tok)
    check(strings(r, "tokenizer.ggml.tokens") == tokens, "GGUF tokens = tokenizer-bundled.json")
    check(strings(r, "tokenizer.ggml.merges") == merges, "GGUF merges = tokenizer-bundled.json")
    with open(os.path.join(DATA, "qwen35-chat-template.jinja"), encoding="utf-8") as f:
        tpl = f.read()
    check(r.fields["tokenizer.chat_template"].contents() == tpl, "GGUF chat template = qwen35-chat-template.jinja")
    with open(os.path.join(DATA, "tokenizer-bundled.cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    bad = [c["text"] for c in cases if tok.encode(c["text"]).ids != c["ids"]]
    check(not bad and len(cases) >= 20, "tokenizer-bundled.cases.json reproduces", repr(bad[:3]))
    # the same pipeline rebuilt from the GGUF vocabulary alone gives the same ids
    f = r.fields["tokenizer.ggml.token_type"]
    tok2 = mtm.tokenizer_from_vocab(strings(r, "tokenizer.ggml.tokens"), strings(r, "tokenizer.ggml.merges"),
                                    [int(f.parts[i][0]) for i in f.data])
    bad = [c["text"] for c in cases if tok2.encode(c["text"]).ids != c["ids"]]
    check(not bad, "GGUF vocabulary alone reproduces the cases", repr(bad[:3]))


def main():
    files = sorted(glob.glob(os.path.join(DATA, "tiny-*.gguf")))
    check(len(files) == 4, "four bundled GGUF files", str([os.path.basename(p) for p in files]))
    loaded = {}
    for p in files:
        res = check_model_file(p)
        if res:
            loaded[os.path.basename(p)] = res
    if os.path.isdir(FIXTURES):
        for p in sorted(glob.glob(os.path.join(FIXTURES, "qwen35-*.gguf"))):
            bad = mtm.check_layout(p)
            check(not bad, f"fixture {os.path.basename(p)} follows the same rules", "; ".join(bad[:5]))
    else:
        print(f"note: {FIXTURES} not found, skipping the rule check on the fixtures")
    if "tiny-dense.f32.gguf" in loaded:
        check_rules_can_fail()
    pairs = [("tiny-dense.f32.gguf", "tiny-dense.bf16.gguf", 0.0), ("tiny-moe.bf16.gguf", "tiny-moe.Q8_0.gguf", None)]
    for a, b, tol in pairs:
        if a not in loaded or b not in loaded:
            continue
        ta, tb = loaded[a][2], loaded[b][2]
        check(sorted(ta) == sorted(tb), f"{a} / {b}: same tensors")
        worst = 0.0
        for k in ta:
            x, y = ta[k], tb.get(k)
            if y is None:
                continue
            y = y.reshape(x.shape)
            err = np.abs(x - y)
            if tol is None:
                # Q8_0: q = round(x/d) with d = max|block|/127, dequantized with d rounded to
                # fp16, so |error| <= d/2 + 127*|d16 - d| <= d * (1/2 + 127/2048)
                rows = x.reshape(-1, x.shape[-1])
                if rows.shape[-1] % 32 == 0 and not np.array_equal(x, y):
                    blk = np.abs(rows.reshape(rows.shape[0], -1, 32)).max(-1, keepdims=True)
                    lim = blk / 127 * (0.5 + 127 / 2048) * 1.001 + 1e-7
                    e = err.reshape(rows.shape[0], -1, 32)
                    worst = max(worst, float((e / lim).max()))
                else:
                    worst = max(worst, float(err.max()) * 1e6)
            else:
                worst = max(worst, float(err.max()))
        if tol is None:
            check(worst <= 1.0, f"{a} / {b}: Q8_0 within its rounding", f"worst {worst:.3f} of the bound")
        else:
            check(worst == 0.0, f"{a} / {b}: identical values (bf16-exact weights)", f"max diff {worst}")
    for name, f in (("tiny-dense", "tiny-dense.f32.gguf"), ("tiny-moe", "tiny-moe.bf16.gguf")):
        if f in loaded:
            check_refs(name, loaded[f][1], loaded[f][2]["token_embd.weight"].shape[0])
    if "tiny-dense.bf16.gguf" in loaded:
        check_vocab_and_template(loaded["tiny-dense.bf16.gguf"][0])
    print(f"test_tiny_data: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
