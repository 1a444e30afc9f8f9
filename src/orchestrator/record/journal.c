/* The journal's records on disk: framing (magic, type, run, length, payload, CRC-32C),
 * buffered appends, fsync, torn tails and damage, locking and the sequential and random
 * readers. What a payload holds is journal_records.c's. */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/fsutil.h"
#include "util/grow.h"
#include "util/le.h"

#if defined(__SSE4_2__) && defined(__x86_64__)
#include <nmmintrin.h>
#define JOURNAL_HW_CRC 1
#else
#define JOURNAL_HW_CRC 0
#endif

static const uint8_t MAGIC[4] = {'A', 'B', 'L', 'J'};

/* ---------------- CRC-32C ---------------- */

#if !JOURNAL_HW_CRC
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}
#endif

uint32_t journal_crc32c(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    crc = ~crc;
#if JOURNAL_HW_CRC
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
    while (n--)
        crc = _mm_crc32_u8(crc, *p++);
#else
    pthread_once(&crc_once, crc_init);
    while (n >= 8) {
        uint32_t lo = crc ^ le_get_u32(p);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
              crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
#endif
    return ~crc;
}

/* fmt has one %s for path (cut to 400 bytes so the message fits). */
static void seterr(char *err, const char *fmt, const char *path, int e) {
    if (!err) return;
    char p[404];
    size_t n = strnlen(path, 400);
    memcpy(p, path, n);
    strcpy(p + n, n == 400 ? "..." : "");
    snprintf(err, ABL_ERR_MAX, fmt, p);
    if (e == ELOOP) { /* O_NOFOLLOW met a link: say what, not "too many levels" */
        size_t l = strlen(err);
        snprintf(err + l, ABL_ERR_MAX - l,
                 ": it is a symbolic link, and ablate follows none to the files of a sweep "
                 "(replace it with the file itself)");
    } else if (e) {
        size_t l = strlen(err);
        snprintf(err + l, ABL_ERR_MAX - l, ": %s", strerror(e));
    }
}

static int write_all(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int journal_dir_for(const char *out_path, char *buf, size_t n) {
    int w = snprintf(buf, n, "%s.d", out_path);
    return (w < 0 || (size_t)w >= n) ? -1 : 0;
}

int journal_path_for(const char *out_path, char *buf, size_t n) {
    int w = snprintf(buf, n, "%s.d/journal", out_path);
    return (w < 0 || (size_t)w >= n) ? -1 : 0;
}

int journal_ensure_dir(const char *out_path, char err[ABL_ERR_MAX]) {
    char dir[ABL_PATH_MAX];
    if (journal_dir_for(out_path, dir, sizeof dir) != 0) {
        seterr(err, "%s: path too long", out_path, 0);
        return -1;
    }
    if (mkdir(dir, 0777) != 0) {
        if (errno != EEXIST) {
            seterr(err, "cannot create %s", dir, errno);
            return -1;
        }
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            seterr(err, "%s exists and is not a directory", dir, 0);
            return -1;
        }
        return 0;
    }
    if (fs_fsync_dir_of(dir) != 0) {
        seterr(err, "cannot fsync the directory of %s", dir, errno);
        return -1;
    }
    return 0;
}

/* ---------------- writer ---------------- */

struct Journal {
    int fd;
    char path[ABL_PATH_MAX];
    uint8_t *buf;
    size_t len, cap;
    uint64_t on_disk; /* bytes of whole records written to the file */
    char err[ABL_ERR_MAX];
    int failed;
};

static Journal *journal_new(int fd, const char *path, uint64_t size, char err[ABL_ERR_MAX]) {
    Journal *j = calloc(1, sizeof *j);
    if (j) j->buf = malloc(JOURNAL_BUFFER_BYTES);
    if (!j || !j->buf) {
        if (j) free(j);
        close(fd);
        seterr(err, "%s: out of memory", path, 0);
        return NULL;
    }
    j->fd = fd;
    snprintf(j->path, sizeof j->path, "%s", path);
    j->cap = JOURNAL_BUFFER_BYTES;
    j->on_disk = size;
    return j;
}

static int lock_fd(int fd, const char *path, char err[ABL_ERR_MAX]) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno == EWOULDBLOCK) {
        seterr(err, "%s is in use by another process (locked)", path, 0);
        return -1;
    }
    return 0; /* file systems without flock: carry on */
}

