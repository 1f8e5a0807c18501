/* A Qwen3.5 model bound on a backend, its per-sequence state, and the forward
 * pass (spec §12), written once against the backend ops (backend.h).
 *
 *   memra_model_load(path, be)        config + every weight checked and bound
 *   memra_state_init(m, slots, ctx)   KV cache, conv and recurrent state per slot,
 *                                     plus the activations for batches up to max_tokens
 *   memra_batch_init / _add           the tokens of one step (backend.h)
 *   memra_forward(m, st, batch, opts) logits of the last token of each sequence,
 *                                     or of every token
 *
 * Prefill is a batch of T tokens on a slot, decode a batch of one token per
 * slot; several sequences (slots) can share a batch. A sequence whose first
 * token in a batch has position 0 is new: its slot's recurrent state is reset
 * before it runs (the KV rows are overwritten as positions are written). */
#ifndef MEMRA_MODEL_MODEL_H
#define MEMRA_MODEL_MODEL_H

#include <stdint.h>

#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/config.h"

/* The weights of one blk.N layer. NULL = absent (the layer kind decides
 * which are present). Shapes in GGUF order {ne0, ne1, ne2}. */
typedef struct memra_layer {
    memra_layer_kind kind;
    const memra_weight *attn_norm; /* {H} F32, stored 1+w */
    const memra_weight *post_norm; /* {H} F32, post_attention_norm, stored 1+w */

    /* gated full attention */
    const memra_weight *wq;     /* {H, 2*n_head*hd}: per head [q(hd) | gate(hd)] */
    const memra_weight *wk;     /* {H, n_kv*hd} */
    const memra_weight *wv;     /* {H, n_kv*hd} */
    const memra_weight *wo;     /* {n_head*hd, H} */
    const memra_weight *q_norm; /* {hd} F32 */
    const memra_weight *k_norm; /* {hd} F32 */

    /* Gated DeltaNet */
    const memra_weight *ssm_qkv;   /* {H, conv_dim}: q | k | v rows (attn_qkv) */
    const memra_weight *ssm_z;     /* {H, value_dim} (attn_gate) */
    const memra_weight *ssm_beta;  /* {H, n_v} */
    const memra_weight *ssm_alpha; /* {H, n_v} */
    const memra_weight *ssm_conv;  /* {d_conv, conv_dim} F32 */
    const memra_weight *ssm_dt;    /* {n_v} F32 (ssm_dt.bias) */
    const memra_weight *ssm_a;     /* {n_v} F32, -exp(A_log) */
    const memra_weight *ssm_norm;  /* {d_v} F32, no +1 */
    const memra_weight *ssm_out;   /* {value_dim, H} */

    /* dense FFN */
    const memra_weight *ffn_gate, *ffn_up; /* {H, n_ff} */
    const memra_weight *ffn_down;          /* {n_ff, H} */

    /* MoE FFN */
    const memra_weight *ffn_router;             /* {H, n_expert} (ffn_gate_inp) */
    const memra_weight *gate_exps, *up_exps;    /* {H, n_ff_exp, n_expert} */
    const memra_weight *down_exps;              /* {n_ff_exp, H, n_expert} */
    const memra_weight *shexp_gate_inp;         /* {H, 1} (ffn_gate_inp_shexp; {H} in the file) */
    const memra_weight *shexp_gate, *shexp_up;  /* {H, n_ff_shexp} */
    const memra_weight *shexp_down;             /* {n_ff_shexp, H} */

    /* MTP (layers >= n_trunk only; bound, not run by the trunk) */
    const memra_weight *nextn_eh_proj;          /* {2H, H} */
    const memra_weight *nextn_enorm;            /* {H} F32 */
    const memra_weight *nextn_hnorm;            /* {H} F32 */
    const memra_weight *nextn_shared_head_norm; /* {H} F32, may be NULL */
} memra_layer;

typedef struct memra_model {
    memra_model_config cfg;
    memra_backend *be; /* borrowed */
    memra_gguf *gguf;  /* owned (the weights point into its mapping) */

    memra_weight *weights; /* [n_weights]: every bound tensor (and views/copies made from them) */
    int64_t n_weights;
    const memra_weight *tok_embd;    /* {H, n_vocab} */
    const memra_weight *output_norm; /* {H} F32 */
    const memra_weight *output;      /* {H, n_vocab}; == tok_embd when the file has no output.weight */
    memra_layer *layers;             /* [n_layer] (trunk then MTP) */

    void **owned; /* host buffers made by the loader (permuted or dequantized copies) */
    int64_t n_owned;
} memra_model;

/* Opens a GGUF file, reads the config, checks and binds every weight, and
 * makes each one usable by the backend (weight_load). */
memra_status memra_model_load(const char *path, memra_backend *be, memra_model **out, memra_error *err);

/* The same from an already opened file; takes ownership of g (also on failure). */
memra_status memra_model_load_gguf(memra_gguf *g, memra_backend *be, memra_model **out, memra_error *err);

/* The same, calling progress(user, fraction) as the weights are made usable
 * by the backend (fraction of the weight bytes; uploading is what takes time
 * on a GPU). progress may be NULL. */
memra_status memra_model_load_progress(const char *path, memra_backend *be, void (*progress)(void *, float),
                                       void *user, memra_model **out, memra_error *err);
memra_status memra_model_load_gguf_progress(memra_gguf *g, memra_backend *be, void (*progress)(void *, float),
                                            void *user, memra_model **out, memra_error *err);

void memra_model_free(memra_model *m);

/* Replaces every non-F32 weight with an F32 copy dequantized by
 * memra_dequant_row (for tests and gates: "the same weights in F32"). */
memra_status memra_model_dequantize_f32(memra_model *m, memra_error *err);

