/* mkmodel: full-size Qwen3.5 GGUF files with random weights.
 *
 * The file has the tensor names, shapes, metadata keys (with their value
 * types and order) and per-tensor weight types that llama.cpp's converter
 * (convert_hf_to_gguf.py, --outtype bf16) and quantizer (llama-quantize)
 * write for the chosen model size, so that loaders, benchmarks and memory
 * planning can be exercised at real scale without downloading weights. The
 * vocabulary is copied from a real GGUF (tokenizer.* keys) and padded to the
 * model's embedding rows with "[PADn]" UNUSED tokens, as the converter pads.
 *
 * Weights are random but sane: matrices ~N(0, 0.02) (quantized types get
 * random valid blocks with small finite scales), norm weights ~1, ssm_a < 0,
 * small dt bias and conv weights, so a forward pass gives finite logits.
 * Every generation unit (one quant block, or 256 float elements) is seeded by
 * (seed, tensor index, unit index): the bytes do not depend on the thread count.
 *
 * memra_mkmodel_plan_init gives the tensor directory without any I/O (for
 * --dry-run and tests); memra_mkmodel_write plans, copies the vocabulary and
 * streams the data (two 64 MiB buffers: memory use does not grow with the
 * model). */
#ifndef MEMRA_MODEL_MKMODEL_H
#define MEMRA_MODEL_MKMODEL_H

#include <stdint.h>

#include "base/status.h"

/* Weight mixes, named as llama-quantize names the file types. */
typedef enum memra_mkmodel_mix {
    MEMRA_MKMODEL_BF16 = 0,   /* converter --outtype bf16 (general.file_type 32) */
    MEMRA_MKMODEL_Q8_0 = 1,   /* llama-quantize Q8_0 (7) */
    MEMRA_MKMODEL_Q4_K_M = 2, /* llama-quantize Q4_K_M (15) */
    MEMRA_MKMODEL_IQ4_XS = 3, /* llama-quantize IQ4_XS without imatrix (30) */
    MEMRA_MKMODEL_NVFP4 = 4,  /* llama-quantize NVFP4 (39) */
    MEMRA_MKMODEL_MIX_COUNT
} memra_mkmodel_mix;

/* Hyperparameters of one model size (spec §10). */
typedef struct memra_mkmodel_preset {
    const char *name;       /* "0.8b" ("test-*" presets are hidden from --help) */
    const char *label;      /* general.size_label */
    int is_moe;             /* qwen35moe */
    int tied;               /* no output.weight: the head reuses token_embd */
    int64_t n_embd;         /* H */
    int32_t n_trunk;        /* decoder layers without MTP */
    int32_t n_head, n_kv;   /* full-attention heads */
    int32_t head_dim;       /* key_length = value_length */
    int32_t n_rot;          /* rope.dimension_count */
    int32_t sections[4];    /* rope.dimension_sections */
    int32_t d_k, n_k, n_v;  /* GDN: ssm.state_size, ssm.group_count, ssm.time_step_rank; d_v = d_k */
    int64_t n_ff;           /* dense FFN width */
    int32_t n_expert, n_expert_used;
    int64_t n_ff_exp, n_ff_shexp;
    int64_t n_vocab;        /* embedding rows (the vocabulary is padded to this) */
    uint32_t n_ctx_train;   /* context_length */
} memra_mkmodel_preset;

typedef struct memra_mkmodel_opts {
    const char *preset;     /* preset name, required */
    memra_mkmodel_mix mix;  /* default MEMRA_MKMODEL_BF16 */
    const char *vocab_path; /* GGUF with tokenizer.* keys; required by memra_mkmodel_write */
    uint64_t seed;          /* default 0 */
    int no_mtp;             /* 1: drop the MTP layer (block_count = trunk, no nextn key) */
    int n_threads;          /* <= 0: all online CPUs */
    int progress;           /* 1: a progress line on stderr while writing */
    int64_t n_vocab;        /* > 0: embedding rows instead of the preset's (tests: vocabulary padding) */
} memra_mkmodel_opts;

/* What the generator puts into a tensor. */
typedef enum memra_mkmodel_role {
    MEMRA_MKMODEL_ROLE_MATRIX = 0, /* ~N(0, 0.02) */
    MEMRA_MKMODEL_ROLE_NORM,       /* ~1 (RMSNorm weights, stored 1+w) */
    MEMRA_MKMODEL_ROLE_SSM_A,      /* -exp(U(-1, 1)) */
    MEMRA_MKMODEL_ROLE_DT_BIAS,    /* U(-0.5, 0.5) */
    MEMRA_MKMODEL_ROLE_CONV,       /* ~N(0, 0.1) */
} memra_mkmodel_role;

typedef struct memra_mkmodel_tensor {
    char name[64];
    uint32_t n_dims;
    int64_t ne[4];     /* ne[0] contiguous; unused dims 1 */
    uint32_t type;     /* ggml type id */
    memra_mkmodel_role role;
    int32_t layer;     /* blk.N, or -1 */
    uint64_t nbytes;
} memra_mkmodel_tensor;

typedef struct memra_mkmodel_plan {
    memra_mkmodel_preset p;
    memra_mkmodel_mix mix;
    const char *arch;               /* "qwen35" or "qwen35moe" */
    int32_t n_layer;                /* block_count (trunk + MTP) */
    int32_t n_nextn;                /* 0 or 1 */
    uint32_t file_type;             /* general.file_type */
    memra_mkmodel_tensor *tensors;  /* [n_tensors] in file order */
    int64_t n_tensors;
    uint64_t n_params;              /* all tensors */
    uint64_t n_params_trunk;        /* without the MTP layer */
    uint64_t data_bytes;            /* tensor bytes, without alignment padding */
} memra_mkmodel_plan;

/* Looks up a preset by name (NULL if unknown); memra_mkmodel_preset_at walks
 * the table (NULL past the end). */
const memra_mkmodel_preset *memra_mkmodel_preset_find(const char *name);
const memra_mkmodel_preset *memra_mkmodel_preset_at(int i);

/* "bf16", "q8_0", "q4_k_m", "iq4_xs", "nvfp4" (case-insensitive); -1 if unknown. */
int memra_mkmodel_mix_parse(const char *s);
const char *memra_mkmodel_mix_name(memra_mkmodel_mix mix);

/* The tensor directory and parameter counts, without any I/O. */
memra_status memra_mkmodel_plan_init(const memra_mkmodel_opts *opts, memra_mkmodel_plan *plan, memra_error *err);
void memra_mkmodel_plan_free(memra_mkmodel_plan *plan);

/* The weight type llama-quantize gives a tensor (exposed for tests). name is
 * the GGUF name, ne/n_dims its shape, src_type its type in the converter's
 * bf16 output. */
uint32_t memra_mkmodel_pick_type(const memra_mkmodel_plan *plan, const char *name, uint32_t n_dims, const int64_t *ne,
                                 uint32_t src_type);

/* Writes the file. The output is first written to path + ".tmp" and renamed
 * when complete, so a failed run never leaves a plausible-looking file. */
memra_status memra_mkmodel_write(const memra_mkmodel_opts *opts, const char *path, memra_error *err);

#endif
