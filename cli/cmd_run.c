/* memra run: not implemented yet. */
#include <stdio.h>

#include "commands.h"

int memra_cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "memra run: not implemented yet\n");
    return 2;
}
