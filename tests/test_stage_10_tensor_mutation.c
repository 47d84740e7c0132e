/* Stage 10: tensors with storage identity, in-place ops, the IR (parser, printer,
 * checker) and the eager interpreter. Float32 results are compared by their bits. */
#include "litgrad_test.h"

#include <dirent.h>
#include <float.h>
#include <stdint.h>

#include "interp.h"
#include "ir.h"
#include "runner.h"
#include "tensor.h"

LG_SUITE(stage10);

static const TensorType F32 = {TENSOR_FLOAT32, 0, {0}};

static const char halve_text[] =
    "def halve(%state: f32[]) {\n"
    "  mul_(%state, 0.5)\n"
    "  %answer = clone(%state)\n"
    "  return %answer\n"
    "}\n";

static IrProgram *parse_ok(const char *text)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = ir_parse(text, "test", &err);
    cr_assert_not_null(program, "%s", err.message);
    return program;
}

static uint32_t bits0(const Tensor *t)
{
    return tensor_f32_bits(tensor_get(t, 0).f32);
}

/* Run a one-input program once on x and return the first returned tensor's bits. */
static uint32_t run_scalar(const char *text, Tensor *x, uint32_t *returned)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(text);
    IrResults results;
    cr_assert_eq(interp_call(program, 0, &x, 1, &results, &err), LG_OK, "%s", err.message);
    uint32_t bits = results.count > 0 ? bits0(results.tensors[0]) : 0;
    if (returned != NULL)
        *returned = bits;
    interp_results_free(&results);
    ir_program_free(&program);
    return bits;
}

static char *print_to_string(const IrProgram *program)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    ir_print_program(program, out);
    fclose(out);
    return text;
}

Test(stage10, types_are_formatted_and_checked)
{
    LgError err = LG_ERROR_INIT;
    char buf[64];
    TensorType t = {TENSOR_INT64, 2, {2, 3}};
    tensor_type_format(&t, buf, sizeof buf);
    cr_assert_str_eq(buf, "i64[2, 3]");
    tensor_type_format(&F32, buf, sizeof buf);
    cr_assert_str_eq(buf, "f32[]");
    cr_assert_eq(tensor_type_numel(&t), 6);
    cr_assert_eq(tensor_type_numel(&F32), 1, "a 0-d tensor has one element");
    TensorType zero = {TENSOR_FLOAT32, 2, {2, 0}};
    cr_assert_eq(tensor_type_check(&zero, &err), LG_ERR_TENSOR_SHAPE);
    cr_assert_str_eq(err.message, "dim 1 of a tensor must be >= 1: got 0");
    TensorType huge = {TENSOR_FLOAT32, 2, {1 << 13, 1 << 12}};
    cr_assert_eq(tensor_type_check(&huge, &err), LG_ERR_TENSOR_SHAPE);
    cr_assert_str_eq(err.message,
                     "a tensor has at most 16777216 elements: dim 1 is 4096 after 8192");
    cr_assert_null(tensor_full(&huge, 0.0, &err), "refused before allocating");
    cr_assert_eq(mem_live_blocks(), 0);
}

Test(stage10, clone_makes_a_storage_and_alias_shares_one)
{
    LgError err = LG_ERROR_INIT;
    Tensor *x = tensor_full(&F32, 1.0, &err);
    Tensor *c = tensor_clone(x, &err);
    Tensor *a = tensor_alias(x, &err);
    cr_assert(!tensor_same_storage(x, c));
    cr_assert(tensor_same_storage(x, a));
    cr_assert_neq(tensor_storage_id(x), tensor_storage_id(c));
    cr_assert_eq(tensor_apply_scalar_inplace(TENSOR_OP_MUL, a, 0.5, &err), LG_OK);
    cr_assert_eq(bits0(x), 0x3f000000, "a change through the alias is seen through x");
    cr_assert_eq(bits0(c), 0x3f800000, "the clone keeps 1");
    tensor_free(&x);
    cr_assert_eq(bits0(a), 0x3f000000, "the storage lives while an alias points at it");
    tensor_free(&a);
    tensor_free(&c);
    cr_assert_null(c);
}

Test(stage10, float32_arithmetic_rounds_like_pytorch)
{
    LgError err = LG_ERROR_INIT;
    Tensor *x = tensor_full(&F32, 1.0, &err);
    tensor_apply_scalar_inplace(TENSOR_OP_MUL, x, 0.8, &err);
    cr_assert_eq(bits0(x), 0x3f4ccccd, "1.0 * fl(0.8)");
    tensor_apply_scalar_inplace(TENSOR_OP_MUL, x, 0.5, &err);
    cr_assert_eq(bits0(x), 0x3ecccccd, "0.4");
    Tensor *three = tensor_full(&F32, 3.0, &err);
    Tensor *l = tensor_apply(TENSOR_OP_LOG, three, NULL, &err);
    cr_assert_eq(bits0(l), 0x3f8c9f54, "log 3 = 1.0986123 in float32");
    cr_assert_eq(tensor_f32_from_bits(0x3f8c9f54), 1.0986123f);
    tensor_free(&x);
    tensor_free(&three);
    tensor_free(&l);
}

