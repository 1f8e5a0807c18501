#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int log_level = -1; /* -1: not yet read from the environment */

void memra_log_set_level(memra_log_level level) { atomic_store(&log_level, (int)level); }

static int current_level(void) {
    int l = atomic_load(&log_level);
    if (l >= 0) return l;
    const char *e = getenv("MEMRA_LOG");
    l = MEMRA_LOG_WARN;
    if (e && strcmp(e, "debug") == 0) l = MEMRA_LOG_DEBUG;
    else if (e && strcmp(e, "info") == 0) l = MEMRA_LOG_INFO;
    else if (e && strcmp(e, "error") == 0) l = MEMRA_LOG_ERROR;
    atomic_store(&log_level, l);
    return l;
}

void memra_log(memra_log_level level, const char *fmt, ...) {
    if ((int)level > current_level()) return;
    static const char *tag[] = {"error", "warning", "info", "debug"};
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "memra: %s: %s\n", tag[level], line);
}
