#!/usr/bin/env python3
"""Rebuild a transformers Qwen3.5 model from a fixture GGUF and run it, to tell memra bugs apart
from questions about how a fixture reference was made.

The GGUF holds the converter's transformations (norms stored as 1+w, ssm_a = -exp(A_log), v heads
in tiled order, ...); make_tiny_model.gguf_to_hf() undoes them, and the config comes from the
fixture's NAME.ref.json "hf_config". The rebuild is only trusted after --check has reproduced the
fixture's stored prefill logits and greedy tokens.

Run (from the repo root):
  python3 tools/hf_from_gguf.py qwen35-tiny-dense --check
      rebuild, then compare every case's prefill logits and greedy tokens with the reference
  python3 tools/hf_from_gguf.py qwen35-tiny-dense --text-case [--pad-token 0]
      greedy on the text_case ids, plain and (with --pad-token) through generate() with that
      pad id, which makes transformers infer attention_mask = (ids != pad) and mask those
      positions out; the fixtures' text_case greedy was made that way with pad id 0 ("!")
  python3 tools/hf_from_gguf.py qwen35-tiny-dense --tokens 1,2,3 [--greedy 16] [-o logits.npy]
      plain greedy (prefill, then one token per step with the cache) on any ids; -o saves the
      prefill logits of every position ([T, vocab] float32) for a diff against `memra eval --all`
Options: --fixtures DIR (default ../shared/fixtures), --gguf FILE (default the first reference
file the ref.json names).
Needs: torch, transformers with qwen3_5, gguf, numpy. CPU only; transformers' GDN runs its slow
PyTorch fallback, so a 100-token case takes tens of seconds.
"""

import argparse
import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_model as mtm  # noqa: E402  (shares read_gguf / gguf_to_hf / greedy)


def build(fixdir, name, gguf_file):
    """-> (ref.json dict, ref.f32 array, transformers model in float32 eval mode)."""
    import torch
    with open(os.path.join(fixdir, name + ".ref.json")) as f:
        ref = json.load(f)
    data = np.fromfile(os.path.join(fixdir, ref["data"]), dtype="<f4")
    hf = dict(ref["hf_config"])
    C, CausalLM, _ = mtm.hf_classes(ref["kind"])
    keep = {k: v for k, v in hf.items() if k in C.__dataclass_fields__ or k in (
        "rope_parameters", "tie_word_embeddings", "pad_token_id", "bos_token_id", "eos_token_id")}
    for k in ("architectures", "dtype", "transformers_version", "model_type"):
        keep.pop(k, None)
    cfg = C(**keep)
    model = CausalLM(cfg).float().eval()
    _, tensors = mtm.read_gguf(os.path.join(fixdir, gguf_file or ref["gguf"][0]))
    sd = mtm.gguf_to_hf(tensors, hf)
    if cfg.tie_word_embeddings:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = model.load_state_dict(
        {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}, strict=False)
    if missing or unexpected:
        sys.exit(f"{name}: state dict does not fit: missing {missing}, unexpected {unexpected}")
    return ref, data, model


def check(ref, data, model):
    """Every case: prefill logits (max|d|/max|ref|) and greedy tokens vs the reference."""
    import torch
    ok = True
    for case in ref["cases"]:
        o = case["prefill_logits"]
        want = data[o["offset"]:o["offset"] + int(np.prod(o["shape"]))].reshape(o["shape"])
        got = model(input_ids=torch.tensor([case["prompt"]]), use_cache=False).logits[0].numpy()
        rel = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        toks, _ = mtm.greedy(model, case["prompt"], len(case["greedy"]), torch)
        good = rel < 1e-4 and toks == case["greedy"]
        ok &= good
        print(f"T={len(case['prompt']):3d}: prefill {rel:.2e} x max|ref|, greedy "
              f"{'equal' if toks == case['greedy'] else 'DIFFERS'} ({'ok' if good else 'FAIL'})")
    return ok


def text_case(ref, model, pad):
    import torch
    tc = ref["text_case"]
    ids, want = tc["ids"], tc["greedy"]
    toks, _ = mtm.greedy(model, ids, len(want), torch)
    print(f"reference greedy:         {want}")
    print(f"plain greedy:             {toks} ({'equal' if toks == want else 'differs'})")
    if pad is not None:
        out = model.generate(torch.tensor([ids]), max_new_tokens=len(want), do_sample=False,
                             pad_token_id=pad)[0, len(ids):].tolist()
        print(f"generate(pad_token_id={pad}): {out} ({'equal' if out == want else 'differs'}; "
              f"masked prompt positions: {[i for i, t in enumerate(ids) if t == pad]})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name", help="fixture name, e.g. qwen35-tiny-dense")
    ap.add_argument("--fixtures", default=os.path.join("..", "shared", "fixtures"))
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--text-case", action="store_true")
    ap.add_argument("--pad-token", type=int, default=None)
    ap.add_argument("--tokens", default=None)
    ap.add_argument("--greedy", type=int, default=16)
    ap.add_argument("-o", dest="out", default=None)
    a = ap.parse_args()
    import torch
    warnings.filterwarnings("ignore")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    ref, data, model = build(a.fixtures, a.name, a.gguf)
    ok = True
    with torch.no_grad():
        if a.check:
            ok &= check(ref, data, model)
        if a.text_case:
            text_case(ref, model, a.pad_token)
        if a.tokens:
            ids = [int(t) for t in a.tokens.split(",")]
            logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].numpy()
            if a.out:
                np.save(a.out, logits)
            toks, _ = mtm.greedy(model, ids, a.greedy, torch)
            print(f"last-position argmax {int(logits[-1].argmax())} ({logits[-1].max():.4f}); "
                  f"greedy {toks}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
