/* CPU backend ops against straightforward double-precision formulas (the
 * backend.h comments and spec §4-6), on small shapes chosen so that layout
 * mistakes show: d_k != d_v, n_v != n_k, GQA groups > 1, two slots in one
 * batch, partial RoPE, ties in routing and argmax. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "gguf/quant.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}
static void fill(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) x[i] = frand() * scale;
}

static memra_weight weight(uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, const void *data) {
    memra_weight w = {.name = "test", .type = type, .ne = {ne0, ne1, ne2, 1}};
    w.row_bytes = memra_type_row_bytes(type, ne0);
    w.nbytes = w.row_bytes * (uint64_t)(ne1 * ne2);
    w.host = data;
    w.data = (void *)data;
    return w;
}

static double dsilu(double x) { return x / (1.0 + exp(-x)); }
static double dsig(double x) { return 1.0 / (1.0 + exp(-x)); }

/* max |a - b| / max(1e-30, max |b|) */
static double rel_err(const float *a, const double *b, int64_t n) {
    double d = 0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= d)) d = e;
        m = fmax(m, fabs(b[i]));
    }
    return d / m;
}

static memra_backend *be;

/* A batch of runs {slot, n tokens, pos0}. */
static void make_batch(memra_batch *b, int n_runs, const int32_t (*runs)[3]) {
    memra_batch_clear(b);
    int32_t toks[64] = {0};
    for (int r = 0; r < n_runs; r++) memra_batch_add(b, runs[r][0], toks, runs[r][1], runs[r][2]);
    be->ops->batch_upload(be, b);
}

static void test_rmsnorm(void) {
    enum { N = 37, ROWS = 3, XS = 40 };
    float x[ROWS * XS], w[N], y[ROWS * N];
    double ref[ROWS * N];
    fill(x, ROWS * XS, 3.0f);
    fill(w, N, 1.0f);
    memra_weight W = weight(MEMRA_TYPE_F32, N, 1, 1, w);
    for (int r = 0; r < ROWS; r++) {
        double ss = 0;
        for (int i = 0; i < N; i++) ss += (double)x[r * XS + i] * x[r * XS + i];
        for (int i = 0; i < N; i++) ref[r * N + i] = x[r * XS + i] / sqrt(ss / N + 1e-6) * w[i];
    }
    CHECK(be->ops->rmsnorm(be, x, XS, &W, y, N, N, ROWS, 1e-6f) == MEMRA_OK, "rmsnorm");
    CHECK(rel_err(y, ref, ROWS * N) < 1e-6, "rmsnorm err %.3g", rel_err(y, ref, ROWS * N));
    /* in place, strided */
    CHECK(be->ops->rmsnorm(be, x, XS, &W, x, XS, N, ROWS, 1e-6f) == MEMRA_OK, "rmsnorm in place");
    double worst = 0;
    for (int r = 0; r < ROWS; r++) worst = fmax(worst, rel_err(x + r * XS, ref + r * N, N));
    CHECK(worst < 1e-6, "rmsnorm in place err %.3g", worst);
    /* a weight of the wrong length is refused */
    memra_weight W2 = weight(MEMRA_TYPE_F32, N - 1, 1, 1, w);
    CHECK(be->ops->rmsnorm(be, x, XS, &W2, y, N, N, ROWS, 1e-6f) != MEMRA_OK, "rmsnorm accepted a short weight");
}

