/* fuzz_views.c -- a libFuzzer target for Stage 13's view programs: every input is a
 * program text, taken as the Stage 13 program takes a file. A text with a NUL byte goes
 * through the loader, which must refuse it naming the byte's offset; any other text is
 * parsed. A refusal must be one line, "fuzz:LINE: ...", with a status of a bad input
 * (exit 2), and leave nothing allocated. A program that parses must print to a text
 * about as long as its own, that parses back and prints the same, and that the checker
 * judges as it judges the original, by both analyses. Whatever the whole-storage analysis accepts, the exact one
 * accepts too. A program that checks is compiled (by each analysis that accepts it) and
 * called three times eagerly and three times compiled on inputs of its own: every call
 * must return the same bits and leave the same bits in the inputs, or both must refuse
 * at the same call with the same status and message. Built by `make fuzz` with
 * libFuzzer, and by `make test` into a driver that runs the inputs kept in
 * tests/fuzz/regressions/views/ (tests/fuzz/regress_main.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "mem.h"
#include "view.h"
#include "viewexec.h"

/* Programs whose storages hold more elements than this are parsed, checked and compiled,
 * not run: the fuzzer looks for wrong answers and crashes, not for the work bound, which
 * the tests check (a storage of 2^24 elements, copied a dozen times under the
 * sanitizers, takes seconds). */
enum { FUZZ_CALLS = 3 };
#define FUZZ_RUN_ELEMENTS_MAX ((size_t)1 << 18)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_views: %s: %s\n", what, detail);
    abort();
}

/* A refusal is one line with a message, and nothing it made is left behind. */
static void expect_one_line(const LgError *err, const char *where)
{
    if (err->status == LG_OK || err->message[0] == '\0')
        fail(where, "refused without a message");
    if (strchr(err->message, '\n') != NULL || strchr(err->message, '\r') != NULL)
        fail(where, err->message);
}

/* A file the parser or the checker refuses: a bad input's status (exit 2), named
 * "fuzz:LINE: ...". */
static void expect_bad_input(const LgError *err, const char *where)
{
    expect_one_line(err, where);
    if (err->status != LG_ERR_IR_INVALID && err->status != LG_ERR_IR_LIMIT)
        fail(where, err->message);
    if (strncmp(err->message, "fuzz:", 5) != 0)
        fail("a refusal does not name the file and the line", err->message);
}

static char *print_program(const ViewProgram *program)
{
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (out == NULL)
        abort();
    view_print_program(program, out);
    fclose(out);
    return text;
}

/* The printed program is about as long as its text (a number of the text prints in at
 * most 15 characters, "-1.17549435e-38", after at least 2, "1,"), parses back, prints
 * the same, and checks as the original does. */
static void check_round_trip(const ViewProgram *program, size_t size,
                             const LgStatus verdict[2])
{
    LgError err = LG_ERROR_INIT;
    char *first = print_program(program);
    if (strlen(first) > 10 * size + 1024)
        fail("the printed program is far longer than its text", "view_print_program");
    ViewProgram *again = view_parse(first, "fuzz", &err);
    if (again == NULL) {
        fprintf(stderr, "%s", first);
        fail("the printed program does not parse", err.message);
    }
    char *second = print_program(again);
    if (strcmp(first, second) != 0) {
        fprintf(stderr, "%s----\n%s", first, second);
        fail("printing the printed program changes it", "see above");
    }
    for (int a = 0; a < 2; a++) {
        LgError check = LG_ERROR_INIT;
        LgStatus status = view_check_program(again, "fuzz", (ViewAnalysis)a, &check);
        if (status != verdict[a]) {
            fprintf(stderr, "%s", first);
            fail("the printed program checks otherwise", check.message);
        }
    }
    view_program_free(&again);
    free(first);
    free(second);
}

/* Whether two calls agree bit for bit in what they returned and left in the inputs. */
static bool same_calls(const ViewProgram *pr, const ViewInputs *a, const ViewResults *ra,
                       const ViewInputs *b, const ViewResults *rb)
{
    if (ra->count != rb->count)
        return false;
    size_t total = 0;
    for (size_t r = 0; r < ra->count; r++) {
        if (ra->lengths[r] != rb->lengths[r])
            return false;
        total += ra->lengths[r];
    }
    if (total > 0 && memcmp(ra->elems, rb->elems, total * sizeof(float)) != 0)
        return false;
    for (size_t v = 0; v < pr->nvalues; v++)
        if (pr->values[v].kind == VIEW_VALUE_INPUT &&
            memcmp(a->elems[v], b->elems[v], pr->values[v].range.length * sizeof(float)))
            return false;
    return true;
}

/* The elements of every storage of the program together. */
static size_t storage_elements(const ViewProgram *pr)
{
    size_t total = 0;
    for (size_t v = 0; v < pr->nvalues; v++)
        if (pr->values[v].range.root == v)
            total += pr->values[v].range.length;
    return total;
}

