/* The HDF5 view of the journal: a journal of a few fake runs (two attempts of one run, an
 * unfinished run, a pending run, a failed run) is rebuilt into OUT.h5 and read back with
 * the C API; the build is deterministic and safe for open readers; `ablate inspect` reads
 * it; a 200-run x 2000-step journal builds with bounded memory; a live view survives lost
 * segments. The fixture journal itself is h5view_fixture.c.
 *
 * Modes: test_h5view [CASE...]              the checks (--list names the cases)
 *        test_h5view --fixture DIR          writes DIR/out.h5 (+ journal) for test_h5view.py
 *        test_h5view --live-fixture DIR N   the same as a live view over N segments (up to N
 *                                           updates), for tests/test_live_gaps.py
 *        test_h5view --bench RUNS STEPS DIR append + build figures for a synthetic sweep */
#include <dirent.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "h5view_fixture.h"
#include "orchestrator/record/h5table.h"
#include "orchestrator/record/inspect.h"
#include "orchestrator/record/journal_replicate.h"
#include "orchestrator/record/view_check.h"
#include "orchestrator/plan/sequential.h"
#include "test_util.h"
#include "util/utf8.h"
#include "util/fsutil.h"
#include "worker/knobs.h"

static void check_fixture_file(const char *out, int complete) {
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK_MSG(f >= 0, "cannot open %s", out);
    if (f < 0) return;
    int version = 0, ranks = 0;
    hid_t a = H5Aopen(f, "ablate_schema_version", H5P_DEFAULT);
    CHECK(a >= 0 && H5Aread(a, H5T_NATIVE_INT, &version) >= 0 && version == 2);
    H5Aclose(a);
    a = H5Aopen(f, "ranks", H5P_DEFAULT);
    CHECK(a >= 0 && H5Aread(a, H5T_NATIVE_INT, &ranks) >= 0 && ranks == 3);
    H5Aclose(a);
    char s[256];
    str_attr(f, "status", s, sizeof s);
    CHECK_MSG(!strcmp(s, complete == 2 ? "stopped"
                         : complete    ? "complete"
                                       : "running"),
              "status %s", s);
    str_attr(f, "end_time", s, sizeof s);
    CHECK(!strcmp(s, complete ? "2024-05-01T13:00:00Z" : ""));
    str_attr(f, "hostnames", s, sizeof s);
    CHECK(!strcmp(s, "node-a,node-b,node-c"));
    str_attr(f, "git_rev", s, sizeof s);
    CHECK(!strcmp(s, "abc123def456"));
    str_attr(f, "custom_key", s, sizeof s);
    CHECK(!strcmp(s, "custom value"));
    /* /spec */
    hid_t d = H5Dopen2(f, "spec", H5P_DEFAULT);
    hid_t vt = H5Tcopy(H5T_C_S1);
    H5Tset_size(vt, H5T_VARIABLE);
    char *spec = NULL;
    CHECK(d >= 0 && H5Dread(d, vt, H5S_ALL, H5S_ALL, H5P_DEFAULT, &spec) >= 0 && spec &&
          !strcmp(spec, FIXTURE_SPEC_TEXT));
    if (spec) H5free_memory(spec);
    H5Dclose(d);
    H5Tclose(vt);
    CHECK(H5Lexists(f, "plan_text", H5P_DEFAULT) == 0); /* schema 2: the columns say it */

    /* /runs */
    RunRow rows[N_RUNS];
    memset(rows, 0, sizeof rows);
    hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(RunRow));
    hid_t t17 = strt(17), t32 = strt(32), t12 = strt(12), t16 = strt(16), t64 = strt(64),
          tb = bool_type();
    H5Tinsert(mt, "index", HOFFSET(RunRow, index), H5T_NATIVE_INT32);
    H5Tinsert(mt, "id", HOFFSET(RunRow, id), t17);
    hid_t tv = h5_utf8_type();
    H5Tinsert(mt, "name", HOFFSET(RunRow, name), tv);
    H5Tinsert(mt, "seed", HOFFSET(RunRow, seed), H5T_NATIVE_UINT64);
    H5Tinsert(mt, "status", HOFFSET(RunRow, status), t12);
    H5Tinsert(mt, "model.n_head", HOFFSET(RunRow, n_head), H5T_NATIVE_INT32);
    H5Tinsert(mt, "model.activation", HOFFSET(RunRow, activation), t16);
    H5Tinsert(mt, "model.qk_norm", HOFFSET(RunRow, qk_norm), tb);
    H5Tinsert(mt, "train.lr", HOFFSET(RunRow, lr), H5T_NATIVE_DOUBLE);
    H5Tinsert(mt, "params", HOFFSET(RunRow, params), H5T_NATIVE_INT64);
    H5Tinsert(mt, "steps", HOFFSET(RunRow, steps), H5T_NATIVE_INT64);
    H5Tinsert(mt, "final_val_loss", HOFFSET(RunRow, final_val_loss), H5T_NATIVE_DOUBLE);
    H5Tinsert(mt, "rank", HOFFSET(RunRow, rank), H5T_NATIVE_INT32);
    H5Tinsert(mt, "host", HOFFSET(RunRow, host), tv);
    H5Tinsert(mt, "attempts", HOFFSET(RunRow, attempts), H5T_NATIVE_INT32);
    H5Tinsert(mt, "resumed_from_step", HOFFSET(RunRow, resumed_from_step), H5T_NATIVE_INT64);
    H5Tinsert(mt, "last_checkpoint_step", HOFFSET(RunRow, last_checkpoint_step), H5T_NATIVE_INT64);
    H5Tinsert(mt, "message", HOFFSET(RunRow, message), tv);
    H5Tinsert(mt, "blas_core", HOFFSET(RunRow, blas_core), tv);
    CHECK(dset_rows(f, "runs") == N_RUNS);
    d = H5Dopen2(f, "runs", H5P_DEFAULT);
    CHECK(d >= 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    H5Dclose(d);
    H5Tclose(mt);
    H5Tclose(tv);
    H5Tclose(t17);
    H5Tclose(t32);
    H5Tclose(t12);
    H5Tclose(t16);
    H5Tclose(t64);
    H5Tclose(tb);
    const char *want_status[N_RUNS] = {"done", "done", complete ? "interrupted" : "running",
                                       "pending", "failed"};
    for (int r = 0; r < N_RUNS; r++) {
        RunRow *x = &rows[r];
        char id[17];
        snprintf(id, sizeof id, "%016llx", 0xabcdef0000000000ull + (unsigned long long)r);
        CHECK(x->index == r && !strcmp(x->id, id) && !strcmp(x->name, run_names[r]) &&
              x->seed == 100u + (unsigned)r);
        CHECK_MSG(!strcmp(x->status, want_status[r]), "run %d status %s", r, x->status);
        CHECK(x->n_head == (r == 1 ? 2 : 4));
        CHECK(!strcmp(x->activation, r == 1 ? "swiglu" : "relu"));
        CHECK(x->qk_norm == (r == 4));
        CHECK(r != 2 || x->lr == 0.01);
        CHECK(x->params == (r == 3 ? -1 : 10000 + r));
        CHECK(!strcmp(x->blas_core, r == 3 ? "" : "Haswell"));
        CHECK(x->attempts == (r == 1 ? 2 : r == 3 ? 0 : 1));
    }
    CHECK(rows[0].final_val_loss == f_loss(0, 50, 1) + 0.125 && rows[0].steps == 50);
    CHECK(rows[1].final_val_loss == f_loss(1, 50, 2) + 0.125);
    CHECK(rows[1].resumed_from_step == 20 && rows[1].last_checkpoint_step == 20);
    CHECK(rows[1].rank == 1 && !strcmp(rows[1].host, "node-a"));
    CHECK(isnan(rows[2].final_val_loss) && rows[2].steps == 7 && rows[2].rank == 3);
    CHECK(isnan(rows[3].final_val_loss) && rows[3].steps == 0 && rows[3].rank == -1 &&
          rows[3].host[0] == 0);
    CHECK(isnan(rows[4].final_val_loss) && !strcmp(rows[4].message, "loss is NaN at step 3"));
    for (int r = 0; r < N_RUNS; r++) {
        free(rows[r].name);
        free(rows[r].host);
        free(rows[r].message);
        free(rows[r].blas_core);
    }

    /* /steps: grouped by run in plan order; run 1 holds its second attempt only. */
    long long n = dset_rows(f, "steps");
    CHECK_MSG(n == 50 + 50 + 7 + 3, "steps rows %lld", n);
    StepRow *st = calloc((size_t)(n > 0 ? n : 1), sizeof *st);
    mt = H5Tcreate(H5T_COMPOUND, sizeof(StepRow));
    H5Tinsert(mt, "run", HOFFSET(StepRow, run), H5T_NATIVE_INT32);
    H5Tinsert(mt, "step", HOFFSET(StepRow, step), H5T_NATIVE_INT64);
    H5Tinsert(mt, "tokens", HOFFSET(StepRow, tokens), H5T_NATIVE_INT64);
    H5Tinsert(mt, "loss", HOFFSET(StepRow, loss), H5T_NATIVE_DOUBLE);
    H5Tinsert(mt, "lr", HOFFSET(StepRow, lr), H5T_NATIVE_DOUBLE);
    H5Tinsert(mt, "grad_norm", HOFFSET(StepRow, grad_norm), H5T_NATIVE_DOUBLE);
    H5Tinsert(mt, "time", HOFFSET(StepRow, time), H5T_NATIVE_DOUBLE);
    d = H5Dopen2(f, "steps", H5P_DEFAULT);
    CHECK(d >= 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, st) >= 0);
    H5Dclose(d);
    H5Tclose(mt);
    const int runs_order[4] = {0, 1, 2, 4}, counts[4] = {50, 50, 7, 3};
    long long i = 0;
    int bad = 0;
    for (int k = 0; k < 4 && i < n; k++) {
        int r = runs_order[k], attempt = r == 1 ? 2 : 1;
        for (long step = 1; step <= counts[k] && i < n; step++, i++) {
            StepRow *x = &st[i];
            if (x->run != r || x->step != step || x->tokens != step * 64 ||
                x->loss != f_loss(r, step, attempt) || x->lr != f_lr(step) ||
                x->grad_norm != f_grad(r, step) || x->time != f_time(step)) {
                if (bad++ < 3) CHECK_MSG(0, "steps row %lld (run %d step %ld) wrong", i, r, step);
            }
        }
    }
    free(st);
    CHECK(dset_rows(f, "evals") == 10);
    CHECK(dset_rows(f, "acts") == 8);
    CHECK(dset_rows(f, "attn") == 32);
    CHECK(dset_rows(f, "samples") == 4);
    /* attn entropies of run 1 at step 50, layer 1 (its last 4 rows). */
    typedef struct {
        int32_t run, layer, head;
        int64_t step;
        double entropy;
    } AttnRow;
    AttnRow at[32];
    mt = H5Tcreate(H5T_COMPOUND, sizeof(AttnRow));
    H5Tinsert(mt, "run", HOFFSET(AttnRow, run), H5T_NATIVE_INT32);
    H5Tinsert(mt, "layer", HOFFSET(AttnRow, layer), H5T_NATIVE_INT32);
    H5Tinsert(mt, "head", HOFFSET(AttnRow, head), H5T_NATIVE_INT32);
    H5Tinsert(mt, "step", HOFFSET(AttnRow, step), H5T_NATIVE_INT64);
    H5Tinsert(mt, "entropy", HOFFSET(AttnRow, entropy), H5T_NATIVE_DOUBLE);
    d = H5Dopen2(f, "attn", H5P_DEFAULT);
    CHECK(d >= 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, at) >= 0);
    H5Dclose(d);
    H5Tclose(mt);
    for (int h = 0; h < 4; h++) {
        AttnRow *x = &at[28 + h];
        CHECK(x->run == 1 && x->step == 50 && x->layer == 1 && x->head == h &&
              x->entropy == f_entropy(1, h, 50));
    }
    /* Sample text (variable-length string member). */
    typedef struct {
        int32_t run;
        char *text;
        int8_t degenerate;
    } SampleRow;
    SampleRow sm[4];
    mt = H5Tcreate(H5T_COMPOUND, sizeof(SampleRow));
    vt = h5_utf8_type();
    tb = bool_type();
    H5Tinsert(mt, "run", HOFFSET(SampleRow, run), H5T_NATIVE_INT32);
    H5Tinsert(mt, "text", HOFFSET(SampleRow, text), vt);
    H5Tinsert(mt, "degenerate", HOFFSET(SampleRow, degenerate), tb);
    d = H5Dopen2(f, "samples", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    CHECK(d >= 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, sm) >= 0);
    CHECK(sm[0].run == 0 && !strcmp(sm[0].text, "run 0 greedy\nthe king") && sm[0].degenerate);
    CHECK(sm[3].run == 1 && !strcmp(sm[3].text, "run 1 sampled: \"quoted\" \xc3\xa9") &&
          !sm[3].degenerate);
    H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, sm);
    H5Sclose(sp);
    H5Dclose(d);
    H5Tclose(mt);
    H5Tclose(vt);
    H5Tclose(tb);
    H5Fclose(f);
}

