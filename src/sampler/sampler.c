#include "sampler/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A candidate token with its probability (or logit before softmax). */
typedef struct cand {
    float p;
    int32_t id;
} cand;

struct memra_sampler {
    memra_sampling par;
    int32_t n_vocab;
    uint64_t step;
    int32_t *hist; /* ring of the last hist_cap accepted tokens */
    int64_t hist_cap, hist_len, hist_head;
    int32_t *count;   /* [n_vocab] occurrences inside the window, rebuilt per sample */
    float *logits;    /* [n_vocab] working copy */
    cand *cands;      /* [n_vocab] */
};

memra_sampling memra_sampling_default(void) {
    memra_sampling p = {0};
    p.temperature = 0.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.penalty_last_n = 64;
    p.seed = 0;
    return p;
}

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

float memra_rng_uniform(uint64_t seed, uint64_t step) {
    uint64_t r = splitmix64(splitmix64(seed) ^ step);
    return (float)(r >> 40) * (1.0f / 16777216.0f);
}

memra_status memra_sampler_init(memra_sampler **out, int32_t n_vocab, const memra_sampling *par, memra_error *err) {
    *out = NULL;
    if (n_vocab <= 0) return memra_errorf(err, MEMRA_ERR_INVALID, "sampler: vocabulary size %d", (int)n_vocab);
    if (!(par->temperature >= 0.0f || par->temperature < 0.0f) || !isfinite(par->temperature))
        return memra_errorf(err, MEMRA_ERR_INVALID, "sampler: temperature must be a finite number");
    if (!(par->top_p >= 0.0f) || !(par->min_p >= 0.0f) || !(par->min_p <= 1.0f))
        return memra_errorf(err, MEMRA_ERR_INVALID, "sampler: top_p must be >= 0 and min_p in [0, 1]");
    if (!(par->repeat_penalty > 0.0f) || !isfinite(par->repeat_penalty))
        return memra_errorf(err, MEMRA_ERR_INVALID, "sampler: repeat_penalty must be > 0");
    if (!isfinite(par->presence_penalty) || !isfinite(par->frequency_penalty))
        return memra_errorf(err, MEMRA_ERR_INVALID, "sampler: presence/frequency penalties must be finite");
    memra_sampler *s = calloc(1, sizeof *s);
    if (!s) return memra_errorf(err, MEMRA_ERR_NOMEM, "sampler: out of memory");
    s->par = *par;
    s->n_vocab = n_vocab;
    s->hist_cap = par->penalty_last_n < 0 ? 4096 : par->penalty_last_n;
    s->hist = malloc((size_t)(s->hist_cap > 0 ? s->hist_cap : 1) * sizeof *s->hist);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->logits = malloc((size_t)n_vocab * sizeof *s->logits);
    s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    if (!s->hist || !s->count || !s->logits || !s->cands) {
        memra_sampler_free(s);
        return memra_errorf(err, MEMRA_ERR_NOMEM, "sampler: out of memory for %d tokens", (int)n_vocab);
    }
    *out = s;
    return MEMRA_OK;
}

void memra_sampler_free(memra_sampler *s) {
    if (!s) return;
    free(s->hist);
    free(s->count);
    free(s->logits);
    free(s->cands);
    free(s);
}

void memra_sampler_reset(memra_sampler *s) {
    s->step = 0;
    s->hist_len = 0;
    s->hist_head = 0;
}

uint64_t memra_sampler_step(const memra_sampler *s) { return s->step; }

void memra_sampler_accept(memra_sampler *s, int32_t token) {
    if (token < 0 || token >= s->n_vocab) return;
    if (s->hist_cap == 0) return;
    if (s->par.penalty_last_n < 0 && s->hist_len == s->hist_cap) {
        /* "all tokens": grow the window instead of forgetting */
        int32_t *h = malloc((size_t)s->hist_cap * 2 * sizeof *h);
        if (h) {
            for (int64_t i = 0; i < s->hist_len; i++) h[i] = s->hist[(s->hist_head + i) % s->hist_cap];
            free(s->hist);
            s->hist = h;
            s->hist_head = 0;
            s->hist_cap *= 2;
        }
    }
    int64_t at = (s->hist_head + s->hist_len) % s->hist_cap;
    if (s->hist_len < s->hist_cap) {
        s->hist_len++;
    } else {
        s->hist_head = (s->hist_head + 1) % s->hist_cap;
    }
    s->hist[at] = token;
}

