/* SHA-256 (FIPS 180-4), for the keys of the GPT-2 token cache: the text's digest and the
 * vocabulary's. Incremental: init, update as often as needed, final. */
#ifndef ABLATE_WORKER_SHA256_H
#define ABLATE_WORKER_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_BYTES 32

typedef struct {
    uint32_t h[8];
    uint64_t bytes; /* total length so far */
    uint8_t block[64];
    size_t fill; /* bytes in block */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_final(Sha256 *s, uint8_t out[SHA256_BYTES]);
/* One-shot digest of a buffer. */
void sha256(const void *data, size_t n, uint8_t out[SHA256_BYTES]);
/* Lower-case hex of a digest: 64 characters and a NUL. */
void sha256_hex(const uint8_t digest[SHA256_BYTES], char hex[2 * SHA256_BYTES + 1]);

#endif