static void test_matmul(void) {
    enum { IN = 40, OUT = 7, T = 3 };
    float w[OUT * IN], x[T * IN], y[T * OUT];
    double ref[T * OUT];
    fill(w, OUT * IN, 1.0f);
    fill(x, T * IN, 1.0f);
    memra_weight W = weight(MEMRA_TYPE_F32, IN, OUT, 1, w);
    for (int t = 0; t < T; t++)
        for (int o = 0; o < OUT; o++) {
            double s = 0;
            for (int i = 0; i < IN; i++) s += (double)w[o * IN + i] * x[t * IN + i];
            ref[t * OUT + o] = s;
        }
    CHECK(be->ops->matmul(be, &W, x, y, T, 0) == MEMRA_OK, "matmul");
    CHECK(rel_err(y, ref, T * OUT) < 1e-5, "matmul err %.3g", rel_err(y, ref, T * OUT));
    for (int i = 0; i < T * OUT; i++) ref[i] *= 2;
    CHECK(be->ops->matmul(be, &W, x, y, T, 1) == MEMRA_OK, "matmul accumulate");
    CHECK(rel_err(y, ref, T * OUT) < 1e-5, "matmul accumulate err %.3g", rel_err(y, ref, T * OUT));

    /* quantized weights: every token's output is memra_dot_row of the raw
     * row, bit for bit, for T = 1 and T > 1 (the CPU matmul dequantizes a row
     * once for several tokens and relies on this equality) */
    static const uint32_t types[] = {MEMRA_TYPE_BF16, MEMRA_TYPE_F16, MEMRA_TYPE_Q8_0, MEMRA_TYPE_Q4_K,
                                     MEMRA_TYPE_Q6_K, MEMRA_TYPE_IQ4_XS};
    enum { QIN = 256, QOUT = 5, QT = 4 };
    for (size_t k = 0; k < MEMRA_ARRAY_LEN(types); k++) {
        uint32_t ty = types[k];
        size_t rb = memra_type_row_bytes(ty, QIN);
        uint8_t *raw = malloc(rb * QOUT);
        for (size_t i = 0; i < rb * QOUT; i++) raw[i] = (uint8_t)(frand() * 128 + 128);
        /* make every fp16/bf16 field finite: rewrite the whole row as valid halves for the
         * 16-bit types; for block types, set the leading scale(s) to small values */
        for (int o = 0; o < QOUT; o++) {
            uint8_t *row = raw + rb * (size_t)o;
            if (ty == MEMRA_TYPE_BF16 || ty == MEMRA_TYPE_F16) {
                for (int i = 0; i < QIN; i++) {
                    uint16_t h = ty == MEMRA_TYPE_BF16 ? memra_fp32_to_bf16(frand()) : memra_fp32_to_fp16(frand());
                    memcpy(row + 2 * i, &h, 2);
                }
            } else {
                const memra_type_info *ti = memra_type_get(ty);
                for (size_t b = 0; b < rb / ti->block_bytes; b++) {
                    uint8_t *blk = row + b * ti->block_bytes;
                    uint16_t d = memra_fp32_to_fp16(0.01f + 0.001f * (float)b);
                    if (ty == MEMRA_TYPE_Q6_K) memcpy(blk + ti->block_bytes - 2, &d, 2); /* Q6_K keeps d last */
                    else memcpy(blk, &d, 2);
                    if (ty == MEMRA_TYPE_Q4_K) memcpy(blk + 2, &d, 2); /* dmin */
                }
            }
        }
        float qx[QT * QIN], qy[QT * QOUT], q1[QOUT];
        fill(qx, QT * QIN, 1.0f);
        memra_weight QW = weight(ty, QIN, QOUT, 1, raw);
        CHECK(be->ops->matmul(be, &QW, qx, qy, QT, 0) == MEMRA_OK, "matmul %s", memra_type_name(ty));
        int same = 1, finite = 1;
        for (int t = 0; t < QT; t++)
            for (int o = 0; o < QOUT; o++) {
                float d = memra_dot_row(ty, raw + rb * (size_t)o, qx + t * QIN, QIN);
                same &= memcmp(&d, &qy[t * QOUT + o], sizeof d) == 0;
                finite &= isfinite(d);
            }
        CHECK(same && finite, "%s: matmul with T=%d differs from memra_dot_row (finite %d)", memra_type_name(ty), QT,
              finite);
        CHECK(be->ops->matmul(be, &QW, qx + 2 * QIN, q1, 1, 0) == MEMRA_OK, "matmul T=1");
        CHECK(!memcmp(q1, qy + 2 * QOUT, sizeof q1), "%s: token 2 alone differs from token 2 in a batch",
              memra_type_name(ty));
        free(raw);
    }
}

