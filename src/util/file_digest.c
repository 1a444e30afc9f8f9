#include "file_digest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "file_io.h"
#include "sha256.h"

/* The cache entry's name: the identity of the file on disk. */
static int entry_path(const char *cache_dir, const struct stat *st, char *out, size_t n) {
    if (!cache_dir || !cache_dir[0]) return -1;
    int k =
        snprintf(out, n, "%s/%s/%llx-%llx-%lld-%lld.%09ld-%lld.%09ld", cache_dir,
                 FILE_DIGEST_SUBDIR, (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
                 (long long)st->st_size, (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec,
                 (long long)st->st_ctim.tv_sec, (long)st->st_ctim.tv_nsec);
    return k > 0 && (size_t)k < n ? 0 : -1;
}

static int same_identity(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int lookup(const char *entry, char hex[65]) {
    FILE *f = fopen(entry, "rb");
    if (!f) return -1;
    char line[80] = "";
    int ok = fgets(line, sizeof line, f) && strspn(line, "0123456789abcdef") == 64;
    fclose(f);
    if (!ok) return -1;
    memcpy(hex, line, 64);
    hex[64] = '\0';
    return 0;
}

static int write_hex(FILE *f, void *ctx) {
    return fprintf(f, "%s\n", (const char *)ctx) < 0 ? -1 : 0;
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

/* A cache that cannot be written costs a hash next time, nothing else: no error. */
static void store(const char *cache_dir, const char *entry, const char hex[65]) {
    char dir[4096 + 16], err[ABL_ERR_MAX];
    snprintf(dir, sizeof dir, "%s/%s", cache_dir, FILE_DIGEST_SUBDIR);
    mkdir(cache_dir, 0777);
    mkdir(dir, 0777);
    file_write_atomic("digest cache", entry, write_hex, (void *)hex, err);
}

int file_read_digest(const char *what, const char *path, const char *cache_dir, unsigned char **out,
                     long *len, char hex[65], int *cached, char err[ABL_ERR_MAX]) {
    struct stat before, after;
    if (cached) *cached = 0;
    if (file_read_all_stat(what, path, out, len, &before, &after, err) != 0) return -1;
    char entry[4096 + 128];
    int stable = same_identity(&before, &after) && S_ISREG(after.st_mode) &&
                 (long long)after.st_size == (long long)*len;
    int have_entry = stable && entry_path(cache_dir, &after, entry, sizeof entry) == 0;
    if (have_entry && lookup(entry, hex) == 0) {
        if (cached) *cached = 1;
        return 0;
    }
    sha256_buf_hex(*out, (size_t)*len, hex);
    if (have_entry && !racy(&after)) store(cache_dir, entry, hex);
    return 0;
}

int file_digest(const char *path, const char *cache_dir, char hex[65], long long *size, int *cached,
                char err[ABL_ERR_MAX]) {
    struct stat st;
    char entry[4096 + 128];
    if (cached) *cached = 0;
    if (stat(path, &st) != 0) {
        snprintf(err, ABL_ERR_MAX, "data file %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    *size = (long long)st.st_size;
    int have_entry = S_ISREG(st.st_mode) && entry_path(cache_dir, &st, entry, sizeof entry) == 0;
    if (have_entry && lookup(entry, hex) == 0) {
        if (cached) *cached = 1;
        return 0;
    }
    /* streamed, not read whole: the check needs no memory the size of the file */
    if (sha256_file(path, hex, size) != 0) {
        snprintf(err, ABL_ERR_MAX, "data file %s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    struct stat now;
    if (have_entry && stat(path, &now) == 0 && same_identity(&st, &now) && !racy(&now))
        store(cache_dir, entry, hex);
    return 0;
}
