/* A generic writer of HDF5 tables: 1-D compound (or single-column) datasets, chunked,
 * shuffle+gzip(4), extendible, filled row by row through a bounded buffer (at most 64K
 * rows and 8 MiB per table before a flush); plus the attribute and scalar-dataset helpers
 * the sweep view needs. Knows nothing about sweeps (the view is h5view.c). */
#ifndef ABLATE_ORCH_H5TABLE_H
#define ABLATE_ORCH_H5TABLE_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "util/buf.h"

typedef enum { H5C_I32, H5C_I64, H5C_U64, H5C_F64, H5C_BOOL, H5C_STR, H5C_VSTR } H5ColType;

typedef struct {
    const char *name;
    H5ColType type;
    size_t len;        /* H5C_STR: bytes including the NUL */
    const char *units; /* attribute units.<name>; NULL: none */
    const char *doc;   /* attribute doc.<name>; NULL: none */
} H5Col;

struct H5TextChunk;

typedef struct {
    hid_t dset, type;
    int ncol, compound;
    size_t *off;
    H5ColType *types;
    size_t row_size;
    uint8_t *buf;
    size_t nbuf, cap, vbytes;
    hsize_t nrows;
    struct H5TextChunk *text; /* the buffered rows' text cells (h5table.c) */
    Buf clean;                /* a text cell's bytes made valid UTF-8, reused */
} H5Table;

/* "what: HDF5: the innermost HDF5 error" into err. */
void h5_err(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Call once at process start, before any HDF5 call (see h5table.c). */
void h5_process_init(void);

/* A table that owns nothing yet (so h5t_close on it is safe). */
void h5t_init(H5Table *t);
/* compound = 0: a single-column dataset of that column's type. 0 or -1 with err. Its fill
 * value (what HDF5 returns for rows that have no source) has every integer column -1 (the
 * maximum if unsigned) and every float NaN: a fill row is never a real one. */
int h5t_create(H5Table *t, hid_t loc, const char *name, const H5Col *cols, int ncol, int compound,
               const char *description, char *err);
/* Rows [start, start + count) of dataset `name` in file (a path relative to the directory
 * of the file that refers to it), whose dataset has `rows` rows in all. */
typedef struct {
    const char *file; /* "." : the file of the virtual dataset */
    hsize_t start, count, rows;
    const char *dset; /* the source dataset; NULL: the table's own name */
} TableBlock;
/* A virtual dataset (HDF5 VDS) of the same layout, concatenating the blocks in order; no
 * rows can be added. 0 or -1 with err. */
int h5t_create_virtual(H5Table *t, hid_t loc, const char *name, const H5Col *cols, int ncol,
                       int compound, const char *description, const TableBlock *blocks, int nblocks,
                       char *err);
/* The bytes of one row of these columns. */
size_t h5t_row_size(const H5Col *cols, int ncol);
/* The next (zeroed) row; NULL if a flush failed. */
uint8_t *h5t_row(H5Table *t, char *err);
/* Flushes (unless discard) and releases everything; 0 or -1. */
int h5t_close(H5Table *t, int discard, char *err);
/* Rows written or buffered. */
static inline long long h5t_rows(const H5Table *t) {
    return (long long)(t->nrows + t->nbuf);
}

void h5t_set_i32(H5Table *t, uint8_t *row, int c, int32_t v);
void h5t_set_i64(H5Table *t, uint8_t *row, int c, int64_t v);
void h5t_set_u64(H5Table *t, uint8_t *row, int c, uint64_t v);
void h5t_set_f64(H5Table *t, uint8_t *row, int c, double v);
void h5t_set_bool(H5Table *t, uint8_t *row, int c, int v);
/* Fixed string, cut to the column width (width - 1 bytes). */
void h5t_set_str(H5Table *t, uint8_t *row, int c, const char *s, size_t width);
/* Variable-length UTF-8 string: s[0..n) made valid UTF-8 (utf8_sanitize); setting a cell
 * again replaces (frees) its string. 0 or -1 (memory). */
int h5t_set_vstr(H5Table *t, uint8_t *row, int c, const char *s, size_t n);

/* The name a column's type is listed under (in /schema and docs/hdf5-schema.md): int32,
 * int64, uint64, float64, bool, S<n> (fixed-length, n bytes with the NUL) or "str (UTF-8)"
 * (variable-length). buf holds S<n>. */
const char *h5t_col_type_name(const H5Col *c, char *buf, size_t n);
/* /schema: one row per column of every table a file holds (table, column, type, units,
 * description), from the same H5Col rows the tables are created with, so that a reader
 * learns the columns, units and meanings from the file. Creates it listing its own
 * columns; 0 or -1 with err. */
extern const H5Col schema_cols[];
extern const int schema_ncol;
int h5t_schema_create(H5Table *s, hid_t file, char *err);
/* Lists table's columns in s (a NULL s lists nothing). 0 or -1 with err. */
int h5t_schema_add(H5Table *s, const char *table, const H5Col *cols, int ncol, char *err);

/* A new file for a view or a segment: no file locking (readers open views while they are
 * replaced), no object timestamps (the same journal gives the same bytes). */
hid_t h5_create_file(const char *path);
/* Closes file (if >= 0) and, when ok, makes tmp durable and (dest not NULL) renames it to
 * dest, fsyncing the directory; on any failure, or !ok, empties and removes tmp. 0 or -1
 * (err set unless !ok came with its own). */
int h5_finish_file(hid_t file, const char *tmp, const char *dest, int ok, char *err);

/* Variable-length UTF-8 strings: the type of every free-text column, attribute and string
 * dataset ablate writes, and the memory type to read them with. The caller closes it. */
hid_t h5_utf8_type(void);

/* Attributes (strings are variable-length UTF-8, made valid). 0 or -1. */
int h5_attr_str(hid_t loc, const char *name, const char *value);
int h5_attr_i32(hid_t loc, const char *name, int value);
int h5_attr_i64(hid_t loc, const char *name, long long value);
/* A scalar variable-length UTF-8 string dataset with a description. */
int h5_write_string_dataset(hid_t loc, const char *name, const char *value,
                            const char *description);
/* A 1-D uint8 dataset with a description. */
int h5_write_u8_dataset(hid_t loc, const char *name, const uint8_t *v, size_t n,
                        const char *description);

#endif
