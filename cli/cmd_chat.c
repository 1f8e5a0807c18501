/* memra chat: not implemented yet. */
#include <stdio.h>

#include "commands.h"

int memra_cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "memra chat: not implemented yet\n");
    return 2;
}
