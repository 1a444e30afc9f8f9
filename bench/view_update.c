/* view_update: what keeping OUT.h5 current costs as a sweep's journal grows.
 *
 *   view_update DIR SIZE_MB...
 *
 * For each size, writes a synthetic journal of about SIZE_MB (runs of 20,000 step events,
 * activation statistics every 100 steps for 4 layers x 4 heads, an eval every 500 steps,
 * packed with the real codec in 64 KiB EVENTS records, as workers send them), builds its
 * view, appends one more finished run and measures:
 *   update_s   the time to bring the view up to date after that run (a view build on the
 *              view thread, as `ablate run` does it);
 *   ingest     rank 0's ingest rate (appends of 64 KiB event batches to a journal, each
 *              flushed as rank 0 does per message; about 1,600 step events per batch)
 *              for 1 s alone, and while a view build of the journal runs on the view
 *              thread (ratio = during / alone: rank 0 never waits for the build, so below
 *              1.0 is CPU or disk contention on the machine, not a stall).
 * Prints one line "VIEW_UPDATE key=value ..." per size. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "orchestrator/record/event_codec.h"
#include "orchestrator/record/h5view.h"
#include "orchestrator/record/journal.h"
#include "orchestrator/record/view_updater.h"
#include "util/clock.h"

#define STEPS_PER_RUN 20000
#define BATCH         (64u << 10)

typedef struct {
    uint8_t *p;
    size_t len;
} Batch;

static void pack(Batch *b, const Event *ev) {
    b->len += event_pack(ev, b->p + b->len, EVENT_PACK_MAX);
}

/* Appends one finished run with index i; returns events written. */
static long add_run(Journal *j, uint32_t i, Batch *b) {
    RunConfig c;
    run_config_default(&c);
    char id[17];
    snprintf(id, sizeof id, "%016x", i + 1);
    char name[32];
    snprintf(name, sizeof name, "bench/seed%u", i);
    journal_append_plan(j, i, id, name, i, &c);
    journal_append_begin(j, i, 1, 1, "node-a", 0);
    long n = 0;
    Event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_START;
    ev.u.start.params = 123456;
    pack(b, &ev);
    for (long s = 1; s <= STEPS_PER_RUN; s++) {
        memset(&ev, 0, sizeof ev);
        ev.kind = EV_STEP;
        ev.u.step = (StepEvent){s, s * 512, 3.0 + 1.0 / (double)s, 1e-3, 0.5 + 1e-6 * s, 0.01 * s};
        pack(b, &ev);
        n++;
        if (s % 100 == 0)
            for (int l = 0; l < 4; l++) {
                memset(&ev, 0, sizeof ev);
                ev.kind = EV_ACT;
                ev.u.act.step = s;
                ev.u.act.layer = l;
                ev.u.act.zero_frac = 0.1 + 1e-7 * s;
                ev.u.act.rms = 1.0 + 1e-6 * s;
                ev.u.act.n_head = 4;
                for (int h = 0; h < 4; h++)
                    ev.u.act.attn_entropy[h] = 1.0 + 0.1 * h + 1e-7 * s;
                pack(b, &ev);
                n++;
            }
        if (s % 500 == 0) {
            memset(&ev, 0, sizeof ev);
            ev.kind = EV_EVAL;
            ev.u.eval = (EvalEvent){.step = s,
                                    .val_loss = 2.0 + 1.0 / (double)s,
                                    .val_acc = 0.4,
                                    .tokens = s * 512,
                                    .time = 0.01 * s};
            pack(b, &ev);
            n++;
        }
        if (b->len + EVENT_PACK_MAX > BATCH) {
            journal_append_events(j, i, 1, b->p, b->len);
            b->len = 0;
        }
    }
    if (b->len) journal_append_events(j, i, 1, b->p, b->len);
    b->len = 0;
    EndEvent e;
    memset(&e, 0, sizeof e);
    e.status = RUN_DONE;
    e.steps = STEPS_PER_RUN;
    e.final_val_loss = 2.0;
    journal_append_end(j, i, 1, 1, "node-a", &e);
    return n;
}

/* Ingest: appends the same 64 KiB batch (flushing, as rank 0 does per message) until
 * `until` returns 0 or `seconds` pass; returns batches per second. */
