/* The CUDA backend object: device selection, the one stream, memory,
 * weights, batch upload, graph capture and the ops table. The ops themselves
 * live in one .cu per family (matmul, norm, rope, attention, gdn, moe, misc).
 *
 * Errors: ops have no memra_error argument, so a failing op stores its
 * message in the backend (ops->last_error reads it) and logs it to stderr. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ops.cuh"

memra_status cuda_fail(memra_backend *be, memra_status st, const char *fmt, ...) {
    cuda_impl *c = cuda_of(be);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err.msg, sizeof c->err.msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "memra cuda: %s\n", c->err.msg);
    return st;
}

memra_status cuda_check(memra_backend *be, cudaError_t e, const char *what) {
    if (e == cudaSuccess) return MEMRA_OK;
    return cuda_fail(be, MEMRA_ERR_DEVICE, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Grows one of the workspaces (ws, or xs) to at least bytes; contents are
 * not kept. */
static memra_status ws_grow(memra_backend *be, void **ws, size_t *ws_bytes, int *ws_in_graph, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    if (bytes <= *ws_bytes) return MEMRA_OK;
    if (c->capturing)
        return cuda_fail(be, MEMRA_ERR_INVALID,
                         "workspace: %zu bytes needed while capturing a graph (have %zu); run the same step "
                         "once uncaptured before capturing it",
                         bytes, *ws_bytes);
    /* round up to 16 MiB so that growing steps do not reallocate every call */
    size_t want = (bytes + (16u << 20) - 1) & ~(size_t)((16u << 20) - 1);
    memra_status st = cuda_check(be, cudaStreamSynchronize(c->stream), "workspace: sync");
    if (st) return st;
    if (*ws && *ws_in_graph && c->n_graphs > 0) {
        /* a live graph replays with this address: keep it until the graphs go */
        void **r = (void **)realloc(c->retired, (size_t)(c->n_retired + 1) * sizeof *r);
        if (!r) return cuda_fail(be, MEMRA_ERR_NOMEM, "workspace: out of host memory");
        c->retired = r;
        c->retired[c->n_retired++] = *ws;
    } else if (*ws) {
        cudaFree(*ws);
    }
    *ws = NULL;
    *ws_bytes = 0;
    *ws_in_graph = 0;
    cudaError_t e = cudaMalloc(ws, want);
    if (e != cudaSuccess) {
        *ws = NULL;
        return cuda_fail(be, MEMRA_ERR_NOMEM, "workspace: cudaMalloc(%zu): %s", want, cudaGetErrorString(e));
    }
    *ws_bytes = want;
    return MEMRA_OK;
}

memra_status cuda_ws_reserve(memra_backend *be, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    return ws_grow(be, &c->ws, &c->ws_bytes, &c->ws_in_graph, bytes);
}

memra_status cuda_xs_reserve(memra_backend *be, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    return ws_grow(be, &c->xs, &c->xs_bytes, &c->xs_in_graph, bytes);
}

/* Frees the retired workspaces (no graph can replay with them any more). */
static void ws_free_retired(cuda_impl *c) {
    if (!c->n_retired) return;
    cudaStreamSynchronize(c->stream); /* a replay already queued may still read them */
    for (int i = 0; i < c->n_retired; i++) cudaFree(c->retired[i]);
    free(c->retired);
    c->retired = NULL;
    c->n_retired = 0;
}

/* ---- memory ---- */

static memra_status c_alloc(memra_backend *be, size_t bytes, void **out) {
    *out = NULL;
    if (cuda_of(be)->capturing) return CUDA_INVALID(be, "alloc: not allowed while capturing a graph");
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *out = NULL;
        return cuda_fail(be, MEMRA_ERR_NOMEM, "alloc: cudaMalloc(%zu): %s", bytes, cudaGetErrorString(e));
    }
    return MEMRA_OK;
}

static void c_free(memra_backend *be, void *ptr) {
    if (ptr) cudaFree(ptr);
}

static memra_status c_upload(memra_backend *be, void *dst, const void *src, size_t bytes) {
    if (cuda_of(be)->capturing) return CUDA_INVALID(be, "upload: not allowed while capturing a graph");
    return cuda_check(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_of(be)->stream), "upload");
}

