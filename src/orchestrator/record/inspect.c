#include "util/log.h"
#include "inspect.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/json.h"
#include <unistd.h>

#include "util/json.h"
#include "h5view_internal.h"
#include "view_check.h"
#include "journal.h"
#include "worker/calibrate.h"

#define BLOCK_ROWS 4096

static void usage(FILE *f) {
    fprintf(f, "usage: ablate inspect OUT.h5 [--json]\n"
               "  Lists the runs of a sweep's HDF5 file (safe while the sweep is running).\n"
               "  --json   one JSON object per run per line (every column of /runs)\n");
}

/* ---------------- small HDF5 helpers ---------------- */

/* A string attribute of the root (fixed or variable length); "" if absent. */
static void read_str_attr(hid_t obj, const char *name, char *out, size_t n) {
    out[0] = 0;
    if (H5Aexists(obj, name) <= 0) return;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return;
    hid_t ft = H5Aget_type(a);
    if (H5Tget_class(ft) == H5T_STRING) {
        if (H5Tis_variable_str(ft) > 0) {
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(ft));
            char *s = NULL;
            if (H5Aread(a, mt, &s) >= 0 && s) {
                snprintf(out, n, "%s", s);
                H5free_memory(s);
            }
            H5Tclose(mt);
        } else {
            size_t sz = H5Tget_size(ft);
            char *buf = calloc(1, sz + 1);
            if (buf && H5Aread(a, ft, buf) >= 0) snprintf(out, n, "%s", buf);
            free(buf);
        }
    }
    H5Tclose(ft);
    H5Aclose(a);
}

