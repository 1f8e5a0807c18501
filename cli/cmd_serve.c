/* memra serve: not implemented yet. */
#include <stdio.h>

#include "commands.h"

int memra_cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "memra serve: not implemented yet\n");
    return 2;
}
