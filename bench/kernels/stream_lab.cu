/* What a decode matvec launch can reach at all: kernels that only READ a
 * weight-sized buffer, back to back over rotating copies (cold L2, as in a
 * decode step), with and without programmatic dependent launch (PDL).
 *
 * Why: the int8 matvec prototype (mmvq_lab.cu) reaches 82% of copy on the
 * output head's 1 GB but 42-50% on the 28-56 MB decode matrices, and no
 * load schedule inside the kernel moved that. If a kernel that does nothing
 * but read 28 MB is near 50% too, the gap is per launch (launch, ramp-up,
 * tail), and only overlapping launches or fewer of them can close it.
 *
 * Kernels (block 256, grid = 2 blocks per SM, each thread reads 16-byte
 * words in a grid-stride loop, U in flight, and xors them into one word per
 * block):
 *  - k_nop: an empty kernel (the launch floor);
 *  - k_read<U>: the read;
 *  - k_read_pdl<U>: the same under PDL, the loads issued before
 *    griddepcontrol.wait (the weights do not depend on the previous
 *    kernel) and griddepcontrol.launch_dependents at the start, so the next
 *    launch's blocks can start as SM room frees up.
 * Sizes: 14, 28, 56, 112 MB and 834 MB (the 9B output head). Each back to
 * back on stream 0 and captured in a CUDA graph (as the decode step runs).
 *
 * First, a table of the Q4_K decode matvec's load pattern on its four
 * shapes (k_pat, k_run below; bench/results/2026-12-03f-h200.md section 1)
 * and one line for the Q6_K output head's (k_pat6; added after the
 * session's last device call: not yet run); PATTERN_ONLY=1 in the
 * environment stops after them.
 *
 *   BUILD=build-lab REBUILD=1 bash bench/kernels/lab.sh stream_lab */
#include "lab.cuh"

__global__ void k_nop(uint32_t *out) {
    if (threadIdx.x == 1023) out[0] = 0; /* never true: an empty body the compiler keeps */
}

template <int U, bool PDL>
__global__ void __launch_bounds__(256) k_read(const uint4 *__restrict__ w, size_t n16, uint32_t *__restrict__ out) {
    if (PDL) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t acc = 0;
    uint4 v[U];
    /* the first round's loads before the wait (PDL) */
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = i + u * stride < n16 ? __ldg(w + i + u * stride) : make_uint4(0, 0, 0, 0);
    if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
    for (;;) {
#pragma unroll
        for (int u = 0; u < U; u++) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        i += U * stride;
        if (i >= n16) break;
#pragma unroll
        for (int u = 0; u < U; u++) v[u] = i + u * stride < n16 ? __ldg(w + i + u * stride) : make_uint4(0, 0, 0, 0);
    }
    acc = __reduce_xor_sync(0xFFFFFFFFu, acc);
    if ((threadIdx.x & 31) == 0) atomicXor(out + blockIdx.x, acc);
}

/* The Q4_K decode matvec's access pattern without its arithmetic: k_mmvq's
 * grid, blocks, K split and loads (per super-block, lane (g, t) of each
 * 16-row tile reads rows g, g + 8: the 16-byte head and qs bytes 32 p + 8 t
 * .. + 7, p < 4), xored into one word. TL tiles per warp (production: 2).
 * LIN: the same bytes per warp, but as if the file stored each tile's
 * super-block as one 2,304-byte run (16 rows x 144): 16-byte words, lane
 * after lane. If the pattern alone is far below k_read, the layout (not the
 * arithmetic) is what holds the matvecs at ~50% of copy. */
template <int TL, bool LIN>
__global__ void __launch_bounds__(256) k_pat(const uint8_t *__restrict__ w, int64_t in, int64_t n_out,
                                            uint32_t *__restrict__ out) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5, ks = blockDim.x >> 5;
    const int nsb = (int)(in / 256), sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const size_t rb = (size_t)nsb * 144;
    uint32_t acc = 0;