static void test_elementwise(void) {
    enum { N = 9, T = 3 };
    float g[T * N], u[T * N], o[T * N], y[T * N], y0[T * N], gate[T * 2];
    double ref[T * N];
    fill(g, T * N, 4.0f);
    fill(u, T * N, 2.0f);
    fill(gate, T * 2, 3.0f);
    CHECK(be->ops->swiglu(be, g, u, o, N, T) == MEMRA_OK, "swiglu");
    for (int i = 0; i < T * N; i++) ref[i] = dsilu(g[i]) * u[i];
    CHECK(rel_err(o, ref, T * N) < 1e-6, "swiglu err %.3g", rel_err(o, ref, T * N));
    memcpy(y, g, sizeof y);
    memcpy(y0, g, sizeof y0);
    CHECK(be->ops->add(be, y, u, T * N) == MEMRA_OK, "add");
    for (int i = 0; i < T * N; i++) ref[i] = (double)y0[i] + u[i];
    CHECK(rel_err(y, ref, T * N) < 1e-7, "add err");
    memcpy(y, y0, sizeof y);
    CHECK(be->ops->add_sigmoid_scaled(be, y, u, gate, 2, N, T) == MEMRA_OK, "add_sigmoid_scaled");
    for (int t = 0; t < T; t++)
        for (int i = 0; i < N; i++) ref[t * N + i] = y0[t * N + i] + dsig(gate[t * 2]) * u[t * N + i];
    CHECK(rel_err(y, ref, T * N) < 1e-6, "add_sigmoid_scaled err %.3g", rel_err(y, ref, T * N));
}

static void test_embed_argmax(memra_batch *b) {
    enum { H = 32, V = 5 };
    float tab[V * H], out[3 * H];
    fill(tab, V * H, 1.0f);
    uint16_t tab16[V * H];
    for (int i = 0; i < V * H; i++) tab16[i] = memra_fp32_to_bf16(tab[i]);
    memra_weight W = weight(MEMRA_TYPE_F32, H, V, 1, tab), W16 = weight(MEMRA_TYPE_BF16, H, V, 1, tab16);
    int32_t toks[3] = {4, 0, 4};
    memra_batch_clear(b);
    memra_batch_add(b, 0, toks, 3, 0);
    be->ops->batch_upload(be, b);
    CHECK(be->ops->embed(be, &W, b, out) == MEMRA_OK, "embed");
    CHECK(!memcmp(out, tab + 4 * H, H * 4) && !memcmp(out + H, tab, H * 4) && !memcmp(out + 2 * H, tab + 4 * H, H * 4),
          "embed rows");
    CHECK(be->ops->embed(be, &W16, b, out) == MEMRA_OK, "embed bf16");
    CHECK(out[H + 3] == memra_bf16_to_fp32(tab16[3]), "embed bf16 value");
    toks[1] = V;
    memra_batch_clear(b);
    memra_batch_add(b, 0, toks, 3, 0);
    be->ops->batch_upload(be, b);
    CHECK(be->ops->embed(be, &W, b, out) == MEMRA_ERR_INVALID, "embed accepted a token outside the table");

    float l[3 * 6] = {1, 5, 2, 5, 0, 5, /* ties: lowest index */
                      NAN, -1, -3, NAN, -0.5f, -2, /* NaN never wins */
                      -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, 7};
    int32_t am[3];
    CHECK(be->ops->argmax(be, l, 6, 3, am) == MEMRA_OK, "argmax");
    CHECK(am[0] == 1, "argmax tie: got %d, want 1", am[0]);
    CHECK(am[1] == 4, "argmax NaN: got %d, want 4", am[1]);
    CHECK(am[2] == 5, "argmax -inf: got %d, want 5", am[2]);
}

static void test_rope(memra_batch *b) {
    enum { HD = 16, NROT = 8, NH = 2, HS = 32, TS = 64, T = 3 };
    float x[T * TS], x0[T * TS];
    fill(x, T * TS, 1.0f);
    memcpy(x0, x, sizeof x);
    static const int32_t runs[2][3] = {{0, 2, 0}, {1, 1, 1000}}; /* positions 0, 1 and 1000 */
    make_batch(b, 2, runs);
    const double theta = 1e7;
    CHECK(be->ops->rope_neox(be, x, b, NH, HS, TS, NROT, (float)theta) == MEMRA_OK, "rope");
    int32_t pos[T] = {0, 1, 1000};
    double worst = 0;
    int untouched = 1;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < NH; h++) {
            const float *a = x0 + t * TS + h * HS, *r = x + t * TS + h * HS;
            for (int j = 0; j < NROT / 2; j++) {
                double ang = pos[t] * pow(theta, -2.0 * j / NROT);
                double e0 = a[j] * cos(ang) - a[j + NROT / 2] * sin(ang);
                double e1 = a[j + NROT / 2] * cos(ang) + a[j] * sin(ang);
                worst = fmax(worst, fmax(fabs(r[j] - e0), fabs(r[j + NROT / 2] - e1)));
            }
            for (int j = NROT; j < HS; j++) untouched &= r[j] == a[j]; /* rest of the head and the gate */
        }
    CHECK(worst < 1e-6, "rope err %.3g", worst);
    CHECK(untouched, "rope changed dims beyond n_rot");
}