Test(stage10, operation_rules_name_the_types)
{
    LgError err = LG_ERROR_INIT;
    TensorType i64 = {TENSOR_INT64, 0, {0}}, v3 = {TENSOR_FLOAT32, 1, {3}};
    TensorType v2 = {TENSOR_FLOAT32, 1, {2}}, out;
    cr_assert_eq(tensor_op_type(TENSOR_OP_MUL, &F32, &i64, &out, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_str_eq(err.message, "mul needs operands of one dtype: got f32[] and i64[]");
    cr_assert_eq(tensor_op_type(TENSOR_OP_LOG, &i64, NULL, &out, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_str_eq(err.message, "log is defined for f32: got i64[]");
    cr_assert_eq(tensor_op_type(TENSOR_OP_ADD, &v2, &v3, &out, &err), LG_ERR_TENSOR_SHAPE);
    cr_assert_str_eq(err.message, "add needs equal shapes or a 0-d operand: got f32[2] and f32[3]");
    cr_assert_eq(tensor_op_type(TENSOR_OP_ADD, &F32, &v3, &out, &err), LG_OK);
    cr_assert(tensor_type_equal(&out, &v3), "a 0-d operand broadcasts");
    cr_assert_eq(tensor_op_type(TENSOR_OP_LT, &i64, &i64, &out, &err), LG_OK);
    cr_assert_eq(out.dtype, TENSOR_BOOL);
    cr_assert_eq(tensor_op_type_inplace(TENSOR_OP_ADD, &F32, &v3, &err), LG_ERR_TENSOR_SHAPE);
    cr_assert_str_eq(err.message, "add_ cannot write f32[3] into f32[]: in place keeps the type");
    cr_assert_eq(tensor_op_type_inplace(TENSOR_OP_LT, &i64, &i64, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_eq(tensor_op_type(TENSOR_OP_COPY, &F32, &v3, &out, &err), LG_ERR_TENSOR_SHAPE,
                 "copy writes into its first operand's shape");
}

Test(stage10, numbers_must_be_values_of_the_dtype)
{
    LgError err = LG_ERROR_INIT;
    TensorElem e;
    cr_assert_eq(tensor_scalar_elem(0.5, TENSOR_INT64, &e, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_str_eq(err.message,
                     "scalar 0.5 is not an i64 value (an integer in [-2^63, 2^63 - 1])");
    cr_assert_eq(tensor_scalar_elem(1e39, TENSOR_FLOAT32, &e, &err), LG_ERR_INVALID);
    cr_assert_eq(tensor_scalar_elem(2, TENSOR_BOOL, &e, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_eq(tensor_scalar_elem(-7, TENSOR_INT64, &e, &err), LG_OK);
    cr_assert_eq(e.i64, -7);
    TensorType i64 = {TENSOR_INT64, 0, {0}};
    Tensor *i = tensor_full(&i64, 3, &err);
    cr_assert_eq(tensor_apply_scalar_inplace(TENSOR_OP_MUL, i, 0.5, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_eq(tensor_get(i, 0).i64, 3, "a refused in-place op changes nothing");
    tensor_free(&i);
}

/* An f32 takes every number that rounds to a finite float32 and is not silently zero:
 * Stage 01's rule for a double, applied to float32. Messages print every digit. */
Test(stage10, f32_numbers_neither_overflow_nor_underflow_silently)
{
    LgError err = LG_ERROR_INIT;
    TensorElem e;
    cr_assert_eq(tensor_scalar_elem(1e-46, TENSOR_FLOAT32, &e, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "scalar 1e-46 underflows to zero in f32 (smallest nonzero "
                     "1.40129846e-45)");
    cr_assert_eq(tensor_scalar_elem(-1e-46, TENSOR_FLOAT32, &e, &err), LG_ERR_INVALID);
    cr_assert_eq(tensor_scalar_elem(1e-40, TENSOR_FLOAT32, &e, &err), LG_OK,
                 "a subnormal float32 is kept, as a subnormal double is by parse_double");
    cr_assert_eq(e.f32, 1e-40f);
    cr_assert_eq(tensor_scalar_elem(1e-45, TENSOR_FLOAT32, &e, &err), LG_OK);
    cr_assert_eq(e.f32, FLT_TRUE_MIN);
    cr_assert_eq(tensor_scalar_elem(0.0, TENSOR_FLOAT32, &e, &err), LG_OK);
    cr_assert_eq(tensor_scalar_elem(-0.0, TENSOR_FLOAT32, &e, &err), LG_OK);
    cr_assert_eq(tensor_scalar_elem(3.4028235e38, TENSOR_FLOAT32, &e, &err), LG_OK,
                 "FLT_MAX as usually printed rounds to FLT_MAX");
    cr_assert_eq(e.f32, FLT_MAX);
    cr_assert_eq(tensor_scalar_elem(-3.4028235e38, TENSOR_FLOAT32, &e, &err), LG_OK);
    cr_assert_eq(e.f32, -FLT_MAX);
    cr_assert_eq(tensor_scalar_elem(0x1p128 - 0x1p103, TENSOR_FLOAT32, &e, &err),
                 LG_ERR_INVALID, "the tie rounds to infinity (FLT_MAX's last bit is odd)");
    cr_assert_eq(tensor_scalar_elem(3.4028236e38, TENSOR_FLOAT32, &e, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "scalar 3.4028235999999999e+38 does not fit f32 (largest "
                     "3.40282347e+38)");
    /* A number written in a program or on the command line is named as written. */
    cr_assert_null(ir_parse("def f() {\n  %k = full([], 1e39, f32)\n  return %k\n}\n", "t",
                            &err));
    cr_assert_str_eq(err.message, "t:2:8: scalar 1e39 does not fit f32 (largest "
                     "3.40282347e+38)");
    cr_assert_null(ir_parse("def f(%x: f32[]) {\n  %y = mul(%x, -1.0e-46)\n  return %y\n}\n",
                            "t", &err));
    cr_assert_str_eq(err.message, "t:2:8: scalar -1.0e-46 underflows to zero in f32 (smallest "
                     "nonzero 1.40129846e-45)");
    ProgramRun run;
    run_program(&run, "stage-10", "docs/examples/halve.lgir --input state=1e39");
    cr_assert_eq(run.status, 2, "%s", run.output);
    cr_assert_str_eq(run.output, "stage-10: error: --input state: scalar 1e39 does not fit f32 "
                     "(largest 3.40282347e+38)\n");
    run_program(&run, "stage-10", "docs/examples/halve.lgir --input state=1e-46");
    cr_assert_eq(run.status, 2, "%s", run.output);
    cr_assert_str_eq(run.output, "stage-10: error: --input state: scalar 1e-46 underflows to "
                     "zero in f32 (smallest nonzero 1.40129846e-45)\n");
    run_program(&run, "stage-10", "docs/examples/halve.lgir --input state=3.4028235e38");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "returned %answer: 1.70141173e+38 (0x7effffff)"), "%s",
              run.output);
}

Test(stage10, i64_numbers_are_exact_over_the_whole_int64_range)
{
    LgError err = LG_ERROR_INIT;
    TensorNumber n;
    TensorElem e;
    static const struct { const char *text; int64_t value; } exact[] = {
        {"9007199254740993", INT64_C(9007199254740993)},   /* 2^53 + 1: no double holds it */
        {"9223372036854775807", INT64_MAX},
        {"-9223372036854775808", INT64_MIN},
        {"2.0", 2}, {"1e3", 1000}, {"12.50e1", 125}, {"-0", 0}, {"0.000", 0},
    };
    for (size_t c = 0; c < sizeof exact / sizeof exact[0]; c++) {
        cr_assert_eq(tensor_number_parse(exact[c].text, "a number", &n, &err), LG_OK);
        cr_assert_eq(tensor_number_elem(&n, TENSOR_INT64, &e, &err), LG_OK, "%s", err.message);
        cr_assert_eq(e.i64, exact[c].value, "%s", exact[c].text);
    }
    cr_assert_eq(tensor_number_parse("9223372036854775808", "a number", &n, &err), LG_OK);
    cr_assert_eq(tensor_number_elem(&n, TENSOR_INT64, &e, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_str_eq(err.message,
                     "scalar 9223372036854775808 is outside the i64 range [-2^63, 2^63 - 1]");
    cr_assert_eq(tensor_number_parse("-9223372036854775809", "a number", &n, &err), LG_OK);
    cr_assert_eq(tensor_number_elem(&n, TENSOR_INT64, &e, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_eq(tensor_number_parse("1e30", "a number", &n, &err), LG_OK);
    cr_assert_eq(tensor_number_elem(&n, TENSOR_INT64, &e, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_eq(tensor_number_elem(&n, TENSOR_FLOAT32, &e, &err), LG_OK, "1e30 fits f32");
    cr_assert_eq(tensor_number_parse("4503599627370496.5", "a number", &n, &err), LG_OK);
    cr_assert_eq(tensor_number_elem(&n, TENSOR_INT64, &e, &err), LG_ERR_TENSOR_DTYPE,
                 "2^52 + 0.5 rounds to an integral double but is not an integer");

    /* Through a program and the command line: 2^53 + 1 stays 2^53 + 1, and 2^53 + 3 too. */
    IrProgram *program = parse_ok("def f(%i: i64[]) {\n"
                                  "  %j = add(%i, 9007199254740993)\n"
                                  "  %k = full([], 9223372036854775807, i64)\n"
                                  "  return %j, %k\n}\n");
    const char *spec[] = {"i=2"};
    Tensor *inputs[1];
    IrResults results;
    cr_assert_eq(runner_make_inputs(&program->functions[0], (char *const *)spec, 1, inputs,
                                    &err), LG_OK, "%s", err.message);
    cr_assert_eq(interp_call(program, 0, inputs, 1, &results, &err), LG_OK, "%s", err.message);
    cr_assert_eq(tensor_get(results.tensors[0], 0).i64, INT64_C(9007199254740995));
    cr_assert_eq(tensor_get(results.tensors[1], 0).i64, INT64_MAX);
    interp_results_free(&results);
    runner_free_inputs(inputs, 1);
    const char *big[] = {"i=9007199254740993"}, *huge[] = {"i=9223372036854775808"};
    cr_assert_eq(runner_make_inputs(&program->functions[0], (char *const *)big, 1, inputs, &err),
                 LG_OK);
    cr_assert_eq(tensor_get(inputs[0], 0).i64, INT64_C(9007199254740993));
    runner_free_inputs(inputs, 1);
    cr_assert_eq(runner_make_inputs(&program->functions[0], (char *const *)huge, 1, inputs, &err),
                 LG_ERR_TENSOR_DTYPE);
    cr_assert_str_eq(err.message, "--input i: scalar 9223372036854775808 is outside the i64 "
                     "range [-2^63, 2^63 - 1]");
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    ir_print_program(program, out);
    fclose(out);
    cr_assert(strstr(text, "add(%i, 9007199254740993)") != NULL, "%s", text);
    cr_assert(strstr(text, "full([], 9223372036854775807, i64)") != NULL, "%s", text);
    free(text);
    ir_program_free(&program);
    LgError refused = LG_ERROR_INIT;
    cr_assert_null(ir_parse("def f(%i: i64[]) {\n  add_(%i, 9223372036854775808)\n  return\n}\n",
                            "t", &refused));
    cr_assert_str_eq(refused.message, "t:2:3: scalar 9223372036854775808 is outside the i64 "
                     "range [-2^63, 2^63 - 1]");
    /* the number is printed as written, not in 301 digits */
    cr_assert_null(ir_parse("def f(%i: i64[]) {\n  add_(%i, -1e300)\n  return\n}\n", "t",
                            &refused));
    cr_assert_str_eq(refused.message, "t:2:3: scalar -1e300 is outside the "
                     "i64 range [-2^63, 2^63 - 1]");
    cr_assert_null(ir_parse("def f(%i: i64[]) {\n  add_(%i, 99999999999999991611392)\n"
                            "  return\n}\n", "t", &refused));
    cr_assert_str_eq(refused.message, "t:2:3: scalar 99999999999999991611392 is outside the "
                     "i64 range [-2^63, 2^63 - 1]");
}

Test(stage10, int64_arithmetic_wraps_instead_of_being_undefined)
{
    TensorElem a = {.i64 = INT64_MAX}, one = {.i64 = 1};
    cr_assert_eq(tensor_elem_apply(TENSOR_OP_ADD, TENSOR_INT64, a, one).i64, INT64_MIN);
    TensorElem m = {.i64 = INT64_MIN};
    cr_assert_eq(tensor_elem_apply(TENSOR_OP_NEG, TENSOR_INT64, m, m).i64, INT64_MIN);
}

Test(stage10, inplace_op_reading_its_own_storage_doubles)
{
    LgError err = LG_ERROR_INIT;
    TensorType v3 = {TENSOR_FLOAT32, 1, {3}};
    Tensor *x = tensor_full(&v3, 1.5, &err);
    Tensor *y = tensor_alias(x, &err);
    cr_assert_eq(tensor_apply_inplace(TENSOR_OP_ADD, y, y, &err), LG_OK);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(tensor_get(x, i).f32, 3.0f);
    Tensor *s = tensor_full(&F32, 7.0, &err);
    cr_assert_eq(tensor_apply_inplace(TENSOR_OP_COPY, x, s, &err), LG_OK, "copy_ of a 0-d");
    cr_assert_eq(tensor_get(y, 2).f32, 7.0f);
    tensor_free(&x);
    tensor_free(&y);
    tensor_free(&s);
}

Test(stage10, halve_returns_and_leaves_one_half_then_one_quarter)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(halve_text);
    Tensor *state = tensor_full(&F32, 1.0, &err);
    const uint32_t expected[] = {0x3f000000, 0x3e800000, 0x3e000000};
    for (size_t call = 0; call < 3; call++) {
        IrResults results;
        cr_assert_eq(interp_call(program, 0, &state, 1, &results, &err), LG_OK, "%s", err.message);
        cr_assert_eq(results.count, 1);
        cr_assert_eq(bits0(results.tensors[0]), expected[call], "answer of call %zu", call + 1);
        cr_assert_eq(bits0(state), expected[call], "state after call %zu", call + 1);
        cr_assert(!tensor_same_storage(results.tensors[0], state), "answer is a clone");
        interp_results_free(&results);
    }
    tensor_free(&state);
    ir_program_free(&program);
}

Test(stage10, a_read_before_log_inplace_keeps_log_3)
{
    LgError err = LG_ERROR_INIT;
    Tensor *x = tensor_full(&F32, 3.0, &err);
    uint32_t y;
    run_scalar("def f(%x: f32[]) {\n  %y = log(%x)\n  log_(%x)\n  return %y\n}\n", x, &y);
    cr_assert_eq(y, 0x3f8c9f54, "y = log 3");
    cr_assert_eq(bits0(x), 0x3f8c9f54, "x ends as log 3, not log log 3");
    tensor_free(&x);
}

Test(stage10, a_mutation_through_an_alias_reaches_the_input)
{
    LgError err = LG_ERROR_INIT;
    Tensor *x = tensor_full(&F32, 1.0, &err);
    uint32_t y;
    run_scalar("def f(%x: f32[]) {\n  %y = alias(%x)\n  add_(%y, %y)\n  return %y\n}\n", x, &y);
    cr_assert_eq(bits0(x), 0x40000000, "x = 2");
    cr_assert_eq(y, 0x40000000);
    tensor_free(&x);
}

Test(stage10, creation_ops_make_their_types)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(
        "def f(%x: f32[2]) {\n"
        "  %z = zeros_like(%x)\n"
        "  %n = full([2, 3], 4, i64)\n"
        "  %b = full([], 1, bool)\n"
        "  %c = copy(%x, 9)\n"
        "  return %z, %n, %b, %c\n"
        "}\n");
    TensorType v2 = {TENSOR_FLOAT32, 1, {2}};
    Tensor *x = tensor_full(&v2, 5.0, &err);
    IrResults r;
    cr_assert_eq(interp_call(program, 0, &x, 1, &r, &err), LG_OK, "%s", err.message);
    cr_assert_eq(r.count, 4);
    cr_assert_eq(tensor_get(r.tensors[0], 1).f32, 0.0f);
    TensorType i23 = {TENSOR_INT64, 2, {2, 3}};
    cr_assert(tensor_type_equal(tensor_type(r.tensors[1]), &i23));
    cr_assert_eq(tensor_get(r.tensors[1], 5).i64, 4);
    cr_assert_eq(tensor_get(r.tensors[2], 0).b, true);
    cr_assert_eq(tensor_get(r.tensors[3], 1).f32, 9.0f);
    cr_assert_eq(tensor_get(x, 0).f32, 5.0f, "copy is out of place");
    interp_results_free(&r);
    tensor_free(&x);
    ir_program_free(&program);
}

/* print(parse(text)) is canonical: parsing it again and printing gives the same text. */
Test(stage10, printing_and_parsing_round_trip)
{
    static const char *const texts[] = {
        halve_text,
        "# comment\ndef   f( %x:f32[2,3] ,%i: i64[]){ %y=mul(%x,0.8)  add_(%i,-3)\n"
        "%b = lt(%i, 2) %z = full([4], 1e-05, f32) copy_(%z, 2.5)\n return %y,%b }\n"
        "def g() {\n  return\n}\n",
        "def versions(%state.1: f32[]) {\n  %state.2 = exp(%state.1)\n  return %state.2\n}\n",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        IrProgram *first = parse_ok(texts[i]);
        char *printed = print_to_string(first);
        IrProgram *second = parse_ok(printed);
        char *again = print_to_string(second);
        cr_assert_str_eq(printed, again, "text %zu", i);
        cr_assert_eq(first->nfunctions, second->nfunctions);
        free(printed);
        free(again);
        ir_program_free(&first);
        ir_program_free(&second);
    }
    IrProgram *p = parse_ok(texts[1]);
    char *printed = print_to_string(p);
    cr_assert_str_eq(printed,
                     "def f(%x: f32[2, 3], %i: i64[]) {\n"
                     "  %y = mul(%x, 0.8)\n"
                     "  add_(%i, -3)\n"
                     "  %b = lt(%i, 2)\n"
                     "  %z = full([4], 1e-05, f32)\n"
                     "  copy_(%z, 2.5)\n"
                     "  return %y, %b\n"
                     "}\n"
                     "\n"
                     "def g() {\n"
                     "  return\n"
                     "}\n");
    free(printed);
    ir_program_free(&p);
}

/* Each malformed text is refused with its place and rule, and leaves nothing. */
Test(stage10, malformed_programs_are_refused_with_line_and_column)
{
    static const struct { const char *text; LgStatus status; const char *message; } cases[] = {
        {"", LG_ERR_IR_INVALID,
         "t:1:1: a program needs at least one function: def NAME(PARAMS) { ... }"},
        {"def f(%x: f32[]) {\n  %y = lg(%x)\n  return %y\n}\n", LG_ERR_IR_INVALID,
         "t:2:8: unknown operation 'lg'"},
        {"def f(%x: f32[]) {\n  mul_(%x 0.5)\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:2:11: expected ',' or ')' after an operand, found number 0.5"},
        {"def f(%x: f32[]) {\n  mul_(%x, 0.5\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:3:3: expected ',' or ')' after an operand, found 'return'"},
        {"def f(%x: f32[2 3]) {\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:1:17: expected ',' or ']' after a dim, found number 3"},
        {"def f(%x: f32[4294967296]) {\n  return\n}\n", LG_ERR_TENSOR_SHAPE,
         "t:1:15: a dim must be an integer in [1, 16777216]: found number 4294967296"},
        {"def f(%x: f32[]) {\n  %y = mul(%x, 3.1415926535897932384626433832795028841971"
         "6939937510582097494459230)\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:2:16: number too long (at most 63 characters): '3.14159265358979...'"},
        {"def f(%x: f32[]) {\n  %x = exp(%x)\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:2:3: value %x is defined twice (SSA: one definition per name)"},
        {"def f(%x: f32[], %x: f32[]) {\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:1:18: value %x is defined twice (SSA: one definition per name)"},
        {"def f(%x: f32[]) {\n  %y = mul_(%x, 2)\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:2:8: mul_ changes its first operand in place and defines no value: got 1"},
        {"def f(%x: f32[]) {\n  mul_(%x)\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:2:3: mul_ takes 2 operands: got 1"},
        {"def f(%x: f32[]) {\n  %y = full(%x, 1, f32)\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:2:8: operand 1 of full must be a shape: got a value"},
        {"def f(%i: i64[]) {\n  mul_(%i, 0.5)\n  return\n}\n", LG_ERR_TENSOR_DTYPE,
         "t:2:3: scalar 0.5 is not an i64 value (an integer in [-2^63, 2^63 - 1])"},
        {"def f(%x: f32[0]) {\n  return\n}\n", LG_ERR_TENSOR_SHAPE,
         "t:1:15: a dim must be an integer in [1, 16777216]: found number 0"},
        {"def f(%x: f64[]) {\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:1:11: expected a dtype (f32, i64 or bool), found 'f64'"},
        {"def f(%x: f32[]) {\n  %y = exp(%x)\n", LG_ERR_IR_INVALID,
         "t:3:1: expected an instruction or 'return', found the end of the file"},
        {"def f(%x: f32[]) {\n  return %x\n}\ndef f() {\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:4:5: function f is defined twice"},
        {"def f(%x: f32[]) {\n  %y = mul(%x, 1e999)\n  return\n}\n", LG_ERR_NONFINITE,
         "t:2:16: a number must be finite: got '1e999'"},
        {"def f(%x: f32[]) {\n  %y = mul(%x, 2x)\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:2:16: malformed number starting '2x'"},
        {"def f(%x: f32[]) {\n  %y = mul(%x, -\n3)\n  return\n}\n", LG_ERR_IR_INVALID,
         "t:2:16: malformed number starting '-'"},
        {"def f(%x: f32[]) { return $ }", LG_ERR_IR_INVALID, "t:1:27: unexpected character '$'"},
        {"def f(%averyveryveryveryverylongname123: f32[]) { return }", LG_ERR_IR_INVALID,
         "t:1:7: a name has at most 31 characters: got 32"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        LgError err = LG_ERROR_INIT;
        cr_assert_null(ir_parse(cases[i].text, "t", &err), "case %zu parsed", i);
        cr_assert_str_eq(err.message, cases[i].message, "case %zu", i);
        cr_assert_eq(err.status, cases[i].status, "case %zu: %s", i,
                     error_status_name(err.status));
        cr_assert_eq(mem_live_blocks(), 0, "case %zu left blocks", i);
    }
}

/* What an operand letter of a signature asks for, as the checker names it; NULL if the
 * letter accepts `kind`. */
static const char *letter_needs(char letter, IrArgKind kind)
{
    switch (letter) {
    case 'v': return kind == IR_ARG_VALUE ? NULL : "a value";
    case 'o': return kind == IR_ARG_VALUE || kind == IR_ARG_NUMBER ? NULL
                                                                    : "a value or a number";
    case 'n': return kind == IR_ARG_NUMBER ? NULL : "a number";
    case 's': return kind == IR_ARG_SHAPE ? NULL : "a shape";
    case 'd': return kind == IR_ARG_DTYPE ? NULL : "a dtype";
    case 'f': return kind == IR_ARG_FUNCTION ? NULL : "a function";
    }
    cr_assert_fail("unknown operand letter '%c'", letter);
    return NULL;
}

/* An operand of `kind` that fits a function whose value 0 is f32[]. */
static IrArg arg_of_kind(IrArgKind kind)
{
    IrArg arg;
    memset(&arg, 0, sizeof arg);
    arg.kind = kind;
    if (kind == IR_ARG_NUMBER)
        arg.number = (TensorNumber){.value = 0, .integer = true, .fits_i64 = true, .text = "0"};
    if (kind == IR_ARG_SHAPE)
        arg.type = (TensorType){TENSOR_FLOAT32, 1, {2}};
    if (kind == IR_ARG_FUNCTION)
        strcpy(arg.function, "g");
    return arg;
}

/* Every row of the operation table, a later stage's too, has a signature of known letters
 * (a '+' only last), and the checker refuses every kind a letter does not take, at every
 * position, naming the operation, the position, the kind expected and the kind found. */
Test(stage10, every_operand_is_checked_against_its_operations_signature)
{
    static const char *const kinds[] = {"a value", "a number", "a shape", "a dtype",
                                        "a function"};
    LgError err = LG_ERROR_INIT;
    IrProgram *program = ir_program_new(&err);
    size_t f;
    cr_assert_eq(ir_add_function(program, "f", &f, &err), LG_OK);
    cr_assert_eq(ir_add_param(&program->functions[f], "x", &F32, &err), LG_OK);
    for (IrOp op = 0; op < IR_OP_COUNT; op++) {
        const IrOpInfo *info = ir_op_info(op);
        cr_assert_not_null(info->operands, "%s has a signature", info->name);
        size_t letters = strlen(info->operands);
        cr_assert_gt(letters, 0u, "%s", info->name);
        size_t n = info->operands[letters - 1] == '+' ? letters - 1 : letters;
        cr_assert_null(memchr(info->operands, '+', n), "%s: '+' comes last", info->name);
        IrArg args[IR_ARGS_MAX];
        IrInstr in = {.op = op, .nargs = n, .args = args,
                      .nresults = info->results >= 0 ? (size_t)info->results : 1};
        for (size_t i = 0; i < n; i++) {
            char letter = info->operands[i];
            args[i] = arg_of_kind(letter == 'n' ? IR_ARG_NUMBER : letter == 's' ? IR_ARG_SHAPE
                                  : letter == 'd' ? IR_ARG_DTYPE : letter == 'f'
                                  ? IR_ARG_FUNCTION : IR_ARG_VALUE);
        }
        const char *names[IR_RESULTS_MAX] = {"r"};
        for (size_t i = 0; i < n; i++)
            for (IrArgKind kind = IR_ARG_VALUE; kind <= IR_ARG_FUNCTION; kind++) {
                const char *need = letter_needs(info->operands[i], kind);
                if (need == NULL)
                    continue;
                IrArg kept = args[i];
                args[i] = arg_of_kind(kind);
                char want[LG_MESSAGE_MAX];
                snprintf(want, sizeof want, "operand %zu of %s must be %s: got %s", i + 1,
                         info->name, need, kinds[kind]);
                cr_assert_eq(ir_add_instr(program, 0, &in, names, &err), LG_ERR_IR_INVALID,
                             "%s operand %zu as %s", info->name, i + 1, kinds[kind]);
                cr_assert_str_eq(err.message, want);
                args[i] = kept;
            }
        cr_assert_eq(program->functions[0].ninstrs, 0u, "nothing was added");
    }
    ir_program_free(&program);
}

/* The same rule from a program text: the message is placed at the operation. */
Test(stage10, a_wrong_operand_kind_in_a_text_is_refused_at_the_operation)
{
    static const struct { const char *instr, *message; } cases[] = {
        {"%y = add(%x, [2])", "t:2:8: operand 2 of add must be a value or a number: got a shape"},
        {"%y = neg(1)", "t:2:8: operand 1 of neg must be a value: got a number"},
        {"%y = exp(@g)", "t:2:8: operand 1 of exp must be a value: got a function"},
        {"%y = zeros_like(f32)", "t:2:8: operand 1 of zeros_like must be a value: got a dtype"},
        {"%y = full([2], f32, f32)", "t:2:8: operand 2 of full must be a number: got a dtype"},
        {"%y = full([2], 1, 2)", "t:2:8: operand 3 of full must be a dtype: got a number"},
        {"copy_(0.5, %x)", "t:2:3: operand 1 of copy_ must be a value: got a number"},
        {"%y = alias([])", "t:2:8: operand 1 of alias must be a value: got a shape"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char text[160];
        snprintf(text, sizeof text, "def f(%%x: f32[]) {\n  %s\n  return\n}\n",
                 cases[c].instr);
        LgError err = LG_ERROR_INIT;
        cr_assert_null(ir_parse(text, "t", &err), "case %zu parsed", c);
        cr_assert_eq(err.status, LG_ERR_IR_INVALID, "case %zu", c);
        cr_assert_str_eq(err.message, cases[c].message, "case %zu", c);
    }
}

/* Walk k = 1, 2, ... over the parser: each injected failure returns NULL with
 * LG_ERR_ALLOC and leaves no block; then the parse succeeds. */
Test(stage10, every_allocation_failure_of_the_parser_leaves_nothing)
{
    static const char text[] =
        "def f(%a: f32[], %b: f32[], %c: f32[], %d: f32[], %e: f32[]) {\n"
        "  %x = add(%a, %b)\n  %y = mul(%x, %c)\n  %z = sub(%y, %d)\n"
        "  %w = div(%z, %e)\n  %v = exp(%w)\n  log_(%v)\n  return %v\n}\n"
        "def g() {\n  return\n}\n";
    LgError err = LG_ERROR_INIT;
    size_t k = 1;
    for (;; k++) {
        mem_fail_at(k);
        IrProgram *program = ir_parse(text, "t", &err);
        mem_fail_at(0);
        if (program != NULL) {
            ir_program_free(&program);
            break;
        }
        cr_assert_eq(err.status, LG_ERR_ALLOC, "k = %zu: %s", k, err.message);
        cr_assert_eq(mem_live_blocks(), 0, "failure at allocation %zu leaked", k);
    }
    cr_assert_gt(k, 4, "the parser grows its arrays: %zu allocations", k - 1);
}

Test(stage10, every_allocation_failure_of_a_call_leaves_nothing)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(
        "def f(%x: f32[]) {\n  %y = alias(%x)\n  %z = exp(%y)\n  %w = full([2], 1, f32)\n"
        "  %v = zeros_like(%z)\n  return %z, %w, %v\n}\n");
    Tensor *x = tensor_full(&F32, 1.0, &err);
    size_t before = mem_live_blocks(), k = 1;
    for (;; k++) {
        IrResults results;
        mem_fail_at(k);
        LgStatus status = interp_call(program, 0, &x, 1, &results, &err);
        mem_fail_at(0);
        if (status == LG_OK) {
            interp_results_free(&results);
            break;
        }
        cr_assert_eq(status, LG_ERR_ALLOC);
        cr_assert_eq(results.count, 0);
        cr_assert_eq(mem_live_blocks(), before, "failure at allocation %zu leaked", k);
    }
    cr_assert_gt(k, 5);
    tensor_free(&x);
    ir_program_free(&program);
}

Test(stage10, inputs_are_checked_against_the_parameters)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(halve_text);
    TensorType v3 = {TENSOR_FLOAT32, 1, {3}};
    Tensor *wrong = tensor_full(&v3, 1.0, &err);
    IrResults results;
    cr_assert_eq(interp_call(program, 0, &wrong, 1, &results, &err), LG_ERR_TENSOR_SHAPE);
    cr_assert_str_eq(err.message, "input %state of halve must be f32[]: got f32[3]");
    cr_assert_eq(interp_call(program, 0, &wrong, 0, &results, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "halve takes 1 input: got 0");
    cr_assert_eq(tensor_get(wrong, 0).f32, 1.0f, "nothing ran");
    tensor_free(&wrong);
    ir_program_free(&program);
}

/* Each refusal names the number as written: printed from its double, each of these would
 * read as a number the rule accepts (1, 1e+20, -9223372036854775808). */
static const struct { const char *param, *number, *message; } refused_as_written[] = {
    {"i64[]", "1.0000001", "scalar 1.0000001 is not an i64 value (an integer in "
     "[-2^63, 2^63 - 1])"},
    {"i64[]", "99999999999999999999.5", "scalar 99999999999999999999.5 is not an i64 value "
     "(an integer in [-2^63, 2^63 - 1])"},
    {"bool[]", "1.0000001", "scalar 1.0000001 is not a bool value (0 or 1)"},
    {"i64[]", "-9223372036854775809", "scalar -9223372036854775809 is outside the i64 "
     "range [-2^63, 2^63 - 1]"},
};

Test(stage10, a_refused_number_is_named_as_written_on_the_command_line)
{
    for (size_t c = 0; c < sizeof refused_as_written / sizeof refused_as_written[0]; c++) {
        char source[128], spec[96], message[LG_MESSAGE_MAX];
        snprintf(source, sizeof source, "def f(%%x: %s) {\n  return\n}\n",
                 refused_as_written[c].param);
        snprintf(spec, sizeof spec, "x=%s", refused_as_written[c].number);
        snprintf(message, sizeof message, "--input x: %s", refused_as_written[c].message);
        IrProgram *program = parse_ok(source);
        const char *specs[] = {spec};
        Tensor *inputs[1];
        LgError err = LG_ERROR_INIT;
        cr_assert_eq(runner_make_inputs(&program->functions[0], (char *const *)specs, 1, inputs,
                                        &err), LG_ERR_TENSOR_DTYPE, "case %zu", c);
        cr_assert_str_eq(err.message, message, "case %zu", c);
        ir_program_free(&program);
    }
}

Test(stage10, a_refused_number_is_named_as_written_in_a_program)
{
    for (size_t c = 0; c < sizeof refused_as_written / sizeof refused_as_written[0]; c++) {
        char source[160], message[LG_MESSAGE_MAX];
        bool is_bool = refused_as_written[c].param[0] == 'b';
        snprintf(source, sizeof source, "def f() {\n  %%k = full([], %s, %s)\n  return %%k\n}\n",
                 refused_as_written[c].number, is_bool ? "bool" : "i64");
        snprintf(message, sizeof message, "t:2:8: %s", refused_as_written[c].message);
        LgError err = LG_ERROR_INIT;
        cr_assert_null(ir_parse(source, "t", &err), "case %zu", c);
        cr_assert_eq(err.status, LG_ERR_TENSOR_DTYPE, "case %zu", c);
        cr_assert_str_eq(err.message, message, "case %zu", c);
    }
    /* A number made from a double has no text: its double is printed with every digit. */
    TensorElem e;
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(tensor_scalar_elem(1.0000001, TENSOR_INT64, &e, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_str_eq(err.message, "scalar 1.0000001000000001 is not an i64 value (an integer "
                     "in [-2^63, 2^63 - 1])");
    cr_assert_eq(tensor_scalar_elem(1e20, TENSOR_INT64, &e, &err), LG_ERR_TENSOR_DTYPE);
    cr_assert_str_eq(err.message, "scalar 100000000000000000000 is outside the i64 range "
                     "[-2^63, 2^63 - 1]");
}

Test(stage10, command_line_inputs_are_checked_before_any_tensor_exists)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok("def f(%x: f32[3], %i: i64[], %b: bool[2]) {\n  return\n}\n");
    const IrFunction *fn = &program->functions[0];
    size_t before = mem_live_blocks();
    Tensor *inputs[3];
    static const struct { const char *specs[3]; size_t n; const char *message; } bad[] = {
        {{"x=1", "i=2"}, 2, "parameter %b of f needs an --input"},
        {{"x=1", "i=2", "y=3"}, 3, "--input y: f has no such parameter"},
        {{"x=1", "x=2", "b=1"}, 3, "--input x is given twice"},
        {{"x", "i=2", "b=1"}, 3, "--input must be NAME=VALUE: got 'x'"},
        {{"x=[1, 2]", "i=2", "b=1"}, 3, "--input x: f32[3] takes 1 or 3 numbers: got 2"},
        {{"x=1", "i=[1, 2]", "b=1"}, 3, "--input i: i64[] takes 1 number: got 2"},
        {{"x=1", "i=2.5", "b=1"}, 3,
         "--input i: scalar 2.5 is not an i64 value (an integer in [-2^63, 2^63 - 1])"},
        {{"x=[1, 2, z]", "i=2", "b=1"}, 3, "--input x: element 3 must be a number: got 'z'"},
        {{"x=[1,,2]", "i=2", "b=1"}, 3, "--input x: element 2 must be a number: got ''"},
        {{"x=[,1,2]", "i=2", "b=1"}, 3, "--input x: element 1 must be a number: got ''"},
        {{"x=[1, 2,]", "i=2", "b=1"}, 3, "--input x: element 3 must be a number: got ''"},
        {{"x=[1, 1e39, 2]", "i=2", "b=1"}, 3,
         "--input x: element 2: scalar 1e39 does not fit f32 (largest 3.40282347e+38)"},
        {{"x=1e39", "i=2", "b=1"}, 3,
         "--input x: scalar 1e39 does not fit f32 (largest 3.40282347e+38)"},
        {{"x=[1, 2, 3]", "i=2", "b=[true, 2]"}, 3,
         "--input b: element 2: scalar 2 is not a bool value (0 or 1)"},
        {{"x=1", "i=z", "b=1"}, 3, "--input i must be a number: got 'z'"},
        {{"x=[1, 2, 3", "i=2", "b=1"}, 3, "--input x: a list must end with ']': got '[1, 2, 3'"},
        {{"x=[]", "i=2", "b=1"}, 3, "--input x: a list holds at least one number: got '[]'"},
        {{"x=1", "i=[ ]", "b=1"}, 3, "--input i: a list holds at least one number: got '[ ]'"},
    };
    for (size_t c = 0; c < sizeof bad / sizeof bad[0]; c++) {
        cr_assert_neq(runner_make_inputs(fn, (char *const *)bad[c].specs, bad[c].n, inputs, &err),
                      LG_OK, "case %zu", c);
        cr_assert_str_eq(err.message, bad[c].message, "case %zu", c);
        cr_assert_eq(mem_live_blocks(), before, "case %zu: only the program is allocated", c);
    }
    const char *good[] = {"%x=[1, 2.5, -3]", "i=-4", "b=[true, 0]"};
    cr_assert_eq(runner_make_inputs(fn, (char *const *)good, 3, inputs, &err), LG_OK, "%s",
                 err.message);
    cr_assert_eq(tensor_get(inputs[0], 2).f32, -3.0f);
    cr_assert_eq(tensor_get(inputs[1], 0).i64, -4);
    cr_assert_eq(tensor_get(inputs[2], 0).b, true);
    cr_assert_eq(tensor_get(inputs[2], 1).b, false);
    runner_free_inputs(inputs, 3);
    const char *fill[] = {"x=7", "i=0", "b=1"};
    cr_assert_eq(runner_make_inputs(fn, (char *const *)fill, 3, inputs, &err), LG_OK);
    cr_assert_eq(tensor_get(inputs[0], 2).f32, 7.0f, "one number fills every element");
    cr_assert_eq(tensor_get(inputs[2], 1).b, true);
    runner_free_inputs(inputs, 3);
    for (size_t k = 1; k <= 3; k++) {
        mem_fail_at(k);
        cr_assert_eq(runner_make_inputs(fn, (char *const *)fill, 3, inputs, &err), LG_ERR_ALLOC);
        mem_fail_at(0);
        cr_assert_eq(mem_live_blocks(), before, "allocation %zu failed and leaked", k);
    }
    ir_program_free(&program);
}

/* A limit of a program file is a bad input file, exit 2, like a broken rule of its
 * grammar: one value more than a function may hold, and parameters with more elements
 * than the inputs of a run may have. */
/* A program that computes NaN breaks no rule (IEEE 754, as in PyTorch): exit 0, and the
 * NaN is printed "nan" with its bits, never "-nan", whatever its sign bit: of 0/0 and its
 * negation, one has the sign bit set. */
Test(stage10, a_computed_nan_is_a_value_printed_nan_with_its_bits)
{
    char file[] = "/tmp/lg10-zero-by-zero-XXXXXX";
    int fd = mkstemp(file);
    cr_assert_geq(fd, 0);
    static const char text[] = "def f(%x: f32[]) {\n  %y = div(%x, %x)\n  %z = neg(%y)\n"
                               "  return %y, %z\n}\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char args[96];
    snprintf(args, sizeof args, "%s --input x=0", file);
    static LgRun run;
    lg_run(&run, "", "stage-10", args);
    unlink(file);
    cr_assert_eq(run.status, 0, "%s", run.err);
    cr_assert_str_eq(run.err, "");
    cr_assert_null(strstr(run.out, ": -nan"), "%s", run.out);
    unsigned y = 0, z = 0; /* the bits: one of the two NaNs has its sign bit set */
    const char *at = strstr(run.out, "returned %y: nan (0x");
    cr_assert(at != NULL && sscanf(at, "returned %%y: nan (0x%x)", &y) == 1, "%s", run.out);
    at = strstr(run.out, "returned %z: nan (0x");
    cr_assert(at != NULL && sscanf(at, "returned %%z: nan (0x%x)", &z) == 1, "%s", run.out);
    cr_assert_eq(y ^ z, 0x80000000u, "neg flips the sign bit alone: %08x %08x", y, z);
}

Test(stage10, a_limit_of_a_program_file_is_a_bad_input_file)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    char chain[] = "/tmp/lg10-chain-XXXXXX", wide[] = "/tmp/lg10-wide-XXXXXX";
    int fd = mkstemp(chain);
    cr_assert_geq(fd, 0);
    FILE *file = fdopen(fd, "w");
    cr_assert_not_null(file);
    char prev[4] = "x", name[4];
    fputs("def f(%x: f32[]) {\n", file);
    for (size_t i = 0; i < IR_VALUES_MAX; i++) {   /* 1 + 65536 values: one too many */
        for (size_t k = 0, v = i; k < 3; k++, v /= 52)
            name[k] = letters[v % 52];
        name[3] = '\0';
        fprintf(file, "%%%s=neg(%%%s)\n", name, prev);
        memcpy(prev, name, sizeof prev);
    }
    fprintf(file, "return %%%s\n}\n", prev);
    cr_assert_leq(ftell(file), (long)RUNNER_FILE_MAX, "the file is not refused for its size");
    cr_assert_eq(fclose(file), 0);
    fd = mkstemp(wide);
    cr_assert_geq(fd, 0);
    static const char wide_text[] = "def f(%a: f32[4096, 4096], %b: f32[]) {\n  return\n}\n";
    cr_assert_eq(write(fd, wide_text, strlen(wide_text)), (ssize_t)strlen(wide_text));
    close(fd);
    char args[96], want[192];
    static LgRun run;
    snprintf(args, sizeof args, "%s --input x=1", chain);
    lg_run(&run, "", "stage-10", args);
    snprintf(want, sizeof want, "stage-10: error: %s:65537:6: a function has at most 65536 "
             "values: need 65537\n", chain);
    cr_assert_eq(run.status, 2, "%s", run.err);
    cr_assert_str_eq(run.err, want);
    cr_assert_str_eq(run.out, "");
    snprintf(args, sizeof args, "%s --input a=1 --input b=1", wide);
    lg_run(&run, "", "stage-10", args);
    cr_assert_eq(run.status, 2, "%s", run.err);
    cr_assert_str_eq(run.err, "stage-10: error: the inputs of a run have at most 16777216 "
                     "elements together: f's parameters have 16777217\n");
    unlink(chain);
    unlink(wide);
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(wide_text);
    Tensor *inputs[2];
    const char *specs[] = {"a=1", "b=1"};
    cr_assert_eq(runner_make_inputs(&program->functions[0], (char *const *)specs, 2, inputs,
                                    &err), LG_ERR_IR_LIMIT);
    ir_program_free(&program);
    cr_assert_str_eq(error_status_name(LG_ERR_IR_LIMIT), "ir-limit");
}

Test(stage10, program_tells_the_halve_story)
{
    ProgramRun run;
    run_program(&run, "stage-10", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "  eager   returned %answer: 0.5 (0x3f000000)\n"
                                 "  eager   input %state afterwards: 0.5 (0x3f000000)\n"),
              "%s", run.output);
    cr_assert(strstr(run.output, "  eager   returned %answer: 0.25 (0x3e800000)\n"), "%s",
              run.output);
    cr_assert(strstr(run.output, "  dropped returned %answer: 0.5 (0x3f000000)\n"
                                 "  dropped input %state afterwards: 1 (0x3f800000)\n"
                                 "  answer and state on different storages: yes; returned "
                                 "values agree: NO; states agree: NO\n"),
              "%s", run.output);
    cr_assert(strstr(run.output, "returned %y: 1.09861231 (0x3f8c9f54)"), "%s", run.output);
    cr_assert(strstr(run.output, "returned %y: 2 (0x40000000) (on the storage of input %x)"));
    cr_assert(strstr(run.output, "ir-invalid: demo:3:14: undefined value %stat"));
    cr_assert(strstr(run.output, "live blocks at the end: 0"));
    lg_expect_short_lines(run.output);
}

Test(stage10, program_conventions_for_help_usage_and_files)
{
    ProgramRun run;
    run_program(&run, "stage-10", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "usage: stage-10 [--input NAME=VALUE] [--calls K] "
                                 "[--figure-data DIR] [FILE]"),
              "%s", run.output);
    static const LgBadLine lines[] = {
        LG_FILE_PROGRAM_BAD_LINES,
        {"{FILE}", "a program needs at least one function"},
        {"docs/examples/halve.lgir --input x=1", "x"},
    };
    size_t n = lg_expect_usage_errors("stage-10", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
    run_program(&run, "stage-10", "docs/examples/halve.lgir --input state=1 --calls 2");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "call 2:\n  returned %answer: 0.25 (0x3e800000)\n"
                                 "  input %state afterwards: 0.25 (0x3e800000)\n"));
    /* A file over the limit is refused with its size and the limit, before it is parsed. */
    char big[] = "/tmp/litgrad-big-XXXXXX";
    int fd = mkstemp(big);
    cr_assert_geq(fd, 0);
    cr_assert_eq(ftruncate(fd, (off_t)RUNNER_FILE_MAX + 5), 0);
    close(fd);
    run_program(&run, "stage-10", big);
    unlink(big);
    cr_assert_eq(run.status, 2, "%s", run.output);
    cr_assert(strstr(run.output, " is 1048581 bytes; a program file has at most 1048576\n"),
              "%s", run.output);
}

/* Every example runs with its "# run:" arguments; every malformed one is refused with
 * the "# error:" message of its file, exit status 2, and no call printed. */
static void expect_example_runs(const LgExample *ex, void *context)
{
    (void)context;
    ProgramRun run;
    run_program(&run, "stage-10", ex->args);
    cr_assert_eq(run.status, 0, "%s: %s", ex->path, run.output);
    cr_assert(strstr(run.output, "call 1:"), "%s: %s", ex->path, run.output);
}

static void expect_example_refused(const LgExample *ex, void *context)
{
    (void)context;
    ProgramRun run;
    run_program(&run, "stage-10", ex->args);
    cr_assert_eq(run.status, 2, "%s: %s", ex->path, run.output);
    cr_assert_neq(ex->expected_error[0], '\0', "%s has no # error: line", ex->path);
    cr_assert(strstr(run.output, ex->expected_error), "%s: %s", ex->path, run.output);
    cr_assert_null(strstr(run.output, "call 1"), "%s ran", ex->path);
}

Test(stage10, every_example_runs_and_every_malformed_one_is_refused)
{
    size_t seen = lg_for_each_example("docs/examples", expect_example_runs, NULL);
    cr_assert_geq(seen, 5, "docs/examples has %zu examples", seen);
    seen = lg_for_each_example("docs/examples/malformed", expect_example_refused, NULL);
    cr_assert_geq(seen, 5, "docs/examples/malformed has %zu examples", seen);
}
