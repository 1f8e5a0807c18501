/* matmul: y[t][o] (+)= sum_i W[o][i] x[t][i] for every supported weight type,
 * reading the weights in their GGUF encoding (no dequantized copy).
 *
 * One kernel serves every T < 16: a warp per R output rows, tokens taken NT
 * at a time (NT = 1, 2, 4, 8 or 16 by T), the reduction order of a row fixed
 * by the row length alone (matvec.cuh). So row t of a T-token product is bit-identical to the same
 * row computed with T = 1.
 *
 * Q4_K rows of a multiple of 256 take the integer tensor-core
 * matvec instead (mmvq.cuh: a conversion launch per token group, then the
 * matvec), with the same property. MEMRA_MMVQ=0 sends Q4_K to mmv.cuh's fp16
 * matvec, which converts inside the kernel. Tile-major Q6_K rows take the
 * int8 matvec too; Q6_K rows in the file's order (the output head; all of
 * them under MEMRA_MMVQ6=0) of a multiple of 512 take mmv6.cuh (fp16; int8
 * under MEMRA_MMVQ6=1). MEMRA_MMV=0 in the environment (read at the first
 * matmul) sends all of them to k_matvec_multi, MEMRA_MMV6=0 the fp16 Q6_K
 * rows: fallback switches on the device, no rebuild needed.
 *
 * Prefill (T >= MM_TC_MIN_T): Q8_0 goes to the wgmma GEMM (gemm.cu,
 * k_gemm_wg, sm_90a), Q4_K and Q6_K too where their tiles fill their waves
 * (mmvg_path), the other Q4_K and Q6_K rows that the matvecs take to
 * mmvg.cuh (their arithmetic for many tokens; MEMRA_MMVG=0 turns it off),
 * the other types the tensor-core GEMM (cuda_gemm_tc). A row computed with
 * T >= 16 differs from the same row computed with T < 16 in the last bits,
 * except on mmvg's Q6_K path for rows that take mmv6 at T < 16;
 * memra_backend_cuda_prefill_matvec says which shapes take mmvg, and
 * `memra gate kernels` checks each path's invariance separately.
 *
 * Tile-major Q4_K and Q6_K weights (common.cuh, cuda_weight_tm) take the
 * same paths with mmv_args.tm / mv_multi_args.tm set (the GEMM asks for
 * itself), except mmv6 (file's order only): the same bits as the file's
 * layout on the same path. A launch holds weights of one layout
 * only: matmul_multi groups by layout too, and a swiglu pair of mixed
 * layouts (c_weight_load never makes one) takes two matmuls. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/matvec.cuh"
#include "backend/cuda/mmv.cuh"
#include "backend/cuda/mmv6.cuh"
#include "backend/cuda/mmvg.cuh"
#include "backend/cuda/mmvq.cuh"
#include "backend/cuda/ops.cuh"

#define MM_TC_MIN_T 16

/* One k_matvec_multi launch (T < 16) for the n weights in a of one type. */
static memra_status matvec_multi_run(memra_backend *be, uint32_t type, const mv_multi_args &a, int n, bool swiglu,
                                     const float *x) {
    cudaStream_t s = cuda_of(be)->stream;
    switch (type) {
#define MV_MULTI_CASE(TY) \
    case TY: launch_multi_type<TY>(a, n, swiglu, x, s); break;
        CUDA_FOR_EACH_TYPE(MV_MULTI_CASE)
#undef MV_MULTI_CASE
    default: return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "matmul_multi: unsupported type %u", type);
    }
    return CUDA_LAUNCHED(be, "matmul: matvec multi");
}

int cuda_type_supported(uint32_t type) { return cuda_type_row_bytes(type, 256) != 0; }

