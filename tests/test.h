/* Minimal test harness: CHECK counts, a failure prints its place and a
 * message, and test_finish() prints "NAME: N passed, N failed" (tests/run.sh
 * adds these up). Include once per test program. */
#ifndef MEMRA_TEST_H
#define MEMRA_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int test_passed, test_failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            test_passed++;                                                 \
        } else {                                                           \
            test_failed++;                                                 \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

/* The fixture folder (../shared/fixtures from the repo root, or
 * $MEMRA_FIXTURES), or NULL when it does not exist. */
static inline const char *test_fixtures_dir(void) {
    const char *e = getenv("MEMRA_FIXTURES");
    const char *d = e && *e ? e : "../shared/fixtures";
    struct stat st;
    return stat(d, &st) == 0 && S_ISDIR(st.st_mode) ? d : NULL;
}

static inline int test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, test_passed, test_failed);
    return test_failed ? 1 : 0;
}

#endif
