#!/usr/bin/env python3
"""Writes the fuzzer's seed corpus (tests/fuzz/corpus/): a few small GGUF
files made with the gguf Python package (an implementation independent of
memra's), and damaged copies of them. Each file is under 64 KB.
Run from the repo root: python3 tests/fuzz/make_corpus.py"""
import os
import struct

import numpy as np
import gguf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(name, build, alignment=None):
    path = os.path.join(OUT, name)
    w = gguf.GGUFWriter(path, "qwen35")
    if alignment:
        w.data_alignment = alignment
        w.add_uint32("general.alignment", alignment)
    build(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "rb") as f:
        return f.read()


def every_type(w):
    w.add_uint8("t.u8", 7)
    w.add_int8("t.i8", -7)
    w.add_uint16("t.u16", 700)
    w.add_int16("t.i16", -700)
    w.add_uint32("qwen35.block_count", 2)
    w.add_int32("t.i32", -70000)
    w.add_float32("t.f32", 0.5)
    w.add_bool("t.bool", True)
    w.add_uint64("t.u64", 1 << 40)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float64("t.f64", 0.25)
    w.add_string("t.str", "hello")
    w.add_array("tokenizer.ggml.tokens", ["a", "b", "<|x|>", ""])
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, 1.5])
    w.add_tensor("token_embd.weight", np.arange(4 * 32, dtype=np.float32).reshape(4, 32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(32, dtype=np.float32))
    w.add_tensor("blk.0.ffn_up_exps.weight", np.zeros((2, 8, 32), dtype=np.float16))
    w.add_tensor("four", np.zeros((2, 2, 2, 8), dtype=np.float32))


def quantized(w):
    w.add_uint32("qwen35.expert_count", 4)
    w.add_uint32("qwen35.expert_used_count", 2)
    q8 = np.zeros((4, 34), dtype=np.uint8)  # 4 rows of one Q8_0 block each
    w.add_tensor("q8", q8, raw_shape=q8.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    q4k = np.zeros((2, 144), dtype=np.uint8)  # 2 rows of one Q4_K block each
    w.add_tensor("q4k", q4k, raw_shape=q4k.shape, raw_dtype=gguf.GGMLQuantizationType.Q4_K)


def main():
    os.makedirs(OUT, exist_ok=True)
    a = write("valid-every-type.gguf", every_type)
    b = write("valid-quant-align64.gguf", quantized, alignment=64)
    write("valid-empty.gguf", lambda w: None)
    damaged = {
        "cut-header.gguf": a[:20],
        "cut-kv.gguf": a[:400],
        "cut-data.gguf": a[: len(a) - 100],
        "v2.gguf": a[:4] + struct.pack("<I", 2) + a[8:],
        "huge-kv-count.gguf": a[:16] + struct.pack("<Q", 2**64 - 1) + a[24:],
        "bad-type.gguf": a[:24 + 8 + len(b"general.architecture")] + struct.pack("<I", 13) + a[24 + 8 + 20 + 4:],
        "unknown-tensor-type.gguf": b.replace(struct.pack("<I", 8) + struct.pack("<Q", 0), struct.pack("<I", 99) + struct.pack("<Q", 0), 1),
    }
    for name, data in damaged.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    for n in sorted(os.listdir(OUT)):
        size = os.path.getsize(os.path.join(OUT, n))
        assert size < 65536, n
        print(f"{n}: {size} bytes")


if __name__ == "__main__":
    main()