/* The checks every matmul entry point makes on one weight. */
static memra_status mm_check(memra_backend *be, const memra_weight *w, const float *x, int64_t T) {
    const char *name = w && w->name ? w->name : "?";
    if (!w || !w->data) return CUDA_INVALID(be, "matmul %s: weight not loaded", name);
    if (T < 0) return CUDA_INVALID(be, "matmul %s: T = %lld", name, (long long)T);
    int64_t in = w->ne[0], n_out = w->ne[1];
    if (!cuda_type_supported(w->type))
        return cuda_fail(be, MEMRA_ERR_UNSUPPORTED, "matmul %s: type %s has no CUDA kernel", name,
                         memra_type_name(w->type));
    if (in <= 0 || n_out <= 0 || (w->ne[2] > 1) || in % 32)
        return CUDA_INVALID(be, "matmul %s: shape {%lld, %lld, %lld}: need one matrix with ne0 %% 32 == 0", name,
                            (long long)in, (long long)n_out, (long long)w->ne[2]);
    size_t rb = cuda_type_row_bytes(w->type, in);
    if (rb == 0 || rb != w->row_bytes)
        return CUDA_INVALID(be, "matmul %s: row of %lld %s elements is %zu bytes, weight says %llu", name,
                            (long long)in, memra_type_name(w->type), rb, (unsigned long long)w->row_bytes);
    if (!cuda_aligned16(x)) return CUDA_INVALID(be, "matmul %s: x not 16-byte aligned", name);
    /* the decoders' aligned 8-byte loads (Q4_K, Q5_K, IQ4_XS) need an
     * aligned start; every row is then aligned too (block sizes 144, 176, 136) */
    if ((uintptr_t)w->data & 15) return CUDA_INVALID(be, "matmul %s: weight not 16-byte aligned", name);
    if (n_out >= (int64_t)INT32_MAX || (T + 15) / 16 > 65535)
        return CUDA_INVALID(be, "matmul %s: %lld rows x %lld tokens exceed the grid", name, (long long)n_out,
                            (long long)T);
    return MEMRA_OK;
}


/* Whether a T < 16 matmul of this weight type and row length goes to the
 * tensor-core matvec: mmv.cuh (Q4_K), mmv6.cuh (Q6_K). MEMRA_MMV=0 turns
 * both off, MEMRA_MMV6=0 the Q6_K one (see the top). */
static int mmv_use(uint32_t type, int64_t in) {
    static int on = -1;
    return env_on("MEMRA_MMV", &on) && mmv_type_ok(type, in);
}

static int mmv6_use(uint32_t type, int64_t in) {
    static int on = -1, on6 = -1;
    return env_on("MEMRA_MMV", &on) && env_on("MEMRA_MMV6", &on6) && mmv6_type_ok(type, in);
}

/* Which Q6_K rows take mmvq.cuh's int8 pipeline at T < 16 (path 5):
 * MEMRA_MMVQ6 unset: the tile-major ones (c_weight_load tiles a Q6_K weight
 * only where this path takes it: cuda_q6_tiles); =1: every Q6_K row of a
 * multiple of 256; =0: none (then no Q6_K weight is tiled). On the file's
 * layout the int8 pair did not beat mmv6 (2026-12-03f-h200.md, decode
 * tok/s: 9b q4_k_m 291-295 against 292-294, 27b 105.0 against 105.2);
 * tile-major, through k_mmvq_tm's ring, it does (common.cuh). MEMRA_MMV=0
 * turns it off with the other tensor-core matvecs. Rows whose planes do
 * not fit the backend's buffer keep mmv6 (never tiled). */
static int mmvq6_mode(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("MEMRA_MMVQ6");
        mode = e && !strcmp(e, "0") ? 0 : e && !strcmp(e, "1") ? 2 : 1;
    }
    return mode;
}

static int mmvq6_use(uint32_t type, int64_t in, int64_t T, int tm) {
    static int on = -1;
    if (type != MEMRA_TYPE_Q6_K || in % 256 || T <= 0 || T >= MM_TC_MIN_T || !mmvq_fits(T, in) ||
        !env_on("MEMRA_MMV", &on))
        return 0;
    const int mode = mmvq6_mode();
    return mode == 2 || (mode == 1 && tm);
}

int cuda_q6_tiles(int64_t in) { return mmvq6_use(MEMRA_TYPE_Q6_K, in, MM_TC_MIN_T - 1, 1); }

/* The tensor-core matvec path of a matmul (T >= 16: once mmvg_path said
 * mmvg): 1 (Q4_K), 5 (Q6_K, int8, T < 16), 3 (Q6_K, fp16: mmv6 on the
 * file's layout only, mmvg on either), 0 = none (k_matvec_multi). tm: the
 * weight is tile-major. */
static int mv_path(uint32_t type, int64_t in, int64_t T, int tm) {
    return mmv_use(type, in)                                 ? 1
           : mmvq6_use(type, in, T, tm)                      ? 5
           : (!tm || T >= MM_TC_MIN_T) && mmv6_use(type, in) ? 3
                                                             : 0;
}

