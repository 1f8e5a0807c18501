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
    static const double mb[] = {14, 28, 56, 112, 834};
    for (double m : mb) {
        const size_t bytes = (size_t)(m * 1e6) & ~(size_t)15, n16 = bytes / 16;
        uint8_t *h = (uint8_t *)malloc(bytes);
        for (size_t i = 0; i < bytes; i += 8) {
            uint64_t r = rnd();
            memcpy(h + i, &r, 8 <= bytes - i ? 8 : bytes - i);
        }
        const uint8_t *d0 = lab_dev(h, bytes);
        free(h);
        const uint8_t *cw[64];
        const int ncw = lab_copies(d0, bytes, cw, 64);
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
        for (int i = 1; i < ncw; i++) cudaFree((void *)cw[i]);
        cudaFree((void *)d0);
    }
    cudaFree(out);
    return 0;
}
