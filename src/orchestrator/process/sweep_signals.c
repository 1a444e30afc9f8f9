#include "sweep_signals.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t got_usr1, got_term;

static void on_signal(int sig) {
    if (sig == SIGUSR1)
        got_usr1 = 1;
    else
        got_term = 1;
}

static void set_handler(int sig, void (*fn)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

void sweep_signals_install(void) {
    set_handler(SIGUSR1, on_signal);
    set_handler(SIGTERM, on_signal);
    sweep_signals_unblock(); /* what arrived while main() held them is delivered now */
}

static void mask_both(int how) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    sigprocmask(how, &set, NULL);
}

void sweep_signals_block(void) {
    mask_both(SIG_BLOCK);
}

void sweep_signals_unblock(void) {
    mask_both(SIG_UNBLOCK);
}

void sweep_signals_for_rank(int rank) {
    if (rank == 0) return;
    set_handler(SIGTERM, SIG_DFL);
    if (got_term) raise(SIGTERM); /* it came during MPI_Init: do what the default would */
}

int sweep_signal_usr1(void) {
    return got_usr1;
}
int sweep_signal_term(void) {
    return got_term;
}
int sweep_signal_take_usr1(void) {
    if (!got_usr1) return 0;
    got_usr1 = 0;
    return 1;
}