/* Double reference of gated GQA attention for one token. */
static void ref_attention(const float *q, const float *gate, const float *K, const float *V, int n_keys,
                          int kv_stride, int hd, double scale, double *out) {
    double mx = -INFINITY, sum = 0, *w = malloc(sizeof(double) * (size_t)n_keys);
    for (int s = 0; s < n_keys; s++) {
        double d = 0;
        for (int e = 0; e < hd; e++) d += (double)q[e] * K[s * kv_stride + e];
        w[s] = d * scale;
        mx = fmax(mx, w[s]);
    }
    for (int s = 0; s < n_keys; s++) sum += (w[s] = exp(w[s] - mx));
    for (int e = 0; e < hd; e++) {
        double o = 0;
        for (int s = 0; s < n_keys; s++) o += w[s] * V[s * kv_stride + e];
        out[e] = o / sum * (gate ? dsig(gate[e]) : 1.0);
    }
    free(w);
}

static void test_attention(memra_batch *b) {
    enum { NH = 4, NKV = 2, HD = 8, NCTX = 6, SLOTS = 2, KVD = NKV * HD, QS = 2 * NH * HD };
    float *kc = calloc(SLOTS * NCTX * KVD, 4), *vc = calloc(SLOTS * NCTX * KVD, 4);
    /* history per slot, in position order: slot 1 gets 4 tokens, slot 0 gets 2 */
    float K[SLOTS][NCTX * KVD], V[SLOTS][NCTX * KVD], q[5 * QS], out[5 * NH * HD];
    fill(&K[0][0], SLOTS * NCTX * KVD, 1.0f);
    fill(&V[0][0], SLOTS * NCTX * KVD, 1.0f);
    fill(q, 5 * QS, 2.0f);
    /* batch 1: slot 1 tokens at 0..2 and slot 0 at 0..1; batch 2: slot 1 decodes at 3 */
    static const int32_t runs1[2][3] = {{1, 3, 0}, {0, 2, 0}}, runs2[1][3] = {{1, 1, 3}};
    float k1[5 * KVD], v1[5 * KVD];
    for (int t = 0; t < 3; t++) {
        memcpy(k1 + t * KVD, K[1] + t * KVD, KVD * 4);
        memcpy(v1 + t * KVD, V[1] + t * KVD, KVD * 4);
    }
    for (int t = 0; t < 2; t++) {
        memcpy(k1 + (3 + t) * KVD, K[0] + t * KVD, KVD * 4);
        memcpy(v1 + (3 + t) * KVD, V[0] + t * KVD, KVD * 4);
    }
    make_batch(b, 2, runs1);
    CHECK(be->ops->kv_store(be, b, kc, vc, NCTX, KVD, k1, v1) == MEMRA_OK, "kv_store");
    CHECK(!memcmp(kc + (1 * NCTX + 2) * KVD, K[1] + 2 * KVD, KVD * 4), "kv_store row (slot 1, pos 2)");
    CHECK(be->ops->attention(be, b, kc, vc, NCTX, q, q + HD, QS, 2 * HD, NH, NKV, HD, 0.25f, out) == MEMRA_OK,
          "attention");
    double ref[NH * HD], worst = 0;
    int slot_of[5] = {1, 1, 1, 0, 0}, pos_of[5] = {0, 1, 2, 0, 1};
    for (int t = 0; t < 5; t++)
        for (int h = 0; h < NH; h++) {
            int kvh = h / (NH / NKV);
            ref_attention(q + t * QS + h * 2 * HD, q + t * QS + h * 2 * HD + HD, K[slot_of[t]] + kvh * HD,
                          V[slot_of[t]] + kvh * HD, pos_of[t] + 1, KVD, HD, 0.25, ref + h * HD);
            worst = fmax(worst, rel_err(out + t * NH * HD + h * HD, ref + h * HD, HD));
        }
    CHECK(worst < 1e-5, "attention err %.3g", worst);
    /* decode on slot 1 at position 3 over the cached rows, no gate */
    make_batch(b, 1, runs2);
    CHECK(be->ops->kv_store(be, b, kc, vc, NCTX, KVD, K[1] + 3 * KVD, V[1] + 3 * KVD) == MEMRA_OK, "kv_store 2");
    CHECK(be->ops->attention(be, b, kc, vc, NCTX, q, NULL, QS, 2 * HD, NH, NKV, HD, 0.25f, out) == MEMRA_OK,
          "attention 2");
    worst = 0;
    for (int h = 0; h < NH; h++) {
        int kvh = h / (NH / NKV);
        ref_attention(q + h * 2 * HD, NULL, K[1] + kvh * HD, V[1] + kvh * HD, 4, KVD, HD, 0.25, ref);
        worst = fmax(worst, rel_err(out + h * HD, ref, HD));
    }
    CHECK(worst < 1e-5, "attention decode err %.3g", worst);
    free(kc);
    free(vc);
}

