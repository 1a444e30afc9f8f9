/* The fixture of the HDF5 view tests (test_h5view.c, test_h5view.py, test_live_gaps.py): the
 * journal of a few fake runs, written from deterministic values, its views, a long
 * synthetic sweep. */
#include "h5view_fixture.h"
#include "orchestrator/record/h5table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"
#include "util/clock.h"
#include "worker/knobs.h"

const char *const run_names[N_RUNS] = {"baseline", "heads=2", "lr=0.01", "pending", "diverge"};

void stream_flush(Stream *s) {
    if (s->n == 0) return;
    CHECK(journal_append_events(s->j, s->run, s->attempt, s->buf, s->len) == 0);
    s->len = 0;
    s->n = 0;
}

void stream_emit(Stream *s, const Event *ev) {
    size_t n = event_pack(ev, s->buf + s->len, sizeof s->buf - s->len);
    CHECK(n > 0);
    s->len += n;
    if (++s->n >= s->batch) stream_flush(s);
}

void emit_start(Stream *s, int run) {
    Event e = {.kind = EV_START};
    e.u.start.params = 10000 + run;
    e.u.start.flops_per_token = 6.0e4 + run;
    e.u.start.kv_bytes_per_token = 512.0;
    snprintf(e.u.start.blas_core, sizeof e.u.start.blas_core, "Haswell");
    stream_emit(s, &e);
}

/* The events of one step of the fake training loop. */
void emit_step(Stream *s, int run, long step, int attempt, int with_acts) {
    Event e = {.kind = EV_STEP};
    e.u.step = (StepEvent){step,       step * 64,         f_loss(run, step, attempt),
                           f_lr(step), f_grad(run, step), f_time(step)};
    stream_emit(s, &e);
    if (step % 10 == 0) {
        Event v = {.kind = EV_EVAL};
        v.u.eval = (EvalEvent){
            step, f_loss(run, step, attempt) + 0.125, step / 100.0, step * 64, f_time(step), 0.0};
        stream_emit(s, &v);
    }
    if (with_acts && step % 25 == 0) {
        for (int layer = 0; layer < 2; layer++) {
            Event a = {.kind = EV_ACT};
            ActEvent *x = &a.u.act;
            x->step = step;
            x->layer = layer;
            x->zero_frac = 0.1 * layer + step / 1000.0;
            x->max = 3.0 + layer;
            x->min = -3.0 - layer;
            x->mean = 0.01 * step;
            x->rms = 1.0 + layer;
            x->resid_rms = 2.0 + layer;
            x->grad_norm = 0.5 * layer + step / 100.0;
            x->n_head = 4;
            for (int h = 0; h < 4; h++)
                x->attn_entropy[h] = f_entropy(layer, h, step);
            stream_emit(s, &a);
        }
    }
}

void emit_samples(Stream *s, int run) {
    static Event e;
    for (int k = 0; k < 2; k++) {
        memset(&e, 0, sizeof e);
        e.kind = EV_SAMPLE;
        SampleEvent *x = &e.u.sample;
        x->kind = k ? SAMPLE_TEMPERATURE : SAMPLE_GREEDY;
        x->temperature = k ? 0.8 : 0.0;
        if (k)
            snprintf(x->text, sizeof x->text, "run %d sampled: \"quoted\" \xc3\xa9", run);
        else
            snprintf(x->text, sizeof x->text, "run %d greedy\nthe king", run);
        x->n_tokens = (int)strlen(x->text);
        x->tokens_per_s = 1000.0 + run;
        x->distinct_ratio = 0.5;
        x->longest_run = 3;
        x->top_token_frac = 0.25;
        x->degenerate = k == 0;
        stream_emit(s, &e);
    }
}

EndEvent make_end(int run, RunStatus status, long steps, int attempt) {
    EndEvent e;
    memset(&e, 0, sizeof e);
    e.status = status;
    e.steps = steps;
    e.tokens = steps * 64;
    e.train_seconds = f_time(steps);
    e.tokens_per_s = 256.0;
    e.final_val_loss = status == RUN_DONE ? f_loss(run, steps, attempt) + 0.125 : NAN;
    e.final_val_acc = status == RUN_DONE ? 0.5 : NAN;
    if (status == RUN_FAILED)
        snprintf(e.message, sizeof e.message, "loss is NaN at step %ld", steps);
    return e;
}

