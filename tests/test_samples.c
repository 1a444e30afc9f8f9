/* Degeneration measures of a generated sample (src/worker/sample_metrics.c): a loop of
 * newlines is degenerate, ordinary text and word-level loops are not, and the two thresholds
 * (most frequent token >= half the sample; a run of max(16, n/4) equal tokens) sit where the
 * documentation puts them. Word-level loops are named by `repetition` (ngram_loop) with the
 * loop's period and coverage, whose thresholds (half the sample, three units, period <= 64)
 * are checked at their edges. */
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

TEST(newline_loop) {
    char text[512] = "";
    SampleEvent s;
    /* the RoPE model of study B: a loop of newlines */
    memset(text, '\n', 200);
    text[200] = 0;
    s = measure_text(text);
    CHECK(s.degenerate && s.longest_run == 200 && s.top_token_frac == 1.0);
    CHECK(s.distinct_ratio == 1.0 / 200);
}

TEST(ordinary_text) {
    SampleEvent s;
    /* ordinary text */
    s = measure_text("ROMEO: But soft, what light through yonder window breaks? It is the east, "
                     "and Juliet is the sun. Arise, fair sun, and kill the envious moon.");
    CHECK(!s.degenerate && s.longest_run == 2 && s.top_token_frac < 0.25); /* "kill" */
}

TEST(word_loop) {
    char text[512] = "";
    SampleEvent s;
    /* a word-level loop: not degenerate (one token does not dominate), an n-gram loop */
    text[0] = 0;
    while (strlen(text) < 200)
        strcat(text, "the king ");
    s = measure_text(text);
    CHECK(!s.degenerate && s.longest_run == 1);
    CHECK(s.repetition == REP_NGRAM_LOOP && s.loop_period == 9 && s.loop_frac == 1.0);
}

TEST(half_threshold) {
    char text[512] = "";
    SampleEvent s;
    /* newline every other token: the most frequent token is exactly half */
    for (int i = 0; i < 100; i++)
        text[i] = i % 2 ? 'a' + i % 20 : '\n';
    text[100] = 0;
    s = measure_text(text);
    CHECK(s.top_token_frac == 0.5 && s.degenerate);
    text[0] = 'x'; /* one newline fewer: below half */
    s = measure_text(text);
    CHECK(s.top_token_frac < 0.5 && !s.degenerate);
}

TEST(run_threshold) {
    SampleEvent s;
    /* runs: the limit is max(16, n/4) */
    s = measure_run(40, 16);
    CHECK(s.longest_run == 16 && s.degenerate);
    s = measure_run(40, 15);
    CHECK(s.longest_run == 15 && !s.degenerate);
    s = measure_run(200, 49); /* n/4 = 50 */
    CHECK(!s.degenerate);
    s = measure_run(200, 50);
    CHECK(s.degenerate);
}

TEST(token_run_kind) {
    char text[512] = "";
    SampleEvent s;
    /* the degenerate ones are token runs, whatever loop they also are */
    memset(text, '\n', 200);
    text[200] = 0;
    s = measure_text(text);
    CHECK(s.repetition == REP_TOKEN_RUN && s.loop_period == 1 && s.loop_frac == 1.0);
}

TEST(no_loop) {
    SampleEvent s;
    /* ordinary text: no loop */
    s = measure_text("ROMEO: But soft, what light through yonder window breaks? It is the east, "
                     "and Juliet is the sun. Arise, fair sun, and kill the envious moon.");
    CHECK(s.repetition == REP_NONE && s.loop_period == 0 && s.loop_frac == 0.0);
}

TEST(the_the_loop) {
    char text[512] = "";
    SampleEvent s;
    /* "The the the ...": the longest run of one character is 1, yet it loops on " the" */
    snprintf(text, sizeof text, "ROMEO: The");
    while (strlen(text) < 120)
        strcat(text, " the");
    s = measure_text(text);
    CHECK(!s.degenerate && s.longest_run == 1 && s.top_token_frac < 0.5);
    CHECK(s.repetition == REP_NGRAM_LOOP && s.loop_period == 4);
    CHECK_MSG(s.loop_frac == 114.0 / 122, "loop_frac %.6f", s.loop_frac); /* "he the ... the" */
}

TEST(loop_at_start) {
    char text[512] = "";
    SampleEvent s;
    /* a loop only at the start does not count: the loop must reach the end */
    text[0] = 0;
    while (strlen(text) < 100)
        strcat(text, "the king ");
    strcat(text, "ROMEO: But soft, what light through yonder window breaks? It is the east, and "
                 "Juliet is the sun.");
    s = measure_text(text);
    CHECK(s.repetition == REP_NONE && s.loop_period == 0);
}

TEST(loop_coverage) {
    char text[512] = "";
    SampleEvent s;
    /* coverage: a period-5 tail of exactly half the sample loops, one token less does not */
    {
        static const char *prose = "But soft, what light through yonder window breaks, it is";
        for (int L = 50; L >= 49; L--) {
            snprintf(text, sizeof text, "%.*s", 100 - L, prose);
            for (int i = 0; i < L; i++)
                text[100 - L + i] = "abcde"[i % 5];
            text[100] = 0;
            s = measure_text(text);
            if (L == 50)
                CHECK_MSG(s.repetition == REP_NGRAM_LOOP && s.loop_period == 5 &&
                              s.loop_frac == 0.5,
                          "L 50: repetition %d period %d frac %.3f", s.repetition, s.loop_period,
                          s.loop_frac);
            else
                CHECK_MSG(s.repetition == REP_NONE, "L 49: repetition %d period %d frac %.3f",
                          s.repetition, s.loop_period, s.loop_frac);
        }
    }
}

TEST(loop_units) {
    char text[512] = "";
    SampleEvent s;
    /* three units at least: a unit of 40 seen twice over 80 of 100 tokens is no loop, thrice
     * over 120 of 150 is; a unit longer than 64 is never looked for */
    {
        char unit[80];
        for (int i = 0; i < 40; i++)
            unit[i] = (char)(i < 26 ? 'A' + i : 'a' + i - 26); /* 40 distinct letters */
        for (int reps = 2; reps <= 3; reps++) {
            int n = reps == 2 ? 100 : 150, head = n - 40 * reps;
            for (int i = 0; i < head; i++)
                text[i] = (char)('0' + i % 10);
            for (int i = 0; i < 40 * reps; i++)
                text[head + i] = unit[i % 40];
            text[n] = 0;
            s = measure_text(text);
            CHECK_MSG(reps == 2 ? s.repetition == REP_NONE
                                : s.repetition == REP_NGRAM_LOOP && s.loop_period == 40,
                      "%d units: repetition %d period %d", reps, s.repetition, s.loop_period);
        }
        for (int i = 0; i < 70; i++) /* 70 tokens, all different from each other */
            text[i] = (char)(33 + i);
        for (int i = 70; i < 280; i++)
            text[i] = text[i - 70];
        text[280] = 0;
        s = measure_text(text);
        CHECK(s.repetition == REP_NONE && s.loop_period == 0);
    }
}

TEST(empty_sample) {
    SampleEvent s;
    /* nothing generated */
    sample_measure(NULL, 0, &s);
    CHECK(!s.degenerate && s.longest_run == 0 && s.distinct_ratio == 0.0);
    CHECK(s.repetition == REP_NONE && s.loop_period == 0 && s.loop_frac == 0.0);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_samples");
}