/* Double reference of the GDN recurrence (spec §5.3) for one sequence. */
typedef struct gdn_ref {
    double conv[64][3]; /* [conv_dim][d_conv-1] */
    double S[4][8][6];  /* [n_v][d_k][d_v] */
} gdn_ref;

enum { G_NK = 2, G_NV = 4, G_DK = 8, G_DV = 6, G_KD = G_NK * G_DK, G_VD = G_NV * G_DV, G_CD = 2 * G_KD + G_VD };

static void gdn_ref_step(gdn_ref *R, int tiled, const float *mixed, const float *z, float braw_h[G_NV],
                         float araw_h[G_NV], const float *convw, const float *dt, const float *A, const float *nw,
                         double *y) {
    double c[G_CD];
    for (int ch = 0; ch < G_CD; ch++) {
        double acc = convw[ch * 4 + 3] * (double)mixed[ch];
        for (int k = 0; k < 3; k++) acc += convw[ch * 4 + k] * R->conv[ch][k];
        R->conv[ch][0] = R->conv[ch][1];
        R->conv[ch][1] = R->conv[ch][2];
        R->conv[ch][2] = mixed[ch];
        c[ch] = dsilu(acc);
    }
    for (int hh = 0; hh < 2 * G_NK; hh++) {
        double ss = 0;
        for (int e = 0; e < G_DK; e++) ss += c[hh * G_DK + e] * c[hh * G_DK + e];
        double inv = 1.0 / sqrt(ss + 1e-6) * (hh < G_NK ? 1.0 / sqrt((double)G_DK) : 1.0);
        for (int e = 0; e < G_DK; e++) c[hh * G_DK + e] *= inv;
    }
    for (int h = 0; h < G_NV; h++) {
        int kh = tiled ? h % G_NK : h / (G_NV / G_NK);
        const double *q = c + kh * G_DK, *k = c + G_KD + kh * G_DK, *v = c + 2 * G_KD + h * G_DV;
        double beta = dsig(braw_h[h]), x = araw_h[h] + dt[h];
        double g = A[h] * (x > 20 ? x : log1p(exp(x)));
        double o[G_DV], ss = 0;
        for (int i = 0; i < G_DK; i++)
            for (int j = 0; j < G_DV; j++) R->S[h][i][j] *= exp(g);
        for (int j = 0; j < G_DV; j++) {
            double kv = 0;
            for (int i = 0; i < G_DK; i++) kv += R->S[h][i][j] * k[i];
            double d = beta * (v[j] - kv);
            for (int i = 0; i < G_DK; i++) R->S[h][i][j] += k[i] * d;
        }
        for (int j = 0; j < G_DV; j++) {
            o[j] = 0;
            for (int i = 0; i < G_DK; i++) o[j] += R->S[h][i][j] * q[i];
            ss += o[j] * o[j];
        }
        double inv = 1.0 / sqrt(ss / G_DV + 1e-6);
        for (int j = 0; j < G_DV; j++) y[h * G_DV + j] = o[j] * inv * nw[j] * dsilu(z[h * G_DV + j]);
    }
}

