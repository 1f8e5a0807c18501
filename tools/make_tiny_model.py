#!/usr/bin/env python3
"""Make memra's bundled test data: two tiny random Qwen3.5 models, their GGUF files, float32
references computed by the public transformers implementation, and the small byte-level BPE
tokenizer the models carry.

What it writes (into --out, default tests/data; tests/data/README.md lists every file):
  tiny-dense.f32.gguf, tiny-dense.bf16.gguf        arch qwen35: H=64, 8 layers (GDN,GDN,GDN,attn)x2 +
                                                   1 MTP layer, attn 4 q / 2 kv heads x 32, GDN 2 k /
                                                   4 v heads x 32 (v-head ratio 2), FFN 96, untied
  tiny-moe.bf16.gguf, tiny-moe.Q8_0.gguf           arch qwen35moe: 4 layers (GDN,GDN,GDN,attn) + 1 MTP
                                                   layer, same widths, 4 experts top-2 (FFN 32) +
                                                   shared expert (64) with a sigmoid gate, tied
  tiny-dense.ref.json/.ref.f32, tiny-moe.ref.*     references, same layout as ../shared/fixtures/*.ref.*
  tokenizer-bundled.json                           the HF `tokenizers` file of the bundled vocabulary
  tokenizer-bundled.cases.json                     strings and the ids HF tokenizers gives for them
  qwen35-chat-template.jinja                       the chat template the GGUF files carry

How the files are made, and why this way:
  * The models are built with transformers' own Qwen3.5 classes (Qwen3_5ForCausalLM,
    Qwen3_5MoeForCausalLM) and re-initialised from a fixed seed with realistic scales. Every
    parameter is rounded to bf16, so the F32 and BF16 files hold the same numbers. transformers has
    no MTP module, so the MTP weights (mtp.*) are drawn here, named as the released checkpoints name
    them, and written like the converter writes them; the references do not use them.
  * hf_to_gguf() applies llama.cpp convert_hf_to_gguf.py's transformations as the reference
    document describes them (../shared/docs/reference/qwen35-model.md sections 1-8): norms +1 except
    linear_attn.norm, ssm_a = -exp(A_log), conv1d squeezed, the grouped->tiled V-head reorder, MoE
    gate_up split, MTP renamed to blk.N.nextn.*, the converter's tensor order and its F32/BF16 type
    rules. The Q8_0 file follows llama-quantize (names sorted by layer, ffn_gate_inp and ssm_conv1d
    kept F32, trailing unit dims dropped).
  * The references are transformers in float32 on the CPU: prefill logits of every position with no
    cache, then 16 greedy tokens with the cache (the recurrent/decode path) and the logits that
    chose them, for prompts of 1, 5, 17 and 65 tokens (65 crosses the GDN chunk size of 64), plus
    the hidden states of the 17-token case and a text prompt through the tokenizer. A prompt is
    redrawn while some greedy step is a near tie (top-1 minus top-2 < MIN_GREEDY_MARGIN), and the
    cached steps are checked against one uncached forward.
  * --check-fixtures DIR checks this script against what the real converter wrote: it turns the
    fixture GGUFs back into transformers weights with gguf_to_hf() (the exact inverse of
    hf_to_gguf()) and reproduces the fixtures' reference logits; diffs metadata keys, key order,
    tensor order and per-tensor types of the new files against the fixture files and runs the
    layout rules (check_layout) on both; requantizes the fixture's BF16 MoE to Q8_0 and compares it
    byte for byte with llama-quantize's file; and rebuilds the fixture tokenizer from its GGUF
    vocabulary to reproduce tokenizer-mini.cases.json.

Run:   python3 tools/make_tiny_model.py [--out tests/data] [--check-fixtures ../shared/fixtures]
                                        [--retrain-tokenizer]
Needs: torch, transformers with qwen3_5 (5.x), tokenizers, gguf, numpy. CPU only.
Time:  a few minutes on 2 cores (transformers' GDN runs its slow PyTorch fallback on the CPU).

Determinism: every random draw comes from fixed seeds, so a run reproduces the committed files
byte for byte on the same library versions. The tokenizer is the exception: it is trained on the
docstrings of the running Python's standard library, which differ between Python versions, so by
default the committed tests/data/tokenizer-bundled.json is reused; --retrain-tokenizer trains anew.
"""

import argparse
import ast
import json
import os
import re
import shutil
import sys

import numpy as np
import gguf

SEED = 20260512
N_GREEDY = 16
PROMPT_LENS = (1, 5, 17, 65)
HIDDEN_CASE_LEN = 17
MIN_GREEDY_MARGIN = 0.03   # top-1 minus top-2 logit at every greedy step of a reference case
MAX_PROMPT_DRAWS = 30
TEXT_PROMPT = "The quick brown fox jumps over the lazy dog. \u00dcn\u00efc\u00f6d\u00e9 caf\u00e9!"

N_BPE = 1000        # byte alphabet (256) + merges
VOCAB_SIZE = 1024   # the embedding rows; ids past the tokenizer become [PADn] like the converter
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>",
            "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
ID_ENDOFTEXT, ID_IM_END = N_BPE, N_BPE + 2

# Qwen3.5's split regex (HF form): Qwen2's, with [\p{L}\p{M}]+ as the letter run and \p{M}
# excluded from the punctuation run, so combining marks stay inside words.
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

ROPE = {"mrope_interleaved": True, "mrope_section": [2, 1, 1], "partial_rotary_factor": 0.25,
        "rope_theta": 10000000.0, "rope_type": "default"}
COMMON = dict(vocab_size=VOCAB_SIZE, hidden_size=64, num_hidden_layers=8, num_attention_heads=4,
              num_key_value_heads=2, head_dim=32, linear_conv_kernel_dim=4, linear_key_head_dim=32,
              linear_value_head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
              max_position_embeddings=4096, rms_norm_eps=1e-6, rope_parameters=ROPE,
              bos_token_id=ID_ENDOFTEXT, eos_token_id=ID_IM_END, pad_token_id=ID_ENDOFTEXT)
