/* Unicode classes for GPT-2's pre-tokenization pattern: letter (\p{L}), number (\p{N}),
 * white space (\s) or other. The range table is generated (scripts/gen-unicode-classes.js)
 * from the regular-expression engine the reference encoder runs on. */
#ifndef ABLATE_WORKER_UNICODE_CLASS_H
#define ABLATE_WORKER_UNICODE_CLASS_H

#include <stdint.h>

typedef enum { UC_OTHER, UC_LETTER, UC_NUMBER, UC_SPACE } UnicodeClass;

typedef struct {
    uint32_t first, last;
    uint8_t cls; /* UnicodeClass */
} UnicodeRange;

extern const UnicodeRange unicode_class_ranges[];
extern const int unicode_class_count;
extern const char unicode_class_version[]; /* the Unicode version the table was made from */

#endif
