/* fuzz_ir.c -- a libFuzzer target for Part III's IR: every input is a program text,
 * taken as the Stage 12 program takes a file. It is parsed (with every rule of the IR
 * and the loop rules); a refusal must be one line, exit status 2, and leave nothing
 * allocated. A program that parses must print to a text that parses back and prints the
 * same; then it is compiled and called twice eagerly and twice compiled on the same
 * inputs (compiledemo_side_by_side), with functionalization and without it, and every call
 * must match. Built by `make fuzz` with libFuzzer, and by `make test` into a driver that
 * runs the inputs kept in tests/fuzz/regressions/ir/ (tests/fuzz/regress_main.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "compiledemo.h"
#include "interp.h"
#include "ir.h"
#include "mem.h"
#include "runner.h"
#include "tensor.h"

/* Inputs that would run for long are parsed, checked and compiled, not run: the fuzzer
 * looks for wrong answers and crashes, not for the work bound, which the tests check. */
enum { FUZZ_TEXT_MAX = 1 << 16 };
#define FUZZ_WORK_MAX ((size_t)1 << 20)
#define FUZZ_INPUT_ELEMENTS_MAX ((size_t)1 << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_ir: %s: %s\n", what, detail);
    abort();
}

/* A refusal is one line, and nothing it made is left behind. */
static void expect_refusal(const LgError *err, const char *where)
{
    if (err->status == LG_OK || err->message[0] == '\0')
        fail(where, "refused without a message");
    if (strchr(err->message, '\n') != NULL)
        fail(where, err->message);
}

static char *print_program(const IrProgram *program)
{
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    if (out == NULL)
        abort();
    ir_print_program(program, out);
    fclose(out);
    return text;
}

/* The printed program parses back to a program that prints the same. */
static void check_round_trip(const IrProgram *program)
{
    LgError err = LG_ERROR_INIT;
    char *first = print_program(program);
    IrProgram *again = ir_parse(first, "printed", &err);
    if (again == NULL)
        fail("the printed program does not parse", err.message);
    char *second = print_program(again);
    if (strcmp(first, second) != 0)
        fail("printing the printed program changes it", second);
    ir_program_free(&again);
    free(first);
    free(second);
}

/* Whether a call of the entry function is cheap enough to run here. */
static int cheap_to_run(const IrProgram *program)
{
    LgError err = LG_ERROR_INIT;
    const IrFunction *fn = &program->functions[0];
    size_t elements = 0;
    for (size_t p = 0; p < fn->nparams; p++)
        elements += tensor_type_numel(&fn->values[p].type);
    size_t *table = interp_work_table(program, &err);
    if (table == NULL)
        abort();
    int cheap = table[0] <= FUZZ_WORK_MAX && elements <= FUZZ_INPUT_ELEMENTS_MAX &&
                fn->nparams <= RUNNER_INPUTS_MAX;
    mem_free(table);
    return cheap;
}

/* Eager against compiled, two calls on the same inputs: every call must match. */
static void run_side_by_side(const IrProgram *program, bool keep_inplace)
{
    const IrFunction *fn = &program->functions[0];
    char texts[RUNNER_INPUTS_MAX][IR_NAME_MAX + 8];
    char *specs[RUNNER_INPUTS_MAX];
    for (size_t p = 0; p < fn->nparams; p++) {
        TensorDtype dtype = fn->values[p].type.dtype;
        snprintf(texts[p], sizeof texts[p], "%s=%s", fn->values[p].name,
                 dtype == TENSOR_FLOAT32 ? "0.75" : "1");
        specs[p] = texts[p];
    }
    CompareRequest request = {"fuzz", specs, fn->nparams, 2, false,
                              {.analysis = IR_ANALYSIS_UNION, .keep_inplace = keep_inplace}};
    LgError err = LG_ERROR_INIT;
    size_t mismatches = 0;
    LgStatus status = compiledemo_side_by_side(NULL, program, &request, &mismatches, &err);
    if (status != LG_OK)
        expect_refusal(&err, "a refused call");
    if (status == LG_ERR_POSTCONDITION || status == LG_ERR_ALLOC)
        fail("a call was refused by no rule of the IR", err.message);
    if (mismatches > 0)
        fail("eager and compiled differ", keep_inplace ? "in-place lowering" : "functional");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_TEXT_MAX || memchr(data, '\0', size) != NULL)
        return 0;  /* the loader refuses a NUL byte before the parser sees the text */
    char *text = malloc(size + 1);
    if (text == NULL)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    LgError err = LG_ERROR_INIT;
    IrProgram *program = ir_parse(text, "fuzz", &err);
    free(text);
    if (program == NULL) {
        expect_refusal(&err, "a refused program");
        if (compiledemo_exit_status(err.status) != 2)
            fail("a refused program does not exit 2", err.message);
    } else {
        check_round_trip(program);
        if (cheap_to_run(program)) {
            run_side_by_side(program, false);
            run_side_by_side(program, true);
        } else {
            CompileOptions options = {.analysis = IR_ANALYSIS_UNION};
            CompiledProgram *c = compile_program(program, &options, &err);
            if (c == NULL)
                expect_refusal(&err, "a refused compile");
            compile_free(&c);
        }
        ir_program_free(&program);
    }
    if (mem_live_blocks() != 0)
        fail("blocks left allocated", "mem_live_blocks() != 0");
    return 0;
}
