/* Prototype (lab only, not wired into the backend): the Q4_K decode matvec
 * on the INTEGER tensor cores, T = 1, against the production k_mmv
 * (src/backend/cuda/mmv.cuh). bench/results/2026-12-03b-h200.md has why:
 * k_mmv executes ~1,000 instructions per warp and super-block (32 rows x
 * 256 weights), as many issue cycles as the weights' DRAM time.
 *
 * Here A = the raw nibbles as u8 (one and-mask, or shift and mask, gives 4
 * weights), mma.sync m16n8k32 u8 x s8 -> s32, one MMA per 16-row tile and
 * 32-element sub-block (exact integer products and sums, so any k order
 * gives the same bits). B = the activations as a 22-bit fixed-point value
 * per element, X = rint(x 2^e) with one e per (token, super-block) so that
 * max |X| is in [2^20, 2^21), split into three signed 8-bit limbs X = 2^16
 * l0 + 2^8 l1 + l2 (balanced digits) in B columns 0, 1, 2. A separate
 * launch (k_mmvq_prep, mmvq.cuh) converts x once per token: limb planes in the
 * fragment order of the MMA, the per-sub-block sums S_j of X (the Q4_K min
 * term) and 2^-e. Per sub-block j the 6-bit scale is applied by an integer
 * multiply-add (A_l += sc_j C_l, exact: |A_l| < 2^25); per super-block, in
 * fp32, acc_l += d 2^-e A_l and m += dmin 2^-e sum_j m_j S_j; per row,
 * y = ((2^16 acc_0 + 2^8 acc_1) + acc_2) - m. Every order depends on the
 * row length only.
 *
 * Variants (main): v0 = TL 2 tiles per warp, NB 1 super-block in flight,
 * production ks: the configuration measured in run 12. The others (TL, NB,
 * ks in main's table) test whether issuing a warp's super-block loads
 * together (NB > 0) or software-pipelined (NB < 0) closes the gap on the
 * decode-sized matrices.
 *
 * Also: the drop-in version with the conversion inside the kernel
 * (mmvq_inkernel.cuh, k_mmvq_ik<NP, PF>), with and without an input norm,
 * back to back against k_mmv with the same norm ("INKERNEL" lines); and the
 * conversion once per token (production's k_mmvq_prep) feeding
 * k_mmvq_lab<TL, 1, true> or production's k_mmvq, as PDL pipelines in a
 * CUDA graph ("PIPE" lines, the input norm included, checked against the
 * CPU's rmsnorm + rows).
 *
 * Checks: T = 1 against the CPU reference (memra_dot_row, all rows,
 * max|gpu - cpu| / max|cpu| <= 1e-5, the gate's tolerance), every variant.
 * Times: median of 15 single launches after an L2 flush (launch latency
 * included): k_mmv, the prep alone, the matvec alone, prep + matvec; and
 * "stream": 64 launches back to back over rotating weight copies (> L2),
 * per launch, which is closer to what a decode step sees.
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh mmvq_lab [in n_out] */
#include <math.h>

#include "mmvq_inkernel.cuh"
#include "lab.cuh"

/* The activations come from production's k_mmvq_prep (mmvq.cuh, a block
 * per 8 super-blocks): limb planes [nsb][768], then S [nsb][8] and 2^-e [nsb]
 * (T = 1), with or without the input norm. */

/* One super-block's raw bytes for a warp's TL 16-row tiles: thread (g =
 * lane / 4, t = lane % 4) holds rows g, g + 8 of each tile (the 16-byte
 * head: d, dmin, scales; its 4 x 8 qs bytes at 32 p + 8 t) and, for g < 3,
 * limb g's B fragments. */
template <int TL>
struct q_raw {
    uint4 head[TL][2];
    uint2 qs[TL][2][4];
    uint4 bq[4];
};

template <int TL>
__device__ __forceinline__ void q_fetch_w(q_raw<TL> &b, const uint8_t *const (&rows)[TL][2], int sb, int t) {
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint8_t *p = rows[tl][r] + (int64_t)sb * 144;
            b.head[tl][r] = __ldg((const uint4 *)p);
#pragma unroll
            for (int k = 0; k < 4; k++) b.qs[tl][r][k] = __ldg((const uint2 *)(p + 16 + 32 * k + 8 * t));
        }
}

