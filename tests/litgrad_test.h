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
 * run_program() runs a stage program (from LG_BIN_DIR, set by the Makefile; its
 * arguments are shell words) and returns its exit status with standard output and
 * standard error; run_program_stdout() captures standard output alone.
 * lg_run() runs a program with an environment assignment and keeps its two streams
 * apart; lg_expect_usage_errors() runs a table of bad command lines,
 * lg_expect_outputs_refused() puts a FIFO where a program would write, and
 * lg_walk_allocation_failures() makes each allocation of a run fail in turn.
 */
#ifndef LITGRAD_TEST_H
#define LITGRAD_TEST_H

#define _POSIX_C_SOURCE 200809L /* posix_spawn, wordexp, poll, WEXITSTATUS */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wordexp.h>

#include "mem.h"
#include "value.h"

/* LG_ASAN: built with AddressSanitizer, by gcc (__SANITIZE_ADDRESS__) or by clang 14
 * (__has_feature, its only way of saying so). */
#if defined(__SANITIZE_ADDRESS__)
#define LG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LG_ASAN 1
#endif
#endif

#if defined(LG_ASAN)
#include <sanitizer/lsan_interface.h>
#endif

#ifndef LG_BIN_DIR
#define LG_BIN_DIR "build/bin"
#endif

/* The stage whose code this test binary links ("07"): tests/lg_stage.c, compiled for
 * each stage by the Makefile. */
extern const char lg_stage[];
#define LG_STAGE lg_stage

static inline void lg_expect_no_leaks(void)
{
    size_t live = mem_live_blocks();
    int leaked_elsewhere = 0;
#if defined(LG_ASAN)
    leaked_elsewhere = __lsan_do_recoverable_leak_check() != 0;
#endif
    if (live == 0 && !leaked_elsewhere)
        return;
    /* A failed assertion in .fini is only printed, so end the worker abnormally:
     * Criterion then reports that the test "crashed during its setup or teardown" and
     * exits non-zero, and tools/run-tests fails the stage. */
    fprintf(stderr, "LEAK: %zu block(s) of litgrad's allocator still live%s (if an "
            "assertion failed above, the test ended there, before its frees)\n", live,
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

/* ---- running a stage program ---------------------------------------------------------
 * A test that runs a program forks, and the program is spawned directly (posix_spawn), not
 * through a shell: on the machines that run `make test` a process costs milliseconds, and
 * a shell in between (popen) doubled the cost of every run -- an allocation walk runs a
 * program hundreds of times. The arguments are still shell words, split by wordexp(3) the
 * way sh splits them (quotes, '', $VAR); a line with shell syntax that wordexp refuses (a
 * redirection, a ';') is run by /bin/sh as before. */

extern char **environ;

/* Where a run's standard error goes: with standard output, into its own buffer, or away. */
typedef enum { LG_ERR_MERGED, LG_ERR_APART, LG_ERR_DISCARDED } LgErrMode;

/* LG_BIN_DIR as one word of sh, whatever the clone's directory is called: in single
 * quotes, each single quote written as '\''. */
static inline const char *lg_bin_dir_word(void)
{
    static char word[4 * sizeof LG_BIN_DIR + 2];
    if (word[0] == '\0') {
        char *w = word;
        *w++ = '\'';
        for (const char *p = LG_BIN_DIR; *p != '\0'; p++)
            if (*p == '\'') {
                memcpy(w, "'\\''", 4);
                w += 4;
            } else {
                *w++ = *p;
            }
        *w++ = '\'';
        *w = '\0';
    }
    return word;
}

/* The command of a run in the words of sh: "<env> LG_BIN_DIR/<program> <args>". */
static inline void lg_shell_command(char *command, size_t size, const char *env,
                                    const char *program, const char *args)
{
    int n = snprintf(command, size,
                     "ASAN_OPTIONS=exitcode=86 UBSAN_OPTIONS=exitcode=87 LSAN_OPTIONS=exitcode=88 "
                     "%s %s/%s %s", env, lg_bin_dir_word(), program, args);
    cr_assert(n > 0 && (size_t)n < size, "command too long");
}

/* Read the two pipes (err_fd may be -1) to their ends into out and err (each kept
 * NUL-terminated; what does not fit is read and dropped, so the program never blocks on a
 * full pipe). With a deadline (seconds > 0) the child is sent SIGTERM when it passes, as
 * timeout(1) does. Returns the child's exit status, 124 if the deadline passed (timeout(1)'s
 * status), or -1 if it did not exit normally. */
static inline int lg_collect(pid_t child, int out_fd, int err_fd, char *out, size_t out_size,
                             char *err, size_t err_size, int seconds)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    size_t used[2] = {0, 0};
    char *buf[2] = {out, err};
    size_t size[2] = {out_size, err_size};
    struct pollfd fds[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};
    int open_fds = 1 + (err_fd >= 0), timed_out = 0;
    while (open_fds > 0) {
        int wait_ms = -1;
        if (seconds > 0 && !timed_out) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            double left = seconds - ((double)(now.tv_sec - start.tv_sec) +
                                     (double)(now.tv_nsec - start.tv_nsec) * 1e-9);
            if (left <= 0) {
                kill(child, SIGTERM);
                timed_out = 1;
            } else {
                wait_ms = (int)(left * 1000) + 1;
            }
        }
        int ready = poll(fds, 2, wait_ms);
        if (ready < 0) {
            cr_assert_eq(errno, EINTR, "poll: %s", strerror(errno));
            continue;
        }
        for (int k = 0; k < 2; k++) {
            if (fds[k].fd < 0 || fds[k].revents == 0)
                continue;
            char scratch[4096];
            size_t room = size[k] - 1 - used[k];
            char *into = room > 0 ? buf[k] + used[k] : scratch;
            ssize_t got = read(fds[k].fd, into, room > 0 ? room : sizeof scratch);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                close(fds[k].fd);
                fds[k].fd = -1;
                open_fds--;
            } else if (room > 0) {
                used[k] += (size_t)got;
            }
        }
    }
    out[used[0]] = '\0';
    if (err != NULL)
        err[used[1]] = '\0';
    int raw;
    while (waitpid(child, &raw, 0) < 0)
        cr_assert_eq(errno, EINTR, "waitpid: %s", strerror(errno));
    if (timed_out)
        return 124;
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

