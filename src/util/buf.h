/* The growable byte buffer: always NUL-terminated after the first add, so text built in it
 * is a C string; an allocation failure sets oom and turns later adds into no-ops, so
 * callers check once at the end. */
#ifndef ABLATE_WORKER_BUF_H
#define ABLATE_WORKER_BUF_H

#include <stddef.h>

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} Buf;

void buf_add(Buf *b, const void *s, size_t n);
void buf_addc(Buf *b, char c);
void buf_adds(Buf *b, const char *s);
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Forgets the contents, keeps the memory. */
void buf_clear(Buf *b);
void buf_free(Buf *b);

#endif
