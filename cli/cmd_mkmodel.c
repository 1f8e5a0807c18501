/* memra mkmodel: not implemented yet. */
#include <stdio.h>

#include "commands.h"

int memra_cmd_mkmodel(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "memra mkmodel: not implemented yet\n");
    return 2;
}