#pragma unroll 1
    for (int sb = sb0; sb < sb1; sb++) {
#pragma unroll
        for (int tl = 0; tl < TL; tl++) {
            const int64_t tile = (int64_t)blockIdx.x * TL + tl;
            if (LIN) {
                const uint4 *p = (const uint4 *)(w + ((size_t)tile * nsb + sb) * 2304);
                uint4 v[5];
#pragma unroll
                for (int i = 0; i < 5; i++) /* 144 words: 4 full rounds and half a fifth */
                    v[i] = i < 4 || lane < 16 ? __ldg(p + 32 * i + lane) : make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int i = 0; i < 5; i++) acc ^= v[i].x ^ v[i].y ^ v[i].z ^ v[i].w;
            } else {
                uint4 h[2];
                uint2 q[2][4];
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const uint8_t *b = w + (size_t)(16 * tile + g + 8 * r) * rb + (size_t)sb * 144;
                    h[r] = __ldg((const uint4 *)b);
#pragma unroll
                    for (int k = 0; k < 4; k++) q[r][k] = __ldg((const uint2 *)(b + 16 + 32 * k + 8 * t));
                }
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    acc ^= h[r].x ^ h[r].y ^ h[r].z ^ h[r].w;
#pragma unroll
                    for (int k = 0; k < 4; k++) acc ^= q[r][k].x ^ q[r][k].y;
                }
            }
        }
    }
    acc = __reduce_xor_sync(0xFFFFFFFFu, acc);
    if (lane == 0) atomicXor(out + (blockIdx.x & 4095), acc);
}

/* Row runs: the warp's K range of each of its 16 rows is one contiguous
 * run (nsb / ks super-blocks x 144 bytes); RUN = 0: read by the lanes as
 * 16-byte words, run after run (registers); RUN = 1: one bulk copy per row
 * into shared memory (lane r < 16 issues row r's, completion on one
 * mbarrier), then read back. The file's layout, contiguous requests. */
template <int RUN>
__global__ void __launch_bounds__(256) k_run(const uint8_t *__restrict__ w, int64_t in, int64_t n_out,
                                            uint32_t *__restrict__ out) {
    extern __shared__ __align__(128) uint8_t run_sh[];
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, ks = blockDim.x >> 5;
    const int nsb = (int)(in / 256), sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const size_t rb = (size_t)nsb * 144;
    const int runb = (sb1 - sb0) * 144, n16 = runb / 16 * 16; /* n16: 16-byte words of the tile's 16 runs */
    const uint8_t *base = w + (size_t)blockIdx.x * 16 * rb + (size_t)sb0 * 144;
    uint32_t acc = 0;
    if (RUN == 0) {
#pragma unroll 4
        for (int i = lane; i < n16; i += 32) {
            const int r = i / (runb / 16), o = i % (runb / 16);
            const uint4 v = __ldg((const uint4 *)(base + (size_t)r * rb) + o);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    } else {
        uint8_t *dst = run_sh + (size_t)wp * (16 * 9 * 144 + 16);
        uint64_t *bar = (uint64_t *)(dst + 16 * 9 * 144);
        const uint32_t b = (uint32_t)__cvta_generic_to_shared(bar);
        if (lane == 0) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
            asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        }
        __syncwarp();
        if (lane == 0)
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(16 * runb) : "memory");
        __syncwarp();
        if (lane < 16) {
            const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst + lane * runb);
            asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                         ::"r"(d), "l"(base + (size_t)lane * rb), "r"(runb), "r"(b)
                         : "memory");
        }
        mbar_wait(b, 0);
        for (int i = lane; i < n16; i += 32) {
            const uint4 v = *(const uint4 *)(dst + 16 * i);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    acc = __reduce_xor_sync(0xFFFFFFFFu, acc);
    if (lane == 0) atomicXor(out + (blockIdx.x & 4095), acc);
}

/* The Q6_K output head's matvec (mmv6.cuh, k_mmv6) pattern without its
 * arithmetic: one 16-row tile per warp, ks warps over K, per super-block
 * lane (g, t) reads rows g, g + 8: 8 ql words at 64 n + 16 i + 4 t, 4 qh
 * words at 128 + 32 n + 16 i + 4 t, the 4 scale words and d (super-blocks
 * of odd sb start 2 bytes past a word: each word as two 16-bit loads, as
 * mmv6_ld32 does). LIN: the same bytes per warp as one 3,360-byte run per
 * tile and super-block (a tile-major order). */
template <bool LIN>
__global__ void __launch_bounds__(256) k_pat6(const uint8_t *__restrict__ w, int64_t in, int64_t n_out,
                                             uint32_t *__restrict__ out) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wp = threadIdx.x >> 5, ks = blockDim.x >> 5;
    const int nsb = (int)(in / 256), sb0 = wp * nsb / ks, sb1 = (wp + 1) * nsb / ks;
    const size_t rb = (size_t)nsb * 210;
    uint32_t acc = 0;
