/* view_check.h: the reader's side of the live view's guarantees (docs/hdf5-schema.md,
 * "While the sweep runs"). Segments are opened one at a time, so the check itself works
 * under an open-file limit that the virtual datasets' reads exceeded. */
#include "view_check.h"
#include "h5table.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/buf.h"
#include "h5view_internal.h"

#define READ_ROWS (1 << 20) /* run column read in slices of this many rows */

static void attr_vstr(hid_t obj, const char *name, char *out, size_t n) {
    out[0] = 0;
    if (H5Aexists(obj, name) <= 0) return;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t ft = a >= 0 ? H5Aget_type(a) : -1;
    if (ft >= 0 && H5Tget_class(ft) == H5T_STRING && H5Tis_variable_str(ft) > 0) {
        hid_t mt = H5Tcopy(ft);
        char *s = NULL;
        if (H5Aread(a, mt, &s) >= 0 && s) {
            snprintf(out, n, "%s", s);
            H5free_memory(s);
        }
        H5Tclose(mt);
    }
    if (ft >= 0) H5Tclose(ft);
    if (a >= 0) H5Aclose(a);
}

static long long attr_int(hid_t obj, const char *name) {
    long long v = -1;
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0 || H5Aread(a, H5T_NATIVE_LLONG, &v) < 0) v = -1;
    if (a >= 0) H5Aclose(a);
    return v;
}

/* One column of a table into memory of type mt (element size sz): n rows from row start. */
static int read_column(hid_t d, const char *col, hid_t mt, size_t sz, hsize_t start, hsize_t n,
                       void *into) {
    hid_t ct = H5Tcreate(H5T_COMPOUND, sz), fs = H5Dget_space(d),
          ms = H5Screate_simple(1, &n, NULL);
    int rc = ct >= 0 && H5Tinsert(ct, col, 0, mt) >= 0 &&
                     H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &n, NULL) >= 0 &&
                     H5Dread(d, ct, ms, fs, H5P_DEFAULT, into) >= 0
                 ? 0
                 : -1;
    H5Sclose(ms);
    H5Sclose(fs);
    if (ct >= 0) H5Tclose(ct);
    return rc;
}

static long long dset_len(hid_t d) {
    hid_t s = H5Dget_space(d);
    hsize_t n = 0;
    if (s < 0 || H5Sget_simple_extent_dims(s, &n, NULL) != 1) n = 0;
    if (s >= 0) H5Sclose(s);
    return (long long)n;
}

typedef struct {
    char table[8];
    int32_t run, last_run; /* the runs [run, last_run] may have rows in the block */
    int64_t row, count;
    char *file;
    int64_t file_rows;
} Block;

/* What is wrong with a segment for table t, or NULL. */
static const char *segment_problem(const char *dir, const Block *b, const char *gen, char *why,
                                   size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s%s", dir, b->file);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1);
#endif
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    /* already open in this process (a virtual dataset's read opened it) with file locking:
     * HDF5 refuses other locking flags, and hands out that one with its own */
    if (f < 0) f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        snprintf(why, n, "segment %s cannot be opened (gone or damaged)", b->file);
        return why;
    }
    char g[64], an[64];
    attr_vstr(f, "view_generation", g, sizeof g);
    snprintf(an, sizeof an, "rows_%s", b->table);
    long long rows = attr_int(f, an);
    hid_t d = H5Dopen2(f, b->table, H5P_DEFAULT);
    long long len = d >= 0 ? dset_len(d) : -1;
    if (d >= 0) H5Dclose(d);
    H5Fclose(f);
    if (strcmp(g, gen) != 0)
        snprintf(why, n, "segment %s is another view's (view_generation %s, not %s)", b->file,
                 g[0] ? g : "none", gen);
    else if (rows != b->file_rows || len != b->file_rows)
        snprintf(why, n, "segment %s holds %lld rows of /%s, not %lld", b->file, len, b->table,
                 (long long)b->file_rows);
    else
        return NULL;
    return why;
}

