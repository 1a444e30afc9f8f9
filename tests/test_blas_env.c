/* OpenBLAS's environment as blas_ensure_env sets it before OpenBLAS reads it:
 * OPENBLAS_THREAD_TIMEOUT for a process that runs OpenBLAS on several threads (its idle
 * threads otherwise spin ~0.1 s after every product on the cores the model's own loops
 * need), never overriding a value the environment sets, and no re-execution for one thread.
 *
 * Each case runs this program again as a child (`test_blas_env --child THREADS`) with an
 * environment of its own; the child calls blas_ensure_env as ablate's main() does and prints
 * what OpenBLAS was loaded with. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"
#include "worker/blas_env.h"

/* The child: what the process that OpenBLAS was loaded into (after any re-execution) saw. */
static int child(char **argv) {
    blas_ensure_env(argv, atoi(argv[2]));
    const char *t = getenv("OPENBLAS_THREAD_TIMEOUT"), *r = getenv("ABLATE_BLAS_REEXEC");
    printf("timeout=%s reexec=%s\n", t ? t : "-", r ? r : "-");
    return 0;
}

/* Runs the child with `threads` and an environment of PATH, the machine's
 * OPENBLAS_CORETYPE if set (never overridden: as in every test), and `extra` (NULL-ended
 * "NAME=VALUE" strings); returns its output line in out. */
static void run_child(const char *threads, const char **extra, char *out, size_t cap) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n > 0 ? n : 0] = '\0';
    char core[256] = "";
    const char *env[16];
    int ne = 0;
    if (getenv("OPENBLAS_CORETYPE")) {
        snprintf(core, sizeof core, "OPENBLAS_CORETYPE=%s", getenv("OPENBLAS_CORETYPE"));
        env[ne++] = core;
    }
    for (int i = 0; extra && extra[i] && ne < 15; i++)
        env[ne++] = extra[i];
    env[ne] = NULL;
    int fd[2];
    CHECK(pipe(fd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char *args[] = {self, "--child", (char *)threads, NULL};
        execve(self, args, (char **)env);
        _exit(127);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fd[0], out + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

TEST(timeout_for_threads) {
    char out[256];
    run_child("2", NULL, out, sizeof out);
    CHECK_MSG(strstr(out, "timeout=" BLAS_THREAD_TIMEOUT " reexec=1") != NULL, "%s", out);
}

TEST(timeout_from_thread_variable) {
    /* no --blas-threads: OpenBLAS's own variable asks for 2 */
    const char *extra[] = {"OPENBLAS_NUM_THREADS=2", NULL};
    char out[256];
    run_child("0", extra, out, sizeof out);
    CHECK_MSG(strstr(out, "timeout=" BLAS_THREAD_TIMEOUT) != NULL, "%s", out);
}

TEST(timeout_kept_when_set) {
    const char *extra[] = {"OPENBLAS_THREAD_TIMEOUT=22", NULL};
    char out[256];
    run_child("4", extra, out, sizeof out);
    CHECK_MSG(strstr(out, "timeout=22 ") != NULL, "%s", out);
}

TEST(one_thread_left_alone) {
    /* one thread: OpenBLAS's threads never run, nothing to set (and no re-execution unless
     * the core needs one, which a set OPENBLAS_CORETYPE rules out) */
    const char *extra[] = {"OPENBLAS_CORETYPE=Haswell", NULL};
    char out[256];
    if (getenv("OPENBLAS_CORETYPE")) extra[0] = NULL; /* the machine's value is passed on */
    run_child("1", extra, out, sizeof out);
    CHECK_MSG(strstr(out, "timeout=- reexec=-") != NULL, "%s", out);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv);
    return test_main(argc, argv, "test_blas_env");
}
