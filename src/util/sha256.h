/* SHA-256 (FIPS 180-4), for the data files' checksums in a sweep's provenance and the keys
 * of the GPT-2 token cache (the text's digest and the vocabulary's). */
#ifndef ABLATE_WORKER_SHA256_H
#define ABLATE_WORKER_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
/* 64 lowercase hex digits + NUL. */
void sha256_hex(Sha256 *s, char out[65]);
/* Hashes a whole file; its size in *size. 0, or -1 (errno set) if it cannot be read. */
int sha256_file(const char *path, char out[65], long long *size);
/* The digest of a buffer, in hex. */
void sha256_buf_hex(const void *data, size_t n, char out[65]);

#endif
