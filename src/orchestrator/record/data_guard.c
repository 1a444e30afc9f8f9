#include "util/log.h"
#include "data_guard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/file_io.h"
#include "util/grow.h"

static int same_source(const DataIdentity *id, const DataConfig *dc) {
    return data_source_is(id, dc);
}

static int same_key(const DataIdentity *a, const DataIdentity *b) {
    return data_source_same(a, b);
}

int data_guard_begin(DataGuard *g, DataIdentity *ids, int n, char err[ABL_ERR_MAX]) {
    memset(g, 0, sizeof *g);
    g->now = ids;
    g->n = n;
    g->was = calloc((size_t)n + 1, sizeof *g->was);
    g->journaled = calloc((size_t)n + 1, 1);
    g->changed = calloc((size_t)n + 1, 1);
    if (!g->was || !g->journaled || !g->changed) {
        snprintf(err, ABL_ERR_MAX, "out of memory");
        return -1;
    }
    return 0;
}

/* "data changed since the sweep began: OLD, now NEW" */
static void describe_change(const DataIdentity *was, const DataIdentity *now, const char *since,
                            char *out, size_t n) {
    char a[ABL_PATH_MAX + 256], b[ABL_PATH_MAX + 256];
    data_identity_describe(was, a, sizeof a);
    data_identity_describe(now, b, sizeof b);
    snprintf(out, n, "data changed since %s: it was %s, it is now %s", since, a, b);
}

/* One journaled (or recorded) identity against ours: 0 same or accepted, -1 refused. */
static int compare_one(DataGuard *g, int i, const DataIdentity *was, int accept, const char *since,
                       const char *how, char err[ABL_ERR_MAX]) {
    if (data_identity_same(was, &g->now[i])) {
        g->journaled[i] = 1;
        return 0;
    }
    char msg[3 * ABL_PATH_MAX];
    describe_change(was, &g->now[i], since, msg, sizeof msg);
    if (!accept) {
        snprintf(err, ABL_ERR_MAX,
                 "%s; refused (%s, or --accept-data-change to go on with the new data)", msg, how);
        return -1;
    }
    log_warn("%s; accepted (--accept-data-change): unfinished runs on it restart "
             "from step 0, and /runs puts runs of each data in their own groups",
             msg);
    g->changed[i] = 1;
    g->was[i] = *was;
    return 0;
}

int data_guard_compare(DataGuard *g, const DataIdentity *journaled, int n, int accept,
                       char err[ABL_ERR_MAX]) {
    for (int i = 0; i < g->n; i++) {
        const DataIdentity *last = NULL; /* the latest identity recorded for the source */
        for (int k = 0; k < n; k++)
            if (same_key(&journaled[k], &g->now[i])) last = &journaled[k];
        if (last && compare_one(g, i, last, accept, "the sweep began",
                                "restore it, use a new output or --force", err) != 0)
            return -1;
    }
    return 0;
}

/* OUT.h5.d/join/data: one line per source, "sha256 bytes vocab vocab_size splits tokenizer
 * path" (the path last: it may hold spaces); splits is val_fraction, or val_fraction:
 * test_fraction with a test split (a line without one reads as 0). */
static void join_data_path(const char *out, char *buf, size_t n) {
    snprintf(buf, n, "%s.d/join/data", out);
}

static int parse_line(const char *line, DataIdentity *id) {
    memset(id, 0, sizeof *id);
    int used = 0;
    char splits[80], *colon;
    if (sscanf(line, "%64s %lld %64s %d %79s %7s %n", id->sha256, &id->bytes, id->vocab,
               &id->vocab_size, splits, id->tokenizer, &used) < 6 ||
        !used)
        return -1;
    id->val_fraction = strtod(splits, &colon);
    if (*colon == ':') id->test_fraction = strtod(colon + 1, NULL);
    snprintf(id->path, sizeof id->path, "%s", line + used);
    return 0;
}

static int read_join_data(const char *out, DataIdentity **ids, int *n) {
    char path[ABL_PATH_MAX + 32], err[ABL_ERR_MAX];
    join_data_path(out, path, sizeof path);
    unsigned char *buf;
    long len;
    *ids = NULL;
    *n = 0;
    if (access(path, F_OK) != 0 || file_read_all("join data", path, &buf, &len, err) != 0)
        return -1;
    char *text = (char *)buf, *save = NULL;
    text[len > 0 ? len - 1 : 0] = '\0'; /* the last newline */
    size_t cap = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (GROW(*ids, cap, (size_t)*n + 1) != 0) break;
        if (parse_line(line, &(*ids)[*n]) == 0) (*n)++;
    }
    free(buf);
    return 0;
}

int data_guard_shared_check(DataGuard *g, const char *out_path, int accept, char err[ABL_ERR_MAX]) {
    DataIdentity *ids;
    int n, rc = 0;
    if (read_join_data(out_path, &ids, &n) != 0) return 0; /* the first process */
    for (int i = 0; i < g->n && rc == 0; i++)
        for (int k = 0; k < n && rc == 0; k++)
            if (same_key(&ids[k], &g->now[i]))
                rc = compare_one(g, i, &ids[k], accept, "the first process joined this sweep",
                                 "give every process the same data", err);
    free(ids);
    return rc;
}

static int write_join_data(FILE *f, void *ctx) {
    const DataGuard *g = ctx;
    for (int i = 0; i < g->n; i++) {
        const DataIdentity *d = &g->now[i];
        char splits[80];
        int k = snprintf(splits, sizeof splits, "%.17g", d->val_fraction);
        if (d->test_fraction > 0)
            snprintf(splits + k, sizeof splits - (size_t)k, ":%.17g", d->test_fraction);
        if (fprintf(f, "%s %lld %s %d %s %s %s\n", d->sha256, d->bytes, d->vocab, d->vocab_size,
                    splits, d->tokenizer, d->path) < 0)
            return -1;
    }
    return 0;
}

