/* Device dequantization of every supported weight type, 32 elements at a time.
 *
 * dq32<TYPE>(row, g, v) writes elements [32g, 32g + 32) of a row into v.
 * Every supported type's block holds a whole number of 32-element groups
 * (32-element blocks: one group; NVFP4's 64: two; the K types' and IQ4_XS's
 * 256: eight), so one interface serves embed, matmul and MoE. The formulas
 * follow the ggml block layouts (gguf-py quants.py is the readable source);
 * byte offsets are written out here so this header does not depend on the
 * host structs. dq32 loads bytes (blocks of 17, 18, 22, 34, 110 or 210 bytes
 * have no wider alignment); dq8, the one the matvec uses, reads each lane's
 * 8 payload bytes with dq_ld8 (three aligned 4-byte loads) and fp16 fields
 * with 2-byte loads. bench/kernels/dequant_check.sh compares both, compiled
 * for the host, with memra_dequant_row bit for bit.
 *
 * Supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K
 * IQ4_NL IQ4_XS MXFP4 NVFP4. */
#ifndef MEMRA_CUDA_QUANT_CUH
#define MEMRA_CUDA_QUANT_CUH

#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

#include "backend/cuda/common.cuh"

/* The decoders are __host__ __device__ so that bench/kernels/dequant_check
 * can compare them with the host reference (memra_dequant_row) without a GPU. */
#define DQ_HD __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define DQ_UNROLL _Pragma("unroll")
#define DQ_LD(p) __ldg(p)
#else
#define DQ_UNROLL
#define DQ_LD(p) (*(p))
#endif

