/* Model hyperparameters read from GGUF metadata (spec §1-2, §10).
 *
 * Every value is checked when it is read: dimensions are positive and below
 * sane limits, products that size buffers cannot overflow, and the relations
 * the forward pass relies on hold (n_head % n_kv == 0, value_dim == n_v * d_v,
 * n_v % n_k == 0, ...). A failure names the metadata key. */
#ifndef MEMRA_MODEL_CONFIG_H
#define MEMRA_MODEL_CONFIG_H

#include <stdint.h>

#include "base/status.h"
#include "gguf/gguf.h"

typedef enum memra_arch {
    MEMRA_ARCH_QWEN35 = 0,    /* dense FFN, IMROPE, v heads tiled */
    MEMRA_ARCH_QWEN35MOE = 1, /* MoE + shared expert, IMROPE, v heads tiled */
    MEMRA_ARCH_QWEN3NEXT = 2, /* MoE + shared expert, NeoX RoPE, v heads grouped */
} memra_arch;

typedef enum memra_layer_kind {
    MEMRA_LAYER_GDN = 0,  /* Gated DeltaNet (linear attention) mixer */
    MEMRA_LAYER_ATTN = 1, /* gated full attention mixer */
} memra_layer_kind;

/* Upper bound on blk.N layers (trunk + MTP); real models have <= 64. */
#define MEMRA_MAX_LAYERS 1024

typedef struct memra_model_config {
    memra_arch arch;
    char arch_name[16]; /* "qwen35", the metadata key prefix */

    int64_t n_vocab;  /* rows of token_embd */
    int64_t n_embd;   /* H */
    int32_t n_layer;  /* block_count: trunk + MTP layers */
    int32_t n_trunk;  /* block_count - nextn_predict_layers: the layers the forward runs */
    int32_t n_nextn;  /* MTP layers at the end (bound, not run) */
    int64_t n_ctx_train;
    float rms_eps;

    /* layer kinds, [n_layer]; MTP layers are always MEMRA_LAYER_ATTN */
    uint8_t kind[MEMRA_MAX_LAYERS];
    int32_t full_attn_interval; /* 0 when the recurrent_layers array decided the kinds */

    /* gated full attention */
    int32_t n_head, n_kv, head_dim; /* head_dim = key_length = value_length */
    int32_t n_rot;                  /* rotary dims per head (rope.dimension_count) */
    float rope_theta;
    int32_t rope_sections[4]; /* IMROPE sections (qwen35*); zeros for qwen3next */
    int rope_imrope;          /* 1: IMROPE (text positions make it equal to NeoX); 0: NeoX */

    /* Gated DeltaNet */
    int32_t d_conv;      /* ssm.conv_kernel */
    int32_t d_k, n_k;    /* ssm.state_size, ssm.group_count */
    int32_t d_v, n_v;    /* ssm.inner_size / n_v, ssm.time_step_rank */
    int64_t key_dim;     /* n_k * d_k */
    int64_t value_dim;   /* n_v * d_v = ssm.inner_size */
    int64_t conv_dim;    /* 2 * key_dim + value_dim */
    int kv_tiled;        /* 1: v head h uses k head h % n_k (qwen35*); 0: h / (n_v / n_k) (qwen3next) */

    /* FFN */
    int is_moe;
    int64_t n_ff;          /* dense FFN width (qwen35) */
    int32_t n_expert;      /* MoE */
    int32_t n_expert_used;
    int64_t n_ff_exp;
    int64_t n_ff_shexp;    /* 0: no shared expert */
} memra_model_config;

/* Reads and checks the hyperparameters. n_vocab comes from token_embd.weight's
 * shape (the tokenizer may list fewer tokens than the padded embedding). */
memra_status memra_config_from_gguf(const memra_gguf *g, memra_model_config *cfg, memra_error *err);

/* Number of trunk layers of the given kind. */
int32_t memra_config_count(const memra_model_config *cfg, memra_layer_kind kind);

#endif
