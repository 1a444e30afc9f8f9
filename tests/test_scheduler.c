/* The scheduler contract (src/orchestrator/schedule/scheduler.h), run against every
 * implementation: the plain queue, the joined scheduler (in a join/ directory of its own,
 * as the only process), and a stub adaptive one defined here that adds a replicate of a run
 * whose result leaves its question open, to show that the interface carries such a policy.
 * Then what only the joined one does: runs other processes finished, and a run taken over
 * from us. Time is passed in explicitly, so nothing here waits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/record/journal.h"
#include "orchestrator/schedule/scheduler.h"
#include "test_util.h"
#include "util/clock.h"

/* ------------------------------------------------------------------ the runs */

/* Six runs: five to train, run 5 finished before. Most expensive first, ties by index:
 * 1, 3 (cost 5), 0 (3), 4 (2), 2 (1). */
#define N_RUNS 6
static const double COST[N_RUNS] = {3, 5, 1, 5, 2, 9};
static const int ORDER[] = {1, 3, 0, 4, 2};
#define N_TODO 5

static char g_ids[N_RUNS][17], g_names[N_RUNS][16];
static PlannedRun g_planned[N_RUNS];
static Plan g_plan;
static SchedRun g_runs[N_RUNS];
static const char *g_tmp; /* this test's temporary directory */

static void make_runs(void) {
    for (int i = 0; i < N_RUNS; i++) {
        snprintf(g_ids[i], sizeof g_ids[i], "00000000000000%02d", i);
        snprintf(g_names[i], sizeof g_names[i], "run%d", i);
        g_planned[i].index = i;
        g_planned[i].name = g_names[i];
        memcpy(g_planned[i].id, g_ids[i], 17);
        g_runs[i] = (SchedRun){g_ids[i], g_names[i], COST[i], i == 5, RUN_DONE, 0, 0, 0, NAN};
    }
    g_plan.n_runs = N_RUNS;
    g_plan.runs = g_planned;
}

/* ------------------------------------------------------------------ the host */

typedef struct {
    int elsewhere[N_RUNS + 8];  /* finished_elsewhere calls per run */
    JoinResult res[N_RUNS + 8]; /* the result each said */
    int continued;              /* continue_from calls */
    int failed;                 /* fail calls (none expected) */
} Host;

static void h_elsewhere(void *ctx, int run, const JoinResult *res) {
    Host *h = ctx;
    if (run >= 0 && run < N_RUNS + 8) h->elsewhere[run]++, h->res[run] = *res;
}
static int h_continue(void *ctx, int run, const ResumeRun *rr, JournalReader *from) {
    Host *h = ctx;
    (void)run, (void)rr, (void)from;
    h->continued++;
    return 0;
}
static void h_fail(void *ctx, const char *what) {
    Host *h = ctx;
    h->failed++;
    fprintf(stderr, "scheduler reported a failure: %s\n", what);
}

static int h_admit(void *ctx, const char *out_path, char err[ABL_ERR_MAX]) {
    (void)ctx, (void)out_path, (void)err;
    return 0;
}

static int h_refuse(void *ctx, const char *out_path, char err[ABL_ERR_MAX]) {
    (void)ctx;
    snprintf(err, ABL_ERR_MAX, "%s: refused by the host", out_path);
    return -1;
}

/* ------------------------------------------------------------------ a stub adaptive one */

/* Replicates over the plain queue: a run that ends done with a validation loss above 1.0
 * ("the contrast is still open") gets one more seed, up to MAX_ADDED new runs, numbered
 * after the planned ones. Added runs are taken before the queue's. */
#define MAX_ADDED 2
typedef struct {
    Scheduler base;
    Scheduler *inner;
    int n0;                 /* runs at start */
    int added[MAX_ADDED];   /* indices n0.. in the order added */
    int n_added, next;      /* added[next..n_added) wait to be taken */
    int out[MAX_ADDED];     /* taken, not back */
    int ended_n[MAX_ADDED]; /* ended */
} Adaptive;

