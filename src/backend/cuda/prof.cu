/* The op timeline behind `memra bench --profile` (backend.h prof_*).
 *
 * prof_begin parks the stream on a spin kernel (PROF_SPIN_NS) so that the
 * host enqueues the whole step while the device waits; the device then runs
 * the ops back to back as it would from a graph, and the gap between two
 * events is an op's device time plus the launch gap between kernels. Each
 * mark records an event; prof_end books the interval between consecutive
 * events to the later mark's label. */
#include <limits.h>
#include <stdio.h>
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

/* ---- the kernel timeline (backend.h timeline_*; common.cuh's guard) ---- */

#ifdef MEMRA_TIMELINE /* else the backend has no timeline ops (cuda.cu) */
#define TL_MAX_TU 32
#define TL_CAP_DEFAULT (4u << 20) /* records: 160 MiB of device memory */
#define TL_SAME_NS 1000000ull     /* the longest gap between two block exits of one launch (a decode head: ~0.4 ms) */

static cuda_tl_binder tl_binders[TL_MAX_TU]; /* every .cu file's (common.cuh registers them at load) */
static int tl_n_binders;
static cuda_tl_buf *tl_buf;
static unsigned tl_cap;

int cuda_tl_register(cuda_tl_binder b) {
    if (tl_n_binders < TL_MAX_TU) tl_binders[tl_n_binders++] = b;
    return tl_n_binders;
}

memra_status cuda_timeline_begin(memra_backend *be) {
    if (cuda_of(be)->capturing) return CUDA_INVALID(be, "timeline_begin: capturing a graph");
    if (tl_n_binders == TL_MAX_TU) return CUDA_INVALID(be, "timeline: more than %d .cu files", TL_MAX_TU - 1);
    memra_status st;
    if (!tl_buf) {
        const char *e = getenv("MEMRA_TL_CAP");
        tl_cap = e && atoi(e) > 0 ? (unsigned)atoi(e) : TL_CAP_DEFAULT;
        const size_t bytes = sizeof(cuda_tl_buf) + (size_t)tl_cap * sizeof(cuda_tl_rec);
        if ((st = cuda_check(be, cudaMalloc((void **)&tl_buf, bytes), "timeline: buffer"))) return st;
        for (int i = 0; i < tl_n_binders; i++)
            if ((st = cuda_check(be, tl_binders[i](tl_buf), "timeline: bind"))) return st;
    }
    if ((st = cuda_check(be, cudaStreamSynchronize(cuda_of(be)->stream), "timeline: sync"))) return st;
    const unsigned head[4] = {0u, tl_cap, 1u, 0u};
    return cuda_check(be, cudaMemcpy(tl_buf, head, sizeof head, cudaMemcpyHostToDevice), "timeline: start");
}

typedef struct tl_grid {
    const char *name;                /* device address of the kernel's name */
    long long t0, t1, t1x, t2m, t2x; /* ns: first arrival, first and last wait return, median and last exit */
    unsigned nblk;
} tl_grid;

typedef struct tl_key {
    const char *name;
    char text[96]; /* the name, read from the device once per key */
    unsigned nblk;
    int count;
    double span, work, gap, early, mid; /* ns, summed over launches */
} tl_key;

static int tl_rec_cmp(const void *a, const void *b) {
    const cuda_tl_rec *x = (const cuda_tl_rec *)a, *y = (const cuda_tl_rec *)b;
    if (x->grid != y->grid) return x->grid < y->grid ? -1 : 1;
    return x->t2 < y->t2 ? -1 : x->t2 > y->t2;
}
static int tl_grid_cmp(const void *a, const void *b) {
    const tl_grid *x = (const tl_grid *)a, *y = (const tl_grid *)b;
    return x->t1 < y->t1 ? -1 : x->t1 > y->t1;
}
static int tl_key_cmp(const void *a, const void *b) {
    const tl_key *x = (const tl_key *)a, *y = (const tl_key *)b;
    return x->span < y->span ? 1 : x->span > y->span ? -1 : 0;
}

/* A 32-bit stamp taken before the full exit stamp t2 (within 4 s) */
static long long tl_full(unsigned long long t2, unsigned lo) { return (long long)(t2 - (unsigned)((unsigned)t2 - lo)); }