DQ_HD float dq_u2f(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

/* fp16 field; every fp16 field of every block type is 2-byte aligned */
DQ_HD float dq_h2f(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    uint16_t h = __ldg((const unsigned short *)p);
#else
    uint16_t h = (uint16_t)p[0] | ((uint16_t)p[1] << 8);
#endif
    return __half2float(__ushort_as_half(h));
}

/* IQ4_NL's 16 levels. On the device they sit in 4 registers and __byte_perm
 * picks one (a constant-memory table serializes when lanes index apart). */
static const int8_t dq_kv_iq4nl_host[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
DQ_HD int dq_kv_iq4nl_at(int i) {
#ifdef __CUDA_ARCH__
    uint32_t lo = i < 8 ? 0xBFAD9881u : 0x26190D01u, hi = i < 8 ? 0xF6EADDCFu : 0x71594535u;
    return (int)(int8_t)(__byte_perm(lo, hi, (unsigned)(i & 7)) & 0xFF);
#else
    return dq_kv_iq4nl_host[i];
#endif
}

/* e2m1 values doubled (ggml's kvalues_mxfp4: 0 1 2 3 4 6 8 12, bit 3 the
 * sign); the scales carry the 1/2. Computed, not looked up. */
DQ_HD int dq_kv_fp4_at(int i) {
    int m = i & 7;
    int a = m < 4 ? m : (m < 6 ? 4 + 2 * (m - 4) : 8 + 4 * (m - 6));
    return (i & 8) ? -a : a;
}

DQ_HD float dq_e8m0_half(uint8_t x) {
    uint32_t bits = x < 2 ? (0x00200000u << x) : ((uint32_t)(x - 1) << 23);
    return dq_u2f(bits);
}

/* Unsigned E4M3 (bias 7) times 1/2; 0 and 0x7F decode to 0 (quants.py).
 * Built from bits (exact): (1 + m/8) 2^(e-7) / 2 has exponent e - 8 and
 * mantissa m << 20; the subnormal e = 0 is m / 512 / 2. */
DQ_HD float dq_ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    uint32_t e = (x >> 3) & 0xF, m = x & 7;
    if (e == 0) return (float)m * (1.0f / 1024.0f);
    return dq_u2f(((e + 119u) << 23) | (m << 20));
}

/* Q3_K's 16 6-bit scales packed in 12 bytes. */
DQ_HD int dq_q3k_scale(const uint8_t *sc, int s) {
    int lo = s < 8 ? (sc[s] & 15) : (sc[s - 8] >> 4);
    int hi = (sc[8 + (s & 3)] >> (2 * (s >> 2))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* Q4_K/Q5_K's 8 pairs of 6-bit (scale, min). */
DQ_HD void dq_k4_scale_min(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

template <int TYPE>
DQ_HD void dq32(const uint8_t *__restrict__ row, int64_t g, float *__restrict__ v);

template <>
DQ_HD void dq32<MEMRA_TYPE_F32>(const uint8_t *__restrict__ row, int64_t g, float *v) {
#ifdef __CUDA_ARCH__
    const float4 *p = (const float4 *)(row + g * 128); /* rows are 128-byte multiples: 16-byte aligned */
DQ_UNROLL
    for (int k = 0; k < 8; k++) {
        float4 a = __ldg(p + k);
        v[4 * k] = a.x, v[4 * k + 1] = a.y, v[4 * k + 2] = a.z, v[4 * k + 3] = a.w;
    }
#else
    memcpy(v, row + g * 128, 128);
#endif
}

template <>
DQ_HD void dq32<MEMRA_TYPE_F16>(const uint8_t *__restrict__ row, int64_t g, float *v) {
#ifdef __CUDA_ARCH__
    const uint4 *p = (const uint4 *)(row + g * 64);
DQ_UNROLL
    for (int k = 0; k < 4; k++) {
        uint4 a = __ldg(p + k);
        uint32_t w[4] = {a.x, a.y, a.z, a.w};
DQ_UNROLL
        for (int i = 0; i < 4; i++) {
            float2 f = __half22float2(*(const __half2 *)&w[i]);
            v[8 * k + 2 * i] = f.x, v[8 * k + 2 * i + 1] = f.y;
        }
    }
#else
    for (int k = 0; k < 32; k++) v[k] = dq_h2f(row + g * 64 + 2 * k);
#endif
}

template <>
DQ_HD void dq32<MEMRA_TYPE_BF16>(const uint8_t *__restrict__ row, int64_t g, float *v) {
#ifdef __CUDA_ARCH__
    const uint4 *p = (const uint4 *)(row + g * 64);
DQ_UNROLL
    for (int k = 0; k < 4; k++) {
        uint4 a = __ldg(p + k);
        uint32_t w[4] = {a.x, a.y, a.z, a.w};
DQ_UNROLL
        for (int i = 0; i < 4; i++) {
            v[8 * k + 2 * i] = __uint_as_float(w[i] << 16);
            v[8 * k + 2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
        }
    }
#else
    for (int k = 0; k < 32; k++) {
        const uint8_t *q = row + g * 64 + 2 * k;
        v[k] = dq_u2f(((uint32_t)q[0] << 16) | ((uint32_t)q[1] << 24));
    }
#endif
}

template <>
DQ_HD void dq32<MEMRA_TYPE_Q4_0>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + g * 18;
    float d = dq_h2f(b);
DQ_UNROLL
    for (int j = 0; j < 16; j++) {
        uint8_t q = DQ_LD(b + 2 + j);
        v[j] = (float)((q & 15) - 8) * d;
        v[j + 16] = (float)((q >> 4) - 8) * d;
    }
}

template <>
DQ_HD void dq32<MEMRA_TYPE_Q4_1>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + g * 20;
    float d = dq_h2f(b), m = dq_h2f(b + 2);
DQ_UNROLL
    for (int j = 0; j < 16; j++) {
        uint8_t q = DQ_LD(b + 4 + j);
        v[j] = (float)(q & 15) * d + m;
        v[j + 16] = (float)(q >> 4) * d + m;
    }
}

template <>
DQ_HD void dq32<MEMRA_TYPE_Q5_0>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + g * 22;
    float d = dq_h2f(b);
    uint32_t qh = (uint32_t)b[2] | ((uint32_t)b[3] << 8) | ((uint32_t)b[4] << 16) | ((uint32_t)b[5] << 24);
DQ_UNROLL
    for (int j = 0; j < 16; j++) {
        uint8_t q = DQ_LD(b + 6 + j);
        int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
        v[j] = (float)(((q & 15) | h0) - 16) * d;
        v[j + 16] = (float)(((q >> 4) | h1) - 16) * d;
    }
}

template <>
DQ_HD void dq32<MEMRA_TYPE_Q5_1>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + g * 24;
    float d = dq_h2f(b), m = dq_h2f(b + 2);
    uint32_t qh = (uint32_t)b[4] | ((uint32_t)b[5] << 8) | ((uint32_t)b[6] << 16) | ((uint32_t)b[7] << 24);
DQ_UNROLL
    for (int j = 0; j < 16; j++) {
        uint8_t q = DQ_LD(b + 8 + j);
        int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
        v[j] = (float)((q & 15) | h0) * d + m;
        v[j + 16] = (float)((q >> 4) | h1) * d + m;
    }
}

template <>
DQ_HD void dq32<MEMRA_TYPE_Q8_0>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + g * 34;
    float d = dq_h2f(b);
DQ_UNROLL
    for (int j = 0; j < 32; j++) v[j] = (float)(int8_t)DQ_LD(b + 2 + j) * d;
}

template <>
DQ_HD void dq32<MEMRA_TYPE_IQ4_NL>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + g * 18;
    float d = dq_h2f(b);
