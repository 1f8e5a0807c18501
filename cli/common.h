/* Flag parsing shared by the generating subcommands (run, chat, serve):
 * model, backend and sampling flags map onto memra's options structs. */
#ifndef MEMRA_CLI_COMMON_H
#define MEMRA_CLI_COMMON_H

#include <stdio.h>

#include "memra.h"

typedef struct cli_gen_opts {
    const char *model;
    memra_engine_options engine;
    memra_generate_params gen;
    int no_think;
    int verbose;
} cli_gen_opts;

void cli_gen_opts_init(cli_gen_opts *o);

/* Consumes argv[*i] (and its value) if it is a shared flag. Returns 1 if
 * consumed, 0 if not a shared flag, -1 on a bad value (message printed). */
int cli_gen_parse(cli_gen_opts *o, int argc, char **argv, int *i, const char *cmd);

/* Help text of the shared flags. */
void cli_gen_usage(FILE *f);

/* Opens the engine with a progress bar on a terminal; prints one clear line
 * and returns NULL on failure. */
memra_engine *cli_open_engine(const cli_gen_opts *o, const char *cmd);

/* Reads a whole file (or stdin for "-") into a malloc'd buffer; NULL with errno
 * set on failure. */
char *cli_read_file(const char *path, size_t *len);

/* "prompt 12 tok, 345.6 tok/s | generation 32 tok, 78.9 tok/s" to stderr. */
void cli_print_summary(const memra_generate_stats *st);

#endif
