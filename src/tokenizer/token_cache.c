#include "util/log.h"
#include "token_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/file_io.h"
#include "token_file.h"

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

/* mkdir -p */
static int make_dirs(const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return -1;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
            *s = c;
            if (!c) break;
        }
    }
    return 0;
}

/* Reads a cached token file; 0 on a hit, -1 when absent or unusable (it is then rewritten). */
static int read_cached(const char *path, int vocab, int32_t **ids, long *n) {
    unsigned char *buf;
    long len;
    char err[ABL_ERR_MAX];
    if (access(path, F_OK) != 0) return -1;
    if (file_read_all("token cache", path, &buf, &len, err) != 0) return -1;
    int rc = token_file_parse(path, buf, len, vocab, ids, n, err);
    free(buf);
    return rc;
}

long token_cache_encode(Bpe *b, const char *data_path, const unsigned char *text, size_t len,
                        const char *text_sha256, int32_t **ids, char err[ABL_ERR_MAX]) {
    char dir[2048], path[2304], lock_path[2320], hex[65];
    long n = -1;
    if (text_sha256 && strlen(text_sha256) == 64)
        memcpy(hex, text_sha256, 65);
    else
        sha256_buf_hex(text, len, hex);
    token_cache_dir(dir, sizeof dir);
    /* 64 bits of the vocabulary's digest tell vocabularies apart */
    snprintf(path, sizeof path, "%s/gpt2-%s-%.16s.bin", dir, hex, bpe_vocab_digest(b));
    snprintf(lock_path, sizeof lock_path, "%s.lock", path);
    int vocab = bpe_vocab_size(b);
    if (!dir[0] || make_dirs(dir) != 0) {
        log_warn("no usable token cache directory (%s%s; set %s); "
                 "tokenizing %s without caching it",
                 dir[0] ? dir : "no $HOME", dir[0] ? ": cannot create it" : "", TOKEN_CACHE_ENV,
                 data_path);
        n = bpe_encode(b, text, len, ids);
        goto done;
    }
    if (read_cached(path, vocab, ids, &n) == 0) return n;
    /* one process tokenizes; the others wait here and then read its file */
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd >= 0 && read_cached(path, vocab, ids, &n) == 0) {
        close(fd);
        return n;
    }
    n = bpe_encode(b, text, len, ids);
    if (n >= 0) {
        char werr[ABL_ERR_MAX];
        if (token_file_write("token cache", path, *ids, n, werr) != 0)
            log_warn("%s; %s will be tokenized again next time", werr, data_path);
    }
    if (fd >= 0) close(fd); /* releases the lock */
done:
    if (n < 0) snprintf(err, ABL_ERR_MAX, "data file %s: out of memory tokenizing it", data_path);
    return n;
}
