/* util/backoff.h: the poll interval's cap from the length of what is waited for (a
 * worker rank and rank 0 that slept up to 20 and 10 ms between polls put 25 ms between runs
 * of 6 ms; bench/sweep_dispatch.sh measures the gap). */
#include "test_util.h"
#include "util/backoff.h"

TEST(cap_share) {
    Backoff b = BACKOFF_INIT(50000, 20000000);
    CHECK(backoff_cap_share(&b, 0, 100) == 0);          /* nothing known yet: no cap */
    CHECK(backoff_cap_share(&b, -1.0, 100) == 0);       /* (a clock step back) */
    CHECK(backoff_cap_share(&b, 0.006, 100) == 60000);  /* 1% of a 6 ms run */
    CHECK(backoff_cap_share(&b, 1e-4, 100) == 50000);   /* never below min */
    CHECK(backoff_cap_share(&b, 2.0, 100) == 20000000); /* nor above max */
    CHECK(backoff_cap_share(&b, 0.006, 0) == 0);
}

TEST(sleep_capped) {
    Backoff b = BACKOFF_INIT(1000, 1000000);
    for (int i = 0; i < 12; i++) /* doubling to max, whatever the caps of the sleeps */
        backoff_sleep(&b, 2000);
    CHECK(b.ns == 1000000);
    backoff_reset(&b);
    CHECK(b.ns == 0);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_backoff");
}