/* The tensor-core matvec path of a T >= 16 matmul: 1 = mmvg.cuh's Q4_K
 * kernel (k_mmv's arithmetic), 3 = its Q6_K kernel (mmv6's: the same bits
 * as the T < 16 matvec), 0 = the GEMM. Q4_K weights that the wgmma GEMM
 * takes (gemm.cu, cuda_gemm_wg_takes: sm_90a) go to the GEMM when its tiles
 * fill their waves at the engine's 512-token prefill batch (the shape
 * decides, never T: a row's path, hence its bits, must not depend on the
 * batch): the GEMM when its tiles fill at least half of their waves. With
 * the single-role k_gemm_wg the bar was 80%: it was 10% faster than mmvg on
 * 27b's gate / up {5120, 17408} (544 tiles: 4.1 waves) but 6-18% slower on
 * the 5120-row matrices (160 tiles: 1.2 waves, 61%). With the
 * warp-specialized kernel (2026-12-03h, run 11) every Q4_K matrix on the
 * GEMM made 27b's prefill 512 1.9% faster but 9b's 0.9% slower: 9b's only
 * matrices under 80% are the attention k / v projections (1024 rows: 32
 * tiles, 24%); 27b's are those, the 5120-row ones (61%) and the 6144-row
 * z projection (73%). Hence 50% (run 12: 27b 1,708-1,713 tok/s, against
 * 1,662-1,664 at 80% and 1,695-1,699 with all of them on the GEMM).
 * MEMRA_MMVG=0 sends all of them (Q6_K too) to the GEMM. */
static int mmvg_path(memra_backend *be, uint32_t type, int64_t in, int64_t n_out) {
    static int on = -1;
    if (!env_on("MEMRA_MMVG", &on) || (cuda_gemm_wg_takes(type, in, n_out) && cuda_gemm_wg_fills(be, n_out)))
        return 0;
    return mmv_use(type, in) ? 1 : mmv6_use(type, in) ? 3 : 0;
}

extern "C" int memra_backend_cuda_prefill_matvec(memra_backend *be, uint32_t type, int64_t in, int64_t n_out) {
    return be && be->ops && be->ops->matmul == cuda_op_matmul && mmvg_path(be, type, in, n_out) != 0;
}

extern "C" int memra_backend_cuda_weight_tm(memra_backend *be, const memra_weight *w) {
    return be && be->ops && be->ops->matmul == cuda_op_matmul && cuda_weight_tm(be, w);
}

/* Whether a T < 16 launch of path 1 runs the int8 matvec (mmvq.cuh: its
 * prep, then the matvec) rather than mmv.cuh's fp16 one. */
static int mmvq_takes(int64_t T, int64_t in) {
    static int q_on = -1;
    return env_on("MEMRA_MMVQ", &q_on) && mmvq_fits(T, in);
}

/* A tensor-core matvec launch (path 1: mmv.cuh / mmvq.cuh, Q4_K; path 3:
 * mmv6.cuh, Q6_K; path 5: mmvq.cuh, Q6_K, T < 16) of the n
 * weights in a, with the input norm when given, on stream st (the
 * backend's, or its side stream for matmul_multi's side branch). prep = 0:
 * the int8 matvec's planes of this x are in cuda_impl.mq already
 * (matmul_multi's shared prep), so only the matvec is launched. */
static memra_status tc_run(memra_backend *be, int path, mmv_args *a, int n, const memra_norm *norm,
                           cudaStream_t st, int prep = 1) {
    if (norm) a->nw = (const float *)norm->w->data, a->eps = norm->eps;
    if (a->T >= MM_TC_MIN_T) {
        const uint32_t td = path == 3 ? MEMRA_TYPE_Q6_K : MEMRA_TYPE_Q4_K;
        memra_status rs = cuda_xs_reserve(be, mmvg_ws_bytes(td, a->T, a->in));
        if (rs) return rs;
        mmvg_launch(*a, n, path, cuda_of(be)->xs, st);
        return CUDA_LAUNCHED(be, "matmul: mmvg");
    }
    if (path == 3) {
        if (a->tm) return CUDA_INVALID(be, "matmul: mmv6 reads the file's layout, not tile-major Q6_K");
        mmv6_launch(*a, n, st);
        return CUDA_LAUNCHED(be, "matmul: mmv6");
    }
    mmv_blocks(a, n);
    cuda_impl *c = cuda_of(be);
    if (path == 5 || mmvq_takes(a->T, a->in)) {
        const uint32_t type = path == 5 ? MEMRA_TYPE_Q6_K : MEMRA_TYPE_Q4_K;
        return cuda_check(be, mmvq_launch(type, *a, c->mq, st, cuda_sm90, c->sm_count, prep),
                          path == 5 ? "matmul: mmvq q6_k" : "matmul: mmvq");
    }
    mmv_launch(*a, st);
    return CUDA_LAUNCHED(be, "matmul: mmv");
}