/* ---------------- inspect ---------------- */

static int run_inspect(const char *out_file, int argc, char **argv) {
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    int fd = open(out_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
    int rc = inspect_main(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    return rc;
}

/* The file's text; "" when there is none. */
static char *slurp(const char *path) {
    char *text = test_read_file(path, NULL);
    return text ? text : calloc(1, 1);
}

static void check_inspect(const char *dir, const char *h5) {
    char cap[600], bogus[600];
    snprintf(cap, sizeof cap, "%s/inspect.out", dir);
    char *a1[] = {"inspect", (char *)h5};
    CHECK(run_inspect(cap, 2, a1) == 0);
    char *txt = slurp(cap);
    CHECK_MSG(strstr(txt, "baseline") && strstr(txt, "interrupted") == NULL &&
                  strstr(txt, "5 runs: 2 done, 1 running, 1 pending, 1 failed; sweep running"),
              "table output:\n%s", txt);
    fprintf(stderr, "--- ablate inspect output ---\n%s-----------------------------\n", txt);
    free(txt);

    char *a2[] = {"inspect", "--json", (char *)h5};
    CHECK(run_inspect(cap, 3, a2) == 0);
    txt = slurp(cap);
    int lines = 0;
    for (char *p = txt; *p; p++)
        lines += *p == '\n';
    CHECK(lines == N_RUNS);
    char *l3 = txt;
    for (int k = 0; k < 3 && l3; k++)
        l3 = strchr(l3, '\n') ? strchr(l3, '\n') + 1 : NULL;
    CHECK(l3 && strstr(l3, "\"name\":\"pending\"") && strstr(l3, "\"status\":\"pending\"") &&
          strstr(l3, "\"final_val_loss\":null"));
    CHECK(strstr(txt, "\"id\":\"abcdef0000000000\"") && strstr(txt, "\"seed\":100,") &&
          strstr(txt, "\"model.qk_norm\":false") && strstr(txt, "\"final_val_loss\":5.07"));
    if (test_failures) fprintf(stderr, "json output:\n%s", txt);
    free(txt);

    char *a3[] = {"inspect"};
    CHECK(run_inspect(cap, 1, a3) == 2);
    char *a4[] = {"inspect", "--bogus", (char *)h5};
    CHECK(run_inspect(cap, 3, a4) == 2);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nope.h5", dir);
    char *a5[] = {"inspect", missing};
    CHECK(run_inspect(cap, 2, a5) == 1);
    txt = slurp(cap);
    CHECK(strstr(txt, "No such file") != NULL);
    free(txt);
    snprintf(bogus, sizeof bogus, "%s/text.h5", dir);
    FILE *f = fopen(bogus, "w");
    fputs("not hdf5\n", f);
    fclose(f);
    char *a6[] = {"inspect", bogus};
    CHECK(run_inspect(cap, 2, a6) == 1);
    txt = slurp(cap);
    CHECK(strstr(txt, "not an HDF5 file") != NULL);
    free(txt);
    snprintf(bogus, sizeof bogus, "%s/other.h5", dir);
    hid_t h = H5Fcreate(bogus, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(h);
    char *a7[] = {"inspect", bogus};
    CHECK(run_inspect(cap, 2, a7) == 1);
    txt = slurp(cap);
    CHECK(strstr(txt, "not an ablate file") != NULL);
    free(txt);
}

static const char *g_dir; /* the program's temporary directory, set by main */

/* The running case's own directory, g_dir/CASE, made here. */
static void case_dir(char *dir, size_t n) {
    snprintf(dir, n, "%s/%s", g_dir, test_current);
    mkdir(dir, 0777);
}

/* The fixture of an unfinished sweep in this case's directory, its journal locked as by a
 * live rank 0 (until release_writer_lock). */
static int running_fixture(char *journal, char *out, size_t n) {
    char dir[600];
    case_dir(dir, sizeof dir);
    release_writer_lock(); /* a lock another case left would not be on this journal */
    int rc = make_fixture(dir, 0, journal, out, n);
    CHECK(rc == 0);
    return rc;
}

/* h5table's text cells (its chunks, h5table.c): 70,000 rows (a flush at 64K rows and more
 * at 8 MiB of text), cells of 0-299 bytes, some larger than a chunk, some invalid UTF-8 (made
 * valid as utf8_sanitize does), some set twice; each reads back as written. */
static size_t text_cell(char *out, size_t cap, long r) {
    size_t n = r % 997 == 0 ? 100000 + (size_t)r % 7 : (size_t)(r % 300);
    if (n >= cap) n = cap - 1;
    for (size_t k = 0; k < n; k++)
        out[k] = (char)('a' + (r + (long)k) % 26);
    if (r % 101 == 0 && n > 2) out[n / 2] = (char)0xff; /* not UTF-8 */
    out[n] = 0;
    return n;
}

TEST(text_cells) {
    enum { ROWS = 70000, CAP = 100100 };
    char dir[600], path[700];
    case_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/t.h5", dir);
    hid_t f = h5_create_file(path);
    CHECK(f >= 0);
    if (f < 0) return;
    const H5Col cols[] = {{"i", H5C_I32, 0, NULL, "row"}, {"s", H5C_VSTR, 0, NULL, "text"}};
    H5Table t;
    char err[ABL_ERR_MAX], *cell = malloc(CAP);
    CHECK(h5t_create(&t, f, "t", cols, 2, 1, "a test table", err) == 0);
    for (long r = 0; r < ROWS; r++) {
        uint8_t *row = h5t_row(&t, err);
        if (!row) break;
        h5t_set_i32(&t, row, 0, (int32_t)r);
        if (r % 13 == 0) CHECK(h5t_set_vstr(&t, row, 1, "first", 5) == 0); /* set twice */
        size_t n = text_cell(cell, CAP, r);
        CHECK(h5t_set_vstr(&t, row, 1, cell, n) == 0);
    }
    CHECK_MSG(h5t_close(&t, 0, err) == 0, "%s", err);
    H5Fclose(f);

    f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "t", H5P_DEFAULT), st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(char *));
    H5Tinsert(mt, "s", 0, st);
    char **got = calloc(ROWS, sizeof *got);
    CHECK(H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    long bad = 0;
    for (long r = 0; r < ROWS; r++) {
        size_t n = text_cell(cell, CAP, r);
        Buf want = {0};
        utf8_sanitize(&want, cell, n);
        bad += !got[r] || strcmp(got[r], want.p ? want.p : "") != 0;
        buf_free(&want);
    }
    CHECK_MSG(bad == 0, "%ld of %d text cells differ", bad, ROWS);
    hid_t space = H5Dget_space(d);
    H5Dvlen_reclaim(mt, space, H5P_DEFAULT, got);
    H5Sclose(space);
    free(got);
    free(cell);
    H5Tclose(mt);
    H5Tclose(st);
    H5Dclose(d);
    H5Fclose(f);
}

TEST(fixture) {
    char journal[700], out[700];
    if (running_fixture(journal, out, sizeof journal) != 0) return;
    char tmp[800];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", out, (long)getpid());
    CHECK(access(tmp, F_OK) != 0);
    check_fixture_file(out, 0);
    release_writer_lock();
}

TEST(inspect) {
    char dir[600], journal[700], out[700];
    if (running_fixture(journal, out, sizeof journal) != 0) return;
    case_dir(dir, sizeof dir);
    check_inspect(dir, out);
    release_writer_lock();
}

/* The same journal once no process holds its lock (the sweep was killed): `ablate view`
 * shows the sweep stopped and its run in progress interrupted, not running forever. */
TEST(writer_gone) {
    char sub[600], journal[700], out[700], err[ABL_ERR_MAX];
    if (running_fixture(journal, out, sizeof journal) != 0) return;
    case_dir(sub, sizeof sub);
    char stopped[800], copy[800];
    snprintf(stopped, sizeof stopped, "%s/stopped.h5", sub);
    snprintf(copy, sizeof copy, "%s/stopped.journal", sub); /* a copy nobody holds */
    struct stat jst;
    CHECK(stat(journal, &jst) == 0 &&
          journal_save_range(journal, 0, (uint64_t)jst.st_size, copy, err) == 0);
    CHECK(h5view_build(copy, stopped, err) == 0);
    hid_t sv = H5Fopen(stopped, H5F_ACC_RDONLY, H5P_DEFAULT);
    char st_attr[64] = "";
    str_attr(sv, "status", st_attr, sizeof st_attr);
    CHECK_MSG(!strcmp(st_attr, "stopped"), "status %s after the writer left", st_attr);
    long long jb = 0;
    hid_t ja = H5Aopen(sv, "journal_bytes", H5P_DEFAULT);
    CHECK(ja >= 0 && H5Aread(ja, H5T_NATIVE_LLONG, &jb) >= 0);
    CHECK(jb == (long long)jst.st_size);
    H5Aclose(ja);
    H5Fclose(sv);
    release_writer_lock();
}

/* Deterministic: the same journal gives the same bytes. A reader that has the old file
 * open keeps reading it while the view is replaced. */
TEST(deterministic) {
    char sub[600], journal[700], out[700], err[ABL_ERR_MAX];
    if (running_fixture(journal, out, sizeof journal) != 0) return;
    case_dir(sub, sizeof sub);
    hid_t reader = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(reader >= 0);
    char again[800];
    snprintf(again, sizeof again, "%s/again.h5", sub);
    H5ViewStats st;
    CHECK(h5view_build_stats(journal, again, &st, err) == 0);
    CHECK_MSG(same_file(out, again), "two builds of one journal differ");
    CHECK(st.runs == N_RUNS && st.runs_done == 2 && st.steps == 110 && st.skipped == 0 &&
          st.torn_bytes == 0);
    CHECK(h5view_build(journal, out, err) == 0);
    CHECK(dset_rows(reader, "steps") == 110 && dset_rows(reader, "runs") == N_RUNS);
    H5Fclose(reader);
    release_writer_lock();
}

/* Readers while the view is rebuilt over and over (another process): every open and read
 * succeeds and sees a whole file. */
TEST(readers_during_rebuilds) {
    char journal[700], out[700];
    if (running_fixture(journal, out, sizeof journal) != 0) return;
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        char e2[ABL_ERR_MAX];
        for (int k = 0; k < 30; k++)
            if (h5view_build(journal, out, e2) != 0) _exit(1);
        _exit(0);
    }
    int reads = 0, failed_reads = 0, status = 0;
    for (;;) {
        int done = waitpid(child, &status, WNOHANG) == child;
        hid_t rf = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (rf < 0 || dset_rows(rf, "steps") != 110 || dset_rows(rf, "runs") != N_RUNS)
            failed_reads++;
        if (rf >= 0) H5Fclose(rf);
        reads++;
        if (done) break;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_MSG(failed_reads == 0, "%d of %d reads during rebuilds failed", failed_reads, reads);
    fprintf(stderr, "%d reads during 30 rebuilds, %d failed\n", reads, failed_reads);
    release_writer_lock();
}

/* A torn journal tail is ignored. */
TEST(torn_tail) {
    char sub[600], journal[700], out[700], err[ABL_ERR_MAX];
    if (running_fixture(journal, out, sizeof journal) != 0) return;
    case_dir(sub, sizeof sub);
    char again[800];
    snprintf(again, sizeof again, "%s/again.h5", sub);
    H5ViewStats st;
    FILE *jf = fopen(journal, "ab");
    fwrite("ABLJ\x04\x00\x00\x00\x00\xff\x00\x00\x00garbage", 1, 20, jf);
    fclose(jf);
    CHECK(h5view_build_stats(journal, again, &st, err) == 0);
    CHECK(st.torn_bytes == 20 && st.steps == 110);
    release_writer_lock();
}

/* The same journal with SWEEP_END: complete, and the unfinished run is interrupted; and
 * without it nor a writer: stopped. */
TEST(complete_and_stopped) {
    char dir[600], sub[700], journal[800], out[800];
    case_dir(dir, sizeof dir);
    release_writer_lock();
    snprintf(sub, sizeof sub, "%s/complete", dir);
    mkdir(sub, 0777);
    CHECK(make_fixture(sub, 1, journal, out, sizeof journal) == 0);
    check_fixture_file(out, 1);
    snprintf(sub, sizeof sub, "%s/stopped", dir);
    mkdir(sub, 0777);
    CHECK(make_fixture(sub, 2, journal, out, sizeof journal) == 0);
    check_fixture_file(out, 2);
}

/* A journal with nothing in it yet (the writer has not flushed): an empty view. */
TEST(empty_journal) {
    char dir[600], err[ABL_ERR_MAX];
    case_dir(dir, sizeof dir);
    char ej[800], eo[800];
    snprintf(ej, sizeof ej, "%s/empty.journal", dir);
    snprintf(eo, sizeof eo, "%s/empty.h5", dir);
    H5ViewStats st;
    Journal *j = journal_create(ej, err);
    CHECK(j != NULL);
    write_header(j); /* buffered, not yet visible */
    CHECK(h5view_build_stats(ej, eo, &st, err) == 0 && st.runs == 0 && st.records == 0);
    CHECK(journal_flush(j) == 0);
    CHECK(h5view_build_stats(ej, eo, &st, err) == 0 && st.runs == 0 && st.records == 1);
    hid_t ef = H5Fopen(eo, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(ef >= 0 && dset_rows(ef, "runs") == 0 && dset_rows(ef, "steps") == 0);
    H5Fclose(ef);
    journal_close(j);
}

/* A replicate: sweep's REPLICATE and DECISION records become /contrasts,
 * /decisions and the replicate_* root attributes; a run journaled not_needed shows so. */
TEST(replicate_tables) {
    char dir[600], err[ABL_ERR_MAX], jp[800], out[800];
    case_dir(dir, sizeof dir);
    snprintf(jp, sizeof jp, "%s/rep.journal", dir);
    snprintf(out, sizeof out, "%s/rep.h5", dir);
    Journal *j = journal_create(jp, err);
    CHECK_MSG(j != NULL, "%s", err);
    if (!j) return;
    write_header(j);
    RunConfig cfg;
    run_config_default(&cfg);
    CHECK(journal_append_plan(j, 0, "00000000000000aa", "h2/seed4", 4, &cfg) == 0);
    EndEvent end;
    memset(&end, 0, sizeof end);
    end.status = RUN_NOT_NEEDED;
    end.final_val_loss = NAN;
    CHECK(journal_append_end(j, 0, 0, -1, "", &end) == 0);
    JournalReplicate r = {.alpha = 0.05,
                          .delta = 0.01,
                          .min = 3,
                          .max = 8,
                          .n_looks = 3,
                          .looks = {3, 5, 8},
                          .n_contrasts = 2,
                          .split = 1,
                          .rule_version = 2};
    const char *names[] = {"h2", "gelu"}, *bases[] = {"baseline", "baseline"};
    CHECK(journal_append_replicate(j, &r, names, bases, NULL) == 0);
    JournalDecision d0 = {.contrast = 1,
                          .look = 0,
                          .n = 3,
                          .diff = 0.5,
                          .lo = 0.25,
                          .hi = 0.75,
                          .level = 0.01,
                          .verdict = SEQ_WORSE};
    JournalDecision d1 = {.contrast = 0,
                          .look = 0,
                          .n = 3,
                          .diff = 0.0,
                          .lo = -0.5,
                          .hi = 0.5,
                          .level = 0.01,
                          .verdict = SEQ_OPEN};
    CHECK(journal_append_decision(j, &d0) == 0 && journal_append_decision(j, &d1) == 0);
    CHECK(journal_close(j) == 0);
    CHECK_MSG(h5view_build(jp, out, err) == 0, "%s", err);
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    if (f < 0) return;
    char s[64];
    str_attr(f, "replicate_looks", s, sizeof s);
    CHECK(!strcmp(s, "3,5,8"));
    str_attr(f, "replicate_split", s, sizeof s); /* the split the differences are on */
    CHECK_MSG(!strcmp(s, "test"), "replicate_split %s", s);
    double alpha = 0;
    hid_t a = H5Aopen(f, "replicate_alpha", H5P_DEFAULT);
    CHECK(a >= 0 && H5Aread(a, H5T_NATIVE_DOUBLE, &alpha) >= 0 && alpha == 0.05);
    if (a >= 0) H5Aclose(a);
    int32_t version = 0; /* the rule that took the looks: the journal's */
    a = H5Aopen(f, "replicate_rule_version", H5P_DEFAULT);
    CHECK(a >= 0 && H5Aread(a, H5T_NATIVE_INT32, &version) >= 0 && version == 2);
    if (a >= 0) H5Aclose(a);
    CHECK(dset_rows(f, "contrasts") == 2 && dset_rows(f, "decisions") == 2);
    typedef struct {
        int32_t contrast, n;
        char verdict[12];
    } Row;
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, 12);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(Row));
    H5Tinsert(t, "contrast", HOFFSET(Row, contrast), H5T_NATIVE_INT32);
    H5Tinsert(t, "n", HOFFSET(Row, n), H5T_NATIVE_INT32);
    H5Tinsert(t, "verdict", HOFFSET(Row, verdict), st);
    Row rows[2];
    memset(rows, 0, sizeof rows);
    hid_t d = H5Dopen2(f, "contrasts", H5P_DEFAULT);
    CHECK(d >= 0 && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    CHECK(rows[0].contrast == 0 && !strcmp(rows[0].verdict, "open") && rows[0].n == 3);
    CHECK(rows[1].contrast == 1 && !strcmp(rows[1].verdict, "worse"));
    if (d >= 0) H5Dclose(d);
    d = H5Dopen2(f, "decisions", H5P_DEFAULT);
    CHECK(d >= 0 && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    CHECK(rows[0].contrast == 1 && !strcmp(rows[0].verdict, "worse"));
    CHECK(rows[1].contrast == 0 && !strcmp(rows[1].verdict, "open"));
    if (d >= 0) H5Dclose(d);
    /* the run the contrasts settled without */
    typedef struct {
        char status[12];
    } RunRow;
    hid_t rt = H5Tcreate(H5T_COMPOUND, sizeof(RunRow));
    H5Tinsert(rt, "status", 0, st);
    RunRow rr = {""};
    d = H5Dopen2(f, "runs", H5P_DEFAULT);
    CHECK(d >= 0 && H5Dread(d, rt, H5S_ALL, H5S_ALL, H5P_DEFAULT, &rr) >= 0);
    CHECK_MSG(!strcmp(rr.status, "not_needed"), "%s", rr.status);
    if (d >= 0) H5Dclose(d);
    H5Tclose(rt);
    H5Tclose(t);
    H5Tclose(st);
    H5Fclose(f);
}

/* One process's journal of a joined replicate: sweep: its header, the plan, the rule, and
 * the decisions d[0..n). */
/* One joined process's journal at path: its header and the plan of run 0 (name, seed). */
static Journal *joined_journal(const char *path, const char *name, int seed) {
    char err[ABL_ERR_MAX];
    Journal *j = journal_create(path, err);
    CHECK_MSG(j != NULL, "%s", err);
    if (!j) return NULL;
    write_header(j);
    RunConfig cfg;
    run_config_default(&cfg);
    CHECK(journal_append_plan(j, 0, "00000000000000aa", name, seed, &cfg) == 0);
    return j;
}

static int joined_rep_journal(const char *path, const JournalDecision *d, int n) {
    Journal *j = joined_journal(path, "h2/seed4", 4);
    if (!j) return -1;
    JournalReplicate r = {.alpha = 0.05,
                          .delta = 0.01,
                          .min = 3,
                          .max = 8,
                          .n_looks = 2,
                          .looks = {3, 5},
                          .n_contrasts = 2};
    const char *names[] = {"h2", "gelu"}, *bases[] = {"baseline", "baseline"};
    CHECK(journal_append_replicate(j, &r, names, bases, NULL) == 0);
    for (int i = 0; i < n; i++)
        CHECK(journal_append_decision(j, &d[i]) == 0);
    return journal_close(j) == 0 ? 0 : -1;
}

/* A replicate: sweep under --join: every process journals the decisions it makes, all from the same
 * results, so the view of a joined sweep shows each (contrast, look) once; a budget's end
 * of the same look is a decision of its own; one that differs between journals keeps the
 * first and is counted (and warned about, once). */
TEST(replicate_joined_dedupe) {
    char dir[600], err[ABL_ERR_MAX], ja[800], jb[800], out[800];
    case_dir(dir, sizeof dir);
    snprintf(ja, sizeof ja, "%s/a.journal", dir);
    snprintf(jb, sizeof jb, "%s/b.journal", dir);
    snprintf(out, sizeof out, "%s/joined.h5", dir);
    JournalDecision open0 = {.contrast = 0,
                             .look = 0,
                             .n = 3,
                             .diff = 0.01,
                             .sd = 0.02,
                             .lo = -0.5,
                             .hi = 0.5,
                             .level = 0.01,
                             .verdict = SEQ_OPEN};
    JournalDecision worse = {.contrast = 1,
                             .look = 0,
                             .n = 3,
                             .diff = 0.5,
                             .sd = 0.1,
                             .lo = 0.25,
                             .hi = 0.75,
                             .level = 0.01,
                             .verdict = SEQ_WORSE};
    JournalDecision better = worse; /* the same look decided from other results */
    better.diff = -0.5, better.lo = -0.75, better.hi = -0.25, better.verdict = SEQ_BETTER;
    JournalDecision budget = open0; /* the budget ended it at the same look */
    budget.verdict = SEQ_UNRESOLVED;
    snprintf(budget.note, sizeof budget.note, "budget");
    JournalDecision a[] = {open0, worse}, b[] = {worse, open0, budget};
    if (joined_rep_journal(ja, a, 2) != 0 || joined_rep_journal(jb, b, 3) != 0) return;
    const char *journals[] = {ja, jb};
    H5ViewStats st;
    CHECK_MSG(h5view_build_many(journals, 2, -1, 0, dir, out, &st, err) == 0, "%s", err);
    CHECK(st.decision_conflicts == 0);
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    if (f < 0) return;
    CHECK_MSG(dset_rows(f, "decisions") == 3, "%lld rows", dset_rows(f, "decisions"));
    H5Fclose(f);
    /* a conflicting decision: the first journal's is kept */
    JournalDecision c[] = {better, open0};
    unlink(jb);
    if (joined_rep_journal(jb, c, 2) != 0) return;
    CHECK_MSG(h5view_build_many(journals, 2, -1, 0, dir, out, &st, err) == 0, "%s", err);
    CHECK(st.decision_conflicts == 1);
    f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0);
    if (f < 0) return;
    CHECK(dset_rows(f, "decisions") == 2);
    typedef struct {
        int32_t contrast;
        char verdict[12];
    } Row;
    hid_t s12 = H5Tcopy(H5T_C_S1);
    H5Tset_size(s12, 12);
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(Row));
    H5Tinsert(t, "contrast", HOFFSET(Row, contrast), H5T_NATIVE_INT32);
    H5Tinsert(t, "verdict", HOFFSET(Row, verdict), s12);
    Row rows[2];
    memset(rows, 0, sizeof rows);
    hid_t d = H5Dopen2(f, "decisions", H5P_DEFAULT);
    CHECK(d >= 0 && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0);
    CHECK(rows[1].contrast == 1 && !strcmp(rows[1].verdict, "worse"));
    if (d >= 0) H5Dclose(d);
    H5Tclose(t);
    H5Tclose(s12);
    H5Fclose(f);
}

/* A run stopped at a checkpoint (RUN_END with status interrupted) is "interrupted", and
 * "running" again once its next attempt begins. */
TEST(interrupted_run) {
    char dir[600], err[ABL_ERR_MAX];
    case_dir(dir, sizeof dir);
    char ij[800], io[800];
    snprintf(ij, sizeof ij, "%s/interrupted.journal", dir);
    snprintf(io, sizeof io, "%s/interrupted.h5", dir);
    Journal *j = journal_create(ij, err);
    CHECK(j != NULL);
    write_header(j);
    static RunConfig cfg;
    run_config_default(&cfg);
    journal_append_plan(j, 0, "00000000000000aa", "r0", 1, &cfg);
    journal_append_begin(j, 0, 1, 1, "node-a", 0);
    static Stream si;
    si = (Stream){.j = j, .run = 0, .attempt = 1, .batch = 4};
    for (long step = 1; step <= 9; step++)
        emit_step(&si, 0, step, 1, 0);
    stream_flush(&si);
    journal_append_checkpoint(j, 0, 1, 9, "ckpt/r0.ckpt");
    EndEvent ie = make_end(0, RUN_INTERRUPTED, 9, 1);
    journal_append_end(j, 0, 1, 1, "node-a", &ie);
    journal_flush(j);
    CHECK(h5view_build(ij, io, err) == 0);
    char rstatus[16] = "";
    hid_t sf = H5Fopen(io, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t smt = H5Tcreate(H5T_COMPOUND, sizeof rstatus), s16 = strt(sizeof rstatus);
    H5Tinsert(smt, "status", 0, s16);
    hid_t sd = H5Dopen2(sf, "runs", H5P_DEFAULT);
    CHECK(H5Dread(sd, smt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rstatus) >= 0 &&
          !strcmp(rstatus, "interrupted"));
    H5Dclose(sd);
    H5Fclose(sf);
    write_header(j); /* resume: a new session */
    journal_append_begin(j, 0, 2, 1, "node-a", 9);
    journal_flush(j);
    CHECK(h5view_build(ij, io, err) == 0); /* j holds the lock: the sweep is alive */
    journal_close(j);
    sf = H5Fopen(io, H5F_ACC_RDONLY, H5P_DEFAULT);
    sd = H5Dopen2(sf, "runs", H5P_DEFAULT);
    CHECK(H5Dread(sd, smt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rstatus) >= 0 &&
          !strcmp(rstatus, "running"));
    CHECK(dset_rows(sf, "steps") == 0); /* the new attempt has not re-emitted its events yet */
    H5Dclose(sd);
    H5Fclose(sf);
    H5Tclose(smt);
    H5Tclose(s16);
}

/* /runs' status column of OUT.h5's only run */
static void only_status(const char *out, char status[16]) {
    status[0] = '\0';
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t mt = H5Tcreate(H5T_COMPOUND, 16), s16 = strt(16);
    H5Tinsert(mt, "status", 0, s16);
    hid_t d = f >= 0 ? H5Dopen2(f, "runs", H5P_DEFAULT) : -1;
    CHECK(d >= 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, status) >= 0);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    H5Tclose(mt);
    H5Tclose(s16);
}

/* One process's journal of run 0: begun and ended with status (or still running). */
static int joined_end_journal(const char *path, RunStatus status, int ended) {
    Journal *j = joined_journal(path, "r0", 1);
    if (!j) return -1;
    journal_append_begin(j, 0, 1, 1, "node-a", 0);
    EndEvent e = make_end(0, status, 3, 1);
    if (ended) journal_append_end(j, 0, 1, 1, "node-a", &e);
    journal_flush(j);
    return journal_close(j) == 0 ? 0 : -1;
}

/* A joined run that failed and was trained again by a process that joined later (joined.c):
 * the view shows the retry, done, over the failure, in either journal order (before, the
 * first journal's failure won: both had "ended"); a retry whose process is gone before its
 * end (its journal unlocked), or one interrupted, leaves the failure shown. */
TEST(joined_retry_shown) {
    char dir[600], err[ABL_ERR_MAX], ja[800], jb[800], out[800], status[16];
    case_dir(dir, sizeof dir);
    snprintf(ja, sizeof ja, "%s/a.journal", dir);
    snprintf(jb, sizeof jb, "%s/b.journal", dir);
    snprintf(out, sizeof out, "%s/retried.h5", dir);
    H5ViewStats st;
    struct {
        RunStatus second;
        int ended;
        const char *want;
    } cases[] = {{RUN_DONE, 1, "done"}, {RUN_DONE, 0, "failed"}, {RUN_INTERRUPTED, 1, "failed"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        unlink(ja), unlink(jb);
        if (joined_end_journal(ja, RUN_FAILED, 1) != 0 ||
            joined_end_journal(jb, cases[c].second, cases[c].ended) != 0)
            return;
        for (int order = 0; order < 2; order++) {
            const char *journals[] = {order ? jb : ja, order ? ja : jb};
            CHECK_MSG(h5view_build_many(journals, 2, -1, 0, dir, out, &st, err) == 0, "%s", err);
            only_status(out, status);
            CHECK_MSG(!strcmp(status, cases[c].want), "case %zu order %d: %s, want %s", c, order,
                      status, cases[c].want);
        }
    }
}

/* Errors: a missing journal; an unwritable destination leaves no .tmp behind. */
TEST(build_errors) {
    char dir[600], journal[700], out[700], tmp[800], err[ABL_ERR_MAX];
    if (running_fixture(journal, out, sizeof journal) != 0) return;
    release_writer_lock();
    case_dir(dir, sizeof dir);
    snprintf(tmp, sizeof tmp, "%s/none/journal", dir);
    CHECK(h5view_build(tmp, out, err) != 0 && strstr(err, "No such file"));
    snprintf(tmp, sizeof tmp, "%s/no/such/dir/out.h5", dir);
    CHECK(h5view_build(journal, tmp, err) != 0);
}

TEST(long_sweep) {
    char dir[600];
    case_dir(dir, sizeof dir);
    H5ViewStats st;
    long rss0 = max_rss_kb();
    CHECK(long_sweep(dir, 200, 2000, &st, 1, 0) == 0);
    CHECK(st.runs == 200 && st.runs_done == 200);
    CHECK(st.steps == 200 * 2000LL && st.evals == 200 * 20LL && st.acts == 200 * 4 * 4LL &&
          st.attn == 200 * 64LL && st.skipped == 0);
    char out[600];
    snprintf(out, sizeof out, "%s/long.h5", dir);
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0 && dset_rows(f, "steps") == 400000 && dset_rows(f, "runs") == 200);
    /* The last steps row: run 199, step 2000. */
    hid_t d = H5Dopen2(f, "steps", H5P_DEFAULT);
    hid_t sp = H5Dget_space(d);
    hsize_t start = 399999, count = 1;
    H5Sselect_hyperslab(sp, H5S_SELECT_SET, &start, NULL, &count, NULL);
    hid_t ms = H5Screate_simple(1, &count, NULL);
    StepRow x;
    hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof x);
    H5Tinsert(mt, "run", HOFFSET(StepRow, run), H5T_NATIVE_INT32);
    H5Tinsert(mt, "step", HOFFSET(StepRow, step), H5T_NATIVE_INT64);
    H5Tinsert(mt, "loss", HOFFSET(StepRow, loss), H5T_NATIVE_DOUBLE);
    CHECK(H5Dread(d, mt, ms, sp, H5P_DEFAULT, &x) >= 0 && x.run == 199 && x.step == 2000 &&
          x.loss == f_loss(199, 2000, 1));
    H5Tclose(mt);
    H5Sclose(ms);
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
    /* Bounded memory: the build's peak RSS grows by far less than the data (22 MB of step
     * rows alone); row buffers are at most 8 MiB per table. */
    long grown = max_rss_kb() - rss0;
#ifdef __SANITIZE_ADDRESS__
    /* ASan's quarantine keeps freed blocks resident (116 MB here when this case runs alone):
     * the bound is a Release property, checked there */
    (void)grown;
#else
    CHECK_MSG(grown < 96 * 1024, "RSS grew by %ld MB", grown / 1024);
#endif
}