static int a_start(Scheduler *s, const SchedRun *runs, int n) {
    Adaptive *a = (Adaptive *)s;
    a->n0 = n;
    if (sched_keep_runs(s, runs, n) != 0) return -1;
    return sched_start(a->inner, runs, n);
}
static int a_take(Scheduler *s, double now) {
    Adaptive *a = (Adaptive *)s;
    if (a->next < a->n_added) {
        int run = a->added[a->next++];
        a->out[run - a->n0] = 1;
        return run;
    }
    return sched_take(a->inner, now);
}
static int a_more(Scheduler *s) {
    Adaptive *a = (Adaptive *)s;
    return a->next < a->n_added || sched_more(a->inner);
}
static void a_requeue(Scheduler *s, int run) {
    Adaptive *a = (Adaptive *)s;
    if (run < a->n0) {
        sched_requeue(a->inner, run);
        return;
    }
    if (!a->out[run - a->n0]) return;
    a->out[run - a->n0] = 0;
    a->added[--a->next] = run;
}
static void a_ended(Scheduler *s, int run, const EndEvent *end) {
    Adaptive *a = (Adaptive *)s;
    if (run >= a->n0) {
        a->out[run - a->n0] = 0;
        a->ended_n[run - a->n0]++;
        return;
    }
    sched_ended(a->inner, run, end);
    if (end->status == RUN_DONE && end->final_val_loss > 1.0 && a->n_added < MAX_ADDED) {
        a->added[a->n_added] = a->n0 + a->n_added;
        a->n_added++;
    }
}
static void a_tick(Scheduler *s, double now) {
    sched_tick(((Adaptive *)s)->inner, now);
}
static int a_abandoned(Scheduler *s, int run) {
    Adaptive *a = (Adaptive *)s;
    return run < a->n0 && sched_abandoned(a->inner, run);
}
static void a_announce(Scheduler *s, int n_live, int n_done, int n_resumed, const char *where,
                       const char *out) {
    (void)n_resumed;
    (void)s, (void)n_live, (void)n_done, (void)where, (void)out;
}
static void a_close(Scheduler *s) {
    Adaptive *a = (Adaptive *)s;
    sched_close(a->inner);
    sched_free_runs(s);
    free(a);
}
static const SchedOps adaptive_ops = {
    .start = a_start,
    .take = a_take,
    .more = a_more,
    .requeue = a_requeue,
    .cancel = a_requeue,
    .ended = a_ended,
    .tick = a_tick,
    .abandoned = a_abandoned,
    .announce = a_announce,
    .close = a_close,
    .continue_flag = "--resume",
};

/* ------------------------------------------------------------------ the implementations */

typedef struct {
    Scheduler *s;
    Host host;
    Journal *j; /* joined: our own journal, as the sweep creates it */
    char out[512];
    int extra; /* runs the implementation adds when every run ends with an open result */
} Fixture;

typedef struct {
    const char *name;
    int extra;
    Scheduler *(*open)(Fixture *f, const SchedHost *h, char err[ABL_ERR_MAX]);
} Impl;

static Scheduler *open_queue(Fixture *f, const SchedHost *h, char err[ABL_ERR_MAX]) {
    (void)f;
    return sched_queue_open(h, err);
}

static Scheduler *open_joined(Fixture *f, const SchedHost *h, char err[ABL_ERR_MAX]) {
    static int k;
    char journal[ABL_PATH_MAX];
    snprintf(f->out, sizeof f->out, "%s/joined-%d.h5", g_tmp, k++);
    journal_path_for(f->out, journal, sizeof journal);
    SchedConfig cfg = {f->out, &g_plan, 1, 60.0, 0, NULL};
    Scheduler *s = scheduler_open(&cfg, h, journal, err);
    if (s && !(f->j = journal_create(journal, err))) {
        sched_close(s);
        return NULL;
    }
    return s;
}

