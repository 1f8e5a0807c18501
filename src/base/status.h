/* Status codes and the error-message helper shared by every module. */
#ifndef MEMRA_BASE_STATUS_H
#define MEMRA_BASE_STATUS_H

#include "memra.h"

#if defined(__GNUC__)
#define MEMRA_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MEMRA_PRINTF(a, b)
#endif

/* Formats a message into err (which may be NULL) and returns s, so that a
 * failure site reads: return memra_errorf(err, MEMRA_ERR_FORMAT, "...", ...); */
memra_status memra_errorf(memra_error *err, memra_status s, const char *fmt, ...) MEMRA_PRINTF(3, 4);

/* Prepends "prefix: " to an existing message (adds context on the way up). */
void memra_error_prefix(memra_error *err, const char *fmt, ...) MEMRA_PRINTF(2, 3);

/* Overflow-checked size arithmetic: return 0 on success, -1 on overflow. */
static inline int memra_mul_size(size_t a, size_t b, size_t *out) {
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}
static inline int memra_add_size(size_t a, size_t b, size_t *out) {
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

#define MEMRA_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