/* Rows of /name read through its virtual dataset: per run (runs 0..7), and how many had
 * the fill value's run = -1. -1 if unreadable. */
static long long live_rows(const char *out, const char *name, long per_run[8], long *fill) {
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, name, H5P_DEFAULT) : -1;
    long long n = d >= 0 ? dset_rows(f, name) : -1;
    int32_t *run = n >= 0 ? malloc(sizeof *run * (size_t)(n + 1)) : NULL;
    hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(int32_t));
    H5Tinsert(mt, "run", 0, H5T_NATIVE_INT32);
    if (run && n > 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, run) < 0) n = -1;
    memset(per_run, 0, 8 * sizeof *per_run);
    *fill = 0;
    for (long long i = 0; run && i < n; i++) {
        if (run[i] == -1)
            ++*fill;
        else if (run[i] >= 0 && run[i] < 8)
            per_run[run[i]]++;
    }
    H5Tclose(mt);
    free(run);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    return n;
}

/* The rows of table a live view's segment file says it holds (its rows_TABLE), or -1. */
static long long segment_rows(const char *path, const char *table) {
    if (access(path, F_OK) != 0) return -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    char an[64];
    snprintf(an, sizeof an, "rows_%s", table);
    long long n = -1;
    hid_t a = f >= 0 && H5Aexists(f, an) > 0 ? H5Aopen(f, an, H5P_DEFAULT) : -1;
    if (a >= 0 && H5Aread(a, H5T_NATIVE_LLONG, &n) < 0) n = -1;
    if (a >= 0) H5Aclose(a);
    if (f >= 0) H5Fclose(f);
    return n;
}