/* The kernel's name without its return type and parameters: "k_x<1, 2>" */
static void tl_short(const char *pretty, char *out, size_t n) {
    const char *s = pretty, *sp = strchr(pretty, ' ');
    if (sp && (!strchr(pretty, '<') || sp < strchr(pretty, '<'))) s = sp + 1;
    size_t i = 0;
    int depth = 0;
    for (; s[i] && i + 1 < n; i++) {
        if (s[i] == '<') depth++;
        if (s[i] == '>') depth--;
        if (s[i] == '(' && depth == 0) break;
        out[i] = s[i];
    }
    out[i] = 0;
}

/* Reads a kernel name from device memory (32 bytes at a time, up to its NUL) */
static void tl_name(const char *dev, char *out, size_t n) {
    char pretty[512] = {0}; /* zeros past what was read */
    size_t len = 0;
    while (len + 32 < sizeof pretty) {
        if (cudaMemcpy(pretty + len, dev + len, 32, cudaMemcpyDeviceToHost) != cudaSuccess) {
            /* the string may end near the end of its module's data: the rest a byte at a time */
            (void)cudaGetLastError();
            while (len + 1 < sizeof pretty &&
                   cudaMemcpy(pretty + len, dev + len, 1, cudaMemcpyDeviceToHost) == cudaSuccess && pretty[len])
                len++;
            (void)cudaGetLastError();
            pretty[len] = 0;
            break;
        }
        if (memchr(pretty + len, 0, 32)) break;
        len += 32;
    }
    pretty[sizeof pretty - 1] = 0;
    if (!pretty[0]) {
        snprintf(out, n, "kernel@%p", (const void *)dev);
        return;
    }
    tl_short(pretty, out, n);
}