memra_status cuda_op_matmul(memra_backend *be, const memra_weight *w, const float *x, float *y, int64_t T,
                            int accumulate) {
    memra_status st = mm_check(be, w, x, T);
    if (st || T == 0) return st;
    int64_t in = w->ne[0], n_out = w->ne[1];
    size_t rb = w->row_bytes;
    if (T >= MM_TC_MIN_T && !mmvg_path(be, w->type, in, n_out)) return cuda_gemm_tc(be, w, x, y, T, accumulate);
    const int tm = cuda_weight_tm(be, w);
    const int path = mv_path(w->type, in, T, tm);
    if (path) {
        mmv_args a = {};
        a.x = x;
        a.W[0] = (const uint8_t *)w->data, a.n_out[0] = n_out, a.y[0] = y;
        a.row_bytes = rb, a.in = in, a.T = (int)T, a.accumulate = accumulate, a.tm = tm;
        return tc_run(be, path, &a, 1, NULL, cuda_of(be)->stream);
    }
    mv_multi_args a = {};
    a.W[0] = (const uint8_t *)w->data, a.n_out[0] = n_out, a.y[0] = y;
    a.row_bytes = rb, a.in = in, a.T = T, a.accumulate = accumulate, a.tm = tm;
    return matvec_multi_run(be, w->type, a, 1, false, x);
}

/* The input norm of matmul_multi / matmul_swiglu (backend.h memra_norm):
 * checked against the row length in. */
static memra_status norm_check(memra_backend *be, const memra_norm *norm, int64_t in) {
    if (!norm) return MEMRA_OK;
    const memra_weight *w = norm->w;
    if (!w || !w->data || w->type != MEMRA_TYPE_F32 || w->ne[0] != in || !cuda_aligned16(w->data))
        return CUDA_INVALID(be, "matmul norm %s: need a loaded, 16-byte aligned F32 vector of %lld",
                            w && w->name ? w->name : "?", (long long)in);
    return MEMRA_OK;
}

/* Whether a matmul_multi path (fused[] code) applies a memra_norm inside
 * its kernel: the tensor-core matvecs (mmv, mmv6), whose blocks compute each
 * token's 1 / rms once and fold it into their activation staging. The
 * k_matvec_multi path does not: with a factor per warp (its blocks are
 * small, thousands per matvec) every warp re-read the whole x row, and 9b
 * Q8_0 decode fell from 248 to 187 tok/s on the H200; it takes the rmsnorm
 * op into the workspace instead (bench/results/2026-12-03-h200.md). */
static int path_takes_norm(int path) { return path == 1 || path == 3 || path == 5; }

/* Bytes of T rows of n floats in the workspace, rounded to 256. */
static size_t ws_rows_bytes(int64_t T, int64_t n) { return ((size_t)T * (size_t)n * sizeof(float) + 255) & ~(size_t)255; }

/* rmsnorm(x) into the start of the workspace (the rmsnorm op), for the
 * paths that do not apply the norm inside their kernels; `after` more bytes
 * are reserved behind it for the caller. *xn: the normalised rows. */
static memra_status norm_to_ws(memra_backend *be, const memra_norm *norm, const float *x, int64_t in, int64_t T,
                               size_t after, float **xn) {
    memra_status st = cuda_ws_reserve(be, ws_rows_bytes(T, in) + after);
    if (st) return st;
    *xn = (float *)cuda_of(be)->ws;
    return cuda_op_rmsnorm(be, x, in, norm->w, *xn, in, in, T, norm->eps);
}

