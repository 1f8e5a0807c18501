/* Host sampler: each stage against hand-computed expectations, the draw
 * against a brute-force reference, and reproducibility from (seed, step). */
#include <math.h>

#include "sampler/sampler.h"
#include "test.h"

static memra_sampler *make(int32_t n, memra_sampling p) {
    memra_sampler *s = NULL;
    memra_error err;
    if (memra_sampler_init(&s, n, &p, &err) != MEMRA_OK) fprintf(stderr, "init: %s\n", err.msg);
    return s;
}

static void test_greedy(void) {
    float lg[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 0.0f};
    memra_sampler *s = make(6, memra_sampling_default());
    CHECK(memra_sampler_sample(s, lg) == 1, "greedy picks the lowest id among equal maxima");
    memra_sampler_free(s);
}

static void test_penalties(void) {
    memra_sampling p = memra_sampling_default();
    p.repeat_penalty = 2.0f;
    /* token 0: 3.0 -> 1.5 after penalty; token 1: 2.0 stays -> greedy picks 1 */
    float lg[3] = {3.0f, 2.0f, -1.0f};
    memra_sampler *s = make(3, p);
    memra_sampler_accept(s, 0);
    CHECK(memra_sampler_sample(s, lg) == 1, "repeat penalty divides a positive logit");
    memra_sampler_free(s);

    /* a negative logit is multiplied: -1 * 2 = -2 < -1.5 */
    float lg2[2] = {-1.0f, -1.5f};
    s = make(2, p);
    memra_sampler_accept(s, 0);
    CHECK(memra_sampler_sample(s, lg2) == 1, "repeat penalty multiplies a negative logit");
    memra_sampler_free(s);

    p = memra_sampling_default();
    p.frequency_penalty = 0.4f;
    p.presence_penalty = 0.25f;
    /* token 0 seen 3 times: 2.0 - 3*0.4 - 0.25 = 0.55 < 0.6 */
    float lg3[2] = {2.0f, 0.6f};
    s = make(2, p);
    for (int i = 0; i < 3; i++) memra_sampler_accept(s, 0);
    CHECK(memra_sampler_sample(s, lg3) == 1, "frequency+presence: 0.55 < 0.6");
    float lg4[2] = {2.0f, 0.5f};
    CHECK(memra_sampler_sample(s, lg4) == 0, "frequency+presence: 0.55 > 0.5");
    memra_sampler_free(s);

    /* the window forgets tokens older than penalty_last_n */
    p = memra_sampling_default();
    p.presence_penalty = 10.0f;
    p.penalty_last_n = 2;
    float lg5[3] = {1.0f, 0.0f, 0.0f};
    s = make(3, p);
    memra_sampler_accept(s, 0);
    memra_sampler_accept(s, 1);
    memra_sampler_accept(s, 2);
    CHECK(memra_sampler_sample(s, lg5) == 0, "token 0 fell out of a window of 2");
    memra_sampler_free(s);
}

static void test_filters(void) {
    float lg[5] = {1.0f, 3.0f, 2.9f, 0.0f, -2.0f};
    memra_sampling p = memra_sampling_default();
    p.temperature = 1.0f;
    p.top_k = 1;
    memra_sampler *s = make(5, p);
    int ok = 1;
    for (int i = 0; i < 200; i++) ok &= memra_sampler_sample(s, lg) == 1;
    CHECK(ok, "top_k = 1 always gives the argmax");
    memra_sampler_free(s);

    p = memra_sampling_default();
    p.temperature = 1.0f;
    p.top_p = 0.3f; /* p(1) = 0.46 >= 0.3: nucleus is {1} */
    s = make(5, p);
    ok = 1;
    for (int i = 0; i < 200; i++) ok &= memra_sampler_sample(s, lg) == 1;
    CHECK(ok, "top_p below the largest probability keeps only the argmax");
    memra_sampler_free(s);

    p = memra_sampling_default();
    p.temperature = 1.0f;
    p.min_p = 0.5f; /* keeps 1 (p_max) and 2 (e^-0.1 = 0.905 of p_max); drops 0 (0.135) */
    s = make(5, p);
    int seen[5] = {0};
    for (int i = 0; i < 2000; i++) seen[memra_sampler_sample(s, lg)]++;
    CHECK(seen[0] == 0 && seen[3] == 0 && seen[4] == 0 && seen[1] > 0 && seen[2] > 0,
          "min_p 0.5 keeps exactly tokens 1 and 2 (seen %d %d %d %d %d)", seen[0], seen[1], seen[2], seen[3],
          seen[4]);
    /* frequencies follow p(1)/p(2) = e^0.1 = 1.105: 1050/950 of 2000 */
    CHECK(fabs(seen[1] / 2000.0 - 0.5250) < 0.03, "token 1 frequency %.3f vs 0.525", seen[1] / 2000.0);
    memra_sampler_free(s);
}