static Scheduler *open_adaptive(Fixture *f, const SchedHost *h, char err[ABL_ERR_MAX]) {
    (void)f;
    Adaptive *a = calloc(1, sizeof *a);
    if (!a || !(a->inner = sched_queue_open(NULL, err))) {
        free(a);
        return NULL;
    }
    a->base.ops = &adaptive_ops;
    a->base.host = *h;
    return &a->base;
}

static const Impl IMPLS[] = {
    {"queue", 0, open_queue},
    {"joined", 0, open_joined},
    {"adaptive", MAX_ADDED, open_adaptive},
};
static const Impl *cur;

#define EXPECT(cond) CHECK_MSG(cond, "[%s]", cur->name)

static double g_now;

static int setup(Fixture *f, const Impl *impl) {
    char err[ABL_ERR_MAX];
    memset(f, 0, sizeof *f);
    cur = impl;
    f->extra = impl->extra;
    SchedHost h = {&f->host, h_elsewhere, h_continue, h_fail, h_admit,
                   NULL,     NULL,        NULL,       NULL,   NULL};
    f->s = impl->open(f, &h, err);
    CHECK_MSG(f->s != NULL, "[%s] open: %s", impl->name, err);
    if (!f->s) return -1;
    EXPECT(sched_start(f->s, g_runs, N_RUNS) == 0);
    g_now = clock_seconds();
    return 0;
}

static void teardown(Fixture *f) {
    EXPECT(f->host.failed == 0);
    sched_close(f->s);
    if (f->j) journal_close(f->j);
}

/* Takes a run, letting time pass while the scheduler has none for now (a joined one looks
 * at the claims at most every 0.2 s): -1 only once nothing comes within many tries. */
static int take(Fixture *f) {
    for (int tries = 0; tries < 20; tries++) {
        int run = sched_take(f->s, g_now);
        if (run >= 0) return run;
        if (!sched_more(f->s)) return -1;
        g_now += 1.5;
        sched_tick(f->s, g_now);
    }
    return -1;
}

static EndEvent result(RunStatus st, double loss) {
    EndEvent e;
    memset(&e, 0, sizeof e);
    e.status = st;
    e.final_val_loss = loss;
    return e;
}

/* ------------------------------------------------------------------ the contract */

/* Every unfinished run once, most expensive first (ties: lower index); never a finished
 * one; then none. */
static void test_take_order(const Impl *impl) {
    Fixture f;
    if (setup(&f, impl) != 0) return;
    EXPECT(sched_more(f.s));
    for (int k = 0; k < N_TODO; k++) {
        int run = sched_take(f.s, g_now);
        CHECK_MSG(run == ORDER[k], "[%s] take %d gave %d, expected %d", cur->name, k, run,
                  ORDER[k]);
    }
    EXPECT(sched_take(f.s, g_now) == -1);
    for (int i = 0; i < N_RUNS; i++)
        EXPECT(!sched_abandoned(f.s, i));
    teardown(&f);
}

/* A requeued run is taken again before anything else, and only once. */
static void test_requeue(const Impl *impl) {
    Fixture f;
    if (setup(&f, impl) != 0) return;
    int a = take(&f), b = take(&f);
    EXPECT(a == ORDER[0] && b == ORDER[1]);
    sched_requeue(f.s, a);
    EXPECT(sched_more(f.s));
    EXPECT(take(&f) == a);
    EXPECT(take(&f) == ORDER[2]);
    teardown(&f);
}

/* A cancelled run stays unfinished and is taken again later; cancelling a run that was
 * never taken changes nothing. */
static void test_cancel(const Impl *impl) {
    Fixture f;
    if (setup(&f, impl) != 0) return;
    sched_cancel(f.s, ORDER[1]); /* not taken: nothing happens */
    int a = take(&f);
    EXPECT(a == ORDER[0]);
    sched_cancel(f.s, a);
    EXPECT(sched_more(f.s));
    int seen = 0;
    for (int k = 0; k < N_TODO + 1; k++) {
        int run = take(&f);
        if (run < 0) break;
        seen += run == a;
        EndEvent e = result(RUN_DONE, 0.5);
        sched_ended(f.s, run, &e);
    }
    EXPECT(seen == 1);
    EXPECT(!sched_more(f.s));
    teardown(&f);
}

