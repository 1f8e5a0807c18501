/* Leveled logging to stderr. The level is set once by the CLI (no other
 * global configuration exists); MEMRA_LOG=debug overrides it for diagnostics. */
#ifndef MEMRA_BASE_LOG_H
#define MEMRA_BASE_LOG_H

#include "base/status.h"

typedef enum memra_log_level {
    MEMRA_LOG_ERROR = 0,
    MEMRA_LOG_WARN = 1,
    MEMRA_LOG_INFO = 2,
    MEMRA_LOG_DEBUG = 3,
} memra_log_level;

void memra_log_set_level(memra_log_level level);
void memra_log(memra_log_level level, const char *fmt, ...) MEMRA_PRINTF(2, 3);

#define MEMRA_LOGE(...) memra_log(MEMRA_LOG_ERROR, __VA_ARGS__)
#define MEMRA_LOGW(...) memra_log(MEMRA_LOG_WARN, __VA_ARGS__)
#define MEMRA_LOGI(...) memra_log(MEMRA_LOG_INFO, __VA_ARGS__)
#define MEMRA_LOGD(...) memra_log(MEMRA_LOG_DEBUG, __VA_ARGS__)

#endif
