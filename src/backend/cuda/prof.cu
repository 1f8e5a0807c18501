/* The op timeline behind `memra bench --profile` (backend.h prof_*).
 *
 * prof_begin parks the stream on a spin kernel (PROF_SPIN_NS) so that the
 * host enqueues the whole step while the device waits; the device then runs
 * the ops back to back as it would from a graph, and the gap between two
 * events is an op's device time plus the launch gap between kernels. Each
 * mark records an event; prof_end books the interval between consecutive
 * events to the later mark's label. */
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/ops.cuh"

#define PROF_MAX 16384
#define PROF_SPIN_NS 30000000ull /* 30 ms: ample for the host to enqueue a step */

typedef struct prof_state {
    cudaEvent_t ev[PROF_MAX + 1];
    const char *label[PROF_MAX + 1];
    int n_created, n; /* events created; events recorded (ev[0] is the start) */
} prof_state;

static prof_state *g_prof; /* one timeline per process: profiling is a bench tool */

__global__ void k_prof_spin(unsigned long long ns) {
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (;;) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if (t - t0 >= ns) break;
        __nanosleep(1000);
    }
}

static memra_status prof_record(memra_backend *be, const char *label) {
    prof_state *p = g_prof;
    if (p->n > PROF_MAX) return MEMRA_OK; /* full: later ops go unbooked */
    if (p->n == p->n_created) {
        memra_status st = cuda_check(be, cudaEventCreate(&p->ev[p->n]), "prof: event create");
        if (st) return st;
        p->n_created++;
    }
    p->label[p->n] = label;
    memra_status st = cuda_check(be, cudaEventRecord(p->ev[p->n], cuda_of(be)->stream), "prof: event record");
    if (st == MEMRA_OK) p->n++;
    return st;
}

memra_status cuda_prof_begin(memra_backend *be) {
    if (cuda_of(be)->capturing) return CUDA_INVALID(be, "prof_begin: capturing a graph");
    if (!g_prof) {
        g_prof = (prof_state *)calloc(1, sizeof *g_prof);
        if (!g_prof) return cuda_fail(be, MEMRA_ERR_NOMEM, "prof_begin: out of host memory");
    }
    g_prof->n = 0;
    k_prof_spin<<<1, 1, 0, cuda_of(be)->stream>>>(PROF_SPIN_NS);
    memra_status st = CUDA_LAUNCHED(be, "prof spin");
    return st ? st : prof_record(be, "start");
}

memra_status cuda_prof_mark(memra_backend *be, const char *label) {
    if (!g_prof || cuda_of(be)->capturing) return MEMRA_OK;
    return prof_record(be, label);
}

typedef struct prof_row {
    const char *label;
    double ms;
    int count;
} prof_row;

static int prof_row_cmp(const void *a, const void *b) {
    double x = ((const prof_row *)a)->ms, y = ((const prof_row *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

memra_status cuda_prof_end(memra_backend *be, FILE *f) {
    prof_state *p = g_prof;
    if (!p || p->n == 0) return CUDA_INVALID(be, "prof_end: no timeline");
    memra_status st = cuda_check(be, cudaStreamSynchronize(cuda_of(be)->stream), "prof_end: sync");
    if (st) return st;
    prof_row *rows = (prof_row *)calloc((size_t)p->n, sizeof *rows);
    if (!rows) return cuda_fail(be, MEMRA_ERR_NOMEM, "prof_end: out of host memory");
    int n_rows = 0;
    double total = 0;
    for (int i = 1; i < p->n; i++) {
        float ms = 0;
        st = cuda_check(be, cudaEventElapsedTime(&ms, p->ev[i - 1], p->ev[i]), "prof_end: elapsed");
        if (st) break;
        total += ms;
        int j = 0;
        while (j < n_rows && strcmp(rows[j].label, p->label[i])) j++;
        if (j == n_rows) rows[n_rows++].label = p->label[i];
        rows[j].ms += ms;
        rows[j].count++;
    }
    if (st == MEMRA_OK) {
        qsort(rows, (size_t)n_rows, sizeof *rows, prof_row_cmp);
        fprintf(f, "profile: %d ops, %.3f ms from the first op's start to the last op's end\n", p->n - 1, total);
        fprintf(f, "%-24s %6s %10s %10s %6s\n", "op", "count", "total_us", "us/op", "share");
        for (int j = 0; j < n_rows; j++)
            fprintf(f, "%-24s %6d %10.1f %10.2f %5.1f%%\n", rows[j].label, rows[j].count, rows[j].ms * 1e3,
                    rows[j].ms * 1e3 / rows[j].count, 100.0 * rows[j].ms / (total > 0 ? total : 1));
    }
    free(rows);
    p->n = 0;
    return st;
}