/* Ended runs (done, diverged or failed) never come back; more() ends once every run has
 * ended, whichever order they end in. */
static void test_ended(const Impl *impl) {
    Fixture f;
    if (setup(&f, impl) != 0) return;
    int taken[N_TODO];
    for (int k = 0; k < N_TODO; k++)
        taken[k] = take(&f);
    static const RunStatus st[N_TODO] = {RUN_FAILED, RUN_DONE, RUN_DIVERGED, RUN_DONE, RUN_DONE};
    for (int k = N_TODO - 1; k >= 0; k--) {
        EndEvent e = result(st[k], 0.5); /* a closed question: nothing added */
        if (taken[k] >= 0) sched_ended(f.s, taken[k], &e);
    }
    EXPECT(!sched_more(f.s));
    EXPECT(sched_take(f.s, g_now + 10) == -1);
    teardown(&f);
}

/* The sweep's loop: take, train, end, until more() says stop. Every unfinished run ends
 * exactly once, plus whatever the implementation adds; the loop terminates. */
static void test_drain(const Impl *impl) {
    Fixture f;
    if (setup(&f, impl) != 0) return;
    int ended[N_RUNS + MAX_ADDED + 1] = {0}, n_ended = 0, steps = 0;
    while (sched_more(f.s) && steps++ < 100) {
        int run = take(&f);
        if (run < 0) break;
        if (run >= 0 && run < N_RUNS + MAX_ADDED + 1) ended[run]++;
        n_ended++;
        EndEvent e = result(RUN_DONE, 2.0); /* an open question: an adaptive one adds */
        sched_ended(f.s, run, &e);
    }
    EXPECT(!sched_more(f.s));
    CHECK_MSG(n_ended == N_TODO + f.extra, "[%s] %d runs ended, expected %d", cur->name, n_ended,
              N_TODO + f.extra);
    for (int k = 0; k < N_TODO; k++)
        EXPECT(ended[ORDER[k]] == 1);
    EXPECT(ended[5] == 0);
    teardown(&f);
}

/* Ticks (heartbeats) while runs train change neither the order nor who holds them. */
static void test_tick(const Impl *impl) {
    Fixture f;
    if (setup(&f, impl) != 0) return;
    int a = take(&f);
    for (int k = 0; k < 10; k++) {
        g_now += 20; /* past a quarter of the lease: a joined one heartbeats and looks */
        sched_tick(f.s, g_now);
    }
    EXPECT(!sched_abandoned(f.s, a));
    for (int k = 1; k < N_TODO; k++)
        EXPECT(take(&f) == ORDER[k]);
    teardown(&f);
}

/* The whole contract, one case per implementation (a new one in IMPLS gets its case here). */
_Static_assert(sizeof IMPLS / sizeof IMPLS[0] == 3, "one TEST below per entry of IMPLS");

static void contract(const Impl *impl) {
    test_take_order(impl);
    test_requeue(impl);
    test_cancel(impl);
    test_ended(impl);
    test_drain(impl);
    test_tick(impl);
}

TEST(queue) {
    contract(&IMPLS[0]);
}
TEST(joined) {
    contract(&IMPLS[1]);
}
TEST(adaptive) {
    contract(&IMPLS[2]);
}

/* ------------------------------------------------------------------ joined only */

static void write_claim(const char *out, const char *id, const char *text) {
    char dir[ABL_PATH_MAX], path[ABL_PATH_MAX + 64];
    journal_dir_for(out, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/join/claims/%s", dir, id);
    test_write_text(path, text);
}

static void done_path(const char *out, char *path, size_t n) {
    char dir[ABL_PATH_MAX];
    journal_dir_for(out, dir, sizeof dir);
    snprintf(path, n, "%s/join/done", dir);
}

/* join/done without the line of run id */
static void drop_done_line(const char *out, const char *id) {
    char path[ABL_PATH_MAX + 16], line[256], keep[4096] = "";
    done_path(out, path, sizeof path);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, id, strlen(id)) != 0 && strlen(keep) + strlen(line) < sizeof keep)
            strcat(keep, line);
    if (f) fclose(f);
    test_write_text(path, keep);
}

