#include "base/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct memra_pool {
    int n_threads; /* workers + the calling thread */
    pthread_t *workers;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    uint64_t generation; /* bumped for each parallel_for */
    int stop;
    /* the current job */
    memra_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_llong next;
    int active; /* workers still inside the current job */
};

static void run_chunks(memra_pool *p) {
    for (;;) {
        int64_t b = atomic_fetch_add(&p->next, p->chunk);
        if (b >= p->n) break;
        int64_t e = b + p->chunk < p->n ? b + p->chunk : p->n;
        p->fn(p->ctx, b, e);
    }
}

static void *worker_main(void *arg) {
    memra_pool *p = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_chunks(p);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

memra_status memra_pool_init(memra_pool **out, int n_threads) {
    *out = NULL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    memra_pool *p = calloc(1, sizeof *p);
    if (!p) return MEMRA_ERR_NOMEM;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            memra_pool_free(p);
            return MEMRA_ERR_NOMEM;
        }
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
                p->n_threads = i + 1;
                memra_pool_free(p);
                return MEMRA_ERR_NOMEM;
            }
        }
    }
    *out = p;
    return MEMRA_OK;
}

void memra_pool_free(memra_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; p->workers && i < p->n_threads - 1; i++) pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    free(p);
}

int memra_pool_size(const memra_pool *p) { return p ? p->n_threads : 1; }

void memra_pool_for(memra_pool *p, int64_t n, int64_t min_chunk, memra_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (min_chunk < 1) min_chunk = 1;
    if (!p || p->n_threads == 1 || n <= min_chunk) {
        fn(ctx, 0, n);
        return;
    }
    /* about 4 chunks per thread balances uneven rows without much overhead */
    int64_t chunk = (n + 4 * p->n_threads - 1) / (4 * p->n_threads);
    if (chunk < min_chunk) chunk = min_chunk;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    p->active = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
