"""Deterministic multi-script test corpus for the tokenizer cross-checks.

Used by tests/py/test_tokenizer_hf.py and bench/bench_tokenizer.py. Every
document is bytes (some contain invalid UTF-8 on purpose); the reference side
sees doc.decode("utf-8", "replace"), which is memra's documented handling of
invalid input. Documents never contain NUL (the batch format separates them
with NUL); NUL inside text is checked separately.
"""

import os
import random
import sys
import sysconfig

# Unicode ranges per script: (first, last) inclusive, all assigned long ago
# (Unicode <= 6) so that tables of different Unicode versions agree.
SCRIPTS = {
    "latin": [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0xFF), (0x100, 0x17F), (0x180, 0x24F), (0x1E00, 0x1EFF)],
    "greek": [(0x391, 0x3A9), (0x3B1, 0x3C9), (0x1F00, 0x1F15), (0x1F20, 0x1F45)],
    "cyrillic": [(0x410, 0x44F), (0x400, 0x40F), (0x450, 0x45F), (0x490, 0x4FF)],
    "arabic": [(0x621, 0x64A), (0x64B, 0x652), (0x660, 0x669), (0x671, 0x6D3)],
    "hebrew": [(0x5D0, 0x5EA), (0x5B0, 0x5BD), (0x5C1, 0x5C2)],
    "devanagari": [(0x905, 0x939), (0x93E, 0x94D), (0x901, 0x903), (0x966, 0x96F)],
    "thai": [(0xE01, 0xE30), (0xE31, 0xE3A), (0xE40, 0xE4E), (0xE50, 0xE59)],
    "cjk": [(0x4E00, 0x9FA5), (0x3041, 0x3096), (0x30A1, 0x30FA), (0x3001, 0x3003), (0xFF01, 0xFF5E)],
    "hangul": [(0xAC00, 0xD7A3), (0x1100, 0x1112), (0x1161, 0x1175), (0x11A8, 0x11C2)],
}
COMBINING = [chr(c) for c in range(0x300, 0x370)] + ["\u20dd", "\u0483", "\u093c", "\u0e48", "\u05b7"]
EMOJI = [chr(c) for c in list(range(0x1F600, 0x1F64F)) + list(range(0x1F300, 0x1F3FA)) + list(range(0x1F680, 0x1F6C5))]
SKIN = [chr(c) for c in range(0x1F3FB, 0x1F400)]
ZWJ_SEQS = [
    "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",
    "\U0001F469\u200d\u2764\ufe0f\u200d\U0001F48B\u200d\U0001F468",
    "\U0001F3F3\ufe0f\u200d\U0001F308",
    "\U0001F9D1\U0001F3FD\u200d\U0001F4BB",
    "\U0001F44D\U0001F3FF",
    "\U0001F1EF\U0001F1F5\U0001F1FA\U0001F1F8",
    "1\ufe0f\u20e3",
]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n", "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085",
          "\u2003", "\u200b", "\u180e", "\u202f", "\x0b", "\x0c", "\ufeff"]
WORDS = ["the", "The", "THE", "don't", "I'M", "we'LL", "they've", "she'D", "it's", "IT'S", "o'Re", "x'ſ", "'s",
         "hello", "world", "naïve", "café", "Ünïcödé", "résumé", "e\u0301", "A\u030a", "\u212b", "\ufb01", "Ａ１",
         "ﬀ", "½", "²", "Ⅻ", "٣", "۴", "१२", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|im_sta",
         "<tool_call>", "<|endoftext|>", "<|fim_pad|>", "<<|im_end|>>", "http://x.y/z?a=1&b=2", "foo_bar",
         "x+=1;", "a->b", "C++", "#!/bin/sh", "$HOME", "@user", "ÀÀÀ", "ǅ", "ß", "İ", "ſ"]


def _rand_char(rng, script):
    lo, hi = rng.choice(SCRIPTS[script])
    return chr(rng.randint(lo, hi))


def _word(rng, script):
    n = rng.choice([1, 2, 3, 4, 5, 6, 8, 12])
    w = "".join(_rand_char(rng, script) for _ in range(n))
    if rng.random() < 0.15:
        w += "".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 3)))
    return w