#pragma unroll 1
    for (int sb = sb0; sb < sb1; sb++) {
        if (LIN) {
            const uint8_t *p = w + ((size_t)blockIdx.x * nsb + sb) * 3360;
            uint32_t v[27];
#pragma unroll
            for (int i = 0; i < 27; i++) v[i] = 32 * i + lane < 840 ? __ldg((const uint32_t *)p + 32 * i + lane) : 0u;
#pragma unroll
            for (int i = 0; i < 27; i++) acc ^= v[i];
        } else {
            const bool al = (sb & 1) == 0;
            auto ld = [&](const uint8_t *q) -> uint32_t {
                if (al) return __ldg((const uint32_t *)q);
                const uint32_t lo = __ldg((const unsigned short *)q), hi = __ldg((const unsigned short *)(q + 2));
                return lo | (hi << 16);
            };
            uint32_t v[2][17];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const uint8_t *b = w + (size_t)(16 * blockIdx.x + g + 8 * r) * rb + (size_t)sb * 210;
#pragma unroll
                for (int n = 0; n < 2; n++) {
#pragma unroll
                    for (int i = 0; i < 4; i++) v[r][4 * n + i] = ld(b + 64 * n + 16 * i + 4 * t);
#pragma unroll
                    for (int i = 0; i < 2; i++) v[r][8 + 2 * n + i] = ld(b + 128 + 32 * n + 16 * i + 4 * t);
                }
#pragma unroll
                for (int i = 0; i < 4; i++) v[r][12 + i] = ld(b + 192 + 4 * i);
                v[r][16] = __ldg((const unsigned short *)(b + 208));
            }
#pragma unroll
            for (int r = 0; r < 2; r++)
#pragma unroll
                for (int i = 0; i < 17; i++) acc ^= v[r][i];
        }
    }
    acc = __reduce_xor_sync(0xFFFFFFFFu, acc);
    if (lane == 0) atomicXor(out + (blockIdx.x & 4095), acc);
}

/* A buffer of random bytes on the device and copies of it (> L2 in all,
 * lab_copies; cw[0] is the original). Returns the count; the caller frees
 * them all. */
static int random_copies(size_t bytes, const uint8_t **cw) {
    uint8_t *h = (uint8_t *)malloc(bytes);
    for (size_t i = 0; i < bytes; i += 8) {
        uint64_t r = rnd();
        memcpy(h + i, &r, 8 <= bytes - i ? 8 : bytes - i);
    }
    const uint8_t *d0 = lab_dev(h, bytes);
    free(h);
    return lab_copies(d0, bytes, cw, 64);
}

#define MMV_KS_MAX_LAB 8 /* k_run is launch-bounded to 256 threads */