int data_guard_record(DataGuard *g, Journal *j, const char *join_out, int accept,
                      char err[ABL_ERR_MAX]) {
    for (int i = 0; i < g->n; i++)
        if ((!g->journaled[i] || g->changed[i]) && data_guard_append(j, &g->now[i]) != 0) {
            snprintf(err, ABL_ERR_MAX, "%s", journal_error(j));
            return -1;
        }
    if (!join_out) return 0;
    /* first writer wins: written aside, then linked into place (atomic, fails if present) */
    char path[ABL_PATH_MAX + 32], tmp[ABL_PATH_MAX + 64];
    join_data_path(join_out, path, sizeof path);
    if (access(path, F_OK) == 0) /* written since data_guard_shared_check looked */
        return data_guard_shared_check(g, join_out, accept, err);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (file_write_atomic("join data", tmp, write_join_data, g, err) != 0) return -1;
    int linked = link(tmp, path) == 0 || errno == EEXIST;
    unlink(tmp);
    if (!linked) {
        snprintf(err, ABL_ERR_MAX, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    return data_guard_shared_check(g, join_out, accept, err); /* another process was first */
}

const DataIdentity *data_guard_of(const DataGuard *g, const DataConfig *dc) {
    for (int i = 0; i < g->n; i++)
        if (same_source(&g->now[i], dc)) return &g->now[i];
    return NULL;
}

int data_guard_changed(const DataGuard *g, const DataConfig *dc) {
    for (int i = 0; i < g->n; i++)
        if (same_source(&g->now[i], dc)) return g->changed[i];
    return 0;
}

void data_guard_free(DataGuard *g) {
    free(g->now);
    free(g->was);
    free(g->journaled);
    free(g->changed);
    memset(g, 0, sizeof *g);
}

int data_guard_append(Journal *j, const DataIdentity *id) {
    char vs[16], vf[32], tf[32], bytes[32];
    snprintf(vs, sizeof vs, "%d", id->vocab_size);
    snprintf(vf, sizeof vf, "%.17g", id->val_fraction);
    snprintf(tf, sizeof tf, "%.17g", id->test_fraction);
    snprintf(bytes, sizeof bytes, "%lld", id->bytes);
    /* test_fraction only with a test split: a record without one reads as 0 */
    const char *kv[] = {"path",         id->path,  "tokenizer",     id->tokenizer,
                        "vocab",        id->vocab, "vocab_size",    vs,
                        "val_fraction", vf,        "sha256",        id->sha256,
                        "bytes",        bytes,     "test_fraction", tf};
    return journal_append_data(j, kv, id->test_fraction > 0 ? 8 : 7);
}

int data_guard_decode(const JournalRecord *rec, DataIdentity *id) {
    if (rec->type != JREC_DATA) return -1;
    memset(id, 0, sizeof *id);
    JournalKvIter it;
    const char *k, *v;
    size_t kl, vl;
    int rc, seen = 0;
    journal_kv_begin(&it, rec->payload, rec->len);
    while ((rc = journal_kv_next(&it, &k, &kl, &v, &vl)) == 1) {
        char val[ABL_PATH_MAX];
        snprintf(val, sizeof val, "%.*s", (int)vl, v);
#define KEY(name) (kl == strlen(name) && !memcmp(k, name, kl))
        if (KEY("path"))
            snprintf(id->path, sizeof id->path, "%s", val), seen |= 1;
        else if (KEY("tokenizer"))
            snprintf(id->tokenizer, sizeof id->tokenizer, "%s", val);
        else if (KEY("vocab"))
            snprintf(id->vocab, sizeof id->vocab, "%s", val);
        else if (KEY("vocab_size"))
            id->vocab_size = atoi(val);
        else if (KEY("val_fraction"))
            id->val_fraction = strtod(val, NULL);
        else if (KEY("test_fraction"))
            id->test_fraction = strtod(val, NULL);
        else if (KEY("sha256"))
            snprintf(id->sha256, sizeof id->sha256, "%s", val), seen |= 2;
        else if (KEY("bytes"))
            id->bytes = strtoll(val, NULL, 10);
#undef KEY
    }
    return rc == 0 && seen == 3 ? 0 : -1;
}

int data_guard_expect(const DataIdentity *ids, int n, const char *const *expect, int n_expect,
                      char err[ABL_ERR_MAX]) {
    for (int k = 0; k < n_expect; k++) {
        const char *sha = expect[k], *path = strchr(expect[k], '=');
        if (!path || path - sha != 64) {
            snprintf(err, ABL_ERR_MAX, "--expect-data '%s': expected SHA256=PATH", expect[k]);
            return -1;
        }
        path++;
        int i = 0;
        while (i < n && strcmp(ids[i].path, path))
            i++;
        if (i == n) {
            snprintf(err, ABL_ERR_MAX,
                     "--expect-data: the plan has no data file %s (the spec or its variables "
                     "resolve otherwise than when it was checked); nothing trained",
                     path);
            return -1;
        }
        if (strncmp(ids[i].sha256, sha, 64) != 0) {
            snprintf(err, ABL_ERR_MAX,
                     "--expect-data: %s is not the data that was checked: its SHA-256 is %s "
                     "here, the check saw %.64s (it changed since); nothing trained",
                     path, ids[i].sha256, sha);
            return -1;
        }
    }
    return 0;
}
