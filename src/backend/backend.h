/* The op-level backend interface.
 *
 * The Qwen3.5 forward recipe (src/model/forward.c) is written once against
 * these ops; the CPU backend (the oracle) and the CUDA backend implement all of
 * them, so the two can be compared op by op (`memra gate kernels`).
 *
 * Conventions
 * - Buffers are backend memory from alloc(); float buffers hold fp32. Offsets
 *   into a buffer are plain pointer arithmetic (valid for both backends; the CPU
 *   never dereferences a CUDA pointer and vice versa).
 * - Ops are asynchronous on the backend's one stream; sync() waits. Ops run in
 *   the order they are called.
 * - Activations are row-major [T][n]: one row per token of the batch.
 * - Batch invariance: every op computes a token's row with a reduction order
 *   that depends only on that token's data and its own sequence's state, never
 *   on T, on the other sequences in the batch or on the thread count.
 * - Sequence state lives in pools indexed by slot (memra_batch.slot); a
 *   sequence owns its slot's KV rows, conv state and recurrent state.
 * - Every op returns MEMRA_OK or an error (a CUDA launch can fail). */
#ifndef MEMRA_BACKEND_H
#define MEMRA_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/status.h"

/* A weight tensor as bound by the model. Shapes in GGUF order: ne[0] is the
 * row length (inputs of a matrix), ne[1] the number of rows (outputs), ne[2]
 * the expert index for MoE expert tensors. */
typedef struct memra_weight {
    const char *name;   /* points into the GGUF mapping's name copy (NUL-terminated) */
    uint32_t type;      /* memra_type */
    int64_t ne[4];
    uint64_t nbytes;    /* whole tensor */
    uint64_t row_bytes; /* one row of ne[0] elements */
    const void *host;   /* in the GGUF mapping */
    void *data;         /* where ops read it: == host on the CPU, a device copy on CUDA */
} memra_weight;

/* The tokens of one forward step: n_seqs runs of consecutive tokens, each run
 * belonging to one sequence (its cache slot). Host arrays are filled by the
 * caller; the backend's batch_upload() copies them to the d_* mirrors, which
 * were allocated once at the maximum batch size (stable addresses, so a CUDA
 * graph can capture them). */
typedef struct memra_batch {
    int32_t n_tokens; /* T */
    int32_t n_seqs;
    int32_t *tokens;    /* [T] token ids */
    int32_t *pos;       /* [T] absolute position of each token in its sequence */
    int32_t *seq_start; /* [n_seqs + 1] tokens of sequence s: [seq_start[s], seq_start[s+1]) */
    int32_t *slot;      /* [n_seqs] cache slot of sequence s */
    int32_t *tok_seq;   /* [T] index of the sequence each token belongs to */
    /* device mirrors: backend memory from ops->alloc (memra_batch_init); ops
     * read these, never the host arrays (on the CPU they are host memory too,
     * filled by batch_upload's memcpy) */
    int32_t *d_tokens, *d_pos, *d_seq_start, *d_slot, *d_tok_seq;
    int32_t max_tokens, max_seqs; /* capacity of all the arrays above */
} memra_batch;

/* Gated DeltaNet layer: weights and dimensions for the fused gdn op. */
typedef struct memra_gdn_params {
    const memra_weight *conv1d;  /* {d_conv, conv_dim} F32: channel c's taps contiguous, tap d_conv-1 = current token */
    const memra_weight *dt_bias; /* {n_v} F32 */
    const memra_weight *a;       /* {n_v} F32, already -exp(A_log) */
    const memra_weight *norm;    /* {d_v} F32, gated RMSNorm weight (no +1) */
    int32_t d_conv;              /* 4 */
    int32_t n_k, n_v;            /* key heads, value heads */
    int32_t d_k, d_v;            /* 128, 128 */
    int32_t kv_tiled;            /* 1: v-head h uses k-head h % n_k (qwen35*); 0: h / (n_v/n_k) (qwen3next) */
    float eps;                   /* RMSNorm eps of the gated norm (1e-6) */
    float l2_eps;                /* L2 norm eps: x / sqrt(sum x^2 + l2_eps) (1e-6) */
} memra_gdn_params;

/* The RMSNorm a matmul op may apply to its input first: the input becomes
 * rmsnorm(x) with the rmsnorm op's formula (x / sqrt(mean(x^2) + eps) * w,
 * w {in} F32), so that a layer's input norm and the matvecs that read it run
 * as one launch at decode. out (may be NULL): the normalised rows [T][in]
 * are also written there, as the rmsnorm op writes them, for other readers
 * of the same norm (a MoE layer's router and experts). */