static int read_int_attr(hid_t obj, const char *name, long long *v) {
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t ft = H5Aget_type(a);
    int rc = -1;
    if (H5Tget_class(ft) == H5T_INTEGER && H5Aread(a, H5T_NATIVE_LLONG, v) >= 0) rc = 0;
    H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

/* ---------------- JSON ---------------- */

/* The shared JSON writer (src/util/json.h): fixed strings end at their first NUL. */
static void json_str(FILE *f, const char *s, size_t n) {
    Buf b = {0};
    json_string(&b, s, strnlen(s, n));
    if (b.len) fwrite(b.p, 1, b.len, f);
    buf_free(&b);
}

static void json_num(FILE *f, double d) {
    json_print_number(f, d);
}

typedef enum { J_INT, J_UINT, J_FLOAT, J_STR, J_VSTR, J_ENUM, J_OTHER } JKind;

typedef struct {
    char *name;
    JKind kind;
    size_t off, size;
    hid_t mtype; /* member's memory type (enum: for name lookup) */
} JCol;

static int dump_json(hid_t dset, hid_t ftype, hsize_t nrows, FILE *out, char *err) {
    int n = H5Tget_nmembers(ftype);
    if (n <= 0) {
        snprintf(err, 256, "/runs is not a table");
        return -1;
    }
    JCol *cols = calloc((size_t)n, sizeof *cols);
    hid_t mt = -1;
    size_t row = 0;
    int rc = -1;
    uint8_t *buf = NULL;
    if (!cols) goto done;
    for (int i = 0; i < n; i++) {
        JCol *c = &cols[i];
        c->mtype = -1;
        c->name = H5Tget_member_name(ftype, (unsigned)i);
        hid_t t = H5Tget_member_type(ftype, (unsigned)i);
        H5T_class_t cls = H5Tget_class(t);
        if (cls == H5T_INTEGER) {
            int sgn = H5Tget_sign(t) == H5T_SGN_2;
            c->kind = sgn ? J_INT : J_UINT;
            c->mtype = H5Tcopy(sgn ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64);
        } else if (cls == H5T_FLOAT) {
            c->kind = J_FLOAT;
            c->mtype = H5Tcopy(H5T_NATIVE_DOUBLE);
        } else if (cls == H5T_STRING && H5Tis_variable_str(t) > 0) {
            c->kind = J_VSTR;
            c->mtype = H5Tcopy(H5T_C_S1);
            H5Tset_size(c->mtype, H5T_VARIABLE);
            H5Tset_cset(c->mtype, H5Tget_cset(t));
        } else if (cls == H5T_STRING) {
            c->kind = J_STR;
            c->mtype = H5Tcopy(H5T_C_S1);
            H5Tset_size(c->mtype, H5Tget_size(t) + 1);
            H5Tset_strpad(c->mtype, H5T_STR_NULLTERM);
            H5Tset_cset(c->mtype, H5Tget_cset(t));
        } else if (cls == H5T_ENUM) {
            c->kind = J_ENUM;
            c->mtype = H5Tget_native_type(t, H5T_DIR_ASCEND);
        } else {
            c->kind = J_OTHER;
        }
        H5Tclose(t);
        if (c->mtype >= 0) {
            c->off = row;
            c->size = H5Tget_size(c->mtype);
            row += (c->size + 7) & ~(size_t)7;
        }
    }
    mt = H5Tcreate(H5T_COMPOUND, row ? row : 8);
    for (int i = 0; i < n; i++)
        if (cols[i].mtype >= 0 && H5Tinsert(mt, cols[i].name, cols[i].off, cols[i].mtype) < 0)
            goto done;
    buf = malloc(row * BLOCK_ROWS);
    if (!buf) goto done;
    for (hsize_t start = 0; start < nrows; start += BLOCK_ROWS) {
        hsize_t count = nrows - start < BLOCK_ROWS ? nrows - start : BLOCK_ROWS;
        hid_t fs = H5Dget_space(dset);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
        hid_t ms = H5Screate_simple(1, &count, NULL);
        herr_t r = H5Dread(dset, mt, ms, fs, H5P_DEFAULT, buf);
        if (r < 0) {
            H5Sclose(ms);
            H5Sclose(fs);
            snprintf(err, 256, "cannot read /runs");
            goto done;
        }
        for (hsize_t k = 0; k < count; k++) {
            const uint8_t *p = buf + k * row;
            fputc('{', out);
            int first = 1;
            for (int i = 0; i < n; i++) {
                JCol *c = &cols[i];
                if (c->kind == J_OTHER) continue;
                if (!first) fputc(',', out);
                first = 0;
                json_str(out, c->name, strlen(c->name));
                fputc(':', out);
                const uint8_t *v = p + c->off;
                switch (c->kind) {
                case J_INT: {
                    int64_t x;
                    memcpy(&x, v, 8);
                    fprintf(out, "%lld", (long long)x);
                    break;
                }
                case J_UINT: {
                    uint64_t x;
                    memcpy(&x, v, 8);
                    fprintf(out, "%llu", (unsigned long long)x);
                    break;
                }
                case J_FLOAT: {
                    double x;
                    memcpy(&x, v, 8);
                    json_num(out, x);
                    break;
                }
                case J_STR:
                    json_str(out, (const char *)v, c->size);
                    break;
                case J_VSTR: {
                    const char *s;
                    memcpy(&s, v, sizeof s);
                    if (s)
                        json_str(out, s, strlen(s));
                    else
                        fputs("null", out);
                    break;
                }
                case J_ENUM: {
                    char name[64];
                    if (H5Tenum_nameof(c->mtype, v, name, sizeof name) < 0)
                        fputs("null", out);
                    else if (!strcmp(name, "TRUE") || !strcmp(name, "FALSE"))
                        fputs(name[0] == 'T' ? "true" : "false", out);
                    else
                        json_str(out, name, strlen(name));
                    break;
                }
                default:
                    break;
                }
            }
            fputs("}\n", out);
        }
        H5Dvlen_reclaim(mt, ms, H5P_DEFAULT, buf);
        H5Sclose(ms);
        H5Sclose(fs);
    }
    rc = 0;
done:
    if (rc != 0 && !err[0]) snprintf(err, 256, "cannot read /runs");
    free(buf);
    if (mt >= 0) H5Tclose(mt);
    if (cols) {
        for (int i = 0; i < n; i++) {
            if (cols[i].mtype >= 0) H5Tclose(cols[i].mtype);
            H5free_memory(cols[i].name);
        }
    }
    free(cols);
    return rc;
}

/* ---------------- the table ---------------- */

typedef struct {
    int32_t index;
    char id[RUN_ID_CHARS];
    char name[128]; /* what the table shows (a version-1 file's fixed-length name is read here) */
    char *vname;    /* the name as /runs holds it, a variable-length string */
    uint64_t seed;
    char status[STATUS_LEN];
    int64_t steps;
    double final_val_loss;
    int64_t params;
    double tokens_per_s;
} RunRow;

static hid_t vstr_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    return t;
}

