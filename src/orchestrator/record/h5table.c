#include "h5table.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/run_config.h"
#include "util/utf8.h"
#include "util/fsutil.h"

#define TABLE_MAX_ROWS  65536
#define TABLE_MAX_BYTES (8u << 20)
#define CHUNK_MAX_BYTES (1u << 20)

/* ---------------- errors ---------------- */

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    if (n == 0) snprintf(data, 200, "%s (%s)", e->desc ? e->desc : "?", e->func_name);
    return 0;
}

/* One line: what failed, and why. HDF5's own text for a failed write embeds a ctime()
 * with its newline and a dump of the call; when it names an errno, strerror says it. */
void h5_err(char *err, const char *fmt, ...) {
    char what[300], h5[200] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, h5);
    const char *e = strstr(h5, "errno = ");
    int code = e ? atoi(e + 8) : 0;
    if (code > 0)
        snprintf(err, ABL_ERR_MAX, "%s: %s", what, strerror(code));
    else if (h5[0])
        snprintf(err, ABL_ERR_MAX, "%s: HDF5: %s", what, h5);
    else
        snprintf(err, ABL_ERR_MAX, "%s", what);
    for (char *c = err; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
}

void h5_process_init(void) {
    /* A file whose close failed (a full disk) stays in HDF5's tables, and the library's
     * atexit handler then crashes closing it again (HDF5 1.10, exit 139). ablate closes
     * every file it opens itself, so it needs no cleanup at exit. */
    H5dont_atexit();
}

/* ---------------- tables: a chunked, compressed, extendible 1-D dataset ---------------- */

static size_t col_size(const H5Col *c) {
    switch (c->type) {
    case H5C_I32:
        return 4;
    case H5C_I64:
    case H5C_U64:
    case H5C_F64:
        return 8;
    case H5C_BOOL:
        return 1;
    case H5C_STR:
        return c->len;
    case H5C_VSTR:
        return sizeof(char *);
    }
    return 0;
}

hid_t h5_utf8_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

static hid_t col_h5type(const H5Col *c) {
    hid_t t = -1;
    switch (c->type) {
    case H5C_I32:
        return H5Tcopy(H5T_NATIVE_INT32);
    case H5C_I64:
        return H5Tcopy(H5T_NATIVE_INT64);
    case H5C_U64:
        return H5Tcopy(H5T_NATIVE_UINT64);
    case H5C_F64:
        return H5Tcopy(H5T_NATIVE_DOUBLE);
    case H5C_BOOL: { /* h5py reads this enum as numpy bool */
        t = H5Tenum_create(H5T_NATIVE_INT8);
        int8_t f = 0, tr = 1;
        H5Tenum_insert(t, "FALSE", &f);
        H5Tenum_insert(t, "TRUE", &tr);
        return t;
    }
    case H5C_STR:
        t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, c->len);
        H5Tset_strpad(t, H5T_STR_NULLTERM);
        /* Tagged ASCII (the bytes are kept as given): C readers with a plain H5T_C_S1
         * memory type can read it; HDF5 does not convert between ASCII and UTF-8 tags. */
        H5Tset_cset(t, H5T_CSET_ASCII);
        return t;
    case H5C_VSTR:
        return h5_utf8_type();
    }
    return -1;
}

int h5_attr_str(hid_t loc, const char *name, const char *value) {
    hid_t t = h5_utf8_type();
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    Buf b = {0};
    utf8_sanitize(&b, value ? value : "", value ? strlen(value) : 0);
    const char *v = b.p ? b.p : "";
    herr_t rc = a < 0 || b.oom ? -1 : H5Awrite(a, t, &v);
    buf_free(&b);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
    return rc < 0 ? -1 : 0;
}

/* A scalar attribute stored as file_type from a value in memory as mem_type. */
static int attr_scalar(hid_t loc, const char *name, hid_t file_type, hid_t mem_type,
                       const void *value) {
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(loc, name, file_type, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, mem_type, value);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    return rc < 0 ? -1 : 0;
}

int h5_attr_i64(hid_t loc, const char *name, long long value) {
    return attr_scalar(loc, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &value);
}

int h5_attr_i32(hid_t loc, const char *name, int value) {
    return attr_scalar(loc, name, H5T_STD_I32LE, H5T_NATIVE_INT, &value);
}

