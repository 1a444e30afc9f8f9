#include "sweep_signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "sweep.h"

static volatile sig_atomic_t got_usr1, got_term, got_int, last_sig;

/* SIGINT (Ctrl-C) and SIGHUP (the terminal closed) ask for a stop that keeps the work in
 * progress, as SIGUSR1 does; a second one, like SIGTERM, stops at once. Before, their
 * default killed the process with the journal's buffer unsynced and no checkpoint. */
static void on_signal(int sig) {
    last_sig = sig;
    if (sig == SIGUSR1)
        got_usr1 = 1;
    else if ((sig == SIGINT || sig == SIGHUP) && !got_int)
        got_int = 1;
    else
        got_term = 1;
}

/* Workers: SIGTERM (mpirun's way of ending a job, whatever signal it got) ends the rank
 * at once with the status of a resumable stop; it holds nothing finished (rank 0 has
 * journaled every event it sent). SIGINT/SIGHUP checkpoint the run in hand, as SIGUSR1. */
static void on_worker_term(int sig) {
    (void)sig;
    _exit(SWEEP_EXIT_STOPPED);
}
static void on_worker_int(int sig) {
    last_sig = sig;
    got_usr1 = 1;
}

static void set_handler(int sig, void (*fn)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(sig, &sa, NULL);
}

static const int stop_signals[] = {SIGUSR1, SIGTERM, SIGINT, SIGHUP};
#define N_STOP_SIGNALS (int)(sizeof stop_signals / sizeof *stop_signals)

void sweep_signals_install(void) {
    for (int i = 0; i < N_STOP_SIGNALS; i++) {
        struct sigaction old;
        /* nohup and `cmd &` in a non-interactive shell set SIGHUP/SIGINT to SIG_IGN on
         * purpose: keep that */
        if ((stop_signals[i] == SIGHUP || stop_signals[i] == SIGINT) &&
            sigaction(stop_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        set_handler(stop_signals[i], on_signal);
    }
    sweep_signals_unblock(); /* what arrived while main() held them is delivered now */
}

static void mask_all(int how) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < N_STOP_SIGNALS; i++)
        sigaddset(&set, stop_signals[i]);
    sigprocmask(how, &set, NULL);
}

void sweep_signals_block(void) {
    mask_all(SIG_BLOCK);
}

void sweep_signals_unblock(void) {
    mask_all(SIG_UNBLOCK);
}

void sweep_signals_for_rank(int rank) {
    if (rank == 0) return;
    sweep_signals_block();
    set_handler(SIGTERM, on_worker_term);
    for (int i = 2; i < N_STOP_SIGNALS; i++) {
        struct sigaction old;
        if (sigaction(stop_signals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            set_handler(stop_signals[i], on_worker_int);
    }
    if (got_int) got_usr1 = 1;
    int term = got_term;
    sweep_signals_unblock();
    if (term) _exit(SWEEP_EXIT_STOPPED); /* it came during MPI_Init */
}

int sweep_signal_usr1(void) {
    return got_usr1 || got_int;
}
int sweep_signal_term(void) {
    return got_term;
}
int sweep_signal_take_usr1(void) {
    if (!got_usr1) return 0;
    got_usr1 = 0;
    return 1;
}

const char *sweep_signal_name(void) {
    switch (last_sig) {
    case SIGINT:
        return "SIGINT";
    case SIGHUP:
        return "SIGHUP";
    case SIGTERM:
        return "SIGTERM";
    default:
        return "SIGUSR1";
    }
}