static void append_done_line(const char *out, const char *id, const char *result) {
    char path[ABL_PATH_MAX + 16];
    done_path(out, path, sizeof path);
    FILE *f = fopen(path, "a");
    if (f) fprintf(f, "%s %s\n", id, result), fclose(f);
}

/* A shared scheduler asks the host before it writes anything: refused, it opens nothing and
 * leaves no file beside the output (the sweep's data check for --join lives in the host). */
TEST(joined_admit_refused) {
    char err[ABL_ERR_MAX] = "", journal[ABL_PATH_MAX], out[ABL_PATH_MAX], dir[ABL_PATH_MAX];
    snprintf(out, sizeof out, "%s/refused.h5", g_tmp);
    journal_path_for(out, journal, sizeof journal);
    journal_dir_for(out, dir, sizeof dir);
    SchedConfig cfg = {out, &g_plan, 1, 60.0, 0, NULL};
    Host host;
    memset(&host, 0, sizeof host);
    SchedHost h = {&host, h_elsewhere, h_continue, h_fail, h_refuse, NULL, NULL, NULL, NULL, NULL};
    Scheduler *s = scheduler_open(&cfg, &h, journal, err);
    CHECK(s == NULL && strstr(err, "refused by the host") != NULL);
    struct stat st;
    CHECK(stat(dir, &st) != 0); /* nothing written */
    sched_close(s);
}

/* A joined process on the sweep of out (g.out set to it): 0, or -1 after a failed check. */
static int open_joined_at(Fixture *g, const char *out) {
    char err[ABL_ERR_MAX], journal[ABL_PATH_MAX];
    memset(g, 0, sizeof *g);
    snprintf(g->out, sizeof g->out, "%s", out);
    journal_path_for(g->out, journal, sizeof journal);
    SchedConfig cfg = {g->out, &g_plan, 1, 60.0, 0, NULL};
    SchedHost h = {&g->host, h_elsewhere, h_continue, h_fail, h_admit,
                   NULL,     NULL,        NULL,       NULL,   NULL};
    g->s = scheduler_open(&cfg, &h, journal, err);
    CHECK_MSG(g->s != NULL, "%s", err);
    return g->s ? 0 : -1;
}

/* A run whose claim says another process finished it is counted finished (through the
 * host) and never taken; at start and when met later. */
TEST(joined_done_elsewhere) {
    Fixture f;
    char out[ABL_PATH_MAX];
    cur = &IMPLS[1];
    snprintf(out, sizeof out, "%s/elsewhere.h5", g_tmp);
    if (open_joined_at(&f, out) != 0) return;
    EXPECT(f.s->ops->shared && strcmp(f.s->ops->continue_flag, "--join") == 0);
    /* run 3 as join_done() leaves it: its claim, and its line in join/done */
    write_claim(f.out, g_ids[3],
                "done 20260101T000000Z-elsewhere-1\nresult done 0x1p-1 0 0x1p+0\n");
    append_done_line(f.out, g_ids[3], "done 0x1p-1 0 0x1p+0");
    long reads = join_claim_reads();
    EXPECT(sched_start(f.s, g_runs, N_RUNS) == 0);
    EXPECT(f.host.elsewhere[3] == 1 && f.host.res[3].final_val_loss == 0.5);
    EXPECT(isnan(f.host.res[3].final_test_loss)); /* a line written before it had one */
    EXPECT(join_claim_reads() == reads);          /* learned from join/done, no claim read */
    g_now = clock_seconds();
    EXPECT(take(&f) == 1);
    /* meanwhile, without its line (its process killed between the two): met at its claim */
    write_claim(f.out, g_ids[0], "done 20260101T000000Z-elsewhere-1\n");
    EXPECT(take(&f) == 4);
    EXPECT(take(&f) == 2);
    EXPECT(f.host.elsewhere[0] == 1);
    EndEvent e = result(RUN_DONE, 0.5);
    sched_ended(f.s, 1, &e);
    sched_ended(f.s, 4, &e);
    EXPECT(sched_more(f.s)); /* run 2 trains */
    sched_ended(f.s, 2, &e);
    EXPECT(!sched_more(f.s));
    EXPECT(f.host.failed == 0);
    sched_close(f.s);
}