memra_status cuda_timeline_end(memra_backend *be, FILE *f, const char *csv, int steps) {
    if (!tl_buf) return CUDA_INVALID(be, "timeline_end: no timeline_begin");
    memra_status st = cuda_check(be, cudaStreamSynchronize(cuda_of(be)->stream), "timeline: sync");
    unsigned head[4];
    if (!st) {
        const unsigned off = 0u;
        st = cuda_check(be, cudaMemcpy(&tl_buf->on, &off, sizeof off, cudaMemcpyHostToDevice), "timeline: stop");
    }
    if (!st) st = cuda_check(be, cudaMemcpy(head, tl_buf, sizeof head, cudaMemcpyDeviceToHost), "timeline: count");
    if (st) return st;
    const unsigned n = head[0] < tl_cap ? head[0] : tl_cap;
    if (head[0] > tl_cap)
        fprintf(f, "timeline: %u blocks, %u recorded (MEMRA_TL_CAP raises the cap): the later launches are partial\n",
                head[0], tl_cap);
    cuda_tl_rec *r = (cuda_tl_rec *)malloc((size_t)n * sizeof *r + 1);
    tl_grid *g = (tl_grid *)malloc((size_t)n * sizeof *g + 1);
    tl_key *k = NULL; /* one per (kernel, grid size): a few dozen, grown as found */
    int nk = 0, k_cap = 0;
    FILE *out = NULL;
    if (!r || !g) {
        st = cuda_fail(be, MEMRA_ERR_NOMEM, "timeline: out of host memory");
        goto done;
    }
    if ((st = cuda_check(be, cudaMemcpy(r, tl_buf->rec, (size_t)n * sizeof *r, cudaMemcpyDeviceToHost),
                         "timeline: records")))
        goto done;
    qsort(r, n, sizeof *r, tl_rec_cmp);
    {
        /* one tl_grid per launch: records of a grid are adjacent, sorted by exit; a jump of more than
         * TL_SAME_NS between two exits starts another launch, should a replayed graph node keep its %gridid */
        unsigned ng = 0;
        for (unsigned i = 0; i < n;) {
            unsigned j = i;
            tl_grid *x = &g[ng++];
            x->name = r[i].name;
            x->t0 = x->t1 = LLONG_MAX, x->t1x = 0;
            for (; j < n && r[j].grid == r[i].grid && (j == i || r[j].t2 - r[j - 1].t2 <= TL_SAME_NS); j++) {
                const long long t0 = tl_full(r[j].t2, r[j].t0), t1 = tl_full(r[j].t2, r[j].t1);
                if (t0 < x->t0) x->t0 = t0;
                if (t1 < x->t1) x->t1 = t1;
                if (t1 > x->t1x) x->t1x = t1;
            }
            x->nblk = j - i;
            x->t2m = (long long)r[i + (j - i) / 2].t2, x->t2x = (long long)r[j - 1].t2;
            i = j;
        }
        qsort(g, ng, sizeof *g, tl_grid_cmp);
        if (csv && !(out = fopen(csv, "w"))) {
            st = cuda_fail(be, MEMRA_ERR_IO, "timeline: cannot write %s", csv);
            goto done;
        }
        if (out) fprintf(out, "launch,kernel,blocks,arrive_us,wait_us,wait_last_us,exit_median_us,exit_last_us\n");
        /* per (kernel, blocks): span = to the next launch's first wait return; work = its own first wait
         * return to its last exit; gap = its last exit to the next launch's first wait return */
        double tot_span = 0, tot_work = 0, tot_gap = 0;
        for (unsigned i = 0; i < ng; i++) {
            const tl_grid *x = &g[i];
            const long long next = i + 1 < ng ? g[i + 1].t1 : x->t2x;
            const double span = (double)(next - x->t1), work = (double)(x->t2x - x->t1),
                         gap = (double)(next - x->t2x);
            int j = 0;
            while (j < nk && !(k[j].name == x->name && k[j].nblk == x->nblk)) j++;
            if (j == nk) {
                if (nk == k_cap) {
                    tl_key *grown = (tl_key *)realloc(k, (size_t)(k_cap = 2 * k_cap + 32) * sizeof *k);
                    if (!grown) {
                        st = cuda_fail(be, MEMRA_ERR_NOMEM, "timeline: out of host memory");
                        goto done;
                    }
                    k = grown;
                }
                memset(&k[nk], 0, sizeof *k);
                k[nk].name = x->name, k[nk].nblk = x->nblk;
                tl_name(x->name, k[nk++].text, sizeof k->text);
            }
            k[j].count++, k[j].span += span, k[j].work += work, k[j].gap += gap;
            k[j].early += (double)(x->t1 - x->t0), k[j].mid += (double)(x->t2m - x->t1);
            tot_span += span, tot_work += work, tot_gap += gap > 0 ? gap : 0;
            if (out) {
                const long long b = g[0].t1;
                fprintf(out, "%u,\"%s\",%u,%.3f,%.3f,%.3f,%.3f,%.3f\n", i, k[j].text, x->nblk, (x->t0 - b) / 1e3,
                        (x->t1 - b) / 1e3, (x->t1x - b) / 1e3, (x->t2m - b) / 1e3, (x->t2x - b) / 1e3);
            }
        }
        qsort(k, (size_t)nk, sizeof *k, tl_key_cmp);
        const double per = steps > 0 ? (double)steps : 1.0;
        fprintf(f, "timeline: %u launches, %u blocks; %.3f ms from the first wait return to the last%s\n", ng, n,
                tot_span / 1e6, steps > 0 ? "" : " (totals below are over the whole recording)");
        if (steps > 0)
            fprintf(f, "  per step (%d steps): %.1f us, of which launches' work (first wait return to last exit) "
                       "%.1f us, and waits past the previous launch's last exit %.1f us\n",
                    steps, tot_span / per / 1e3, tot_work / per / 1e3, tot_gap / per / 1e3);
        fprintf(f, "%-60s %7s %7s %9s %8s %8s %8s %8s %8s %6s\n", "kernel", "blocks", "n/step", "us/step", "span",
                "work", "median", "gap", "early", "share");
        for (int j = 0; j < nk; j++) {
            const double c = k[j].count;
            fprintf(f, "%-60.60s %7u %7.1f %9.1f %8.2f %8.2f %8.2f %8.2f %8.2f %5.1f%%\n", k[j].text, k[j].nblk,
                    c / per, k[j].span / per / 1e3, k[j].span / c / 1e3, k[j].work / c / 1e3, k[j].mid / c / 1e3,
                    k[j].gap / c / 1e3, k[j].early / c / 1e3, 100.0 * k[j].span / (tot_span > 0 ? tot_span : 1));
        }
        fprintf(f, "(per launch, us: span = to the next launch's first wait return; work = first wait return to last "
                   "block exit; median = to the median block's exit; gap = last exit to the next launch's first wait "
                   "return; early = first arrival to first wait return)\n");
    }
done:
    if (out && fclose(out) && !st) st = cuda_fail(be, MEMRA_ERR_IO, "timeline: cannot write %s", csv);
    free(r), free(g), free(k);
    return st;
}
#endif
