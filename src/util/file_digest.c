#include "file_digest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache_dir.h"
#include "file_io.h"
#include "sha256.h"

/* An entry's text is a few short lines; anything longer is not one. */
#define ENTRY_MAX 1024

/* The file's identity on disk, which is also its entry's name. */
static int identity(const struct stat *st, char *out, size_t n) {
    int k = snprintf(out, n, "%llx-%llx-%lld-%lld.%09ld-%lld.%09ld", (unsigned long long)st->st_dev,
                     (unsigned long long)st->st_ino, (long long)st->st_size,
                     (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec,
                     (long long)st->st_ctim.tv_sec, (long)st->st_ctim.tv_nsec);
    return k > 0 && (size_t)k < n ? 0 : -1;
}

static int same_identity(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* The entry of the file `id` with digest hex: the tag, "file <id>", "sha256 <hex>" and "check
 * <SHA-256 of the lines above>". The length, or -1. */
static int format_entry(char *out, size_t cap, const char *id, const char *hex) {
    int k = snprintf(out, cap, "%sfile %s\nsha256 %.64s\n", FILE_DIGEST_TAG, id, hex);
    if (k < 0 || (size_t)k + 7 + 65 >= cap) return -1;
    char check[65];
    sha256_buf_hex(out, (size_t)k, check);
    return k + snprintf(out + k, cap - (size_t)k, "check %s\n", check);
}

static int is_hex64(const char *s) {
    return strspn(s, "0123456789abcdef") >= 64;
}

enum { ENTRY_HIT, ENTRY_ABSENT, ENTRY_BAD };

/* Reads the entry of the file `id` from the digest directory dfd: ENTRY_HIT with its digest in
 * hex, ENTRY_ABSENT, or ENTRY_BAD with what is wrong in why. An entry is used only when it is,
 * byte for byte, the one this process would write for this file and this digest: an entry
 * copied or renamed from another file names that file, a damaged one fails its check line. */
static int lookup(int dfd, const char *id, char hex[65], char *why, size_t cap) {
    int fd = cache_entry_open(dfd, id, NULL, why, cap);
    if (fd < 0) return errno == ENOENT && !why[0] ? ENTRY_ABSENT : ENTRY_BAD;
    char text[ENTRY_MAX + 1], want[ENTRY_MAX + 1];
    long len = 0;
    for (;;) {
        ssize_t r = read(fd, text + len, (size_t)(ENTRY_MAX + 1 - len));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += r;
        if (len > ENTRY_MAX) break;
    }
    close(fd);
    if (len > ENTRY_MAX) {
        snprintf(why, cap, "is not a digest cache entry (longer than %d bytes)", ENTRY_MAX);
        return ENTRY_BAD;
    }
    text[len] = '\0';
    size_t tag = strlen(FILE_DIGEST_TAG);
    if (len == 65 && is_hex64(text) && text[64] == '\n') {
        snprintf(why, cap, "is in the old format, without the identity of the file it is for");
        return ENTRY_BAD;
    }
    if (strncmp(text, FILE_DIGEST_TAG, tag) != 0 || strncmp(text + tag, "file ", 5) != 0) {
        snprintf(why, cap, "is not a digest cache entry");
        return ENTRY_BAD;
    }
    const char *named = text + tag + 5, *nl = strchr(named, '\n');
    if (!nl || (size_t)(nl - named) != strlen(id) || strncmp(named, id, strlen(id)) != 0) {
        int n = nl ? (int)(nl - named) : 0;
        snprintf(why, cap, "names another file (%.*s)", n > 128 ? 128 : n, named);
        return ENTRY_BAD;
    }
    const char *h = nl + 1;
    if (strncmp(h, "sha256 ", 7) != 0 || !is_hex64(h + 7)) {
        snprintf(why, cap, "is damaged (no digest line)");
        return ENTRY_BAD;
    }
    int k = format_entry(want, sizeof want, id, h + 7);
    if (k != len || memcmp(want, text, (size_t)len) != 0) {
        snprintf(why, cap, "is damaged (its check line does not match)");
        return ENTRY_BAD;
    }
    memcpy(hex, h + 7, 64);
    hex[64] = '\0';
    return ENTRY_HIT;
}

static int write_text(FILE *f, void *ctx) {
    return fputs((const char *)ctx, f) < 0 ? -1 : 0;
}

/* A file changed within the last FILE_DIGEST_RACY_SECONDS is not cached: a rewrite of
 * the same size within one tick of the file system's clock (a few ms) would keep its
 * mtime and ctime, so its identity on disk could name two contents (git's "racily clean"
 * entries). Such a file is hashed at each load until it has been still that long. */
static int racy(const struct stat *st) {
    time_t now = time(NULL);
    time_t last = st->st_mtim.tv_sec > st->st_ctim.tv_sec ? st->st_mtim.tv_sec : st->st_ctim.tv_sec;
    return now - last < FILE_DIGEST_RACY_SECONDS;
}

/* The cache as one lookup: the digest directory opened (and checked) once. */
typedef struct {
    int dfd; /* -1: no cache (none named, or refused with a warning) */
    char shown[4096 + 32];
    char id[160];
    int state; /* ENTRY_* of the lookup */
} Lookup;

static void lookup_start(Lookup *l, const char *cache_dir, const char *path, const struct stat *st,
                         char hex[65]) {
    char why[CACHE_WHY_MAX];
    l->dfd = -1;
    l->state = ENTRY_ABSENT;
    if (!cache_dir || !cache_dir[0] || identity(st, l->id, sizeof l->id) != 0) return;
    snprintf(l->shown, sizeof l->shown, "%s/%s", cache_dir, FILE_DIGEST_SUBDIR);
    if ((l->dfd = cache_dir_open(cache_dir, FILE_DIGEST_SUBDIR)) < 0) return;
    l->state = lookup(l->dfd, l->id, hex, why, sizeof why);
    if (l->state == ENTRY_BAD)
        cache_warn_once("data digest cache entry %s/%s %s; not using it: hashing %s again and "
                        "replacing the entry",
                        l->shown, l->id, why, path);
}

/* After a miss: the digest computed is stored when the file was still (and not racy); a bad
 * entry that cannot be replaced is removed. A cache that cannot be written costs a hash next
 * time, nothing else: no error. */
static void lookup_end(Lookup *l, int may_store, const char hex[65]) {
    if (l->dfd < 0) return;
    char text[ENTRY_MAX + 1], err[ABL_ERR_MAX];
    int stored = 0;
    if (l->state != ENTRY_HIT && may_store && format_entry(text, sizeof text, l->id, hex) > 0)
        stored = file_write_atomic_at("digest cache entry", l->dfd, l->id, l->shown,
                                      CACHE_FILE_MODE, write_text, text, err) == 0;
    if (l->state == ENTRY_BAD && !stored) unlinkat(l->dfd, l->id, 0);
    close(l->dfd);
    l->dfd = -1;
}

int file_read_digest(const char *what, const char *path, const char *cache_dir, unsigned char **out,
                     long *len, char hex[65], int *cached, char err[ABL_ERR_MAX]) {
    struct stat before, after;
    if (cached) *cached = 0;
    if (file_read_all_stat(what, path, out, len, &before, &after, err) != 0) return -1;
    int stable = same_identity(&before, &after) && S_ISREG(after.st_mode) &&
                 (long long)after.st_size == (long long)*len;
    Lookup l = {.dfd = -1};
    if (stable) lookup_start(&l, cache_dir, path, &after, hex);
    if (l.state == ENTRY_HIT) {
        if (cached) *cached = 1;
    } else {
        sha256_buf_hex(*out, (size_t)*len, hex);
    }
    lookup_end(&l, !racy(&after), hex);
    return 0;
}

int file_digest(const char *path, const char *cache_dir, char hex[65], long long *size, int *cached,
                char err[ABL_ERR_MAX]) {
    struct stat st;
    if (cached) *cached = 0;
    if (stat(path, &st) != 0) {
        snprintf(err, ABL_ERR_MAX, "data file %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    *size = (long long)st.st_size;
    Lookup l = {.dfd = -1};
    if (S_ISREG(st.st_mode)) lookup_start(&l, cache_dir, path, &st, hex);
    if (l.state == ENTRY_HIT) {
        if (cached) *cached = 1;
        lookup_end(&l, 0, hex);
        return 0;
    }
    /* streamed, not read whole: the check needs no memory the size of the file */
    if (sha256_file(path, hex, size) != 0) {
        snprintf(err, ABL_ERR_MAX, "data file %s: cannot read: %s", path, strerror(errno));
        lookup_end(&l, 0, hex);
        return -1;
    }
    struct stat now;
    lookup_end(&l, stat(path, &now) == 0 && same_identity(&st, &now) && !racy(&now), hex);
    return 0;
}