/* What one joined process ended, another hears bit for bit: from join/done, or from the
 * claims when the sweep has none. */
static void result_heard(int via_log) {
    Fixture f, g;
    if (setup(&f, &IMPLS[1]) != 0) return;
    int a = take(&f), b = take(&f);
    EndEvent e = result(RUN_DONE, 0.1 + 0.2); /* not a short decimal */
    e.instability = INSTAB_ABOVE_UNIFORM;
    e.train_seconds = 1.0 / 3.0;
    e.final_test_loss = 0.7 + 0.1; /* the test split's, which a replicate: rule reads */
    sched_ended(f.s, a, &e);
    EndEvent d = result(RUN_DIVERGED, NAN);
    d.final_test_loss = NAN;
    sched_ended(f.s, b, &d);
    char done[ABL_PATH_MAX + 16];
    done_path(f.out, done, sizeof done);
    if (!via_log) EXPECT(unlink(done) == 0); /* a sweep begun by an older ablate */
    /* a second process on the same sweep */
    long reads = join_claim_reads();
    if (open_joined_at(&g, f.out) == 0) {
        EXPECT(sched_start(g.s, g_runs, N_RUNS) == 0);
        const JoinResult *r = &g.host.res[a];
        EXPECT(g.host.elsewhere[a] == 1 && r->status == RUN_DONE && r->unstable);
        double want = 0.1 + 0.2, secs = 1.0 / 3.0, test = 0.7 + 0.1;
        EXPECT(!memcmp(&r->final_val_loss, &want, sizeof want) &&
               !memcmp(&r->train_seconds, &secs, sizeof secs) &&
               !memcmp(&r->final_test_loss, &test, sizeof test));
        r = &g.host.res[b];
        EXPECT(g.host.elsewhere[b] == 1 && r->status == RUN_DIVERGED && r->unstable &&
               isnan(r->final_val_loss) && isnan(r->final_test_loss));
        /* from join/done: no claim read; without it, every run's claim */
        long claim_reads = join_claim_reads() - reads;
        CHECK_MSG(via_log ? claim_reads == 0 : claim_reads >= N_RUNS - 1, "%ld claim reads",
                  claim_reads);
        sched_close(g.s);
    }
    teardown(&f);
}

/* A done claim carries its run's result, exactly (a replicate: sweep decides from it in
 * every process), and so does its line in join/done, which a process joining later reads
 * instead of every run's claim (reading every claim grew with processes x runs). */
TEST(joined_result_in_claim) {
    result_heard(0);
}
TEST(joined_result_in_done_log) {
    result_heard(1);
}

/* join/done is a hint: a torn line (a full disk mid-write) or one in the middle of being
 * written is skipped, and the runs after it are still read; a run it misses is found at its
 * claim when met. */
TEST(joined_done_log_torn) {
    Fixture f, g;
    if (setup(&f, &IMPLS[1]) != 0) return;
    int a = take(&f), b = take(&f);
    EndEvent e = result(RUN_DONE, 0.25);
    sched_ended(f.s, a, &e);
    char done[ABL_PATH_MAX + 16];
    done_path(f.out, done, sizeof done);
    FILE *fp = fopen(done, "a");
    if (fp) fputs("0123456789abcdef done 0x1p-2", fp), fclose(fp); /* torn: no newline */
    append_done_line(f.out, "garbage", "line"); /* glued to it: not a line that reads */
    sched_ended(f.s, b, &e);
    if (open_joined_at(&g, f.out) == 0) {
        EXPECT(sched_start(g.s, g_runs, N_RUNS) == 0);
        EXPECT(g.host.elsewhere[a] == 1 && g.host.elsewhere[b] == 1);
        EXPECT(g.host.res[b].final_val_loss == 0.25);
        EXPECT(g.host.failed == 0);
        sched_close(g.s);
    }
    teardown(&f);
}