DQ_UNROLL
    for (int j = 0; j < 16; j++) {
        uint8_t q = DQ_LD(b + 2 + j);
        v[j] = (float)dq_kv_iq4nl_at(q & 15) * d;
        v[j + 16] = (float)dq_kv_iq4nl_at(q >> 4) * d;
    }
}

template <>
DQ_HD void dq32<MEMRA_TYPE_MXFP4>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + g * 17;
    float d = dq_e8m0_half(b[0]);
DQ_UNROLL
    for (int j = 0; j < 16; j++) {
        uint8_t q = DQ_LD(b + 1 + j);
        v[j] = (float)dq_kv_fp4_at(q & 15) * d;
        v[j + 16] = (float)dq_kv_fp4_at(q >> 4) * d;
    }
}

/* NVFP4: 64-element blocks of 4 ue4m3 scales then 4 x 8 bytes; sub-block s
 * (16 elements) has its low nibbles first, then its high nibbles. */
template <>
DQ_HD void dq32<MEMRA_TYPE_NVFP4>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + (g >> 1) * 36;
    int s0 = (int)(g & 1) * 2;
DQ_UNROLL
    for (int s = 0; s < 2; s++) {
        float d = dq_ue4m3_half(b[s0 + s]);
        const uint8_t *q = b + 4 + (s0 + s) * 8;
DQ_UNROLL
        for (int j = 0; j < 8; j++) {
            uint8_t x = DQ_LD(q + j);
            v[16 * s + j] = (float)dq_kv_fp4_at(x & 15) * d;
            v[16 * s + 8 + j] = (float)dq_kv_fp4_at(x >> 4) * d;
        }
    }
}

/* Q2_K (84 B / 256): scales[16], qs[64], d, dmin. Group sub = 4h + j uses
 * bits 2j of qs[32h + l] and scales[8h + 2j + l/16]. */
template <>
DQ_HD void dq32<MEMRA_TYPE_Q2_K>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + (g >> 3) * 84;
    int sub = (int)(g & 7), h = sub >> 2, j = sub & 3;
    float d = dq_h2f(b + 80), dmin = dq_h2f(b + 82);
DQ_UNROLL
    for (int half = 0; half < 2; half++) {
        uint8_t sc = b[8 * h + 2 * j + half];
        float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
DQ_UNROLL
        for (int l = 0; l < 16; l++) {
            int q = (DQ_LD(b + 16 + 32 * h + 16 * half + l) >> (2 * j)) & 3;
            v[16 * half + l] = dl * (float)q - ml;
        }
    }
}

/* Q3_K (110 B / 256): hmask[32], qs[64], scales[12], d. */
template <>
DQ_HD void dq32<MEMRA_TYPE_Q3_K>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + (g >> 3) * 110;
    int sub = (int)(g & 7), h = sub >> 2, j = sub & 3;
    float d = dq_h2f(b + 108);
    int mbit = 1 << (4 * h + j);
DQ_UNROLL
    for (int half = 0; half < 2; half++) {
        float dl = d * (float)dq_q3k_scale(b + 96, 8 * h + 2 * j + half);
DQ_UNROLL
        for (int l = 0; l < 16; l++) {
            int ll = 16 * half + l;
            int q = (DQ_LD(b + 32 + 32 * h + ll) >> (2 * j)) & 3;
            q -= (DQ_LD(b + ll) & mbit) ? 0 : 4;
            v[ll] = dl * (float)q;
        }
    }
}

/* Q4_K (144 B / 256): d, dmin, scales[12], qs[128]. Group sub = 2p + hi uses
 * nibble hi of qs[32p + l]. */
template <>
DQ_HD void dq32<MEMRA_TYPE_Q4_K>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + (g >> 3) * 144;
    int sub = (int)(g & 7), p = sub >> 1, hi = sub & 1;
    int sc, m;
    dq_k4_scale_min(b + 4, sub, &sc, &m);
    float d = dq_h2f(b) * (float)sc, dm = dq_h2f(b + 2) * (float)m;
    const uint8_t *q = b + 16 + 32 * p;
DQ_UNROLL
    for (int l = 0; l < 32; l++) {
        uint8_t x = DQ_LD(q + l);
        v[l] = d * (float)(hi ? (x >> 4) : (x & 15)) - dm;
    }
}

/* Q5_K (176 B / 256): d, dmin, scales[12], qh[32], qs[128]; bit sub of qh[l]. */
template <>
DQ_HD void dq32<MEMRA_TYPE_Q5_K>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + (g >> 3) * 176;
    int sub = (int)(g & 7), p = sub >> 1, hi = sub & 1;
    int sc, m;
    dq_k4_scale_min(b + 4, sub, &sc, &m);
    float d = dq_h2f(b) * (float)sc, dm = dq_h2f(b + 2) * (float)m;
    const uint8_t *q = b + 48 + 32 * p;