static void apply_penalties(memra_sampler *s, float *lg) {
    const memra_sampling *p = &s->par;
    if (s->hist_len == 0) return;
    if (p->repeat_penalty == 1.0f && p->presence_penalty == 0.0f && p->frequency_penalty == 0.0f) return;
    for (int64_t i = 0; i < s->hist_len; i++) s->count[s->hist[(s->hist_head + i) % s->hist_cap]]++;
    for (int64_t i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[(s->hist_head + i) % s->hist_cap];
        int32_t c = s->count[t];
        if (c == 0) continue; /* already handled */
        float l = lg[t];
        if (p->repeat_penalty != 1.0f) l = l > 0.0f ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)c * p->frequency_penalty + p->presence_penalty;
        lg[t] = l;
        s->count[t] = 0;
    }
}

/* Orders candidates by probability descending, id ascending. */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

static int cand_better(cand a, cand b) { return a.p > b.p || (a.p == b.p && a.id < b.id); }

/* Moves the k best of c[0..n) to the front, sorted; returns k. Uses a min-heap
 * of size k (O(n log k)) since k is usually far below n. */
static int64_t select_top(cand *c, int64_t n, int64_t k) {
    if (k >= n) {
        qsort(c, (size_t)n, sizeof *c, cand_cmp);
        return n;
    }
    /* heap of the k best in c[0..k): root = the worst of them */
    for (int64_t i = k / 2 - 1; i >= 0; i--) {
        for (int64_t j = i;;) {
            int64_t l = 2 * j + 1, r = l + 1, w = j;
            if (l < k && cand_better(c[w], c[l])) w = l;
            if (r < k && cand_better(c[w], c[r])) w = r;
            if (w == j) break;
            cand t = c[j]; c[j] = c[w]; c[w] = t; j = w;
        }
    }
    for (int64_t i = k; i < n; i++) {
        if (!cand_better(c[i], c[0])) continue;
        cand out = c[0]; /* swap, so c stays a permutation (a later full sort needs every element) */
        c[0] = c[i];
        c[i] = out;
        for (int64_t j = 0;;) {
            int64_t l = 2 * j + 1, r = l + 1, w = j;
            if (l < k && cand_better(c[w], c[l])) w = l;
            if (r < k && cand_better(c[w], c[r])) w = r;
            if (w == j) break;
            cand t = c[j]; c[j] = c[w]; c[w] = t; j = w;
        }
    }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
    return k;
}

int32_t memra_sampler_sample(memra_sampler *s, const float *logits) {
    const memra_sampling *p = &s->par;
    const int64_t n = s->n_vocab;
    float *lg = s->logits;
    memcpy(lg, logits, (size_t)n * sizeof *lg);
    apply_penalties(s, lg);
    uint64_t step = s->step++;

    if (p->temperature <= 0.0f) {
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (lg[i] > lg[best]) best = i;
        return (int32_t)best;
    }

    /* softmax at temperature; candidates keep unnormalised exp values */
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (lg[i] > mx) mx = lg[i];
    cand *c = s->cands;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf((lg[i] - mx) / p->temperature);
        if (e > 0.0f) c[m++] = (cand){e, (int32_t)i};
    }
    if (m == 0) return (int32_t)0; /* all logits were -inf: nothing to draw from */

    /* top-k (k = m when off). The top-p nucleus is measured against the mass of
     * the top-k set; without top-k that is all m candidates, and then the 1024
     * best nearly always hold the nucleus, so try them before a full sort. */
    int64_t k = p->top_k > 0 && p->top_k < m ? p->top_k : m;
    double set_mass = 0.0;
    if (k == m && p->top_p < 1.0f && m > 1024) {
        for (int64_t i = 0; i < m; i++) set_mass += c[i].p;
        int64_t h = select_top(c, m, 1024);
        double head = 0.0;
        for (int64_t i = 0; i < h; i++) head += c[i].p;
        if (head >= (double)p->top_p * set_mass) {
            k = h;
        } else {
            qsort(c, (size_t)m, sizeof *c, cand_cmp);
        }
    } else {
        k = select_top(c, m, k);
        for (int64_t i = 0; i < k; i++) set_mass += c[i].p;
    }
    if (p->top_p < 1.0f) {
        double mass = 0.0, need = (double)p->top_p * set_mass;
        int64_t keep = 0;
        while (keep < k) {
            mass += c[keep].p;
            keep++;
            if (mass >= need) break;
        }
        k = keep;
    }
    if (p->min_p > 0.0f) {
        float floor_p = p->min_p * c[0].p;
        int64_t keep = 1;
        while (keep < k && c[keep].p >= floor_p) keep++;
        k = keep;
    }

    double total = 0.0;
    for (int64_t i = 0; i < k; i++) total += c[i].p;
    double target = (double)memra_rng_uniform(p->seed, step) * total, acc = 0.0;
    for (int64_t i = 0; i < k; i++) {
        acc += c[i].p;
        if (acc > target) return c[i].id;
    }
    return c[k - 1].id;
}
