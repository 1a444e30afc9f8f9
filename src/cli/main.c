/* ablate: architecture ablations of small GPT models, swept over MPI into one HDF5 file. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "git_rev.h" /* generated at build time (cmake/git_rev.cmake) */

#include "util/log.h"
#include "commands.h"
#include "isa_check.h"
#include "orchestrator/record/h5table.h"
#include "util/addr_space.h"
#include "util/test_hooks.h"
#include "orchestrator/process/sweep_signals.h"
#include "worker/blas_env.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} Command;

static const Command commands[] = {
    {"train", cmd_train, "train one run of a spec (its base, plus --set overrides)"},
    {"plan", cmd_plan, "list every run a spec plans, with ids, sizes and cost, without training"},
    {"run", cmd_run, "run a whole sweep (under mpirun/srun) into one HDF5 file"},
    {"inspect", cmd_inspect, "list the runs of a results file and their status"},
    {"view", cmd_view, "rebuild a results file from its journal, without training"},
    {"tokenize", cmd_tokenize, "encode a text file into GPT-2 tokens (.bin), or --decode one"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: ablate <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'ablate <command> --help' describes a command. Version %s (%s).\n",
            ABLATE_VERSION, ABLATE_GIT_REV);
}

int main(int argc, char **argv) {
    /* before anything that maps memory: under a small `ulimit -v` OpenBLAS, MPI and HDF5
     * hang or crash instead of failing (addr_space.h). _exit: OpenBLAS's exit handler
     * would wait for its thread that is spinning on a buffer it cannot map. */
    if (argc >= 2 && argv[1][0] != '-') log_set_command(argv[1]); /* its errors name it */
    if (argc >= 2 && argv[1][0] != '-' &&
        addr_space_check(strcmp(argv[1], "run") == 0 ? ADDR_SPACE_RUN_EXTRA
                                                     : ADDR_SPACE_OTHER_EXTRA) != 0)
        _exit(2);
    test_hooks_load();     /* once, before any thread: no step reads the environment */
    sweep_signals_block(); /* until `run` has its handlers: see sweep_signals.h */
    blas_ensure_env(argv, blas_argv_threads(argv));
    h5_process_init();
    if (argc < 2 || strcmp(argv[1], "run") != 0) sweep_signals_unblock();
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        /* the ISA level too: a site's installs for two levels say which is which */
        printf("ablate %s (%s, built for %s)\n", ABLATE_VERSION, ABLATE_GIT_REV, ablate_isa_arch);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            log_set_command(commands[i].name); /* errors say "ablate NAME: ..." */
            return commands[i].fn(argc - 1, argv + 1);
        }
    log_info("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}
