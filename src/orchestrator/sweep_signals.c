#include "sweep_signals.h"

#include <signal.h>
#include <string.h>

#include "sweep.h"

static volatile sig_atomic_t got_usr1, got_term;

static void on_signal(int sig) {
    if (sig == SIGUSR1)
        got_usr1 = 1;
    else
        got_term = 1;
}

void sweep_install_signals(int rank) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    /* Workers keep SIGTERM's default (die at once): they hold nothing finished. Rank 0
     * catches it to sync the journal before leaving. */
    if (rank == 0) sigaction(SIGTERM, &sa, NULL);
}

int sweep_signal_usr1(void) {
    return got_usr1;
}
int sweep_signal_term(void) {
    return got_term;
}
