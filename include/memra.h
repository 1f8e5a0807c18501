/* memra: inference engine for the Qwen3.5 family of hybrid language models.
 *
 * This is the only public header. The CLI and the server include nothing else
 * (debug subcommands excepted). Every call that can fail returns a
 * memra_status and, where it takes one, fills a memra_error with a message
 * that names the file, field, offset or request that was wrong. */
#ifndef MEMRA_H
#define MEMRA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0 = OK, negative = error. */
typedef enum memra_status {
    MEMRA_OK = 0,
    MEMRA_ERR_IO = -1,          /* open/read/mmap/write failed */
    MEMRA_ERR_FORMAT = -2,      /* malformed file or input: bad magic, truncated, out of range */
    MEMRA_ERR_UNSUPPORTED = -3, /* well-formed but not something memra handles (type, arch) */
    MEMRA_ERR_NOMEM = -4,       /* host or device allocation failed */
    MEMRA_ERR_INVALID = -5,     /* bad argument from the caller */
    MEMRA_ERR_NOT_FOUND = -6,   /* missing key, tensor or file */
    MEMRA_ERR_DEVICE = -7,      /* CUDA runtime error */
    MEMRA_ERR_LIMIT = -8,       /* a limit was reached: context length, slots */
    MEMRA_ERR_CANCELLED = -9,   /* stopped by the caller */
} memra_status;

/* Error message buffer filled by failing calls. */
typedef struct memra_error {
    char msg[512];
} memra_error;

/* Sampling parameters of one request. memra_sampling_default() gives greedy
 * decoding with every filter off. The order the sampler applies them in is
 * fixed: penalties -> temperature -> top-k -> top-p -> min-p -> draw. */
typedef struct memra_sampling {
    float temperature;       /* <= 0: greedy (argmax, lowest id on ties); default 0 */
    int32_t top_k;           /* keep the k most likely tokens; <= 0: off (default) */
    float top_p;             /* keep the smallest set with mass >= top_p; >= 1: off (default 1) */
    float min_p;             /* drop tokens with p < min_p * p_max; <= 0: off (default 0) */
    float repeat_penalty;    /* CTRL-style: logit > 0 ? logit / r : logit * r; 1: off (default) */
    float presence_penalty;  /* logit -= presence if the token occurred; 0: off (default) */
    float frequency_penalty; /* logit -= frequency * count; 0: off (default) */
    int32_t penalty_last_n;  /* how many recent tokens the penalties look at; < 0: all (default 64) */
    uint64_t seed;           /* the draw at step n uses the counter-based RNG at (seed, n) */
} memra_sampling;

memra_sampling memra_sampling_default(void);

/* ------------------------------------------------------------------------ */
/* Engine: a model loaded on a backend, its tokenizer and chat template, and
 * state for n_slots sequences. One thread drives an engine at a time. */

typedef struct memra_engine memra_engine;

/* Loading progress: fraction in [0, 1]; called from the loading thread. */
typedef void (*memra_progress_fn)(void *user, float fraction);

typedef struct memra_engine_options {
    const char *backend;  /* "auto" (CUDA when a device is there, else CPU; default), "cpu", "cuda" */
    int n_threads;        /* CPU backend threads; <= 0: all CPUs (default) */
    int device;           /* CUDA device index (default 0) */
    int32_t n_ctx;        /* tokens per sequence; <= 0: min(4096, the model's training context) */
    int32_t n_slots;      /* sequences held at once (default 1) */
    int32_t max_batch;    /* tokens per forward step, prefill chunk size (default 512) */
    memra_progress_fn progress; /* NULL: none */
    void *progress_user;
} memra_engine_options;

memra_engine_options memra_engine_options_default(void);

memra_status memra_engine_open(const char *model_path, const memra_engine_options *opt, memra_engine **out,
                               memra_error *err);
void memra_engine_close(memra_engine *e);

/* What was loaded, for banners and /v1/models. */
typedef struct memra_engine_info {
    const char *arch;          /* "qwen35", "qwen35moe", "qwen3next" */
    const char *backend;       /* "cpu", "cuda" */
    const char *chat_template; /* "qwen35", "qwen3", "chatml" */
    int chat_template_exact;   /* 0: the file's template was not recognised; ChatML is used */
    int64_t n_params;
    int64_t n_vocab;
    int32_t n_ctx;
    int32_t n_layer;
} memra_engine_info;

void memra_engine_get_info(const memra_engine *e, memra_engine_info *info);

/* Tokenizes text (allow_special: match control tokens such as <|im_start|>;
 * 0 for untrusted user text). *ids is malloc'd; free() it. */
memra_status memra_tokenize(const memra_engine *e, const char *text, size_t len, int allow_special, int32_t **ids,
                            size_t *n_ids, memra_error *err);

/* Renders a conversation with the model's chat template.
 * messages_json: a JSON array of OpenAI-style messages; tools_json: a JSON
 * array of tools or NULL. *out is malloc'd; free() it. */
typedef struct memra_chat_params {
    int enable_thinking;       /* default 1 */
    int add_generation_prompt; /* default 1 */
} memra_chat_params;

memra_chat_params memra_chat_params_default(void);

memra_status memra_chat_apply(const memra_engine *e, const char *messages_json, const char *tools_json,
                              const memra_chat_params *p, char **out, memra_error *err);

/* A session is one sequence in one slot. Its state carries over between
 * generate calls: a prompt that extends what the session has already seen is
 * only prefilled from where they differ (the recurrent state of Gated
 * DeltaNet layers cannot be rolled back, so any other prompt starts over). */
typedef struct memra_session memra_session;

memra_status memra_session_open(memra_engine *e, memra_session **out, memra_error *err);
void memra_session_close(memra_session *s);
void memra_session_reset(memra_session *s);

/* Called with each piece of generated text as soon as it is complete UTF-8
 * (text may be empty for a token that completes nothing yet). Return nonzero
 * to stop generating. */
typedef int (*memra_token_fn)(void *user, int32_t token, const char *text, size_t len);

typedef enum memra_finish {
    MEMRA_FINISH_NONE = 0,
    MEMRA_FINISH_STOP = 1,      /* an end-of-generation token */
    MEMRA_FINISH_LENGTH = 2,    /* max_tokens reached, or the context is full */
    MEMRA_FINISH_CANCELLED = 3, /* the callback or *cancel asked to stop */
} memra_finish;

typedef struct memra_generate_params {
    memra_sampling sampling;
    int32_t max_tokens;         /* tokens to generate at most (default 256) */
    const volatile int *cancel; /* checked between forward steps; NULL: none */
} memra_generate_params;

memra_generate_params memra_generate_params_default(void);

typedef struct memra_generate_stats {
    int64_t n_prompt;       /* prompt tokens given */
    int64_t n_prefilled;    /* of which were computed (the rest came from the session) */
    int64_t n_generated;
    double prefill_seconds;
    double generate_seconds;
    memra_finish finish;
} memra_generate_stats;

memra_status memra_session_generate(memra_session *s, const int32_t *prompt, size_t n_prompt,
                                    const memra_generate_params *p, memra_token_fn on_token, void *user,
                                    memra_generate_stats *stats, memra_error *err);

/* Short constant name of a status ("MEMRA_ERR_FORMAT"). */
const char *memra_status_str(memra_status s);

#ifdef __cplusplus
}
#endif
#endif /* MEMRA_H */