MODELS = {
    "tiny-dense": dict(arch="qwen35", kind="dense", name="Memra Tiny Dense", seed=SEED,
                       files=("f32", "bf16"),
                       hf=dict(COMMON, intermediate_size=96, tie_word_embeddings=False)),
    "tiny-moe": dict(arch="qwen35moe", kind="moe", name="Memra Tiny Moe", seed=SEED + 1,
                     files=("bf16", "q8_0"),
                     hf=dict(COMMON, num_hidden_layers=4, num_experts=4, num_experts_per_tok=2,
                             moe_intermediate_size=32, shared_expert_intermediate_size=64,
                             tie_word_embeddings=True)),
}
MTP_LAYERS = 1
# Initialisation scales (see init_param). Matrices are N(0, 0.7^2/fan_in) (std 0.06..0.09 here),
# larger than HF's 0.02, so that the layers and not the token's own embedding dominate the final
# hidden state: with tied embeddings a dominant embedding makes greedy decoding repeat the current
# token (gains 0.7/0.5: the MoE repeated its last token in 10 to 14 of 15 greedy steps; 0.7/0.7: in
# 1 to 3). Larger gains (1.0/1.0) stop the repeats entirely but make the random network amplify
# rounding: running the same weights with bf16 activations moved the logits by 0.1 to 0.3 x max
# against 0.03 to 0.13 with 0.7/0.7.
SCALES = dict(embed=0.15, lm_head=0.2, router=0.3, shared_gate=0.15, in_gain=0.7, out_gain=0.7)


# --------------------------------------------------------------------------------------------
# Tokenizer

def stdlib_corpus():
    """English text that every Python install has: the docstrings of the top-level standard
    library modules (sorted, so the order is fixed) and the licence text."""
    import sysconfig
    lib = sysconfig.get_paths()["stdlib"]
    texts = []
    for fn in sorted(os.listdir(lib)):
        if not fn.endswith(".py"):
            continue
        try:
            with open(os.path.join(lib, fn), encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    texts.append(doc)
    lic = os.path.join(lib, "LICENSE.txt")
    if os.path.exists(lic):
        with open(lic, encoding="utf-8") as f:
            texts.append(f.read())
    return texts


def tokenizer_skeleton():
    """A byte-level BPE pipeline configured like Qwen3.5's tokenizer.json: NFC, the qwen35 split
    regex, byte-level mapping without prefix space, byte-level decoder."""
    from tokenizers import Tokenizer, Regex, models, normalizers, pre_tokenizers, decoders
    tok = Tokenizer(models.BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    return tok


def add_specials(tok):
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])


def train_tokenizer():
    from tokenizers import trainers, pre_tokenizers
    tok = tokenizer_skeleton()
    trainer = trainers.BpeTrainer(vocab_size=N_BPE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(stdlib_corpus(), trainer=trainer)
    add_specials(tok)
    if tok.get_vocab_size() != N_BPE + len(SPECIALS):
        sys.exit(f"tokenizer: trained {tok.get_vocab_size()} tokens, want {N_BPE + len(SPECIALS)}")
    for i, s in enumerate(SPECIALS):
        if tok.token_to_id(s) != N_BPE + i:
            sys.exit(f"tokenizer: special {s} got id {tok.token_to_id(s)}")
    return tok


def tokenizer_from_vocab(tokens, merges, types):
    """Rebuild an HF tokenizer from a GGUF vocabulary (tokens, 'a b' merges, token types): NORMAL
    tokens form the BPE vocabulary, CONTROL / USER_DEFINED ones are added tokens, UNUSED rows are
    skipped. Used to check that a GGUF vocabulary alone reproduces the tokenizer cases."""
    from tokenizers import Tokenizer, AddedToken
    skel = json.loads(tokenizer_skeleton().to_str())
    vocab, added = {}, []
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty == gguf.TokenType.NORMAL:
            vocab[t] = i
        elif ty in (gguf.TokenType.CONTROL, gguf.TokenType.USER_DEFINED):
            added.append((i, t, ty == gguf.TokenType.CONTROL))
    skel["model"]["vocab"] = vocab
    skel["model"]["merges"] = [m.split(" ", 1) for m in merges]
    tok = Tokenizer.from_str(json.dumps(skel))
    tok.add_special_tokens([AddedToken(t, special=sp, normalized=False) for _, t, sp in added])
    for i, t, _ in added:
        if tok.token_to_id(t) != i:
            raise ValueError(f"added token {t!r} got id {tok.token_to_id(t)}, want {i}")
    return tok


def gguf_vocab(tok):
    """tokens / token types / merges as the converter writes a gpt2-type vocabulary padded to the
    embedding size: NORMAL (1) for BPE tokens, CONTROL (3) for special added tokens, UNUSED (5)
    for the [PADn] filler rows."""
    t = json.loads(tok.to_str())
    rev = {i: s for s, i in t["model"]["vocab"].items()}
    special = {a["id"]: a["content"] for a in t["added_tokens"]}
    tokens, types = [], []
    for i in range(VOCAB_SIZE):
        if i in special:
            tokens.append(special[i])
            types.append(gguf.TokenType.CONTROL)
        elif i in rev:
            tokens.append(rev[i])
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in t["model"]["merges"]]
    return tokens, types, merges


TOKENIZER_CASE_EXTRA = [
    "It's 2026: we've got 3 cats, they'd say 42!",
    "a  b   c    d\t\te\n\n\nf \n g",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01 \ud55c\uad6d\uc5b4 \u3053\u3093\u306b\u3061\u306f",
    "e\u0301te\u0301 cafe\u0301 n\u0303o\u0308 \u0915\u093f\u0924\u093e\u092c",
    "\U0001f600\U0001f44d\U0001f3fd \u2764\ufe0f \U0001f1e9\U0001f1ea",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 7*6?<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n42<|im_end|>",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n"
    "</tool_call>",
    "    def __init__(self, x=0.5e-3):\n        return {'a': [1, 2]}",
]


def tokenizer_cases(tok, mini_cases_path):
    texts = []
    if mini_cases_path and os.path.exists(mini_cases_path):
        with open(mini_cases_path, encoding="utf-8") as f:
            texts = [c["text"] for c in json.load(f)]
    texts += [t for t in TOKENIZER_CASE_EXTRA if t not in texts]
    return [{"text": s, "ids": tok.encode(s).ids} for s in texts]


# --------------------------------------------------------------------------------------------
# Model construction (transformers)

def hf_classes(kind):
    if kind == "dense":
        from transformers.models.qwen3_5 import modeling_qwen3_5 as m
        from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig as C
        return C, m.Qwen3_5ForCausalLM, m.Qwen3_5DecoderLayer
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as m
    from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig as C
    return C, m.Qwen3_5MoeForCausalLM, m.Qwen3_5MoeDecoderLayer