/* A segment deleted, truncated or replaced while the sweep runs: the writer says so
 * (lost_segments), writes the rows it held again, and the next OUT.h5 reads whole; the
 * OUT.h5 that mapped it reads fill rows (run = -1), never zeros. */
TEST(live_lost_segment) {
    char sub[600], journal[700], out[700], err[ABL_ERR_MAX] = "";
    if (running_fixture(journal, out, sizeof journal) != 0) return;
    case_dir(sub, sizeof sub);
    H5Live *lv = h5live_open(journal, out, err);
    CHECK(lv != NULL);
    if (!lv) return;
    long size = test_file_size(journal);
    H5ViewStats st;
    long per_run[8], fill;
    for (int k = 1; k <= 5; k++)
        CHECK_MSG(h5live_update(lv, (uint64_t)(size * k / 8), &st, err) == 0, "%s", err);
    CHECK(st.lost_segments == 0);
    long long before = live_rows(out, "steps", per_run, &fill);
    CHECK(before > 0 && fill == 0);
    /* what a reader of this OUT.h5 gets once its first segment is gone: fill rows */
    char segs[2][800];
    int nseg = 0;
    for (int k = 0; k < 64 && nseg < 2; k++) {
        snprintf(segs[nseg], sizeof segs[nseg], "%s/out.h5.d/view/seg-%ld-%d.h5", sub,
                 (long)getpid(), k);
        if (segment_rows(segs[nseg], "steps") > 0) nseg++; /* not one of /runs alone */
    }
    CHECK_MSG(nseg == 2, "%d segments", nseg);
    if (nseg < 2) return;
    CHECK(unlink(segs[0]) == 0);
    CHECK(truncate(segs[1], 100) == 0);
    long long n = live_rows(out, "steps", per_run, &fill);
    CHECK_MSG(n == before && fill > 0, "%lld rows, %ld with run = -1", n, fill);
    CHECK(h5live_update(lv, (uint64_t)(size * 6 / 8), &st, err) == 0);
    CHECK_MSG(st.lost_segments == 2, "the writer found %ld lost segments", st.lost_segments);
    CHECK(h5live_update(lv, (uint64_t)size, &st, err) == 0);
    CHECK(st.lost_segments == 0); /* said once */
    n = live_rows(out, "steps", per_run, &fill);
    CHECK_MSG(n == 110 && fill == 0, "%lld rows after the rewrite, %ld fill", n, fill);
    CHECK(per_run[0] == 50 && per_run[1] == 50 && per_run[2] == 7 && per_run[4] == 3);
    h5live_close(lv);
    release_writer_lock();
}

