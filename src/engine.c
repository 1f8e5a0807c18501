/* The public engine API (include/memra.h): a model on a backend, its
 * tokenizer and chat template, per-sequence sessions, and generation.
 *
 * Ownership: the engine owns the backend, the model (which owns the GGUF
 * mapping), the tokenizer, the state pool and one batch. A session owns a
 * slot of the state pool and remembers the tokens whose effect is in that
 * slot, so that a follow-up prompt only prefills what is new. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "base/log.h"
#include "base/status.h"
#include "model/model.h"
#include "sampler/sampler.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

struct memra_engine {
    memra_backend *be;
    memra_model *model;
    memra_tokenizer *tok;
    memra_chat_template tmpl;
    bool tmpl_exact;
    memra_state *st;
    memra_batch batch;
    int32_t n_ctx, n_slots, max_batch;
    unsigned char *slot_used; /* [n_slots] */
    int64_t n_params;
};

struct memra_session {
    memra_engine *e;
    int32_t slot;
    int32_t *hist; /* [n_hist] tokens whose effect is in the slot's state */
    int32_t n_hist;
    float *last_logits; /* [n_vocab] logits after hist[n_hist-1] (valid when n_hist > 0) */
};

memra_engine_options memra_engine_options_default(void) {
    memra_engine_options o = {0};
    o.backend = "auto";
    o.n_threads = 0;
    o.device = 0;
    o.n_ctx = 0;
    o.n_slots = 1;
    o.max_batch = 512;
    return o;
}

memra_chat_params memra_chat_params_default(void) {
    memra_chat_params p = {1, 1};
    return p;
}

memra_generate_params memra_generate_params_default(void) {
    memra_generate_params p;
    memset(&p, 0, sizeof p);
    p.sampling = memra_sampling_default();
    p.max_tokens = 256;
    p.cancel = NULL;
    return p;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static memra_status open_backend(const memra_engine_options *o, memra_backend **be, memra_error *err) {
    const char *want = o->backend ? o->backend : "auto";
    if (!strcmp(want, "cpu")) return memra_backend_cpu_init(be, o->n_threads, err);
    if (!strcmp(want, "cuda")) return memra_backend_cuda_init(be, o->device, err);
    if (strcmp(want, "auto") != 0)
        return memra_errorf(err, MEMRA_ERR_INVALID, "unknown backend '%s' (expected auto, cpu or cuda)", want);
    memra_error cuda_err;
    if (memra_backend_cuda_init(be, o->device, &cuda_err) == MEMRA_OK) return MEMRA_OK;
    MEMRA_LOGI("CUDA backend not used (%s); running on the CPU", cuda_err.msg);
    return memra_backend_cpu_init(be, o->n_threads, err);
}

/* The weights are 95% of loading; the tokenizer and state the rest. */
typedef struct load_progress {
    memra_progress_fn fn;
    void *user;
} load_progress;

static void scaled_progress(void *user, float f) {
    load_progress *lp = user;
    lp->fn(lp->user, 0.95f * f);
}

static int64_t count_params(const memra_gguf *g) {
    int64_t n = 0;
    for (int64_t i = 0; i < memra_gguf_n_tensors(g); i++) {
        const memra_gguf_tensor *t = memra_gguf_tensor_at(g, i);
        int64_t c = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) c *= t->ne[d];
        n += c;
    }
    return n;
}

