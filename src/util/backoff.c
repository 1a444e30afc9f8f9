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