Journal *journal_create(const char *path, char err[ABL_ERR_MAX]) {
    if (strlen(path) >= ABL_PATH_MAX) {
        seterr(err, "%s: path too long", path, 0);
        return NULL;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) {
        seterr(err, "cannot create journal %s", path, errno);
        return NULL;
    }
    if (lock_fd(fd, path, err) != 0) {
        close(fd);
        return NULL;
    }
    if (fs_fsync_dir_of(path) != 0) {
        seterr(err, "cannot fsync the directory of %s", path, errno);
        close(fd);
        return NULL;
    }
    return journal_new(fd, path, 0, err);
}

static int do_flush(Journal *j) {
    if (j->len == 0) return 0;
    if (write_all(j->fd, j->buf, j->len) != 0) {
        int e = errno;
        /* Never leave a partial record in front of later appends. */
        if (ftruncate(j->fd, (off_t)j->on_disk) != 0) j->failed = 1;
        seterr(j->err, "cannot write journal %s", j->path, e);
        return -1;
    }
    j->on_disk += j->len;
    j->len = 0;
    return 0;
}

int journal_append2(Journal *j, int type, uint32_t run, const void *a, size_t alen, const void *b,
                    size_t blen) {
    if (j->failed) return -1;
    size_t n = alen + blen;
    if (type < 1 || type > 255 || n > JOURNAL_MAX_PAYLOAD) {
        seterr(j->err, "%s: bad record (type or payload length)", j->path, 0);
        return -1;
    }
    uint8_t head[JOURNAL_HEADER_BYTES], tail[4];
    memcpy(head, MAGIC, 4);
    head[4] = (uint8_t)type;
    le_put_u32(head + 5, run);
    le_put_u32(head + 9, (uint32_t)n);
    uint32_t crc = journal_crc32c(0, head + 4, JOURNAL_HEADER_BYTES - 4);
    if (alen) crc = journal_crc32c(crc, a, alen);
    if (blen) crc = journal_crc32c(crc, b, blen);
    le_put_u32(tail, crc);
    size_t total = JOURNAL_RECORD_OVERHEAD + n;
    if (j->len + total > j->cap && do_flush(j) != 0) return -1;
    if (total > j->cap) { /* bigger than the buffer: straight to the file */
        struct iovec iov[4] = {
            {head, sizeof head}, {(void *)a, alen}, {(void *)b, blen}, {tail, 4}};
        size_t left = total;
        int k = 0;
        while (left) {
            ssize_t w = writev(j->fd, iov + k, 4 - k);
            if (w < 0) {
                if (errno == EINTR) continue;
                int e = errno;
                if (ftruncate(j->fd, (off_t)j->on_disk) != 0) j->failed = 1;
                seterr(j->err, "cannot write journal %s", j->path, e);
                return -1;
            }
            left -= (size_t)w;
            while (k < 4 && (size_t)w >= iov[k].iov_len)
                w -= (ssize_t)iov[k++].iov_len;
            if (k < 4) {
                iov[k].iov_base = (uint8_t *)iov[k].iov_base + w;
                iov[k].iov_len -= (size_t)w;
            }
        }
        j->on_disk += total;
        return 0;
    }
    uint8_t *p = j->buf + j->len;
    memcpy(p, head, sizeof head);
    p += sizeof head;
    if (alen) memcpy(p, a, alen);
    p += alen;
    if (blen) memcpy(p, b, blen);
    p += blen;
    memcpy(p, tail, 4);
    j->len += total;
    return 0;
}