template <int TL>
__device__ __forceinline__ void q_fetch_x(q_raw<TL> &b, const uint8_t *planes, int sb, int g, int t) {
#pragma unroll
    for (int i = 0; i < 4; i++) b.bq[i] = make_uint4(0u, 0u, 0u, 0u);
    if (g < 3) {
        const uint4 *bp = (const uint4 *)(planes + (int64_t)sb * MQ_SB_B + g * 256 + t * 64);
#pragma unroll
        for (int i = 0; i < 4; i++) b.bq[i] = __ldg(bp + i);
    }
}

template <int TL>
__device__ __forceinline__ void q_fetch(q_raw<TL> &b, const uint8_t *const (&rows)[TL][2], const uint8_t *planes,
                                        int sb, int g, int t) {
    q_fetch_w(b, rows, sb, t);
    q_fetch_x(b, planes, sb, g, t);
}

/* The MMAs and the fp32 update of super-block sb from b (see the header). */
template <int TL>
__device__ __forceinline__ void q_step(const q_raw<TL> &b, int sb, const float *ssum, const float *sxinv,
                                       float (&accf)[TL][4], float (&mt)[TL][2]) {
    const float sx = __ldg(sxinv + sb);
    int A[TL][4];
    uint32_t scw[TL][2][2];
#pragma unroll
    for (int tl = 0; tl < TL; tl++) {
        A[tl][0] = A[tl][1] = A[tl][2] = A[tl][3] = 0;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint4 h = b.head[tl][r];
            scw[tl][r][0] = h.y & 0x3F3F3F3Fu;
            scw[tl][r][1] = (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u);
        }
    }
#pragma unroll
    for (int p = 0; p < 4; p++) {
        const uint4 bb = b.bq[p];
#pragma unroll
        for (int tl = 0; tl < TL; tl++) {
            uint32_t lo[2][2], hi[2][2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint2 w = b.qs[tl][r][p];
                lo[r][0] = w.x & 0x0F0F0F0Fu, lo[r][1] = w.y & 0x0F0F0F0Fu;
                hi[r][0] = (w.x >> 4) & 0x0F0F0F0Fu, hi[r][1] = (w.y >> 4) & 0x0F0F0F0Fu;
            }
            int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
            mmvq_imma(c0, lo[0][0], lo[1][0], lo[0][1], lo[1][1], bb.x, bb.y); /* sub-block 2 p */
            mmvq_imma(c1, hi[0][0], hi[1][0], hi[0][1], hi[1][1], bb.z, bb.w); /* sub-block 2 p + 1 */
            const int j0 = 2 * p, j1 = 2 * p + 1;
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int s0 = (int)mmvq_byte(scw[tl][r][j0 >> 2], j0 & 3);
                const int s1 = (int)mmvq_byte(scw[tl][r][j1 >> 2], j1 & 3);
                A[tl][2 * r] += s0 * c0[2 * r] + s1 * c1[2 * r];
                A[tl][2 * r + 1] += s0 * c0[2 * r + 1] + s1 * c1[2 * r + 1];
            }
        }
    }
    float S[8];
#pragma unroll
    for (int j = 0; j < 8; j++) S[j] = __ldg(ssum + (int64_t)sb * 8 + j);
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const uint4 h = b.head[tl][r];
            const float d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xFFFF)));
            const float dmin = __half2float(__ushort_as_half((unsigned short)(h.x >> 16)));
            const float M = mmvq_min_sum(h, S);
            const float ds = __fmul_rn(d, sx);
            accf[tl][2 * r] = fmaf(ds, (float)A[tl][2 * r], accf[tl][2 * r]);
            accf[tl][2 * r + 1] = fmaf(ds, (float)A[tl][2 * r + 1], accf[tl][2 * r + 1]);
            mt[tl][r] = fmaf(__fmul_rn(dmin, sx), M, mt[tl][r]);
        }
}

/* The end of k_mmvq_lab / k_mmvq_pdl: the limbs combined per warp, the ks
 * partial rows added in warp order. */