memra_status memra_engine_open(const char *path, const memra_engine_options *opt, memra_engine **out,
                               memra_error *err) {
    *out = NULL;
    memra_engine_options o = opt ? *opt : memra_engine_options_default();
    if (o.n_slots <= 0) o.n_slots = 1;
    if (o.max_batch <= 0) o.max_batch = 512;
    memra_engine *e = calloc(1, sizeof *e);
    if (!e) return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
    memra_status st;
    if (o.progress) o.progress(o.progress_user, 0.0f);
    if ((st = open_backend(&o, &e->be, err)) != MEMRA_OK) goto fail;
    load_progress lp = {o.progress, o.progress_user};
    if ((st = memra_model_load_progress(path, e->be, o.progress ? scaled_progress : NULL, &lp, &e->model, err)) !=
        MEMRA_OK)
        goto fail;
    if ((st = memra_tokenizer_from_gguf(e->model->gguf, &e->tok, err)) != MEMRA_OK) {
        memra_error_prefix(err, "%s", path);
        goto fail;
    }
    memra_gguf_str tmpl = {0};
    memra_error terr;
    if (memra_gguf_get_str(e->model->gguf, "tokenizer.chat_template", &tmpl, &terr) != MEMRA_OK) tmpl.ptr = NULL;
    e->tmpl = memra_chat_detect(tmpl.ptr, tmpl.ptr ? (size_t)tmpl.len : 0, &e->tmpl_exact);
    if (!e->tmpl_exact)
        MEMRA_LOGW("%s: chat template %s; rendering chats as %s", path,
                   tmpl.ptr ? "not recognised" : "missing", memra_chat_template_name(e->tmpl));

    int64_t n_ctx = o.n_ctx > 0 ? o.n_ctx : 4096;
    if (o.n_ctx <= 0 && e->model->cfg.n_ctx_train > 0 && e->model->cfg.n_ctx_train < n_ctx)
        n_ctx = e->model->cfg.n_ctx_train;
    e->n_ctx = (int32_t)n_ctx;
    e->n_slots = o.n_slots;
    e->max_batch = o.max_batch;
    e->slot_used = calloc((size_t)e->n_slots, 1);
    if (!e->slot_used) {
        st = memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if ((st = memra_state_init(e->model, e->n_slots, e->n_ctx, e->max_batch, e->n_slots, &e->st, err)) != MEMRA_OK)
        goto fail;
    if ((st = memra_batch_init(e->be, e->max_batch, e->n_slots, &e->batch, err)) != MEMRA_OK) goto fail;
    e->n_params = count_params(e->model->gguf);
    if (o.progress) o.progress(o.progress_user, 1.0f);
    *out = e;
    return MEMRA_OK;
fail:
    memra_engine_close(e);
    return st;
}

void memra_engine_close(memra_engine *e) {
    if (!e) return;
    if (e->batch.tokens) memra_batch_free(e->be, &e->batch);
    if (e->st) memra_state_free(e->model, e->st);
    memra_tokenizer_free(e->tok);
    memra_model_free(e->model);
    memra_backend_free(e->be);
    free(e->slot_used);
    free(e);
}

void memra_engine_get_info(const memra_engine *e, memra_engine_info *info) {
    memset(info, 0, sizeof *info);
    info->arch = e->model->cfg.arch_name;
    info->backend = e->be->name;
    info->chat_template = memra_chat_template_name(e->tmpl);
    info->chat_template_exact = e->tmpl_exact;
    info->n_params = e->n_params;
    info->n_vocab = e->model->cfg.n_vocab;
    info->n_ctx = e->n_ctx;
    info->n_layer = e->model->cfg.n_trunk;
}

memra_status memra_tokenize(const memra_engine *e, const char *text, size_t len, int allow_special, int32_t **ids,
                            size_t *n_ids, memra_error *err) {
    memra_tokens v = {0};
    memra_status st = memra_tokenizer_encode(e->tok, text, len, allow_special, &v, err);
    if (st != MEMRA_OK) {
        memra_tokens_free(&v);
        *ids = NULL;
        *n_ids = 0;
        return st;
    }
    *ids = v.ids;
    *n_ids = v.n;
    return MEMRA_OK;
}

memra_status memra_chat_apply(const memra_engine *e, const char *messages_json, const char *tools_json,
                              const memra_chat_params *p, char **out, memra_error *err) {
    *out = NULL;
    memra_chat_params cp = p ? *p : memra_chat_params_default();
    json_error_t jerr;
    json_t *msgs = json_loads(messages_json, 0, &jerr);
    if (!msgs) return memra_errorf(err, MEMRA_ERR_INVALID, "messages: bad JSON at line %d column %d: %s", jerr.line,
                                   jerr.column, jerr.text);
    json_t *tools = NULL;
    if (tools_json) {
        tools = json_loads(tools_json, 0, &jerr);
        if (!tools) {
            json_decref(msgs);
            return memra_errorf(err, MEMRA_ERR_INVALID, "tools: bad JSON at line %d column %d: %s", jerr.line,
                                jerr.column, jerr.text);
        }
    }
    memra_chat_options co = memra_chat_options_default();
    co.kind = e->tmpl;
    co.enable_thinking = cp.enable_thinking != 0;
    co.add_generation_prompt = cp.add_generation_prompt != 0;
    memra_status st = memra_chat_render(msgs, tools, &co, out, NULL, err);
    json_decref(msgs);
    json_decref(tools);
    return st;
}

memra_status memra_session_open(memra_engine *e, memra_session **out, memra_error *err) {
    *out = NULL;
    int32_t slot = -1;
    for (int32_t i = 0; i < e->n_slots && slot < 0; i++)
        if (!e->slot_used[i]) slot = i;
    if (slot < 0) return memra_errorf(err, MEMRA_ERR_LIMIT, "all %d sequence slots are in use", (int)e->n_slots);
    memra_session *s = calloc(1, sizeof *s);
    if (s) {
        s->hist = malloc((size_t)e->n_ctx * sizeof *s->hist);
        s->last_logits = malloc((size_t)e->model->cfg.n_vocab * sizeof *s->last_logits);
    }
    if (!s || !s->hist || !s->last_logits) {
        memra_session_close(s);
        return memra_errorf(err, MEMRA_ERR_NOMEM, "out of memory for a session");
    }
    s->e = e;
    s->slot = slot;
    e->slot_used[slot] = 1;
    *out = s;
    return MEMRA_OK;
}

void memra_session_close(memra_session *s) {
    if (!s) return;
    if (s->e) s->e->slot_used[s->slot] = 0;
    free(s->hist);
    free(s->last_logits);
    free(s);
}

void memra_session_reset(memra_session *s) { s->n_hist = 0; }

/* Runs tokens[0..n) of the session at positions n_hist.. and leaves the
 * logits after the last one in s->last_logits. */
static memra_status session_feed(memra_session *s, const int32_t *tokens, int32_t n, const volatile int *cancel,
                                 memra_error *err) {
    memra_engine *e = s->e;
    for (int32_t done = 0; done < n;) {
        if (cancel && *cancel) return MEMRA_ERR_CANCELLED;
        int32_t chunk = n - done < e->max_batch ? n - done : e->max_batch;
        memra_batch_clear(&e->batch);
        memra_status st = memra_batch_add(&e->batch, s->slot, tokens + done, chunk, s->n_hist);
        if (st != MEMRA_OK) return memra_errorf(err, st, "batch of %d tokens does not fit", (int)chunk);
        memra_forward_opts fo = {0};
        fo.all_logits = 0;
        fo.logits = s->last_logits;
        if ((st = memra_forward(e->model, e->st, &e->batch, &fo, err)) != MEMRA_OK) {
            s->n_hist = 0; /* the slot's state is unknown now */
            return st;
        }
        memcpy(s->hist + s->n_hist, tokens + done, (size_t)chunk * sizeof *tokens);
        s->n_hist += chunk;
        done += chunk;
    }
    return MEMRA_OK;
}

memra_status memra_session_generate(memra_session *s, const int32_t *prompt, size_t n_prompt,
                                    const memra_generate_params *gp, memra_token_fn on_token, void *user,
                                    memra_generate_stats *stats, memra_error *err) {
    memra_engine *e = s->e;
    memra_generate_params p = gp ? *gp : memra_generate_params_default();
    memra_generate_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    stats->n_prompt = (int64_t)n_prompt;
    if (n_prompt == 0) return memra_errorf(err, MEMRA_ERR_INVALID, "empty prompt");
    if (n_prompt >= (size_t)e->n_ctx)
        return memra_errorf(err, MEMRA_ERR_LIMIT, "prompt of %zu tokens does not fit the context of %d tokens",
                            n_prompt, (int)e->n_ctx);
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= e->model->cfg.n_vocab)
            return memra_errorf(err, MEMRA_ERR_INVALID, "prompt token %zu: id %d is outside the vocabulary (%lld)",
                                i, (int)prompt[i], (long long)e->model->cfg.n_vocab);

    /* reuse the session's state when the prompt extends what it has seen */
    size_t keep = 0;
    if (s->n_hist > 0 && (size_t)s->n_hist <= n_prompt && !memcmp(s->hist, prompt, (size_t)s->n_hist * sizeof *prompt))
        keep = (size_t)s->n_hist;
    else
        s->n_hist = 0; /* position 0 makes memra_forward reset the slot's recurrent state */

    memra_sampler *smp = NULL;
    memra_status st = memra_sampler_init(&smp, (int32_t)e->model->cfg.n_vocab, &p.sampling, err);
    if (st != MEMRA_OK) return st;
    for (size_t i = 0; i < n_prompt; i++) memra_sampler_accept(smp, prompt[i]);
    memra_detok dt;
    if ((st = memra_detok_init(&dt, e->tok, err)) != MEMRA_OK) {
        memra_sampler_free(smp);
        return st;
    }

    double t0 = now_seconds();
    st = session_feed(s, prompt + keep, (int32_t)(n_prompt - keep), p.cancel, err);
    stats->n_prefilled = (int64_t)(n_prompt - keep);
    double t1 = now_seconds();
    stats->prefill_seconds = t1 - t0;
    if (st == MEMRA_ERR_CANCELLED) {
        stats->finish = MEMRA_FINISH_CANCELLED;
        st = MEMRA_OK;
        goto done;
    }
    if (st != MEMRA_OK) goto done;

    for (;;) {
        if (stats->n_generated >= p.max_tokens || s->n_hist >= e->n_ctx) {
            stats->finish = MEMRA_FINISH_LENGTH;
            break;
        }
        if (p.cancel && *p.cancel) {
            stats->finish = MEMRA_FINISH_CANCELLED;
            break;
        }
        int32_t tok = memra_sampler_sample(smp, s->last_logits);
        memra_sampler_accept(smp, tok);
        stats->n_generated++;
        if (memra_tokenizer_is_eog(e->tok, tok)) {
            stats->finish = MEMRA_FINISH_STOP;
            break;
        }
        const char *text;
        size_t len;
        if ((st = memra_detok_push(&dt, tok, &text, &len, err)) != MEMRA_OK) break;
        if (on_token && on_token(user, tok, text, len)) {
            stats->finish = MEMRA_FINISH_CANCELLED;
            break;
        }
        /* the last token is only fed if another one is wanted: its effect is
         * what the next step (or the next prompt's prefix) needs */
        if (stats->n_generated >= p.max_tokens) {
            stats->finish = MEMRA_FINISH_LENGTH;
            break;
        }
        if ((st = session_feed(s, &tok, 1, NULL, err)) != MEMRA_OK) break;
    }
    const char *tail;
    size_t tail_len;
    memra_detok_flush(&dt, &tail, &tail_len);
    if (st == MEMRA_OK && tail_len && on_token) on_token(user, -1, tail, tail_len);
done:
    stats->generate_seconds = now_seconds() - t1;
    memra_detok_free(&dt);
    memra_sampler_free(smp);
    return st;
}