static double ingest(Journal *j, const Batch *b, double seconds, ViewUpdater *u) {
    double t0 = clock_seconds(), t;
    long n = 0;
    do {
        journal_append_events(j, 0, 1, b->p, b->len);
        journal_flush(j);
        n++;
        t = clock_seconds();
    } while (u ? view_updater_busy(u) : t - t0 < seconds);
    return n / (t - t0);
}

static double median3(const double *x) {
    double a = x[0], b = x[1], c = x[2];
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: view_update DIR SIZE_MB...\n");
        return 2;
    }
    Batch b = {malloc(BATCH + EVENT_PACK_MAX), 0};
    for (int a = 2; a < argc; a++) {
        double mb = atof(argv[a]);
        char dir[4096], jp[4200], out[4200], err[ABL_ERR_MAX];
        snprintf(dir, sizeof dir, "%s/j%s", argv[1], argv[a]);
        mkdir(dir, 0777);
        snprintf(jp, sizeof jp, "%s/journal", dir);
        snprintf(out, sizeof out, "%s/out.h5", dir);
        remove(jp);
        Journal *j = journal_create(jp, err);
        if (!j) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        const char *kv[] = {"spec", "bench: true\n", "start_time", "2024-05-01T12:00:00Z"};
        journal_append_header(j, kv, 2);
        uint32_t runs = 0;
        long events = 0;
        while (journal_size(j) < (uint64_t)(mb * 1e6))
            events += add_run(j, runs++, &b);
        journal_sync(j);
        H5ViewStats st;
        double t0 = clock_seconds();
        if (h5view_build_stats(jp, out, &st, err) != 0) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        double full = clock_seconds() - t0;
        /* the live view (what a running sweep keeps current): its first update reads the
         * whole journal once; then, three times, one more finished run and the view brought
         * up to date on the view thread (the target: roughly constant in the journal size) */
        ViewUpdater *u = view_updater_start(jp, out, 0, err);
        t0 = clock_seconds();
        view_updater_request(u, journal_size(j), 0);
        view_updater_wait(u, err);
        double catch_up = clock_seconds() - t0, ups[3];
        for (int k = 0; k < 3; k++) {
            events += add_run(j, runs++, &b);
            journal_flush(j);
            t0 = clock_seconds();
            view_updater_request(u, journal_size(j), 0);
            if (view_updater_wait(u, err) != 0) {
                fprintf(stderr, "live update: %s\n", err);
                return 1;
            }
            ups[k] = clock_seconds() - t0;
        }
        double update = median3(ups);
        /* rank 0's ingest alone, then while a build runs */
        Batch one = {b.p, 0};
        Event ev;
        memset(&ev, 0, sizeof ev);
        ev.kind = EV_STEP;
        while (one.len + EVENT_PACK_MAX <= BATCH) {
            ev.u.step.step++;
            pack(&one, &ev);
        }
        uint64_t size = journal_size(j);
        /* rank 0's appends go to a scratch journal, so the measurement does not grow this one */
        char sp[4300];
        snprintf(sp, sizeof sp, "%s/scratch", dir);
        remove(sp);
        Journal *scratch = journal_create(sp, err);
        double alone = ingest(scratch, &one, 1.0, NULL);
        view_updater_request(u, size, 1); /* a full build: the longest there is */
        double during = ingest(scratch, &one, 0, u);
        view_updater_wait(u, err);
        view_updater_stop(u);
        journal_close(scratch);
        remove(sp);
        struct stat sb;
        stat(out, &sb);
        printf("VIEW_UPDATE journal_MB=%.1f runs=%u events=%ld view_MB=%.1f full_build_s=%.3f "
               "live_catch_up_s=%.3f update_s=%.3f (%.3f %.3f %.3f) ingest_MB_s_alone=%.0f "
               "ingest_MB_s_during_full=%.0f ratio=%.2f\n",
               (double)size / 1e6, runs, events, (double)sb.st_size / 1e6, full, catch_up, update,
               ups[0], ups[1], ups[2], alone * BATCH / 1e6, during * BATCH / 1e6, during / alone);
        fflush(stdout);
        journal_close(j);
    }
    free(b.p);
    return 0;
}
