/* Stage 11: functionalization, MutationOutput records, dependencies, scheduling with
 * pointwise fusion, and compiled execution equal to eager execution, bit for bit. */
#include "litgrad_test.h"

#include <dirent.h>
#include <stdint.h>

#include "compile.h"
#include "compiledemo.h"
#include "functionalize.h"
#include "interp.h"
#include "ir.h"
#include "tensor.h"

LG_SUITE(stage11);

static const TensorType F32 = {TENSOR_FLOAT32, 0, {0}};

static const char halve_text[] =
    "def halve(%state: f32[]) {\n  mul_(%state, 0.5)\n  %answer = clone(%state)\n"
    "  return %answer\n}\n";
static const char log_order_text[] =
    "def log_order(%x: f32[]) {\n  %y = log(%x)\n  log_(%x)\n  return %y\n}\n";
static const char alias_text[] =
    "def alias_add(%x: f32[]) {\n  %y = alias(%x)\n  add_(%y, %y)\n  return %y\n}\n";
static const char war_text[] =
    "def write_after_read(%x: f32[]) {\n  %t = mul(%x, 3)\n  %v = full([3], 1, f32)\n"
    "  %r = add(%v, %x)\n  add_(%x, %t)\n  return %r\n}\n";

static IrProgram *parse_ok(const char *text)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = ir_parse(text, "test", &err);
    cr_assert_not_null(program, "%s", err.message);
    return program;
}

static char *function_text(const IrProgram *program)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    ir_print_function(program, 0, out);
    fclose(out);
    return text;
}

static void assert_functional_text(const char *source, const char *expected)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(source);
    IrProgram *functional = functionalize_program(program, &err);
    cr_assert_not_null(functional, "%s", err.message);
    char *text = function_text(functional);
    cr_assert_str_eq(text, expected);
    IrProgram *again = parse_ok(text);
    free(text);
    ir_program_free(&again);
    ir_program_free(&functional);
    ir_program_free(&program);
}

static CompiledProgram *compile_ok(const IrProgram *program, unsigned drop_deps)
{
    LgError err = LG_ERROR_INIT;
    CompileOptions options;
    memset(&options, 0, sizeof options);
    options.drop_deps = drop_deps;
    CompiledProgram *c = compile_program(program, &options, &err);
    cr_assert_not_null(c, "%s", err.message);
    return c;
}

static uint32_t bits0(const Tensor *t)
{
    return tensor_f32_bits(tensor_get(t, 0).f32);
}

Test(stage11, halve_gets_a_version_and_a_copy_back)
{
    assert_functional_text(halve_text,
                           "def halve(%state: f32[]) {\n"
                           "  %state.1 = mul(%state, 0.5)\n"
                           "  %answer = clone(%state.1)\n"
                           "  copy_(%state, %state.1)\n"
                           "  return %answer\n"
                           "}\n");
}

Test(stage11, a_read_before_the_inplace_op_reads_the_old_version)
{
    assert_functional_text(log_order_text,
                           "def log_order(%x: f32[]) {\n"
                           "  %y = log(%x)\n"
                           "  %x.1 = log(%x)\n"
                           "  copy_(%x, %x.1)\n"
                           "  return %y\n"
                           "}\n");
}

Test(stage11, a_mutation_through_an_alias_versions_the_input)
{
    assert_functional_text(alias_text,
                           "def alias_add(%x: f32[]) {\n"
                           "  %x.1 = add(%x, %x)\n"
                           "  copy_(%x, %x.1)\n"
                           "  return %x\n"
                           "}\n");
}

Test(stage11, only_mutated_inputs_are_copied_back_and_names_stay_fresh)
{
    assert_functional_text("def f(%a: f32[3], %b: f32[3], %c: f32[]) {\n"
                           "  mul_(%a, 2)\n  %a.1 = add(%a, %b)\n  %d = clone(%c)\n"
                           "  exp_(%d)\n  mul_(%a, %c)\n  return %a.1, %d\n}\n",
                           "def f(%a: f32[3], %b: f32[3], %c: f32[]) {\n"
                           "  %a.2 = mul(%a, 2)\n"
                           "  %a.1 = add(%a.2, %b)\n"
                           "  %d = clone(%c)\n"
                           "  %d.1 = exp(%d)\n"
                           "  %a.3 = mul(%a.2, %c)\n"
                           "  copy_(%a, %a.3)\n"
                           "  return %a.1, %d.1\n"
                           "}\n");
}