static void test_gdn(memra_batch *b, int tiled) {
    float convw[G_CD * 4], dt[G_NV], A[G_NV], nw[G_DV];
    fill(convw, G_CD * 4, 0.8f);
    fill(dt, G_NV, 1.0f);
    for (int h = 0; h < G_NV; h++) A[h] = -expf(frand()); /* ssm_a = -exp(A_log) */
    for (int j = 0; j < G_DV; j++) nw[j] = 1.0f + 0.3f * frand();
    memra_weight Wc = weight(MEMRA_TYPE_F32, 4, G_CD, 1, convw), Wdt = weight(MEMRA_TYPE_F32, G_NV, 1, 1, dt),
                 Wa = weight(MEMRA_TYPE_F32, G_NV, 1, 1, A), Wn = weight(MEMRA_TYPE_F32, G_DV, 1, 1, nw);
    memra_gdn_params p = {&Wc, &Wdt, &Wa, &Wn, 4, G_NK, G_NV, G_DK, G_DV, tiled, 1e-6f, 1e-6f};
    enum { SLOTS = 2, T1 = 5 };
    float *conv = calloc(SLOTS * G_CD * 3, 4), *ssm = calloc(SLOTS * G_NV * G_DV * G_DK, 4);
    float mixed[T1 * G_CD], z[T1 * G_VD], braw[T1 * G_NV], araw[T1 * G_NV], out[T1 * G_VD];
    gdn_ref *R = calloc(SLOTS, sizeof *R);
    double ref[G_VD], worst = 0;
    /* step 1: slot 1 gets 3 tokens, slot 0 gets 2; step 2: both decode one token
     * (slot 0 first this time); step 3: slot 1 alone, 2 more tokens */
    static const int32_t r1[2][3] = {{1, 3, 0}, {0, 2, 0}}, r2[2][3] = {{0, 1, 2}, {1, 1, 3}}, r3[1][3] = {{1, 2, 4}};
    const int32_t(*steps[3])[3] = {r1, r2, r3};
    int n_runs[3] = {2, 2, 1};
    for (int s = 0; s < 3; s++) {
        make_batch(b, n_runs[s], steps[s]);
        int T = b->n_tokens;
        fill(mixed, T * G_CD, 1.5f);
        fill(z, T * G_VD, 2.0f);
        fill(braw, T * G_NV, 2.0f);
        fill(araw, T * G_NV, 2.0f);
        CHECK(be->ops->gdn(be, b, &p, conv, ssm, mixed, z, braw, araw, out) == MEMRA_OK, "gdn");
        for (int t = 0; t < T; t++) {
            int slot = b->slot[b->tok_seq[t]];
            gdn_ref_step(&R[slot], tiled, mixed + t * G_CD, z + t * G_VD, braw + t * G_NV, araw + t * G_NV, convw, dt,
                         A, nw, ref);
            worst = fmax(worst, rel_err(out + t * G_VD, ref, G_VD));
        }
    }
    CHECK(worst < 1e-5, "gdn (kv_tiled %d) err %.3g", tiled, worst);
    /* state layouts: conv [slot][conv_dim][3] raw inputs oldest first; ssm [slot][n_v][d_v][d_k] */
    double cw = 0, sw = 0;
    for (int sl = 0; sl < SLOTS; sl++) {
        for (int ch = 0; ch < G_CD; ch++)
            for (int k = 0; k < 3; k++) cw = fmax(cw, fabs(conv[(sl * G_CD + ch) * 3 + k] - R[sl].conv[ch][k]));
        for (int h = 0; h < G_NV; h++)
            for (int i = 0; i < G_DK; i++)
                for (int j = 0; j < G_DV; j++)
                    sw = fmax(sw, fabs(ssm[((sl * G_NV + h) * G_DV + j) * G_DK + i] - R[sl].S[h][i][j]));
    }
    CHECK(cw == 0, "gdn conv state is not the raw inputs (max diff %.3g)", cw);
    CHECK(sw < 1e-5, "gdn ssm state layout/values differ (max diff %.3g)", sw);
    free(conv);
    free(ssm);
    free(R);
}

