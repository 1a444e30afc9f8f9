/* Waiting by polling (an MPI message, a file) without spinning: sleep between polls,
 * doubling from min to max, so that an idle poller leaves the CPU to the work it waits for
 * (on a small machine, the core a run or a calibration trial is timed on) and still answers
 * within max. Open MPI's blocking probes spin at 100% of a core instead. */
#ifndef ABLATE_UTIL_BACKOFF_H
#define ABLATE_UTIL_BACKOFF_H

typedef struct {
    long min_ns, max_ns;
    long ns; /* the next sleep; 0: min */
} Backoff;

#define BACKOFF_INIT(min_ns, max_ns)                                                               \
    { (min_ns), (max_ns), 0 }

/* Sleeps the next interval (at most cap_ns when cap_ns > 0: something due sooner), then
 * doubles it up to max. */
void backoff_sleep(Backoff *b, long cap_ns);
/* Something arrived: the next wait starts from min again. */
void backoff_reset(Backoff *b);
/* A cap for backoff_sleep that answers within 1/share of `typical` seconds (the length of
 * the runs whose end or start is waited for), within b's [min, max]; 0 (no cap) while
 * nothing is known (typical <= 0). With max alone, a poller that slept 10-20 ms added that
 * to every run of a few ms (25 ms between runs of 6 ms). */
long backoff_cap_share(const Backoff *b, double typical, int share);

#endif
