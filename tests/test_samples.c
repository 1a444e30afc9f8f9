/* Degeneration measures of a generated sample (src/worker/sample_metrics.c): a loop of
 * newlines is flagged, ordinary text and word-level loops are not, and the two thresholds
 * (most frequent token >= half the sample; a run of max(16, n/4) equal tokens) sit where the
 * documentation puts them. */
#include <string.h>

#include "test_util.h"
#include "worker/sample_metrics.h"

static SampleEvent measure_text(const char *text) {
    int32_t tokens[512];
    int n = (int)strlen(text);
    for (int i = 0; i < n; i++)
        tokens[i] = (unsigned char)text[i];
    SampleEvent s;
    sample_measure(tokens, n, &s);
    return s;
}

static SampleEvent measure_run(int n, int run) {
    int32_t tokens[512];
    for (int i = 0; i < n; i++)
        tokens[i] = i < run ? 7 : 100 + i; /* a run of token 7, then all different */
    SampleEvent s;
    sample_measure(tokens, n, &s);
    return s;
}

int main(void) {
    char text[512];
    /* the RoPE model of study B: a loop of newlines */
    memset(text, '\n', 200);
    text[200] = 0;
    SampleEvent s = measure_text(text);
    CHECK(s.degenerate && s.longest_run == 200 && s.top_token_frac == 1.0);
    CHECK(s.distinct_ratio == 1.0 / 200);

    /* ordinary text */
    s = measure_text("ROMEO: But soft, what light through yonder window breaks? It is the east, "
                     "and Juliet is the sun. Arise, fair sun, and kill the envious moon.");
    CHECK(!s.degenerate && s.longest_run == 2 && s.top_token_frac < 0.25); /* "kill" */

    /* a word-level loop, normal for tiny models: not flagged */
    text[0] = 0;
    while (strlen(text) < 200)
        strcat(text, "the king ");
    s = measure_text(text);
    CHECK(!s.degenerate && s.longest_run == 1);

    /* newline every other token: the most frequent token is exactly half */
    for (int i = 0; i < 100; i++)
        text[i] = i % 2 ? 'a' + i % 20 : '\n';
    text[100] = 0;
    s = measure_text(text);
    CHECK(s.top_token_frac == 0.5 && s.degenerate);
    text[0] = 'x'; /* one newline fewer: below half */
    s = measure_text(text);
    CHECK(s.top_token_frac < 0.5 && !s.degenerate);

    /* runs: the limit is max(16, n/4) */
    s = measure_run(40, 16);
    CHECK(s.longest_run == 16 && s.degenerate);
    s = measure_run(40, 15);
    CHECK(s.longest_run == 15 && !s.degenerate);
    s = measure_run(200, 49); /* n/4 = 50 */
    CHECK(!s.degenerate);
    s = measure_run(200, 50);
    CHECK(s.degenerate);

    /* nothing generated */
    sample_measure(NULL, 0, &s);
    CHECK(!s.degenerate && s.longest_run == 0 && s.distinct_ratio == 0.0);
    return test_finish("test_samples");
}
