/* memra: the command-line entry point. Dispatches to cli/cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"run", memra_cmd_run, "generate text from a prompt"},
    {"chat", memra_cmd_chat, "interactive chat"},
    {"serve", memra_cmd_serve, "OpenAI-compatible HTTP server"},
    {"bench", memra_cmd_bench, "prefill and decode speed against the bandwidth ceiling"},
    {"gate", memra_cmd_gate, "exactness gates: kernels, model"},
    {"inspect", memra_cmd_inspect, "show a GGUF file's metadata and tensors"},
    {"eval", memra_cmd_eval, "run token ids and write raw float32 logits"},
    {"tokenize", memra_cmd_tokenize, "show the tokens of a text"},
    {"mkmodel", memra_cmd_mkmodel, "write a full-size random-weight model"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: memra COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'memra COMMAND --help' shows a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "memra: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