/* The functional program means the same: run eagerly, it returns and leaves the same. */
Test(stage11, the_functional_program_means_the_same_as_the_original)
{
    static const char *const texts[] = {halve_text, log_order_text, alias_text, war_text};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        LgError err = LG_ERROR_INIT;
        IrProgram *program = parse_ok(texts[i]);
        IrProgram *functional = functionalize_program(program, &err);
        Tensor *a = tensor_full(&F32, 3.0, &err), *b = tensor_full(&F32, 3.0, &err);
        for (size_t call = 0; call < 3; call++) {
            IrResults ra, rb;
            cr_assert_eq(interp_call(program, 0, &a, 1, &ra, &err), LG_OK);
            cr_assert_eq(interp_call(functional, 0, &b, 1, &rb, &err), LG_OK);
            cr_assert(tensor_equal_bits(ra.tensors[0], rb.tensors[0]), "text %zu", i);
            cr_assert(tensor_equal_bits(a, b), "text %zu call %zu", i, call);
            interp_results_free(&ra);
            interp_results_free(&rb);
        }
        tensor_free(&a);
        tensor_free(&b);
        ir_program_free(&functional);
        ir_program_free(&program);
    }
}

Test(stage11, only_the_copy_back_writes_an_existing_buffer)
{
    IrProgram *program = parse_ok(halve_text);
    CompiledProgram *c = compile_ok(program, 0);
    cr_assert_eq(c->nnodes, 3);
    const BufferWriteKind kinds[] = {WRITE_NEW, WRITE_NEW, WRITE_MUTATION};
    for (size_t n = 0; n < 3; n++) {
        cr_assert_eq(c->nodes[n].nwrites, 1);
        cr_assert_eq(c->nodes[n].writes[0].kind, kinds[n], "node %zu", n);
    }
    cr_assert_eq(c->nodes[2].writes[0].buffer, 0, "the copy-back writes the input's buffer");
    cr_assert_eq(c->buffers[0].input, 0);
    cr_assert_eq(c->nkernels, 1, "halve fuses into one kernel");
    cr_assert_eq(c->kernels[0].count, 3);
    compile_free(&c);
    ir_program_free(&program);
}

Test(stage11, dependencies_of_the_write_after_read_example)
{
    IrProgram *program = parse_ok(war_text);
    CompiledProgram *c = compile_ok(program, 0);
    static const CompiledDep expected[] = {
        {1, 2, DEP_RAW, 2}, {0, 3, DEP_RAW, 1}, {3, 4, DEP_RAW, 4},
        {3, 4, DEP_WAR, 0}, {2, 4, DEP_WAR, 0}, {0, 4, DEP_WAR, 0},
    };
    cr_assert_eq(c->ndeps, 6);
    for (size_t d = 0; d < 6; d++) {
        cr_assert_eq(c->deps[d].before, expected[d].before, "dep %zu", d);
        cr_assert_eq(c->deps[d].after, expected[d].after, "dep %zu", d);
        cr_assert_eq(c->deps[d].kind, expected[d].kind, "dep %zu", d);
        cr_assert_eq(c->deps[d].buffer, expected[d].buffer, "dep %zu", d);
    }
    /* kernels: {n0 n3} {n1 n2} {n4}: the copy-back waits for n2's read of x */
    static const size_t order[] = {0, 3, 1, 2, 4};
    cr_assert_eq(c->nkernels, 3);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(c->order[i], order[i], "position %zu", i);
    cr_assert_eq(c->kernels[1].numel, 3);
    compile_free(&c);
    ir_program_free(&program);
}

/* Lowered without functionalization, two in-place ops on one input are two writes of
 * one buffer: a WAW dependency, with RAW and WAR around the clone between them. The
 * result still equals eager execution. */