static void pattern_table(double copy, uint32_t *out) {
    static const int64_t shapes[][2] = {{4096, 12288}, {12288, 4096}, {5120, 17408}, {17408, 5120}};
    printf("Q4_K matvec access pattern, no arithmetic (k_pat), 64 back to back in a graph, %% of copy:\n");
    for (auto &sh : shapes) {
        const int64_t in = sh[0], n_out = sh[1], nsb = in / 256;
        const size_t bytes = (size_t)n_out * nsb * 144;
        const uint8_t *cw[64];
        const int ncw = random_copies(bytes, cw);
        int ks = (int)(nsb / 4);
        ks = ks < 1 ? 1 : ks > 8 ? 8 : ks;
        auto pct = [&](double us) { return 100.0 * bytes / (us * 1e-6) / 1e9 / copy; };
        auto run = [&](auto kernel, int tl) {
            const unsigned grid = (unsigned)(n_out / (16 * tl));
            return lab_graph_us(
                [&](int i, cudaStream_t s) { lab_launch(kernel, grid, 32 * ks, 0, s, false, cw[i], in, n_out, out); },
                64, ncw);
        };
        const double p2 = run(k_pat<2, false>, 2), p1 = run(k_pat<1, false>, 1), l2 = run(k_pat<2, true>, 2),
                     l1 = run(k_pat<1, true>, 1);
        printf("  {%5lld, %5lld} %5.1f MB ks %d: rows TL2 %6.2f us %4.0f%%  TL1 %6.2f us %4.0f%%  |  "
               "tile runs TL2 %6.2f us %4.0f%%  TL1 %6.2f us %4.0f%%\n",
               (long long)in, (long long)n_out, bytes / 1e6, ks, p2, pct(p2), p1, pct(p1), l2, pct(l2), l1, pct(l1));
        /* row runs, at the production K split and at twice it (more warps, shorter runs) */
        for (int kk = ks; kk <= 2 * ks && kk <= MMV_KS_MAX_LAB; kk += ks) {
            const size_t smem = (size_t)kk * (16 * 9 * 144 + 16);
            if ((nsb + kk - 1) / kk > 9) continue;
            cudaFuncSetAttribute(k_run<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
            auto rr = [&](auto kernel, size_t sm) {
                return lab_graph_us(
                    [&](int i, cudaStream_t st) {
                        lab_launch(kernel, (unsigned)(n_out / 16), 32 * kk, sm, st, false, cw[i], in, n_out, out);
                    },
                    64, ncw);
            };
            const double r0 = rr(k_run<0>, 0), r1 = smem <= 200 * 1024 ? rr(k_run<1>, smem) : 0.0;
            printf("      ks %2d: row runs, lanes %6.2f us %4.0f%%   bulk copies %6.2f us %4.0f%%\n", kk, r0, pct(r0),
                   r1, r1 > 0 ? pct(r1) : 0.0);
        }
        for (int i = 0; i < ncw; i++) cudaFree((void *)cw[i]);
    }
}

int main(void) {
    const double copy = lab_init();
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    printf("stream_lab: %d SMs; device-to-device copy %.0f GB/s (read + write); per launch, 64 back to back\n", sms, copy);
    uint32_t *out;
    CK(cudaMalloc(&out, 4 * 4096));
    CK(cudaMemset(out, 0, 4 * 4096));
    {
        const double us = lab_stream_us([&](int) { k_nop<<<sms, 256>>>(out); }, 64, 1);
        const double gu = lab_graph_us([&](int, cudaStream_t s) { k_nop<<<sms, 256, 0, s>>>(out); }, 64, 1);
        printf("k_nop                      %7.2f us   in a graph %7.2f us\n", us, gu);
    }
    pattern_table(copy, out);
    { /* the Q6_K output head of the 9B, {4096, 248320}, 834 MB: a few launches */
        const int64_t in = 4096, n_out = 248320;
        const size_t bytes = (size_t)n_out * (in / 256) * 210;
        const uint8_t *cw[64];
        const int ncw = random_copies(bytes, cw);
        auto pct = [&](double us) { return 100.0 * bytes / (us * 1e-6) / 1e9 / copy; };
        auto run = [&](auto kernel) {
            auto one = [&](int i, cudaStream_t s) {
                lab_launch(kernel, (unsigned)(n_out / 16), 128, 0, s, false, cw[i], in, n_out, out);
            };
            return lab_graph_us(one, 8, ncw);
        };
        const double r = run(k_pat6<false>), l = run(k_pat6<true>);
        printf("Q6_K head {4096, 248320} %.0f MB, mmv6's pattern (k_pat6): rows %7.1f us %4.0f%%  |  "
               "tile runs %7.1f us %4.0f%%\n",
               bytes / 1e6, r, pct(r), l, pct(l));
        for (int i = 0; i < ncw; i++) cudaFree((void *)cw[i]);
    }
    if (getenv("PATTERN_ONLY")) return 0;
    static const double mb[] = {14, 28, 56, 112, 834};
    for (double m : mb) {
        const size_t bytes = (size_t)(m * 1e6) & ~(size_t)15, n16 = bytes / 16;
        const uint8_t *cw[64];
        const int ncw = random_copies(bytes, cw);
        const int n = m > 500 ? 8 : 64;
        auto pct = [&](double us) { return 100.0 * bytes / (us * 1e-6) / 1e9 / copy; };
        printf("%6.0f MB (%d copies, ideal at copy rate %.1f us)\n", m, ncw, bytes / (copy * 1e9) * 1e6);
        for (int mult = 1; mult <= 4; mult *= 2) {
            const unsigned grid = (unsigned)(sms * mult);
            auto rd = [&](auto kernel, bool pdl, int i, cudaStream_t s) {
                lab_launch(kernel, grid, 256, 0, s, pdl, (const uint4 *)cw[i], n16, out);
            };
            const double u4 = lab_stream_us([&](int i) { rd(k_read<4, false>, false, i, 0); }, n, ncw);
            const double u8 = lab_stream_us([&](int i) { rd(k_read<8, false>, false, i, 0); }, n, ncw);
            const double p8 = lab_stream_us([&](int i) { rd(k_read<8, true>, true, i, 0); }, n, ncw);
            const double g8 = lab_graph_us([&](int i, cudaStream_t s) { rd(k_read<8, false>, false, i, s); }, n, ncw);
            const double gp8 = lab_graph_us([&](int i, cudaStream_t s) { rd(k_read<8, true>, true, i, s); }, n, ncw);
            printf("  grid %4u: k_read<4> %7.2f us %4.0f%%   k_read<8> %7.2f us %4.0f%%   k_read_pdl<8> %7.2f us %4.0f%%"
                   "   graph: k_read<8> %7.2f us %4.0f%%   k_read_pdl<8> %7.2f us %4.0f%%\n",
                   grid, u4, pct(u4), u8, pct(u8), p8, pct(p8), g8, pct(g8), gp8, pct(gp8));
        }
        for (int i = 0; i < ncw; i++) cudaFree((void *)cw[i]);
    }
    cudaFree(out);
    return 0;
}
