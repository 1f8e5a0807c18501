/* memra run: generate text from a prompt, streamed as it is made. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "common.h"

static volatile sig_atomic_t run_cancel;

static void on_sigint(int sig) {
    (void)sig;
    if (run_cancel) signal(SIGINT, SIG_DFL); /* a second Ctrl-C ends the program */
    run_cancel = 1;
}

static int print_piece(void *user, int32_t token, const char *text, size_t len) {
    (void)user;
    (void)token;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: memra run -m MODEL (-p PROMPT | -f FILE) [options]\n\n"
               "  -p, --prompt TEXT       the prompt\n"
               "  -f, --file FILE         read the prompt from a file\n"
               "  --chat                  wrap the prompt in the model's chat template as a user turn\n"
               "  --system TEXT           system message (with --chat)\n");
    cli_gen_usage(f);
}

int memra_cmd_run(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    const char *prompt = NULL, *file = NULL, *system_msg = NULL;
    int chat = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_gen_parse(&o, argc, argv, &i, "run");
        if (r < 0) return 2;
        if (r > 0) continue;
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--chat")) {
            chat = 1;
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file") ||
                    !strcmp(a, "--system")) && i + 1 < argc) {
            if (a[1] == 'p' || !strcmp(a, "--prompt")) prompt = argv[++i];
            else if (!strcmp(a, "--system")) system_msg = argv[++i];
            else file = argv[++i];
        } else {
            fprintf(stderr, "memra run: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if ((!prompt && !file) || (prompt && file)) {
        fprintf(stderr, "memra run: give the prompt with -p TEXT or -f FILE\n");
        usage(stderr);
        return 2;
    }
    size_t plen = 0;
    char *owned = NULL;
    if (file) {
        owned = cli_read_file(file, &plen);
        if (!owned) {
            fprintf(stderr, "memra run: cannot read prompt file '%s': %s\n", file, strerror(errno));
            return 1;
        }
        prompt = owned;
    } else {
        plen = strlen(prompt);
    }

    memra_engine *e = cli_open_engine(&o, "run");
    if (!e) {
        free(owned);
        return 1;
    }
    int rc = 1;
    char *rendered = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    memra_error err;
    memra_session *s = NULL;
    if (chat) {
        json_t *msgs = json_array();
        if (system_msg) json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", system_msg));
        json_array_append_new(msgs, json_pack("{s:s,s:s%}", "role", "user", "content", prompt, plen));
        char *mj = json_dumps(msgs, 0);
        json_decref(msgs);
        memra_chat_params cp = memra_chat_params_default();
        cp.enable_thinking = !o.no_think;
        memra_status st = mj ? memra_chat_apply(e, mj, NULL, &cp, &rendered, &err) : MEMRA_ERR_NOMEM;
        free(mj);
        if (st != MEMRA_OK) {
            fprintf(stderr, "memra run: chat template: %s\n", st == MEMRA_ERR_NOMEM ? "out of memory" : err.msg);
            goto out;
        }
        prompt = rendered;
        plen = strlen(rendered);
    }
    /* Prompts may spell special tokens (<|im_start|>), as chat templates do. */
    if (memra_tokenize(e, prompt, plen, 1, &ids, &n_ids, &err) != MEMRA_OK) {
        fprintf(stderr, "memra run: %s\n", err.msg);
        goto out;
    }
    if (memra_session_open(e, &s, &err) != MEMRA_OK) {
        fprintf(stderr, "memra run: %s\n", err.msg);
        goto out;
    }
    run_cancel = 0;
    signal(SIGINT, on_sigint);
    memra_generate_params gp = o.gen;
    gp.cancel = (const volatile int *)&run_cancel;
    memra_generate_stats stats;
    memra_status st = memra_session_generate(s, ids, n_ids, &gp, print_piece, NULL, &stats, &err);
    signal(SIGINT, SIG_DFL);
    printf("\n");
    fflush(stdout);
    if (st != MEMRA_OK) {
        fprintf(stderr, "memra run: %s\n", err.msg);
        goto out;
    }
    cli_print_summary(&stats);
    rc = stats.finish == MEMRA_FINISH_CANCELLED ? 130 : 0;
out:
    memra_session_close(s);
    free(ids);
    free(rendered);
    free(owned);
    memra_engine_close(e);
    return rc;
}