int journal_append(Journal *j, int type, uint32_t run, const void *payload, size_t len) {
    return journal_append2(j, type, run, payload, len, NULL, 0);
}

int journal_flush(Journal *j) {
    if (j->failed) return -1;
    return do_flush(j);
}

int journal_fd(const Journal *j) {
    return j->fd;
}

int journal_sync(Journal *j) {
    if (journal_flush(j) != 0) return -1;
    if (fdatasync(j->fd) != 0) {
        seterr(j->err, "cannot sync journal %s", j->path, errno);
        return -1;
    }
    return 0;
}

int journal_close(Journal *j) {
    if (!j) return 0;
    int rc = j->failed ? -1 : journal_sync(j);
    if (close(j->fd) != 0) rc = -1;
    free(j->buf);
    free(j);
    return rc;
}

const char *journal_error(const Journal *j) {
    return j->err;
}

int journal_set_error(Journal *j, const char *what) {
    seterr(j->err, "%s", j->path, 0);
    size_t l = strlen(j->err);
    snprintf(j->err + l, ABL_ERR_MAX - l, ": %s", what);
    return -1;
}
uint64_t journal_size(const Journal *j) {
    return j->on_disk + j->len;
}
uint64_t journal_written_size(const Journal *j) {
    return j->on_disk;
}

/* ---------------- reader ---------------- */

struct JournalReader {
    int fd;
    char path[ABL_PATH_MAX];
    uint8_t *buf;         /* sequential window */
    size_t cap, beg, end; /* valid bytes buf[beg..end) */
    uint64_t buf_off;     /* file offset of buf[0] */
    int eof, done;
    uint64_t valid_end, torn;
    uint64_t damaged_bytes, damaged_regions; /* skipped between valid records */
    uint8_t *rbuf;                           /* read_at buffer */
    size_t rcap;
    char err[ABL_ERR_MAX];
};

JournalReader *journal_reader_open(const char *path, char err[ABL_ERR_MAX]) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        seterr(err, "cannot open journal %s", path, errno);
        return NULL;
    }
    JournalReader *r = calloc(1, sizeof *r);
    if (r) r->buf = malloc(JOURNAL_BUFFER_BYTES);
    if (!r || !r->buf) {
        free(r);
        close(fd);
        seterr(err, "%s: out of memory", path, 0);
        return NULL;
    }
    r->fd = fd;
    r->cap = JOURNAL_BUFFER_BYTES;
    snprintf(r->path, sizeof r->path, "%s", path);
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    return r;
}

/* Makes at least want bytes available from beg; 1 if so, 0 at EOF before that, -1 on error. */
static int reader_fill(JournalReader *r, size_t want) {
    while (r->end - r->beg < want) {
        if (r->eof) return 0;
        if (r->beg > 0) {
            memmove(r->buf, r->buf + r->beg, r->end - r->beg);
            r->buf_off += r->beg;
            r->end -= r->beg;
            r->beg = 0;
        }
        if (GROW(r->buf, r->cap, want) != 0) {
            seterr(r->err, "%s: out of memory", r->path, 0);
            return -1;
        }
        ssize_t got = read(r->fd, r->buf + r->end, r->cap - r->end);
        if (got < 0) {
            if (errno == EINTR) continue;
            seterr(r->err, "cannot read journal %s", r->path, errno);
            return -1;
        }
        if (got == 0) r->eof = 1;
        r->end += (size_t)got;
    }
    return 1;
}

/* Checks a complete record image at p (n bytes available); returns its total length, 0 if
 * invalid, or -(needed) if more bytes are needed. */
