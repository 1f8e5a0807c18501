#!/usr/bin/env python3
"""Re-renders every committed case of tests/data/chat_cases.json with Jinja2
(transformers' chat-template environment, from tools/make_chat_cases.py) from
the template files (../shared/fixtures when present, else the copies in
tests/data) and checks the committed expectations still hold, so the file
test_chat.c trusts cannot drift from the templates. Also checks the copies in
tests/data equal the fixtures and the GGUFs' tokenizer.chat_template, and
that the json.dumps/str() expectations are what Python prints.
Prints "test_chat_template: N passed, N failed"."""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import make_chat_cases as mk  # noqa: E402

passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what}")


def gguf_chat_template(path):
    """tokenizer.chat_template of a GGUF, found by its key (the gguf
    package's reader takes a minute on the 151k-token vocabulary)."""
    key = b"tokenizer.chat_template"
    with open(path, "rb") as f:
        data = f.read()
    at = data.find(struct.pack("<Q", len(key)) + key)
    if at < 0:
        return None
    at += 8 + len(key)
    vtype, n = struct.unpack_from("<IQ", data, at)
    if vtype != 8:  # GGUF_TYPE_STRING
        return None
    return data[at + 12:at + 12 + n].decode("utf-8")


def main():
    os.chdir(ROOT)
    with open(os.path.join(mk.DATA, "chat_cases.json"), encoding="utf-8") as f:
        doc = json.load(f)
    templates = mk.load_templates()
    r = mk.Renderer(templates)

    cases = doc["cases"]
    check(len(cases) >= 40, f"only {len(cases)} conversations")
    covered = set()
    for c in cases:
        check(len(c["covers"]) > 0, f"{c['name']}: no branches listed")
        covered.update(c["covers"])
        for x in c["renders"]:
            got = r.render(x["template"], c["messages"], c["tools"], x["add_generation_prompt"],
                           x["enable_thinking"], x["hf_normalize"], x["add_vision_id"])
            label = (f"{c['name']} [{x['template']} agp={x['add_generation_prompt']} "
                     f"think={x['enable_thinking']} hf={x['hf_normalize']} vid={x['add_vision_id']}]")
            if "text" in x:
                check(got.get("text") == x["text"], f"{label}: committed text differs from a fresh render")
            else:
                check("error" in got and got.get("raised") == x.get("raised"),
                      f"{label}: committed error {x['error']!r}, fresh render {got!r:.200}")
    check(covered == set(doc["branches"]), "branch list does not match the cases' covers")
    for kind in ("qwen35", "qwen3", "chatml"):
        check(any(x["template"] == kind and "text" in x for c in cases for x in c["renders"]),
              f"no successful {kind} render")

    for e in doc["tojson"]:
        v = e["value"]
        check(json.dumps(v, ensure_ascii=False) == e["json"] and str(v) == e["str"], f"tojson value {v!r}")

    for kind, h in doc["detect_hashes"].items():
        check(f"0x{mk.detect_hash(templates[kind]):016x}" == h, f"detect hash of {kind}")

    # the standalone copies must be the fixtures' templates, and those the GGUFs'
    for kind in ("qwen35", "qwen3"):
        name = mk.TEMPLATE_FILES[kind]
        with open(os.path.join(mk.DATA, name), encoding="utf-8") as f:
            copy = f.read()
        fx = os.path.join(mk.FIXTURES, name)
        if os.path.exists(fx):
            with open(fx, encoding="utf-8") as f:
                check(f.read() == copy, f"tests/data/{name} differs from ../shared/fixtures/{name}")
    ggufs = {"qwen3-vocab.gguf": "qwen3", "qwen35-tiny-dense.f32.gguf": "qwen35"}
    for fname, kind in ggufs.items():
        path = os.path.join(mk.FIXTURES, fname)
        if not os.path.exists(path):
            continue
        with open(os.path.join(mk.DATA, mk.TEMPLATE_FILES[kind]), encoding="utf-8") as f:
            check(gguf_chat_template(path) == f.read(),
                  f"{fname}: tokenizer.chat_template differs from the {kind} template")

    print(f"test_chat_template: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
