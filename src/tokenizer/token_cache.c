#include "util/log.h"
#include "token_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/sha256.h"
#include "token_file.h"

/* Modes of what the cache creates: no group/other write, whatever the umask (mode bits given
 * to open/mkdir can only be narrowed by the umask). */
#define CACHE_FILE_MODE 0644
#define CACHE_DIR_MODE  0755
/* A warning names the directory (up to 2 KB) twice, and a file in it */
#define WHY_MAX 6144

void token_cache_dir(char *out, size_t cap) {
    const char *dir = getenv(TOKEN_CACHE_ENV), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    if (dir && dir[0])
        snprintf(out, cap, "%s", dir);
    else if (xdg && xdg[0])
        snprintf(out, cap, "%s/ablate", xdg);
    else if (home && home[0])
        snprintf(out, cap, "%s/.cache/ablate", home);
    else if (cap)
        out[0] = '\0';
}

/* Each distinct warning once per process: a sweep's worker loads its data for every run, and
 * a directory that is refused once is refused each time. */
static void warn_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn_once(const char *fmt, ...) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static char seen[32][65];
    static int n_seen;
    char msg[WHY_MAX + 512], key[65];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sha256_buf_hex(msg, strlen(msg), key);
    pthread_mutex_lock(&lock);
    int repeat = 0;
    for (int i = 0; i < n_seen && !repeat; i++)
        repeat = strcmp(seen[i], key) == 0;
    if (!repeat && n_seen < 32) memcpy(seen[n_seen++], key, sizeof key);
    pthread_mutex_unlock(&lock);
    if (!repeat) log_warn("%s", msg);
}