static hid_t str_type(size_t n) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, n);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    return t;
}

/* A column of /runs read into a struct member. Its type and width are the writer's
 * (h5v_runs_col), so that a column the writer changes is read as it is written. */
typedef struct {
    const char *col;
    size_t off, size;             /* the member */
    size_t fixed_off, fixed_size; /* where a version-1 file's fixed-length text goes, for a
                                     column now variable-length (size 0: nowhere) */
} RunsCol;
#define MEMBER(T, m) offsetof(T, m), sizeof(((T *)0)->m)

/* The memory type of a column as declared (a fixed-length string cut to max bytes); -1 for
 * a type no reader here needs (bool). */
static hid_t col_mem_type(const H5Col *c, size_t max) {
    const hid_t num[] = {[H5C_I32] = H5T_NATIVE_INT32,
                         [H5C_I64] = H5T_NATIVE_INT64,
                         [H5C_U64] = H5T_NATIVE_UINT64,
                         [H5C_F64] = H5T_NATIVE_DOUBLE};
    if (c->type == H5C_STR) return str_type(c->len < max ? c->len : max);
    if (c->type == H5C_VSTR) return vstr_type();
    return (size_t)c->type < sizeof num / sizeof *num ? H5Tcopy(num[c->type]) : -1;
}

/* The compound memory type, size bytes, of the columns cols[0..n) of /runs that ftype (its
 * file type) has. A column the file lacks, or holds as a string of the other form than
 * declared (but a version-1 fixed-length text, see RunsCol), is left out: its member keeps
 * what the caller put there. */
static hid_t runs_mem_type(hid_t ftype, size_t size, const RunsCol *cols, int n) {
    hid_t mt = H5Tcreate(H5T_COMPOUND, size);
    for (int i = 0; i < n; i++) {
        const RunsCol *w = &cols[i];
        H5Col c;
        int idx = H5Tget_member_index(ftype, w->col);
        if (idx < 0 || h5v_runs_col(w->col, &c) != 0) continue;
        hid_t ft = H5Tget_member_type(ftype, (unsigned)idx);
        int str = H5Tget_class(ft) == H5T_STRING, vl = str && H5Tis_variable_str(ft) > 0;
        size_t off = w->off, max = w->size;
        if (str && !vl && c.type == H5C_VSTR && w->fixed_size) {
            c = (H5Col){c.name, H5C_STR, w->fixed_size, NULL, NULL};
            off = w->fixed_off;
            max = w->fixed_size;
        }
        hid_t t = col_mem_type(&c, max);
        /* a string in the form the file holds it only; HDF5 converts strings of one
         * character set */
        if (t >= 0 && str && vl != (H5Tis_variable_str(t) > 0)) {
            H5Tclose(t);
            t = -1;
        } else if (t >= 0 && str) {
            H5Tset_cset(t, H5Tget_cset(ft));
        }
        if (t >= 0) {
            H5Tinsert(mt, w->col, off, t);
            H5Tclose(t);
        }
        H5Tclose(ft);
    }
    return mt;
}

/* A replicate: sweep's contrasts (/contrasts): each one open with its n and
 * interval, or its verdict. Nothing for other files. */
