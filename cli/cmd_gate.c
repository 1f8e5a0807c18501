/* memra gate: not implemented yet. */
#include <stdio.h>

#include "commands.h"

int memra_cmd_gate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "memra gate: not implemented yet\n");
    return 2;
}