DQ_UNROLL
    for (int l = 0; l < 32; l++) {
        uint8_t x = DQ_LD(q + l);
        int n = (hi ? (x >> 4) : (x & 15)) + (((DQ_LD(b + 16 + l) >> sub) & 1) << 4);
        v[l] = d * (float)n - dm;
    }
}

/* Q6_K (210 B / 256): ql[128], qh[64], scales[16] (int8), d. Group sub = 4h + k. */
template <>
DQ_HD void dq32<MEMRA_TYPE_Q6_K>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + (g >> 3) * 210;
    int sub = (int)(g & 7), h = sub >> 2, k = sub & 3;
    float d = dq_h2f(b + 208);
    const uint8_t *ql = b + 64 * h + 32 * (k & 1);
    const uint8_t *qh = b + 128 + 32 * h;
DQ_UNROLL
    for (int half = 0; half < 2; half++) {
        float dl = d * (float)(int8_t)b[192 + 8 * h + half + 2 * k];
DQ_UNROLL
        for (int l = 0; l < 16; l++) {
            int ll = 16 * half + l;
            uint8_t x = DQ_LD(ql + ll);
            int n = ((k >> 1) ? (x >> 4) : (x & 15)) | (((DQ_LD(qh + ll) >> (2 * k)) & 3) << 4);
            v[ll] = dl * (float)(n - 32);
        }
    }
}

/* IQ4_XS (136 B / 256): d, scales_h (u16), scales_l[4], qs[128]. */
template <>
DQ_HD void dq32<MEMRA_TYPE_IQ4_XS>(const uint8_t *__restrict__ row, int64_t g, float *v) {
    const uint8_t *b = row + (g >> 3) * 136;
    int ib = (int)(g & 7);
    float d = dq_h2f(b);
    int sh = (int)b[2] | ((int)b[3] << 8);
    int ls = ((b[4 + ib / 2] >> (4 * (ib & 1))) & 15) | (((sh >> (2 * ib)) & 3) << 4);
    float dl = d * (float)(ls - 32);
    const uint8_t *q = b + 8 + 16 * ib;
DQ_UNROLL
    for (int j = 0; j < 16; j++) {
        uint8_t x = DQ_LD(q + j);
        v[j] = dl * (float)dq_kv_iq4nl_at(x & 15);
        v[j + 16] = dl * (float)dq_kv_iq4nl_at(x >> 4);
    }
}

/* 8 consecutive payload bytes from any address, as a little-endian uint64.
 * On the device: three aligned 4-byte loads and funnel shifts instead of
 * eight byte loads (load-instruction count, not bytes, limited the byte
 * version). It may read up to 3 bytes past the 8 (weight_load pads every
 * device copy by 64 bytes). */
DQ_HD uint64_t dq_ld8(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    uintptr_t a = (uintptr_t)p;
    const uint32_t *w = (const uint32_t *)(a & ~(uintptr_t)3);
    unsigned sh = (unsigned)(a & 3) * 8;
    uint32_t w0 = __ldg(w), w1 = __ldg(w + 1), w2 = __ldg(w + 2);
    uint32_t lo = __funnelshift_r(w0, w1, sh), hi = __funnelshift_r(w1, w2, sh);
    return (uint64_t)lo | ((uint64_t)hi << 32);
#else
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u |= (uint64_t)p[i] << (8 * i);
    return u;
#endif
}

/* byte i (compile-time after unrolling) of an dq_ld8 result */
#define DQ_B(u, i) ((int)(((u) >> (8 * (i))) & 0xFF))

/* Aligned 8- and 4-byte payload loads (the caller knows the alignment from
 * the block size: weight rows start 256-byte aligned, see the launchers). */
DQ_HD uint2 dq_ld8a(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __ldg((const uint2 *)p);
#else
    uint2 r;
    memcpy(&r, p, 8);
    return r;
#endif
}

DQ_HD uint32_t dq_ld4a(const uint8_t *p) {
#ifdef __CUDA_ARCH__
    return __ldg((const uint32_t *)p);
#else
    uint32_t r;
    memcpy(&r, p, 4);
    return r;
#endif
}

/* __byte_perm (default mode; every selector nibble here is < 8). */
DQ_HD uint32_t dq_prmt(uint32_t a, uint32_t b, uint32_t s) {
#ifdef __CUDA_ARCH__
    return __byte_perm(a, b, s);
#else
    uint64_t x = ((uint64_t)b << 32) | a;
    uint32_t r = 0;
    for (int k = 0; k < 4; k++) r |= (uint32_t)((x >> (8 * ((s >> (4 * k)) & 7))) & 0xFF) << (8 * k);
    return r;
#endif
}