static int same_runs(const char *a, const char *b, char *what, size_t wn);

/* The path of the first segment a live view's /view_blocks maps table onto ("" if none). */
static void mapped_segment(const char *out, const char *table, char *seg, size_t n) {
    typedef struct {
        char table[8];
        char *file;
    } Row;
    seg[0] = 0;
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "view_blocks", H5P_DEFAULT) : -1;
    hid_t sp = d >= 0 ? H5Dget_space(d) : -1;
    hssize_t rows = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : 0;
    Row *r = rows > 0 ? calloc((size_t)rows, sizeof *r) : NULL;
    hid_t s8 = H5Tcopy(H5T_C_S1), vs = H5Tcopy(H5T_C_S1), mt = H5Tcreate(H5T_COMPOUND, sizeof(Row));
    H5Tset_size(s8, 8);
    H5Tset_size(vs, H5T_VARIABLE);
    H5Tset_cset(vs, H5T_CSET_UTF8);
    H5Tinsert(mt, "table", HOFFSET(Row, table), s8);
    H5Tinsert(mt, "file", HOFFSET(Row, file), vs);
    if (r && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, r) >= 0) {
        for (hssize_t i = 0; i < rows && !seg[0]; i++)
            if (!strncmp(r[i].table, table, 8) && r[i].file && strcmp(r[i].file, ".") != 0) {
                const char *slash = strrchr(out, '/');
                snprintf(seg, n, "%.*s%s", slash ? (int)(slash - out + 1) : 0, out, r[i].file);
            }
        H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, r);
    }
    free(r);
    H5Tclose(mt);
    H5Tclose(vs);
    H5Tclose(s8);
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
}