/* Run "<env> LG_BIN_DIR/<program> <args>": env holds assignments (NAME=VALUE) and may end
 * with "timeout N" (the run is stopped after N seconds, status 124); args are shell words.
 * Standard input is /dev/null if null_stdin, else the test's own. Returns the exit status
 * (-1 if the program did not exit normally). */
static inline int lg_exec(const char *env, const char *program, const char *args,
                          int null_stdin, LgErrMode mode, char *out, size_t out_size,
                          char *err, size_t err_size)
{
    wordexp_t env_words, arg_words;
    int seconds = 0, shell = 0;
    cr_assert_eq(wordexp(env, &env_words, WRDE_NOCMD), 0, "env: %s", env);
    int code = wordexp(args, &arg_words, WRDE_NOCMD);
    if (code == WRDE_BADCHAR || code == WRDE_CMDSUB)
        shell = 1; /* a redirection, a ';', a $(...): the shell's business */
    else
        cr_assert_eq(code, 0, "args: %s", args);
    /* The environment: ours, with the sanitizers' exit codes, then env's assignments. */
    size_t ours = 0;
    while (environ[ours] != NULL)
        ours++;
    char **envp = malloc((ours + env_words.we_wordc + 4) * sizeof *envp);
    cr_assert_not_null(envp);
    size_t envc = 0;
    static char *const sanitizers[3] = {"ASAN_OPTIONS=exitcode=86", "UBSAN_OPTIONS=exitcode=87",
                                        "LSAN_OPTIONS=exitcode=88"};
    for (size_t i = 0; i < ours; i++)
        envp[envc++] = environ[i];
    for (size_t i = 0; i < 3 + env_words.we_wordc; i++) {
        char *assignment = i < 3 ? sanitizers[i] : env_words.we_wordv[i - 3];
        const char *eq = strchr(assignment, '=');
        if (i >= 3 && (eq == NULL || eq == assignment)) { /* not an assignment */
            cr_assert(strcmp(assignment, "timeout") == 0 && i + 2 == 3 + env_words.we_wordc,
                      "env may hold NAME=VALUE words and a last 'timeout N': %s", env);
            seconds = atoi(env_words.we_wordv[i - 2]);
            cr_assert_gt(seconds, 0, "env: %s", env);
            break;
        }
        size_t name = (size_t)(eq - assignment) + 1;
        size_t k = 0;
        while (k < envc && strncmp(envp[k], assignment, name) != 0)
            k++;
        envp[k] = assignment;
        envc += k == envc;
    }
    envp[envc] = NULL;
    char path[512], command[3 * 4096 + 1024];
    int n = snprintf(path, sizeof path, "%s/%s", LG_BIN_DIR, program);
    cr_assert(n > 0 && (size_t)n < sizeof path, "program path too long");
    size_t argc = shell ? 3 : 1 + arg_words.we_wordc;
    char **argv = malloc((argc + 1) * sizeof *argv);
    cr_assert_not_null(argv);
    if (shell) {
        lg_shell_command(command, sizeof command, env, program, args);
        argv[0] = "/bin/sh";
        argv[1] = "-c";
        argv[2] = command;
    } else {
        argv[0] = path;
        for (size_t i = 0; i < arg_words.we_wordc; i++)
            argv[1 + i] = arg_words.we_wordv[i];
    }
    argv[argc] = NULL;
    int out_pipe[2], err_pipe[2] = {-1, -1};
    cr_assert_eq(pipe(out_pipe), 0, "pipe");
    if (mode == LG_ERR_APART)
        cr_assert_eq(pipe(err_pipe), 0, "pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (null_stdin)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    if (mode == LG_ERR_MERGED)
        posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 2);
    else if (mode == LG_ERR_APART)
        posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
    else
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
    posix_spawn_file_actions_addclose(&actions, out_pipe[1]);
    if (mode == LG_ERR_APART) {
        posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
        posix_spawn_file_actions_addclose(&actions, err_pipe[1]);
    }
    pid_t child;
    int spawned = posix_spawn(&child, argv[0], &actions, NULL, argv, shell ? environ : envp);
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    if (mode == LG_ERR_APART)
        close(err_pipe[1]);
    cr_assert_eq(spawned, 0, "cannot run %s: %s", argv[0], strerror(spawned));
    int status = lg_collect(child, out_pipe[0], err_pipe[0], out, out_size, err, err_size,
                            seconds);
    free(argv);
    free(envp);
    wordfree(&env_words);
    if (!shell)
        wordfree(&arg_words);
    return status;
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
    run->status = lg_exec("", program, args, 0, LG_ERR_MERGED, run->output,
                          sizeof run->output, NULL, 0);
}