/* Byte i of w as a float, minus `bias` (= 2^23 + offset): the float whose
 * bits are 0x4B000000 | u is exactly 2^23 + u, so one byte permute and one
 * add replace the integer extract and the I2F conversion (a quarter-rate
 * instruction that limited the decoders). Exact: equals (float)(u - offset). */
#define DQ_M23 8388608.0f
DQ_HD float dq_byte_f(uint32_t w, int i, float bias) { return dq_u2f(dq_prmt(w, 0x4B000000u, 0x7440u | (uint32_t)i)) - bias; }

/* 16-entry byte table lookup for 4 indices at once: w holds 4 bytes, each
 * 0..15; t0..t3 hold the table's bytes 0-3, 4-7, 8-11, 12-15. */
DQ_HD uint32_t dq_lut16(uint32_t w, uint32_t t0, uint32_t t1, uint32_t t2, uint32_t t3) {
    uint32_t s = w | (w >> 4);                    /* byte 0 = i1:i0, byte 2 = i3:i2 */
    uint32_t sel = dq_prmt(s, 0, 0x4420) & 0x7777; /* nibble k = index k, low 3 bits */
    uint32_t lo = dq_prmt(t0, t1, sel), hi = dq_prmt(t2, t3, sel);
    uint32_t m = ((w >> 3) & 0x01010101u) * 0xFFu; /* 0xFF where the index is >= 8 */
    return (hi & m) | (lo & ~m);
}

/* IQ4_NL levels + 128 and doubled e2m1 levels + 128, as lut16 tables. */
#define DQ_IQ4_T 0x3F2D1801u, 0x766A5D4Fu, 0xA6998D81u, 0xF1D9C5B5u
#define DQ_FP4_T 0x83828180u, 0x8C888684u, 0x7D7E7F80u, 0x74787A7Cu

/* ---- 8 elements at a time: dq8<TYPE>(row, g, q, v) writes elements
 * [32g + 8q, 32g + 8q + 8) (q = 0..3). The matvec gives each lane one
 * quarter of a group so that a warp reads weights and activations
 * contiguously (matvec.cuh). Same formulas as dq32. */
template <int TYPE>
DQ_HD void dq8(const uint8_t *__restrict__ row, int64_t g, int q, float *__restrict__ v);

template <>
DQ_HD void dq8<MEMRA_TYPE_F32>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
#ifdef __CUDA_ARCH__
    const float4 *p = (const float4 *)(row + g * 128 + q * 32);
    float4 a = __ldg(p), b = __ldg(p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
#else
    memcpy(v, row + g * 128 + q * 32, 32);
#endif
}

template <>
DQ_HD void dq8<MEMRA_TYPE_F16>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
#ifdef __CUDA_ARCH__
    uint4 a = __ldg((const uint4 *)(row + g * 64 + q * 16));
    uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __half22float2(*(const __half2 *)&w[i]);
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
#else
    for (int k = 0; k < 8; k++) v[k] = dq_h2f(row + g * 64 + q * 16 + 2 * k);
#endif
}

template <>
DQ_HD void dq8<MEMRA_TYPE_BF16>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
#ifdef __CUDA_ARCH__
    uint4 a = __ldg((const uint4 *)(row + g * 64 + q * 16));
    uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(w[i] << 16);
        v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
#else
    for (int k = 0; k < 8; k++) {
        const uint8_t *p = row + g * 64 + q * 16 + 2 * k;
        v[k] = dq_u2f(((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 24));
    }
#endif
}

/* The quantized dq8 decoders below turn 4 payload bytes into 4 small
 * unsigned integers in the bytes of one word (a shift and a mask for the
 * whole word), then each into a float with dq_byte_f. The float arithmetic
 * (d * n - m, or n * d) is the same as dq32's, so dq8 == dq32 bit for bit
 * (dequant_check.sh). Loads: 8-byte aligned uint2 where the block size keeps
 * the payload 8-byte aligned (Q4_K, Q5_K, IQ4_XS), 4-byte for NVFP4 and
 * Q2_K, dq_ld8 otherwise.
 *
 * 4-bit types of 32-element blocks: elements 8q.. are the low nibbles of
 * bytes 8q.. (q < 2) or the high nibbles of bytes 8(q-2).. (q >= 2). */
#define DQ_NIB(u, sh) (((u) >> (sh)) & 0x0F0F0F0Fu)