/* ---- the side branch ----
 *
 * What: in a T < 16 matmul_multi whose weights take more than one launch
 * group, the Q6_K group (path 3, mmv6.cuh; or path 5, the int8 matvec on
 * tile-major Q6_K) runs on a second stream beside the others (the stream's
 * prep + int8 matvec): forked from the
 * stream before the call's first launch, joined back after its last, so in
 * a captured graph it is a parallel branch. Where: the Q4_K_M files' GDN
 * input projections (qkv Q6_K in half the layers; z, beta, alpha Q4_K) and
 * attention projections (v Q6_K; q, k Q4_K).
 * Why: the groups read the same x and write disjoint outputs, yet on one
 * stream the second waits for the first to complete; each is a small,
 * latency-bound launch (~6 us of fixed cost, bench/results/2026-12-03g-h200.md
 * section 3), so side by side their fixed costs overlap. H100, decode tok/s,
 * two interleaved rounds (bench/results/2026-12-06-h100.md): 9b q4_k_m
 * 309.8 / 306.1 -> 315.7 / 315.4 (+2.5%), 35b-a3b q4_k_m 412.7 / 411.0 ->
 * 426.6 / 423.7 (+3.2%); logits memcmp-equal (memra eval, 70 tokens).
 * Bits: the same kernels on the same data; only start times move. Only
 * when every group is a tensor-core matvec (paths 1, 3 and 5, which take the
 * norm in their kernels, so x is never the workspace): mmv6's decode
 * kernels use no global scratch, the stream's groups cuda_impl.mq only, so
 * the branches share nothing but x. With path 5 on the side, both int8
 * groups read cuda_impl.mq: its planes come from one prep launched on the
 * stream before the fork, and neither group writes it.
 * MEMRA_FORK=0 keeps every group on the stream (A/B). */
static int side_branch(const int *fused, int n, int64_t T) {
    static int on = -1;
    if (T >= MM_TC_MIN_T || !env_on("MEMRA_FORK", &on)) return 0;
    int side = 0, other = 0;
    for (int i = 0; i < n; i++) {
        if (fused[i] != 1 && fused[i] != 3 && fused[i] != 5) return 0; /* others may read the workspace */
        if (fused[i] != 1) side = 1;
        else other = 1;
    }
    return side && other;
}

static memra_status multi_groups(memra_backend *be, int n, const memra_weight *const *w, float *const *y,
                                 const float *x, int64_t T, const memra_norm *norm, int *fused, const int *tm,
                                 int only, int prep);

/* y_i = W_i x: at T < 16 one launch per distinct type and path (all
 * weights of a type in one grid: mmv for the tensor-core types, k_matvec_multi
 * for the rest); T >= 16 as cuda_op_matmul. Each row gets cuda_op_matmul's
 * bits. */
memra_status cuda_op_matmul_multi(memra_backend *be, int n, const memra_weight *const *w, float *const *y,
                                  const float *x, int64_t T, const memra_norm *norm) {
    if (n < 1 || n > 4) return CUDA_INVALID(be, "matmul_multi: n = %d (1..4)", n);
    int fused[4] = {0, 0, 0, 0}, tm[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; i++) {
        memra_status st = mm_check(be, w[i], x, T);
        if (!st && norm && w[i]->ne[0] != w[0]->ne[0])
            st = CUDA_INVALID(be, "matmul_multi: a norm needs one row length (%lld, %lld)", (long long)w[0]->ne[0],
                              (long long)w[i]->ne[0]);
        if (st) return st;
        tm[i] = cuda_weight_tm(be, w[i]);
        /* 1: tensor-core matvec (Q4_K), 5 / 3: (Q6_K), 2: k_matvec_multi, 0: cuda_op_matmul alone */
        if (T >= MM_TC_MIN_T) /* mmvg (path 1, 3) or the GEMM alone */
            fused[i] = w[i]->ne[0] == w[0]->ne[0] ? mmvg_path(be, w[i]->type, w[i]->ne[0], w[i]->ne[1]) : 0;
        else if (T > 0 && w[i]->ne[0] == w[0]->ne[0]) {
            const int path = mv_path(w[i]->type, w[i]->ne[0], T, tm[i]);
            fused[i] = path ? path : 2;
        } else {
            fused[i] = 0;
        }
    }
    memra_status nst = norm_check(be, norm, w[0]->ne[0]);
    if (nst || T == 0) return nst;
    if (norm && norm->out) { /* the rows are wanted: one fused launch (F32 rows), else the rmsnorm op into out */
        int done;
        if ((nst = cuda_rmsnorm_mv(be, n, w, y, x, T, norm, &done)) || done) return nst;
        const int64_t in = w[0]->ne[0];
        if ((nst = cuda_op_rmsnorm(be, x, in, norm->w, norm->out, in, in, T, norm->eps))) return nst;
        x = norm->out, norm = NULL;
    }
    /* the norm goes into the kernels when every launch of the call takes it */
    int in_kernel = 1;
    for (int i = 0; i < n; i++) in_kernel &= path_takes_norm(fused[i]);
    if (norm && !in_kernel) {
        float *xn;
        if ((nst = norm_to_ws(be, norm, x, w[0]->ne[0], T, 0, &xn))) return nst;
        x = xn, norm = NULL;
    }
    /* the Q6_K groups beside the others (side_branch); an int8 Q6_K group (path 5) beside the Q4_K int8 one
     * reads the planes of one prep, launched on the stream before the fork (the same x, norm and T: the same
     * planes), since the two share cuda_impl.mq */
    const int fork = side_branch(fused, n, T);
    int shared_prep = 0;
    for (int i = 0; fork && i < n; i++) shared_prep |= fused[i] == 5;
    shared_prep = shared_prep && mmvq_takes(T, w[0]->ne[0]);
    memra_status st = MEMRA_OK;
    if (shared_prep) {
        mmvq_prep_launch(x, norm ? (const float *)norm->w->data : NULL, norm ? norm->eps : 0.0f, w[0]->ne[0], (int)T,
                         cuda_of(be)->mq, cuda_of(be)->stream);
        st = CUDA_LAUNCHED(be, "matmul_multi: int8 prep");
    }
    if (!st && fork) st = cuda_side_fork(be);
    for (int pass = 0; !st && pass < 1 + fork; pass++)
        st = multi_groups(be, n, w, y, x, T, norm, fused, tm, fork ? pass + 1 : 0, !shared_prep);
    if (fork) {
        memra_status sj = cuda_side_join(be); /* always: a capture must not end with the branch open */
        if (!st) st = sj;
    }
    return st;
}