/* Synchronous: the caller reads dst right after. */
static memra_status c_download(memra_backend *be, void *dst, const void *src, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    if (c->capturing) return CUDA_INVALID(be, "download: not allowed while capturing a graph");
    memra_status st = cuda_check(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "download");
    if (st) return st;
    return cuda_check(be, cudaStreamSynchronize(c->stream), "download: sync");
}

static memra_status c_copy(memra_backend *be, void *dst, const void *src, size_t bytes) {
    return cuda_check(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_of(be)->stream), "copy");
}

static memra_status c_zero(memra_backend *be, void *dst, size_t bytes) {
    return cuda_check(be, cudaMemsetAsync(dst, 0, bytes, cuda_of(be)->stream), "zero");
}

/* ---- weights ----
 *
 * A weight's bytes are the file's (no dequantized copy), plus 64 zeroed
 * bytes: the dequantizers' wide loads (dq_ld8) may read a few bytes past a
 * row's last block. Q4_K and Q6_K matmul weights are stored tile-major
 * (common.cuh: the same blocks, reordered), recorded in c->tm by device
 * address. */
#define WEIGHT_PAD 64

/* Whether c_weight_load stores w tile-major: common.cuh's rule. The names
 * decide what the shapes cannot: embedding tables ("token_embd", and any
 * "embd" / "embed": embed reads whole rows; a tied head is token_embd
 * itself, so it stays in the file's order too) and moe.cu's weights
 * ("_exps", "_shexp": its kernels read the file's order); for Q6_K also
 * the output head ("output", "output.weight") and row lengths whose T < 16
 * matmuls would take mmv6 (cuda_q6_tiles). An unnamed weight stays as it
 * is. */
static int tm_wants(const memra_weight *w) {
    static int on = -1;
    if (!env_on("MEMRA_TILED", &on)) return 0;
    if ((w->type != MEMRA_TYPE_Q4_K && w->type != MEMRA_TYPE_Q6_K) || w->ne[0] <= 0 || w->ne[0] % 256 ||
        w->ne[1] <= 0 || w->ne[1] % 16 || w->ne[2] != 1 || w->ne[3] != 1)
        return 0;
    if (w->row_bytes != (uint64_t)(w->ne[0] / 256) * (uint64_t)tm_bb((int)w->type) ||
        w->nbytes != w->row_bytes * (uint64_t)w->ne[1])
        return 0;
    const char *n = w->name;
    if (!n || strstr(n, "embd") || strstr(n, "embed") || strstr(n, "_exps") || strstr(n, "_shexp")) return 0;
    /* Q6_K: not the output head (k_mmv6b), and only where its T < 16 matmuls take the int8 matvec */
    if (w->type == MEMRA_TYPE_Q6_K) {
        const bool head = strncmp(n, "output", 6) == 0 && (n[6] == '\0' || n[6] == '.');
        return !head && cuda_q6_tiles(w->ne[0]);
    }
    return 1;
}

/* Launch contract: grid ceil(n / 256), block 256; src (the file's order)
 * and dst (tile-major) n units of U (Q4_K: 16-byte chunks, 9 a block;
 * Q6_K: 2-byte halves, 105 a block: its 210-byte rows start only 2-byte
 * aligned), rows of nsb blocks, a multiple of 16 rows. Thread i writes
 * unit i of dst: unit c of block b = (tau nsb + sb) 16 + r, i.e. of row
 * 16 tau + r, super-block sb. A load-time copy at device bandwidth. */
template <class U, int N>
__global__ void __launch_bounds__(256) k_tm_tile(const U *__restrict__ src, U *__restrict__ dst, int64_t nsb,
                                                 int64_t n) {
    pdl_start();
    const int64_t i = (int64_t)blockIdx.x * 256 + threadIdx.x;
    if (i >= n) return;
    const int64_t b = i / N, c = i - N * b, r = b & 15, sb = (b >> 4) % nsb, tau = (b >> 4) / nsb;
    dst[i] = src[((16 * tau + r) * nsb + sb) * N + c];
}

/* w's bytes into d tile-major: the file's order into a temporary device
 * buffer, then k_q4k_tile (a copy at device bandwidth, so loading a 20 GB
 * file costs little more than the upload). *tiled = 0 when the temporary
 * buffer cannot be had: d then holds the file's order (still correct, only
 * not tile-major). */
