/* Subcommands of the memra CLI. Each takes argv starting at its own name and
 * returns the process exit status (0 ok, 1 runtime error, 2 usage error). */
#ifndef MEMRA_CLI_COMMANDS_H
#define MEMRA_CLI_COMMANDS_H

int memra_cmd_run(int argc, char **argv);
int memra_cmd_chat(int argc, char **argv);
int memra_cmd_serve(int argc, char **argv);
int memra_cmd_bench(int argc, char **argv);
int memra_cmd_gate(int argc, char **argv);
int memra_cmd_inspect(int argc, char **argv);
int memra_cmd_eval(int argc, char **argv);
int memra_cmd_tokenize(int argc, char **argv);
int memra_cmd_mkmodel(int argc, char **argv);

#endif
