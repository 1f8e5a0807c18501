/* memra eval: not implemented yet. */
#include <stdio.h>

#include "commands.h"

int memra_cmd_eval(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "memra eval: not implemented yet\n");
    return 2;
}
