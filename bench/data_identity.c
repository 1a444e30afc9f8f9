/* The cost of knowing which data a run trains on: on a token file of SIZE MB
 * (llm.c .bin, random ids), the time of
 *   load      dataset_load as a worker or a resume does it, the digest cached;
 *   check     the identity check alone (file_digest: one stat and the cache entry);
 *   hash      what the digest costs uncached (the first load of a file, or after it changed);
 * and check/load, whose target is <= 5%. Each is the median of REPS runs.
 *
 *   data_identity DIR SIZE_MB [REPS]   (bench/data_identity.sh builds and runs it) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/token_file.h"
#include "util/clock.h"
#include "util/file_digest.h"
#include "util/sha256.h"
#include "worker/data.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

static int write_tokens(const char *path, long long n_tokens) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int32_t head[256] = {TOKEN_FILE_MAGIC, TOKEN_FILE_VERSION, (int32_t)n_tokens};
    fwrite(head, sizeof head, 1, f);
    enum { CHUNK = 1 << 20 };
    static uint16_t buf[CHUNK];
    uint64_t x = 88172645463325252ull;
    for (long long done = 0; done < n_tokens;) {
        long long k = n_tokens - done < CHUNK ? n_tokens - done : CHUNK;
        for (long long i = 0; i < k; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            buf[i] = (uint16_t)(x % 50257);
        }
        if (fwrite(buf, 2, (size_t)k, f) != (size_t)k) return fclose(f), -1;
        done += k;
    }
    return fclose(f);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: data_identity DIR SIZE_MB [REPS]\n");
        return 2;
    }
    const char *dir = argv[1];
    double mb = atof(argv[2]);
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (reps < 1 || reps > 64) reps = 3;
    char path[900], cache[900], err[ABL_ERR_MAX], hex[65];
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("ABLATE_CACHE_DIR", cache, 1);
    long long n_tokens = (long long)(mb * 1e6 / 2);
    if (write_tokens(path, n_tokens) != 0) return fprintf(stderr, "cannot write %s\n", path), 1;
    DataConfig dc;
    memset(&dc, 0, sizeof dc);
    snprintf(dc.path, sizeof dc.path, "%s", path);
    dc.tokenizer = TOK_TOKENS;
    dc.vocab_size = 50257;
    dc.val_fraction = 0.1;
    double load[64], check[64], hash[64];
    long long size;
    int cached;
    for (int r = 0; r < reps; r++) {
        /* uncached: the digest of the bytes read, as the first load computes it */
        unsigned char *buf;
        long len;
        if (file_read_digest("data file", path, NULL, &buf, &len, hex, NULL, err) != 0)
            return fprintf(stderr, "%s\n", err), 1;
        double t0 = clock_seconds();
        sha256_buf_hex(buf, (size_t)len, hex);
        hash[r] = clock_seconds() - t0;
        free(buf);
        Dataset d;
        if (dataset_load(&d, &dc, 64, err) != 0) return fprintf(stderr, "%s\n", err), 1;
        dataset_free(&d); /* the first load fills the cache; the timed one below hits it */
        t0 = clock_seconds();
        if (dataset_load(&d, &dc, 64, err) != 0) return fprintf(stderr, "%s\n", err), 1;
        load[r] = clock_seconds() - t0;
        dataset_free(&d);
        t0 = clock_seconds();
        if (file_digest(path, cache, hex, &size, &cached, err) != 0 || !cached)
            return fprintf(stderr, "digest not cached: %s\n", err), 1;
        check[r] = clock_seconds() - t0;
    }
    double l = median(load, reps), c = median(check, reps), h = median(hash, reps);
    printf("data_identity: %.0f MB token file, median of %d\n", mb, reps);
    printf("  load (digest cached)   %10.3f ms\n", 1e3 * l);
    printf("  check (cached)         %10.3f ms  = %.3f%% of the load (target <= 5%%)\n", 1e3 * c,
           100 * c / l);
    printf("  hash (uncached)        %10.3f ms  = %.1f%% of the load\n", 1e3 * h, 100 * h / l);
    return c / l <= 0.05 ? 0 : 1;
}