static void test_moe(void) {
    enum { E = 6, K = 3, T = 2 };
    float logits[T * E] = {1, 3, 3, 0, 3, 2, /* three-way tie at the top */
                           0.5f, -1, 2, 0.1f, 1.5f, -3};
    int32_t ids[T * K];
    float w[T * K];
    CHECK(be->ops->moe_route(be, logits, T, E, K, ids, w) == MEMRA_OK, "moe_route");
    CHECK(ids[0] == 1 && ids[1] == 2 && ids[2] == 4, "moe tie order: %d %d %d, want 1 2 4", ids[0], ids[1], ids[2]);
    CHECK(fabsf(w[0] - 1.0f / 3) < 1e-6f && fabsf(w[2] - 1.0f / 3) < 1e-6f, "moe tie weights %g %g", w[0], w[2]);
    /* row 2 against softmax -> top-k -> renormalise in double */
    double p[E], sum = 0;
    for (int e = 0; e < E; e++) sum += (p[e] = exp(logits[E + e]));
    int want[K] = {2, 4, 0};
    double ws = 0;
    for (int j = 0; j < K; j++) ws += p[want[j]] / sum;
    for (int j = 0; j < K; j++) {
        CHECK(ids[K + j] == want[j], "moe order: slot %d has %d, want %d", j, ids[K + j], want[j]);
        CHECK(fabs(w[K + j] - p[want[j]] / sum / ws) < 1e-6, "moe weight %d: %g vs %g", j, w[K + j],
              p[want[j]] / sum / ws);
    }

    /* moe_ffn against the formula */
    enum { H = 32, F = 8, NE = 3, NU = 2 };
    float gw[NE * F * H], uw[NE * F * H], dw[NE * H * F], x[T * H], out[T * H];
    fill(gw, NE * F * H, 0.5f);
    fill(uw, NE * F * H, 0.5f);
    fill(dw, NE * H * F, 0.5f);
    fill(x, T * H, 1.0f);
    memra_weight G = weight(MEMRA_TYPE_F32, H, F, NE, gw), U = weight(MEMRA_TYPE_F32, H, F, NE, uw),
                 D = weight(MEMRA_TYPE_F32, F, H, NE, dw);
    memra_moe_params mp = {&G, &U, &D, NE, NU, NULL, NULL, NULL};
    int32_t mid[T * NU] = {2, 0, 1, 2};
    float mw[T * NU] = {0.7f, 0.3f, 0.4f, 0.6f};
    void *scratch = malloc(memra_moe_scratch_bytes(F, NU, T));
    CHECK(be->ops->moe_ffn(be, &mp, x, mid, mw, out, T, scratch) == MEMRA_OK, "moe_ffn");
    double ref[T * H];
    for (int t = 0; t < T; t++)
        for (int o = 0; o < H; o++) {
            double acc = 0;
            for (int j = 0; j < NU; j++) {
                int e = mid[t * NU + j];
                double d = 0;
                for (int f = 0; f < F; f++) {
                    double g = 0, u = 0;
                    for (int i = 0; i < H; i++) {
                        g += (double)gw[(e * F + f) * H + i] * x[t * H + i];
                        u += (double)uw[(e * F + f) * H + i] * x[t * H + i];
                    }
                    d += dw[(e * H + o) * F + f] * dsilu(g) * u;
                }
                acc += mw[t * NU + j] * d;
            }
            ref[t * H + o] = acc;
        }
    CHECK(rel_err(out, ref, T * H) < 1e-5, "moe_ffn err %.3g", rel_err(out, ref, T * H));
    mid[1] = NE; /* out of range expert id */
    CHECK(be->ops->moe_ffn(be, &mp, x, mid, mw, out, T, scratch) == MEMRA_ERR_INVALID, "moe_ffn accepted a bad id");
    free(scratch);
}

/* moe_block against the ops it fuses (bit for bit, with and without a
 * shared expert), a token alone against the batch, and the type rule. */