static long long check_record(const uint8_t *p, size_t n) {
    if (n < JOURNAL_HEADER_BYTES) return -(long long)JOURNAL_HEADER_BYTES;
    if (memcmp(p, MAGIC, 4) != 0 || p[4] == 0) return 0;
    uint32_t len = le_get_u32(p + 9);
    if (len > JOURNAL_MAX_PAYLOAD) return 0;
    size_t total = JOURNAL_RECORD_OVERHEAD + (size_t)len;
    if (n < total) return -(long long)total;
    uint32_t crc = journal_crc32c(0, p + 4, JOURNAL_HEADER_BYTES - 4 + len);
    if (crc != le_get_u32(p + JOURNAL_HEADER_BYTES + len)) return 0;
    return (long long)total;
}

/* At r->beg: 1 and the record's length in *total if a valid record starts there; 0 if none
 * does (EOF inside a claimed record counts as none); -1 on a read error. */
static int record_at_beg(JournalReader *r, long long *total) {
    size_t want = JOURNAL_HEADER_BYTES;
    for (;;) {
        int f = reader_fill(r, want);
        if (f < 0) return -1;
        long long c = check_record(r->buf + r->beg, r->end - r->beg);
        if (c > 0) return *total = c, 1;
        if (c == 0 || f == 0) return 0;
        want = (size_t)(-c);
    }
}

static uint8_t *find_magic(uint8_t *p, size_t n) {
    for (uint8_t *end = p + n; n >= 4; n = (size_t)(end - p)) {
        uint8_t *a = memchr(p, MAGIC[0], n - 3);
        if (!a) return NULL;
        if (memcmp(a, MAGIC, 4) == 0) return a;
        p = a + 1;
    }
    return NULL;
}

/* r->beg is at bytes that are not a valid record. Resynchronises on the next offset where a
 * record's magic and CRC hold: 1 (r->beg there), 0 if none follows (a torn tail), -1. A
 * damaged length field can claim up to 64 MiB, so a candidate is only believed when its
 * CRC holds, never because it reached the end of the file. */
static int reader_resync(JournalReader *r) {
    r->beg++;
    for (;;) {
        int f = reader_fill(r, 4);
        if (f < 0) return -1;
        if (f == 0) return 0;
        uint8_t *m = find_magic(r->buf + r->beg, r->end - r->beg);
        if (!m) {
            r->beg = r->end - 3; /* a magic may straddle the window's end */
            continue;
        }
        r->beg = (size_t)(m - r->buf);
        long long total;
        int ok = record_at_beg(r, &total);
        if (ok != 0) return ok;
        r->beg++;
    }
}

int journal_reader_seek(JournalReader *r, uint64_t offset) {
    if (lseek(r->fd, (off_t)offset, SEEK_SET) < 0) {
        seterr(r->err, "cannot seek in journal %s", r->path, errno);
        return -1;
    }
    r->beg = r->end = 0;
    r->buf_off = offset;
    r->eof = r->done = 0;
    r->valid_end = offset;
    r->torn = 0;
    return 0;
}

int journal_reader_next(JournalReader *r, JournalRecord *rec) {
    if (r->done) return 0;
    long long total;
    int ok = record_at_beg(r, &total);
    if (ok < 0) return -1;
    uint64_t gap = 0;
    if (ok == 0) {
        uint64_t bad = r->buf_off + r->beg;
        int more = reader_fill(r, 1);
        if (more < 0) return -1;
        if (more == 0) { /* a clean end */
            r->valid_end = bad;
            r->torn = 0;
            r->done = 1;
            return 0;
        }
        ok = reader_resync(r);
        if (ok < 0) return -1;
        if (ok == 0) { /* nothing valid after it: a torn tail */
            r->valid_end = bad;
            r->done = 1;
            struct stat st;
            uint64_t size = fstat(r->fd, &st) == 0 ? (uint64_t)st.st_size : bad;
            r->torn = size > bad ? size - bad : 0;
            return 0;
        }
        gap = r->buf_off + r->beg - bad;
        r->damaged_bytes += gap;
        r->damaged_regions++;
        record_at_beg(r, &total);
    }
    const uint8_t *p = r->buf + r->beg;
    rec->offset = r->buf_off + r->beg;
    rec->gap_before = gap;
    rec->type = p[4];
    rec->run = le_get_u32(p + 5);
    rec->len = le_get_u32(p + 9);
    rec->payload = p + JOURNAL_HEADER_BYTES;
    r->beg += (size_t)total;
    r->valid_end = r->buf_off + r->beg;
    return 1;
}