/* The launches of matmul_multi's groups (fused[] as it sets them; a group's
 * first weight takes the others of its path, type and layout, which become
 * -1). only: 0 every group on the stream, 1 all but the side branch's (paths
 * 3 and 5), 2 only those, on the side stream. prep: as tc_run's. */
static memra_status multi_groups(memra_backend *be, int n, const memra_weight *const *w, float *const *y,
                                 const float *x, int64_t T, const memra_norm *norm, int *fused, const int *tm,
                                 int only, int prep) {
    for (int i = 0; i < n; i++) {
        if (fused[i] < 0) continue; /* launched with an earlier weight of its type */
        if (only && (fused[i] == 3 || fused[i] == 5) != (only == 2)) continue;
        if (!fused[i]) {
            /* two GEMM weights of one type and row length (27b's GDN qkv and z) share a launch and x's split
             * (cuda_gemm_tc_pair: the same bits where their joint grid takes the K split they took apart) */
            int k = i + 1;
            while (T >= MM_TC_MIN_T && k < n && (fused[k] != 0 || !cuda_gemm_wg_pairs(be, w[i], w[k]))) k++;
            const bool pair = T >= MM_TC_MIN_T && k < n;
            memra_status st = pair ? cuda_gemm_tc_pair(be, w[i], w[k], x, y[i], y[k], T)
                                   : cuda_op_matmul(be, w[i], x, y[i], T, 0);
            if (st) return st;
            if (pair) fused[k] = -1;
            continue;
        }
        const int path = fused[i];
        const uint8_t *W[4];
        int64_t n_out[4];
        float *yk[4];
        int m = 0;
        for (int k = i; k < n; k++) {
            if (fused[k] != path || w[k]->type != w[i]->type || tm[k] != tm[i]) continue;
            fused[k] = -1;
            W[m] = (const uint8_t *)w[k]->data, n_out[m] = w[k]->ne[1], yk[m] = y[k];
            m++;
        }
        memra_status st;
        if (path != 2) {
            mmv_args a = {};
            for (int k = 0; k < m; k++) a.W[k] = W[k], a.n_out[k] = n_out[k], a.y[k] = yk[k];
            a.x = x, a.row_bytes = w[i]->row_bytes, a.in = w[i]->ne[0], a.T = (int)T, a.tm = tm[i];
            st = tc_run(be, path, &a, m, norm, only == 2 ? cuda_of(be)->side : cuda_of(be)->stream, prep);
        } else {
            mv_multi_args a = {};
            for (int k = 0; k < m; k++) a.W[k] = W[k], a.n_out[k] = n_out[k], a.y[k] = yk[k];
            a.row_bytes = w[i]->row_bytes, a.in = w[i]->ne[0], a.T = T, a.tm = tm[i];
            st = matvec_multi_run(be, w[i]->type, a, m, false, x);
        }
        if (st) return st;
    }
    return MEMRA_OK;
}