Test(stage11, inplace_ops_kept_give_write_after_write)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok("def f(%x: f32[]) {\n  mul_(%x, 2)\n  %c = clone(%x)\n"
                                  "  %y = alias(%x)\n  mul_(%y, 3)\n  return %c\n}\n");
    CompileOptions options;
    memset(&options, 0, sizeof options);
    options.keep_inplace = true;
    CompiledProgram *c = compile_program(program, &options, &err);
    cr_assert_not_null(c, "%s", err.message);
    cr_assert_eq(c->nnodes, 3, "the alias is no node");
    cr_assert_eq(c->nodes[2].writes[0].kind, WRITE_MUTATION);
    cr_assert_eq(c->nodes[2].writes[0].buffer, 0, "mul_ through the alias writes x's buffer");
    /* n0 reads and writes x with no node before it: no dependency. For n2 the reads
     * come first (RAW), then the look back from its write (WAR on n1, WAW on n0). */
    static const CompiledDep expected[] = {
        {0, 1, DEP_RAW, 0}, {0, 2, DEP_RAW, 0}, {1, 2, DEP_WAR, 0}, {0, 2, DEP_WAW, 0},
    };
    cr_assert_eq(c->ndeps, 4);
    for (size_t d = 0; d < 4; d++) {
        cr_assert_eq(c->deps[d].before, expected[d].before, "dep %zu", d);
        cr_assert_eq(c->deps[d].after, expected[d].after, "dep %zu", d);
        cr_assert_eq(c->deps[d].kind, expected[d].kind, "dep %zu", d);
    }
    cr_assert_eq(c->nkernels, 1, "all three fuse: every dependency is inside the kernel");
    Tensor *e = tensor_full(&F32, 1.0, &err), *k = tensor_full(&F32, 1.0, &err);
    for (size_t call = 0; call < 2; call++) {
        IrResults re, rk;
        cr_assert_eq(interp_call(program, 0, &e, 1, &re, &err), LG_OK);
        cr_assert_eq(compile_call(c, &k, 1, &rk, &err), LG_OK);
        cr_assert(tensor_equal_bits(re.tensors[0], rk.tensors[0]));
        cr_assert(tensor_equal_bits(e, k));
        interp_results_free(&re);
        interp_results_free(&rk);
    }
    cr_assert_eq(tensor_get(k, 0).f32, 36.0f, "1 * 2 * 3, then * 2 * 3");
    tensor_free(&e);
    tensor_free(&k);
    compile_free(&c);
    ir_program_free(&program);
}

/* WAW never stands alone: every in-place op reads the buffer it writes, so a second write
 * is also a read after the first (RAW). Dropping WAW alone changes nothing; with RAW
 * dropped, WAW still keeps mul_ after add_; dropping both lets mul_ fuse ahead of add_:
 * x = 1 * 2 + 1 = 3 instead of (1 + 1) * 2 = 4. */
Test(stage11, kept_inplace_writes_stay_in_order_by_waw_when_raw_is_dropped)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok("def f(%x: f32[], %a: f32[]) {\n  %t = mul(%a, 2)\n"
                                  "  add_(%x, 1)\n  mul_(%x, %t)\n  return %t\n}\n");
    const unsigned drops[] = {0, 1u << DEP_WAW, 1u << DEP_RAW, (1u << DEP_RAW) | (1u << DEP_WAW)};
    const float want[] = {4.0f, 4.0f, 4.0f, 3.0f};
    for (size_t i = 0; i < 4; i++) {
        CompileOptions options;
        memset(&options, 0, sizeof options);
        options.keep_inplace = true;
        options.drop_deps = drops[i];
        CompiledProgram *c = compile_program(program, &options, &err);
        cr_assert_not_null(c, "%s", err.message);
        Tensor *in[2] = {tensor_full(&F32, 1.0, &err), tensor_full(&F32, 1.0, &err)};
        IrResults r;
        cr_assert_eq(compile_call(c, in, 2, &r, &err), LG_OK, "%s", err.message);
        cr_assert_eq(tensor_get(in[0], 0).f32, want[i], "drops %u: x = %g", drops[i],
                     (double)tensor_get(in[0], 0).f32);
        interp_results_free(&r);
        tensor_free(&in[0]);
        tensor_free(&in[1]);
        compile_free(&c);
    }
    ir_program_free(&program);
}

/* Dropping the RAW dependencies lets the sum join the kernel of %t ahead of %u = exp(%y):
 * it reads u's buffer before it is written, r = 2 + 0 instead of 2 + e^0 = 3. */
