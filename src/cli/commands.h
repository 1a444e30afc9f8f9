/* The ablate subcommands. Each returns the process exit status: 0 success, 1 a run or I/O
 * failure, 2 bad usage or an invalid spec. */
#ifndef ABLATE_CLI_COMMANDS_H
#define ABLATE_CLI_COMMANDS_H

int cmd_train(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_view(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);

#endif