typedef struct memra_norm {
    const memra_weight *w;
    float eps;
    float *out;
} memra_norm;

/* MoE expert weights of one layer. */
typedef struct memra_moe_params {
    const memra_weight *gate_exps; /* {H, n_ff_exp, n_expert} */
    const memra_weight *up_exps;   /* {H, n_ff_exp, n_expert} */
    const memra_weight *down_exps; /* {n_ff_exp, H, n_expert} */
    int32_t n_expert, n_used;
    /* the shared expert (moe_block only; NULL: none) */
    const memra_weight *gate_shexp; /* {H, n_ff_shexp} */
    const memra_weight *up_shexp;   /* {H, n_ff_shexp} */
    const memra_weight *down_shexp; /* {n_ff_shexp, H} */
} memra_moe_params;

typedef struct memra_backend memra_backend;
typedef struct memra_graph memra_graph; /* a captured step (graph capture entries below) */

typedef struct memra_backend_ops {
    /* ---- memory ---- */
    memra_status (*alloc)(memra_backend *be, size_t bytes, void **out);
    void (*free)(memra_backend *be, void *ptr);
    memra_status (*upload)(memra_backend *be, void *dst, const void *src, size_t bytes);   /* host -> backend */
    memra_status (*download)(memra_backend *be, void *dst, const void *src, size_t bytes); /* backend -> host */
    memra_status (*copy)(memra_backend *be, void *dst, const void *src, size_t bytes);     /* backend -> backend */
    memra_status (*zero)(memra_backend *be, void *dst, size_t bytes);
    /* Makes w->data valid (the CPU points it at w->host; CUDA copies the bytes
     * as they are: no dequantized copies). weight_release undoes it. */
    memra_status (*weight_load)(memra_backend *be, memra_weight *w);
    void (*weight_release)(memra_backend *be, memra_weight *w);
    /* Copies the batch's host arrays to its device mirrors. */
    memra_status (*batch_upload)(memra_backend *be, memra_batch *b);
    memra_status (*sync)(memra_backend *be);

    /* ---- ops ---- */
    /* out[t] = dequant(table row tokens[t]); table {H, n_vocab} any type. out [T][H]. */
    memra_status (*embed)(memra_backend *be, const memra_weight *table, const memra_batch *b, float *out);

    /* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for rows r < n_rows of n floats;
     * row r starts at x + r*x_stride (y + r*y_stride). w {n} F32. In place allowed. */
    memra_status (*rmsnorm)(memra_backend *be, const float *x, int64_t x_stride, const memra_weight *w, float *y,
                            int64_t y_stride, int64_t n, int64_t n_rows, float eps);

    /* y[t][o] (+)= sum_i W[o][i] * x[t][i]; W {in, out} any supported type,
     * x [T][in], y [T][out]; accumulate = 1 adds into y (residual). */
    memra_status (*matmul)(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                           int accumulate);

    /* y_i[t][o] = sum_j W_i[o][j] * x[t][j] for i < n (1 <= n <= 4): several
     * matmuls (accumulate = 0) that share their input, so that a backend can
     * read x once and run them as one launch. The W_i share ne[0]; each
     * y_i [T][W_i->ne[1]]. On the CPU (the oracle) y_i is matmul(W_i, x) bit
     * for bit; other backends may sum in another order, fixed per row length
     * (batch invariant like matmul). norm (may be NULL): the input is
     * rmsnorm(x) (memra_norm) instead of x. */
    memra_status (*matmul_multi)(memra_backend *be, int n, const memra_weight *const *w, float *const *y,
                                 const float *x, int64_t T, const memra_norm *norm);

    /* out[t][i] = silu((gate x[t])_i) * (up x[t])_i: the SwiGLU input half of an
     * MLP in one op. gate, up {in, n_ff} with equal shapes; x [T][in], out
     * [T][n_ff]. On the CPU equal bit for bit to matmul, matmul, swiglu
     * (after rmsnorm when norm is set, as matmul_multi). */
    memra_status (*matmul_swiglu)(memra_backend *be, const memra_weight *gate, const memra_weight *up,
                                  const float *x, float *out, int64_t T, const memra_norm *norm);

    /* y[i] += x[i] for i < n. */
    memra_status (*add)(memra_backend *be, float *y, const float *x, int64_t n);

    /* y[t][i] += sigmoid(gate[t * gate_stride]) * x[t][i], x and y [T][n]. */
    memra_status (*add_sigmoid_scaled)(memra_backend *be, float *y, const float *x, const float *gate,
                                       int64_t gate_stride, int64_t n, int64_t T);

    /* out[t][i] = silu(gate[t][i]) * up[t][i]; all [T][n]. */
    memra_status (*swiglu)(memra_backend *be, const float *gate, const float *up, float *out, int64_t n, int64_t T);

    /* NeoX ("rotate-half") RoPE in place on the first n_rot dims of each head:
     * head h of token t starts at x + t*tok_stride + h*head_stride; the pair is
     * (j, j + n_rot/2), angle pos[t] * theta^(-2j/n_rot). */
    memra_status (*rope_neox)(memra_backend *be, float *x, const memra_batch *b, int64_t n_heads,
                              int64_t head_stride, int64_t tok_stride, int32_t n_rot, float theta);

    /* Stores k and v rows ([T][kv_dim]) at [slot][pos] of the caches
     * (k_cache, v_cache: [n_slots][n_ctx][kv_dim] fp32). */
    memra_status (*kv_store)(memra_backend *be, const memra_batch *b, float *k_cache, float *v_cache,
                             int32_t n_ctx, int64_t kv_dim, const float *k, const float *v);

    /* The per-token head work of a full-attention layer between the
     * projections and attention, in one op; equal (on the CPU, bit for bit)
     * to the sequence
     *   rmsnorm(q heads, q_norm); rmsnorm(k heads, k_norm)     eps, over hd
     *   rope_neox(q heads); rope_neox(k heads)                n_rot, theta
     *   kv_store(k, v)
     * q head h of token t starts at q + t*q_tok_stride + h*q_head_stride and is
     * normalised and rotated in place (a gate interleaved after each q head is
     * left alone); k and v are [T][n_kv*hd]: k is normalised and rotated in
     * place, then k and v are stored at [slot][pos] of the caches (k_cache,
     * v_cache [n_slots][n_ctx][n_kv*hd]). q_norm, k_norm {hd} F32. */
    memra_status (*qk_norm_rope_store)(memra_backend *be, const memra_batch *b, float *q, int64_t q_tok_stride,
                                       int64_t q_head_stride, int32_t n_head, float *k, const float *v,
                                       int32_t n_kv, int32_t hd, const memra_weight *q_norm,
                                       const memra_weight *k_norm, float eps, int32_t n_rot, float theta,
                                       float *k_cache, float *v_cache, int32_t n_ctx);

    /* Causal GQA attention over the caches, gated:
     *   o[t][h] = sum_{s <= pos[t]} softmax_s(scale * q[t][h].K[slot][s][h/(n_head/n_kv)]) V[...][s][...]
     *   out[t][h*hd + d] = o[t][h][d] * sigmoid(gate[t][h][d])   (gate may be NULL: no gating)
     * q[t][h] starts at q + t*q_tok_stride + h*q_head_stride (gate likewise
     * from gate). out [T][n_head*hd]. Reductions over s use a fixed split
     * size, so a token's result does not depend on T or on other sequences. */
    memra_status (*attention)(memra_backend *be, const memra_batch *b, const float *k_cache, const float *v_cache,
                              int32_t n_ctx, const float *q, const float *gate, int64_t q_tok_stride,
                              int64_t q_head_stride, int32_t n_head, int32_t n_kv, int32_t hd, float scale,
                              float *out);

    /* One Gated DeltaNet layer after the input projections, for the tokens of
     * each sequence in order (spec §5.3-5.6):
     *   mixed [T][conv_dim] (q|k|v pre-conv), z [T][n_v*d_v], braw, araw [T][n_v]
     *   beta = sigmoid(braw); g = a * softplus(araw + dt_bias)
     *   c = silu(causal_conv1d(mixed, conv_state)); q,k = l2norm per head; q *= 1/sqrt(d_k)
     *   S = exp(g) S; d = beta (v - S^T k); S += k d^T; o = S^T q
     *   out [T][n_v*d_v] = rmsnorm(o per v-head) * norm * silu(z)
     * conv_state: [n_slots][conv_dim][d_conv-1] raw inputs, oldest first;
     * ssm_state: [n_slots][n_v][d_v][d_k] fp32 (mem[j*d_k + i] = S[i][j]). */
    memra_status (*gdn)(memra_backend *be, const memra_batch *b, const memra_gdn_params *p, float *conv_state,
                        float *ssm_state, const float *mixed, const float *z, const float *braw, const float *araw,
                        float *out);

    /* MoE routing: p = softmax(logits[t]) over n_expert; top n_used by p
     * (ties: lower expert id first), weights renormalised to sum 1 (the sum
     * clamped to >= 6.103515625e-5 as llama.cpp does). ids, w [T][n_used],
     * ordered by descending p. */
    memra_status (*moe_route)(memra_backend *be, const float *logits, int64_t T, int32_t n_expert, int32_t n_used,
                              int32_t *ids, float *w);

    /* out[t] = sum_{j < n_used} w[t][j] * down_e(silu(gate_e x[t]) * up_e x[t]), e = ids[t][j],
     * summed in j order. x, out [T][H]; scratch: at least
     * moe_scratch_bytes(n_ff_exp, n_used, T) bytes of backend memory. */
    memra_status (*moe_ffn)(memra_backend *be, const memra_moe_params *p, const float *x, const int32_t *ids,
                            const float *w, float *out, int64_t T, void *scratch);

    /* A whole MoE layer after the router, added to the residual x [T][H]:
     *   ids[t], w[t] = moe_route(logits[t])
     *   x[t] = x[t] + sum_{j < n_used} w[t][j] * down_e(silu(gate_e xn[t]) * up_e xn[t]),  e = ids[t][j]
     *   x[t] = x[t] + sigmoid(sg[t * sg_stride]) * down_s(silu(gate_s xn[t]) * up_s xn[t])  (shared expert)
     * the expert sum in j order from 0, then the two additions in that order,
     * so that on the CPU the result is bit for bit what moe_route, moe_ffn,
     * add, the shared expert's matmuls and add_sigmoid_scaled give. xn [T][H];
     * ids, w [T][n_used] receive the routing; sg is unused without a shared
     * expert. Requires one type for gate_exps, up_exps, gate_shexp and
     * up_shexp, and one for down_exps and down_shexp (MEMRA_ERR_UNSUPPORTED
     * otherwise). scratch: memra_moe_block_scratch_bytes. */
    memra_status (*moe_block)(memra_backend *be, const memra_moe_params *p, const float *logits, const float *xn,
                              const float *sg, int64_t sg_stride, float *x, int64_t T, int32_t *ids, float *w,
                              void *scratch);

    /* out[t] = argmax_i logits[t][i] (lowest index among equal maxima). */
    memra_status (*argmax)(memra_backend *be, const float *logits, int64_t n, int64_t T, int32_t *out);

    void (*destroy)(memra_backend *be);

    /* ---- graph capture (added by the CUDA backend; optional, NULL where a
     * backend has none) ----
     * graph_begin: the ops called next are recorded instead of run, until
     * graph_end returns them as a graph; graph_launch replays it on the
     * backend's stream. A replay reads buffers and the batch's d_* mirrors at
     * the addresses captured, so the caller refills them in place: fill the
     * host arrays, batch_upload (outside the capture), then graph_launch.
     * alloc/upload/download/batch_upload fail while capturing. Ops whose
     * launch shape depends on T or n_seqs need one graph per (T, n_seqs). */
    memra_status (*graph_begin)(memra_backend *be);
    memra_status (*graph_end)(memra_backend *be, memra_graph **out);
    memra_status (*graph_launch)(memra_backend *be, memra_graph *g);
    void (*graph_free)(memra_backend *be, memra_graph *g);
    /* Op timeline for `memra bench --profile` (optional; uncaptured runs
     * only): prof_begin starts a timeline (CUDA first parks the stream on a
     * short spin so that the host's launches run ahead and do not pace the
     * device), prof_mark(label) ends the interval since the previous mark and
     * books it to label (a string that outlives the timeline), prof_end
     * waits for the device and prints the time per label to f, largest
     * first. */
    memra_status (*prof_begin)(memra_backend *be);
    memra_status (*prof_mark)(memra_backend *be, const char *label);
    memra_status (*prof_end)(memra_backend *be, FILE *f);
    /* Kernel timeline for `memra bench --timeline` (optional; the CUDA
     * backend has it when built with `make TIMELINE=1`): timeline_begin
     * starts recording
     * every block of every kernel, captured graphs included (call it outside
     * a capture); timeline_end stops, waits for the device, prints per
     * kernel and grid size what the launches took after their waits and
     * between them to f (per step where steps > 0: the steps recorded) and,
     * when csv is not NULL, writes one row per launch to that file. */
    memra_status (*timeline_begin)(memra_backend *be);
    memra_status (*timeline_end)(memra_backend *be, FILE *f, const char *csv, int steps);
    /* Message of the last failed op (ops take no memra_error); optional. */
    const char *(*last_error)(memra_backend *be);
} memra_backend_ops;