Test(stage11, without_raw_dependencies_a_read_comes_before_its_write)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok("def read_after_write(%x: f32[], %y: f32[]) {\n"
                                  "  %t = mul(%x, 2)\n  %u = exp(%y)\n  %r = add(%t, %u)\n"
                                  "  return %r\n}\n");
    for (int drop = 0; drop < 2; drop++) {
        CompiledProgram *c = compile_ok(program, drop ? 1u << DEP_RAW : 0);
        static const size_t good[] = {0, 1, 2}, bad[] = {0, 2, 1};
        for (size_t i = 0; i < 3; i++)
            cr_assert_eq(c->order[i], (drop ? bad : good)[i], "position %zu", i);
        Tensor *in[2] = {tensor_full(&F32, 1.0, &err), tensor_full(&F32, 0.0, &err)};
        IrResults r;
        cr_assert_eq(compile_call(c, in, 2, &r, &err), LG_OK, "%s", err.message);
        cr_assert_eq(tensor_get(r.tensors[0], 0).f32, drop ? 2.0f : 3.0f);
        interp_results_free(&r);
        tensor_free(&in[0]);
        tensor_free(&in[1]);
        compile_free(&c);
    }
    ir_program_free(&program);
}

/* With RAW and WAR dropped, %u = exp(%x) joins the kernel last, after %r reads it: %u is
 * read before it is written. It keeps a tensor, zero in every element, and %r = 2y + 0 in
 * both blocks of 1024, not exp of the block before in the second. */
Test(stage11, a_value_read_before_its_write_in_a_kernel_reads_zero_in_every_block)
{
    static const TensorType big = {TENSOR_FLOAT32, 1, {2048}};
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok("def f(%x: f32[2048], %y: f32[2048]) {\n  %t = mul(%y, 2)\n"
                                  "  %u = exp(%x)\n  %r = add(%t, %u)\n  mul_(%x, %t)\n"
                                  "  return %r\n}\n");
    CompiledProgram *c = compile_ok(program, 1u << DEP_RAW | 1u << DEP_WAR);
    static const size_t order[] = {0, 2, 3, 4, 1};
    cr_assert_eq(c->nkernels, 1u);
    cr_assert_eq(c->block, 1024u);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(c->order[i], order[i], "position %zu", i);
    size_t u = ir_find_value(&c->functional->functions[0], "u");
    cr_assert_eq(c->buffers[c->value_buffer[u]].kernel_slot, SIZE_MAX, "u keeps a tensor");
    Tensor *in[2] = {tensor_full(&big, 0.0, &err), tensor_full(&big, 1.0, &err)};
    IrResults r;
    cr_assert_eq(compile_call(c, in, 2, &r, &err), LG_OK, "%s", err.message);
    for (size_t i = 0; i < 2048; i++)
        cr_assert_eq(tensor_get(r.tensors[0], i).f32, 2.0f, "element %zu", i);
    interp_results_free(&r);
    tensor_free(&in[0]);
    tensor_free(&in[1]);
    compile_free(&c);
    ir_program_free(&program);
}

/* Fusion rule 1: a consumer of 3 elements does not join the kernel of a 0-d producer
 * (it would be computed for one element only). */
Test(stage11, a_node_of_another_size_does_not_join_a_kernel)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok("def mixed_sizes(%x: f32[3], %s: f32[]) {\n"
                                  "  %s2 = mul(%s, 2)\n  %r = add(%x, %s2)\n  return %r\n}\n");
    CompiledProgram *c = compile_ok(program, 0);
    cr_assert_eq(c->nkernels, 2, "%%s2 and %%r in kernels of their own");
    cr_assert_eq(c->kernels[0].numel, 1);
    cr_assert_eq(c->kernels[1].numel, 3);
    TensorType f32x3 = {TENSOR_FLOAT32, 1, {3}};
    Tensor *x = tensor_full(&f32x3, 1.0, &err), *s = tensor_full(&F32, 2.0, &err);
    Tensor *in[2] = {x, s};
    IrResults r;
    cr_assert_eq(compile_call(c, in, 2, &r, &err), LG_OK, "%s", err.message);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(tensor_get(r.tensors[0], i).f32, 5.0f, "element %zu", i);
    interp_results_free(&r);
    tensor_free(&x);
    tensor_free(&s);
    compile_free(&c);
    ir_program_free(&program);
}

/* Dropping the WAR dependencies makes the fuser move the copy-back before the read:
 * r = 1 + 8 = 9 instead of 3. The dependency is what keeps the result right. */
