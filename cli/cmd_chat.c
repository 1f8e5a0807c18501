/* memra chat: an interactive chat with history.
 *
 * Each turn re-renders the whole conversation with the model's chat template;
 * the session reuses its state for the part of the prompt it has already seen,
 * so only the new turn is prefilled (unless the template rewrites earlier
 * turns: Qwen3.5 drops the reasoning of old assistant turns, which makes the
 * prompt diverge and the session start over). Reasoning (<think>...</think>)
 * is shown dimmed on a terminal and kept apart from the answer in the
 * history. Ctrl-C stops the current reply; /exit or Ctrl-D leaves. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "common.h"

static volatile sig_atomic_t chat_cancel;

static void on_sigint(int sig) {
    (void)sig;
    chat_cancel = 1;
}

/* A growable string. */
typedef struct text {
    char *p;
    size_t n, cap;
} text;

static int text_add(text *t, const char *s, size_t n) {
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        while (cap < t->n + n + 1) cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p) return -1;
        t->p = p;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
    return 0;
}

typedef struct reply {
    int in_reasoning;
    int color;
    text reasoning, answer;
} reply;

static int on_piece(void *user, int32_t token, const char *s, size_t n) {
    (void)token;
    reply *r = user;
    if (n == 7 && !memcmp(s, "<think>", 7)) {
        r->in_reasoning = 1;
        if (r->color) fputs("\033[2m", stdout);
        fflush(stdout);
        return 0;
    }
    if (n == 8 && !memcmp(s, "</think>", 8)) {
        r->in_reasoning = 0;
        fputs(r->color ? "\033[0m\n" : "\n---\n", stdout);
        fflush(stdout);
        return 0;
    }
    if (r->in_reasoning) {
        text_add(&r->reasoning, s, n);
    } else {
        /* the template puts "\n\n" after </think>: not part of the answer */
        if (r->answer.n == 0)
            while (n && *s == '\n') s++, n--;
        text_add(&r->answer, s, n);
    }
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    return 0;
}

static void trim(text *t) {
    while (t->n && (t->p[t->n - 1] == '\n' || t->p[t->n - 1] == ' ')) t->p[--t->n] = 0;
    size_t k = 0;
    while (k < t->n && t->p[k] == '\n') k++;
    if (k) {
        memmove(t->p, t->p + k, t->n - k + 1);
        t->n -= k;
    }
}

static void usage(FILE *f) {
    fprintf(f, "usage: memra chat -m MODEL [options]\n\n"
               "  --system TEXT           system message\n"
               "In the chat: /reset forgets the conversation, /exit (or Ctrl-D) leaves,\n"
               "Ctrl-C stops the current reply.\n\n");
    cli_gen_usage(f);
}

int memra_cmd_chat(int argc, char **argv) {
    cli_gen_opts o;
    cli_gen_opts_init(&o);
    o.gen.max_tokens = 2048;
    const char *system_msg = NULL;
    for (int i = 1; i < argc; i++) {
        int r = cli_gen_parse(&o, argc, argv, &i, "chat");
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--system") && i + 1 < argc) {
            system_msg = argv[++i];
        } else {
            fprintf(stderr, "memra chat: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    memra_engine *e = cli_open_engine(&o, "chat");
    if (!e) return 1;
    memra_error err;
    memra_session *s = NULL;
    if (memra_session_open(e, &s, &err) != MEMRA_OK) {
        fprintf(stderr, "memra chat: %s\n", err.msg);
        memra_engine_close(e);
        return 1;
    }
    int tty_in = isatty(0), color = isatty(1) && !getenv("NO_COLOR");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);

    json_t *msgs = json_array();
    if (system_msg) json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", system_msg));
    char line[16384];
    int rc = 0;
    if (tty_in) fprintf(stderr, "memra chat: /reset forgets, /exit leaves, Ctrl-C stops a reply\n");
    for (;;) {
        if (tty_in) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        chat_cancel = 0;
        if (!fgets(line, sizeof line, stdin)) {
            if (errno == EINTR && chat_cancel) {
                clearerr(stdin);
                fputc('\n', stdout);
                continue;
            }
            break;
        }
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            json_array_clear(msgs);
            if (system_msg)
                json_array_append_new(msgs, json_pack("{s:s,s:s}", "role", "system", "content", system_msg));
            memra_session_reset(s);
            fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        json_array_append_new(msgs, json_pack("{s:s,s:s%}", "role", "user", "content", line, n));
        char *mj = json_dumps(msgs, 0), *prompt = NULL;
        memra_chat_params cp = memra_chat_params_default();
        cp.enable_thinking = !o.no_think;
        memra_status st = mj ? memra_chat_apply(e, mj, NULL, &cp, &prompt, &err) : MEMRA_ERR_NOMEM;
        free(mj);
        int32_t *ids = NULL;
        size_t n_ids = 0;
        if (st == MEMRA_OK) st = memra_tokenize(e, prompt, strlen(prompt), 1, &ids, &n_ids, &err);
        reply r = {0};
        r.color = color;
        size_t plen = prompt ? strlen(prompt) : 0;
        if (plen >= 8 && !memcmp(prompt + plen - 8, "<think>\n", 8)) {
            r.in_reasoning = 1;
            if (color) fputs("\033[2m", stdout);
        }
        free(prompt);
        memra_generate_stats stats;
        if (st == MEMRA_OK) {
            memra_generate_params gp = o.gen;
            gp.cancel = (const volatile int *)&chat_cancel;
            st = memra_session_generate(s, ids, n_ids, &gp, on_piece, &r, &stats, &err);
        }
        free(ids);
        if (color) fputs("\033[0m", stdout);
        fputc('\n', stdout);
        fflush(stdout);
        if (st != MEMRA_OK) {
            fprintf(stderr, "memra chat: %s\n", err.msg);
            json_array_remove(msgs, json_array_size(msgs) - 1);
            free(r.reasoning.p);
            free(r.answer.p);
            if (st == MEMRA_ERR_LIMIT) continue; /* the conversation no longer fits; /reset helps */
            rc = 1;
            break;
        }
        trim(&r.answer);
        trim(&r.reasoning);
        json_t *m = json_pack("{s:s,s:s%}", "role", "assistant", "content", r.answer.p ? r.answer.p : "",
                              r.answer.n);
        if (r.reasoning.n) json_object_set_new(m, "reasoning_content", json_stringn(r.reasoning.p, r.reasoning.n));
        json_array_append_new(msgs, m);
        free(r.reasoning.p);
        free(r.answer.p);
        if (stats.finish == MEMRA_FINISH_CANCELLED) fprintf(stderr, "(stopped)\n");
        cli_print_summary(&stats);
    }
    json_decref(msgs);
    memra_session_close(s);
    memra_engine_close(e);
    return rc;
}
