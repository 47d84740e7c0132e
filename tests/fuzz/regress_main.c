/* regress_main.c -- runs a fuzz target without libFuzzer: each file named on the command
 * line is given to LLVMFuzzerTestOneInput in a child process of its own, so that a crash
 * (an abort, a signal, a sanitizer's report) fails that file and the others still run.
 * Prints one line per failed file and a closing line "fuzz regressions: N passed, M
 * failed"; exits 1 if any failed. `make test` links it with every tests/fuzz/fuzz_*.c
 * that has inputs in tests/fuzz/regressions/<name>/. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_one(const char *path)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        perror(path);
        return 1;
    }
    size_t capacity = 1 << 16, size = 0;
    uint8_t *data = malloc(capacity);
    size_t got;
    while (data != NULL && (got = fread(data + size, 1, capacity - size, file)) > 0) {
        size += got;
        if (size == capacity) {
            uint8_t *bigger = realloc(data, 2 * capacity);
            if (bigger == NULL)
                free(data);
            data = bigger;
            capacity *= 2;
        }
    }
    fclose(file);
    if (data == NULL)
        return 1;
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    return 0;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "fuzz";
    int passed = 0, failed = 0;
    for (int i = 2; i < argc; i++) {
        fflush(NULL);
        pid_t child = fork();
        if (child < 0) {
            perror("fork");
            return 1;
        }
        if (child == 0)
            _exit(run_one(argv[i]));
        int status;
        if (waitpid(child, &status, 0) != child) {
            perror("waitpid");
            return 1;
        }
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            passed++;
        } else {
            failed++;
            fprintf(stderr, "%s: FAILED: %s (%s %d)\n", name, argv[i],
                    WIFSIGNALED(status) ? "signal" : "exit status",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        }
    }
    printf("fuzz regressions (%s): %d passed, %d failed\n", name, passed, failed);
    return failed > 0;
}