/* The same, capturing standard output alone (standard error is discarded). */
static inline void run_program_stdout(ProgramRun *run, const char *program, const char *args)
{
    run->status = lg_exec("", program, args, 0, LG_ERR_DISCARDED, run->output,
                          sizeof run->output, NULL, 0);
}

/* ---- command lines and allocation failures from outside -------------------------- */

enum { LG_ERRORS_MAX = 8192 };

typedef struct LgRun {
    int status;                  /* exit status, or -1 if it did not exit normally */
    char out[LG_OUTPUT_MAX];     /* standard output */
    char err[LG_ERRORS_MAX];     /* standard error */
} LgRun;

/* The whole of a text file, in a malloc'd string the caller frees; fails the test if
 * the file cannot be opened or read whole. */
static inline char *lg_read_text(const char *path)
{
    FILE *in = fopen(path, "r");
    struct stat info;
    cr_assert(in != NULL && fstat(fileno(in), &info) == 0, "%s was not written", path);
    size_t size = (size_t)info.st_size;
    char *text = malloc(size + 1);
    cr_assert_not_null(text);
    cr_assert_eq(fread(text, 1, size, in), size, "cannot read %s", path);
    text[size] = '\0';
    fclose(in);
    return text;
}

/* How many entries a directory holds, "." and ".." not counted. */
static inline size_t lg_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static inline void lg_read_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    size_t used = fread(buf, 1, size - 1, f);
    buf[used] = '\0';
    fclose(f);
}

/* Run LG_BIN_DIR/<program> <args> (shell words) with its files limited to `blocks` blocks
 * of 512 bytes and SIGXFSZ ignored, so a write past the limit fails with EFBIG; its two
 * streams merged into out. Returns the exit status, or -1 if it did not exit normally. */
