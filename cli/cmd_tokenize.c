/* memra tokenize: not implemented yet. */
#include <stdio.h>

#include "commands.h"

int memra_cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "memra tokenize: not implemented yet\n");
    return 2;
}
