#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "utf8.h"

static char command[32];
static _Atomic int status_shown; /* a status line without its newline is on the terminal */

void log_set_command(const char *cmd) {
    snprintf(command, sizeof command, "%s", cmd ? cmd : "");
}

/* Copies msg into out (at most cap bytes, NUL-terminated), every terminal control in it
 * shown as text: C0 controls but newline and tab, DEL and C1 (U+0080-U+009F) as \u00XX, a
 * byte outside UTF-8 as \xNN. Messages quote run names, grid values, paths, samples and the
 * data's own text, which may hold escape sequences (a title change, a screen clear, an 8-bit
 * CSI); every line ablate writes is escaped here, once, so no caller can forget. Returns
 * the length. Allocates nothing (a stop message may come from a signal's path). */
static size_t shown_text(const char *msg, size_t n, char *out, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n && o + 7 < cap;) {
        unsigned char c = (unsigned char)msg[i];
        size_t k = utf8_seq(msg + i, n - i);
        int c1 = k == 2 && c == 0xc2 && (unsigned char)msg[i + 1] < 0xa0;
        if (k > 1 && !c1) {
            memcpy(out + o, msg + i, k);
            o += k, i += k;
        } else if (k == 1 && ((c >= 0x20 && c != 0x7f) || c == '\n' || c == '\t')) {
            out[o++] = (char)c, i++;
        } else {
            unsigned char v = c1 ? (unsigned char)msg[i + 1] : c;
            memcpy(out + o, k ? "\\u00" : "\\x", k ? 4 : 2);
            o += k ? 4 : 2;
            out[o++] = hex[v >> 4], out[o++] = hex[v & 15];
            i += c1 ? 2 : 1;
        }
    }
    out[o] = 0;
    return o;
}

/* Formats prefix + message + newline into one buffer and writes it at once. A message longer
 * than the buffer is cut, with "..." so that the cut shows, still on one line. */
static void emit(const char *prefix, const char *fmt, va_list ap, int status) {
    char line[4096], msg[4096];
    int shown = atomic_exchange(&status_shown, status);
    int n = snprintf(line, sizeof line, "%s%s", status ? "\r\033[K" : shown ? "\n" : "", prefix);
    if (n < 0) return;
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    if (m < 0) return;
    size_t mlen = (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
    size_t len = (size_t)n + shown_text(msg, mlen, line + n, sizeof line - (size_t)n);
    if (len > sizeof line - 2 || (size_t)m >= sizeof msg) {
        if (len > sizeof line - 2) len = sizeof line - 2;
        memcpy(line + len - 3, "...", 3);
    }
    if (!status && (len == 0 || line[len - 1] != '\n')) line[len++] = '\n';
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, line + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* nowhere to report that stderr is gone */
        off += (size_t)w;
    }
}

#define LOG_WITH(prefix, status)                                                                   \
    va_list ap;                                                                                    \
    va_start(ap, fmt);                                                                             \
    emit(prefix, fmt, ap, status);                                                                 \
    va_end(ap)

void log_cmd(const char *fmt, ...) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, command[0] ? "ablate %s: " : "ablate: ", command);
    LOG_WITH(prefix, 0);
}

void log_warn(const char *fmt, ...) {
    LOG_WITH("ablate: warning: ", 0);
}

void log_info(const char *fmt, ...) {
    LOG_WITH("ablate: ", 0);
}

void log_line(const char *fmt, ...) {
    LOG_WITH("", 0);
}

void log_status(const char *fmt, ...) {
    LOG_WITH("", 1);
}
