#include "file_io.h"

#include "grow.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int file_read_all(const char *what, const char *path, unsigned char **out, long *out_len,
                  char err[ABL_ERR_MAX]) {
    return file_read_all_stat(what, path, out, out_len, NULL, NULL, err);
}

int file_read_all_stat(const char *what, const char *path, unsigned char **out, long *out_len,
                       struct stat *before, struct stat *after, char err[ABL_ERR_MAX]) {
    *out = NULL;
    *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, ABL_ERR_MAX, "%s %s: cannot open: %s", what, path, strerror(errno));
        return -1;
    }
    if (before && fstat(fileno(f), before) != 0) memset(before, 0, sizeof *before);
    size_t cap = 1 << 20, len = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        snprintf(err, ABL_ERR_MAX, "%s %s: out of memory", what, path);
        return -1;
    }
    for (;;) {
        if (len == cap) {
            if (cap > (size_t)LONG_MAX / 2 || GROW(buf, cap, len + 1) != 0) {
                free(buf);
                fclose(f);
                snprintf(err, ABL_ERR_MAX, "%s %s: out of memory reading it (%zu bytes so far)",
                         what, path, len);
                return -1;
            }
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        snprintf(err, ABL_ERR_MAX, "%s %s: cannot read: %s", what, path,
                 e ? strerror(e) : "read error");
        return -1;
    }
    if (after && fstat(fileno(f), after) != 0) memset(after, 0, sizeof *after);
    fclose(f);
    *out = buf;
    *out_len = (long)len;
    return 0;
}

int file_write_atomic(const char *what, const char *path, int (*write)(FILE *f, void *ctx),
                      void *ctx, char err[ABL_ERR_MAX]) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path) >=
             (int)sizeof dir) {
        snprintf(err, ABL_ERR_MAX, "%s %s: path too long", what, path);
        errno = ENAMETOOLONG;
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        int e = errno;
        snprintf(err, ABL_ERR_MAX, "%s %s: cannot create it: %s", what, path, strerror(e));
        errno = e;
        return -1;
    }
    int rc = file_write_atomic_at(what, dfd, slash ? slash + 1 : path, path, 0666, write, ctx, err);
    int e = errno;
    close(dfd);
    errno = e;
    return rc;
}

int file_write_atomic_at(const char *what, int dfd, const char *name, const char *shown,
                         unsigned mode, int (*write)(FILE *f, void *ctx), void *ctx,
                         char err[ABL_ERR_MAX]) {
    char tmp[4096];
    static unsigned serial; /* distinct names for several writes from one process */
    int fd = -1, e = 0;
    /* a name left by a dead process of the same pid (or a process of the same pid on another
     * node of a shared file system) is skipped, never reused */
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        int n = snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", name, (long)getpid(), serial++);
        if (n < 0 || (size_t)n >= sizeof tmp) {
            snprintf(err, ABL_ERR_MAX, "%s %s: path too long", what, shown);
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
        e = errno;
        if (fd < 0 && e != EEXIST) break;
    }
    /* +: a writer may read its bytes back (checkpoint CRCs) */
    FILE *f = fd >= 0 ? fdopen(fd, "w+b") : NULL;
    if (!f) {
        if (fd >= 0) {
            e = errno;
            close(fd);
            unlinkat(dfd, tmp, 0);
        }
        snprintf(err, ABL_ERR_MAX, "%s %s: cannot create %s: %s", what, shown, tmp, strerror(e));
        errno = e;
        return -1;
    }
    int rc = write(f, ctx);
    e = errno;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) rc = -1, e = errno;
    if (fclose(f) != 0 && rc == 0) rc = -1, e = errno;
    if (rc == 0 && renameat(dfd, tmp, dfd, name) != 0) rc = -1, e = errno;
    if (rc == 0 && fsync(dfd) != 0) rc = -1, e = errno; /* the rename is durable */
    if (rc != 0) {
        unlinkat(dfd, tmp, 0);
        snprintf(err, ABL_ERR_MAX, "%s %s: cannot write: %s", what, shown,
                 e ? strerror(e) : "write error");
        errno = e ? e : EIO;
        return -1;
    }
    return 0;
}

int file_write_record(FILE *f, const void *p, size_t n) {
    int fd = fileno(f);
    struct stat st;
    off_t start = -1;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) start = lseek(fd, 0, SEEK_CUR);
    if (fwrite(p, 1, n, f) == n && fflush(f) == 0) return 0;
    int e = errno ? errno : EIO;
    if (start >= 0 && ftruncate(fd, start) == 0) lseek(fd, start, SEEK_SET);
    errno = e;
    return -1;
}