/* The fill value of a table: what a reader gets for a row that has no source (a virtual
 * dataset whose segment file cannot be opened: HDF5 reports no error). Integers -1 and
 * floats NaN, so a fill row can never be taken for data: no real row has run = -1 (the
 * plan index) or step = -1. Unsigned integers get their maximum; strings are empty. */
static int set_fill(hid_t dcpl, const H5Table *t) {
    uint8_t *row = calloc(1, t->row_size);
    if (!row) return -1;
    for (int c = 0; c < t->ncol; c++) {
        uint8_t *at = row + t->off[c];
        int32_t i32 = -1;
        int64_t i64 = -1;
        uint64_t u64 = UINT64_MAX;
        double nan = NAN;
        switch (t->types[c]) {
        case H5C_I32:
            memcpy(at, &i32, sizeof i32);
            break;
        case H5C_I64:
            memcpy(at, &i64, sizeof i64);
            break;
        case H5C_U64:
            memcpy(at, &u64, sizeof u64);
            break;
        case H5C_F64:
            memcpy(at, &nan, sizeof nan);
            break;
        default:
            break; /* bool false, fixed strings empty, variable strings NULL (empty) */
        }
    }
    herr_t rc = H5Pset_fill_value(dcpl, t->type, row);
    free(row);
    return rc < 0 ? -1 : 0;
}

static hid_t make_dcpl(hsize_t chunk) {
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 4);
    H5Pset_obj_track_times(dcpl, 0);
    return dcpl;
}

size_t h5t_row_size(const H5Col *cols, int ncol) {
    size_t n = 0;
    for (int i = 0; i < ncol; i++)
        n += col_size(&cols[i]);
    return n;
}

/* The row layout and HDF5 type of a table. */
static int table_setup(H5Table *t, const char *name, const H5Col *cols, int ncol, int compound,
                       char *err) {
    memset(t, 0, sizeof *t);
    t->dset = t->type = -1;
    t->ncol = ncol;
    t->compound = compound;
    t->off = calloc((size_t)ncol, sizeof *t->off);
    t->types = calloc((size_t)ncol, sizeof *t->types);
    if (!t->off || !t->types) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    for (int i = 0; i < ncol; i++) {
        t->off[i] = t->row_size;
        t->types[i] = cols[i].type;
        t->row_size += col_size(&cols[i]);
    }
    if (compound) {
        t->type = H5Tcreate(H5T_COMPOUND, t->row_size);
        for (int i = 0; i < ncol && t->type >= 0; i++) {
            hid_t ct = col_h5type(&cols[i]);
            if (ct < 0 || H5Tinsert(t->type, cols[i].name, t->off[i], ct) < 0) {
                if (ct >= 0) H5Tclose(ct);
                h5_err(err, "cannot build the type of /%s (column %s)", name, cols[i].name);
                return -1;
            }
            H5Tclose(ct);
        }
    } else {
        t->type = col_h5type(&cols[0]);
    }
    if (t->type < 0) {
        h5_err(err, "cannot build the type of /%s", name);
        return -1;
    }
    return 0;
}

/* The description and the per-column units/doc attributes. */
static int table_attrs(H5Table *t, const char *name, const H5Col *cols, int ncol,
                       const char *description, char *err) {
    if (h5_attr_str(t->dset, "description", description) != 0) {
        h5_err(err, "cannot write attributes of /%s", name);
        return -1;
    }
    for (int i = 0; i < ncol; i++) {
        char an[160];
        snprintf(an, sizeof an, "units.%s", cols[i].name);
        int bad = cols[i].units && h5_attr_str(t->dset, an, cols[i].units) != 0;
        snprintf(an, sizeof an, "doc.%s", cols[i].name);
        bad |= cols[i].doc && h5_attr_str(t->dset, an, cols[i].doc) != 0;
        if (bad) {
            h5_err(err, "cannot write attributes of /%s", name);
            return -1;
        }
    }
    return 0;
}