def init_param(name, shape, gen, torch):
    """One parameter with a realistic scale. Zero-centred RMSNorm weights (HF stores w, computes
    x*(1+w)) get small noise around 0; the gated GDN norm (weight starts at 1) noise around 1;
    A = exp(A_log) in [1, 16] and dt = softplus(dt_bias) in [1e-3, 1e-1] as in the Mamba2 / GDN
    initialisations; matrices N(0, gain^2/fan_in) with fan_in the last axis."""
    def normal(std):
        return torch.randn(shape, generator=gen) * std

    def uniform(lo, hi):
        return lo + (hi - lo) * torch.rand(shape, generator=gen)

    if name.endswith("A_log"):
        return torch.log(uniform(1.0, 16.0))
    if name.endswith("dt_bias"):
        dt = torch.exp(uniform(np.log(1e-3), np.log(1e-1)))
        return dt + torch.log(-torch.expm1(-dt))          # inverse softplus
    if "conv1d" in name:
        return normal(0.3)
    if name.endswith("linear_attn.norm.weight"):
        return 1.0 + normal(0.05)
    if "norm" in name:
        return normal(0.05)
    if name.endswith("embed_tokens.weight"):
        return normal(SCALES["embed"])
    if name.endswith("lm_head.weight"):
        return normal(SCALES["lm_head"])
    if name.endswith("mlp.gate.weight"):                   # MoE router: varied routing
        return normal(SCALES["router"])
    if name.endswith("shared_expert_gate.weight"):
        return normal(SCALES["shared_gate"])
    fan_in = shape[-1]
    out_proj = re.search(r"(o_proj|out_proj|down_proj|mtp\.fc)", name)
    return normal(SCALES["out_gain" if out_proj else "in_gain"] / np.sqrt(fan_in))


def build_model(spec):
    """Returns (model, hf_config dict, state dict with HF names incl. mtp.*) with bf16-exact
    float32 parameters."""
    import torch
    C, CausalLM, DecoderLayer = hf_classes(spec["kind"])
    cfg = C(**spec["hf"])
    torch.manual_seed(spec["seed"])
    model = CausalLM(cfg).float().eval()
    mtp_layer = DecoderLayer(cfg, cfg.layer_types.index("full_attention")).float()
    H = cfg.hidden_size
    gen = torch.Generator().manual_seed(spec["seed"])
    sd = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(init_param(name, tuple(p.shape), gen, torch).to(torch.bfloat16).float())
        if cfg.tie_word_embeddings:
            model.tie_weights()
        for name, t in model.state_dict().items():
            if cfg.tie_word_embeddings and name == "lm_head.weight":
                continue                                   # save_pretrained drops the tied copy
            sd[name] = t.detach().clone()
        mtp_shapes = [("mtp.fc.weight", (H, 2 * H)), ("mtp.pre_fc_norm_embedding.weight", (H,)),
                      ("mtp.pre_fc_norm_hidden.weight", (H,)), ("mtp.norm.weight", (H,))]
        mtp_shapes += [("mtp.layers.0." + n, tuple(p.shape)) for n, p in mtp_layer.named_parameters()]
        for name, shape in mtp_shapes:
            sd[name] = init_param(name, shape, gen, torch).to(torch.bfloat16).float()
    return model, cfg, sd


# --------------------------------------------------------------------------------------------
# HF -> GGUF, as llama.cpp's convert_hf_to_gguf.py does it for Qwen3_5(Moe)ForCausalLM

LAYER_RENAME = {
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "linear_attn.A_log": "ssm_a",
    "linear_attn.conv1d.weight": "ssm_conv1d.weight",
    "linear_attn.dt_bias": "ssm_dt.bias",
    "linear_attn.in_proj_a.weight": "ssm_alpha.weight",
    "linear_attn.in_proj_b.weight": "ssm_beta.weight",
    "linear_attn.in_proj_qkv.weight": "attn_qkv.weight",
    "linear_attn.in_proj_z.weight": "attn_gate.weight",
    "linear_attn.norm.weight": "ssm_norm.weight",
    "linear_attn.out_proj.weight": "ssm_out.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "mlp.gate.weight": "ffn_gate_inp.weight",
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
    "mlp.experts.down_proj": "ffn_down_exps.weight",
    "mlp.experts.gate_up_proj": ("ffn_gate_exps.weight", "ffn_up_exps.weight"),
}
MTP_RENAME = {"mtp.fc.weight": "nextn.eh_proj.weight",
              "mtp.pre_fc_norm_embedding.weight": "nextn.enorm.weight",
              "mtp.pre_fc_norm_hidden.weight": "nextn.hnorm.weight",
              "mtp.norm.weight": "nextn.shared_head_norm.weight"}
# The converter keeps these F32 whatever the output type (besides every 1-D tensor).
FORCE_F32 = ("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight", "ssm_conv1d.weight", "ssm_a",
             "ssm_dt.bias")


def v_tile(x, axis, n_k, r, hd):
    """Grouped -> tiled v-head order along `axis` (length n_k*r*hd): GGUF v-head j*n_k+kh holds
    HF v-head kh*r+j."""
    s = x.shape
    y = x.reshape(s[:axis] + (n_k, r, hd) + s[axis + 1:])
    return np.swapaxes(y, axis, axis + 1).reshape(s)


def v_untile(x, axis, n_k, r, hd):
    s = x.shape
    y = x.reshape(s[:axis] + (r, n_k, hd) + s[axis + 1:])
    return np.swapaxes(y, axis, axis + 1).reshape(s)


def gdn_dims(hf):
    n_k, n_v = hf["linear_num_key_heads"], hf["linear_num_value_heads"]
    return n_k, n_v // n_k, hf["linear_key_head_dim"], hf["linear_value_head_dim"]