/* Whether dataset d maps other files (an HDF5 virtual dataset): a live view's table as the
 * sweep wrote it, not one copied out with its rows (h5repack -l CONTI), whose
 * /view_blocks still names segments it no longer reads. */
static int is_virtual(hid_t d) {
    hid_t p = d >= 0 ? H5Dget_create_plist(d) : -1;
    int v = p >= 0 && H5Pget_layout(p) == H5D_VIRTUAL;
    if (p >= 0) H5Pclose(p);
    return v;
}

/* The /view_blocks rows, or NULL (*n = 0) without them. */
static Block *read_blocks(hid_t file, size_t *n) {
    *n = 0;
    if (H5Lexists(file, "view_blocks", H5P_DEFAULT) <= 0) return NULL;
    hid_t d = H5Dopen2(file, "view_blocks", H5P_DEFAULT);
    long long len = d >= 0 ? dset_len(d) : 0;
    Block *b = len > 0 ? calloc((size_t)len, sizeof *b) : NULL;
    hid_t s8 = H5Tcopy(H5T_C_S1), vs = h5_utf8_type(), mt = H5Tcreate(H5T_COMPOUND, sizeof *b);
    H5Tset_size(s8, 8);
    H5Tinsert(mt, "table", offsetof(Block, table), s8);
    H5Tinsert(mt, "run", offsetof(Block, run), H5T_NATIVE_INT32);
    H5Tinsert(mt, "row", offsetof(Block, row), H5T_NATIVE_INT64);
    H5Tinsert(mt, "count", offsetof(Block, count), H5T_NATIVE_INT64);
    H5Tinsert(mt, "file", offsetof(Block, file), vs);
    H5Tinsert(mt, "file_rows", offsetof(Block, file_rows), H5T_NATIVE_INT64);
    hid_t ft = d >= 0 ? H5Dget_type(d) : -1;
    int has_last = ft >= 0 && H5Tget_member_index(ft, "last_run") >= 0; /* a row a block before */
    if (ft >= 0) H5Tclose(ft);
    if (has_last) H5Tinsert(mt, "last_run", offsetof(Block, last_run), H5T_NATIVE_INT32);
    if (b && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) >= 0) {
        *n = (size_t)len;
        for (size_t i = 0; i < *n && !has_last; i++)
            b[i].last_run = b[i].run;
        int lost = 0;
        for (size_t i = 0; i < *n; i++) /* our own copies: freed with free() */
            if (b[i].file) {
                char *c = strdup(b[i].file);
                lost |= !c; /* out of memory: the blocks cannot be checked */
                H5free_memory(b[i].file);
                b[i].file = c;
            }
        if (lost) {
            for (size_t i = 0; i < *n; i++)
                free(b[i].file);
            free(b);
            b = NULL;
            *n = 0;
        }
    } else {
        free(b);
        b = NULL;
    }
    H5Tclose(mt);
    H5Tclose(vs);
    H5Tclose(s8);
    if (d >= 0) H5Dclose(d);
    return b;
}