/* What view_check says of a view file: its return, its lines in text. */
static int checked_view(const char *path, char *text, size_t n) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS); /* as `ablate inspect` opens it */
    H5Pset_file_locking(fapl, 0, 1);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    FILE *m = fmemopen(text, n, "w");
    int rc = f >= 0 && m ? view_check(f, path, "OUT", m) : -2;
    if (m) fclose(m);
    if (f >= 0) H5Fclose(f);
    return rc;
}

/* A segment holding pages of /runs lost while the sweep runs: the OUT.h5 that
 * maps it reads those rows as fill (index -1) and view_check says which; the writer says it
 * is lost and writes the pages again, and the next OUT.h5 reads as a full build's. */
TEST(live_lost_runs_segment) {
    char sub[600], journal[700], out[700], full[800], err[ABL_ERR_MAX] = "", what[200];
    char text[4096] = "";
    if (running_fixture(journal, out, sizeof journal) != 0) return;
    case_dir(sub, sizeof sub);
    snprintf(full, sizeof full, "%s/full.h5", sub);
    H5Live *lv = h5live_open(journal, out, err);
    CHECK(lv != NULL);
    if (!lv) return;
    h5live_set_runs_page(lv, 1);
    long size = test_file_size(journal);
    H5ViewStats st;
    for (int k = 1; k <= 3; k++)
        CHECK_MSG(h5live_update(lv, (uint64_t)(size * k / 4), &st, err) == 0, "%s", err);
    CHECK_MSG(checked_view(out, text, sizeof text) == 0, "before: %s", text);
    char seg[800] = "";
    mapped_segment(out, "runs", seg, sizeof seg);
    CHECK_MSG(seg[0] && segment_rows(seg, "runs") > 0, "no segment holds rows of /runs");
    if (!seg[0]) return;
    CHECK(unlink(seg) == 0);
    int rc = checked_view(out, text, sizeof text);
    CHECK_MSG(rc >= 1 && strstr(text, "OUT/runs: ") && strstr(text, "rows unavailable") &&
                  strstr(text, "cannot be opened"),
              "view_check of the OUT.h5 mapping it: %d, %s", rc, text);
    CHECK(h5live_update(lv, (uint64_t)(size * 3 / 4), &st, err) == 0);
    CHECK_MSG(st.lost_segments == 1, "the writer found %ld lost segments", st.lost_segments);
    CHECK_MSG(checked_view(out, text, sizeof text) == 0, "after: %s", text);
    H5ViewStats fs;
    CHECK(h5view_build_upto(journal, full, (uint64_t)(size * 3 / 4), &fs, err) == 0);
    CHECK_MSG(same_runs(out, full, what, sizeof what), "/runs after the rewrite: %s", what);
    h5live_close(lv);
    release_writer_lock();
}

/* A directory for a case of many live updates: on /dev/shm when it can be (each update
 * fsyncs its files: on a tmpfs the case takes seconds, not a minute), else the case's own.
 * 1 if on /dev/shm (the case removes it when it passed). */
static int live_case_dir(char *dir, size_t n) {
    char shm[] = "/dev/shm/ablate-test-XXXXXX";
    if (access("/dev/shm", W_OK) == 0 && mkdtemp(shm)) {
        snprintf(dir, n, "%s", shm);
        return 1;
    }
    case_dir(dir, n);
    return 0;
}

/* The rows of /steps of a view file (run, step, loss), sorted by run then step; their count
 * in *n. NULL if unreadable. */
static StepRow *sorted_steps(const char *path, long long *n) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    *n = f >= 0 ? dset_rows(f, "steps") : -1;
    StepRow *r = *n >= 0 ? calloc((size_t)*n + 1, sizeof *r) : NULL;
    hid_t d = r ? H5Dopen2(f, "steps", H5P_DEFAULT) : -1;
    hid_t mt = H5Tcreate(H5T_COMPOUND, sizeof(StepRow));
    H5Tinsert(mt, "run", HOFFSET(StepRow, run), H5T_NATIVE_INT32);
    H5Tinsert(mt, "step", HOFFSET(StepRow, step), H5T_NATIVE_INT64);
    H5Tinsert(mt, "loss", HOFFSET(StepRow, loss), H5T_NATIVE_DOUBLE);
    if (d < 0 || (*n > 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, r) < 0)) {
        free(r);
        r = NULL;
    }
    H5Tclose(mt);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    return r;
}

typedef struct {
    int in_flight, checked, worst_over;
    long long last_mappings;
    int pages; /* of /runs */
} ManyCheck;

/* Mappings of the live view against the bound: per metric table with rows (steps and
 * samples here) 2 log2(ended runs) + 4 for the packed segments, plus one block per run in
 * progress; /runs: 2 log2(pages) + 4 ranges of pages. */
static void many_progress(void *ctx, long ended, const H5ViewStats *st, double seconds,
                          const char *out) {
    (void)seconds;
    ManyCheck *c = ctx;
    long long m = vds_mappings(out);
    long long bound = 2 * (2 * (long long)ceil(log2((double)ended + 1)) + 4) + c->in_flight +
                      2 * (long long)ceil(log2((double)c->pages + 1)) + 4;
    CHECK_MSG(m >= 0 && m == st->mappings, "mappings: %lld in the file, %lld in the stats", m,
              st->mappings);
    /* /view_blocks: a row per mapping, not per run */
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    long long nb = f >= 0 ? dset_rows(f, "view_blocks") : -1;
    if (f >= 0) H5Fclose(f);
    CHECK_MSG(nb == m, "/view_blocks: %lld rows for %lld mappings", nb, m);
    if (m > bound && c->worst_over == 0)
        fprintf(stderr, "  %ld runs ended: %lld mappings, bound %lld\n", ended, m, bound);
    if (m > bound) c->worst_over++;
    c->checked++;
    c->last_mappings = m;
}

/* A live view over many finished runs maps O(log runs) blocks (finished
 * runs are packed into geometrically merged segments), keeps every run's rows contiguous,
 * and holds the same rows as a full build. */
