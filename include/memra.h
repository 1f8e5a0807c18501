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

/* Short constant name of a status ("MEMRA_ERR_FORMAT"). */
const char *memra_status_str(memra_status s);

#ifdef __cplusplus
}
#endif
#endif /* MEMRA_H */
