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

/* Short constant name of a status ("MEMRA_ERR_FORMAT"). */
const char *memra_status_str(memra_status s);

#ifdef __cplusplus
}
#endif
#endif /* MEMRA_H */
