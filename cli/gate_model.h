/* memra gate model: the forward pass of a backend against the fixture
 * references (cli/gate_model.c). Wired into `memra gate` by cli/cmd_gate.c. */
#ifndef MEMRA_CLI_GATE_MODEL_H
#define MEMRA_CLI_GATE_MODEL_H

/* argv[0] is "model". Returns the process exit status: 0 all passed, 1 a
 * failure (or nothing to check), 2 a usage error. */
int memra_gate_model(int argc, char **argv);

#endif
