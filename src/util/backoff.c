#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "backoff.h"

#include <time.h>

void backoff_sleep(Backoff *b, long cap_ns) {
    long ns = b->ns ? b->ns : b->min_ns;
    if (cap_ns > 0 && ns > cap_ns) ns = cap_ns;
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
    long next = (b->ns ? b->ns : b->min_ns) * 2;
    b->ns = next < b->max_ns ? next : b->max_ns;
}

void backoff_reset(Backoff *b) {
    b->ns = 0;
}

long backoff_cap_share(const Backoff *b, double typical, int share) {
    if (!(typical > 0) || share <= 0) return 0;
    double ns = typical * 1e9 / share;
    return ns < (double)b->min_ns ? b->min_ns : ns > (double)b->max_ns ? b->max_ns : (long)ns;
}
