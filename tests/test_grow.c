/* util/grow.h: the one way an array grows (capacity doubling from 8, overflow-checked, the
 * array unchanged on failure). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "util/grow.h"

TEST(from_empty) {
    int *p = NULL;
    size_t cap = 0;
    CHECK(GROW(p, cap, 0) == 0); /* nothing needed: nothing allocated */
    CHECK(p == NULL && cap == 0);
    CHECK(GROW(p, cap, 1) == 0);
    CHECK(p != NULL && cap == 8);
    for (int i = 0; i < 8; i++)
        p[i] = i; /* every one of cap entries is usable (ASan checks) */
    free(p);
}

TEST(doubling) {
    int *p = NULL;
    size_t cap = 0, n = 0;
    int changes = 0;
    for (int i = 0; i < 1000; i++) { /* one append at a time, as the callers do */
        size_t before = cap;
        CHECK(GROW(p, cap, n + 1) == 0);
        if (cap != before) {
            changes++;
            CHECK_MSG(cap == (before ? 2 * before : 8), "cap %zu after %zu", cap, before);
        }
        p[n++] = i;
    }
    CHECK(cap == 1024);
    CHECK_MSG(changes == 8, "%d reallocations for 1000 appends", changes); /* 8..1024 */
    for (int i = 0; i < 1000; i++)
        CHECK(p[i] == i);
    /* a need far past the capacity doubles as often as it takes, at once */
    CHECK(GROW(p, cap, 5000) == 0);
    CHECK(cap == 8192);
    CHECK(p[999] == 999);
    free(p);
}

TEST(need_below_cap_is_noop) {
    double *p = NULL;
    size_t cap = 0;
    CHECK(GROW(p, cap, 10) == 0);
    CHECK(cap == 16);
    double *was = p;
    for (size_t need = 0; need <= 16; need++) {
        CHECK(GROW(p, cap, need) == 0);
        CHECK(p == was && cap == 16);
    }
    free(p);
}

/* A pointer to rows of a fixed width (h5view_live.c's seg_rows) grows by whole rows. */
TEST(rows_of_fixed_width) {
    uint64_t(*rows)[4] = NULL;
    size_t cap = 0;
    CHECK(GROW(rows, cap, 3) == 0);
    CHECK(cap == 8);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 4; c++)
            rows[r][c] = (uint64_t)(10 * r + c);
    CHECK(GROW(rows, cap, 9) == 0);
    CHECK(cap == 16 && rows[7][3] == 73);
    free(rows);
}

TEST(overflow_leaves_array) {
    uint32_t *p = NULL;
    size_t cap = 0;
    CHECK(GROW(p, cap, 5) == 0);
    for (uint32_t i = 0; i < 8; i++)
        p[i] = 0xA0 + i;
    uint32_t *was = p;
    /* the element count fits a size_t, its bytes (count * 4) do not */
    CHECK(GROW(p, cap, SIZE_MAX / 4 + 1) == -1);
    CHECK(p == was && cap == 8);
    /* the doubled count itself would overflow */
    CHECK(GROW(p, cap, SIZE_MAX) == -1);
    CHECK(p == was && cap == 8);
    for (uint32_t i = 0; i < 8; i++)
        CHECK(p[i] == 0xA0 + i);
    /* still usable afterwards */
    CHECK(GROW(p, cap, 9) == 0);
    CHECK(cap == 16 && p[7] == 0xA7);
    free(p);

    /* bytes: a need past SIZE_MAX / 2 cannot be reached by doubling */
    char *b = NULL;
    size_t bcap = 0;
    CHECK(GROW(b, bcap, SIZE_MAX / 2 + 2) == -1);
    CHECK(b == NULL && bcap == 0);
}

int main(int argc, char **argv) {
    return test_main(argc, argv, "test_grow");
}