template <>
DQ_HD void dq8<MEMRA_TYPE_Q4_0>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + g * 18;
    float d = dq_h2f(b);
    int sh = (q >> 1) * 4;
    const uint64_t qs8 = dq_ld8(b + 2 + 8 * (q & 1));
    uint32_t w[2] = {DQ_NIB((uint32_t)qs8, sh), DQ_NIB((uint32_t)(qs8 >> 32), sh)};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dq_byte_f(w[i >> 2], i & 3, DQ_M23 + 8.0f) * d;
}

template <>
DQ_HD void dq8<MEMRA_TYPE_Q4_1>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + g * 20;
    float d = dq_h2f(b), m = dq_h2f(b + 2);
    int sh = (q >> 1) * 4;
    const uint64_t qs8 = dq_ld8(b + 4 + 8 * (q & 1));
    uint32_t w[2] = {DQ_NIB((uint32_t)qs8, sh), DQ_NIB((uint32_t)(qs8 >> 32), sh)};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dq_byte_f(w[i >> 2], i & 3, DQ_M23) * d + m;
}

template <>
DQ_HD void dq8<MEMRA_TYPE_Q5_0>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + g * 22;
    float d = dq_h2f(b);
    uint32_t qh = (uint32_t)b[2] | ((uint32_t)b[3] << 8) | ((uint32_t)b[4] << 16) | ((uint32_t)b[5] << 24);
    const uint8_t *qs = b + 6 + 8 * (q & 1);
    int sh = (q >> 1) * 4;
    const uint64_t qs8 = dq_ld8(qs);
    DQ_UNROLL
    for (int i = 0; i < 8; i++) {
        int j = 8 * q + i; /* element; its 5th bit is bit j of qh */
        v[i] = (float)((int)(((DQ_B(qs8, i) >> sh) & 15) | (((qh >> j) & 1u) << 4)) - 16) * d;
    }
}

template <>
DQ_HD void dq8<MEMRA_TYPE_Q5_1>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + g * 24;
    float d = dq_h2f(b), m = dq_h2f(b + 2);
    uint32_t qh = (uint32_t)b[4] | ((uint32_t)b[5] << 8) | ((uint32_t)b[6] << 16) | ((uint32_t)b[7] << 24);
    const uint8_t *qs = b + 8 + 8 * (q & 1);
    int sh = (q >> 1) * 4;
    const uint64_t qs8 = dq_ld8(qs);
    DQ_UNROLL
    for (int i = 0; i < 8; i++) {
        int j = 8 * q + i;
        v[i] = (float)(int)(((DQ_B(qs8, i) >> sh) & 15) | (((qh >> j) & 1u) << 4)) * d + m;
    }
}

/* int8 s as the unsigned byte s + 128 (flip the top bit), then minus 128 */
template <>
DQ_HD void dq8<MEMRA_TYPE_Q8_0>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + g * 34;
    float d = dq_h2f(b);
    const uint64_t qs8 = dq_ld8(b + 2 + 8 * q);
    uint32_t w[2] = {(uint32_t)qs8 ^ 0x80808080u, (uint32_t)(qs8 >> 32) ^ 0x80808080u};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dq_byte_f(w[i >> 2], i & 3, DQ_M23 + 128.0f) * d;
}

template <>
DQ_HD void dq8<MEMRA_TYPE_IQ4_NL>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + g * 18;
    float d = dq_h2f(b);
    int sh = (q >> 1) * 4;
    const uint64_t qs8 = dq_ld8(b + 2 + 8 * (q & 1));
    uint32_t w[2] = {dq_lut16(DQ_NIB((uint32_t)qs8, sh), DQ_IQ4_T), dq_lut16(DQ_NIB((uint32_t)(qs8 >> 32), sh), DQ_IQ4_T)};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dq_byte_f(w[i >> 2], i & 3, DQ_M23 + 128.0f) * d;
}

template <>
DQ_HD void dq8<MEMRA_TYPE_MXFP4>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + g * 17;
    float d = dq_e8m0_half(b[0]);
    int sh = (q >> 1) * 4;
    const uint64_t qs8 = dq_ld8(b + 1 + 8 * (q & 1));
    uint32_t w[2] = {dq_lut16(DQ_NIB((uint32_t)qs8, sh), DQ_FP4_T), dq_lut16(DQ_NIB((uint32_t)(qs8 >> 32), sh), DQ_FP4_T)};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dq_byte_f(w[i >> 2], i & 3, DQ_M23 + 128.0f) * d;
}

