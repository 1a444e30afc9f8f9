#include "clock.h"

#include <stdio.h>
#include <time.h>

double clock_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void clock_utc_format(char *buf, unsigned long n, ClockUtcForm form) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char s[32];
    switch (form) {
    case CLOCK_UTC_MS:
        strftime(s, sizeof s, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf, n, "%s.%03ldZ", s, ts.tv_nsec / 1000000);
        return;
    case CLOCK_UTC_SECONDS:
        strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
        return;
    case CLOCK_UTC_COMPACT:
        strftime(buf, n, "%Y%m%dT%H%M%SZ", &tm);
        return;
    }
}

void clock_utc_now(char *buf, unsigned long n) {
    clock_utc_format(buf, n, CLOCK_UTC_MS);
}