/* mkdir -p, each directory it creates without group/other write */
static int make_dirs(const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return -1;
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

/* Why a file or directory others could have written is not trusted, or "" when it may be:
 * it must belong to this user or to root and have no group/other write bit (with a default
 * ACL the group bits are the ACL's mask, so a group entry with write shows too). */
static void untrusted(const struct stat *st, char *why, size_t cap) {
    why[0] = '\0';
    if (st->st_uid != geteuid() && st->st_uid != 0)
        snprintf(why, cap, "belongs to uid %lu, not to you (uid %lu)", (unsigned long)st->st_uid,
                 (unsigned long)geteuid());
    else if (st->st_mode & (S_IWGRP | S_IWOTH))
        snprintf(why, cap, "is writable by group or others (mode %04o)",
                 (unsigned)(st->st_mode & 07777));
}

/* Opens the cache directory (creating it) for the *at calls below, so the directory checked is
 * the one used; -1 with the warning's reason and advice in why. */
static int open_dir(const char *dir, char *why, size_t cap) {
    if (make_dirs(dir) != 0) {
        snprintf(why, cap, "token cache directory %s cannot be created: %s (set %s)", dir,
                 strerror(errno), TOKEN_CACHE_ENV);
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dfd < 0 || fstat(dfd, &st) != 0) {
        snprintf(why, cap, "token cache directory %s cannot be opened: %s (set %s)", dir,
                 strerror(errno), TOKEN_CACHE_ENV);
        if (dfd >= 0) close(dfd);
        return -1;
    }
    char bad[160];
    untrusted(&st, bad, sizeof bad);
    if (bad[0]) {
        char fix[2200] = "";
        if (st.st_uid == geteuid()) snprintf(fix, sizeof fix, "run chmod go-w %s, or ", dir);
        snprintf(why, cap,
                 "token cache directory %s %s: whoever can write there chooses the tokens a run "
                 "trains on, so it is not used (%sset %s to a directory of your own that only "
                 "you can write)",
                 dir, bad, fix, TOKEN_CACHE_ENV);
        close(dfd);
        return -1;
    }
    return dfd;
}

/* The verification block: the tag, then the ids', the text's and the vocabulary's SHA-256. */
static int format_block(char *out, size_t cap, const char *ids_hex, const char *text_hex,
                        const char *vocab_hex) {
    return snprintf(out, cap, "%sids %s\ntext %s\nvocab %s\n", TOKEN_CACHE_TAG, ids_hex, text_hex,
                    vocab_hex);
}

/* The 64 hex digits after "key " at *p, into out; advances *p past the line. */
static int field(const char **p, const char *key, char out[65]) {
    size_t k = strlen(key);
    if (strncmp(*p, key, k) != 0 || (*p)[k] != ' ') return -1;
    const char *h = *p + k + 1;
    if (strspn(h, "0123456789abcdef") < 64 || h[64] != '\n') return -1;
    memcpy(out, h, 64);
    out[64] = '\0';
    *p = h + 65;
    return 0;
}

static uint32_t get_u32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* NULL when buf is the cache entry of the text text_hex under the vocabulary vocab_hex whose
 * ids match their digest; else what is wrong (for "token cache file X <what>"). */
static const char *verify(const unsigned char *buf, long len, const char *text_hex,
                          const char *vocab_hex, char *why, size_t cap) {
    if (len < TOKEN_FILE_HEADER_BYTES) {
        snprintf(why, cap, "is truncated: %ld bytes, shorter than the .bin header", len);
        return why;
    }
    if (get_u32(buf) != TOKEN_FILE_MAGIC || get_u32(buf + 4) != TOKEN_FILE_VERSION)
        return "is not an llm.c .bin token file (bad magic or version)";
    /* the header's bytes past the llm.c fields and the block are zero; so no string runs off */
    char block[TOKEN_FILE_HEADER_BYTES];
    memcpy(block, buf + TOKEN_CACHE_BLOCK_AT, TOKEN_FILE_HEADER_BYTES - TOKEN_CACHE_BLOCK_AT);
    block[TOKEN_FILE_HEADER_BYTES - TOKEN_CACHE_BLOCK_AT] = '\0';
    if (strncmp(block, TOKEN_CACHE_TAG, strlen(TOKEN_CACHE_TAG)) != 0) {
        int zero = 1;
        for (int i = 12; i < TOKEN_FILE_HEADER_BYTES && zero; i++)
            zero = buf[i] == 0;
        return zero ? "is in the old format, without digests to verify it"
                    : "has a header that is not a token cache's";
    }
    char ids_hex[65], file_text[65], file_vocab[65];
    const char *p = block + strlen(TOKEN_CACHE_TAG);
    if (field(&p, "ids", ids_hex) || field(&p, "text", file_text) || field(&p, "vocab", file_vocab))
        return "has a damaged verification header";
    if (strcmp(file_vocab, vocab_hex) != 0) {
        snprintf(why, cap, "was built for another vocabulary (%.16s, not %.16s)", file_vocab,
                 vocab_hex);
        return why;
    }
    if (strcmp(file_text, text_hex) != 0) {
        snprintf(why, cap, "holds the tokens of another text (SHA-256 %.16s..., not %.16s...)",
                 file_text, text_hex);
        return why;
    }
    long count = (long)(int32_t)get_u32(buf + 8);
    if (count < 0 || len != TOKEN_FILE_HEADER_BYTES + 2 * count) {
        snprintf(why, cap, "is truncated or damaged: %ld bytes for the %ld tokens it declares", len,
                 count);
        return why;
    }
    char got[65];
    sha256_buf_hex(buf + TOKEN_FILE_HEADER_BYTES, (size_t)(len - TOKEN_FILE_HEADER_BYTES), got);
    if (strcmp(got, ids_hex) != 0) return "has ids that do not match their digest (damaged)";
    return NULL;
}

enum { ENTRY_HIT, ENTRY_ABSENT, ENTRY_BAD };

/* Reads and verifies the entry `name` in the directory dfd: ENTRY_HIT with the ids, or
 * ENTRY_ABSENT, or ENTRY_BAD with what is wrong in why. The checks are on the file opened
 * (fstat), not on a name that could be swapped meanwhile. */
static int read_entry(int dfd, const char *name, const Bpe *b, const char *text_hex, int32_t **ids,
                      long *n, char *why, size_t cap) {
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return ENTRY_ABSENT;
        if (errno == ELOOP)
            snprintf(why, cap, "is a symbolic link");
        else
            snprintf(why, cap, "cannot be opened: %s", strerror(errno));
        return ENTRY_BAD;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(why, cap, "is not a regular file");
        return ENTRY_BAD;
    }
    untrusted(&st, why, cap);
    if (why[0]) {
        close(fd);
        return ENTRY_BAD;
    }
    long len = (long)st.st_size, got = 0;
    unsigned char *buf = malloc((size_t)(len > 0 ? len : 1));
    while (buf && got < len) {
        ssize_t r = read(fd, buf + got, (size_t)(len - got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += r;
    }
    close(fd);
    if (!buf || got != len) {
        free(buf);
        snprintf(why, cap, "cannot be read whole");
        return ENTRY_BAD;
    }
    const char *bad = verify(buf, len, text_hex, bpe_vocab_digest(b), why, cap);
    char err[ABL_ERR_MAX];
    if (!bad && token_file_parse(name, buf, len, bpe_vocab_size(b), ids, n, err) != 0)
        bad = "has an id out of the vocabulary's range";
    free(buf);
    if (bad) {
        if (bad != why) snprintf(why, cap, "%s", bad);
        return ENTRY_BAD;
    }
    return ENTRY_HIT;
}

/* Writes the entry: a private temporary file, fsync'd, renamed over the name, the directory
 * fsync'd. 0, or -1 with a message in err (cap bytes). */
static int write_entry(int dfd, const char *dir, const char *name, const int32_t *ids, long n,
                       const char *text_hex, const char *vocab_hex, char *err, size_t cap) {
    if (n > INT32_MAX) {
        snprintf(err, cap, "token cache file %s/%s: %ld tokens do not fit a .bin", dir, name, n);
        return -1;
    }
    size_t size = TOKEN_FILE_HEADER_BYTES + 2 * (size_t)n;
    unsigned char *buf = calloc(size, 1);
    if (!buf) {
        snprintf(err, cap, "token cache file %s/%s: out of memory", dir, name);
        return -1;
    }
    const uint32_t head[3] = {TOKEN_FILE_MAGIC, TOKEN_FILE_VERSION, (uint32_t)n};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++)
            buf[4 * i + k] = (unsigned char)(head[i] >> (8 * k));
    unsigned char *p = buf + TOKEN_FILE_HEADER_BYTES;
    for (long i = 0; i < n; i++) { /* GPT-2's ids are below 65536: bpe_encode's output */
        p[2 * i] = (unsigned char)(ids[i] & 0xFF);
        p[2 * i + 1] = (unsigned char)((ids[i] >> 8) & 0xFF);
    }
    char ids_hex[65], block[TOKEN_FILE_HEADER_BYTES];
    sha256_buf_hex(p, 2 * (size_t)n, ids_hex);
    int k = format_block(block, sizeof block, ids_hex, text_hex, vocab_hex);
    memcpy(buf + TOKEN_CACHE_BLOCK_AT, block, (size_t)k);

    static unsigned serial; /* distinct names for several writes from one process */
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", name, (long)getpid(), serial++);
    int fd =
        openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, CACHE_FILE_MODE);
    int rc = fd >= 0 ? 0 : -1, e = errno;
    for (size_t done = 0; rc == 0 && done < size;) {
        ssize_t w = write(fd, buf + done, size - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            rc = -1, e = w < 0 ? errno : EIO;
        else
            done += (size_t)w;
    }
    if (rc == 0 && fsync(fd) != 0) rc = -1, e = errno;
    if (fd >= 0 && close(fd) != 0 && rc == 0) rc = -1, e = errno;
    if (rc == 0 && renameat(dfd, tmp, dfd, name) != 0) rc = -1, e = errno;
    if (rc == 0 && fsync(dfd) != 0) rc = -1, e = errno; /* the rename is durable */
    free(buf);
    if (rc != 0) {
        if (fd >= 0) unlinkat(dfd, tmp, 0);
        snprintf(err, cap, "token cache file %s/%s: cannot write: %s", dir, name, strerror(e));
        return -1;
    }
    return 0;
}

long token_cache_encode(Bpe *b, const char *data_path, const unsigned char *text, size_t len,
                        const char *text_sha256, int32_t **ids, char err[ABL_ERR_MAX]) {
    char dir[2048], name[256], lock_name[272], hex[65], why[WHY_MAX];
    long n = -1;
    int dfd = -1, fd = -1, st;
    if (text_sha256 && strlen(text_sha256) == 64)
        memcpy(hex, text_sha256, 65);
    else
        sha256_buf_hex(text, len, hex);
    token_cache_dir(dir, sizeof dir);
    const char *vocab_hex = bpe_vocab_digest(b);
    /* 64 bits of the vocabulary's digest tell vocabularies apart; the file holds all 256 */
    snprintf(name, sizeof name, "gpt2-%s-%.16s.bin", hex, vocab_hex);
    snprintf(lock_name, sizeof lock_name, "%s.lock", name);
    if (!dir[0])
        snprintf(why, sizeof why, "no token cache directory (no $HOME; set %s)", TOKEN_CACHE_ENV);
    else
        dfd = open_dir(dir, why, sizeof why);
    if (dfd < 0) {
        warn_once("%s; tokenizing %s without the cache", why, data_path);
        n = bpe_encode(b, text, len, ids);
        goto done;
    }
    st = read_entry(dfd, name, b, hex, ids, &n, why, sizeof why);
    if (st == ENTRY_HIT) goto done;
    /* one process tokenizes; the others wait here and then read its file, so a bad entry is
     * reported (and replaced) by the one that finds it under the lock, once */
    fd = openat(dfd, lock_name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, CACHE_FILE_MODE);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0) st = read_entry(dfd, name, b, hex, ids, &n, why, sizeof why);
    if (st != ENTRY_HIT) {
        if (st == ENTRY_BAD)
            warn_once("token cache file %s/%s %s; not using it: tokenizing %s again and "
                      "replacing it",
                      dir, name, why, data_path);
        n = bpe_encode(b, text, len, ids);
        char werr[WHY_MAX];
        if (n >= 0 && write_entry(dfd, dir, name, *ids, n, hex, vocab_hex, werr, sizeof werr) != 0)
            warn_once("%s; %s will be tokenized again next time", werr, data_path);
    }
done:
    if (fd >= 0) close(fd); /* releases the lock */
    if (dfd >= 0) close(dfd);
    if (n < 0) snprintf(err, ABL_ERR_MAX, "data file %s: out of memory tokenizing it", data_path);
    return n;
}