typedef struct {
    int n, run[8], rung[8];
    double loss[8];
} RungsHeard;

static void heard(void *ctx, int run, int rung, double loss) {
    RungsHeard *h = ctx;
    if (h->n < 8) h->run[h->n] = run, h->rung[h->n] = rung, h->loss[h->n++] = loss;
}

/* join/rungs (a tune: sweep's rung results): every process reads each line once, the loss
 * exactly as written (%a), and a torn line (a full disk mid-write) or one glued to it is
 * skipped while the lines after it are read. */
TEST(joined_rungs_ledger) {
    Fixture f, g;
    if (setup(&f, &IMPLS[1]) != 0) return;
    RungsHeard h = {0};
    EXPECT(sched_joined_rungs(f.s, heard, &h) == 0 && h.n == 0); /* none yet: no file */
    double l0 = 4.0 / 3.0;
    EXPECT(sched_joined_rung(f.s, ORDER[0], 0, l0) == 0);
    char dir[ABL_PATH_MAX], path[ABL_PATH_MAX + 32];
    journal_dir_for(f.out, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/join/rungs", dir);
    FILE *fp = fopen(path, "a");
    if (fp) fputs("0123456789abcdef 1 0x1.5p", fp), fclose(fp); /* torn: no newline */
    fp = fopen(path, "a");
    if (fp) fputs("garbage\n", fp), fclose(fp);
    EXPECT(sched_joined_rung(f.s, ORDER[1], 1, INFINITY) == 0);
    if (open_joined_at(&g, f.out) == 0) {
        EXPECT(sched_start(g.s, g_runs, N_RUNS) == 0);
        EXPECT(sched_joined_rungs(g.s, heard, &h) == 2);
        EXPECT(h.n == 2 && h.run[0] == ORDER[0] && h.rung[0] == 0 && h.loss[0] == l0);
        EXPECT(h.run[1] == ORDER[1] && h.rung[1] == 1 && isinf(h.loss[1]));
        EXPECT(sched_joined_rungs(g.s, heard, &h) == 0 && h.n == 2); /* read once */
        EXPECT(sched_joined_rung(f.s, ORDER[2], 0, 0.5) == 0);
        EXPECT(sched_joined_rungs(g.s, heard, &h) == 1 && h.loss[2] == 0.5);
        sched_close(g.s);
    }
    teardown(&f);
}

static int claim_files(const char *out) {
    char dir[ABL_PATH_MAX], path[ABL_PATH_MAX + 32];
    journal_dir_for(out, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/join/claims", dir);
    return test_dir_entries(path);
}

static int compacted(const char *out) {
    char dir[ABL_PATH_MAX], path[ABL_PATH_MAX + 32];
    journal_dir_for(out, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/join/compacted", dir);
    return access(path, F_OK) == 0;
}

/* The process that sees the sweep complete folds the claims into join/done and removes
 * them (else one file per run is left behind, 10^5 inodes at 10^5 runs); a run whose
 * line was missing (its process killed between claim and line) gets it from its claim; a
 * process joining later learns every run from join/done. With a claim that does not say
 * done, nothing is removed. */
static void compact_case(int lose_line, int bad_claim) {
    Fixture f, g;
    if (setup(&f, &IMPLS[1]) != 0) return;
    EndEvent e = result(RUN_DONE, 0.75);
    for (int run; (run = take(&f)) >= 0;)
        sched_ended(f.s, run, &e);
    EXPECT(!sched_more(f.s) && claim_files(f.out) == N_TODO);
    if (lose_line || bad_claim) drop_done_line(f.out, g_ids[ORDER[2]]);
    if (bad_claim) write_claim(f.out, g_ids[ORDER[2]], "held 20260101T000000Z-gone-1\n");
    teardown(&f); /* sched_close: the sweep is complete here */
    EXPECT(claim_files(f.out) == (bad_claim ? N_TODO : 0) && compacted(f.out) == !bad_claim);
    if (bad_claim) return;
    if (open_joined_at(&g, f.out) != 0) return;
    long reads = join_claim_reads();
    EXPECT(sched_start(g.s, g_runs, N_RUNS) == 0);
    for (int k = 0; k < N_TODO; k++)
        EXPECT(g.host.elsewhere[ORDER[k]] == 1 && g.host.res[ORDER[k]].final_val_loss == 0.75);
    EXPECT(!sched_more(g.s) && join_claim_reads() == reads);
    sched_close(g.s);
    EXPECT(claim_files(f.out) == 0);
}

TEST(joined_compact) {
    compact_case(0, 0);
}
TEST(joined_compact_missing_line) {
    compact_case(1, 0);
}
TEST(joined_compact_refused) {
    compact_case(0, 1);
}

/* A run that failed is trained again by a process that joins later, once (as --resume
 * trains failed runs again; before, its done claim kept it failed for good): from its claim
 * (folded: the first process ended the sweep), or taken back from its done claim (the first
 * process still there). A second process joining while it is retried leaves it to the
 * first; if it fails again, that is final. */
static void retry_case(int folded) {
    Fixture f, g, h;
    if (setup(&f, &IMPLS[1]) != 0) return;
    EndEvent ok = result(RUN_DONE, 0.5), bad = result(RUN_FAILED, NAN);
    int failed = -1;
    for (int run; (run = take(&f)) >= 0;) {
        if (failed < 0) failed = run;
        sched_ended(f.s, run, run == failed ? &bad : &ok);
    }
    EXPECT(!sched_more(f.s));
    if (folded) teardown(&f);
    if (open_joined_at(&g, f.out) != 0 || open_joined_at(&h, f.out) != 0) return;
    EXPECT(sched_start(g.s, g_runs, N_RUNS) == 0);
    EXPECT(g.host.elsewhere[failed] == 0 && g.host.elsewhere[ORDER[1]] == 1);
    g_now = clock_seconds();
    cur = &IMPLS[1];
    EXPECT(take(&g) == failed && g.host.continued == 1);
    EXPECT(sched_start(h.s, g_runs, N_RUNS) == 0); /* joins while g retries it */
    EXPECT(sched_take(h.s, g_now) < 0);
    sched_ended(g.s, failed, &bad); /* fails again: final */
    EXPECT(!sched_more(g.s));
    EXPECT(take(&h) < 0 && !sched_more(h.s) && h.host.elsewhere[failed] == 1 &&
           h.host.res[failed].status == RUN_FAILED);
    sched_close(g.s);
    sched_close(h.s);
    if (!folded) teardown(&f);
}

TEST(joined_failed_retried) {
    retry_case(1);
}
TEST(joined_failed_retaken) {
    retry_case(0);
}

/* Another process took a run of ours over (we did not renew our lease): after the next
 * heartbeat it is abandoned here; cancelled, it is ours no more; its later end is still
 * said done (ended() whoever holds it). */
TEST(joined_taken_over) {
    Fixture f;
    if (setup(&f, &IMPLS[1]) != 0) return;
    int a = take(&f);
    EXPECT(a == ORDER[0]);
    EXPECT(!sched_abandoned(f.s, a));
    write_claim(f.out, g_ids[a], "held 20260101T000000Z-elsewhere-1\n");
    g_now += 30;
    sched_tick(f.s, g_now);
    EXPECT(sched_abandoned(f.s, a));
    sched_cancel(f.s, a);
    EXPECT(!sched_abandoned(f.s, a));
    EXPECT(sched_more(f.s));
    teardown(&f);
}

int main(int argc, char **argv) {
    if (!(g_tmp = test_tmpdir())) return fprintf(stderr, "cannot make a temporary directory\n"), 1;
    make_runs();
    return test_main(argc, argv, "test_scheduler");
}
