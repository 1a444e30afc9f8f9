/* What ablate tells the user on stderr. Each call writes one whole line with one write(2),
 * so lines from the view thread, the dispatch loop and a signal's stop never interleave,
 * and a line is never cut by a concurrent writer. The prefixes are the ones users and
 * scripts read: "ablate CMD: " for an error or the result line of the command CMD (set once
 * by main),
 * "ablate: warning: " for a warning, "ablate: " for news. */
#ifndef ABLATE_UTIL_LOG_H
#define ABLATE_UTIL_LOG_H

/* The command errors are attributed to ("run", "view", ...); NULL or "" for plain "ablate". */
void log_set_command(const char *cmd);
/* "ablate CMD: <message>\n": the command's errors and result lines */
void log_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "ablate: warning: <message>\n" */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "ablate: <message>\n" */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "<message>\n", no prefix: continuation lines, usage text. */
void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A status line on a terminal: "\r\033[K<message>", no newline, rewritten by the next one.
 * The next line of any of the other calls starts on a line of its own (a newline first), so
 * the status is kept above it and never overwritten mid-line. */
void log_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
