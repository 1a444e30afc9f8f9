#include "cache_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sha256.h"

void cache_warn_once(const char *fmt, ...) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char seen[64][65];
    static int n_seen;
    char msg[CACHE_WHY_MAX + 512], key[65];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sha256_buf_hex(msg, strlen(msg), key);
    pthread_mutex_lock(&lock);
    int repeat = 0;
    for (int i = 0; i < n_seen && !repeat; i++)
        repeat = strcmp(seen[i], key) == 0;
    if (!repeat && n_seen < 64) memcpy(seen[n_seen++], key, sizeof key);
    pthread_mutex_unlock(&lock);
    if (!repeat) log_warn("%s", msg);
}

void cache_untrusted(const struct stat *st, char *why, size_t cap) {
    why[0] = '\0';
    if (st->st_uid != geteuid() && st->st_uid != 0)
        snprintf(why, cap, "belongs to uid %lu, not to you (uid %lu)", (unsigned long)st->st_uid,
                 (unsigned long)geteuid());
    else if (st->st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, cap, "is writable by group or others (mode %04o)",
                 (unsigned)(st->st_mode & 07777));
}

/* mkdir -p, each directory it creates CACHE_DIR_MODE (narrowed by the umask, never widened) */
static int make_dirs(const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, CACHE_DIR_MODE) != 0 && errno != EEXIST) return -1;
            *s = c;
            if (!c) break;
        }
    }
    return 0;
}

/* The one warning for a directory that is not used (sub: the digests/ kind, which holds only
 * digests; else the cache directory itself); fd closed. */
static int refuse(int fd, const char *shown, const struct stat *st, const char *bad, int sub) {
    char fix[2200] = "";
    if (st && st->st_uid == geteuid()) snprintf(fix, sizeof fix, "run chmod go-w %s, or ", shown);
    cache_warn_once("cache directory %s %s: whoever can write there chooses %s, so it is not used: "
                    "data files are %s without it (%sset %s to a directory of your own that only "
                    "you can write)",
                    shown, bad,
                    sub ? "the data digests runs record"
                        : "the tokens runs train on and the data digests they record",
                    sub ? "hashed" : "tokenized and hashed", fix, CACHE_DIR_ENV);
    if (fd >= 0) close(fd);
    return -1;
}

int cache_dir_open(const char *dir, const char *sub) {
    if (make_dirs(dir) != 0) {
        cache_warn_once("cache directory %s cannot be created: %s; data files are tokenized and "
                        "hashed without it (set %s)",
                        dir, strerror(errno), CACHE_DIR_ENV);
        return -1;
    }
    /* the directory the user named may be reached through symlinks (a scratch file system);
     * below it, nothing is */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    char bad[256];
    if (dfd < 0 || fstat(dfd, &st) != 0) {
        snprintf(bad, sizeof bad, "cannot be opened: %s", strerror(errno));
        return refuse(dfd, dir, NULL, bad, 0);
    }
    cache_untrusted(&st, bad, sizeof bad);
    if (bad[0]) return refuse(dfd, dir, &st, bad, 0);
    if (!sub) return dfd;

    char shown[4096 + 256];
    snprintf(shown, sizeof shown, "%s/%s", dir, sub);
    if (mkdirat(dfd, sub, CACHE_DIR_MODE) != 0 && errno != EEXIST) {
        snprintf(bad, sizeof bad, "cannot be created: %s", strerror(errno));
        return refuse(dfd, shown, NULL, bad, 1);
    }
    int fd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        struct stat lst;
        if (fstatat(dfd, sub, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode))
            snprintf(bad, sizeof bad, "is a symbolic link");
        else
            snprintf(bad, sizeof bad, "cannot be opened: %s", strerror(e));
        return refuse(dfd, shown, NULL, bad, 1);
    }
    close(dfd);
    if (fstat(fd, &st) != 0) {
        snprintf(bad, sizeof bad, "cannot be opened: %s", strerror(errno));
        return refuse(fd, shown, NULL, bad, 1);
    }
    cache_untrusted(&st, bad, sizeof bad);
    if (bad[0]) return refuse(fd, shown, &st, bad, 1);
    return fd;
}

int cache_entry_open(int dfd, const char *name, struct stat *out, char *why, size_t cap) {
    why[0] = '\0';
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ELOOP)
            snprintf(why, cap, "is a symbolic link");
        else if (e != ENOENT)
            snprintf(why, cap, "cannot be opened: %s", strerror(e));
        errno = e;
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(why, cap, "is not a regular file");
        errno = EINVAL;
        return -1;
    }
    cache_untrusted(&st, why, cap);
    if (why[0]) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    if (out) *out = st;
    return fd;
}
