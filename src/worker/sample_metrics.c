#include "sample_metrics.h"

#include <stdlib.h>

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Length of the longest suffix of tokens[0..n) with period p (the first unit included). */
static int periodic_tail(const int32_t *tokens, int n, int p) {
    int i = n - 1;
    while (i >= p && tokens[i] == tokens[i - p])
        i--;
    return n - 1 - i + p; /* tokens[i+1..n) match p back, and the unit before them */
}

/* The final loop (sample_metrics.h): its period and length, or 0 and 0. */
static void final_loop(const int32_t *tokens, int n, int *period, int *len) {
    *period = *len = 0;
    for (int p = 1; p <= SAMPLE_LOOP_MAX_PERIOD && 3 * p <= n; p++) {
        int L = periodic_tail(tokens, n, p);
        if (L >= 3 * p && 2 * L >= n) {
            *period = p;
            *len = L;
            return;
        }
    }
}

void sample_measure(const int32_t *tokens, int n, SampleEvent *s) {
    s->distinct_ratio = 0.0;
    s->longest_run = 0;
    s->top_token_frac = 0.0;
    s->degenerate = 0;
    s->repetition = REP_NONE;
    s->loop_period = 0;
    s->loop_frac = 0.0;
    if (n <= 0) return;
    int run = 1, longest = 1;
    for (int i = 1; i < n; i++) {
        run = tokens[i] == tokens[i - 1] ? run + 1 : 1;
        if (run > longest) longest = run;
    }
    int32_t *sorted = malloc(sizeof(int32_t) * (size_t)n);
    int distinct = 0, top = 0;
    if (sorted) {
        for (int i = 0; i < n; i++)
            sorted[i] = tokens[i];
        qsort(sorted, (size_t)n, sizeof *sorted, cmp_i32);
        for (int i = 0, j; i < n; i = j) {
            for (j = i; j < n && sorted[j] == sorted[i]; j++) {
            }
            distinct++;
            if (j - i > top) top = j - i;
        }
        free(sorted);
    }
    s->distinct_ratio = (double)distinct / n;
    s->longest_run = longest;
    s->top_token_frac = (double)top / n;
    int run_limit = n / 4 > 16 ? n / 4 : 16;
    s->degenerate = s->top_token_frac >= 0.5 || longest >= run_limit;
    int period, len;
    final_loop(tokens, n, &period, &len);
    s->loop_period = period;
    s->loop_frac = (double)len / n;
    s->repetition = s->degenerate ? REP_TOKEN_RUN : period > 0 ? REP_NGRAM_LOOP : REP_NONE;
}
