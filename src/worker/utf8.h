/* UTF-8 decoding as Python's and the WHATWG decoders do it: a bad sequence is its maximal
 * subpart (a lead byte and the continuation bytes that could still have completed it), so
 * replacement and escaping agree with those decoders byte for byte. */
#ifndef ABLATE_WORKER_UTF8_H
#define ABLATE_WORKER_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_INVALID 0xFFFFFFFFu

/* Decodes the character at s[0..n) (n >= 1): returns its length in bytes (1..4) and sets
 * *cp, or UTF8_INVALID with the length of the maximal invalid subpart. */
int utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* Copies s[0..n) into out (capacity cap, NUL-terminated) with every invalid sequence replaced
 * by U+FFFD, stopping before a character that does not fit. Returns the bytes written. */
size_t utf8_sanitize(const unsigned char *s, size_t n, char *out, size_t cap);

#endif