Test(stage11, without_war_dependencies_the_copy_back_moves_too_early)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(war_text);
    CompiledProgram *good = compile_ok(program, 0), *bad = compile_ok(program, 1u << DEP_WAR);
    cr_assert_eq(bad->nkernels, 2);
    cr_assert_eq(bad->kernels[0].count, 3, "n0 n3 n4 fused");
    Tensor *x1 = tensor_full(&F32, 2.0, &err), *x2 = tensor_full(&F32, 2.0, &err);
    IrResults r1, r2;
    cr_assert_eq(compile_call(good, &x1, 1, &r1, &err), LG_OK);
    cr_assert_eq(compile_call(bad, &x2, 1, &r2, &err), LG_OK);
    cr_assert_eq(tensor_get(r1.tensors[0], 2).f32, 3.0f);
    cr_assert_eq(tensor_get(r2.tensors[0], 2).f32, 9.0f, "r read the new x");
    cr_assert_eq(bits0(x1), 0x41000000, "x = 8");
    cr_assert_eq(bits0(x2), 0x41000000, "the input is right, the returned value is wrong");
    interp_results_free(&r1);
    interp_results_free(&r2);
    tensor_free(&x1);
    tensor_free(&x2);
    compile_free(&good);
    compile_free(&bad);
    ir_program_free(&program);
}

/* Compiled against eager on the same inputs, call after call, bit for bit. */
static void assert_compiled_equals_eager(const char *text, double input, size_t calls,
                                         const uint32_t *state_bits)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(text);
    CompiledProgram *c = compile_ok(program, 0);
    Tensor *e = tensor_full(&F32, input, &err), *k = tensor_full(&F32, input, &err);
    for (size_t call = 0; call < calls; call++) {
        IrResults re, rk;
        cr_assert_eq(interp_call(program, 0, &e, 1, &re, &err), LG_OK, "%s", err.message);
        cr_assert_eq(compile_call(c, &k, 1, &rk, &err), LG_OK, "%s", err.message);
        char differs[LG_MESSAGE_MAX];
        cr_assert(compiledemo_compare_calls(&program->functions[0], &e, &re, &k, &rk,
                                            differs, sizeof differs),
                  "call %zu: differs in%s", call + 1, differs);
        if (state_bits != NULL)
            cr_assert_eq(bits0(k), state_bits[call], "call %zu: 0x%08x", call + 1, bits0(k));
        interp_results_free(&re);
        interp_results_free(&rk);
    }
    tensor_free(&e);
    tensor_free(&k);
    compile_free(&c);
    ir_program_free(&program);
}

Test(stage11, halve_compiled_matches_eager_over_three_calls)
{
    const uint32_t state[] = {0x3f000000, 0x3e800000, 0x3e000000};
    assert_compiled_equals_eager(halve_text, 1.0, 3, state);
}

/* The seed's point: halve's answer and state are both 0.5, on different storages. A
 * "compiled" call that returned the state itself has every value right and is still
 * wrong; the comparison says so. */
Test(stage11, a_returned_value_on_the_wrong_storage_is_a_mismatch)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(halve_text);
    const IrFunction *fn = &program->functions[0];
    Tensor *e = tensor_full(&F32, 1.0, &err), *k = tensor_full(&F32, 1.0, &err);
    IrResults re, rk;
    cr_assert_eq(interp_call(program, 0, &e, 1, &re, &err), LG_OK);
    cr_assert_eq(interp_call(program, 0, &k, 1, &rk, &err), LG_OK);
    char differs[LG_MESSAGE_MAX];
    cr_assert(compiledemo_compare_calls(fn, &e, &re, &k, &rk, differs, sizeof differs));
    cr_assert_str_eq(differs, "");
    tensor_free(&rk.tensors[0]);
    rk.tensors[0] = tensor_alias(k, &err);
    cr_assert(tensor_equal_bits(re.tensors[0], rk.tensors[0]), "both 0.5");
    cr_assert(tensor_equal_bits(e, k), "both states 0.5");
    cr_assert_not(compiledemo_compare_calls(fn, &e, &re, &k, &rk, differs, sizeof differs));
    cr_assert_str_eq(differs, " storage of returned %answer");
    interp_results_free(&re);
    interp_results_free(&rk);
    tensor_free(&e);
    tensor_free(&k);
    ir_program_free(&program);
}

