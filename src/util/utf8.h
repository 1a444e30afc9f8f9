/* UTF-8 validity. Text that ablate stores tagged as UTF-8 (HDF5) or prints as JSON must be
 * valid UTF-8, but a run's text (a byte-level vocabulary, generated samples, a prompt) is
 * bytes: these helpers tell the two apart and repair what is not valid. */
#ifndef ABLATE_UTIL_UTF8_H
#define ABLATE_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Length (1-4) of the valid UTF-8 sequence at s[0..n), or 0 if s does not start one
 * (stray continuation byte, overlong form, surrogate, above U+10FFFF, or cut short).
 * A NUL byte is a valid 1-byte sequence. */
size_t utf8_seq(const char *s, size_t n);
/* Is s[0..n) valid UTF-8 without NUL bytes (storable as a C string tagged UTF-8)? */
int utf8_is_clean(const char *s, size_t n);
/* Appends s[0..n) to b with every byte that is not part of a valid sequence, and every NUL,
 * replaced by U+FFFD (the replacement character), so the result is a clean C string. */
void utf8_sanitize(Buf *b, const char *s, size_t n);

/* For GPT-2's tokenizer and its samples, bad sequences as Python's and the WHATWG decoders
 * see them: a bad sequence is its maximal subpart (a lead byte and the continuation bytes
 * that could still have completed it). */
#define UTF8_INVALID 0xFFFFFFFFu
/* Decodes the character at s[0..n) (n >= 1): returns its length in bytes (1..4) and sets
 * *cp, or UTF8_INVALID with the length of the maximal invalid subpart. */
int utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
/* Copies s[0..n) into out (capacity cap, NUL-terminated) with one U+FFFD per maximal
 * invalid subpart (GPT-2's decoder, errors="replace"), stopping before a character that
 * does not fit. Returns the bytes written. */
size_t utf8_replace_copy(const unsigned char *s, size_t n, char *out, size_t cap);

#endif