def hf_to_gguf(sd, hf):
    """HF state dict (name -> float32 tensor/array, incl. mtp.*) -> [(gguf name, float32 array in
    numpy order, i.e. reversed ggml ne)], in the converter's order (HF names sorted)."""
    n_layer = hf["num_hidden_layers"]
    n_k, r, dk, dv = gdn_dims(hf)
    out = []
    for name in sorted(sd):
        x = np.ascontiguousarray(np.asarray(sd[name], dtype=np.float32))
        if name.startswith("mtp.layers."):
            rest = name[len("mtp.layers."):]
            bid, rest = rest.split(".", 1)
            bid, key = n_layer + int(bid), rest
        elif name.startswith("mtp."):
            bid, key = n_layer, None
        elif name.startswith("model.layers."):
            b, key = name[len("model.layers."):].split(".", 1)
            bid = int(b)
        else:
            bid, key = None, None
        # value transforms (the converter works in float32)
        if r > 1 and key is not None and key.startswith("linear_attn."):
            if key == "linear_attn.in_proj_qkv.weight":
                x = np.concatenate([x[:2 * n_k * dk], v_tile(x[2 * n_k * dk:], 0, n_k, r, dv)], 0)
            elif key == "linear_attn.in_proj_z.weight":
                x = v_tile(x, 0, n_k, r, dv)
            elif key in ("linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight",
                         "linear_attn.A_log", "linear_attn.dt_bias"):
                x = v_tile(x, 0, n_k, r, 1)
            elif key == "linear_attn.conv1d.weight":
                x = x.reshape(x.shape[0], -1)
                x = np.concatenate([x[:2 * n_k * dk], v_tile(x[2 * n_k * dk:], 0, n_k, r, dv)], 0)
            elif key == "linear_attn.out_proj.weight":
                x = v_tile(x, 1, n_k, r, dv)
        if key == "linear_attn.A_log":
            x = -np.exp(x)
        elif key == "linear_attn.conv1d.weight":
            x = x.reshape(x.shape[0], -1)
        # names
        if bid is None:
            g = {"lm_head.weight": "output.weight", "model.embed_tokens.weight": "token_embd.weight",
                 "model.norm.weight": "output_norm.weight"}[name]
        elif name in MTP_RENAME:
            g = f"blk.{bid}.{MTP_RENAME[name]}"
        else:
            g = LAYER_RENAME[key]
            if isinstance(g, tuple):                       # fused experts gate_up: gate first
                n_ff = x.shape[1] // 2
                out.append((f"blk.{bid}.{g[0]}", np.ascontiguousarray(x[:, :n_ff, :])))
                out.append((f"blk.{bid}.{g[1]}", np.ascontiguousarray(x[:, n_ff:, :])))
                continue
            g = f"blk.{bid}.{g}"
        # zero-centred RMSNorm weights are stored as 1+w (in float32); the gated GDN norm is not
        if g.endswith("norm.weight") and not g.endswith("ssm_norm.weight"):
            x = x + np.float32(1.0)
        out.append((g, np.ascontiguousarray(x, dtype=np.float32)))
    return out


def gguf_to_hf(tensors, hf):
    """Exact inverse of hf_to_gguf(): {gguf name: float32 array} -> HF state dict of the trunk
    (mtp.* is dropped: transformers ignores it)."""
    n_layer = hf["num_hidden_layers"]
    n_k, r, dk, dv = gdn_dims(hf)
    inv = {}
    for k, v in LAYER_RENAME.items():
        if isinstance(v, tuple):
            continue
        inv[v] = k
    sd = {}
    fixed = {"output.weight": "lm_head.weight", "token_embd.weight": "model.embed_tokens.weight",
             "output_norm.weight": "model.norm.weight"}
    for g, x in tensors.items():
        x = np.asarray(x, dtype=np.float32)
        if g in fixed:
            name = fixed[g]
            sd[name] = x - 1 if name.endswith("norm.weight") else x
            continue
        m = re.match(r"blk\.(\d+)\.(.+)$", g)
        bid, key = int(m.group(1)), m.group(2)
        if bid >= n_layer or key in ("ffn_gate_exps.weight", "ffn_up_exps.weight"):
            continue
        hk = inv[key]
        if key.endswith("norm.weight") and key != "ssm_norm.weight":
            x = x - 1
        if key == "ssm_a":
            x = np.log(-x)
        if key == "ffn_gate_inp_shexp.weight":
            x = x.reshape(1, -1)
        if r > 1 and hk.startswith("linear_attn."):
            if hk == "linear_attn.in_proj_qkv.weight":
                x = np.concatenate([x[:2 * n_k * dk], v_untile(x[2 * n_k * dk:], 0, n_k, r, dv)], 0)
            elif hk == "linear_attn.in_proj_z.weight":
                x = v_untile(x, 0, n_k, r, dv)
            elif hk in ("linear_attn.in_proj_a.weight", "linear_attn.in_proj_b.weight",
                        "linear_attn.A_log", "linear_attn.dt_bias"):
                x = v_untile(x, 0, n_k, r, 1)
            elif hk == "linear_attn.conv1d.weight":
                x = np.concatenate([x[:2 * n_k * dk], v_untile(x[2 * n_k * dk:], 0, n_k, r, dv)], 0)
            elif hk == "linear_attn.out_proj.weight":
                x = v_untile(x, 1, n_k, r, dv)
        if hk == "linear_attn.conv1d.weight":
            x = x.reshape(x.shape[0], 1, -1)
        sd[f"model.layers.{bid}.{hk}"] = x
    for g in tensors:
        m = re.match(r"blk\.(\d+)\.ffn_gate_exps\.weight$", g)
        if m and int(m.group(1)) < n_layer:
            b = m.group(1)
            sd[f"model.layers.{b}.mlp.experts.gate_up_proj"] = np.concatenate(
                [tensors[g], tensors[f"blk.{b}.ffn_up_exps.weight"]], axis=1).astype(np.float32)
    return sd


# --------------------------------------------------------------------------------------------
# GGUF writing

def gguf_type_for(name, x, ftype):
    if ftype == "f32" or x.ndim == 1 or name.endswith(FORCE_F32):
        return gguf.GGMLQuantizationType.F32
    return gguf.GGMLQuantizationType.BF16


def q8_type_for(name, x):
    """llama-quantize's choice for a Q8_0 target: 2-D+ weights become Q8_0, except the router
    and the conv kernel; vectors and ssm_a/dt stay F32."""
    if x.ndim >= 2 and name.endswith(".weight") and not name.endswith(
            ("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight", "ssm_conv1d.weight")) \
            and x.shape[-1] % 32 == 0:
        return gguf.GGMLQuantizationType.Q8_0
    return gguf.GGMLQuantizationType.F32