static memra_status tm_upload(memra_backend *be, void *d, const memra_weight *w, int *tiled) {
    cuda_impl *c = cuda_of(be);
    *tiled = 0;
    void *tmp = NULL;
    if (cudaMalloc(&tmp, (size_t)w->nbytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return cuda_check(be, cudaMemcpy(d, w->host, (size_t)w->nbytes, cudaMemcpyHostToDevice), "weight_load: copy");
    }
    memra_status st =
        cuda_check(be, cudaMemcpyAsync(tmp, w->host, (size_t)w->nbytes, cudaMemcpyHostToDevice, c->stream),
                   "weight_load: copy");
    if (!st) {
        const int64_t nsb = w->ne[0] / 256;
        if (w->type == MEMRA_TYPE_Q6_K) {
            const int64_t n2 = (int64_t)(w->nbytes / 2);
            cuda_launch(k_tm_tile<uint16_t, 105>, (unsigned)((n2 + 255) / 256), 256, 0, c->stream,
                        (const uint16_t *)tmp, (uint16_t *)d, nsb, n2);
        } else {
            const int64_t n16 = (int64_t)(w->nbytes / 16);
            cuda_launch(k_tm_tile<uint4, 9>, (unsigned)((n16 + 255) / 256), 256, 0, c->stream, (const uint4 *)tmp,
                        (uint4 *)d, nsb, n16);
        }
        st = CUDA_LAUNCHED(be, "weight_load: tile-major");
    }
    if (!st) st = cuda_check(be, cudaDeviceSynchronize(), "weight_load: tile-major sync"); /* and the pad's memset */
    cudaFree(tmp);
    *tiled = !st;
    return st;
}

/* c->tm: the index of the first address >= p */
static int tm_lower(const cuda_impl *c, const void *p) {
    int lo = 0, hi = c->n_tm;
    while (lo < hi) {
        const int m = (lo + hi) / 2;
        if ((uintptr_t)c->tm[m] < (uintptr_t)p) lo = m + 1;
        else hi = m;
    }
    return lo;
}

static memra_status tm_add(memra_backend *be, void *p) {
    cuda_impl *c = cuda_of(be);
    if (c->n_tm == c->tm_cap) {
        const int cap = c->tm_cap ? 2 * c->tm_cap : 256;
        void **t = (void **)realloc(c->tm, (size_t)cap * sizeof *t);
        if (!t) return cuda_fail(be, MEMRA_ERR_NOMEM, "weight_load: out of host memory");
        c->tm = t, c->tm_cap = cap;
    }
    const int i = tm_lower(c, p);
    memmove(c->tm + i + 1, c->tm + i, (size_t)(c->n_tm - i) * sizeof *c->tm);
    c->tm[i] = p;
    c->n_tm++;
    return MEMRA_OK;
}

static void tm_del(cuda_impl *c, const void *p) {
    const int i = tm_lower(c, p);
    if (i == c->n_tm || c->tm[i] != p) return;
    memmove(c->tm + i, c->tm + i + 1, (size_t)(c->n_tm - i - 1) * sizeof *c->tm);
    c->n_tm--;
}

int cuda_weight_tm(memra_backend *be, const memra_weight *w) {
    const cuda_impl *c = cuda_of(be);
    if (!w || !w->data || (w->type != MEMRA_TYPE_Q4_K && w->type != MEMRA_TYPE_Q6_K) || !c->n_tm) return 0;
    const int i = tm_lower(c, w->data);
    return i < c->n_tm && c->tm[i] == w->data;
}

static memra_status c_weight_load(memra_backend *be, memra_weight *w) {
    if (w->data) return MEMRA_OK;
    if (!w->host) return CUDA_INVALID(be, "weight_load %s: no host data", w->name ? w->name : "?");
    void *d = NULL;
    memra_status st = c_alloc(be, (size_t)w->nbytes + WEIGHT_PAD, &d);
    if (st) return st;
    st = cuda_check(be, cudaMemset((uint8_t *)d + w->nbytes, 0, WEIGHT_PAD), "weight_load: pad");
    int tiled = 0;
    if (!st && tm_wants(w))
        st = tm_upload(be, d, w, &tiled);
    else if (!st)
        st = cuda_check(be, cudaMemcpy(d, w->host, (size_t)w->nbytes, cudaMemcpyHostToDevice), "weight_load: copy");
    if (!st && tiled) st = tm_add(be, d);
    if (st) {
        cudaFree(d);
        return st;
    }
    w->data = d;
    return MEMRA_OK;
}

static void c_weight_release(memra_backend *be, memra_weight *w) {
    if (w->data) tm_del(cuda_of(be), w->data);
    if (w->data && w->data != w->host) cudaFree(w->data);
    w->data = NULL;
}

/* moe.cu reads its expert and shared-expert weights in the file's order;
 * tm_wants never tiles them (3-D, or named "_exps" / "_shexp"), and this
 * check keeps a weight named otherwise from reaching it tile-major. */
static memra_status moe_check(memra_backend *be, const memra_moe_params *p) {
    const memra_weight *ws[6] = {p->gate_exps, p->up_exps, p->down_exps, p->gate_shexp, p->up_shexp, p->down_shexp};
    for (int i = 0; i < 6; i++)
        if (cuda_weight_tm(be, ws[i]))
            return CUDA_INVALID(be, "moe %s: the weight is tile-major (moe.cu reads the file's order)",
                                ws[i]->name ? ws[i]->name : "?");
    return MEMRA_OK;
}

static memra_status c_moe_ffn(memra_backend *be, const memra_moe_params *p, const float *x, const int32_t *ids,
                              const float *w, float *out, int64_t T, void *scratch) {
    memra_status st = moe_check(be, p);
    return st ? st : cuda_op_moe_ffn(be, p, x, ids, w, out, T, scratch);
}

static memra_status c_moe_block(memra_backend *be, const memra_moe_params *p, const float *logits, const float *xn,
                                const float *sg, int64_t sg_stride, float *x, int64_t T, int32_t *ids, float *w,
                                void *scratch) {
    memra_status st = moe_check(be, p);
    return st ? st : cuda_op_moe_block(be, p, logits, xn, sg, sg_stride, x, T, ids, w, scratch);
}

static memra_status c_batch_upload(memra_backend *be, memra_batch *b) {
    cuda_impl *c = cuda_of(be);
    if (c->capturing) return CUDA_INVALID(be, "batch_upload: call it before graph_launch, not inside a capture");
    if (b->n_tokens < 0 || b->n_tokens > b->max_tokens || b->n_seqs < 0 || b->n_seqs > b->max_seqs)
        return CUDA_INVALID(be, "batch_upload: %d tokens / %d seqs over capacity %d / %d", b->n_tokens, b->n_seqs,
                            b->max_tokens, b->max_seqs);
    size_t nt = (size_t)b->n_tokens * 4, ns = (size_t)b->n_seqs * 4;
    struct {
        void *d;
        const void *h;
        size_t n;
    } cp[] = {{b->d_tokens, b->tokens, nt},
              {b->d_pos, b->pos, nt},
              {b->d_tok_seq, b->tok_seq, nt},
              {b->d_seq_start, b->seq_start, ns + 4},
              {b->d_slot, b->slot, ns}};
    for (size_t i = 0; i < sizeof cp / sizeof cp[0]; i++) {
        if (!cp[i].n) continue;
        memra_status st = cuda_check(be, cudaMemcpyAsync(cp[i].d, cp[i].h, cp[i].n, cudaMemcpyHostToDevice, c->stream),
                                     "batch_upload");
        if (st) return st;
    }
    return MEMRA_OK;
}

static memra_status c_sync(memra_backend *be) {
    return cuda_check(be, cudaStreamSynchronize(cuda_of(be)->stream), "sync");
}

/* ---- the side stream (common.cuh) ---- */

memra_status cuda_side_fork(memra_backend *be) {
    cuda_impl *c = cuda_of(be);
    memra_status st = cuda_check(be, cudaEventRecord(c->fork_ev, c->stream), "side stream: fork");
    return st ? st : cuda_check(be, cudaStreamWaitEvent(c->side, c->fork_ev, 0), "side stream: fork wait");
}

memra_status cuda_side_join(memra_backend *be) {
    cuda_impl *c = cuda_of(be);
    memra_status st = cuda_check(be, cudaEventRecord(c->join_ev, c->side), "side stream: join");
    return st ? st : cuda_check(be, cudaStreamWaitEvent(c->stream, c->join_ev, 0), "side stream: join wait");
}

/* ---- graph capture ---- */

struct memra_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

static memra_status c_graph_begin(memra_backend *be) {
    cuda_impl *c = cuda_of(be);
    if (c->capturing) return CUDA_INVALID(be, "graph_begin: already capturing");
    /* thread-local mode: other host threads may still allocate */
    memra_status st =
        cuda_check(be, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "graph_begin");
    if (st == MEMRA_OK) c->capturing = 1;
    return st;
}

static memra_status c_graph_end(memra_backend *be, memra_graph **out) {
    cuda_impl *c = cuda_of(be);
    *out = NULL;
    if (!c->capturing) return CUDA_INVALID(be, "graph_end: not capturing");
    c->capturing = 0;
    cudaGraph_t g = NULL;
    memra_status st = cuda_check(be, cudaStreamEndCapture(c->stream, &g), "graph_end: end capture");
    if (st) return st;
    memra_graph *mg = (memra_graph *)calloc(1, sizeof *mg);
    if (!mg) {
        cudaGraphDestroy(g);
        return cuda_fail(be, MEMRA_ERR_NOMEM, "graph_end: out of host memory");
    }
    mg->graph = g;
    st = cuda_check(be, cudaGraphInstantiate(&mg->exec, g, 0), "graph_end: instantiate");
    if (st) {
        cudaGraphDestroy(g);
        free(mg);
        return st;
    }
    *out = mg;
    c->n_graphs++;
    if (c->ws) c->ws_in_graph = 1;
    if (c->xs) c->xs_in_graph = 1;
    return MEMRA_OK;
}

static memra_status c_graph_launch(memra_backend *be, memra_graph *g) {
    if (!g) return CUDA_INVALID(be, "graph_launch: NULL graph");
    return cuda_check(be, cudaGraphLaunch(g->exec, cuda_of(be)->stream), "graph_launch");
}

static void c_graph_free(memra_backend *be, memra_graph *g) {
    if (!g) return;
    cuda_impl *c = cuda_of(be);
    if (g->exec) cudaGraphExecDestroy(g->exec);
    if (g->graph) cudaGraphDestroy(g->graph);
    free(g);
    if (c->n_graphs > 0 && --c->n_graphs == 0) {
        ws_free_retired(c);
        c->ws_in_graph = 0;
        c->xs_in_graph = 0;
    }
}

static const char *c_last_error(memra_backend *be) { return cuda_of(be)->err.msg; }

static void c_destroy(memra_backend *be) {
    if (!be) return;
    cuda_impl *c = cuda_of(be);
    if (c) {
        if (c->capturing) {
            cudaGraph_t g = NULL;
            cudaStreamEndCapture(c->stream, &g);
            if (g) cudaGraphDestroy(g);
        }
        cudaStreamSynchronize(c->stream);
        cudaStreamSynchronize(c->side);
        ws_free_retired(c);
        if (c->ws) cudaFree(c->ws);
        if (c->xs) cudaFree(c->xs);
        if (c->tc_scale) cudaFree(c->tc_scale);
        if (c->gdn_cnt) cudaFree(c->gdn_cnt);
        if (c->mq) cudaFree(c->mq);
        if (c->am) cudaFree(c->am);
        cudaEventDestroy(c->fork_ev);
        cudaEventDestroy(c->join_ev);
        cudaStreamDestroy(c->side);
        cudaStreamDestroy(c->stream);
        free(c->tm);
        free(c);
    }
    free(be);
}

/* Filled by assignment (not positionally) so that entries added to
 * memra_backend_ops elsewhere cannot shift ours. */
static memra_backend_ops cuda_ops;

int cuda_pdl;
int cuda_sm90;

static void cuda_ops_fill(memra_backend_ops *o) {
    memset(o, 0, sizeof *o);
    o->alloc = c_alloc;
    o->free = c_free;
    o->upload = c_upload;
    o->download = c_download;
    o->copy = c_copy;
    o->prof_begin = cuda_prof_begin;
    o->prof_mark = cuda_prof_mark;
    o->prof_end = cuda_prof_end;
#ifdef MEMRA_TIMELINE
    o->timeline_begin = cuda_timeline_begin;
    o->timeline_end = cuda_timeline_end;
#endif
    o->zero = c_zero;
    o->weight_load = c_weight_load;
    o->weight_release = c_weight_release;
    o->batch_upload = c_batch_upload;
    o->sync = c_sync;
    o->embed = cuda_op_embed;
    o->rmsnorm = cuda_op_rmsnorm;
    o->matmul = cuda_op_matmul;
    o->matmul_multi = cuda_op_matmul_multi;
    o->matmul_swiglu = cuda_op_matmul_swiglu;
    o->add = cuda_op_add;
    o->add_sigmoid_scaled = cuda_op_add_sigmoid_scaled;
    o->swiglu = cuda_op_swiglu;
    o->rope_neox = cuda_op_rope_neox;
    o->kv_store = cuda_op_kv_store;
    o->qk_norm_rope_store = cuda_op_qk_norm_rope_store;
    o->attention = cuda_op_attention;
    o->gdn = cuda_op_gdn;
    o->moe_route = cuda_op_moe_route;
    o->moe_ffn = c_moe_ffn;
    o->moe_block = c_moe_block;
    o->argmax = cuda_op_argmax;
    o->destroy = c_destroy;
    o->graph_begin = c_graph_begin;
    o->graph_end = c_graph_end;
    o->graph_launch = c_graph_launch;
    o->graph_free = c_graph_free;
    o->last_error = c_last_error;
}

extern "C" memra_status memra_backend_cuda_init(memra_backend **out, int device, memra_error *err) {
    *out = NULL;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return memra_errorf(err, MEMRA_ERR_UNSUPPORTED, "cuda: no CUDA device (%s)",
                            e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
    if (device < 0 || device >= n)
        return memra_errorf(err, MEMRA_ERR_INVALID, "cuda: device %d out of range (%d devices)", device, n);
    e = cudaSetDevice(device);
    if (e != cudaSuccess) return memra_errorf(err, MEMRA_ERR_DEVICE, "cuda: cudaSetDevice(%d): %s", device,
                                              cudaGetErrorString(e));
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess)
        return memra_errorf(err, MEMRA_ERR_DEVICE, "cuda: device properties: %s", cudaGetErrorString(e));
    if (prop.major < 8)
        return memra_errorf(err, MEMRA_ERR_UNSUPPORTED, "cuda: %s is sm_%d%d; memra needs sm_80 or newer", prop.name,
                            prop.major, prop.minor);
    memra_backend *be = (memra_backend *)calloc(1, sizeof *be);
    cuda_impl *c = (cuda_impl *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return memra_errorf(err, MEMRA_ERR_NOMEM, "cuda: out of host memory");
    }
    c->device = device;
    c->sm_count = prop.multiProcessorCount;
    e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
        free(be);
        free(c);
        return memra_errorf(err, MEMRA_ERR_DEVICE, "cuda: stream: %s", cudaGetErrorString(e));
    }
    e = cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->fork_ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->join_ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        if (c->fork_ev) cudaEventDestroy(c->fork_ev);
        if (c->side) cudaStreamDestroy(c->side);
        cudaStreamDestroy(c->stream);
        free(be);
        free(c);
        return memra_errorf(err, MEMRA_ERR_DEVICE, "cuda: side stream: %s", cudaGetErrorString(e));
    }
    e = cudaMalloc((void **)&c->gdn_cnt, GDN_CNT_WORDS * sizeof(unsigned));
    if (e == cudaSuccess) e = cudaMemset(c->gdn_cnt, 0, GDN_CNT_WORDS * sizeof(unsigned));
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->mq, CUDA_MQ_BYTES);
    if (e == cudaSuccess) e = cudaMalloc((void **)&c->am, CUDA_AM_BYTES);
    if (e == cudaSuccess) e = cudaMemset(c->am, 0, CUDA_AM_BYTES);
    if (e != cudaSuccess) {
        if (c->gdn_cnt) cudaFree(c->gdn_cnt);
        if (c->mq) cudaFree(c->mq);
        if (c->am) cudaFree(c->am);
        cudaEventDestroy(c->fork_ev);
        cudaEventDestroy(c->join_ev);
        cudaStreamDestroy(c->side);
        cudaStreamDestroy(c->stream);
        free(be);
        free(c);
        return memra_errorf(err, MEMRA_ERR_DEVICE, "cuda: gdn counters, mmvq planes, argmax scratch: %s",
                            cudaGetErrorString(e));
    }
    if (!cuda_ops.alloc) cuda_ops_fill(&cuda_ops);
    /* PDL (common.cuh) needs sm_90; on unless MEMRA_PDL=0 (+3-4% decode with
     * k_mmvq's pdl_trigger, bench/results/2026-12-03g-h200.md) */
    const char *pdl = getenv("MEMRA_PDL");
    cuda_pdl = prop.major >= 9 && !(pdl && strcmp(pdl, "0") == 0);
    cuda_sm90 = prop.major >= 9;
    be->ops = &cuda_ops;
    be->name = "cuda";
    be->impl = c;
    *out = be;
    return MEMRA_OK;
}
