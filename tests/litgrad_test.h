/* litgrad_test.h -- what every stage's Criterion tests share.
 *
 * LG_SUITE(name) declares a suite whose every test must end with no live block of
 * litgrad's allocator (mem_live_blocks() == 0) and, under AddressSanitizer, with no
 * leak that LeakSanitizer can find. Criterion does not count a failed assertion in a
 * suite's .fini as a failing test, so a leak aborts the worker instead; the run then
 * exits non-zero and tools/run-tests fails the stage, naming the leak.
 *
 * lg_new_tape() and lg_for_each_example() are fixtures that several stages share.
 * lg_expect_short_lines() checks that a program's output fits the book's page.
 * run_program() runs a stage program (from LG_BIN_DIR, set by the Makefile) through
 * the shell and returns its exit status with standard output and standard error;
 * run_program_stdout() captures standard output alone.
 */
#ifndef LITGRAD_TEST_H
#define LITGRAD_TEST_H

#define _POSIX_C_SOURCE 200809L /* popen, pclose, WEXITSTATUS */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "mem.h"
#include "value.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#ifndef LG_BIN_DIR
#define LG_BIN_DIR "build/bin"
#endif

static inline void lg_expect_no_leaks(void)
{
    size_t live = mem_live_blocks();
    int leaked_elsewhere = 0;
#if defined(__SANITIZE_ADDRESS__)
    leaked_elsewhere = __lsan_do_recoverable_leak_check() != 0;
#endif
    if (live == 0 && !leaked_elsewhere)
        return;
    /* A failed assertion in .fini is only printed, so end the worker abnormally:
     * Criterion then reports that the test "crashed during its setup or teardown" and
     * exits non-zero, and tools/run-tests fails the stage. */
    fprintf(stderr, "LEAK: %zu block(s) of litgrad's allocator still live%s\n", live,
            leaked_elsewhere ? "; LeakSanitizer found a leak (report above)" : "");
    fflush(stderr);
    abort();
}

#define LG_SUITE(name) TestSuite(name, .fini = lg_expect_no_leaks)

enum { LG_OUTPUT_MAX = 1 << 16 };

typedef struct ProgramRun {
    int status;                   /* exit status, or -1 if it did not exit normally */
    char output[LG_OUTPUT_MAX];   /* standard output and standard error, interleaved */
} ProgramRun;

static inline void run_command(ProgramRun *run, const char *program, const char *args,
                               const char *redirect)
{
    char command[1024];
    int n = snprintf(command, sizeof command, "%s/%s %s %s", LG_BIN_DIR, program, args,
                     redirect);
    cr_assert(n > 0 && (size_t)n < sizeof command, "command too long");
    FILE *pipe = popen(command, "r");
    cr_assert_not_null(pipe, "cannot run %s", command);
    size_t used = fread(run->output, 1, sizeof run->output - 1, pipe);
    run->output[used] = '\0';
    int raw = pclose(pipe);
    run->status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

/* A tape of `capacity` nodes for a test; the test fails if it cannot be made. */
static inline Tape *lg_new_tape(size_t capacity)
{
    LgError err = LG_ERROR_INIT;
    Tape *tape = tape_new(capacity, &err);
    cr_assert_not_null(tape, "%s", err.message);
    return tape;
}

/* One IR example of docs/examples: its path, the command-line arguments of its
 * "# run: " line (default "--input x=1") after the path, and the message prefix of its
 * "# error: " line ("" if none). */
typedef struct LgExample {
    char path[512];
    char args[1024];
    char expected_error[512];
} LgExample;

/* Call check(example, context) for every *.lgir file in dir; return how many. */
static inline size_t lg_for_each_example(const char *dir,
                                         void (*check)(const LgExample *, void *),
                                         void *context)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    size_t seen = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".lgir") != 0)
            continue;
        LgExample ex = {.expected_error = ""};
        char line[512];
        snprintf(ex.path, sizeof ex.path, "%s/%s", dir, e->d_name);
        snprintf(ex.args, sizeof ex.args, "%s --input x=1", ex.path);
        FILE *f = fopen(ex.path, "r");
        cr_assert_not_null(f, "cannot read %s", ex.path);
        while (fgets(line, sizeof line, f) != NULL) {
            line[strcspn(line, "\n")] = '\0';
            if (strncmp(line, "# run: ", 7) == 0)
                snprintf(ex.args, sizeof ex.args, "%s %s", ex.path, line + 7);
            if (strncmp(line, "# error: ", 9) == 0)
                snprintf(ex.expected_error, sizeof ex.expected_error, "%s", line + 9);
        }
        fclose(f);
        check(&ex, context);
        seen++;
    }
    closedir(d);
    return seen;
}

/* Every stage program's output is printed verbatim in the book, so every line of it,
 * the last one included, must be shorter than LG_LINE_MAX characters. */
enum { LG_LINE_MAX = 100 };

static inline void lg_expect_short_lines(const char *output)
{
    for (const char *line = output; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
        cr_assert_lt(length, LG_LINE_MAX, "an output line of %zu characters: %.*s", length,
                     (int)length, line);
        line += length + (end != NULL);
    }
}

/* Run "LG_BIN_DIR/<program> <args>" (args are shell words); capture standard output
 * and standard error together. */
static inline void run_program(ProgramRun *run, const char *program, const char *args)
{
    run_command(run, program, args, "2>&1");
}

/* The same, capturing standard output alone (standard error is discarded). */
static inline void run_program_stdout(ProgramRun *run, const char *program, const char *args)
{
    run_command(run, program, args, "2>/dev/null");
}

#endif
