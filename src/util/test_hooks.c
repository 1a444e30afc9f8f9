#include "test_hooks.h"

#include <pthread.h>
#include <stdlib.h>

static TestHooks hooks;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static const char *env_s(const char *var, const char *def) {
    const char *v = getenv(var);
    return v && v[0] ? v : def;
}

static long env_l(const char *var, long def) {
    const char *v = getenv(var);
    return v && v[0] ? atol(v) : def;
}

#define TEST_HOOK_READ_S(var, def) env_s(var, def)
#define TEST_HOOK_READ_L(var, def) env_l(var, def)
#define TEST_HOOK_READ(field, var, type, def, where, desc)                                         \
    hooks.field = TEST_HOOK_READ_##type(var, def);

static void load(void) {
    TEST_HOOKS(TEST_HOOK_READ)
}

void test_hooks_load(void) {
    pthread_once(&once, load);
}

const TestHooks *test_hooks(void) {
    pthread_once(&once, load);
    return &hooks;
}

#define TEST_HOOK_ROW(field, var, type, def, where, desc)                                          \
    buf_printf(b, "| `%s` | (`%s`) %s |\n", var, where, desc);

void test_hooks_markdown(Buf *b) {
    buf_adds(b, "| variable | meaning |\n|---|---|\n");
    TEST_HOOKS(TEST_HOOK_ROW)
}
