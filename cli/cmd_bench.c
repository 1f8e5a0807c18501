/* memra bench: not implemented yet. */
#include <stdio.h>

#include "commands.h"

int memra_cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "memra bench: not implemented yet\n");
    return 2;
}