/* Checks one table; 1 if rows are unavailable (a line written), 0 if not. */
static int check_table(hid_t file, const char *name, const int64_t *expect, long nruns,
                       const Block *blocks, size_t nb, const char *dir, const char *gen,
                       const char *prefix, FILE *out) {
    long long *got = calloc((size_t)nruns + 1, sizeof *got), fill = 0;
    uint8_t *bad = calloc((size_t)nruns + 1, 1);
    int32_t *run = malloc(sizeof *run * READ_ROWS);
    Buf why = {0};
    int rc = 0;
    hid_t d = H5Lexists(file, name, H5P_DEFAULT) > 0 ? H5Dopen2(file, name, H5P_DEFAULT) : -1;
    long long len = d >= 0 ? dset_len(d) : 0;
    if (!got || !bad || !run) goto done;
    for (long long at = 0; at < len; at += READ_ROWS) {
        hsize_t n = (hsize_t)(len - at < READ_ROWS ? len - at : READ_ROWS);
        if (read_column(d, "run", H5T_NATIVE_INT32, sizeof *run, (hsize_t)at, n, run) != 0) {
            buf_printf(&why, "; /%s cannot be read", name);
            for (long r = 0; r < nruns; r++)
                bad[r] = 1;
            break;
        }
        for (hsize_t i = 0; i < n; i++) {
            if (run[i] >= 0 && run[i] < nruns)
                got[run[i]]++;
            else
                fill++;
        }
    }
    for (long r = 0; r < nruns; r++) /* a row of /runs unavailable: said by check_runs */
        if (expect[r] >= 0 && got[r] != expect[r]) bad[r] = 1;
    /* segments: another generation's rows look like data and may even count right */
    int nproblems = 0;
    for (size_t i = 0; i < nb && is_virtual(d); i++) {
        if (strcmp(blocks[i].table, name) != 0 || !blocks[i].file ||
            !strcmp(blocks[i].file, ".")) /* "." : this file's own rows */
            continue;
        int seen = 0; /* each file once per table */
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp(blocks[j].table, name) && blocks[j].file &&
                   !strcmp(blocks[j].file, blocks[i].file);
        char w[600];
        const char *p = seen ? NULL : segment_problem(dir, &blocks[i], gen, w, sizeof w);
        if (!p) continue;
        for (size_t j = 0; j < nb; j++)
            if (!strcmp(blocks[j].table, name) && blocks[j].file &&
                !strcmp(blocks[j].file, blocks[i].file))
                for (long r = blocks[j].run < 0 ? 0 : blocks[j].run;
                     r <= blocks[j].last_run && r < nruns; r++)
                    bad[r] = 1;
        if (nproblems++ < 3) buf_printf(&why, "; %s", p);
    }
    if (nproblems > 3) buf_printf(&why, "; %d more segments", nproblems - 3);
    long long total = 0, lost = 0;
    Buf runs = {0};
    int nbad = 0;
    for (long r = 0; r < nruns; r++) {
        total += expect[r] > 0 ? expect[r] : 0;
        if (!bad[r]) continue;
        lost += expect[r] > 0 ? expect[r] : 0;
        if (nbad++ < 20) buf_printf(&runs, "%s%ld", nbad > 1 ? ", " : "", r);
    }
    if (nbad > 20) buf_printf(&runs, ", ... (%d runs)", nbad);
    if (nbad) {
        rc = 1;
        if (fill && !nproblems) { /* every segment is there: the reader could not open them */
            struct rlimit rl;
            if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                buf_printf(&why,
                           "; HDF5 could not open some segments (this process may open %ld "
                           "files; the view maps %zu blocks)",
                           (long)rl.rlim_cur, nb);
        }
        fprintf(out,
                "%s/%s: %lld of %lld rows unavailable (run%s %s); %lld read as fill rows "
                "(run = -1)%s\n",
                prefix, name, lost, total, nbad > 1 ? "s" : "", runs.p ? runs.p : "", fill,
                why.p ? why.p : "");
    }
    buf_free(&runs);
done:
    buf_free(&why);
    if (d >= 0) H5Dclose(d);
    free(got);
    free(bad);
    free(run);
    return rc;
}

/* /runs of a live view maps pages of rows onto segments too: a row whose index is not its
 * position (the fill value is -1) is unavailable. 1 if some are (a line written), else 0. */