Test(stage11, log_order_compiled_keeps_log_3)
{
    LgError err = LG_ERROR_INIT;
    const uint32_t state[] = {0x3f8c9f54};
    assert_compiled_equals_eager(log_order_text, 3.0, 1, state);
    IrProgram *program = parse_ok(log_order_text);
    CompiledProgram *c = compile_ok(program, 0);
    Tensor *x = tensor_full(&F32, 3.0, &err);
    IrResults r;
    cr_assert_eq(compile_call(c, &x, 1, &r, &err), LG_OK);
    cr_assert_eq(bits0(r.tensors[0]), 0x3f8c9f54, "y = log 3 = 1.0986123");
    /* kernels {n0} {n1 n2}: n1 does not consume n0 (rule 2); the copy-back joins n1 */
    cr_assert_eq(c->nkernels, 2);
    cr_assert_eq(c->kernels[0].count, 1);
    static const size_t order[] = {0, 1, 2};
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(c->order[i], order[i], "position %zu", i);
    interp_results_free(&r);
    tensor_free(&x);
    compile_free(&c);
    ir_program_free(&program);
}

Test(stage11, alias_compiled_doubles_the_input_and_returns_it)
{
    LgError err = LG_ERROR_INIT;
    const uint32_t state[] = {0x40000000, 0x40800000};
    assert_compiled_equals_eager(alias_text, 1.0, 2, state);
    IrProgram *program = parse_ok(alias_text);
    CompiledProgram *c = compile_ok(program, 0);
    Tensor *x = tensor_full(&F32, 1.0, &err);
    IrResults r;
    cr_assert_eq(compile_call(c, &x, 1, &r, &err), LG_OK);
    cr_assert(tensor_same_storage(r.tensors[0], x), "the returned y is the caller's tensor");
    interp_results_free(&r);
    tensor_free(&x);
    compile_free(&c);
    ir_program_free(&program);
}

Test(stage11, write_after_read_and_versions_compiled_match_eager)
{
    assert_compiled_equals_eager(war_text, 2.0, 3, NULL);
    assert_compiled_equals_eager("def versions(%x: f32[]) {\n  mul_(%x, 0.8)\n  %c = clone(%x)\n"
                                 "  mul_(%x, 0.5)\n  add_(%x, %c)\n  return %c, %x\n}\n",
                                 1.0, 3, NULL);
}

/* Walk k = 1, 2, ... over compile_program: each injected failure returns NULL with
 * LG_ERR_ALLOC and leaves only the source program allocated. */
Test(stage11, every_allocation_failure_of_the_compiler_leaves_nothing)
{
    IrProgram *program = parse_ok(war_text);
    size_t before = mem_live_blocks(), k = 1;
    for (;; k++) {
        LgError err = LG_ERROR_INIT;
        mem_fail_at(k);
        CompiledProgram *c = compile_program(program, NULL, &err);
        mem_fail_at(0);
        if (c != NULL) {
            compile_free(&c);
            break;
        }
        cr_assert_eq(err.status, LG_ERR_ALLOC, "k = %zu: %s", k, err.message);
        cr_assert_eq(mem_live_blocks(), before, "failure at allocation %zu leaked", k);
    }
    cr_assert_gt(k, 10, "%zu allocations", k - 1);
    ir_program_free(&program);
}

/* A call that cannot get its buffers fails before the first kernel: the input is unchanged. */
Test(stage11, a_call_that_runs_out_of_memory_changes_no_input)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(war_text);
    CompiledProgram *c = compile_ok(program, 0);
    Tensor *x = tensor_full(&F32, 2.0, &err);
    size_t before = mem_live_blocks(), k = 1;
    for (;; k++) {
        IrResults r;
        mem_fail_at(k);
        LgStatus status = compile_call(c, &x, 1, &r, &err);
        mem_fail_at(0);
        if (status == LG_OK) {
            interp_results_free(&r);
            break;
        }
        cr_assert_eq(status, LG_ERR_ALLOC);
        cr_assert_eq(r.count, 0);
        cr_assert_eq(mem_live_blocks(), before, "failure at allocation %zu leaked", k);
        cr_assert_eq(bits0(x), 0x40000000, "allocation %zu failed after x changed", k);
    }
    cr_assert_eq(bits0(x), 0x41000000, "the successful call leaves 8");
    tensor_free(&x);
    compile_free(&c);
    ir_program_free(&program);
}