/* NVFP4 blocks are 36 bytes: the payload is 4-byte aligned */
template <>
DQ_HD void dq8<MEMRA_TYPE_NVFP4>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + (g >> 1) * 36;
    int e0 = (int)(g & 1) * 32 + 8 * q; /* first element within the 64-block */
    int s = e0 >> 4, sh = ((e0 >> 3) & 1) * 4;
    float d = dq_ue4m3_half(b[s]);
    const uint8_t *qs = b + 4 + 8 * s;
    uint32_t w[2] = {dq_lut16(DQ_NIB(dq_ld4a(qs), sh), DQ_FP4_T), dq_lut16(DQ_NIB(dq_ld4a(qs + 4), sh), DQ_FP4_T)};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dq_byte_f(w[i >> 2], i & 3, DQ_M23 + 128.0f) * d;
}

/* Q2_K blocks are 84 bytes: the payload is 4-byte aligned */
template <>
DQ_HD void dq8<MEMRA_TYPE_Q2_K>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + (g >> 3) * 84;
    int sub = (int)(g & 7), h = sub >> 2, j = sub & 3;
    uint8_t sc = b[8 * h + 2 * j + (q >> 1)];
    float dl = dq_h2f(b + 80) * (float)(sc & 15), ml = dq_h2f(b + 82) * (float)(sc >> 4);
    const uint8_t *qs = b + 16 + 32 * h + 8 * q;
    uint32_t w[2] = {(dq_ld4a(qs) >> (2 * j)) & 0x03030303u, (dq_ld4a(qs + 4) >> (2 * j)) & 0x03030303u};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dl * dq_byte_f(w[i >> 2], i & 3, DQ_M23) - ml;
}

/* Q3_K: the value is q2 - 4 + 4 * hbit; build q2 + 4 * hbit per byte */
template <>
DQ_HD void dq8<MEMRA_TYPE_Q3_K>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + (g >> 3) * 110;
    int sub = (int)(g & 7), h = sub >> 2, j = sub & 3;
    float dl = dq_h2f(b + 108) * (float)dq_q3k_scale(b + 96, 8 * h + 2 * j + (q >> 1));
    int mb = 4 * h + j;
    const uint64_t qs8 = dq_ld8(b + 32 + 32 * h + 8 * q);
    const uint64_t hm8 = dq_ld8(b + 8 * q);
    uint32_t w[2];
    DQ_UNROLL
    for (int k = 0; k < 2; k++) {
        uint32_t qs = (uint32_t)(qs8 >> (32 * k)), hm = (uint32_t)(hm8 >> (32 * k));
        w[k] = ((qs >> (2 * j)) & 0x03030303u) | (((hm >> mb) & 0x01010101u) << 2);
    }
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dl * dq_byte_f(w[i >> 2], i & 3, DQ_M23 + 4.0f);
}

/* Q4_K blocks are 144 bytes: the payload is 8-byte aligned */
template <>
DQ_HD void dq8<MEMRA_TYPE_Q4_K>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + (g >> 3) * 144;
    int sub = (int)(g & 7), sh = (sub & 1) * 4;
    int sc, m;
    dq_k4_scale_min(b + 4, sub, &sc, &m);
    float d = dq_h2f(b) * (float)sc, dm = dq_h2f(b + 2) * (float)m;
    const uint2 qs = dq_ld8a(b + 16 + 32 * (sub >> 1) + 8 * q);
    uint32_t w[2] = {DQ_NIB(qs.x, sh), DQ_NIB(qs.y, sh)};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = d * dq_byte_f(w[i >> 2], i & 3, DQ_M23) - dm;
}

/* Q5_K blocks are 176 bytes: qs and qh are 8-byte aligned */
template <>
DQ_HD void dq8<MEMRA_TYPE_Q5_K>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + (g >> 3) * 176;
    int sub = (int)(g & 7), sh = (sub & 1) * 4;
    int sc, m;
    dq_k4_scale_min(b + 4, sub, &sc, &m);
    float d = dq_h2f(b) * (float)sc, dm = dq_h2f(b + 2) * (float)m;
    const uint2 qs = dq_ld8a(b + 48 + 32 * (sub >> 1) + 8 * q), qh = dq_ld8a(b + 16 + 8 * q);
    uint32_t w[2] = {DQ_NIB(qs.x, sh) | (((qh.x >> sub) & 0x01010101u) << 4),
                     DQ_NIB(qs.y, sh) | (((qh.y >> sub) & 0x01010101u) << 4)};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = d * dq_byte_f(w[i >> 2], i & 3, DQ_M23) - dm;
}