def write_gguf(path, spec, hf, tensors, vocab, chat_template, ftype):
    arch = spec["arch"]
    tokens, types, merges = vocab
    w = gguf.GGUFWriter(path, arch)
    if ftype == "q8_0":
        # llama-quantize: tensors sorted by (layer, name) with the non-layer ones first, trailing
        # unit dimensions dropped (ggml_n_dims).
        def order(item):
            m = re.match(r"blk\.(\d+)\.", item[0])
            return (int(m.group(1)) if m else -1, item[0])
        tensors = sorted(tensors, key=order)
    for name, x in tensors:
        if ftype == "q8_0":
            while x.ndim > 1 and x.shape[0] == 1:
                x = x.reshape(x.shape[1:])
            qt = q8_type_for(name, x)
        else:
            qt = gguf_type_for(name, x, ftype)
        if qt == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, np.ascontiguousarray(x, dtype=np.float32))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qt), raw_dtype=qt)
    total, shared, expert, n_exp = w.get_total_parameter_count()
    # metadata, in the order the converter writes it
    w.add_type("model")
    w.add_name(spec["name"])
    w.add_size_label(gguf.size_label(total, shared, expert, n_exp))
    w.add_block_count(hf["num_hidden_layers"] + MTP_LAYERS)
    w.add_context_length(hf["max_position_embeddings"])
    w.add_embedding_length(hf["hidden_size"])
    if spec["kind"] == "dense":
        w.add_feed_forward_length(hf["intermediate_size"])
    w.add_head_count(hf["num_attention_heads"])
    w.add_head_count_kv(hf["num_key_value_heads"])
    sec = list(hf["rope_parameters"]["mrope_section"])
    w.add_rope_dimension_sections(sec + [0] * (4 - len(sec)))
    w.add_rope_freq_base(hf["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(hf["rms_norm_eps"])
    if spec["kind"] == "moe":
        w.add_expert_count(hf["num_experts"])
        w.add_expert_used_count(hf["num_experts_per_tok"])
    w.add_key_length(hf["head_dim"])
    w.add_value_length(hf["head_dim"])
    file_type = {"f32": gguf.LlamaFileType.ALL_F32, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
                 "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[ftype]
    if ftype != "q8_0":
        w.add_file_type(file_type)
    if spec["kind"] == "moe":
        w.add_expert_feed_forward_length(hf["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(hf["shared_expert_intermediate_size"])
    w.add_nextn_predict_layers(MTP_LAYERS)
    w.add_ssm_conv_kernel(hf["linear_conv_kernel_dim"])
    w.add_ssm_state_size(hf["linear_key_head_dim"])
    w.add_ssm_group_count(hf["linear_num_key_heads"])
    w.add_ssm_time_step_rank(hf["linear_num_value_heads"])
    w.add_ssm_inner_size(hf["linear_value_head_dim"] * hf["linear_num_value_heads"])
    w.add_full_attention_interval(4)
    w.add_rope_dimension_count(int(hf["head_dim"] * hf["rope_parameters"]["partial_rotary_factor"]))
    if ftype != "q8_0":
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen35")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(hf["eos_token_id"])
    w.add_pad_token_id(hf["pad_token_id"])
    w.add_bos_token_id(hf["bos_token_id"])
    w.add_add_bos_token(False)
    w.add_chat_template(chat_template)
    if ftype == "q8_0":                                    # llama-quantize appends these last
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
        w.add_file_type(file_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_gguf(path):
    """{name: float32 array in numpy order} of every tensor, dequantized."""
    r = gguf.GGUFReader(path)
    out = {}
    for t in r.tensors:
        shape = tuple(int(s) for s in reversed(t.shape))
        x = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
        out[t.name] = np.asarray(x, dtype=np.float32).reshape(shape)
    return r, out


# --------------------------------------------------------------------------------------------
# References (transformers, float32, CPU)

def greedy(model, ids, n, torch):
    """n tokens chosen greedily with the cache: prefill once, then one token per step (the
    recurrent GDN path), returning the tokens and the logits that chose each."""
    def cache_of(out):                                   # renamed past_key_values -> cache in 5.x
        c = getattr(out, "cache", None)
        return c if c is not None else out.past_key_values

    out = model(input_ids=torch.tensor([ids]), use_cache=True)
    cache = cache_of(out)
    logits = out.logits[0, -1]
    toks, rows = [], []
    for i in range(n):
        t = int(torch.argmax(logits))
        toks.append(t)
        rows.append(logits.clone())
        if i + 1 == n:
            break
        out = model(input_ids=torch.tensor([[t]]), cache=cache, use_cache=True)
        cache = cache_of(out)
        logits = out.logits[0, -1]
    rows = torch.stack(rows)
    # the cached steps must equal one uncached forward over prompt + generated tokens; this also
    # proves the cache really carried the state
    full = model(input_ids=torch.tensor([ids + toks[:-1]]), use_cache=False).logits[0, len(ids) - 1:]
    d = float((full - rows).abs().max() / rows.abs().max())
    if d > 1e-4:
        sys.exit(f"greedy: cached decode differs from the uncached forward by {d:.2e} x max|logit|")
    return toks, rows


def compute_refs(model, tok, name, spec, hf, seed):
    import torch
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    rng = np.random.default_rng(seed)
    blobs, cases, off = [], [], 0

    def put(a):
        nonlocal off
        a = np.ascontiguousarray(a, dtype=np.float32)
        blobs.append(a)
        ref = {"offset": off, "shape": list(a.shape)}
        off += a.size
        return ref

    with torch.no_grad():
        for T in PROMPT_LENS:
            # Redraw the prompt (a few times at most) until no greedy step is a near tie, so an
            # engine whose logits are within tolerance also picks the same tokens.
            for attempt in range(MAX_PROMPT_DRAWS):
                prompt = [int(x) for x in rng.integers(0, N_BPE, size=T)]
                toks, rows = greedy(model, prompt, N_GREEDY, torch)
                top2 = torch.topk(rows, 2, dim=1).values
                margin = float((top2[:, 0] - top2[:, 1]).min())
                if margin >= MIN_GREEDY_MARGIN:
                    break
            case = {"prompt": prompt}
            out = model(input_ids=torch.tensor([prompt]), use_cache=False,
                        output_hidden_states=(T == HIDDEN_CASE_LEN))
            case["prefill_logits"] = put(out.logits[0].numpy())
            case["greedy"] = toks
            case["greedy_logits"] = put(rows.numpy())
            case["greedy_min_margin"] = round(margin, 4)
            if T == HIDDEN_CASE_LEN:
                hs = torch.stack([h[0] for h in out.hidden_states])
                case["hidden_states"] = put(hs.numpy())
                # say whether transformers' last entry already went through the final norm
                normed = model.model.norm(hs[-1])
                d_pre = float((model.lm_head(hs[-1]) - out.logits[0]).abs().max())
                d_post = float((model.lm_head(normed) - out.logits[0]).abs().max())
                case["hidden_states_last"] = "after final norm" if d_pre < d_post else \
                    "before final norm"
            cases.append(case)
        ids = tok.encode(TEXT_PROMPT).ids
        toks, _ = greedy(model, ids, N_GREEDY, torch)
    import transformers
    ref = {
        "fixture": name, "kind": spec["kind"],
        "gguf": [f"{name}.{f}.gguf" for f in spec["files"] if f != "q8_0"],
        "data": f"{name}.ref.f32",
        "reference": f"transformers {transformers.__version__} float32, torch {torch.__version__}, "
                     f"CPU; made by tools/make_tiny_model.py",
        "hf_config": json.loads(model.config.to_json_string()),
        "cases": cases,
        "text_case": {"text": TEXT_PROMPT, "ids": ids, "greedy": toks,
                      "greedy_text": tok.decode(toks, skip_special_tokens=False)},
    }
    ref["hf_config"]["mtp_num_hidden_layers"] = MTP_LAYERS
    return ref, np.concatenate([b.reshape(-1) for b in blobs])


# --------------------------------------------------------------------------------------------
# The converter's layout rules, checked against any qwen35/qwen35moe GGUF. Written from the
# reference document and confirmed on the converter-made fixtures (--check-fixtures, and
# tests/py/test_tiny_data.py when ../shared/fixtures exists). Shapes are ggml ne order.

def gguf_meta(r):
    """The metadata values the layout depends on, from a gguf.GGUFReader."""
    f = r.fields
    arch = f["general.architecture"].contents()
    g = lambda k, d=None: f[f"{arch}.{k}"].contents() if f"{arch}.{k}" in f else d
    m = dict(arch=arch, n_block=g("block_count"), n_nextn=g("nextn_predict_layers", 0),
             H=g("embedding_length"), n_head=g("attention.head_count"),
             n_kv=g("attention.head_count_kv"), hd=g("attention.key_length"),
             hd_v=g("attention.value_length"), d_conv=g("ssm.conv_kernel"), d_k=g("ssm.state_size"),
             n_k=g("ssm.group_count"), n_v=g("ssm.time_step_rank"), d_inner=g("ssm.inner_size"),
             interval=g("full_attention_interval", 4), FF=g("feed_forward_length"),
             E=g("expert_count"), FFX=g("expert_feed_forward_length"),
             FFS=g("expert_shared_feed_forward_length"),
             V=len(f["tokenizer.ggml.tokens"].data) if "tokenizer.ggml.tokens" in f else None,
             file_type=f["general.file_type"].contents() if "general.file_type" in f else None)
    m["n_trunk"] = m["n_block"] - m["n_nextn"]
    return m


def expected_tensors(m):
    """{tensor name: ne tuple} the converter writes for this metadata. output.weight is listed
    with a None shape marker of optional (tied models omit it)."""
    H, n_v, d_inner = m["H"], m["n_v"], m["d_inner"]
    conv_dim = 2 * m["n_k"] * m["d_k"] + d_inner
    t = {"token_embd.weight": (H, m["V"]), "output.weight": (H, m["V"]),
         "output_norm.weight": (H,)}
    for i in range(m["n_block"]):
        b = f"blk.{i}."
        t[b + "attn_norm.weight"] = (H,)
        t[b + "post_attention_norm.weight"] = (H,)
        mtp = i >= m["n_trunk"]
        if not mtp and (i + 1) % m["interval"] != 0:
            t.update({b + "attn_qkv.weight": (H, conv_dim), b + "attn_gate.weight": (H, d_inner),
                      b + "ssm_alpha.weight": (H, n_v), b + "ssm_beta.weight": (H, n_v),
                      b + "ssm_a": (n_v,), b + "ssm_dt.bias": (n_v,),
                      b + "ssm_conv1d.weight": (m["d_conv"], conv_dim),
                      b + "ssm_norm.weight": (d_inner // n_v,), b + "ssm_out.weight": (d_inner, H)})
        else:
            t.update({b + "attn_q.weight": (H, 2 * m["n_head"] * m["hd"]),
                      b + "attn_k.weight": (H, m["n_kv"] * m["hd"]),
                      b + "attn_v.weight": (H, m["n_kv"] * m["hd_v"]),
                      b + "attn_output.weight": (m["n_head"] * m["hd_v"], H),
                      b + "attn_q_norm.weight": (m["hd"],), b + "attn_k_norm.weight": (m["hd"],)})
        if m["arch"] == "qwen35moe":
            E, FFX, FFS = m["E"], m["FFX"], m["FFS"]
            t.update({b + "ffn_gate_inp.weight": (H, E), b + "ffn_gate_exps.weight": (H, FFX, E),
                      b + "ffn_up_exps.weight": (H, FFX, E), b + "ffn_down_exps.weight": (FFX, H, E),
                      b + "ffn_gate_shexp.weight": (H, FFS), b + "ffn_up_shexp.weight": (H, FFS),
                      b + "ffn_down_shexp.weight": (FFS, H), b + "ffn_gate_inp_shexp.weight": (H, 1)})
        else:
            t.update({b + "ffn_gate.weight": (H, m["FF"]), b + "ffn_up.weight": (H, m["FF"]),
                      b + "ffn_down.weight": (m["FF"], H)})
        if mtp:
            t.update({b + "nextn.eh_proj.weight": (2 * H, H), b + "nextn.enorm.weight": (H,),
                      b + "nextn.hnorm.weight": (H,), b + "nextn.shared_head_norm.weight": (H,)})
    return t


def expected_type(name, ne, file_type):
    """The ggml type name the converter (F32/BF16) or llama-quantize (Q8_0) gives a tensor, or
    None for file types these rules do not cover."""
    nd = len([d for d in ne if d != 1]) if len(ne) > 1 else 1
    if file_type == 0:
        return "F32"
    if file_type == 32:
        return "F32" if len(ne) == 1 or name.endswith(FORCE_F32) else "BF16"
    if file_type == 7:
        keep = name.endswith(("ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight",
                              "ssm_conv1d.weight")) or not name.endswith(".weight")
        return "F32" if nd < 2 or keep else "Q8_0"
    return None


def check_layout(path):
    """Problems (strings) of one GGUF against the converter's rules; [] when it follows them."""
    r = gguf.GGUFReader(path)
    m = gguf_meta(r)
    want = expected_tensors(m)
    got = {t.name: (tuple(int(d) for d in t.shape), t.tensor_type.name) for t in r.tensors}
    bad = []
    for name in sorted(set(want) | set(got)):
        if name not in got:
            if name != "output.weight":
                bad.append(f"{name}: missing")
            continue
        if name not in want:
            bad.append(f"{name}: not expected")
            continue
        ne, ty = got[name]
        w = want[name]
        # llama-quantize drops trailing unit dims (ggml_n_dims)
        if ne != w and not (w[-1] == 1 and ne == w[:-1]):
            bad.append(f"{name}: shape {ne}, want {w}")
        et = expected_type(name, ne, m["file_type"])
        if et is not None and ty != et:
            bad.append(f"{name}: type {ty}, want {et}")
    return bad


# --------------------------------------------------------------------------------------------
# Checks against the fixtures the real converter made

def tensor_pattern(name):
    return re.sub(r"^blk\.\d+\.", "blk.N.", name)


def describe(path):
    """Key set and {tensor name pattern: set of (number of dims, type)} of a GGUF file; the
    shapes themselves are checked against the metadata by check_layout()."""
    r = gguf.GGUFReader(path)
    keys = {k for k in r.fields if not k.startswith("GGUF.")}
    pats = {}
    for t in r.tensors:
        pats.setdefault(tensor_pattern(t.name), set()).add((len(t.shape), t.tensor_type.name))
    return r, keys, pats


def compare_to_fixture(mine, fixture, log):
    _, k1, p1 = describe(mine)
    _, k2, p2 = describe(fixture)
    ok = True
    # bos/add_bos are written on purpose (the released Qwen3.5 files carry them); the fixtures
    # were converted from a config without bos_token_id.
    extra_ok = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token"}
    for k in sorted(k1 ^ k2):
        if k in extra_ok and k in k1:
            continue
        if k in ("general.finetune", "general.basename"):
            continue
        log(f"  key differs: {k} ({'only mine' if k in k1 else 'only fixture'})")
        ok = False
    for p in sorted(set(p1) | set(p2)):
        if p1.get(p) != p2.get(p):
            log(f"  tensor {p}: mine {sorted(p1.get(p, []))} fixture {sorted(p2.get(p, []))}")
            ok = False
    # the converter's tensor order and key order must be reproduced too; layers are compared by
    # role (trunk layer i, or the MTP layer) over the names both files have
    r1, r2 = gguf.GGUFReader(mine), gguf.GGUFReader(fixture)

    def roles(r):
        n_trunk = gguf_meta(r)["n_trunk"]
        out = []
        for t in r.tensors:
            m = re.match(r"blk\.(\d+)\.(.*)$", t.name)
            if m and int(m.group(1)) >= n_trunk:
                out.append("blk.MTP." + m.group(2))
            else:
                out.append(t.name)
        return out
    o1, o2 = roles(r1), roles(r2)
    both = set(o1) & set(o2)
    if [n for n in o1 if n in both] != [n for n in o2 if n in both] or len(both) < len(o1) // 2:
        log("  tensor order differs")
        ok = False
    if [k for k in r1.fields if k not in extra_ok] != list(r2.fields):
        log("  key order differs")
        ok = False
    return ok


def check_fixture_roundtrip(fixdir, log):
    """Load a fixture GGUF (made by the real converter) back into transformers through
    gguf_to_hf() and reproduce the fixture's reference logits: proves the inverse mapping, and so
    hf_to_gguf(), matches the converter for every tensor that affects the forward pass. Also
    checks hf_to_gguf(gguf_to_hf(file)) == file for the trunk tensors."""
    import torch
    ok = True
    for name, kind, path in [("qwen35-tiny-dense", "dense", "qwen35-tiny-dense.f32.gguf"),
                             ("qwen35-tiny-moe", "moe", "qwen35-tiny-moe.bf16.gguf")]:
        with open(os.path.join(fixdir, name + ".ref.json")) as f:
            ref = json.load(f)
        data = np.fromfile(os.path.join(fixdir, name + ".ref.f32"), dtype="<f4")
        hf = dict(ref["hf_config"])
        C, CausalLM, _ = hf_classes(kind)
        # the saved config minus the bookkeeping keys transformers adds when it writes one
        cfg = C(**{k: v for k, v in hf.items() if k not in (
            "architectures", "dtype", "transformers_version", "model_type")})
        model = CausalLM(cfg).float().eval()
        _, tensors = read_gguf(os.path.join(fixdir, path))
        sd = gguf_to_hf(tensors, hf)
        if cfg.tie_word_embeddings:
            sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
        missing, unexpected = model.load_state_dict(
            {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in sd.items()}, strict=False)
        if missing or unexpected:
            log(f"  {name}: missing {missing} unexpected {unexpected}")
            ok = False
        worst = 0.0
        with torch.no_grad():
            for case in ref["cases"][:4]:
                o = case["prefill_logits"]
                want = data[o["offset"]:o["offset"] + int(np.prod(o["shape"]))].reshape(o["shape"])
                got = model(input_ids=torch.tensor([case["prompt"]]), use_cache=False).logits[0].numpy()
                worst = max(worst, float(np.max(np.abs(got - want)) / np.max(np.abs(want))))
        good = worst < 1e-4
        ok &= good
        log(f"  {name}: fixture GGUF -> gguf_to_hf -> transformers reproduces the fixture "
            f"prefill logits to {worst:.2e} x max|ref| ({'ok' if good else 'FAIL'})")
        # forward map of the inverse gives back the file's trunk tensors
        if cfg.tie_word_embeddings:
            sd.pop("lm_head.weight")
        back = dict(hf_to_gguf(sd, hf))
        worst = 0.0
        for g, x in back.items():
            y = tensors[g]
            worst = max(worst, float(np.max(np.abs(x - y.reshape(x.shape)))) if x.size else 0.0)
            if x.shape != y.shape:
                log(f"  {name}: {g} shape {x.shape} vs file {y.shape}")
                ok = False
        trunk = [g for g in tensors if not re.match(rf"blk\.{hf['num_hidden_layers']}\.", g)]
        if sorted(back) != sorted(trunk):
            log(f"  {name}: tensor sets differ: {sorted(set(back) ^ set(trunk))}")
            ok = False
        log(f"  {name}: hf_to_gguf(gguf_to_hf(file)) == file for {len(back)} trunk tensors "
            f"(max abs diff {worst:.1e}, from the log/exp of ssm_a)")
        ok &= worst < 1e-5
    return ok


def check_fixture_q8(fixdir, log):
    """gguf.quants' Q8_0 must reproduce llama-quantize byte for byte: requantize the fixture's
    BF16 MoE tensors and compare with the fixture's Q8_0 file."""
    rb = gguf.GGUFReader(os.path.join(fixdir, "qwen35-tiny-moe.bf16.gguf"))
    rq = {t.name: t for t in gguf.GGUFReader(os.path.join(fixdir, "qwen35-tiny-moe.Q8_0.gguf")).tensors}
    n = same = 0
    for t in rb.tensors:
        tq = rq[t.name]
        if tq.tensor_type != gguf.GGMLQuantizationType.Q8_0:
            continue
        x = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float32)
        q = gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)
        n += 1
        same += q.tobytes() == np.asarray(tq.data).tobytes()
    log(f"  gguf.quants Q8_0 reproduces llama-quantize on {same}/{n} fixture tensors byte for byte")
    return n > 0 and same == n


def check_fixture_tokenizer(fixdir, log):
    r = gguf.GGUFReader(os.path.join(fixdir, "qwen35-tiny-dense.bf16.gguf"))
    f = r.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    f = r.fields["tokenizer.ggml.merges"]
    merges = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    tok = tokenizer_from_vocab(tokens, merges, types)
    with open(os.path.join(fixdir, "tokenizer-mini.cases.json"), encoding="utf-8") as fh:
        cases = json.load(fh)
    bad = [c["text"] for c in cases if tok.encode(c["text"]).ids != c["ids"]]
    for t in bad:
        log(f"  tokenizer-mini: {t!r} differs")
    log(f"  fixture vocabulary + this script's pipeline reproduce {len(cases) - len(bad)}/"
        f"{len(cases)} tokenizer-mini cases")
    # the bundled vocabulary is laid out like the fixture's: bytes, merges, specials, [PADn]
    return not bad


# --------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(root, "tests", "data"))
    ap.add_argument("--fixtures", default=os.path.join(root, "..", "shared", "fixtures"),
                    help="where qwen35-chat-template.jinja and tokenizer-mini.cases.json are read "
                         "from when --out has no copy yet")
    ap.add_argument("--check-fixtures", metavar="DIR", help="also run the checks against the "
                    "converter-made fixtures in DIR")
    ap.add_argument("--retrain-tokenizer", action="store_true")
    args = ap.parse_args()
    out = args.out
    os.makedirs(out, exist_ok=True)
    log = lambda s: print(s, flush=True)

    # chat template: a copy lives in --out so the data stands alone
    tpl_path = os.path.join(out, "qwen35-chat-template.jinja")
    if not os.path.exists(tpl_path):
        shutil.copyfile(os.path.join(args.fixtures, "qwen35-chat-template.jinja"), tpl_path)
    with open(tpl_path, encoding="utf-8") as f:
        chat_template = f.read()

    from tokenizers import Tokenizer
    tok_path = os.path.join(out, "tokenizer-bundled.json")
    if args.retrain_tokenizer or not os.path.exists(tok_path):
        log("training the tokenizer on the standard library's docstrings")
        tok = train_tokenizer()
        tok.save(tok_path, pretty=False)
    tok = Tokenizer.from_file(tok_path)
    vocab = gguf_vocab(tok)
    cases_path = os.path.join(out, "tokenizer-bundled.cases.json")
    mini = os.path.join(args.fixtures, "tokenizer-mini.cases.json")
    if not os.path.exists(mini) and os.path.exists(cases_path):
        mini = cases_path                                  # reuse the committed strings
    cases = tokenizer_cases(tok, mini)
    with open(cases_path, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    log(f"tokenizer: {tok.get_vocab_size()} tokens, {len(vocab[2])} merges, {len(cases)} cases")

    for name, spec in MODELS.items():
        model, cfg, sd = build_model(spec)
        hf = json.loads(cfg.to_json_string())
        tensors = hf_to_gguf({k: v.numpy() for k, v in sd.items()}, hf)
        for ft in spec["files"]:
            path = os.path.join(out, f"{name}.{ft if ft != 'q8_0' else 'Q8_0'}.gguf")
            write_gguf(path, spec, hf, tensors, vocab, chat_template, ft)
            log(f"wrote {path} ({os.path.getsize(path)} bytes)")
        # the written files must give back exactly the model transformers runs
        for ft in spec["files"]:
            if ft == "q8_0":
                continue
            path = os.path.join(out, f"{name}.{ft}.gguf")
            _, back = read_gguf(path)
            hsd = gguf_to_hf(back, hf)
            ref_sd = {k: v.numpy() for k, v in model.state_dict().items()}
            for k, v in hsd.items():
                d = np.max(np.abs(v.reshape(ref_sd[k].shape) - ref_sd[k]))
                tol = 1e-6 if k.endswith("A_log") else 0.0
                if d > tol:
                    sys.exit(f"{path}: {k} does not round-trip (max diff {d})")
            log(f"  {path}: every trunk tensor round-trips to the transformers weights")
        ref, data = compute_refs(model, tok, name, spec, hf, spec["seed"] + 100)
        with open(os.path.join(out, f"{name}.ref.json"), "w") as f:
            json.dump(ref, f, indent=1)
            f.write("\n")
        data.astype("<f4").tofile(os.path.join(out, f"{name}.ref.f32"))
        lg = [data[c["prefill_logits"]["offset"]:][:c["prefill_logits"]["shape"][0] * VOCAB_SIZE]
              for c in ref["cases"]]
        allp = np.concatenate(lg).reshape(-1, VOCAB_SIZE)
        p = np.exp(allp - allp.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        log(f"  refs: logit std {allp.std():.2f}, mean max prob {p.max(1).mean():.3f}, "
            f"greedy of the 65-token case {ref['cases'][-1]['greedy']}")
        log(f"  text case greedy: {ref['text_case']['greedy_text']!r}")

    ok = True
    if args.check_fixtures:
        fx = args.check_fixtures
        log("checking against the converter-made fixtures in " + fx)
        ok &= check_fixture_roundtrip(fx, log)
        ok &= check_fixture_tokenizer(fx, log)
        ok &= check_fixture_q8(fx, log)
        for mine, fixture in [("tiny-dense.f32.gguf", "qwen35-tiny-dense.f32.gguf"),
                              ("tiny-dense.bf16.gguf", "qwen35-tiny-dense.bf16.gguf"),
                              ("tiny-moe.bf16.gguf", "qwen35-tiny-moe.bf16.gguf"),
                              ("tiny-moe.Q8_0.gguf", "qwen35-tiny-moe.Q8_0.gguf")]:
            good = compare_to_fixture(os.path.join(out, mine), os.path.join(fx, fixture), log)
            for path in (os.path.join(out, mine), os.path.join(fx, fixture)):
                bad = check_layout(path)
                for b in bad:
                    log(f"  {os.path.basename(path)}: {b}")
                good &= not bad
            log(f"  {mine} vs {fixture}: keys and tensor name/shape/type patterns "
                f"{'match' if good else 'DIFFER'}")
            ok &= good
    total = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
                if os.path.isfile(os.path.join(out, f)))
    log(f"total size of {out}: {total} bytes")
    if not ok:
        sys.exit("some checks failed")


if __name__ == "__main__":
    main()