static void print_contrasts(hid_t file, FILE *out) {
    if (H5Lexists(file, "contrasts", H5P_DEFAULT) <= 0) return;
    typedef struct {
        char *config, *baseline;
        char verdict[12];
        int32_t n;
        double diff, lo, hi;
    } Row;
    hid_t d = H5Dopen2(file, "contrasts", H5P_DEFAULT);
    if (d < 0) return;
    hid_t sp = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    hid_t vs = vstr_type(), s12 = str_type(12), t = H5Tcreate(H5T_COMPOUND, sizeof(Row));
    H5Tinsert(t, "configuration", HOFFSET(Row, config), vs);
    H5Tinsert(t, "baseline", HOFFSET(Row, baseline), vs);
    H5Tinsert(t, "verdict", HOFFSET(Row, verdict), s12);
    H5Tinsert(t, "n", HOFFSET(Row, n), H5T_NATIVE_INT32);
    H5Tinsert(t, "difference", HOFFSET(Row, diff), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "lo", HOFFSET(Row, lo), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "hi", HOFFSET(Row, hi), H5T_NATIVE_DOUBLE);
    Row *rows = n > 0 ? calloc((size_t)n, sizeof *rows) : NULL;
    if (rows && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0) {
        char alpha[32] = "?";
        hid_t a = H5Aopen(file, "replicate_alpha", H5P_DEFAULT);
        double al;
        if (a >= 0 && H5Aread(a, H5T_NATIVE_DOUBLE, &al) >= 0)
            snprintf(alpha, sizeof alpha, "%g", al);
        if (a >= 0) H5Aclose(a);
        fprintf(out,
                "contrasts (sequential: intervals valid over every look and contrast, "
                "family-wise alpha %s):\n",
                alpha);
        for (hssize_t i = 0; i < n; i++) {
            const Row *r = &rows[i];
            char c[512], b[512];
            text_escape(r->config ? r->config : "", c, sizeof c);
            text_escape(r->baseline ? r->baseline : "", b, sizeof b);
            if (r->n <= 0)
                fprintf(out, "  %s vs %s: %s, not looked at yet\n", c, b, r->verdict);
            else
                fprintf(out, "  %s vs %s: %s at n=%d, difference %+.4f [%+.4f, %+.4f]\n", c, b,
                        r->verdict, r->n, r->diff, r->lo, r->hi);
        }
        H5Dvlen_reclaim(t, sp, H5P_DEFAULT, rows);
    }
    free(rows);
    H5Tclose(t);
    H5Tclose(vs);
    H5Tclose(s12);
    H5Sclose(sp);
    H5Dclose(d);
}

/* Calibrated fixed time (/calibration, train.calibrate): per configuration its trials'
 * median, spread and load, and the step budget its runs got (/runs calibrated_steps).
 * Nothing for other files. */
static void print_calibration(hid_t file, FILE *out) {
    if (H5Lexists(file, "calibration", H5P_DEFAULT) <= 0) return;
    typedef struct {
        char *config;
        char group[RUN_ID_CHARS];
        double tps, load1;
    } Row;
    typedef struct {
        char group[RUN_ID_CHARS];
        int64_t steps;
    } RunR;
    static const RunsCol run_cols[] = {{"group", MEMBER(RunR, group), 0, 0},
                                       {"calibrated_steps", MEMBER(RunR, steps), 0, 0}};
    const int n_run_cols = (int)(sizeof run_cols / sizeof *run_cols);
    hid_t d = H5Dopen2(file, "calibration", H5P_DEFAULT);
    hid_t rd = H5Dopen2(file, "runs", H5P_DEFAULT);
    if (d < 0 || rd < 0) {
        if (d >= 0) H5Dclose(d);
        if (rd >= 0) H5Dclose(rd);
        return;
    }
    hid_t sp = H5Dget_space(d), rsp = H5Dget_space(rd);
    hssize_t n = H5Sget_simple_extent_npoints(sp), nr = H5Sget_simple_extent_npoints(rsp);
    hid_t vs = vstr_type(), s17 = str_type(RUN_ID_CHARS), t = H5Tcreate(H5T_COMPOUND, sizeof(Row)),
          rft = H5Dget_type(rd), rt = runs_mem_type(rft, sizeof(RunR), run_cols, n_run_cols);
    H5Tinsert(t, "configuration", HOFFSET(Row, config), vs);
    H5Tinsert(t, "group", HOFFSET(Row, group), s17);
    H5Tinsert(t, "tokens_per_s", HOFFSET(Row, tps), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "load1", HOFFSET(Row, load1), H5T_NATIVE_DOUBLE);
    Row *rows = n > 0 ? calloc((size_t)n, sizeof *rows) : NULL;
    RunR *runs = nr > 0 ? calloc((size_t)nr, sizeof *runs) : NULL;
    double *x = n > 0 ? calloc((size_t)n, sizeof *x) : NULL;
    if (rows && runs && x && H5Tget_nmembers(rt) == n_run_cols && /* both, or nothing shown */
        H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) >= 0 &&
        H5Dread(rd, rt, H5S_ALL, H5S_ALL, H5P_DEFAULT, runs) >= 0) {
        fprintf(out, "calibration (train.calibrate: each configuration's timing trials; its "
                     "runs train round(median x train.seconds / tokens per step) steps):\n");
        for (hssize_t i = 0; i < n; i++) {
            int first = 1, k = 0;
            double lmin = INFINITY, lmax = -INFINITY;
            for (hssize_t j = 0; j < n && first; j++)
                first = j >= i || strcmp(rows[j].group, rows[i].group) != 0;
            if (!first) continue;
            for (hssize_t j = i; j < n; j++)
                if (!strcmp(rows[j].group, rows[i].group)) {
                    x[k++] = rows[j].tps;
                    if (rows[j].load1 < lmin) lmin = rows[j].load1;
                    if (rows[j].load1 > lmax) lmax = rows[j].load1;
                }
            double med, lo, hi;
            calib_summary(x, k, &med, &lo, &hi);
            long long steps = 0;
            for (hssize_t j = 0; j < nr && !steps; j++)
                if (!strcmp(runs[j].group, rows[i].group)) steps = (long long)runs[j].steps;
            char c[512];
            text_escape(rows[i].config ? rows[i].config : "", c, sizeof c);
            fprintf(out,
                    "  %s: %d trial(s), median %.1f tokens/s (min %.1f, max %.1f), load %.2f-%.2f",
                    c, k, med, lo, hi, lmin, lmax);
            if (steps > 0)
                fprintf(out, " -> %lld steps\n", steps);
            else
                fprintf(out, ", not all trials timed yet\n");
        }
        H5Dvlen_reclaim(t, sp, H5P_DEFAULT, rows);
    }
    free(rows);
    free(runs);
    free(x);
    H5Tclose(t);
    H5Tclose(rt);
    H5Tclose(rft);
    H5Tclose(vs);
    H5Tclose(s17);
    H5Sclose(sp);
    H5Sclose(rsp);
    H5Dclose(d);
    H5Dclose(rd);
}