static inline int lg_run_past_size_limit(const char *program, const char *args, int blocks,
                                         char *out, size_t size)
{
    char command[1024];
    int n = snprintf(command, sizeof command, "ulimit -f %d && trap '' XFSZ && %s/%s %s 2>&1",
                     blocks, lg_bin_dir_word(), program, args);
    cr_assert(n > 0 && (size_t)n < sizeof command, "command too long");
    FILE *pipe = popen(command, "r");
    cr_assert_not_null(pipe);
    size_t used = fread(out, 1, size - 1, pipe);
    out[used] = '\0';
    int raw = pclose(pipe);
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

/* A run that writes a group of files (Stage 01's OutfileGroup), stopped by the file-size
 * limit of `bytes` while it writes `stopped`, a file after one already in place: run
 * "<program> <option> DIR" into a fresh directory twice, once with SIGXFSZ ignored (the
 * write fails with EFBIG: exit 1, and standard error is the one line naming DIR/stopped)
 * and once with its default action (the run ends by SIGXFSZ). Either way the directory
 * is left empty: no file of the group, no temporary file. */
static inline void lg_expect_group_stopped_by_size_limit(const char *program,
                                                         const char *option, long bytes,
                                                         const char *stopped)
{
    for (int ignore = 1; ignore >= 0; ignore--) {
        char dir[] = "/tmp/litgrad-group-XXXXXX", into[64], err_path[64], err[512];
        char want[256], exe[sizeof LG_BIN_DIR + 64];
        cr_assert_not_null(mkdtemp(dir));
        snprintf(into, sizeof into, "%s/into", dir);
        snprintf(err_path, sizeof err_path, "%s/err", dir);
        snprintf(exe, sizeof exe, "%s/%s", LG_BIN_DIR, program);
        cr_assert_eq(mkdir(into, 0700), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            struct rlimit limit = {(rlim_t)bytes, (rlim_t)bytes};
            int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            int out = open("/dev/null", O_WRONLY);
            if (e < 0 || out < 0 || dup2(e, 2) < 0 || dup2(out, 1) < 0 ||
                setrlimit(RLIMIT_FSIZE, &limit) != 0 ||
                signal(SIGXFSZ, ignore ? SIG_IGN : SIG_DFL) == SIG_ERR)
                _exit(126);
            execl(exe, program, option, into, (char *)NULL);
            _exit(127);
        }
        int raw;
        cr_assert_eq(waitpid(pid, &raw, 0), pid);
        lg_read_file(err_path, err, sizeof err);
        if (ignore) {
            snprintf(want, sizeof want, "%s: error: cannot write %s/%s: %s\n", program, into,
                     stopped, strerror(EFBIG));
            cr_assert(WIFEXITED(raw) && WEXITSTATUS(raw) == 1, "status %#x %s", raw, err);
            cr_assert_str_eq(err, want);
        } else {
            cr_assert(WIFSIGNALED(raw) && WTERMSIG(raw) == SIGXFSZ, "status %#x %s", raw,
                      err);
        }
        cr_assert_eq(lg_count_entries(into), 0, "%s left a file in %s (SIGXFSZ %s)", program,
                     into, ignore ? "ignored" : "default");
        cr_assert_eq(rmdir(into), 0);
        cr_assert_eq(unlink(err_path), 0);
        cr_assert_eq(rmdir(dir), 0);
    }
}

/* Run "<env> LG_BIN_DIR/<program> <args>" (env: assignments such as
 * "LITGRAD_FAIL_ALLOC=3", optionally ending with "timeout N", or ""; args: shell words);
 * standard input is /dev/null. */
static inline void lg_run(LgRun *run, const char *env, const char *program, const char *args)
{
    run->status = lg_exec(env, program, args, 1, LG_ERR_APART, run->out, sizeof run->out,
                          run->err, sizeof run->err);
}

/* One bad command line: its arguments (shell words; {FIFO}, {LONG}, {DIR} and {FILE}
 * stand for a FIFO, a path of 5000 bytes, a directory and a regular file) and a piece
 * of text the one line on standard error must contain (the option or file named). */
typedef struct LgBadLine {
    const char *args;
    const char *names;
} LgBadLine;

/* Bad command lines that every program refuses alike. */
static const LgBadLine LG_COMMON_BAD_LINES[] = {
    {"-q", "unknown option '-q'"},
    {"-qz", "unknown option '-q'"},
    {"-%", "unknown option '-%'"},
    {"--bogus", "unknown option '--bogus'"},
    {"--bogus=1", "unknown option '--bogus'"},
    {"--help=1", "option '--help' takes no value"},
    {"--HELP", "unknown option '--HELP'"},
    {"--hel", "option '--hel' is abbreviated: write '--help'"},
};

/* Bad command lines of the programs that run a program FILE (Stages 10 to 12). */
#define LG_FILE_PROGRAM_BAD_LINES                                                            \
    {"docs/examples/halve.lgir --calls", "option '--calls' needs a value"},                  \
    {"docs/examples/halve.lgir --input state=1 --calls 0",                                   \
     "--calls must be an integer in [1, 1000]: got '0'"},                                    \
    {"docs/examples/halve.lgir --input state=1 --calls 1001", "got '1001'"},                \
    {"docs/examples/halve.lgir --input state=1 --calls=", "--calls must be an integer"},     \
    {"docs/examples/halve.lgir --input state=1 --calls 0x10", "got '0x10'"},                \
    {"docs/examples/halve.lgir --input state=1 --calls 1 --calls 2",                         \
     "option '--calls' is given twice"},                                                     \
    {"docs/examples/halve.lgir --input state=x", "--input state must be a number: got 'x'"}, \
    {"docs/examples/halve.lgir --input state=0x10", "got '0x10'"},                          \
    {"docs/examples/halve.lgir --input state=1e999", "--input state"},                      \
    {"docs/examples/halve.lgir --input state", "--input must be NAME=VALUE: got 'state'"},  \
    {"docs/examples/halve.lgir --input =1", "--input must be NAME=VALUE: got '=1'"},        \
    {"docs/examples/halve.lgir --input ''", "--input must be NAME=VALUE: got ''"},          \
    {"docs/examples/halve.lgir --input", "option '--input' needs a value"},                  \
    {"docs/examples/no-such-file.lgir", "cannot read docs/examples/no-such-file.lgir: No such file"}, \
    {"docs/examples", "cannot read docs/examples: it is a directory"},                      \
    {"{FIFO}", "not a regular file"},                                                        \
    {"/dev/null", "cannot read /dev/null: not a regular file"},                              \
    {"{LONG}", "a file name has 5000 bytes"},                                                \
    {"/etc/passwd/x", "cannot read /etc/passwd/x: Not a directory"},                         \
    {"''", "a file name must not be empty"},                                                 \
    {"docs/examples/halve.lgir docs/examples/halve.lgir", "unexpected argument"},            \
    {"--calls 2", "option '--calls' applies only with FILE"},                                \
    {"--input state=1", "option '--input' applies only with FILE"}

static inline void lg_expand(const char *args, char *out, size_t size, const char *fifo,
                             const char *file)
{
    static char long_path[5001];
    memset(long_path, 'a', 5000);
    long_path[0] = '/';
    long_path[5000] = '\0';
    const char *from[] = {"{FIFO}", "{LONG}", "{DIR}", "{FILE}"};
    const char *to[] = {fifo, long_path, "/tmp", file};
    size_t used = 0;
    for (const char *p = args; *p != '\0';) {
        size_t k = 0;
        while (k < 4 && strncmp(p, from[k], strlen(from[k])) != 0)
            k++;
        const char *piece = k < 4 ? to[k] : p;
        size_t len = k < 4 ? strlen(to[k]) : 1;
        cr_assert_lt(used + len, size, "expanded command line too long");
        memcpy(out + used, piece, len);
        used += len;
        p += k < 4 ? strlen(from[k]) : 1;
    }
    out[used] = '\0';
}

/* Run the program with every line of the table and the common ones: each must exit 2
 * with nothing on standard output and exactly one line on standard error that starts
 * with "<program>: error: " and contains the row's `names`. Returns how many lines. */
static inline size_t lg_expect_usage_errors(const char *program, const LgBadLine *lines,
                                            size_t count)
{
    char fifo[] = "/tmp/litgrad-fifo-XXXXXX", file[] = "/tmp/litgrad-file-XXXXXX";
    int fd = mkstemp(file);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_not_null(mkdtemp(fifo));
    char fifo_path[64];
    snprintf(fifo_path, sizeof fifo_path, "%s/fifo", fifo);
    cr_assert_eq(mkfifo(fifo_path, 0600), 0, "mkfifo");
    static LgRun run;
    static char args[8192];
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: error: ", program);
    size_t common = sizeof LG_COMMON_BAD_LINES / sizeof LG_COMMON_BAD_LINES[0];
    for (size_t i = 0; i < count + common; i++) {
        const LgBadLine *line = i < count ? &lines[i] : &LG_COMMON_BAD_LINES[i - count];
        lg_expand(line->args, args, sizeof args, fifo_path, file);
        lg_run(&run, "timeout 20", program, args);
        const char *shown = strlen(line->args) > 200 ? "(a long line)" : line->args;
        cr_expect_eq(run.status, 2, "%s %s: exit %d, not 2; stderr: %s", program, shown,
                     run.status, run.err);
        cr_expect_str_eq(run.out, "", "%s %s wrote to standard output", program, shown);
        char *newline = strchr(run.err, '\n');
        cr_expect(newline != NULL && newline[1] == '\0', "%s %s: not one line on stderr: %s",
                  program, shown, run.err);
        cr_expect(strncmp(run.err, prefix, strlen(prefix)) == 0 &&
                      strstr(run.err, line->names) != NULL,
                  "%s %s: stderr does not name '%s': %s", program, shown, line->names,
                  run.err);
    }
    unlink(fifo_path);
    rmdir(fifo);
    unlink(file);
    return count + common;
}

/* For each name of `names` (ended by NULL), in a fresh directory DIR holding a FIFO at
 * DIR/name (then once more with a symbolic link at the first name): "<program> <option>
 * DIR <args>" must be refused before it computes anything -- exit 2, nothing on standard
 * output, one line on standard error naming DIR/name -- and leave DIR as it was (the
 * FIFO or link alone, no temporary file). Returns how many runs were made. */
static inline size_t lg_expect_outputs_refused(const char *program, const char *option,
                                               const char *const names[], const char *args)
{
    static LgRun run;
    size_t n = 0;
    while (names[n] != NULL)
        n++;
    for (size_t k = 0; k <= n; k++) {
        char dir[] = "/tmp/litgrad-out-XXXXXX", path[128], line[512], want[192];
        cr_assert_not_null(mkdtemp(dir));
        int link = k == n;
        snprintf(path, sizeof path, "%s/%s", dir, names[link ? 0 : k]);
        cr_assert_eq(link ? symlink("/dev/null", path) : mkfifo(path, 0600), 0, "%s", path);
        snprintf(line, sizeof line, "%s %s %s", option, dir, args);
        lg_run(&run, "timeout 60", program, line);
        snprintf(want, sizeof want, "%s: error: cannot write %s: it is %s;", program, path,
                 link ? "a symbolic link" : "a FIFO");
        cr_expect_eq(run.status, 2, "%s %s: exit %d; stderr: %s", program, line, run.status,
                     run.err);
        cr_expect_str_eq(run.out, "", "%s %s: output before the refusal", program, line);
        const char *newline = strchr(run.err, '\n');
        cr_expect(strncmp(run.err, want, strlen(want)) == 0 && newline != NULL &&
                      newline[1] == '\0', "%s %s: stderr: %s", program, line, run.err);
        cr_expect_eq(lg_count_entries(dir), 1, "%s %s: something was left", program, line);
        struct stat info;
        cr_expect(lstat(path, &info) == 0 && (link ? S_ISLNK(info.st_mode)
                                                   : S_ISFIFO(info.st_mode)),
                  "%s: replaced", path);
        unlink(path);
        cr_assert_eq(rmdir(dir), 0, "%s: something was left", dir);
    }
    return n + 1;
}

/* The checks of one run that failed allocation k: exit 1 with one line on standard
 * error, the out-of-memory message naming the program. */
static inline void lg_expect_out_of_memory(const char *program, const char *args, size_t k,
                                           int status, const char *err)
{
    cr_assert_eq(status, 1, "%s %s, allocation %zu failing: exit %d; stderr: %s", program,
                 args, k, status, err);
    cr_assert(strncmp(err, program, strlen(program)) == 0 &&
                  strstr(err, "out of memory: cannot allocate") != NULL,
              "%s %s, allocation %zu failing: exit 1 without the out-of-memory message: %s",
              program, args, k, err);
    const char *nl = strchr(err, '\n');
    cr_assert(nl != NULL && nl[1] == '\0', "%s %s, allocation %zu failing: not one line on "
              "standard error: %s", program, args, k, err);
}

/* Run "<program> <args>" normally, then once with LITGRAD_FAIL_WALK (Stage 01, "Every
 * failure in one run"): the program forks at each allocation k and the child is the run
 * LITGRAD_FAIL_ALLOC=k makes; its standard error is what the parent had written before
 * the fork followed by the child's own part of DIR/children.err. Each such run must exit
 * 1 with one line on standard error, the out-of-memory message, and the parent, which no
 * allocation failed, must exit 0 with exactly the normal output. Returns the number of
 * allocations the run makes. A program that writes files of its own leaves them to the
 * run that made them (Stage 09's scratch directory): a child's clean-up would change
 * what its parent finds. */
static inline size_t lg_walk_allocation_failures(const char *program, const char *args)
{
    static LgRun normal, run;
    lg_run(&normal, "", program, args);
    cr_assert_eq(normal.status, 0, "%s %s: exit %d: %s", program, args, normal.status,
                 normal.err);
    char dir[] = "/tmp/litgrad-walk-XXXXXX", path[128], env[128], line[8192];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(env, sizeof env, "LITGRAD_FAIL_WALK=%s", dir);
    snprintf(line, sizeof line, "%s > %s/all.out 2> %s/all.err", args, dir, dir);
    lg_run(&run, env, program, line); /* the redirections run it through /bin/sh */
    static char out[LG_OUTPUT_MAX], err[LG_OUTPUT_MAX];
    snprintf(path, sizeof path, "%s/all.out", dir);
    lg_read_file(path, out, sizeof out);
    snprintf(path, sizeof path, "%s/all.err", dir);
    lg_read_file(path, err, sizeof err);
    cr_assert_eq(run.status, 0, "%s %s with every allocation walked: exit %d: %s", program,
                 args, run.status, err);
    cr_assert_str_eq(out, normal.out, "%s %s with every allocation walked: other output",
                     program, args);
    /* The children's standard error, all of it: each run's part is a range of it. */
    snprintf(path, sizeof path, "%s/children.err", dir);
    char *children = lg_read_text(path);
    size_t size = strlen(children);
    snprintf(path, sizeof path, "%s/runs", dir);
    FILE *runs = fopen(path, "r");
    cr_assert_not_null(runs, "%s: the program made no allocation", path);
    size_t k = 0, end = 0;
    for (size_t at, out_shared, err_shared, from, to;
         fscanf(runs, "%zu %d %zu %zu %zu %zu", &at, &run.status, &out_shared, &err_shared,
                &from, &to) == 6;) {
        cr_assert_eq(at, ++k, "%s: the walk's runs are out of order", path);
        cr_assert_leq(err_shared, strlen(err), "%s: run %zu", path, k);
        cr_assert(from == end && to >= from && to <= size, "%s: run %zu: its standard "
                  "error is not the next part of children.err", path, k);
        snprintf(run.err, sizeof run.err, "%.*s%.*s", (int)err_shared, err, (int)(to - from),
                 children + from);
        lg_expect_out_of_memory(program, args, k, run.status, run.err);
        end = to;
    }
    free(children);
    cr_assert(feof(runs), "%s: a line that is not 'k status out err from to'", path);
    cr_assert(k > 0 && end == size, "%s: %zu runs, and %zu bytes of children.err that no "
              "run wrote", path, k, size - end);
    fclose(runs);
    unlink(path);
    static const char *const files[4] = {"children.out", "children.err", "all.out",
                                         "all.err"};
    for (int f = 0; f < 4; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        cr_assert_eq(unlink(path), 0, "%s", path);
    }
    cr_assert_eq(rmdir(dir), 0, "%s: something was left", dir);
    return k;
}

#endif
