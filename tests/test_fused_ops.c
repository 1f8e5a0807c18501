/* The CPU backend's fused ops against the plain ops they stand for, bit for
 * bit (memcmp): matmul_multi = matmul per weight, matmul_swiglu = matmul,
 * matmul, swiglu, qk_norm_rope_store = rmsnorm (q heads, k heads), rope_neox
 * (q, k), kv_store. The forward pass uses the fused ops, so this equality is
 * what keeps the CPU oracle's logits unchanged by the fusion. Shapes are
 * small but keep the layouts: quantized rows, T > 1 (the dequantize-once
 * path) and T = 1, q heads interleaved with gates, partial RoPE, two slots. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "gguf/quant.h"
#include "test.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}
static void fill(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = frand() * scale;
}

static memra_backend *be;

/* A weight of `type` with random payload and small finite scales (the
 * scheme of test_cpu_ops.c: 16-bit types get valid halves, block types a
 * small leading scale). data is malloc'ed; the caller frees w.host. */
static memra_weight rand_weight(uint32_t type, int64_t ne0, int64_t ne1) {
    memra_weight w = {.name = "test", .type = type, .ne = {ne0, ne1, 1, 1}};
    w.row_bytes = memra_type_row_bytes(type, ne0);
    w.nbytes = w.row_bytes * (uint64_t)ne1;
    uint8_t *raw = malloc(w.nbytes);
    if (type == MEMRA_TYPE_F32) {
        fill((float *)raw, ne0 * ne1, 1.0f);
    } else if (type == MEMRA_TYPE_BF16 || type == MEMRA_TYPE_F16) {
        for (int64_t i = 0; i < ne0 * ne1; i++) {
            uint16_t h = type == MEMRA_TYPE_BF16 ? memra_fp32_to_bf16(frand()) : memra_fp32_to_fp16(frand());
            memcpy(raw + 2 * i, &h, 2);
        }
    } else {
        for (uint64_t i = 0; i < w.nbytes; i++) raw[i] = (uint8_t)(frand() * 128 + 128);
        const memra_type_info *ti = memra_type_get(type);
        for (uint64_t b = 0; b < w.nbytes / ti->block_bytes; b++) {
            uint8_t *blk = raw + b * ti->block_bytes;
            uint16_t d = memra_fp32_to_fp16(0.01f + 0.001f * (float)(b % 7));
            if (type == MEMRA_TYPE_Q6_K) memcpy(blk + ti->block_bytes - 2, &d, 2); /* Q6_K keeps d last */
            else memcpy(blk, &d, 2);
            if (type == MEMRA_TYPE_Q4_K) memcpy(blk + 2, &d, 2); /* dmin */
        }
    }
    w.host = raw;
    w.data = raw;
    return w;
}

static const uint32_t types[] = {MEMRA_TYPE_F32, MEMRA_TYPE_BF16, MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_K,
                                 MEMRA_TYPE_Q6_K};

/* The input of an op with a norm: the rmsnorm op on x (the reference). */
static void normed(const memra_norm *nm, const float *x, float *xn, int64_t in, int64_t T) {
    CHECK(be->ops->rmsnorm(be, x, in, nm->w, xn, in, in, T, nm->eps) == MEMRA_OK, "rmsnorm");
}