Test(stage11, program_compiles_halve_and_every_example_matches)
{
    ProgramRun run;
    run_program(&run, "stage-11", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "  %state.1 = mul(%state, 0.5)\n  %answer = clone(%state.1)\n"
                                 "  copy_(%state, %state.1)\n"), "%s", run.output);
    cr_assert(strstr(run.output, "writes buf0 (MutationOutput)"), "%s", run.output);
    cr_assert(strstr(run.output, "kernel 0, pointwise over 1 element: n0 n1 n2"));
    cr_assert(strstr(run.output, "  compiled returned %answer: 0.125 (0x3e000000)\n"
                                 "  compiled input %state afterwards: 0.125 (0x3e000000)\n"
                                 "  MATCH\n"), "%s", run.output);
    cr_assert(strstr(run.output, "  write_after_read  x=2                        --drop-deps war      "
                                 "1  MISMATCH\n"), "%s", run.output);
    cr_assert(strstr(run.output, "  read_after_write  x=1 y=0                    --drop-deps raw      "
                                 "1  MISMATCH\n"), "%s", run.output);
    cr_assert(strstr(run.output, "live blocks at the end: 0"));
    lg_expect_short_lines(run.output);
    static const char *const summary[] = {
        "  example           inputs                     compiled with    calls  verdict\n",
        "  halve             state=1                                         3  MATCH\n",
        "  log_order         x=3                                             1  MATCH\n",
        "  alias_add         x=1                                             2  MATCH\n",
        "  write_after_read  x=2                                             1  MATCH\n",
        "  versions          x=1                                             3  MATCH\n",
        "  read_after_write  x=1 y=0                                         1  MATCH\n",
        "  mixed_sizes       x=[1, 2, 3] s=2                                 2  MATCH\n",
        "  two_inputs        a=[1, 2, 3] b=[10, 20, 30]                      2  MATCH\n",
        "  matrix_ops        x=[1, 2, 3, 4] s=2                              2  MATCH\n",
        "  counter           i=0 acc=0 state=0.8                             3  MATCH\n",
    };
    for (size_t i = 0; i < sizeof summary / sizeof summary[0]; i++)
        cr_assert(strstr(run.output, summary[i]), "%s", summary[i]);
}

Test(stage11, program_conventions_and_mismatch_exit_status)
{
    ProgramRun run;
    run_program(&run, "stage-11", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "usage: stage-11"));
    static const LgBadLine lines[] = {
        LG_FILE_PROGRAM_BAD_LINES,
        {"docs/examples/halve.lgir --input state=1 --drop-deps all",
         "--drop-deps must be one of raw|war|waw: got 'all'"},
        {"docs/examples/halve.lgir --input state=1 --drop-deps war --drop-deps raw",
         "option '--drop-deps' is given twice"},
        {"--dump", "option '--dump' applies only with FILE"},
        {"--figure-data /tmp docs/examples/halve.lgir",
         "option '--figure-data' does not apply with FILE"},
        {"--figure-data /tmp --calls 2", "option '--calls' does not apply with '--figure-data'"},
        {"--figure-data {LONG}", "--figure-data: a directory name has 5000 bytes"},
        {"--figure-data {FILE}", "is not a directory"},
    };
    size_t n = lg_expect_usage_errors("stage-11", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
    run_program(&run, "stage-11", "docs/examples/write_after_read.lgir --input x=2 "
                                  "--drop-deps war");
    cr_assert_eq(run.status, 1, "a mismatch exits 1: %s", run.output);
    cr_assert(strstr(run.output, "MISMATCH in returned %r"), "%s", run.output);
    cr_assert(strstr(run.output, "stage-11: error: 1 of 1 calls differ between eager and "
                                 "compiled\n"), "%s", run.output);
    run_program(&run, "stage-11", "docs/examples/halve.lgir --input state=1 --calls 2 --dump");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "-- after functionalization"));
    cr_assert(strstr(run.output, "-- schedule: 1 kernel"));
    run_program(&run, "stage-11", "docs/examples/malformed/dtype_rule.lgir --input i=1");
    cr_assert_eq(run.status, 2);
    cr_assert(strstr(run.output,
                     "docs/examples/malformed/dtype_rule.lgir:4:8: log is defined for f32"));
}

/* Every example runs eagerly and compiled with MATCH on every call; every malformed one
 * is refused with exit status 2 before anything runs. */
static void expect_example_matches(const LgExample *ex, void *context)
{
    (void)context;
    ProgramRun run;
    run_program(&run, "stage-11", ex->args);
    cr_assert_eq(run.status, 0, "%s: %s", ex->path, run.output);
    cr_assert_null(strstr(run.output, "MISMATCH"), "%s", ex->path);
    size_t calls = 0, matches = 0;
    for (char *p = run.output; (p = strstr(p, "\ncall ")) != NULL; p++)
        calls++;
    for (char *p = run.output; (p = strstr(p, "  MATCH\n")) != NULL; p++)
        matches++;
    cr_assert(calls > 0 && matches == calls, "%s: %zu calls, %zu MATCH", ex->path, calls,
              matches);
}