/* Q6_K blocks are 210 bytes (2-byte aligned): dq_ld8 */
template <>
DQ_HD void dq8<MEMRA_TYPE_Q6_K>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + (g >> 3) * 210;
    int sub = (int)(g & 7), h = sub >> 2, k = sub & 3;
    float dl = dq_h2f(b + 208) * (float)(int8_t)b[192 + 8 * h + (q >> 1) + 2 * k];
    const uint8_t *ql = b + 64 * h + 32 * (k & 1) + 8 * q, *qh = b + 128 + 32 * h + 8 * q;
    int sh = (k >> 1) * 4;
    const uint64_t ql8 = dq_ld8(ql);
    const uint64_t qh8 = dq_ld8(qh);
    uint32_t w[2];
    DQ_UNROLL
    for (int j = 0; j < 2; j++)
        w[j] = DQ_NIB((uint32_t)(ql8 >> (32 * j)), sh) | ((((uint32_t)(qh8 >> (32 * j)) >> (2 * k)) & 0x03030303u) << 4);
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dl * dq_byte_f(w[i >> 2], i & 3, DQ_M23 + 32.0f);
}

/* IQ4_XS blocks are 136 bytes: the payload is 8-byte aligned */
template <>
DQ_HD void dq8<MEMRA_TYPE_IQ4_XS>(const uint8_t *__restrict__ row, int64_t g, int q, float *v) {
    const uint8_t *b = row + (g >> 3) * 136;
    int ib = (int)(g & 7);
    int shh = (int)b[2] | ((int)b[3] << 8);
    int ls = ((b[4 + ib / 2] >> (4 * (ib & 1))) & 15) | (((shh >> (2 * ib)) & 3) << 4);
    float dl = dq_h2f(b) * (float)(ls - 32);
    int sh = (q >> 1) * 4;
    const uint2 qs = dq_ld8a(b + 8 + 16 * ib + 8 * (q & 1));
    uint32_t w[2] = {dq_lut16(DQ_NIB(qs.x, sh), DQ_IQ4_T), dq_lut16(DQ_NIB(qs.y, sh), DQ_IQ4_T)};
    DQ_UNROLL
    for (int i = 0; i < 8; i++) v[i] = dl * dq_byte_f(w[i >> 2], i & 3, DQ_M23 + 128.0f);
}

/* X-macro over the supported types: X(TYPE). */
#define CUDA_FOR_EACH_TYPE(X)                                                                                 \
    X(MEMRA_TYPE_F32) X(MEMRA_TYPE_F16) X(MEMRA_TYPE_BF16) X(MEMRA_TYPE_Q4_0) X(MEMRA_TYPE_Q4_1)              \
        X(MEMRA_TYPE_Q5_0) X(MEMRA_TYPE_Q5_1) X(MEMRA_TYPE_Q8_0) X(MEMRA_TYPE_Q2_K) X(MEMRA_TYPE_Q3_K)        \
            X(MEMRA_TYPE_Q4_K) X(MEMRA_TYPE_Q5_K) X(MEMRA_TYPE_Q6_K) X(MEMRA_TYPE_IQ4_NL) X(MEMRA_TYPE_IQ4_XS) \
                X(MEMRA_TYPE_MXFP4) X(MEMRA_TYPE_NVFP4)

/* Row bytes of n elements of a supported type (n a multiple of 32), 0 if unsupported. */
static inline size_t cuda_type_row_bytes(uint32_t type, int64_t n) {
    switch (type) {
    case MEMRA_TYPE_F32: return (size_t)n * 4;
    case MEMRA_TYPE_F16:
    case MEMRA_TYPE_BF16: return (size_t)n * 2;
    case MEMRA_TYPE_Q4_0:
    case MEMRA_TYPE_IQ4_NL: return (size_t)(n / 32) * 18;
    case MEMRA_TYPE_Q4_1: return (size_t)(n / 32) * 20;
    case MEMRA_TYPE_Q5_0: return (size_t)(n / 32) * 22;
    case MEMRA_TYPE_Q5_1: return (size_t)(n / 32) * 24;
    case MEMRA_TYPE_Q8_0: return (size_t)(n / 32) * 34;
    case MEMRA_TYPE_MXFP4: return (size_t)(n / 32) * 17;
    case MEMRA_TYPE_NVFP4: return n % 64 ? 0 : (size_t)(n / 64) * 36;
    case MEMRA_TYPE_Q2_K: return n % 256 ? 0 : (size_t)(n / 256) * 84;
    case MEMRA_TYPE_Q3_K: return n % 256 ? 0 : (size_t)(n / 256) * 110;
    case MEMRA_TYPE_Q4_K: return n % 256 ? 0 : (size_t)(n / 256) * 144;
    case MEMRA_TYPE_Q5_K: return n % 256 ? 0 : (size_t)(n / 256) * 176;
    case MEMRA_TYPE_Q6_K: return n % 256 ? 0 : (size_t)(n / 256) * 210;
    case MEMRA_TYPE_IQ4_XS: return n % 256 ? 0 : (size_t)(n / 256) * 136;
    default: return 0;
    }
}

#endif