struct memra_backend {
    const memra_backend_ops *ops;
    const char *name; /* "cpu", "cuda" */
    void *impl;
};

/* Scratch the moe_ffn op needs (both backends agree on it). */
static inline size_t memra_moe_scratch_bytes(int64_t n_ff_exp, int32_t n_used, int64_t T) {
    return (size_t)(3 * n_ff_exp) * (size_t)n_used * (size_t)T * sizeof(float);
}

/* Scratch the moe_block op needs: act [T][n_ff_shexp + n_used * n_ff_exp]
 * floats, then room for a backend's token grouping at large T (CUDA:
 * per-slot down products [T][n_used + 1][n_embd] floats and the expert
 * sort, less than 4 (T (n_used + 1) + n_expert + 2) ints). */
static inline size_t memra_moe_block_scratch_bytes(int64_t n_ff_exp, int32_t n_used, int64_t n_ff_shexp,
                                                   int64_t n_embd, int32_t n_expert, int64_t T) {
    size_t act = (size_t)(n_ff_shexp + (int64_t)n_used * n_ff_exp) * (size_t)T;
    size_t dd = (size_t)T * (size_t)(n_used + 1) * (size_t)n_embd;
    size_t sort = 4 * ((size_t)T * (size_t)(n_used + 1) + (size_t)n_expert + 2);
    return (act + dd + sort) * sizeof(float);
}

