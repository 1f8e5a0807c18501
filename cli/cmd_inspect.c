/* memra inspect: not implemented yet. */
#include <stdio.h>

#include "commands.h"

int memra_cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "memra inspect: not implemented yet\n");
    return 2;
}