/* Reference: full softmax, full sort, then the same filters and draw. */
static int32_t reference_draw(const float *lg, int n, memra_sampling p, uint64_t step) {
    double *e = malloc(sizeof(double) * (size_t)n);
    int *order = malloc(sizeof(int) * (size_t)n);
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = lg[i] > mx ? lg[i] : mx;
    for (int i = 0; i < n; i++) {
        e[i] = (double)expf((lg[i] - mx) / p.temperature);
        order[i] = i;
    }
    for (int i = 1; i < n; i++) { /* insertion sort: prob desc, id asc */
        int v = order[i], j = i - 1;
        while (j >= 0 && (e[order[j]] < e[v] || (e[order[j]] == e[v] && order[j] > v))) {
            order[j + 1] = order[j];
            j--;
        }
        order[j + 1] = v;
    }
    int k = p.top_k > 0 && p.top_k < n ? p.top_k : n;
    double mass = 0;
    for (int i = 0; i < k; i++) mass += e[order[i]];
    if (p.top_p < 1.0f) {
        double acc = 0;
        int keep = 0;
        while (keep < k) {
            acc += e[order[keep++]];
            if (acc >= p.top_p * mass) break;
        }
        k = keep;
    }
    double total = 0;
    for (int i = 0; i < k; i++) total += e[order[i]];
    double target = memra_rng_uniform(p.seed, step) * total, acc = 0;
    int32_t r = order[k - 1];
    for (int i = 0; i < k; i++) {
        acc += e[order[i]];
        if (acc > target) {
            r = order[i];
            break;
        }
    }
    free(e);
    free(order);
    return r;
}

static void test_against_reference(void) {
    const int n = 5000;
    float *lg = malloc(sizeof(float) * n);
    uint64_t x = 12345;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        lg[i] = (float)((x >> 40) % 1000) / 100.0f - 5.0f; /* many exact ties on purpose */
    }
    float top_ps[] = {0.5f, 0.9f, 0.999f};
    int mism = 0, total = 0;
    for (size_t t = 0; t < 3; t++) {
        for (int tk = 0; tk <= 50; tk += 50) {
            memra_sampling p = memra_sampling_default();
            p.temperature = 0.7f;
            p.top_p = top_ps[t];
            p.top_k = tk;
            p.seed = 99 + t;
            memra_sampler *s = make(n, p);
            for (uint64_t step = 0; step < 40; step++) {
                int32_t a = memra_sampler_sample(s, lg), b = reference_draw(lg, n, p, step);
                mism += a != b;
                if (a != b && mism == 1) /* the first difference says where to look */
                    fprintf(stderr, "top_p %g top_k %d step %d: %d vs %d\n", (double)p.top_p, tk, (int)step, a, b);
                total++;
            }
            memra_sampler_free(s);
        }
    }
    CHECK(mism == 0, "%d of %d draws differ from the brute-force reference", mism, total);
    free(lg);
}

static void test_reproducible(void) {
    float lg[64];
    for (int i = 0; i < 64; i++) lg[i] = (float)(i % 7) * 0.3f;
    memra_sampling p = memra_sampling_default();
    p.temperature = 1.0f;
    p.seed = 42;
    memra_sampler *a = make(64, p), *b = make(64, p);
    p.seed = 43;
    memra_sampler *c = make(64, p);
    int same = 1, diff = 0;
    for (int i = 0; i < 100; i++) {
        int32_t x = memra_sampler_sample(a, lg), y = memra_sampler_sample(b, lg), z = memra_sampler_sample(c, lg);
        same &= x == y;
        diff += x != z;
    }
    CHECK(same, "same seed, same tokens");
    CHECK(diff > 10, "another seed gives other tokens (%d of 100 differ)", diff);
    memra_sampler_reset(a);
    CHECK(memra_sampler_step(a) == 0, "reset sets step to 0");
    /* the RNG is a fixed function: these values pin it (the device sampler must agree) */
    CHECK(memra_rng_uniform(0, 0) == memra_rng_uniform(0, 0), "pure function");
    float u0 = memra_rng_uniform(1, 0), u1 = memra_rng_uniform(1, 1);
    CHECK(u0 >= 0.0f && u0 < 1.0f && u1 >= 0.0f && u1 < 1.0f && u0 != u1, "u in [0,1), steps differ");
    double mean = 0;
    for (uint64_t i = 0; i < 100000; i++) mean += memra_rng_uniform(7, i);
    mean /= 100000;
    CHECK(fabs(mean - 0.5) < 0.005, "uniform mean %.4f", mean);
    memra_sampler_free(a);
    memra_sampler_free(b);
    memra_sampler_free(c);
}

static void test_bad_params(void) {
    memra_sampler *s = NULL;
    memra_error err;
    memra_sampling p = memra_sampling_default();
    p.repeat_penalty = 0.0f;
    CHECK(memra_sampler_init(&s, 10, &p, &err) == MEMRA_ERR_INVALID && !s, "repeat_penalty 0 rejected");
    p = memra_sampling_default();
    p.temperature = NAN;
    CHECK(memra_sampler_init(&s, 10, &p, &err) == MEMRA_ERR_INVALID, "NaN temperature rejected");
    p = memra_sampling_default();
    CHECK(memra_sampler_init(&s, 0, &p, &err) == MEMRA_ERR_INVALID, "empty vocabulary rejected");
}

int main(void) {
    test_greedy();
    test_penalties();
    test_filters();
    test_against_reference();
    test_reproducible();
    test_bad_params();
    return test_finish("test_sampler");
}