template <int TL>
__device__ __forceinline__ void q_finish(const float (&accf)[TL][4], const float (&mt)[TL][2],
                                         float (*part)[32], int g, int t, int wp, int ks, int64_t n_out, float *y) {
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float a2 = __shfl_down_sync(0xFFFFFFFFu, accf[tl][2 * r], 1); /* limb 2: lane t = 1 */
            const float v = __fsub_rn(
                __fadd_rn(__fadd_rn(__fmul_rn(65536.0f, accf[tl][2 * r]), __fmul_rn(256.0f, accf[tl][2 * r + 1])), a2),
                mt[tl][r]);
            if (t == 0) part[wp][16 * tl + g + 8 * r] = v;
        }
    __syncthreads();
    if (threadIdx.x < 16 * TL) {
        const int64_t row = (int64_t)blockIdx.x * 16 * TL + threadIdx.x;
        float v = part[0][threadIdx.x];
        for (int k = 1; k < ks; k++) v = __fadd_rn(v, part[k][threadIdx.x]);
        if (row < n_out) y[row] = v;
    }
}

/* Launch contract: grid ceil(n_out / (16 TL)), block 32 ks (ks = mmv_ks(in /
 * 256) in production; other values for timing), T = 1. Warp w takes
 * super-blocks [w nsb / ks, (w + 1) nsb / ks) of the block's TL 16-row
 * tiles; thread (g = lane / 4, t = lane % 4) holds rows g, g + 8 and C
 * columns 2 t, 2 t + 1 (limbs 0, 1 for t = 0, limb 2 for t = 1). The ks
 * partial rows are added in warp order. NB > 0: NB super-blocks at a time,
 * all their loads issued before any is used; NB < 0: software pipelined,
 * the loads of super-block sb + |NB| issued right after sb's bytes are
 * consumed (|NB| in flight). TL and NB change no bit. PDL (NB = 1): for a
 * pipeline behind the prep, the first super-block's weights are requested
 * before griddepcontrol.wait (they do not depend on the prep), the planes
 * after it; the same bits. */
