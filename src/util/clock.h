/* The one monotonic clock every timing in ablate reads (training time, generation speed,
 * progress, view rebuilds). CLOCK_MONOTONIC: never jumps with the wall clock. */
#ifndef ABLATE_WORKER_CLOCK_H
#define ABLATE_WORKER_CLOCK_H

/* Seconds since an arbitrary fixed point. */
double clock_seconds(void);
/* The current UTC time as ISO 8601 with milliseconds ("2024-05-01T12:00:00.123Z"). */
void clock_utc_now(char *buf, unsigned long n);

#endif