/* Backend constructors. n_threads <= 0: all CPUs. */
memra_status memra_backend_cpu_init(memra_backend **out, int n_threads, memra_error *err);
/* Fails with MEMRA_ERR_UNSUPPORTED when built without CUDA or no device is present. */
memra_status memra_backend_cuda_init(memra_backend **out, int device, memra_error *err);
/* 1 when the CUDA backend be runs a T >= 16 matmul of this weight type and
 * shape with its T < 16 matvec's arithmetic (mmvg), so that its rows equal
 * T = 1's; 0 for the prefill GEMMs, another backend or a build without CUDA
 * (`memra gate kernels` picks its invariance check by it). */
int memra_backend_cuda_prefill_matvec(memra_backend *be, uint32_t type, int64_t in, int64_t n_out);
/* 1 when the CUDA backend be stores the loaded weight w tile-major (its
 * Q4_K and Q6_K matmul weights: the same blocks in another order, so its
 * T < 16 matmuls take the int8 matvec); 0 otherwise, or without CUDA. */
int memra_backend_cuda_weight_tm(memra_backend *be, const memra_weight *w);
/* 1 when the CUDA backend be gives a token's moe_block row for p the same
 * bits at T < 16 as in a batch of 16 or more (its decode and grouped paths
 * share their arithmetic; not where a decode phase runs on the int8 core);
 * 0 otherwise, for another backend or without CUDA (`memra gate kernels`
 * checks across the two regimes only where this says they agree). */
