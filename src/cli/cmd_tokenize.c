/* ablate tokenize IN.txt -o OUT.bin | ablate tokenize --decode IN.bin [-o OUT.txt] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/log.h"
#include "commands.h"
#include "tokenizer/bpe.h"
#include "util/clock.h"
#include "util/file_io.h"
#include "util/grow.h"
#include "tokenizer/token_file.h"

static void tokenize_usage(FILE *f) {
    fprintf(f,
            "usage: ablate tokenize IN.txt -o OUT.bin [--vocab DIR]\n"
            "       ablate tokenize --decode IN.bin [-o OUT.txt] [--vocab DIR]\n\n"
            "Encodes a text file (UTF-8; any bytes are kept) with GPT-2's byte-level BPE into\n"
            "llm.c's .bin token format, the format data.tokenizer: tokens reads. --decode turns\n"
            "such a file back into the exact bytes (on stdout without -o).\n\n"
            "  -o PATH      output file (written whole, through a temporary file and a rename)\n"
            "  --vocab DIR  GPT-2's encoder.json and vocab.bpe (default: $%s, else\n"
            "               data/gpt2 beside the build directory, as scripts/install-deps.sh\n"
            "               installs it, else share/ablate/gpt2 beside the binary's directory)\n",
            BPE_VOCAB_ENV);
}

typedef struct {
    const unsigned char *p;
    size_t n;
} Bytes;

static int write_bytes(FILE *f, void *ctx) {
    const Bytes *b = ctx;
    return fwrite(b->p, 1, b->n, f) == b->n ? 0 : -1;
}

/* The text of a .bin file of GPT-2 tokens. */
static int decode_file(const Bpe *b, const char *in, const char *out, char err[ABL_ERR_MAX]) {
    unsigned char *buf;
    long len, n;
    int32_t *ids;
    if (file_read_all("token file", in, &buf, &len, err) != 0) return -1;
    int rc = token_file_parse(in, buf, len, bpe_vocab_size(b), &ids, &n, err);
    free(buf);
    if (rc != 0) return -1;
    size_t cap = 1 << 16, tn = 0;
    unsigned char *text = malloc(cap);
    for (long i = 0; text && i < n; i++) {
        int l;
        const unsigned char *t = bpe_token_bytes(b, ids[i], &l);
        if (GROW(text, cap, tn + (size_t)l) != 0) {
            free(text);
            text = NULL;
            break;
        }
        memcpy(text + tn, t, (size_t)l);
        tn += (size_t)l;
    }
    free(ids);
    if (!text) {
        snprintf(err, ABL_ERR_MAX, "token file %s: out of memory decoding it", in);
        return -1;
    }
    Bytes bytes = {text, tn};
    if (out) {
        rc = file_write_atomic("output file", out, write_bytes, &bytes, err);
    } else {
        rc = fwrite(text, 1, tn, stdout) == tn && fflush(stdout) == 0 ? 0 : -1;
        if (rc != 0) snprintf(err, ABL_ERR_MAX, "cannot write to stdout: %s", strerror(errno));
    }
    free(text);
    return rc;
}

static int encode_file(Bpe *b, const char *in, const char *out, char err[ABL_ERR_MAX]) {
    unsigned char *text;
    long len;
    int32_t *ids;
    if (file_read_all("text file", in, &text, &len, err) != 0) return -1;
    double t0 = clock_seconds();
    long n = bpe_encode(b, text, (size_t)len, &ids);
    double dt = clock_seconds() - t0;
    free(text);
    if (n < 0) {
        snprintf(err, ABL_ERR_MAX, "text file %s: out of memory tokenizing it", in);
        return -1;
    }
    int rc = token_file_write("output file", out, ids, n, err);
    free(ids);
    if (rc == 0) log_cmd("%s: %ld bytes -> %ld GPT-2 tokens in %.3f s -> %s", in, len, n, dt, out);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *vocab = NULL;
    int decode = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            tokenize_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--decode")) {
            decode = 1;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) {
            vocab = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            log_cmd("unknown or incomplete option '%s' (see --help)", argv[i]);
            return 2;
        } else if (in) {
            log_cmd("more than one input file ('%s')", argv[i]);
            return 2;
        } else {
            in = argv[i];
        }
    }
    if (!in || (!decode && !out)) {
        if (in) {
            log_cmd("-o OUT.bin is required");
            log_line("%s", "");
        }
        tokenize_usage(stderr);
        return 2;
    }
    char err[ABL_ERR_MAX], dir[BPE_VOCAB_DIR_MAX];
    if (vocab)
        snprintf(dir, sizeof dir, "%s", vocab);
    else
        bpe_vocab_dir(dir);
    Bpe *b = bpe_load(dir, err);
    if (!b) {
        log_cmd("%s", err);
        return 1;
    }
    int rc = decode ? decode_file(b, in, out, err) : encode_file(b, in, out, err);
    if (rc != 0) log_cmd("%s", err);
    bpe_free(b);
    return rc == 0 ? 0 : 1;
}