TEST(live_mappings_bounded) {
    char dir[600], journal[800], out[800], full[800], err[ABL_ERR_MAX] = "";
    int on_shm = live_case_dir(dir, sizeof dir);
    release_writer_lock();
    enum { RUNS = 300, PER_UPDATE = 10, IN_FLIGHT = 8 };
    ManyCheck c = {IN_FLIGHT, 0, 0, 0, 1};
    CHECK(live_many_runs(dir, RUNS, PER_UPDATE, IN_FLIGHT, many_progress, &c) == 0);
    CHECK_MSG(c.checked == RUNS / PER_UPDATE + 1 && c.worst_over == 0,
              "%d updates, %d over the bound (last: %lld mappings)", c.checked, c.worst_over,
              c.last_mappings);
    snprintf(out, sizeof out, "%s/many.h5", dir);
    snprintf(journal, sizeof journal, "%s/many.h5.d/journal", dir);
    snprintf(full, sizeof full, "%s/full.h5", dir);
    long long n = 0, nf = 0;
    StepRow *live = sorted_steps(out, &n);
    CHECK(live != NULL && n == 2 * RUNS);
    /* grouped by run: once a run's rows end, they do not come back */
    uint8_t *seen = calloc(RUNS, 1);
    for (long long i = 0; live && seen && i < n; i++) {
        int r = live[i].run;
        CHECK_MSG(r >= 0 && r < RUNS, "row %lld: run %d", i, r);
        if (r < 0 || r >= RUNS) break;
        if (i > 0 && live[i - 1].run != r) {
            CHECK_MSG(!seen[r], "run %d's rows are split (row %lld)", r, i);
            if (seen[r]) break;
        }
        seen[r] = 1;
    }
    free(seen);
    CHECK(h5view_build(journal, full, err) == 0);
    StepRow *fb = sorted_steps(full, &nf);
    CHECK(fb != NULL && nf == n);
    /* the same rows: the live view's in its order, the full build's in plan order */
    long long same = 0;
    for (long long i = 0; live && fb && i < n && i < nf; i++)
        for (long long k = 0; k < 2 && 2 * live[i].run + k < nf; k++) {
            const StepRow *x = &fb[2 * live[i].run + k];
            same += x->run == live[i].run && x->step == live[i].step && x->loss == live[i].loss;
        }
    CHECK_MSG(same == n, "%lld of %lld live rows match the full build", same, n);
    free(live);
    free(fb);
    if (on_shm && test_failures == 0) fs_remove_tree(dir);
}

/* 1 if /runs of the two view files holds the same columns and rows (text by content);
 * else 0 with the first difference in what. */
static int same_runs(const char *a, const char *b, char *what, size_t wn) {
    const char *path[2] = {a, b};
    hid_t f[2] = {-1, -1}, d[2] = {-1, -1}, mt[2] = {-1, -1}, sp[2] = {-1, -1};
    uint8_t *buf[2] = {NULL, NULL};
    long long n[2] = {-1, -1};
    int same = 0;
    snprintf(what, wn, "cannot read /runs");
    for (int k = 0; k < 2; k++) {
        if ((f[k] = H5Fopen(path[k], H5F_ACC_RDONLY, H5P_DEFAULT)) < 0 ||
            (d[k] = H5Dopen2(f[k], "runs", H5P_DEFAULT)) < 0)
            goto done;
        hid_t ft = H5Dget_type(d[k]);
        mt[k] = H5Tget_native_type(ft, H5T_DIR_ASCEND);
        H5Tclose(ft);
        sp[k] = H5Dget_space(d[k]);
        n[k] = H5Sget_simple_extent_npoints(sp[k]);
        buf[k] = calloc((size_t)n[k] + 1, H5Tget_size(mt[k]));
        if (!buf[k] || H5Dread(d[k], mt[k], H5S_ALL, H5S_ALL, H5P_DEFAULT, buf[k]) < 0) goto done;
    }
    if (n[0] != n[1] || H5Tequal(mt[0], mt[1]) <= 0) {
        snprintf(what, wn, "%lld rows against %lld, or other columns", n[0], n[1]);
        goto done;
    }
    size_t size = H5Tget_size(mt[0]);
    int nm = H5Tget_nmembers(mt[0]);
    same = 1;
    for (long long r = 0; r < n[0] && same; r++)
        for (int m = 0; m < nm && same; m++) {
            hid_t t = H5Tget_member_type(mt[0], (unsigned)m);
            size_t off = H5Tget_member_offset(mt[0], (unsigned)m), ms = H5Tget_size(t);
            const uint8_t *x = buf[0] + r * size + off, *y = buf[1] + r * size + off;
            if (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) > 0) {
                const char *p, *q;
                memcpy(&p, x, sizeof p);
                memcpy(&q, y, sizeof q);
                same = (!p && !q) || (p && q && !strcmp(p, q));
            } else {
                same = !memcmp(x, y, ms);
            }
            if (!same) {
                char *name = H5Tget_member_name(mt[0], (unsigned)m);
                snprintf(what, wn, "row %lld, column %s", r, name);
                H5free_memory(name);
            }
            H5Tclose(t);
        }
done:
    for (int k = 0; k < 2; k++) {
        if (buf[k] && sp[k] >= 0) H5Dvlen_reclaim(mt[k], sp[k], H5P_DEFAULT, buf[k]);
        free(buf[k]);
        if (sp[k] >= 0) H5Sclose(sp[k]);
        if (mt[k] >= 0) H5Tclose(mt[k]);
        if (d[k] >= 0) H5Dclose(d[k]);
        if (f[k] >= 0) H5Fclose(f[k]);
    }
    return same;
}

typedef struct {
    int runs;
    long prev_ended; /* runs ended at the previous update */
    int updates, over;
    long long last_reads;
    int changed; /* runs that can begin or end between two updates */
} ReadCheck;

/* The first update reads every PLAN record; a later one re-reads those of the runs that
 * began or ended since the previous one (at most `changed`), and of no other: not those of
 * runs ended before, nor of runs not begun yet. */
static void plan_reads(void *ctx, long ended, const H5ViewStats *st, double seconds,
                       const char *out) {
    (void)seconds;
    (void)out;
    ReadCheck *c = ctx;
    long long most = c->updates == 0 ? c->runs : c->changed;
    if (st->plan_reads > most && c->over++ == 0)
        fprintf(stderr, "  update %d: %lld PLAN records read, at most %lld runs began or ended\n",
                c->updates, st->plan_reads, most);
    c->prev_ended = ended;
    c->updates++;
    c->last_reads = st->plan_reads;
}

/* The live view keeps the /runs rows of ended runs and of runs not begun, so an
 * update re-reads only the runs that began or ended, and one with nothing new reads no PLAN
 * record; its /runs is the full build's. */
TEST(live_runs_cached) {
    char dir[600], journal[800], out[800], full[800], err[ABL_ERR_MAX] = "", what[200];
    int on_shm = live_case_dir(dir, sizeof dir);
    release_writer_lock();
    enum { RUNS = 60, PER_UPDATE = 10, IN_FLIGHT = 4 };
    /* between two updates PER_UPDATE runs end and as many begin; IN_FLIGHT are part-way */
    ReadCheck c = {RUNS, 0, 0, 0, -1, 2 * PER_UPDATE + IN_FLIGHT};
    CHECK(live_many_runs(dir, RUNS, PER_UPDATE, IN_FLIGHT, plan_reads, &c) == 0);
    CHECK_MSG(c.updates == RUNS / PER_UPDATE + 1 && c.over == 0 && c.last_reads == 0,
              "%d updates, %d reading PLAN records of runs that neither began nor ended, %lld "
              "read by the last (nothing new)",
              c.updates, c.over, c.last_reads);
    snprintf(out, sizeof out, "%s/many.h5", dir);
    snprintf(journal, sizeof journal, "%s/many.h5.d/journal", dir);
    snprintf(full, sizeof full, "%s/full.h5", dir);
    CHECK(h5view_build(journal, full, err) == 0);
    CHECK_MSG(same_runs(out, full, what, sizeof what), "/runs of the live view: %s", what);
    if (on_shm && test_failures == 0) fs_remove_tree(dir);
}

typedef struct {
    int runs, page, in_flight, per_update;
    int updates, over_maps, differ, carries, miscounted, prev_unreadable, files_off;
    long long first_rows, later_rows, last_maps;
    long most_files;
    char journal[800], full[800], what[200], prev[800], segdir[800];
} PagedCheck;

/* Files in a directory, or -1. */
static long files_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* After every update: /runs equals a full build's of the same journal, and maps at most
 * 2 log2(pages) + 4 ranges plus the pages in flight. What the updates write is checked at
 * the end. */