/* The columns of /runs the table shows. */
static const RunsCol run_row_cols[] = {
    {"index", MEMBER(RunRow, index), 0, 0},
    {"id", MEMBER(RunRow, id), 0, 0},
    {"name", MEMBER(RunRow, vname), MEMBER(RunRow, name)},
    {"seed", MEMBER(RunRow, seed), 0, 0},
    {"status", MEMBER(RunRow, status), 0, 0},
    {"steps", MEMBER(RunRow, steps), 0, 0},
    {"final_val_loss", MEMBER(RunRow, final_val_loss), 0, 0},
    {"params", MEMBER(RunRow, params), 0, 0},
    {"tokens_per_s", MEMBER(RunRow, tokens_per_s), 0, 0},
};
#define N_RUN_ROW_COLS ((int)(sizeof run_row_cols / sizeof *run_row_cols))

/* The view records how many journal bytes it shows; more in the journal now means the view
 * is older (a sweep between rebuilds, or one that stopped abnormally). */
static void stale_note(hid_t file, const char *path, FILE *out) {
    long long shown;
    char journal[4096];
    struct stat st;
    snprintf(journal, sizeof journal, "%s.d/journal", path);
    if (read_int_attr(file, "journal_bytes", &shown) != 0 || stat(journal, &st) != 0) return;
    if ((long long)st.st_size > shown)
        fprintf(out,
                "note: %s is older than its journal (%lld of %lld bytes shown); "
                "`ablate view %s` rebuilds it now\n",
                path, shown, (long long)st.st_size, path);
}

/* Is a process writing the sweep of path: one holding the lock of its journal, or of
 * one of a joined sweep's journals (procs/NAME/journal)? When it cannot tell (no flock
 * on the file system, no journal here), it answers yes: the view's word stands. */
static int sweep_alive(const char *path) {
    char p[4096];
    snprintf(p, sizeof p, "%s.d/journal", path);
    int held = journal_lock_held(p);
    if (held >= 0) return held;
    snprintf(p, sizeof p, "%s.d/procs", path);
    DIR *d = opendir(p);
    if (!d) return 1;
    int any = 0, alive = 0;
    struct dirent *e;
    while (!alive && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s.d/procs/%s/journal", path, e->d_name);
        held = journal_lock_held(p);
        if (held < 0) continue;
        any = 1;
        alive = held;
    }
    closedir(d);
    return !any || alive;
}

static void fmt_num(char *buf, size_t n, double v, const char *fmt) {
    if (isnan(v))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, fmt, v);
}