template <int TL, int NB, bool PDL = false>
__global__ void __launch_bounds__(256, TL * (NB > 0 ? NB : -NB) > 2 ? 1 : 2)
    k_mmvq_lab(const uint8_t *__restrict__ W, size_t rb, int64_t n_out, int64_t in, const uint8_t *__restrict__ planes,
           const float *__restrict__ ssum, const float *__restrict__ sxinv, float *__restrict__ y) {
    __shared__ float part[MMV_KS_MAX][32];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5, ks = blockDim.x >> 5;
    const int nsb = (int)(in / 256), sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const uint8_t *rows[TL][2];
#pragma unroll
    for (int tl = 0; tl < TL; tl++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t row = (int64_t)blockIdx.x * 16 * TL + 16 * tl + g + 8 * r;
            rows[tl][r] = W + (row < n_out ? row : n_out - 1) * (int64_t)rb;
        }
    float accf[TL][4], mt[TL][2];
#pragma unroll
    for (int tl = 0; tl < TL; tl++) accf[tl][0] = accf[tl][1] = accf[tl][2] = accf[tl][3] = mt[tl][0] = mt[tl][1] = 0.0f;
    constexpr int D = NB > 0 ? NB : -NB;
    static_assert(!PDL || NB == 1, "mmvq_lab: PDL with one super-block in flight");
    q_raw<TL> buf[D];
    if (PDL) {
        if (sb0 < sb1) q_fetch_w(buf[0], rows, sb0, t);
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    if (NB > 0) {
#pragma unroll 1
        for (int c = sb0; c < sb1; c += D) {
#pragma unroll
            for (int n = 0; n < D; n++) {
                const int sb = c + n < sb1 ? c + n : sb1 - 1;
                if (!PDL || c > sb0) q_fetch_w(buf[n], rows, sb, t);
                q_fetch_x(buf[n], planes, sb, g, t);
            }
#pragma unroll
            for (int n = 0; n < D; n++) {
                if (c + n >= sb1) break;
                q_step(buf[n], c + n, ssum, sxinv, accf, mt);
            }
        }
    } else {
#pragma unroll
        for (int n = 0; n < D; n++) q_fetch(buf[n], rows, planes, sb0 + n < sb1 ? sb0 + n : sb1 - 1, g, t);
#pragma unroll 1
        for (int c = sb0; c < sb1; c += D) {
#pragma unroll
            for (int n = 0; n < D; n++) {
                if (c + n >= sb1) break;
                q_step(buf[n], c + n, ssum, sxinv, accf, mt);
                if (c + n + D < sb1) q_fetch(buf[n], rows, planes, c + n + D, g, t);
            }
        }
    }
    q_finish<TL>(accf, mt, part, g, t, wp, ks, n_out, y);
}

int main(int argc, char **argv) {
    const int64_t in = argc > 2 ? atoll(argv[1]) : 4096, n_out = argc > 2 ? atoll(argv[2]) : 12288;
    const double copy = lab_init();
    printf("mmvq_lab: {%lld, %lld} Q4_K T=1; device-to-device copy %.0f GB/s (read + write)\n", (long long)in,
           (long long)n_out, copy);
    if (in % 256) {
        printf("mmvq_lab: in must be a multiple of 256\n");
        return 1;
    }
    const uint32_t TY = MEMRA_TYPE_Q4_K;
    const int nsb = (int)(in / 256), ks = mmv_ks(nsb);
    lab_mv pb = lab_mv_make(TY, in, n_out, 1, 97); /* a few outliers in x */
    const size_t rb = pb.rb, wb = pb.wb;
    const float *ref = pb.ref;
    const double mref = pb.mref;
    float *hy = (float *)malloc(sizeof(float) * n_out), *hm = (float *)malloc(sizeof(float) * n_out);
    const uint8_t *dw = pb.dw;
    const float *dx = pb.dx;
    uint8_t *planes;
    float *dy, *dm;
    CK(cudaMalloc(&dy, sizeof(float) * n_out));
    CK(cudaMalloc(&dm, sizeof(float) * n_out));
    CK(cudaMalloc(&planes, mmvq_buf_bytes(1, nsb)));
    float *ssum = (float *)(planes + (size_t)nsb * MQ_SB_B), *sxinv = ssum + (size_t)nsb * 8;
    auto prep = [&] { mmvq_prep_launch(dx, nullptr, 0.0f, in, 1, planes, 0); };
    /* variant v: TL, NB (< 0: pipelined), ks (0 = production ks) */
    static const int vtl[] = {2, 2, 1, 1, 1, 2, 1, 1, 2, 1, 1, 1};
    static const int vnb[] = {1, 2, 2, 4, 1, 1, -2, -3, -2, 4, -2, -2};
    static const int vks[] = {0, 0, 0, 0, 0, 8, 0, 0, 0, 8, 8, 2};
    const int nvar = (int)(sizeof vtl / sizeof vtl[0]);
    int var = 0;
    const uint8_t *cw[64];
    const int ncw = lab_copies(dw, wb, cw, 64);
    auto mvw = [&](const uint8_t *w) {
        const int tl = vtl[var], nb = vnb[var], k = vks[var] ? (vks[var] < nsb ? vks[var] : nsb) : ks;
        const unsigned grid = (unsigned)((n_out + 16 * tl - 1) / (16 * tl));
        auto kp = tl == 2 ? (nb == 2 ? k_mmvq_lab<2, 2> : nb == -2 ? k_mmvq_lab<2, -2> : k_mmvq_lab<2, 1>)
                          : (nb == 4    ? k_mmvq_lab<1, 4>
                             : nb == 2  ? k_mmvq_lab<1, 2>
                             : nb == -2 ? k_mmvq_lab<1, -2>
                             : nb == -3 ? k_mmvq_lab<1, -3>
                                        : k_mmvq_lab<1, 1>);
        kp<<<grid, 32u * (unsigned)k>>>(w, rb, n_out, in, planes, ssum, sxinv, dy);
    };
    auto mv = [&] { mvw(dw); };
    mmv_args a;
    memset(&a, 0, sizeof a);
    a.W[0] = dw, a.n_out[0] = n_out, a.y[0] = dm, a.row_bytes = rb, a.in = in, a.T = 1, a.x = dx;
    mmv_blocks(&a, 1);
    auto prod = [&] { mmv_launch(a, 0); };
    CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
    prep();
    mv();
    prod();
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    lab_get(hy, dy, n_out);
    lab_get(hm, dm, n_out);
    const double e_q = lab_err(hy, ref, n_out, mref), e_m = lab_err(hm, ref, n_out, mref);
    const int ok = e_q <= 1e-5;
    const int NS = 64; /* launches per stream timing */
    const double u_prod = lab_time_us(prod), u_prep = lab_time_us(prep), u_mv = lab_time_us(mv);
    const double s_prod = lab_stream_us(
        [&](int i) {
            mmv_args b = a;
            b.W[0] = cw[i];
            mmv_launch(b, 0);
        },
        NS, ncw);
    const double s_mv = lab_stream_us([&](int i) { mvw(cw[i]); }, NS, ncw);
    const double u_both = lab_time_us([&] {
        prep();
        mv();
    });
    auto pct = [&](double us) { return 100.0 * wb / (us * 1e-6) / 1e9 / copy; };
    printf("stream timing: %d launches back to back over %d weight copies (%.0f MiB)\n", NS, ncw,
           ncw * (double)wb / (1 << 20));
    printf("MMVQ Q4_K ks%d  k_mmv %6.1f us %4.0f%% stream %6.1f us %4.0f%%  prep %5.1f us  mmvq %6.1f us %4.0f%% "
           "stream %6.1f us %4.0f%%  prep+mmvq %6.1f us %4.0f%%  err mmvq %.2e k_mmv %.2e %s\n",
           ks, u_prod, pct(u_prod), s_prod, pct(s_prod), u_prep, u_mv, pct(u_mv), s_mv, pct(s_mv), u_both,
           pct(u_both), e_q, e_m, ok ? "ok" : "FAIL");
    /* the other variants: against the CPU, and the same bits as variant 0 at
     * the production ks (TL and NB change no bit) */
    int fails = !ok;
    for (var = 1; var < nvar; var++) {
        CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
        mv();
        CK(cudaDeviceSynchronize());
        CK(cudaGetLastError());
        float *hv = hm; /* reused */
        lab_get(hv, dy, n_out);
        const double ev = lab_err(hv, ref, n_out, mref);
        const int same = vks[var] ? -1 : !memcmp(hv, hy, sizeof(float) * n_out);
        if (same == 0 || !(ev <= 1e-5)) fails++;
        const double u = lab_time_us(mv), su = lab_stream_us([&](int i) { mvw(cw[i]); }, NS, ncw);
        printf("MMVQ variant TL%d NB%+d ks%d  mmvq %6.1f us %4.0f%%  stream %6.1f us %4.0f%%  err %.2e  =v0 %s\n",
               vtl[var], vnb[var], vks[var] ? (vks[var] < nsb ? vks[var] : nsb) : ks, u, pct(u), su, pct(su), ev,
               same < 0 ? "n/a" : same ? "yes" : "NO");
    }
    var = 0;
    /* the input norm's weights for the INKERNEL and PIPE lines */
    float *hnw = (float *)malloc(sizeof(float) * in), *dnw;
    for (int64_t i = 0; i < in; i++) hnw[i] = rf(0.5f, 1.5f);
    dnw = lab_dev(hnw, sizeof(float) * in);
    /* the drop-in kernel (mmvq_inkernel.cuh: x staged inside, optional
     * input norm), PF 0 / 1, against k_mmv with the same norm */
    {
        for (int nwon = 0; nwon < 2; nwon++) {
            mmv_args pa = a;
            pa.y[0] = dy, pa.nw = nwon ? dnw : nullptr, pa.eps = 1e-6f;
            mmv_args ka = a;
            ka.nw = pa.nw, ka.eps = pa.eps;
            const double sk = lab_stream_us(
                [&](int i) {
                    mmv_args b = ka;
                    b.W[0] = cw[i];
                    mmv_launch(b, 0);
                },
                NS, ncw);
            for (int pf = 0; pf < 2; pf++) {
                auto run = [&](const mmv_args &b) { CK(pf ? mmvq_ik_launch<1>(b, 0) : mmvq_ik_launch<0>(b, 0)); };
                CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
                run(pa);
                CK(cudaDeviceSynchronize());
                CK(cudaGetLastError());
                lab_get(hm, dy, n_out);
                const double ev = lab_err(hm, ref, n_out, mref);
                const int okp = nwon || ev <= 1e-5;
                fails += !okp;
                const double su = lab_stream_us(
                    [&](int i) {
                        mmv_args b = pa;
                        b.W[0] = cw[i];
                        run(b);
                    },
                    NS, ncw);
                printf("INKERNEL k_mmvq_ik PF%d norm%d  stream %6.1f us %4.0f%%  (k_mmv norm%d stream %6.1f us %4.0f%%)  err %s %.2e\n",
                       pf, nwon, su, pct(su), nwon, sk, pct(sk), nwon ? "(norm: not checked)" : okp ? "ok" : "FAIL", ev);
            }
        }
    }
    /* PIPE: the conversion once per token (k_mmvq_prep, input norm
     * included) and k_mmvq_lab<TL, 1, true>, and production's pair (mmvq_launch),
     * as PDL pipelines in a CUDA graph, against
     * k_mmv with the norm fused, in a graph with and without PDL */
    {
        const float eps = 1e-6f;
        float *refn = (float *)malloc(sizeof(float) * n_out);
        const double mrefn = lab_norm_ref(&pb, TY, in, n_out, hnw, eps, refn);
        mmv_args ka = a;
        ka.nw = dnw, ka.eps = eps;
        auto kmmv = [&](int i, cudaStream_t st, bool pdl) {
            mmv_args b = ka;
            b.W[0] = cw[i];
            cuda_pdl = pdl;
            mmv_launch(b, st);
            cuda_pdl = 0;
        };
        auto pair = [&](int i, cudaStream_t st, bool pdl, int tl) {
            cuda_pdl = pdl;
            mmvq_prep_launch(dx, dnw, eps, in, 1, planes, st);
            cuda_pdl = 0;
            const unsigned grid = (unsigned)((n_out + 16 * tl - 1) / (16 * tl));
            lab_launch(tl == 1 ? k_mmvq_lab<1, 1, true> : k_mmvq_lab<2, 1, true>, grid, 32u * (unsigned)ks, 0, st, pdl,
                       cw[i], rb, n_out, in, (const uint8_t *)planes, (const float *)ssum, (const float *)sxinv, dy);
        };
        /* production's pair (mmvq.cuh: the prep, then k_mmvq on mmv_args) */
        uint8_t *pbuf;
        int nsm = 0;
        CK(cudaMalloc(&pbuf, MQ_BUF_BYTES));
        CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
        auto prodpair = [&](int i, cudaStream_t st) {
            mmv_args b = ka;
            b.W[0] = cw[i], b.y[0] = dy;
            CK(mmvq_launch(MEMRA_TYPE_Q4_K, b, pbuf, st, true, nsm));
        };
        for (int tl = 1; tl <= 3; tl++) { /* 3: production's pair */
            CK(cudaMemset(dy, 0xFF, sizeof(float) * n_out));
            if (tl == 3)
                prodpair(0, 0);
            else
                pair(0, 0, false, tl);
            CK(cudaDeviceSynchronize());
            lab_get(hm, dy, n_out);
            const double ev = lab_err(hm, refn, n_out, mrefn);
            fails += !(ev <= 1e-5);
            printf("PIPE %s vs CPU (rmsnorm, then the rows): %.2e %s\n",
                   tl == 3 ? "production (mmvq_launch)" : tl == 1 ? "TL1 k_mmvq_prep + k_mmvq_lab" : "TL2 k_mmvq_prep + k_mmvq_lab",
                   ev, ev <= 1e-5 ? "ok" : "FAIL");
        }
        const double g0 = lab_graph_us([&](int i, cudaStream_t st) { kmmv(i, st, false); }, NS, ncw);
        const double g1 = lab_graph_us([&](int i, cudaStream_t st) { kmmv(i, st, true); }, NS, ncw);
        const double p0 = lab_graph_us([&](int i, cudaStream_t st) { pair(i, st, false, 1); }, NS, ncw);
        const double p1 = lab_graph_us([&](int i, cudaStream_t st) { pair(i, st, true, 1); }, NS, ncw);
        const double p2 = lab_graph_us([&](int i, cudaStream_t st) { pair(i, st, true, 2); }, NS, ncw);
        const double pp = lab_graph_us([&](int i, cudaStream_t st) { prodpair(i, st); }, NS, ncw);
        printf("PIPE graph, per matvec: k_mmv+norm %6.1f us %4.0f%%  with PDL %6.1f us %4.0f%%  |  prep+mmvq TL1 %6.1f us "
               "%4.0f%%  PDL TL1 %6.1f us %4.0f%%  PDL TL2 %6.1f us %4.0f%%  production %6.1f us %4.0f%%\n",
               g0, pct(g0), g1, pct(g1), p0, pct(p0), p1, pct(p1), p2, pct(p2), pp, pct(pp));
        cudaFree(pbuf);
        free(refn);
    }
    cudaFree(dnw), free(hnw);
    for (int i = 1; i < ncw; i++) cudaFree((void *)cw[i]);
    cudaFree(dy), cudaFree(dm), cudaFree(planes);
    lab_mv_free(&pb), free(hy), free(hm);
    return fails ? 1 : 0;
}
