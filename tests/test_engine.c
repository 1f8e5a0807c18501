/* The public engine API on the bundled model: a session that reuses its state
 * for a prompt extending what it has seen gives bit-identical results to a
 * fresh session that prefills everything (warm == cold), seeded sampling is
 * reproducible, and bad input gives errors, not crashes. */
#include <string.h>

#include "memra.h"
#include "test.h"

#define MODEL "tests/data/tiny-dense.f32.gguf"

typedef struct collected {
    int32_t tok[64];
    int n;
} collected;

static int collect(void *user, int32_t token, const char *text, size_t len) {
    (void)text;
    (void)len;
    collected *c = user;
    if (token >= 0 && c->n < 64) c->tok[c->n++] = token;
    return 0;
}

static memra_engine *open_engine(void) {
    memra_engine_options o = memra_engine_options_default();
    o.backend = "cpu";
    o.n_threads = 2;
    o.n_ctx = 256;
    o.n_slots = 2;
    o.max_batch = 16; /* small, so prompts are prefilled in several chunks */
    memra_engine *e = NULL;
    memra_error err;
    memra_status st = memra_engine_open(MODEL, &o, &e, &err);
    CHECK(st == MEMRA_OK, "open %s: %s", MODEL, err.msg);
    return e;
}

static void test_warm_equals_cold(memra_engine *e) {
    memra_error err;
    int32_t *p1 = NULL;
    size_t n1 = 0;
    const char *text = "The state of a Gated DeltaNet layer cannot be rolled back, so sessions only extend.";
    CHECK(memra_tokenize(e, text, strlen(text), 0, &p1, &n1, &err) == MEMRA_OK && n1 > 16, "tokenize");
    memra_session *warm = NULL, *cold = NULL;
    CHECK(memra_session_open(e, &warm, &err) == MEMRA_OK, "session: %s", err.msg);
    CHECK(memra_session_open(e, &cold, &err) == MEMRA_OK, "second session: %s", err.msg);
    memra_session *third = NULL;
    CHECK(memra_session_open(e, &third, &err) == MEMRA_ERR_LIMIT, "a third session exceeds 2 slots");

    memra_generate_params gp = memra_generate_params_default();
    gp.max_tokens = 6;
    collected g1 = {0};
    memra_generate_stats st1;
    CHECK(memra_session_generate(warm, p1, n1, &gp, collect, &g1, &st1, &err) == MEMRA_OK, "gen1: %s", err.msg);
    CHECK(st1.n_prefilled == (int64_t)n1 && g1.n == 6, "first call prefills all %zu tokens, makes 6", n1);

    /* extend: prompt + 5 generated (the 6th was never fed) + a few more */
    int32_t p2[256];
    size_t n2 = 0;
    for (size_t i = 0; i < n1; i++) p2[n2++] = p1[i];
    for (int i = 0; i < 5; i++) p2[n2++] = g1.tok[i];
    for (size_t i = 0; i < 7; i++) p2[n2++] = p1[i];
    gp.max_tokens = 12;
    collected gw = {0}, gc = {0};
    memra_generate_stats sw, sc;
    CHECK(memra_session_generate(warm, p2, n2, &gp, collect, &gw, &sw, &err) == MEMRA_OK, "warm: %s", err.msg);
    CHECK(sw.n_prefilled == 7, "warm session prefills only the 7 new tokens (got %lld)", (long long)sw.n_prefilled);
    CHECK(memra_session_generate(cold, p2, n2, &gp, collect, &gc, &sc, &err) == MEMRA_OK, "cold: %s", err.msg);
    CHECK(sc.n_prefilled == (int64_t)n2, "cold session prefills everything");
    CHECK(gw.n == gc.n && gw.n > 0 && !memcmp(gw.tok, gc.tok, (size_t)gw.n * sizeof(int32_t)),
          "warm and cold greedy tokens are identical");

    /* a prompt that does not extend the history starts over, same result as cold */
    collected ga = {0}, gb = {0};
    gp.max_tokens = 8;
    memra_generate_stats sa;
    CHECK(memra_session_generate(warm, p1 + 3, n1 - 3, &gp, collect, &ga, &sa, &err) == MEMRA_OK, "restart");
    CHECK(sa.n_prefilled == (int64_t)(n1 - 3), "a diverging prompt is prefilled from the start");
    memra_session_reset(cold);
    CHECK(memra_session_generate(cold, p1 + 3, n1 - 3, &gp, collect, &gb, NULL, &err) == MEMRA_OK, "cold restart");
    CHECK(ga.n == gb.n && !memcmp(ga.tok, gb.tok, (size_t)ga.n * sizeof(int32_t)), "restart equals cold");

    /* seeded sampling: same seed -> same tokens, in either session */
    gp.sampling.temperature = 1.0f;
    gp.sampling.seed = 1234;
    gp.max_tokens = 10;
    collected s1 = {0}, s2 = {0};
    memra_session_reset(warm);
    memra_session_reset(cold);
    CHECK(memra_session_generate(warm, p1, n1, &gp, collect, &s1, NULL, &err) == MEMRA_OK, "sample 1");
    CHECK(memra_session_generate(cold, p1, n1, &gp, collect, &s2, NULL, &err) == MEMRA_OK, "sample 2");
    CHECK(s1.n == s2.n && !memcmp(s1.tok, s2.tok, (size_t)s1.n * sizeof(int32_t)), "seeded sampling reproducible");

    /* bad input */
    int32_t bad[2] = {1, 1 << 30};
    CHECK(memra_session_generate(cold, bad, 2, &gp, NULL, NULL, NULL, &err) == MEMRA_ERR_INVALID,
          "token outside the vocabulary is rejected");
    CHECK(memra_session_generate(cold, bad, 0, &gp, NULL, NULL, NULL, &err) == MEMRA_ERR_INVALID, "empty prompt");
    int32_t *longp = calloc(300, sizeof(int32_t));
    CHECK(memra_session_generate(cold, longp, 300, &gp, NULL, NULL, NULL, &err) == MEMRA_ERR_LIMIT,
          "prompt longer than the context is rejected");
    free(longp);
    memra_session_close(warm);
    memra_session_close(cold);
    free(p1);
}

static void test_chat_apply(memra_engine *e) {
    char *out = NULL;
    memra_error err;
    memra_chat_params cp = memra_chat_params_default();
    cp.enable_thinking = 0;
    CHECK(memra_chat_apply(e, "[{\"role\":\"user\",\"content\":\"hi\"}]", NULL, &cp, &out, &err) == MEMRA_OK,
          "chat_apply: %s", err.msg);
    CHECK(out && strstr(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), "rendered: %s",
          out ? out : "(null)");
    free(out);
    CHECK(memra_chat_apply(e, "[{\"role\":", NULL, &cp, &out, &err) == MEMRA_ERR_INVALID && !out, "bad JSON");
}

int main(void) {
    memra_engine *e = open_engine();
    if (e) {
        test_warm_equals_cold(e);
        test_chat_apply(e);
        memra_engine_close(e);
    }
    memra_engine *none = NULL;
    memra_error err;
    CHECK(memra_engine_open("tests/data/does-not-exist.gguf", NULL, &none, &err) != MEMRA_OK && !none,
          "missing file fails");
    return test_finish("test_engine");
}