static int print_table(hid_t dset, hid_t ftype, hsize_t nrows, hid_t file, const char *path,
                       FILE *out, char *err) {
    RunRow *rows = calloc(nrows ? nrows : 1, sizeof *rows);
    if (!rows) {
        snprintf(err, 256, "out of memory");
        return -1;
    }
    for (hsize_t i = 0; i < nrows; i++) {
        rows[i].index = (int32_t)i;
        rows[i].final_val_loss = NAN;
        rows[i].tokens_per_s = NAN;
        rows[i].params = -1;
    }
    hid_t mt = runs_mem_type(ftype, sizeof(RunRow), run_row_cols, N_RUN_ROW_COLS);
    if (nrows && H5Dread(dset, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) < 0) {
        H5Tclose(mt);
        free(rows);
        snprintf(err, 256, "cannot read /runs");
        return -1;
    }
    for (hsize_t i = 0; i < nrows; i++)
        if (rows[i].vname) {
            snprintf(rows[i].name, sizeof rows[i].name, "%s", rows[i].vname);
            H5free_memory(rows[i].vname);
        }
    H5Tclose(mt);

    enum { NC = 9 };
    static const char *const head[NC] = {"#",     "name",     "id",     "seed", "status",
                                         "steps", "val_loss", "params", "tok/s"};
    static const int right[NC] = {1, 0, 0, 1, 0, 1, 1, 1, 1};
    int w[NC];
    for (int c = 0; c < NC; c++)
        w[c] = (int)strlen(head[c]);
    char cell[NC][160];
    /* Two passes: widths, then output. */
    long counts[8] = {0};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            for (int c = 0; c < NC; c++)
                fprintf(out, right[c] ? "%*s%s" : "%-*s%s", w[c], head[c],
                        c + 1 < NC ? "  " : "\n");
        }
        for (hsize_t i = 0; i < nrows; i++) {
            RunRow *r = &rows[i];
            snprintf(cell[0], sizeof cell[0], "%d", r->index);
            text_escape(r->name, cell[1], sizeof cell[1]);
            text_escape(r->id, cell[2], sizeof cell[2]);
            snprintf(cell[3], sizeof cell[3], "%llu", (unsigned long long)r->seed);
            text_escape(r->status, cell[4], sizeof cell[4]);
            snprintf(cell[5], sizeof cell[5], "%lld", (long long)r->steps);
            fmt_num(cell[6], sizeof cell[6], r->final_val_loss, "%.4f");
            if (r->params >= 0)
                snprintf(cell[7], sizeof cell[7], "%lld", (long long)r->params);
            else
                snprintf(cell[7], sizeof cell[7], "-");
            fmt_num(cell[8], sizeof cell[8], r->tokens_per_s, "%.0f");
            if (pass == 0) {
                for (int c = 0; c < NC; c++)
                    if ((int)strlen(cell[c]) > w[c]) w[c] = (int)strlen(cell[c]);
                for (int s = 0; s < 7; s++)
                    if (!strcmp(r->status, h5view_status_names[s])) counts[s]++;
            } else {
                for (int c = 0; c < NC; c++)
                    fprintf(out, right[c] ? "%*s%s" : "%-*s%s", w[c], cell[c],
                            c + 1 < NC ? "  " : "\n");
            }
        }
    }
    free(rows);

    char status[64], start[64], end[64];
    read_str_attr(file, "status", status, sizeof status);
    read_str_attr(file, "start_time", start, sizeof start);
    read_str_attr(file, "end_time", end, sizeof end);
    char shown[3][64 * 6]; /* attributes anyone may have written: escaped like the cells */
    text_escape(status, shown[0], sizeof shown[0]);
    text_escape(start, shown[1], sizeof shown[1]);
    text_escape(end, shown[2], sizeof shown[2]);
    fprintf(out, "%s: %llu runs:", path, (unsigned long long)nrows);
    static const int order[7] = {3, 1, 0, 2, 4, 5, 6}; /* done running pending interrupted ... */
    int any = 0;
    for (int k = 0; k < 7; k++) {
        int s = order[k];
        if (!counts[s] && s != 3) continue;
        fprintf(out, "%s %ld %s", any ? "," : "", counts[s], h5view_status_names[s]);
        any = 1;
    }
    int orphan = !strcmp(status, "running") && !sweep_alive(path);
    if (orphan)
        fprintf(out, "; sweep not running (the view says running, but no process holds its "
                     "journal)");
    else
        fprintf(out, "; sweep %s", status[0] ? shown[0] : "?");
    if (start[0]) fprintf(out, ", started %s", shown[1]);
    if (end[0]) fprintf(out, ", ended %s", shown[2]);
    fputc('\n', out);
    stale_note(file, path, out);
    if (orphan)
        fprintf(out,
                "note: no process is writing %s (its sweep ended without updating it: killed, "
                "or stopped by SIGTERM); `ablate view %s` rebuilds it from the journal, "
                "--resume continues the sweep\n",
                path, path);
    print_contrasts(file, out);
    print_calibration(file, out);
    return 0;
}