uint64_t journal_reader_damaged_bytes(const JournalReader *r) {
    return r->damaged_bytes;
}
uint64_t journal_reader_damaged_regions(const JournalReader *r) {
    return r->damaged_regions;
}

uint64_t journal_reader_valid_end(const JournalReader *r) {
    return r->valid_end;
}
uint64_t journal_reader_torn_bytes(const JournalReader *r) {
    return r->torn;
}
const char *journal_reader_error(const JournalReader *r) {
    return r->err;
}

static int pread_all(int fd, void *buf, size_t n, uint64_t off) {
    uint8_t *p = buf;
    while (n) {
        ssize_t g = pread(fd, p, n, (off_t)off);
        if (g < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (g == 0) {
            errno = EIO;
            return -1;
        }
        p += g;
        n -= (size_t)g;
        off += (uint64_t)g;
    }
    return 0;
}

int journal_reader_read_at(JournalReader *r, uint64_t offset, JournalRecord *rec) {
    uint8_t head[JOURNAL_HEADER_BYTES];
    if (pread_all(r->fd, head, sizeof head, offset) != 0) {
        seterr(r->err, "cannot read journal %s", r->path, errno);
        return -1;
    }
    uint32_t len = le_get_u32(head + 9);
    if (memcmp(head, MAGIC, 4) != 0 || len > JOURNAL_MAX_PAYLOAD) {
        seterr(r->err, "%s: no valid record at that offset", r->path, 0);
        return -1;
    }
    size_t total = JOURNAL_RECORD_OVERHEAD + (size_t)len;
    if (GROW(r->rbuf, r->rcap, total) != 0) {
        seterr(r->err, "%s: out of memory", r->path, 0);
        return -1;
    }
    memcpy(r->rbuf, head, sizeof head);
    if (pread_all(r->fd, r->rbuf + sizeof head, total - sizeof head, offset + sizeof head) != 0) {
        seterr(r->err, "cannot read journal %s", r->path, errno);
        return -1;
    }
    if (check_record(r->rbuf, total) <= 0) {
        seterr(r->err, "%s: record fails its CRC", r->path, 0);
        return -1;
    }
    rec->offset = offset;
    rec->type = head[4];
    rec->run = le_get_u32(head + 5);
    rec->len = len;
    rec->payload = r->rbuf + JOURNAL_HEADER_BYTES;
    return 0;
}

/* Damage of len bytes at offset that is exactly one record whose header survived (only its
 * payload or CRC was hit): 1 with its type and run, else 0. */
static int damaged_header(JournalReader *r, uint64_t offset, uint64_t len, uint8_t *type,
                          uint32_t *run) {
    uint8_t head[JOURNAL_HEADER_BYTES];
    if (len < JOURNAL_RECORD_OVERHEAD || pread_all(r->fd, head, sizeof head, offset) != 0) return 0;
    if (memcmp(head, MAGIC, 4) != 0 || head[4] < JREC_HEADER || head[4] > JREC_DATA ||
        JOURNAL_RECORD_OVERHEAD + (uint64_t)le_get_u32(head + 9) != len)
        return 0;
    *type = head[4];
    *run = le_get_u32(head + 5);
    return 1;
}

JournalDamagedRun journal_reader_damaged_run(JournalReader *r, uint64_t offset, uint64_t len,
                                             uint32_t n_runs, uint8_t *type, uint32_t *run) {
    *type = 0;
    if (!damaged_header(r, offset, len, type, run)) return JDMG_UNKNOWN;
    return journal_type_of_run(*type) && *run < n_runs ? JDMG_RUN : JDMG_NO_RUN;
}

void journal_reader_close(JournalReader *r) {
    if (!r) return;
    close(r->fd);
    free(r->buf);
    free(r->rbuf);
    free(r);
}

/* ---------------- open for append: scan + truncate ---------------- */

int journal_save_range(const char *path, uint64_t from, uint64_t len, const char *dst,
                       char err[ABL_ERR_MAX]) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        seterr(err, "cannot open journal %s", path, errno);
        return -1;
    }
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0666);
    uint8_t *buf = malloc(1 << 20);
    int rc = out >= 0 && buf ? 0 : -1;
    for (uint64_t off = from; rc == 0 && off < from + len;) {
        size_t n = from + len - off > (1 << 20) ? (1 << 20) : (size_t)(from + len - off);
        if (pread_all(fd, buf, n, off) != 0 || write_all(out, buf, n) != 0) rc = -1;
        off += n;
    }
    if (rc == 0 && fsync(out) != 0) rc = -1;
    if (out >= 0 && close(out) != 0) rc = -1;
    if (rc == 0) rc = fs_fsync_dir_of(dst);
    if (rc != 0) seterr(err, "cannot save damaged journal bytes to %s", dst, errno);
    free(buf);
    close(fd);
    return rc;
}