void write_header(Journal *j) {
    const char *kv[] = {"journal_version",
                        JOURNAL_FORMAT_VERSION,
                        "spec",
                        FIXTURE_SPEC_TEXT,
                        "ablate_version",
                        "0.1.0",
                        "git_rev",
                        "abc123def456",
                        "compiler",
                        "GNU 12.2.0",
                        "c_flags",
                        "-O3",
                        "mpi_version",
                        "Open MPI v4.1.4",
                        "hdf5_version",
                        "1.10.8",
                        "openblas_version",
                        "OpenBLAS 0.3.21",
                        "blas_core",
                        "Haswell",
                        "ranks",
                        "3",
                        "hostnames",
                        "node-a,node-b,node-c",
                        "start_time",
                        "2024-05-01T12:00:00Z",
                        "vocab",
                        "\n !abc",
                        "custom_key",
                        "custom value"};
    CHECK(journal_append_header(j, kv, (int)(sizeof kv / sizeof *kv / 2)) == 0);
}

/* The fixture journal. complete: 1 with SWEEP_END; 2 with SWEEP_END status "stopped" (a
 * session that ended with runs unfinished). */
int write_fixture(const char *journal_path, int complete) {
    char err[ABL_ERR_MAX];
    Journal *j = journal_create(journal_path, err);
    if (!j) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    write_header(j);
    static RunConfig cfg;
    for (int r = 0; r < N_RUNS; r++) {
        run_config_default(&cfg);
        cfg.model.n_head = r == 1 ? 2 : 4;
        if (r == 1) cfg.model.activation = ACT_SWIGLU;
        if (r == 2) cfg.train.lr = 0.01;
        cfg.model.qk_norm = r == 4;
        char id[17];
        snprintf(id, sizeof id, "%016llx", 0xabcdef0000000000ull + (unsigned long long)r);
        CHECK(journal_append_plan(j, (uint32_t)r, id, run_names[r], 100 + (uint64_t)r, &cfg) == 0);
    }
    static Stream s0, s1;
    /* Runs 0 and 1 (attempt 1) interleaved; run 1's attempt 1 dies after step 30. */
    CHECK(journal_append_begin(j, 0, 1, 1, "node-a", 0) == 0);
    CHECK(journal_append_begin(j, 1, 1, 2, "node-b", 0) == 0);
    s0 = (Stream){.j = j, .run = 0, .attempt = 1, .batch = 8};
    s1 = (Stream){.j = j, .run = 1, .attempt = 1, .batch = 8};
    emit_start(&s0, 0);
    emit_start(&s1, 1);
    for (long step = 1; step <= FULL_STEPS; step++) {
        emit_step(&s0, 0, step, 1, 1);
        if (step <= 30) emit_step(&s1, 1, step, 1, 1);
        if (step == 20) {
            stream_flush(&s1);
            CHECK(journal_append_checkpoint(j, 1, 1, 20, "ckpt/run1-20.bin") == 0);
        }
    }
    emit_samples(&s0, 0);
    stream_flush(&s0);
    stream_flush(&s1);
    EndEvent e0 = make_end(0, RUN_DONE, FULL_STEPS, 1);
    CHECK(journal_append_end(j, 0, 1, 1, "node-a", &e0) == 0);
    CHECK(journal_sync(j) == 0);
    /* Run 1 resumes from its checkpoint on node-a; run 2 starts and never finishes. */
    CHECK(journal_append_begin(j, 1, 2, 1, "node-a", 20) == 0);
    CHECK(journal_append_begin(j, 2, 1, 3, "node-c", 0) == 0);
    static Stream s2;
    s1 = (Stream){.j = j, .run = 1, .attempt = 2, .batch = 8};
    s2 = (Stream){.j = j, .run = 2, .attempt = 1, .batch = 3};
    emit_start(&s1, 1);
    emit_start(&s2, 2);
    for (long step = 1; step <= FULL_STEPS; step++) {
        emit_step(&s1, 1, step, 2, 1);
        if (step <= 7) emit_step(&s2, 2, step, 1, 0);
    }
    emit_samples(&s1, 1);
    stream_flush(&s1);
    stream_flush(&s2);
    EndEvent e1 = make_end(1, RUN_DONE, FULL_STEPS, 2);
    CHECK(journal_append_end(j, 1, 2, 1, "node-a", &e1) == 0);
    /* Run 4 fails at step 3. */
    CHECK(journal_append_begin(j, 4, 1, 2, "node-b", 0) == 0);
    static Stream s4;
    s4 = (Stream){.j = j, .run = 4, .attempt = 1, .batch = 64};
    emit_start(&s4, 4);
    for (long step = 1; step <= 3; step++)
        emit_step(&s4, 4, step, 1, 0);
    stream_flush(&s4);
    EndEvent e4 = make_end(4, RUN_FAILED, 3, 1);
    CHECK(journal_append_end(j, 4, 1, 2, "node-b", &e4) == 0);
    if (complete) {
        const char *kv[] = {"end_time", "2024-05-01T13:00:00Z", "status", "stopped"};
        CHECK(journal_append_sweep_end(j, kv, complete == 2 ? 2 : 1) == 0);
    }
    return journal_close(j);
}