static void test_matmul_multi(void) {
    enum { IN = 256, T = 3 };
    static const int64_t outs[4] = {9, 5, 3, 2}; /* unequal heights, like qkv | z | beta | alpha */
    float x[T * IN], xn[T * IN];
    fill(x, T * IN, 3.0f);
    memra_weight nw = rand_weight(MEMRA_TYPE_F32, IN, 1);
    const memra_norm norm = {&nw, 1e-6f, NULL};
    for (size_t k = 0; k < MEMRA_ARRAY_LEN(types); k++) {
        memra_weight w[4];
        const memra_weight *wp[4];
        float *y[4], *ref[4];
        for (int i = 0; i < 4; i++) {
            w[i] = rand_weight(types[k], IN, outs[i]);
            wp[i] = &w[i];
            y[i] = malloc((size_t)(T * outs[i]) * sizeof(float));
            ref[i] = malloc((size_t)(T * outs[i]) * sizeof(float));
        }
        for (int64_t tt = 1; tt <= T; tt += T - 1) { /* T = 1 and T = 3 */
            for (int n = 1; n <= 4; n++) {
                for (int with_norm = 0; with_norm < 2; with_norm++) {
                    for (int i = 0; i < n; i++) memset(y[i], 0xFF, (size_t)(tt * outs[i]) * sizeof(float));
                    CHECK(be->ops->matmul_multi(be, n, wp, y, x, tt, with_norm ? &norm : NULL) == MEMRA_OK,
                          "matmul_multi n=%d", n);
                    if (with_norm) normed(&norm, x, xn, IN, tt);
                    int same = 1;
                    for (int i = 0; i < n; i++) {
                        CHECK(be->ops->matmul(be, wp[i], with_norm ? xn : x, ref[i], tt, 0) == MEMRA_OK, "matmul");
                        same &= !memcmp(y[i], ref[i], (size_t)(tt * outs[i]) * sizeof(float));
                    }
                    CHECK(same, "%s: matmul_multi n=%d T=%lld%s differs from %smatmul", memra_type_name(types[k]), n,
                          (long long)tt, with_norm ? " (norm)" : "", with_norm ? "rmsnorm + " : "");
                }
            }
        }
        for (int i = 0; i < 4; i++) {
            free((void *)w[i].host);
            free(y[i]);
            free(ref[i]);
        }
    }
    memra_weight a = rand_weight(MEMRA_TYPE_F32, 64, 2), b = rand_weight(MEMRA_TYPE_F32, 32, 2);
    const memra_weight *ab[2] = {&a, &b}, *five[5] = {&a, &a, &a, &a, &a};
    float ya[4], yb[4], *yy[5] = {ya, yb, ya, ya, ya};
    CHECK(be->ops->matmul_multi(be, 2, ab, yy, x, 1, NULL) == MEMRA_ERR_INVALID, "matmul_multi accepted unequal ne[0]");
    CHECK(be->ops->matmul_multi(be, 5, five, yy, x, 1, NULL) == MEMRA_ERR_INVALID, "matmul_multi accepted n = 5");
    CHECK(be->ops->matmul_multi(be, 1, ab, yy, x, 1, &norm) == MEMRA_ERR_INVALID,
          "matmul_multi accepted a norm of another length");
    free((void *)a.host);
    free((void *)b.host);
    free((void *)nw.host);
}

static void test_matmul_swiglu(void) {
    enum { IN = 256, NFF = 11, T = 4 };
    float x[T * IN], xn[T * IN], g[T * NFF], u[T * NFF], ref[T * NFF], out[T * NFF];
    fill(x, T * IN, 3.0f);
    memra_weight nw = rand_weight(MEMRA_TYPE_F32, IN, 1);
    const memra_norm norm = {&nw, 1e-6f, NULL};
    for (size_t k = 0; k < MEMRA_ARRAY_LEN(types); k++) {
        memra_weight gw = rand_weight(types[k], IN, NFF), uw = rand_weight(types[k], IN, NFF);
        for (int64_t tt = 1; tt <= T; tt += T - 1) {
            for (int with_norm = 0; with_norm < 2; with_norm++) {
                memset(out, 0xFF, sizeof out);
                CHECK(be->ops->matmul_swiglu(be, &gw, &uw, x, out, tt, with_norm ? &norm : NULL) == MEMRA_OK,
                      "matmul_swiglu");
                if (with_norm) normed(&norm, x, xn, IN, tt);
                CHECK(be->ops->matmul(be, &gw, with_norm ? xn : x, g, tt, 0) == MEMRA_OK, "matmul gate");
                CHECK(be->ops->matmul(be, &uw, with_norm ? xn : x, u, tt, 0) == MEMRA_OK, "matmul up");
                CHECK(be->ops->swiglu(be, g, u, ref, NFF, tt) == MEMRA_OK, "swiglu");
                CHECK(!memcmp(out, ref, (size_t)(tt * NFF) * sizeof(float)),
                      "%s: matmul_swiglu T=%lld%s differs from %smatmul, matmul, swiglu", memra_type_name(types[k]),
                      (long long)tt, with_norm ? " (norm)" : "", with_norm ? "rmsnorm, " : "");
            }
        }
        free((void *)gw.host);
        free((void *)uw.host);
    }
    memra_weight a = rand_weight(MEMRA_TYPE_F32, IN, NFF), b = rand_weight(MEMRA_TYPE_F32, IN, NFF - 1);
    CHECK(be->ops->matmul_swiglu(be, &a, &b, x, out, 1, NULL) == MEMRA_ERR_INVALID,
          "matmul_swiglu accepted unequal shapes");
    free((void *)a.host);
    free((void *)b.host);
    free((void *)nw.host);
}