int journal_lock_existing(const char *path, char err[ABL_ERR_MAX]) {
    /* for writing when we may: NFS grants an exclusive flock only on a file open for
     * writing (flock(2), NOTES), and would otherwise say EBADF, read as "no flock here" */
    int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM))
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return -2;
        seterr(err, "cannot open journal %s", path, errno);
        return -1;
    }
    if (lock_fd(fd, path, err) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int journal_lock_held(const char *path) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    int held = -1;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
        flock(fd, LOCK_UN);
        held = 0;
    } else if (errno == EWOULDBLOCK) {
        held = 1;
    }
    close(fd);
    return held;
}

Journal *journal_open_append(const char *path, JournalScan *scan, char err[ABL_ERR_MAX]) {
    JournalScan local;
    if (!scan) scan = &local;
    memset(scan, 0, sizeof *scan);
    if (strlen(path) >= ABL_PATH_MAX - 32) {
        seterr(err, "%s: path too long", path, 0);
        return NULL;
    }
    int fd = open(path, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        seterr(err, "cannot open journal %s", path, errno);
        return NULL;
    }
    if (lock_fd(fd, path, err) != 0) {
        close(fd);
        return NULL;
    }
    JournalReader *r = journal_reader_open(path, err);
    if (!r) {
        close(fd);
        return NULL;
    }
    JournalRecord rec;
    int rc;
    while ((rc = journal_reader_next(r, &rec)) == 1)
        scan->records++;
    if (rc < 0) {
        snprintf(err, ABL_ERR_MAX, "%s", journal_reader_error(r));
        journal_reader_close(r);
        close(fd);
        return NULL;
    }
    scan->valid_bytes = journal_reader_valid_end(r);
    scan->damaged_bytes = journal_reader_damaged_bytes(r);
    scan->damaged_regions = journal_reader_damaged_regions(r);
    journal_reader_close(r);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        seterr(err, "cannot stat journal %s", path, errno);
        close(fd);
        return NULL;
    }
    uint64_t size = (uint64_t)st.st_size;
    /* Damage between valid records stays where it is (readers step over it); only a tail
     * with no valid record after it is cut, so appends follow the last whole record. */
    if (size > scan->valid_bytes) {
        scan->dropped_bytes = size - scan->valid_bytes;
        if (ftruncate(fd, (off_t)scan->valid_bytes) != 0 || fsync(fd) != 0) {
            seterr(err, "cannot truncate the torn tail of journal %s", path, errno);
            close(fd);
            return NULL;
        }
    }
    return journal_new(fd, path, scan->valid_bytes, err);
}