static void test_moe_block(void) {
    enum { T = 3, H = 32, F = 8, FS = 16, E = 6, K = 3 };
    float gw[E * F * H], uw[E * F * H], dw[E * H * F], sgw[FS * H], suw[FS * H], sdw[H * FS];
    float logits[T * E], xn[T * H], x0[T * H], sg[T], xr[T * H], xo[T * H], out[T * H];
    float g[T * FS], u[T * FS], mid[T * FS], tmp[T * H], w[T * K], w2[T * K];
    int32_t ids[T * K], ids2[T * K];
    fill(gw, E * F * H, 0.5f), fill(uw, E * F * H, 0.5f), fill(dw, E * H * F, 0.5f);
    fill(sgw, FS * H, 0.5f), fill(suw, FS * H, 0.5f), fill(sdw, H * FS, 0.5f);
    fill(logits, T * E, 2.0f), fill(xn, T * H, 1.0f), fill(x0, T * H, 1.0f), fill(sg, T, 2.0f);
    memra_weight G = weight(MEMRA_TYPE_F32, H, F, E, gw), U = weight(MEMRA_TYPE_F32, H, F, E, uw),
                 D = weight(MEMRA_TYPE_F32, F, H, E, dw), SG = weight(MEMRA_TYPE_F32, H, FS, 1, sgw),
                 SU = weight(MEMRA_TYPE_F32, H, FS, 1, suw), SD = weight(MEMRA_TYPE_F32, FS, H, 1, sdw);
    void *sc = malloc(memra_moe_scratch_bytes(F, K, T)), *sb = malloc(memra_moe_block_scratch_bytes(F, K, FS, H, E, T));
    for (int shared = 0; shared < 2; shared++) {
        memra_moe_params p = {&G, &U, &D, E, K, shared ? &SG : NULL, shared ? &SU : NULL, shared ? &SD : NULL};
        memcpy(xr, x0, sizeof xr);
        CHECK(be->ops->moe_route(be, logits, T, E, K, ids, w) == MEMRA_OK, "moe_route");
        CHECK(be->ops->moe_ffn(be, &p, xn, ids, w, out, T, sc) == MEMRA_OK, "moe_ffn");
        CHECK(be->ops->add(be, xr, out, T * H) == MEMRA_OK, "add");
        if (shared) {
            CHECK(be->ops->matmul(be, &SG, xn, g, T, 0) == MEMRA_OK, "shexp gate");
            CHECK(be->ops->matmul(be, &SU, xn, u, T, 0) == MEMRA_OK, "shexp up");
            CHECK(be->ops->swiglu(be, g, u, mid, FS, T) == MEMRA_OK, "swiglu");
            CHECK(be->ops->matmul(be, &SD, mid, tmp, T, 0) == MEMRA_OK, "shexp down");
            CHECK(be->ops->add_sigmoid_scaled(be, xr, tmp, sg, 1, H, T) == MEMRA_OK, "add_sigmoid_scaled");
        }
        memcpy(xo, x0, sizeof xo);
        CHECK(be->ops->moe_block(be, &p, logits, xn, sg, 1, xo, T, ids2, w2, sb) == MEMRA_OK, "moe_block");
        CHECK(!memcmp(xo, xr, sizeof xo), "moe_block (shared %d) differs from the separate ops", shared);
        CHECK(!memcmp(ids, ids2, sizeof ids) && !memcmp(w, w2, sizeof w), "moe_block routing differs");
        /* the last token alone */
        memcpy(xo, x0 + (T - 1) * H, H * sizeof(float));
        CHECK(be->ops->moe_block(be, &p, logits + (T - 1) * E, xn + (T - 1) * H, sg + T - 1, 1, xo, 1, ids2, w2,
                                 sb) == MEMRA_OK,
              "moe_block T = 1");
        CHECK(!memcmp(xo, xr + (T - 1) * H, H * sizeof(float)), "moe_block: a token alone differs from the batch");
    }
    memra_weight U16 = weight(MEMRA_TYPE_F16, H, F, E, uw);
    memra_moe_params bad = {&G, &U16, &D, E, K, NULL, NULL, NULL};
    CHECK(be->ops->moe_block(be, &bad, logits, xn, sg, 1, xo, T, ids2, w2, sb) == MEMRA_ERR_UNSUPPORTED,
          "moe_block accepted gate and up of two types");
    memra_weight SD16 = weight(MEMRA_TYPE_F16, FS, H, 1, sdw);
    memra_moe_params bad2 = {&G, &U, &D, E, K, &SG, &SU, &SD16};
    CHECK(be->ops->moe_block(be, &bad2, logits, xn, sg, 1, xo, T, ids2, w2, sb) == MEMRA_ERR_UNSUPPORTED,
          "moe_block accepted a shared down of another type");
    free(sc);
    free(sb);
}

int main(void) {
    memra_error err = {{0}};
    CHECK(memra_backend_cpu_init(&be, 2, &err) == MEMRA_OK, "cpu init: %s", err.msg);
    if (!be) return test_finish("test_cpu_ops");
    memra_batch b;
    CHECK(memra_batch_init(be, 64, 4, &b, &err) == MEMRA_OK, "batch: %s", err.msg);
    int32_t tok = 0;
    CHECK(memra_batch_add(&b, 0, &tok, 65, 0) == MEMRA_ERR_LIMIT, "batch_add accepted 65 tokens into 64");
    CHECK(memra_batch_add(&b, 0, &tok, 0, 0) == MEMRA_ERR_INVALID, "batch_add accepted 0 tokens");
    test_rmsnorm();
    test_matmul();
    test_elementwise();
    test_embed_argmax(&b);
    test_rope(&b);
    test_attention(&b);
    test_gdn(&b, 1);
    test_gdn(&b, 0);
    test_moe();
    test_moe_block();
    memra_batch_free(be, &b);
    memra_backend_free(be);
    return test_finish("test_cpu_ops");
}