def _segment(rng):
    kind = rng.random()
    out = []
    if kind < 0.55:
        script = rng.choice(list(SCRIPTS))
        for _ in range(rng.randint(5, 60)):
            r = rng.random()
            if r < 0.6:
                out.append(_word(rng, script))
            elif r < 0.7:
                out.append(rng.choice(WORDS))
            elif r < 0.78:
                out.append(rng.choice(".,;:!?()[]{}\"'-—…«»¿¡·、。「」"))
            elif r < 0.85:
                out.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
            elif r < 0.92:
                out.append(rng.choice(EMOJI) + (rng.choice(SKIN) if rng.random() < 0.3 else ""))
            else:
                out.append(rng.choice(ZWJ_SEQS))
            out.append(rng.choice(SPACES) if rng.random() < 0.25 else " ")
    elif kind < 0.65:
        out.append(" " * rng.randint(1, 300) + rng.choice(["", "x", "\n", "\t\t"]))
        out.append("\n" * rng.randint(1, 20) + "\t" * rng.randint(0, 5) + "\r\n" * rng.randint(0, 3))
    elif kind < 0.72:
        out.append("".join(rng.choice("0123456789") for _ in range(rng.randint(10, 400))))
        out.append(rng.choice([" ", ".", ",", "e-", "\n"]))
    elif kind < 0.8:
        # long runs without spaces: one huge pre-token (exercises long-word BPE)
        script = rng.choice(["cjk", "latin", "thai", "hangul", "devanagari"])
        out.append("".join(_rand_char(rng, script) for _ in range(rng.randint(50, 3000))))
    elif kind < 0.88:
        out.append("".join(rng.choice(COMBINING) for _ in range(rng.randint(1, 40))))
        out.append(_word(rng, "latin"))
    else:
        # any code point of the BMP and SMP (no surrogates, no NUL)
        for _ in range(rng.randint(5, 80)):
            c = rng.randint(1, 0x1FFFF)
            if 0xD800 <= c <= 0xDFFF:
                continue
            out.append(chr(c))
            if rng.random() < 0.3:
                out.append(rng.choice(SPACES))
    return "".join(out)


def _invalid_bytes(rng):
    choices = [b"\xff", b"\xfe", b"\xc0\xaf", b"\xe2\x82", b"\xe2\x82 ", b"\xf0\x9f\x98", b"\xed\xa0\x80",
               b"\xf4\x90\x80\x80", b"\x80\x80", b"\xc3", b"\xe0\x80\xaf", b"\xf8\x88\x80\x80\x80", b"\xc2\x41",
               b"\xf0\x9f", b"\xef\xbf\xbd", b"\xe1\xa0", b"\xed\x9f\xbf"]
    return rng.choice(choices)


def _stdlib_sources():
    root = sysconfig.get_paths()["stdlib"]
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "__pycache__", "test", "idlelib"))
        for n in sorted(names):
            if n.endswith(".py"):
                files.append(os.path.join(d, n))
    return sorted(files)


def make_corpus(target_bytes=5_200_000, n_docs=2000, seed=1234):
    """Returns a list of byte strings (documents) totalling about target_bytes."""
    rng = random.Random(seed)
    per_doc = target_bytes // n_docs
    code = []
    for path in _stdlib_sources():
        try:
            with open(path, "rb") as f:
                code.append(f.read().replace(b"\0", b""))
        except OSError:
            continue
        if sum(map(len, code)) > target_bytes:
            break
    code_blob = b"".join(code)
    docs = []
    for i in range(n_docs):
        parts = []
        size = 0
        want = rng.randint(per_doc // 3, per_doc * 4 // 3)
        while size < want:
            r = rng.random()
            if r < 0.4 and code_blob:
                start = rng.randrange(len(code_blob))
                piece = code_blob[start:start + min(rng.randint(100, 3000), want - size + 1)]
            elif r < 0.97:
                piece = _segment(rng).encode("utf-8")
            else:
                piece = _invalid_bytes(rng)
            parts.append(piece)
            size += len(piece)
        doc = b"".join(parts).replace(b"\0", b"")
        # slices of code may cut a character in half: that is invalid input too
        docs.append(doc)
    return docs


if __name__ == "__main__":
    docs = make_corpus()
    sys.stdout.write("%d documents, %d bytes\n" % (len(docs), sum(map(len, docs))))