static int check_runs(hid_t runs, long nruns, const Block *blocks, size_t nb, const char *dir,
                      const char *gen, const char *prefix, FILE *out) {
    int32_t *index = malloc(sizeof *index * ((size_t)nruns + 1));
    if (!index) return 0;
    Buf list = {0}, why = {0};
    long nbad = 0;
    if (nruns > 0 && read_column(runs, "index", H5T_NATIVE_INT32, sizeof *index, 0, (hsize_t)nruns,
                                 index) != 0) {
        fprintf(out, "%s/runs: its index column cannot be read\n", prefix);
        free(index);
        return 1;
    }
    for (long r = 0; r < nruns; r++) {
        if (index[r] == r) continue;
        if (nbad++ < 20) buf_printf(&list, "%s%ld", nbad > 1 ? ", " : "", r);
    }
    if (nbad > 20) buf_printf(&list, ", ... (%ld runs)", nbad);
    int nproblems = 0;
    for (size_t i = 0; i < nb && nbad && is_virtual(runs); i++) {
        if (strcmp(blocks[i].table, "runs") != 0 || !blocks[i].file || !strcmp(blocks[i].file, "."))
            continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp(blocks[j].table, "runs") && blocks[j].file &&
                   !strcmp(blocks[j].file, blocks[i].file);
        char w[600];
        const char *p = seen ? NULL : segment_problem(dir, &blocks[i], gen, w, sizeof w);
        if (p && nproblems++ < 3) buf_printf(&why, "; %s", p);
    }
    if (nproblems > 3) buf_printf(&why, "; %d more segments", nproblems - 3);
    if (nbad)
        fprintf(out,
                "%s/runs: %ld of %ld rows unavailable (run%s %s; their rows read as fill: index "
                "-1); their rows of the metric tables cannot be checked%s\n",
                prefix, nbad, nruns, nbad > 1 ? "s" : "", list.p ? list.p : "", why.p ? why.p : "");
    buf_free(&list);
    buf_free(&why);
    free(index);
    return nbad ? 1 : 0;
}

int view_check(hid_t file, const char *path, const char *prefix, FILE *out) {
    char view[16], gen[64];
    attr_vstr(file, "view", view, sizeof view);
    if (strcmp(view, "live") != 0) return 0; /* a full build holds every row itself */
    attr_vstr(file, "view_generation", gen, sizeof gen);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + 1) : 0, path);
    hid_t runs = H5Dopen2(file, "runs", H5P_DEFAULT);
    long nruns = runs >= 0 ? (long)dset_len(runs) : -1;
    hid_t ft = runs >= 0 ? H5Dget_type(runs) : -1;
    int64_t *expect = nruns >= 0 ? calloc((size_t)nruns + 1, sizeof *expect) : NULL;
    size_t nb = 0;
    Block *blocks = read_blocks(file, &nb);
    int rc = 0;
    if (!expect || !gen[0]) {
        fprintf(out,
                "%s: a live view without /runs or view_generation: its rows cannot be checked\n",
                prefix);
        rc = -1;
    }
    if (rc == 0) rc += check_runs(runs, nruns, blocks, nb, dir, gen, prefix, out);
    for (int t = 0; t < N_TABLES && rc >= 0; t++) {
        const char *name = h5v_table_name(t);
        char col[64];
        if (!name) continue;
        snprintf(col, sizeof col, "rows_%s", name);
        if (H5Tget_member_index(ft, col) < 0 ||
            (nruns > 0 && read_column(runs, col, H5T_NATIVE_INT64, sizeof *expect, 0,
                                      (hsize_t)nruns, expect) != 0)) {
            fprintf(out, "%s: /runs has no readable column %s: the rows of /%s cannot be checked\n",
                    prefix, col, name);
            rc = -1;
            break;
        }
        rc += check_table(file, name, expect, nruns, blocks, nb, dir, gen, prefix, out);
    }
    for (size_t i = 0; i < nb; i++)
        free(blocks[i].file);
    free(blocks);
    free(expect);
    if (ft >= 0) H5Tclose(ft);
    if (runs >= 0) H5Dclose(runs);
    return rc;
}

int view_complete_over(const char *path, unsigned long long bytes, int n) {
    if (access(path, R_OK) != 0) return 0;
    H5E_auto2_t old_func;
    void *old_data;
    H5Eget_auto2(H5E_DEFAULT, &old_func, &old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int over = 0;
    if (f >= 0) {
        char status[32], view[16];
        attr_vstr(f, "status", status, sizeof status);
        attr_vstr(f, "view", view, sizeof view); /* a live view is no full build */
        over = !view[0] && !strncmp(status, "complete", 8) &&
               attr_int(f, "journal_bytes") == (long long)bytes &&
               attr_int(f, "joined_processes") == n;
        H5Fclose(f);
    }
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, old_func, old_data);
    return over;
}