hid_t strt(size_t n) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n);
    return t;
}

hid_t bool_type(void) {
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    int8_t f = 0, tr = 1;
    H5Tenum_insert(t, "FALSE", &f);
    H5Tenum_insert(t, "TRUE", &tr);
    return t;
}

long long dset_rows(hid_t file, const char *name) {
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) return -1;
    hid_t s = H5Dget_space(d);
    hsize_t n = 0;
    H5Sget_simple_extent_dims(s, &n, NULL);
    H5Sclose(s);
    H5Dclose(d);
    return (long long)n;
}

void str_attr(hid_t loc, const char *name, char *out, size_t n) {
    out[0] = 0;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0) return;
    hid_t t = h5_utf8_type();
    char *s = NULL;
    if (H5Aread(a, t, &s) >= 0 && s) {
        snprintf(out, n, "%s", s);
        H5free_memory(s);
    }
    H5Tclose(t);
    H5Aclose(a);
}

/* ---------------- files ---------------- */

int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        if (x != y) same = 0;
        if (x == EOF || y == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static int g_writer_lock = -1;

void release_writer_lock(void) {
    if (g_writer_lock >= 0) close(g_writer_lock);
    g_writer_lock = -1;
}

int make_fixture(const char *dir, int complete, char *journal, char *out, size_t n) {
    char err[ABL_ERR_MAX];
    snprintf(out, n, "%s/out.h5", dir);
    if (journal_ensure_dir(out, err) != 0 || journal_path_for(out, journal, n) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    if (write_fixture(journal, complete) != 0) return -1;
    /* an unfinished sweep is "running" only while a process holds its journal's lock, as
     * the sweep's rank 0 does; without it the view says it stopped. The lock stays in
     * g_writer_lock until the caller lets the "sweep" go. */
    if (!complete && g_writer_lock < 0) g_writer_lock = journal_lock_existing(journal, err);
    int rc = h5view_build(journal, out, err);
    if (rc != 0) {
        fprintf(stderr, "h5view_build: %s\n", err);
        return -1;
    }
    return 0;
}

/* ---------------- a long sweep: bounded memory, rates ---------------- */

long max_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Bench mode: pseudo-random low bits in the metrics, so compression is realistic. */
static double noise(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) * 0x1.0p-53;
}

/* RUNS runs of STEPS steps, 4 running at a time (events interleaved in 64-event batches),
 * evals every 100 steps, acts (4 layers x 4 heads) every 500; fdatasync after each RUN_END. */
int long_sweep(const char *dir, int runs, long steps, H5ViewStats *st, int verbose, int noisy) {
    char out[600], journal[700], err[ABL_ERR_MAX];
    snprintf(out, sizeof out, "%s/long.h5", dir);
    if (journal_ensure_dir(out, err) != 0) return -1;
    journal_path_for(out, journal, sizeof journal);
    unlink(journal);
    Journal *j = journal_create(journal, err);
    if (!j) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    double t0 = clock_seconds();
    write_header(j);
    static RunConfig cfg;
    run_config_default(&cfg);
    for (int r = 0; r < runs; r++) {
        char id[17], name[32];
        snprintf(id, sizeof id, "%016x", r);
        snprintf(name, sizeof name, "run%d", r);
        cfg.train.steps = steps;
        journal_append_plan(j, (uint32_t)r, id, name, (uint64_t)r, &cfg);
    }
    enum { LANES = 4 };
    static Stream lane[LANES];
    long pos[LANES];
    int next = 0, active = 0;
    long long values = 0, events = 0;
    uint64_t rng = 42;
    for (int l = 0; l < LANES; l++)
        pos[l] = -1;
    while (next < runs || active) {
        for (int l = 0; l < LANES; l++) {
            if (pos[l] < 0 && next < runs) {
                lane[l] = (Stream){.j = j, .run = (uint32_t)next, .attempt = 1, .batch = 64};
                journal_append_begin(j, (uint32_t)next, 1, l + 1, "node", 0);
                emit_start(&lane[l], next);
                pos[l] = 1;
                next++;
                active++;
            }
            if (pos[l] < 0) continue;
            int r = (int)lane[l].run;
            for (int k = 0; k < 64 && pos[l] <= steps; k++, pos[l]++) {
                Event e = {.kind = EV_STEP};
                long s = pos[l];
                e.u.step =
                    (StepEvent){s, s * 64, f_loss(r, s, 1), f_lr(s), f_grad(r, s), f_time(s)};
                if (noisy) {
                    e.u.step.loss += 0.05 * noise(&rng);
                    e.u.step.grad_norm += noise(&rng);
                    e.u.step.time += 0.01 * noise(&rng);
                }
                stream_emit(&lane[l], &e);
                events++;
                values += 6;
                if (s % 100 == 0) {
                    Event v = {.kind = EV_EVAL};
                    v.u.eval = (EvalEvent){s, 1.0, 0.5, s * 64, 0.5, 0.0};
                    stream_emit(&lane[l], &v);
                    events++;
                    values += 3;
                }
                if (s % 500 == 0) {
                    for (int layer = 0; layer < 4; layer++) {
                        Event a = {.kind = EV_ACT};
                        a.u.act.step = s;
                        a.u.act.layer = layer;
                        a.u.act.n_head = 4;
                        for (int h = 0; h < 4; h++)
                            a.u.act.attn_entropy[h] = h;
                        stream_emit(&lane[l], &a);
                        events++;
                        values += 12;
                    }
                }
            }
            if (pos[l] > steps) {
                stream_flush(&lane[l]);
                EndEvent e = make_end(r, RUN_DONE, steps, 1);
                journal_append_end(j, (uint32_t)r, 1, l + 1, "node", &e);
                if (journal_sync(j) != 0) {
                    fprintf(stderr, "%s\n", journal_error(j));
                    return -1;
                }
                pos[l] = -1;
                active--;
            }
        }
    }
    const char *kv[] = {"end_time", "2024-05-01T13:00:00Z"};
    journal_append_sweep_end(j, kv, 1);
    uint64_t jbytes = journal_size(j);
    if (journal_close(j) != 0) return -1;
    double t1 = clock_seconds();
    long rss0 = max_rss_kb();
    if (h5view_build_stats(journal, out, st, err) != 0) {
        fprintf(stderr, "h5view_build: %s\n", err);
        return -1;
    }
    long rss1 = max_rss_kb();
    if (verbose) {
        long long rows = st->steps + st->evals + st->acts + st->attn + st->samples + st->runs;
        fprintf(stderr,
                "journal: %d runs x %ld steps: %lld events, %lld metric values, %.1f MB, "
                "%.1f bytes/event; appended (with fdatasync per run) in %.3f s: %.2f M "
                "events/s, %.1f M values/s\n",
                runs, steps, events, values, jbytes / 1e6, (double)jbytes / (double)events, t1 - t0,
                events / (t1 - t0) / 1e6, values / (t1 - t0) / 1e6);
        fprintf(stderr,
                "h5view: %lld rows (steps %lld, evals %lld, acts %lld, attn %lld) in %.3f s: "
                "%.2f M rows/s, %.2f M step rows/s; %.1f MB file; max RSS %ld -> %ld MB\n",
                rows, st->steps, st->evals, st->acts, st->attn, st->seconds,
                rows / st->seconds / 1e6, st->steps / st->seconds / 1e6, test_file_size(out) / 1e6,
                rss0 / 1024, rss1 / 1024);
    }
    return 0;
}

/* ---------------- the live view (h5view_live.c) ---------------- */

/* The fixture as a live view built in n updates (each over a larger prefix of the
 * journal): OUT.h5 maps up to n segment files. */
int live_runs_page;
double live_segment_grace = -1;

int make_live_fixture(const char *dir, int n, H5ViewStats *last) {
    char journal[700], out[700], err[ABL_ERR_MAX] = "";
    if (make_fixture(dir, 0, journal, out, sizeof journal) != 0) return -1;
    H5Live *lv = h5live_open(journal, out, err);
    if (lv && live_runs_page) h5live_set_runs_page(lv, (uint32_t)live_runs_page);
    int rc = lv ? 0 : -1;
    long size = test_file_size(journal);
    for (int k = 1; k <= n && rc == 0; k++)
        rc = h5live_update(lv, (uint64_t)(size * k / n), last, err);
    if (rc != 0) fprintf(stderr, "live view: %s\n", err);
    h5live_close(lv);
    return rc;
}

/* Mappings of the virtual datasets of file (every table of a live view), or -1. */
long long vds_mappings(const char *path) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return -1;
    static const char *const tables[] = {"steps", "evals", "acts", "attn", "samples", "runs"};
    long long n = 0;
    for (size_t t = 0; t < sizeof tables / sizeof *tables; t++) {
        if (H5Lexists(f, tables[t], H5P_DEFAULT) <= 0) continue;
        hid_t d = H5Dopen2(f, tables[t], H5P_DEFAULT);
        hid_t p = d >= 0 ? H5Dget_create_plist(d) : -1;
        size_t c = 0;
        if (p >= 0 && H5Pget_layout(p) == H5D_VIRTUAL && H5Pget_virtual_count(p, &c) >= 0)
            n += (long long)c;
        if (p >= 0) H5Pclose(p);
        if (d >= 0) H5Dclose(d);
    }
    H5Fclose(f);
    return n;
}