static void expect_example_refused(const LgExample *ex, void *context)
{
    (void)context;
    ProgramRun run;
    run_program(&run, "stage-11", ex->args);
    cr_assert_eq(run.status, 2, "%s: %s", ex->path, run.output);
    cr_assert_null(strstr(run.output, "call 1"));
}

/* A compiled run exits 1 for a broken rule of the run (a mismatch, the work bound) and 2
 * for a bad input file, a program beyond a limit of the IR or of the compiler included. */
Test(stage11, a_limit_of_a_program_file_exits_2_and_a_budget_of_a_call_1)
{
    cr_assert_eq(compiledemo_exit_status(LG_ERR_IR_LIMIT), 2);
    cr_assert_eq(compiledemo_exit_status(LG_ERR_IR_INVALID), 2);
    cr_assert_eq(compiledemo_exit_status(LG_ERR_BUDGET), 1);
    cr_assert_eq(compiledemo_exit_status(LG_ERR_POSTCONDITION), 1);
    char wide[] = "/tmp/lg11-wide-XXXXXX", args[96];
    int fd = mkstemp(wide);
    cr_assert_geq(fd, 0);
    static const char text[] = "def f(%a: f32[4096, 4096], %b: f32[]) {\n  return\n}\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    snprintf(args, sizeof args, "%s --input a=1 --input b=1", wide);
    static LgRun run;
    lg_run(&run, "", "stage-11", args);
    unlink(wide);
    cr_assert_eq(run.status, 2, "%s", run.err);
    cr_assert_str_eq(run.err, "stage-11: error: the inputs of a run have at most 16777216 "
                     "elements together: f's parameters have 16777217\n");
    cr_assert_str_eq(run.out, "");
}

/* A bad --input is a bad command line, exit 2, even for a program whose calls the compiler
 * would refuse for their work (exit 1): the inputs are made before the program is
 * compiled, as Stage 10's interpreter meets them. */
Test(stage11, a_bad_input_is_refused_before_the_work_of_a_call)
{
    char big[] = "/tmp/lg11-big-XXXXXX", args[96];
    int fd = mkstemp(big);
    cr_assert_geq(fd, 0);
    static const char text[] = "def f() {\n  %y = full([4096, 4096], 1, f32)\n"
                               "  %z = add(%y, %y)\n  %a = add(%z, %y)\n  %b = add(%a, %z)\n"
                               "  %c = add(%b, %a)\n  return %c\n}\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    static LgRun run;
    snprintf(args, sizeof args, "%s", big);
    lg_run(&run, "", "stage-11", args);
    cr_assert_eq(run.status, 1, "%s", run.err);
    cr_assert(strstr(run.err, "units of work") != NULL, "%s", run.err);
    snprintf(args, sizeof args, "%s --input x=abc", big);
    lg_run(&run, "", "stage-11", args);
    unlink(big);
    cr_assert_eq(run.status, 2, "%s", run.err);
    cr_assert_str_eq(run.err, "stage-11: error: --input x: f has no such parameter\n");
    cr_assert_str_eq(run.out, "");
}

Test(stage11, every_example_matches_and_every_malformed_one_is_refused)
{
    size_t seen = lg_for_each_example("docs/examples", expect_example_matches, NULL);
    cr_assert_geq(seen, 8, "%zu examples", seen);
    lg_for_each_example("docs/examples/malformed", expect_example_refused, NULL);
}

/* A FIFO or a symbolic link at any of the dumps' or the graph's names is refused when
 * the command line is read, before any example is compiled: exit 2, nothing written. */
/* The seven files of --figure-data are one output, all or nothing: under a file-size
 * limit of 2048 bytes the first four dumps fit and dump-11-versions.txt does not.
 * Whether the write fails with EFBIG or SIGXFSZ ends the run, the four dumps already in
 * place are removed too. */
Test(stage11, a_figure_run_stopped_by_the_file_size_limit_leaves_no_dump)
{
    lg_expect_group_stopped_by_size_limit("stage-11", "--figure-data", 2048,
                                          "dump-11-versions.txt");
}

Test(stage11, a_fifo_at_a_figure_name_is_refused_before_anything)
{
    size_t runs = lg_expect_outputs_refused("stage-11", "--figure-data",
                                            COMPILEDEMO_FIGURE_FILES, "");
    cr_assert_eq(runs, 8);
}