int h5t_create(H5Table *t, hid_t loc, const char *name, const H5Col *cols, int ncol, int compound,
               const char *description, char *err) {
    if (table_setup(t, name, cols, ncol, compound, err) != 0) return -1;
    /* Power-of-two chunks of at most 1 MiB; the row buffer holds whole chunks. */
    hsize_t chunk = 64;
    while (chunk * 2 * t->row_size <= CHUNK_MAX_BYTES && chunk * 2 <= TABLE_MAX_ROWS)
        chunk *= 2;
    size_t cap = chunk;
    while (cap * 2 * t->row_size <= TABLE_MAX_BYTES && cap * 2 <= TABLE_MAX_ROWS)
        cap *= 2;
    t->cap = cap;
    t->buf = malloc(cap * t->row_size);
    if (!t->buf) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    hsize_t dims = 0, maxdims = H5S_UNLIMITED;
    hid_t space = H5Screate_simple(1, &dims, &maxdims);
    hid_t dcpl = make_dcpl(chunk);
    if (set_fill(dcpl, t) != 0) {
        H5Pclose(dcpl);
        H5Sclose(space);
        h5_err(err, "cannot set the fill value of /%s", name);
        return -1;
    }
    t->dset = H5Dcreate2(loc, name, t->type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (t->dset < 0) {
        h5_err(err, "cannot create dataset /%s", name);
        return -1;
    }
    return table_attrs(t, name, cols, ncol, description, err);
}

int h5t_create_virtual(H5Table *t, hid_t loc, const char *name, const H5Col *cols, int ncol,
                       int compound, const char *description, const TableBlock *blocks, int nblocks,
                       char *err) {
    if (table_setup(t, name, cols, ncol, compound, err) != 0) return -1;
    hsize_t total = 0;
    for (int b = 0; b < nblocks; b++)
        total += blocks[b].count;
    hid_t space = H5Screate_simple(1, &total, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int rc = space >= 0 && dcpl >= 0 && set_fill(dcpl, t) == 0 ? 0 : -1;
    hsize_t at = 0;
    for (int b = 0; b < nblocks && rc == 0; b++) {
        const TableBlock *k = &blocks[b];
        hsize_t start = k->start, count = k->count, rows = k->rows;
        hid_t src = H5Screate_simple(1, &rows, NULL);
        rc = src >= 0 && H5Sselect_hyperslab(space, H5S_SELECT_SET, &at, NULL, &count, NULL) >= 0 &&
                     H5Sselect_hyperslab(src, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0 &&
                     H5Pset_virtual(dcpl, space, k->file, k->dset ? k->dset : name, src) >= 0
                 ? 0
                 : -1;
        if (src >= 0) H5Sclose(src);
        at += count;
    }
    if (rc == 0) {
        H5Sselect_all(space);
        t->dset = H5Dcreate2(loc, name, t->type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    }
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (t->dset < 0) {
        h5_err(err, "cannot create virtual dataset /%s", name);
        return -1;
    }
    t->nrows = total;
    return table_attrs(t, name, cols, ncol, description, err);
}

/* The buffered rows' text cells live in chunks of the table's own until the flush that
 * writes them: one allocation per 64 KiB of text, where each cell had two (its sanitizing
 * buffer and its copy) and a free after the flush; a first live update of 10^5 runs spent
 * a tenth of its time in malloc and free for the cells of /runs. A chunk is reused after a
 * flush; a cell larger than a chunk gets one of its own. */
#define TEXT_CHUNK (64u << 10)
typedef struct H5TextChunk {
    struct H5TextChunk *next;
    size_t used, cap;
    char bytes[];
} H5TextChunk;

static char *text_alloc(H5Table *t, size_t n) {
    H5TextChunk *c = t->text;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > TEXT_CHUNK ? n : TEXT_CHUNK;
        if (!(c = malloc(sizeof *c + cap))) return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = t->text;
        t->text = c;
    }
    char *p = c->bytes + c->used;
    c->used += n;
    return p;
}

/* After a flush: every cell's text is written; one chunk kept for the next rows. */
static void text_reset(H5Table *t) {
    H5TextChunk *keep = NULL;
    while (t->text) {
        H5TextChunk *c = t->text;
        t->text = c->next;
        if (!keep && c->cap == TEXT_CHUNK) {
            keep = c;
            keep->used = 0;
            keep->next = NULL;
        } else {
            free(c);
        }
    }
    t->text = keep;
    t->vbytes = 0;
}

static void text_free(H5Table *t) {
    text_reset(t);
    free(t->text);
    t->text = NULL;
    buf_free(&t->clean);
}

static int table_flush(H5Table *t, char *err) {
    if (t->nbuf == 0) return 0;
    hsize_t start = t->nrows, count = t->nbuf, total = t->nrows + t->nbuf;
    int rc = -1;
    hid_t fspace = -1, mspace = -1;
    if (H5Dset_extent(t->dset, &total) < 0) goto done;
    fspace = H5Dget_space(t->dset);
    if (fspace < 0 || H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) < 0)
        goto done;
    mspace = H5Screate_simple(1, &count, NULL);
    if (mspace < 0 || H5Dwrite(t->dset, t->type, mspace, fspace, H5P_DEFAULT, t->buf) < 0)
        goto done;
    rc = 0;
done:
    if (rc != 0) h5_err(err, "cannot write rows");
    if (mspace >= 0) H5Sclose(mspace);
    if (fspace >= 0) H5Sclose(fspace);
    text_reset(t);
    t->nrows = total;
    t->nbuf = 0;
    return rc;
}

uint8_t *h5t_row(H5Table *t, char *err) {
    if ((t->nbuf == t->cap || t->vbytes > TABLE_MAX_BYTES) && table_flush(t, err) != 0) return NULL;
    uint8_t *row = t->buf + t->row_size * t->nbuf++;
    memset(row, 0, t->row_size); /* fixed strings rely on zero padding */
    return row;
}

int h5t_close(H5Table *t, int discard, char *err) {
    int rc = 0;
    if (!discard && t->dset >= 0 && t->buf) rc = table_flush(t, err);
    text_free(t);
    if (t->dset >= 0) H5Dclose(t->dset);
    if (t->type >= 0) H5Tclose(t->type);
    free(t->buf);
    free(t->off);
    free(t->types);
    memset(t, 0, sizeof *t);
    t->dset = t->type = -1;
    return rc;
}

void h5t_set_i32(H5Table *t, uint8_t *row, int c, int32_t v) {
    memcpy(row + t->off[c], &v, 4);
}
void h5t_set_i64(H5Table *t, uint8_t *row, int c, int64_t v) {
    memcpy(row + t->off[c], &v, 8);
}
void h5t_set_u64(H5Table *t, uint8_t *row, int c, uint64_t v) {
    memcpy(row + t->off[c], &v, 8);
}
void h5t_set_f64(H5Table *t, uint8_t *row, int c, double v) {
    memcpy(row + t->off[c], &v, 8);
}
void h5t_set_bool(H5Table *t, uint8_t *row, int c, int v) {
    row[t->off[c]] = v != 0;
}
/* Fixed string: truncated to the column width (rows are zeroed, so NUL-terminated). */
void h5t_set_str(H5Table *t, uint8_t *row, int c, const char *s, size_t width) {
    size_t n = strnlen(s, width - 1);
    memcpy(row + t->off[c], s, n);
}
int h5t_set_vstr(H5Table *t, uint8_t *row, int c, const char *s, size_t n) {
    buf_clear(&t->clean);
    t->clean.oom = 0;
    utf8_sanitize(&t->clean, s, n);
    if (t->clean.oom) return -1;
    size_t len = t->clean.len;
    char *p = text_alloc(t, len + 1);
    if (!p) return -1;
    if (len) memcpy(p, t->clean.p, len);
    p[len] = '\0';
    /* a cell set twice (/runs' variant: "" first, then the run name's variant segment)
     * leaves its first text in the chunk until the flush */
    char *old;
    memcpy(&old, row + t->off[c], sizeof old);
    if (old) t->vbytes -= strlen(old) + 1;
    memcpy(row + t->off[c], &p, sizeof p);
    t->vbytes += len + 1;
    return 0;
}

/* A contiguous dataset without timestamps (builds of one journal are byte-identical). */
static hid_t create_plain(hid_t loc, const char *name, hid_t type, hid_t space) {
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    hid_t d = H5Dcreate2(loc, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    return d;
}

int h5_write_string_dataset(hid_t file, const char *name, const char *value,
                            const char *description) {
    hid_t t = h5_utf8_type();
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t d = create_plain(file, name, t, s);
    Buf b = {0};
    utf8_sanitize(&b, value ? value : "", value ? strlen(value) : 0);
    const char *v = b.p ? b.p : "";
    int rc = (d >= 0 && !b.oom && H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) >= 0 &&
              h5_attr_str(d, "description", description) == 0)
                 ? 0
                 : -1;
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
    H5Tclose(t);
    buf_free(&b);
    return rc;
}

void h5t_init(H5Table *t) {
    memset(t, 0, sizeof *t);
    t->dset = t->type = -1;
}

int h5_write_u8_dataset(hid_t loc, const char *name, const uint8_t *v, size_t n,
                        const char *description) {
    hsize_t dims = n;
    hid_t s = H5Screate_simple(1, &dims, NULL);
    hid_t d = create_plain(loc, name, H5T_STD_U8LE, s);
    int rc = (d >= 0 &&
              (n == 0 || H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0) &&
              h5_attr_str(d, "description", description) == 0)
                 ? 0
                 : -1;
    if (d >= 0) H5Dclose(d);
    H5Sclose(s);
    return rc;
}

const char *h5t_col_type_name(const H5Col *c, char *buf, size_t n) {
    switch (c->type) {
    case H5C_I32:
        return "int32";
    case H5C_I64:
        return "int64";
    case H5C_U64:
        return "uint64";
    case H5C_F64:
        return "float64";
    case H5C_BOOL:
        return "bool";
    case H5C_STR:
        snprintf(buf, n, "S%zu", c->len);
        return buf;
    case H5C_VSTR:
        return "str (UTF-8)";
    }
    return "?";
}

const H5Col schema_cols[] = {
    {"table", H5C_VSTR, 0, NULL, "the table (dataset) name, without the leading /"},
    {"column", H5C_VSTR, 0, NULL, "the column, as the table names it"},
    {"type", H5C_VSTR, 0, NULL,
     "int32, int64, uint64, float64, bool, S<n> (fixed-length, n bytes with the NUL) or "
     "str (UTF-8) (variable-length)"},
    {"units", H5C_VSTR, 0, NULL, "the column's units (its attribute units.<column>); empty: none"},
    {"description", H5C_VSTR, 0, NULL, "what the column holds (its attribute doc.<column>)"},
};
const int schema_ncol = (int)(sizeof schema_cols / sizeof schema_cols[0]);

int h5t_schema_create(H5Table *s, hid_t file, char *err) {
    if (h5t_create(s, file, "schema", schema_cols, schema_ncol, 1,
                   "One row per column of every table in this file, in the order the tables "
                   "were written: the table, the column, its type, units and meaning "
                   "(docs/hdf5-schema.md).",
                   err) != 0)
        return -1;
    return h5t_schema_add(s, "schema", schema_cols, schema_ncol, err);
}

int h5t_schema_add(H5Table *s, const char *table, const H5Col *cols, int ncol, char *err) {
    char tb[32];
    for (int i = 0; s && i < ncol; i++) {
        uint8_t *row = h5t_row(s, err);
        if (!row) return -1;
        const char *type = h5t_col_type_name(&cols[i], tb, sizeof tb);
        const char *units = cols[i].units ? cols[i].units : "";
        const char *doc = cols[i].doc ? cols[i].doc : "";
        if (h5t_set_vstr(s, row, 0, table, strlen(table)) != 0 ||
            h5t_set_vstr(s, row, 1, cols[i].name, strlen(cols[i].name)) != 0 ||
            h5t_set_vstr(s, row, 2, type, strlen(type)) != 0 ||
            h5t_set_vstr(s, row, 3, units, strlen(units)) != 0 ||
            h5t_set_vstr(s, row, 4, doc, strlen(doc)) != 0) {
            snprintf(err, ABL_ERR_MAX, "out of memory");
            return -1;
        }
    }
    return 0;
}

hid_t h5_create_file(const char *path) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 0, 1); /* readers open views while they are replaced */
#endif
    H5Pset_obj_track_times(fcpl, 0); /* the same journal gives the same bytes */
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fapl);
    H5Pclose(fcpl);
    return f;
}

int h5_finish_file(hid_t file, const char *tmp, const char *dest, int ok, char *err) {
    int rc = ok ? 0 : -1;
    if (file >= 0 && H5Fclose(file) < 0 && rc == 0) {
        h5_err(err, "cannot close %s", tmp);
        rc = -1;
    }
    if (rc == 0 && fs_fsync(tmp, 0) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot fsync %.300s: %s", tmp, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && dest && rename(tmp, dest) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot rename %.200s to %.200s: %s", tmp, dest,
                 strerror(errno));
        rc = -1;
    }
    char dir[ABL_PATH_MAX];
    fs_dir_of(dest ? dest : tmp, dir, sizeof dir);
    if (rc == 0 && fs_fsync(dir, 1) != 0) {
        snprintf(err, ABL_ERR_MAX, "cannot fsync directory %.300s: %s", dir, strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        /* emptied before the unlink: a file HDF5 failed to close keeps its descriptor, and
         * its blocks would stay allocated on the full disk until the process exits */
        if (truncate(tmp, 0) != 0) { /* nothing more to free */
        }
        unlink(tmp);
    }
    return rc;
}
