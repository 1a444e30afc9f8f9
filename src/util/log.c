#include "log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char command[32];
static _Atomic int status_shown; /* a status line without its newline is on the terminal */

void log_set_command(const char *cmd) {
    snprintf(command, sizeof command, "%s", cmd ? cmd : "");
}

/* Formats prefix + message + newline into one buffer and writes it at once. A message longer
 * than the buffer is cut, with "..." so that the cut shows, still on one line. */
static void emit(const char *prefix, const char *fmt, va_list ap, int status) {
    char line[4096];
    int shown = atomic_exchange(&status_shown, status);
    int n = snprintf(line, sizeof line, "%s%s", status ? "\r\033[K" : shown ? "\n" : "", prefix);
    if (n < 0) return;
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    if (m < 0) return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof line - 2) {
        len = sizeof line - 2;
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