/* out[t][i] = silu(g_i) * u_i with g = gate x, u = up x. T < 16 with both
 * weights of one type: one launch (mmv or k_matvec_multi), gate row i and up
 * row i in the same warp. Otherwise two matmuls into the workspace and
 * cuda_op_swiglu. */
memra_status cuda_op_matmul_swiglu(memra_backend *be, const memra_weight *gate, const memra_weight *up,
                                   const float *x, float *out, int64_t T, const memra_norm *norm) {
    memra_status st = mm_check(be, gate, x, T);
    if (!st) st = mm_check(be, up, x, T);
    if (st) return st;
    if (gate->ne[0] != up->ne[0] || gate->ne[1] != up->ne[1])
        return CUDA_INVALID(be, "matmul_swiglu: gate {%lld, %lld} and up {%lld, %lld} differ", (long long)gate->ne[0],
                            (long long)gate->ne[1], (long long)up->ne[0], (long long)up->ne[1]);
    if ((st = norm_check(be, norm, gate->ne[0])) || T == 0) return st;
    int64_t in = gate->ne[0], n = gate->ne[1];
    if (norm && norm->out) { /* the rows are wanted: the rmsnorm op into out */
        if ((st = cuda_op_rmsnorm(be, x, in, norm->w, norm->out, in, in, T, norm->eps))) return st;
        x = norm->out, norm = NULL;
    }
    size_t part = ws_rows_bytes(T, n);
    /* one layout for both weights, else the two matmuls below */
    const int tm = cuda_weight_tm(be, gate), same = gate->type == up->type && tm == cuda_weight_tm(be, up);
    /* the one-launch swiglu of the int8 and Q4_K paths (1; 5: T < 16) */
    const int path = !same                   ? 0
                     : T < MM_TC_MIN_T       ? mv_path(gate->type, in, T, tm)
                     : mmvg_path(be, gate->type, in, n);
    if (path == 1 || path == 5) {
        mmv_args a = {};
        a.x = x;
        a.W[0] = (const uint8_t *)gate->data, a.W[1] = (const uint8_t *)up->data;
        a.n_out[0] = a.n_out[1] = n, a.y[0] = out;
        a.row_bytes = gate->row_bytes, a.in = in, a.T = (int)T, a.swiglu = 1, a.tm = tm;
        return tc_run(be, path, &a, 1, norm, cuda_of(be)->stream);
    }
    float *xn = NULL;
    if (norm) { /* the other paths: the xn rows first in the workspace, then room for the g and u rows */
        if ((st = norm_to_ws(be, norm, x, in, T, 2 * part, &xn))) return st;
        x = xn;
    }
    if (T < MM_TC_MIN_T && same) {
        mv_multi_args a = {};
        a.W[0] = (const uint8_t *)gate->data, a.W[1] = (const uint8_t *)up->data;
        a.n_out[0] = n, a.y[0] = out, a.row_bytes = gate->row_bytes, a.in = in, a.T = T, a.tm = tm;
        return matvec_multi_run(be, gate->type, a, 1, true, x);
    }
    size_t xn_bytes = xn ? ws_rows_bytes(T, in) : 0;
    st = cuda_ws_reserve(be, xn_bytes + 2 * part);
    if (st) return st;
    float *g = (float *)((uint8_t *)cuda_of(be)->ws + xn_bytes), *u = (float *)((uint8_t *)g + part);
    /* path 0 with one type and layout: both weights off mmvg (the pair checks type and layout) */
    if (T >= MM_TC_MIN_T && path == 0 && cuda_gemm_wg_pairs(be, gate, up)) {
        st = cuda_gemm_tc_pair(be, gate, up, x, g, u, T); /* one launch for both: their waves shared */
    } else {
        st = cuda_op_matmul(be, gate, x, g, T, 0);
        if (!st) st = cuda_op_matmul(be, up, x, u, T, 0);
    }
    if (!st) st = cuda_op_swiglu(be, g, u, out, n, T);
    return st;
}
