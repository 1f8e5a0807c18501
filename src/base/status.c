#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *memra_status_str(memra_status s) {
    switch (s) {
    case MEMRA_OK: return "MEMRA_OK";
    case MEMRA_ERR_IO: return "MEMRA_ERR_IO";
    case MEMRA_ERR_FORMAT: return "MEMRA_ERR_FORMAT";
    case MEMRA_ERR_UNSUPPORTED: return "MEMRA_ERR_UNSUPPORTED";
    case MEMRA_ERR_NOMEM: return "MEMRA_ERR_NOMEM";
    case MEMRA_ERR_INVALID: return "MEMRA_ERR_INVALID";
    case MEMRA_ERR_NOT_FOUND: return "MEMRA_ERR_NOT_FOUND";
    case MEMRA_ERR_DEVICE: return "MEMRA_ERR_DEVICE";
    case MEMRA_ERR_LIMIT: return "MEMRA_ERR_LIMIT";
    case MEMRA_ERR_CANCELLED: return "MEMRA_ERR_CANCELLED";
    }
    return "MEMRA_ERR_UNKNOWN";
}

memra_status memra_errorf(memra_error *err, memra_status s, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return s;
}

void memra_error_prefix(memra_error *err, const char *fmt, ...) {
    if (!err) return;
    char head[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", head, old);
}
