"""Encoder throughput: memra vs HF tokenizers, single-threaded, same text, same run.

    python3 bench/bench_tokenizer.py [--memra build/memra] [--repeats N] [--write bench/results/tokenizer.md]

Text: the ~5 MB deterministic corpus of tests/py/tokenizer_corpus.py (2000
documents: stdlib source, many scripts, emoji, long runs, invalid UTF-8), plus
its stdlib-source part alone. Each document is encoded on its own by both.
memra is timed inside the process (`memra tokenize --bench N`: encode only,
model load excluded); HF is timed around Tokenizer.encode with
RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false. Both start with a cold
word cache: the first pass is reported for each, and memra's repeated passes
(warm cache) separately. The figure that matters is the ratio.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))

from tokenizer_corpus import _stdlib_sources, make_corpus  # noqa: E402


def memra_mbps(memra, gguf, docs, repeats, tmp):
    path = os.path.join(tmp, "docs.bin")
    with open(path, "wb") as f:
        f.write(b"\0".join(docs))
    out = subprocess.run([memra, "tokenize", "-m", gguf, "--bench", str(repeats), "-f", path],
                         capture_output=True, check=True).stdout.decode().split()
    kv = dict(zip(out[::2], out[1::2]))
    return float(kv["MB/s"]), int(kv["ids"])


def hf_mbps(tok, docs):
    texts = [d.decode("utf-8", "replace") for d in docs]
    n_bytes = sum(map(len, docs))
    t0 = time.perf_counter()
    n_ids = 0
    for t in texts:
        n_ids += len(tok.encode(t, add_special_tokens=False).ids)
    return n_bytes / (time.perf_counter() - t0) / 1e6, n_ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memra", default=os.path.join(ROOT, "build", "memra"))
    ap.add_argument("--fixtures", default=os.environ.get("MEMRA_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures")))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write", help="also write the results as markdown to this file")
    args = ap.parse_args()

    from tokenizers import Tokenizer
    import tokenizers

    gguf = os.path.join(args.fixtures, "qwen3-vocab.gguf")
    docs = make_corpus(target_bytes=5_000_000, n_docs=2000, seed=1234)
    code = b"".join(open(p, "rb").read() for p in _stdlib_sources()[:400]).replace(b"\0", b"")[:2_000_000]
    code_docs = [code[i:i + 2500] for i in range(0, len(code), 2500)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, d in [("corpus (2000 docs)", docs), ("stdlib source (2500-byte docs)", code_docs)]:
            tok = Tokenizer.from_file(os.path.join(args.fixtures, "qwen3-tokenizer.json"))  # cold cache
            hf, hf_ids = hf_mbps(tok, d)
            m1, m_ids = memra_mbps(args.memra, gguf, d, 1, tmp)
            mn, _ = memra_mbps(args.memra, gguf, d, args.repeats, tmp)
            rows.append((label, sum(map(len, d)) / 1e6, hf, m1, mn, hf_ids == m_ids))
            print("%-32s %.2f MB  hf %.2f MB/s  memra %.2f MB/s (x%.1f)  memra warm %.2f MB/s  ids equal: %s"
                  % (label, rows[-1][1], hf, m1, m1 / hf, mn, hf_ids == m_ids), flush=True)
    if args.write:
        cpu = "unknown"
        try:
            for ln in open("/proc/cpuinfo"):
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        with open(args.write, "w") as f:
            f.write("# Tokenizer encode throughput: memra vs HF tokenizers\n\n")
            f.write("Command: `python3 %s`\n\n" % " ".join(os.path.relpath(a, ROOT) if a.endswith(".py") else a
                                                          for a in sys.argv))
            f.write("Machine: %s, %d CPUs, load average %.1f at the end of the run; HF tokenizers %s, single-threaded (RAYON_NUM_THREADS=1,"
                    " TOKENIZERS_PARALLELISM=false); vocabulary: ../shared/fixtures/qwen3-vocab.gguf"
                    " / qwen3-tokenizer.json. Each document encoded on its own; both start with a cold"
                    " word cache (first pass); \"memra warm\" is the mean of %d passes in one process.\n\n"
                    % (cpu, os.cpu_count(), os.getloadavg()[0], tokenizers.__version__, args.repeats))
            f.write("| text | MB | HF MB/s | memra MB/s | memra / HF | memra warm MB/s | same id count |\n")
            f.write("|---|---|---|---|---|---|---|\n")
            for label, mb, hf, m1, mn, same in rows:
                f.write("| %s | %.2f | %.2f | %.2f | %.1fx | %.2f | %s |\n" % (label, mb, hf, m1, m1 / hf, mn,
                                                                             "yes" if same else "NO"))
        print("wrote", args.write)


if __name__ == "__main__":
    main()