int inspect_main(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            log_cmd("unknown option %s", argv[i]);
            usage(stderr);
            return 2;
        } else if (path) {
            log_cmd("one file at a time (got %s and %s)", path, argv[i]);
            usage(stderr);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        log_cmd("no file given");
        usage(stderr);
        return 2;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        char journal[4096];
        snprintf(journal, sizeof journal, "%s.d/journal", path);
        log_cmd("cannot open %s: %s", path, strerror(e));
        if (e == ENOENT && access(journal, R_OK) == 0)
            log_cmd("the sweep's journal %s exists; the file is written "
                    "at the sweep's first view rebuild",
                    journal);
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        log_cmd("%s is a directory, not an HDF5 file", path);
        return 1;
    }
    /* Never take (or wait for) file locks: the sweep may be replacing the file. */
    setenv("HDF5_USE_FILE_LOCKING", "FALSE", 0);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1);
#endif
    int rc = 1;
    char err[256] = "";
    hid_t file = -1, dset = -1, ftype = -1, space = -1;
#if H5_VERSION_GE(1, 12, 0)
    htri_t is = H5Fis_accessible(path, fapl);
#else
    htri_t is = H5Fis_hdf5(path);
#endif
    if (is <= 0) {
        log_cmd("%s is not an HDF5 file (or is unreadable)", path);
        goto done;
    }
    file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (file < 0) {
        log_cmd("cannot open %s as HDF5", path);
        goto done;
    }
    long long version;
    if (read_int_attr(file, "ablate_schema_version", &version) != 0) {
        log_cmd("%s is not an ablate file (no ablate_schema_version "
                "attribute)",
                path);
        goto done;
    }
    if (version > ABLATE_SCHEMA_VERSION) {
        log_cmd("%s has schema version %lld; this ablate reads up to %d", path, version,
                ABLATE_SCHEMA_VERSION);
        goto done;
    }
    if (version < ABLATE_SCHEMA_VERSION)
        log_cmd("note: %s has schema version %lld (ablate 0.1.0); `ablate run "
                "SPEC -o %s --resume` with its journal (%s.d) rewrites it as version %d",
                path, version, path, path, ABLATE_SCHEMA_VERSION);
    if (H5Lexists(file, "runs", H5P_DEFAULT) <= 0 ||
        (dset = H5Dopen2(file, "runs", H5P_DEFAULT)) < 0) {
        log_cmd("%s has no /runs table", path);
        goto done;
    }
    ftype = H5Dget_type(dset);
    space = H5Dget_space(dset);
    hsize_t nrows = 0;
    if (H5Tget_class(ftype) != H5T_COMPOUND || H5Sget_simple_extent_ndims(space) != 1) {
        log_cmd("%s: /runs is not a table", path);
        goto done;
    }
    H5Sget_simple_extent_dims(space, &nrows, NULL);
    int r = json ? dump_json(dset, ftype, nrows, stdout, err)
                 : print_table(dset, ftype, nrows, file, path, stdout, err);
    if (r != 0) {
        log_cmd("%s: %s", path, err);
        goto done;
    }
    /* a live view's rows that a reader cannot get (a segment gone, another view's, too
     * many open files) are named, never passed over */
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "ablate inspect: warning: %s", path);
    fflush(stdout);
    view_check(file, path, prefix, stderr);
    if (fflush(stdout) != 0) {
        log_cmd("cannot write output: %s", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (space >= 0) H5Sclose(space);
    if (ftype >= 0) H5Tclose(ftype);
    if (dset >= 0) H5Dclose(dset);
    if (file >= 0) H5Fclose(file);
    H5Pclose(fapl);
    return rc;
}