static void paged_progress(void *ctx, long ended, const H5ViewStats *st, double seconds,
                           const char *out) {
    (void)seconds;
    PagedCheck *c = ctx;
    char err[ABL_ERR_MAX] = "", text[2048] = "";
    /* segments no OUT.h5 maps go (grace 0 here), but never one the previous OUT.h5 maps: a
     * reader that opened it just before this update still reads it whole */
    if (c->updates > 0 && checked_view(c->prev, text, sizeof text) != 0 &&
        c->prev_unreadable++ == 0)
        fprintf(stderr, "  update %d: the previous OUT.h5: %s", c->updates, text);
    unlink(c->prev);
    CHECK(link(out, c->prev) == 0);
    long files = files_in(c->segdir);
    if (files != st->segments && c->files_off++ == 0)
        fprintf(stderr, "  update %d: %ld segment files, the stats say %ld\n", c->updates, files,
                st->segments);
    c->most_files = files > c->most_files ? files : c->most_files;
    /* every run counted once, whether its row was put or its page mapped as it was */
    if ((st->runs != c->runs || st->runs_done != ended) && c->miscounted++ == 0)
        fprintf(stderr, "  update %d: stats say %ld runs, %ld done; %d planned, %ld ended\n",
                c->updates, st->runs, st->runs_done, c->runs, ended);
    CHECK(h5view_build(c->journal, c->full, err) == 0);
    if (!same_runs(out, c->full, c->what, sizeof c->what) && c->differ++ == 0)
        fprintf(stderr, "  update %d: /runs differs from the full build's: %s\n", c->updates,
                c->what);
    int pages = (c->runs + c->page - 1) / c->page;
    hid_t f = H5Fopen(out, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "runs", H5P_DEFAULT) : -1;
    hid_t p = d >= 0 ? H5Dget_create_plist(d) : -1;
    size_t maps = 0;
    if (p >= 0 && H5Pget_layout(p) == H5D_VIRTUAL) H5Pget_virtual_count(p, &maps);
    if (p >= 0) H5Pclose(p);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    long long bound = 2 * (long long)ceil(log2((double)pages + 1)) + 4 + c->in_flight / c->page + 2;
    if ((long long)maps > bound && c->over_maps++ == 0)
        fprintf(stderr, "  update %d: /runs maps %zu ranges, bound %lld\n", c->updates, maps,
                bound);
    /* the pages touched since the last update: written while they change and once more */
    long long touched = 2 * ((2 * c->per_update + c->in_flight) / c->page + 3) * c->page;
    if (c->updates == 0)
        c->first_rows = st->runs_rows;
    else
        c->later_rows += st->runs_rows;
    if (c->updates > 0 && st->runs_rows > touched) c->carries++; /* a merge's carry */
    c->last_maps = (long long)maps;
    c->updates++;
}

/* The live view's /runs is paged: an update writes the pages that changed (and
 * those a merge absorbs), not every planned run's row, maps O(log pages) ranges, and reads
 * as a full build's /runs at every update. */
TEST(live_runs_paged) {
    char dir[600];
    int on_shm = live_case_dir(dir, sizeof dir);
    release_writer_lock();
    PagedCheck c = {.runs = 400, .page = 8, .in_flight = 6, .per_update = 10};
    snprintf(c.journal, sizeof c.journal, "%s/many.h5.d/journal", dir);
    snprintf(c.full, sizeof c.full, "%s/full.h5", dir);
    snprintf(c.prev, sizeof c.prev, "%s/prev.h5", dir);
    snprintf(c.segdir, sizeof c.segdir, "%s/many.h5.d/view", dir);
    live_runs_page = c.page;
    live_segment_grace = 0;
    CHECK(live_many_runs(dir, c.runs, c.per_update, c.in_flight, paged_progress, &c) == 0);
    live_runs_page = 0;
    live_segment_grace = -1;
    /* what the last two OUT.h5 map, at most: 2 x (the mapping bound, then a segment each) */
    double lgp = ceil(log2(c.runs / c.page + 1.0));
    CHECK_MSG(c.prev_unreadable == 0 && c.files_off == 0 && c.most_files <= 2 * (4 * lgp + 12),
              "segments: the previous OUT.h5 unreadable after %d updates, the file count off "
              "the stats at %d, at most %ld files (bound %.0f)",
              c.prev_unreadable, c.files_off, c.most_files, 2 * (4 * lgp + 12));
    CHECK_MSG(c.updates == c.runs / c.per_update + 1 && c.differ == 0 && c.over_maps == 0 &&
                  c.miscounted == 0,
              "%d updates: %d with /runs unlike the full build's, %d over the mapping bound, %d "
              "miscounting the runs",
              c.updates, c.differ, c.over_maps, c.miscounted);
    /* the first writes every row once; the others each row O(log pages) times in all (as a
     * binary counter carries), and few of them more than the pages they touched */
    double lg = ceil(log2(c.runs / c.page + 1.0));
    CHECK_MSG(c.first_rows == c.runs && c.later_rows <= (long long)((2 + lg) * c.runs) &&
                  c.carries <= lg,
              "rows of /runs written: %lld by the first update, %lld by the %d others (bound "
              "%.0f); %d wrote more than the pages they touched (bound %.0f)",
              c.first_rows, c.later_rows, c.updates - 1, (2 + lg) * c.runs, c.carries, lg);
    CHECK_MSG(c.last_maps <= 2 * (long long)lg + 2, "at the end /runs maps %lld ranges",
              c.last_maps);
    if (on_shm && test_failures == 0) fs_remove_tree(dir);
}

/* --live-bench: a line per update where the runs ended passed 1.25x the last line's (and
 * the last two updates: the last with nothing new), then the summary against the target. */
typedef struct {
    long printed;
    double total_s;
    long updates;
    double *t;       /* each update's time */
    long long *maps; /* and mappings */
    long cap;
} LiveBench;

static void live_bench(void *ctx, long ended, const H5ViewStats *st, double seconds,
                       const char *out) {
    LiveBench *b = ctx;
    b->total_s += seconds;
    if (b->updates < b->cap) {
        b->t[b->updates] = seconds;
        b->maps[b->updates] = st->mappings;
    }
    b->updates++;
    int last = ended == st->runs_done && ended == st->runs; /* every planned run ended */
    if (!last && ended < b->printed * 5 / 4 + 1) return;
    b->printed = ended;
    struct stat fs;
    long long bytes = stat(out, &fs) == 0 ? (long long)fs.st_size : -1;
    printf("LIVE_VIEW ended=%ld update_s=%.4f mappings=%lld out_h5_bytes=%lld plan_reads=%lld "
           "runs_rows=%lld segments=%ld updates=%ld total_update_s=%.2f\n",
           ended, seconds, st->mappings, bytes, st->plan_reads, st->runs_rows, st->segments,
           b->updates, b->total_s);
    fflush(stdout);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(const double *v, long n) {
    double *c = malloc(sizeof *c * (size_t)(n + 1));
    if (!c || n <= 0) return free(c), NAN;
    memcpy(c, v, sizeof *c * (size_t)n);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = c[n / 2];
    free(c);
    return m;
}

/* The target (sweeps of 10^5 runs): an update's cost and the mappings grow at most logarithmically
 * with the runs ended. Updates 2 to 10% (the first writes everything) against the last 10%
 * (but the one with nothing new): a cost linear in the runs ended would make the late
 * median ~10-20x the early one, a logarithmic one ~1.3x; PASS at most 2x. The mappings
 * against 4 log2(runs) + 8 (two tables of packed segments, /runs's ranges). */
static void live_bench_summary(const LiveBench *b, int runs) {
    long n = b->updates < b->cap ? b->updates : b->cap;
    long k = n / 10 > 1 ? n / 10 : 1;
    double early = median_of(b->t + 1, k), late = median_of(b->t + n - 1 - k, k);
    long long most = 0;
    for (long i = 0; i < n; i++)
        most = b->maps[i] > most ? b->maps[i] : most;
    long long bound = 4 * (long long)ceil(log2(runs + 1.0)) + 8;
    double growth = late / early;
    printf("LIVE_VIEW_TARGET runs=%d updates=%ld early_median_s=%.4f late_median_s=%.4f "
           "growth=%.2f target=2 mappings_max=%lld mappings_bound=%lld %s\n",
           runs, n, early, late, growth, most, bound,
           growth <= 2 && most <= bound ? "PASS" : "FAIL");
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--fixture")) {
        char journal[700], out[700];
        int rc = make_fixture(argv[2], 0, journal, out, sizeof journal);
        release_writer_lock();
        return rc == 0 ? 0 : 1;
    }
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--live-fixture")) {
        if (argc == 5) live_runs_page = atoi(argv[4]); /* rows of /runs per page */
        H5ViewStats st;
        int rc = make_live_fixture(argv[2], atoi(argv[3]), &st);
        release_writer_lock();
        return rc == 0 ? 0 : 1;
    }
    if (argc == 5 && !strcmp(argv[1], "--bench")) {
        H5ViewStats st;
        return long_sweep(argv[4], atoi(argv[2]), atol(argv[3]), &st, 1, 1) == 0 ? 0 : 1;
    }
    if ((argc == 6 || argc == 7) && !strcmp(argv[1], "--live-bench")) {
        LiveBench b = {0, 0, 0, NULL, NULL, 0};
        if (argc == 7) live_segment_grace = atof(argv[6]); /* seconds; default 60 */
        int runs = atoi(argv[2]), per = atoi(argv[3]);
        b.cap = runs / (per > 0 ? per : 1) + 4;
        b.t = calloc((size_t)b.cap, sizeof *b.t);
        b.maps = calloc((size_t)b.cap, sizeof *b.maps);
        printf("LIVE_VIEW runs=%s per_update=%s in_flight=%s\n", argv[2], argv[3], argv[4]);
        int rc =
            b.t && b.maps && live_many_runs(argv[5], runs, per, atoi(argv[4]), live_bench, &b) == 0;
        if (rc) live_bench_summary(&b, runs);
        free(b.t);
        free(b.maps);
        return rc ? 0 : 1;
    }
    if (!(g_dir = test_tmpdir())) {
        fprintf(stderr, "cannot make a temporary directory\n");
        return 1;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return test_main(argc, argv, "test_h5view");
}