/* One tiny run's events (START, two steps, samples) in two halves: its start and first
 * step, then the rest and its RUN_END. */
static void many_first(Journal *j, int run) {
    static Stream s;
    s = (Stream){.j = j, .run = (uint32_t)run, .attempt = 1, .batch = 64};
    CHECK(journal_append_begin(j, (uint32_t)run, 1, 1 + run % 7, "node-a", 0) == 0);
    emit_start(&s, run % 8);
    emit_step(&s, run % 8, 1, 1, 0);
    stream_flush(&s);
}

static void many_last(Journal *j, int run) {
    static Stream s;
    s = (Stream){.j = j, .run = (uint32_t)run, .attempt = 1, .batch = 64};
    emit_step(&s, run % 8, 2, 1, 0);
    emit_samples(&s, run % 8);
    stream_flush(&s);
    EndEvent e = make_end(run % 8, RUN_DONE, 2, 1);
    CHECK(journal_append_end(j, (uint32_t)run, 1, 1 + run % 7, "node-a", &e) == 0);
}

int live_many_runs(const char *dir, int runs, int per_update, int in_flight, LiveProgress fn,
                   void *ctx) {
    char journal[700], out[700], err[ABL_ERR_MAX] = "";
    snprintf(journal, sizeof journal, "%s/many.h5.d/journal", dir);
    snprintf(out, sizeof out, "%s/many.h5", dir);
    char jd[700];
    snprintf(jd, sizeof jd, "%s/many.h5.d", dir);
    mkdir(jd, 0777);
    Journal *j = journal_create(journal, err);
    if (!j) return fprintf(stderr, "%s\n", err), -1;
    write_header(j);
    static RunConfig cfg;
    run_config_default(&cfg);
    for (int r = 0; r < runs; r++) {
        char id[17], name[32];
        snprintf(id, sizeof id, "%016llx", 0x1000000000000000ull + (unsigned long long)r);
        snprintf(name, sizeof name, "many/seed%d", r);
        cfg.train.lr = 1e-3 * (1 + r % 5);
        CHECK(journal_append_plan(j, (uint32_t)r, id, name, (uint64_t)r, &cfg) == 0);
    }
    H5Live *lv = h5live_open(journal, out, err);
    if (lv && live_runs_page) h5live_set_runs_page(lv, (uint32_t)live_runs_page);
    if (lv && live_segment_grace >= 0) h5live_set_segment_grace(lv, live_segment_grace);
    int rc = lv ? 0 : -1, begun = 0, ended = 0;
    while (rc == 0 && ended < runs) {
        /* per_update runs end; the next in_flight are begun, part-way */
        for (int k = 0; k < per_update && ended < runs; k++) {
            if (ended == begun) many_first(j, begun++);
            many_last(j, ended++);
        }
        while (begun < runs && begun < ended + in_flight)
            many_first(j, begun++);
        if (journal_flush(j) != 0) rc = -1;
        struct stat st;
        H5ViewStats vs;
        double t0 = clock_seconds();
        if (rc == 0 && stat(journal, &st) == 0)
            rc = h5live_update(lv, (uint64_t)st.st_size, &vs, err);
        if (rc == 0 && fn) fn(ctx, ended, &vs, clock_seconds() - t0, out);
        if (rc == 0 && ended == runs) { /* and one with nothing new */
            t0 = clock_seconds();
            rc = h5live_update(lv, (uint64_t)st.st_size, &vs, err);
            if (rc == 0 && fn) fn(ctx, ended, &vs, clock_seconds() - t0, out);
        }
    }
    if (rc != 0) fprintf(stderr, "live view: %s\n", err);
    h5live_close(lv);
    if (journal_close(j) != 0) rc = -1;
    return rc;
}