/* Per-sequence state for n_slots sequences of up to n_ctx tokens, plus the
 * activations of batches of up to max_tokens tokens / max_seqs sequences.
 * All in backend memory, fp32:
 *   KV cache     per attention layer: k, v [n_slots][n_ctx][n_kv*hd]
 *   conv state   per GDN layer: [n_slots][conv_dim][d_conv-1] raw inputs, oldest first
 *   ssm state    per GDN layer: [n_slots][n_v][d_v][d_k] */
typedef struct memra_state {
    int32_t n_slots, n_ctx, max_tokens, max_seqs;
    float **k_cache, **v_cache; /* [n_trunk]: NULL for GDN layers */
    float **conv, **ssm;        /* [n_trunk]: NULL for attention layers */

    /* activations (backend memory) */
    float *x;       /* [T][H] residual stream */
    float *xn;      /* [T][H] normed input of a sub-block */
    float *tmp;     /* [T][H] */
    float *big;     /* [T][big_n]: projections of the widest sub-block, carved per layer kind */
    float *mid;     /* [T][mid_n]: mixer output before its out projection, FFN activation */
    int32_t *ids;   /* [T][n_used] MoE routing */
    float *route_w; /* [T][n_used] */
    void *moe_scratch;
    float *logits;  /* [logit_rows][n_vocab] */
    int32_t logit_rows; /* max(max_seqs, min(max_tokens, 64)): all-position logits are made in chunks of this */
    int64_t big_n, mid_n;

    /* Decode graphs (backend graph capture; none where the backend has no
     * graph ops). A decode batch (one token per sequence) has one op
     * sequence per n_seqs, so memra_forward keeps one graph per n_seqs: the
     * first step of a shape runs uncaptured (it sizes the backend's
     * workspace, which must not grow during a capture), the second is
     * captured, and every later one replays it after batch_upload. */
    int use_graphs;        /* 1 (default where the backend has graph ops): memra_forward uses them; 0: never */
    memra_graph **graphs;  /* [max_seqs]: graphs[n - 1] replays a decode step of n sequences, or NULL */
    unsigned char *warmed; /* [max_seqs]: the shape n - 1 ran once uncaptured */
    int32_t *graph_batch[5]; /* the batch's d_* arrays the graphs read; another batch drops them */
} memra_state;

memra_status memra_state_init(const memra_model *m, int32_t n_slots, int32_t n_ctx, int32_t max_tokens,
                              int32_t max_seqs, memra_state **out, memra_error *err);
void memra_state_free(const memra_model *m, memra_state *st);

/* The bytes of moe_scratch for batches of up to T tokens: what moe_ffn and
 * moe_block (with the model's shared expert width) need at most. */
static inline size_t memra_state_moe_scratch_bytes(const memra_model_config *c, int64_t T) {
    size_t a = memra_moe_scratch_bytes(c->n_ff_exp, c->n_expert_used, T);
    size_t b = memra_moe_block_scratch_bytes(c->n_ff_exp, c->n_expert_used, c->n_ff_shexp, c->n_embd, c->n_expert, T);
    return a > b ? a : b;
}

/* Frees the state's decode graphs (they hold the addresses of the weights,
 * the state and the batch: call it before any of those move, e.g. after
 * memra_model_dequantize_f32 on a model whose state already ran). */
void memra_state_drop_graphs(const memra_model *m, memra_state *st);

/* Zeroes a slot's recurrent state (conv + ssm) so that it can start a new
 * sequence. memra_forward does this by itself for a run starting at position 0. */
memra_status memra_state_clear_slot(const memra_model *m, memra_state *st, int32_t slot, memra_error *err);

typedef struct memra_forward_opts {
    int all_logits; /* 0: one row per sequence (its last token); 1: one row per token */
    float *logits;  /* host [rows][n_vocab], or NULL: the logits stay in st->logits (backend memory) */
    float *hidden;  /* host [n_trunk + 1][T][H], or NULL: the embedding output, then each trunk
                     * layer's output (before the final norm), for tests */
    int profile;    /* run uncaptured and mark every op on the backend's timeline
                     * (backend.h prof_*; the caller begins and ends it) */
} memra_forward_opts;

/* Runs one batch (filled by the caller and checked here: token ids in the
 * vocabulary, slots in range and distinct, positions consecutive within a
 * sequence and below n_ctx) and uploads it with batch_upload. A decode batch
 * without opts->hidden runs through the state's decode graphs (st->use_graphs);
 * its logits are bit-identical to the uncaptured run. */
memra_status memra_forward(const memra_model *m, memra_state *st, memra_batch *b, const memra_forward_opts *opts,
                           memra_error *err);

/* The two halves of memra_forward, for a caller that captures the ops as a
 * backend graph (backend.h graph_begin/graph_end):
 *   prepare  host side: checks the batch, resets the recurrent state of
 *            sequences starting at position 0, batch_upload; never captured;
 *   run      backend ops only (no transfers, allocation or host reads of the
 *            d_* arrays): embedding, trunk, final norm and output projection
 *            into st->logits: T rows (all_logits, T <= st->logit_rows) or one
 *            row per sequence. Its op sequence depends only on T and n_seqs
 *            for decode batches (one token per sequence); a batch with longer
 *            runs gathers rows at addresses that depend on seq_start. */
memra_status memra_forward_prepare(const memra_model *m, memra_state *st, memra_batch *b, memra_error *err);
memra_status memra_forward_run(const memra_model *m, memra_state *st, const memra_batch *b, int all_logits,
                               memra_error *err);

/* Internal to src/model (weights.c, model.c). */
memra_status memra_weights_bind(memra_model *m, memra_error *err);
/* Adds p to m->owned (freed with the model); frees p and fails on NOMEM. */
memra_status memra_model_own(memra_model *m, void *p);

#endif