static void test_qk_norm_rope_store(memra_batch *b) {
    /* 3 q heads of 16 dims, each followed by a 16-dim gate; 1 kv head; rotate 8 dims */
    enum { NH = 3, NKV = 1, HD = 16, NROT = 8, QS = 2 * HD, QT = NH * QS, KV = NKV * HD, T = 3, NCTX = 8,
           NSLOT = 2 };
    static const int32_t runs[2][3] = {{1, 2, 3}, {0, 1, 7}}; /* slot, tokens, pos0 */
    memra_batch_clear(b);
    int32_t toks[2] = {0, 0};
    for (int r = 0; r < 2; r++) memra_batch_add(b, runs[r][0], toks, runs[r][1], runs[r][2]);
    be->ops->batch_upload(be, b);
    float q[T * QT], k[T * KV], v[T * KV], qn[HD], kn[HD];
    float kc[NSLOT * NCTX * KV], vc[NSLOT * NCTX * KV];
    fill(q, T * QT, 2.0f);
    fill(k, T * KV, 2.0f);
    fill(v, T * KV, 1.0f);
    fill(qn, HD, 1.0f);
    fill(kn, HD, 1.0f);
    fill(kc, NSLOT * NCTX * KV, 1.0f);
    fill(vc, NSLOT * NCTX * KV, 1.0f);
    memra_weight qw = {.name = "q_norm", .type = MEMRA_TYPE_F32, .ne = {HD, 1, 1, 1}, .host = qn, .data = qn};
    memra_weight kw = {.name = "k_norm", .type = MEMRA_TYPE_F32, .ne = {HD, 1, 1, 1}, .host = kn, .data = kn};
    qw.row_bytes = kw.row_bytes = qw.nbytes = kw.nbytes = HD * sizeof(float);
    float q2[T * QT], k2[T * KV], kc2[NSLOT * NCTX * KV], vc2[NSLOT * NCTX * KV];
    memcpy(q2, q, sizeof q), memcpy(k2, k, sizeof k), memcpy(kc2, kc, sizeof kc), memcpy(vc2, vc, sizeof vc);
    const float eps = 1e-6f, theta = 1e7f;
    CHECK(be->ops->qk_norm_rope_store(be, b, q, QT, QS, NH, k, v, NKV, HD, &qw, &kw, eps, NROT, theta, kc, vc,
                                      NCTX) == MEMRA_OK,
          "qk_norm_rope_store");
    CHECK(be->ops->rmsnorm(be, q2, QS, &qw, q2, QS, HD, T * NH, eps) == MEMRA_OK, "rmsnorm q");
    CHECK(be->ops->rmsnorm(be, k2, HD, &kw, k2, HD, HD, T * NKV, eps) == MEMRA_OK, "rmsnorm k");
    CHECK(be->ops->rope_neox(be, q2, b, NH, QS, QT, NROT, theta) == MEMRA_OK, "rope q");
    CHECK(be->ops->rope_neox(be, k2, b, NKV, HD, KV, NROT, theta) == MEMRA_OK, "rope k");
    CHECK(be->ops->kv_store(be, b, kc2, vc2, NCTX, KV, k2, v) == MEMRA_OK, "kv_store");
    CHECK(!memcmp(q, q2, sizeof q), "qk_norm_rope_store: q differs from rmsnorm + rope");
    CHECK(!memcmp(k, k2, sizeof k), "qk_norm_rope_store: k differs from rmsnorm + rope");
    CHECK(!memcmp(kc, kc2, sizeof kc) && !memcmp(vc, vc2, sizeof vc),
          "qk_norm_rope_store: caches differ from kv_store");
    CHECK(be->ops->qk_norm_rope_store(be, b, q, QT, QS, NH, k, v, NKV, HD, &qw, &kw, eps, HD + 2, theta, kc, vc,
                                      NCTX) == MEMRA_ERR_INVALID,
          "qk_norm_rope_store accepted n_rot > hd");
}

int main(void) {
    memra_error err = {{0}};
    CHECK(memra_backend_cpu_init(&be, 2, &err) == MEMRA_OK, "cpu init: %s", err.msg);
    if (!be) return test_finish("test_fused_ops");
    memra_batch b;
    CHECK(memra_batch_init(be, 8, 4, &b, &err) == MEMRA_OK, "batch: %s", err.msg);
    test_matmul_multi();
    test_matmul_swiglu();
    test_qk_norm_rope_store(&b);
    memra_batch_free(be, &b);
    memra_backend_free(be);
    return test_finish("test_fused_ops");
}
