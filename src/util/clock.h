/* The one monotonic clock every timing in ablate reads (training time, generation speed,
 * progress, view rebuilds). CLOCK_MONOTONIC: never jumps with the wall clock. */
#ifndef ABLATE_WORKER_CLOCK_H
#define ABLATE_WORKER_CLOCK_H

/* Seconds since an arbitrary fixed point. */
double clock_seconds(void);
/* The one formatter of the current UTC time, in the three forms ablate writes. */
typedef enum {
    CLOCK_UTC_MS,      /* "2024-05-01T12:00:00.123Z": events and the journal */
    CLOCK_UTC_SECONDS, /* "2024-05-01T12:00:00Z": provenance (created, attempts) */
    CLOCK_UTC_COMPACT  /* "20240501T120000Z": in file names (joined processes) */
} ClockUtcForm;
void clock_utc_format(char *buf, unsigned long n, ClockUtcForm form);
/* clock_utc_format(.., CLOCK_UTC_MS). */
void clock_utc_now(char *buf, unsigned long n);

#endif