int memra_backend_cuda_moe_regimes_equal(memra_backend *be, const memra_moe_params *p);
void memra_backend_free(memra_backend *be);

/* Batch arrays for up to max_tokens tokens in max_seqs sequences: host arrays
 * (malloc) and their device mirrors (be->ops->alloc). */
memra_status memra_batch_init(memra_backend *be, int32_t max_tokens, int32_t max_seqs, memra_batch *b,
                              memra_error *err);
void memra_batch_free(memra_backend *be, memra_batch *b);
/* Empties the batch (n_tokens = n_seqs = 0). */
void memra_batch_clear(memra_batch *b);
/* Appends a run of n tokens of the sequence in `slot` at positions pos0 ..
 * pos0+n-1 (host arrays only; memra_forward uploads). MEMRA_ERR_LIMIT when it
 * does not fit, MEMRA_ERR_INVALID for n < 1. */
memra_status memra_batch_add(memra_batch *b, int32_t slot, const int32_t *tokens, int32_t n, int32_t pos0);

/* Helpers that call through the ops and turn a failure into `return st`. */
#define MEMRA_TRY(expr)                        \
    do {                                       \
        memra_status memra_try_st_ = (expr);   \
        if (memra_try_st_ != MEMRA_OK) return memra_try_st_; \
    } while (0)

#endif