/* Eager against compiled by `analysis`, FUZZ_CALLS calls on inputs of their own. */
static void run_side_by_side(const ViewProgram *pr, ViewAnalysis analysis)
{
    LgError err = LG_ERROR_INIT;
    ViewCompileOptions options = {analysis, false};
    ViewCompiled *c = viewexec_compile(pr, &options, &err);
    if (c == NULL) {
        expect_one_line(&err, "a refused compile");
        if (err.status != LG_ERR_ALLOC)
            fail("a checked program was refused by the compiler", err.message);
        return;
    }
    ViewInputs in[2] = {{0}, {0}};
    if (storage_elements(pr) > FUZZ_RUN_ELEMENTS_MAX) {
        viewexec_compiled_free(&c);
        return;
    }
    if (viewexec_inputs_new(pr, &in[0], &err) != LG_OK ||
        viewexec_inputs_new(pr, &in[1], &err) != LG_OK) {
        expect_one_line(&err, "refused inputs");
        if (err.status != LG_ERR_ALLOC)
            fail("inputs refused by no rule", err.message);
    } else {
        for (size_t call = 0; call < FUZZ_CALLS; call++) {
            ViewResults r[2] = {{0}, {0}};
            LgError e[2] = {LG_ERROR_INIT, LG_ERROR_INIT};
            LgStatus s0 = viewexec_eager_call(pr, &in[0], &r[0], &e[0]);
            LgStatus s1 = viewexec_compiled_call(c, &in[1], &r[1], &e[1]);
            if (s0 != LG_OK)
                expect_one_line(&e[0], "a refused eager call");
            if (s1 != LG_OK)
                expect_one_line(&e[1], "a refused compiled call");
            if (s0 != s1 || (s0 != LG_OK && strcmp(e[0].message, e[1].message) != 0)) {
                fprintf(stderr, "eager: %s\ncompiled: %s\n", e[0].message, e[1].message);
                fail("eager and compiled refuse otherwise", "see above");
            }
            if (s0 == LG_OK && !same_calls(pr, &in[0], &r[0], &in[1], &r[1]))
                fail("eager and compiled differ",
                     analysis == VIEW_ANALYSIS_EXACT ? "exact" : "whole-storage");
            viewexec_results_free(&r[0]);
            viewexec_results_free(&r[1]);
            if (s0 != LG_OK) {
                if (s0 != LG_ERR_BUDGET)
                    fail("a call was refused by no rule", e[0].message);
                break;
            }
        }
    }
    viewexec_inputs_free(&in[0]);
    viewexec_inputs_free(&in[1]);
    viewexec_compiled_free(&c);
}

/* A text with a NUL byte, through the loader as the program reads a file: refused,
 * naming the offset of the first NUL byte. */
static void load_with_nul(const uint8_t *data, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_views_%ld.lgv", (long)getpid());
    FILE *file = fopen(path, "wb");
    if (file == NULL || fwrite(data, 1, size, file) != size || fclose(file) != 0)
        abort();
    LgError err = LG_ERROR_INIT;
    ViewProgram *pr = view_load_program(path, "fuzz", &err);
    remove(path);
    if (pr != NULL)
        fail("a text with a NUL byte was loaded", "view_load_program");
    expect_one_line(&err, "a refused file");
    char offset[64];
    snprintf(offset, sizeof offset, "NUL byte at offset %zu",
             (size_t)((const uint8_t *)memchr(data, '\0', size) - data));
    if (err.status != LG_ERR_IR_FILE || strstr(err.message, offset) == NULL)
        fail("a NUL byte refused otherwise", err.message);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > VIEW_FILE_MAX)
        return 0;
    if (memchr(data, '\0', size) != NULL) {
        load_with_nul(data, size);
    } else {
        char *text = malloc(size + 1);
        if (text == NULL)
            abort();
        memcpy(text, data, size);
        text[size] = '\0';
        LgError err = LG_ERROR_INIT;
        ViewProgram *pr = view_parse(text, "fuzz", &err);
        free(text);
        if (pr == NULL) {
            expect_bad_input(&err, "a refused program");
        } else {
            LgStatus verdict[2];
            for (int a = 0; a < 2; a++) {
                LgError check = LG_ERROR_INIT;
                verdict[a] = view_check_program(pr, "fuzz", (ViewAnalysis)a, &check);
                if (verdict[a] != LG_OK)
                    expect_bad_input(&check, "a refused check");
            }
            if (verdict[VIEW_ANALYSIS_WHOLE_STORAGE] == LG_OK &&
                verdict[VIEW_ANALYSIS_EXACT] != LG_OK)
                fail("whole-storage accepts what exact refuses", "view_check_program");
            check_round_trip(pr, size, verdict);
            for (int a = 0; a < 2; a++)
                if (verdict[a] == LG_OK)
                    run_side_by_side(pr, (ViewAnalysis)a);
            view_program_free(&pr);
        }
    }
    if (mem_live_blocks() != 0)
        fail("blocks left allocated", "mem_live_blocks() != 0");
    return 0;
}
