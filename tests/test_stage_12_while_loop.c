/* Stage 12: while_loop in the IR, its rules, the mutation analysis (union and body-only),
 * eager and compiled execution, and the chapter's numbers bit for bit. */
#include "litgrad_test.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <unistd.h>

#include "compile.h"
#include "compiledemo.h"
#include "functionalize.h"
#include "hostile.h"
#include "interp.h"
#include "ir.h"
#include "loop.h"
#include "loopdemo.h"
#include "mem.h"
#include "runner.h"
#include "tensor.h"

LG_SUITE(stage12);

static const TensorType F32 = {TENSOR_FLOAT32, 0, {0}};

/* Chapter 12's f, with cond's decision as a parameter of the text. */
#define SEED_F                                                                                \
    "def f(%state: f32[]) {\n  mul_(%state, 0.8)\n  %i0 = full([], 0, i64)\n"                \
    "  %acc0 = zeros_like(%state)\n"                                                          \
    "  %i, %acc = while_loop(@cond, @body, %i0, %acc0, %state)\n"                             \
    "  %snapshot = clone(%state)\n  return %i, %acc, %snapshot\n}\n"
#define SEED_BODY_WITH(extra)                                                                 \
    "def body(%i: i64[], %acc: f32[], %state: f32[]) captures(%state) {\n"                    \
    "  %i1 = add(%i, 1)\n  %acc1 = add(%acc, %state)\n" extra "  return %i1, %acc1\n}\n"
#define SEED_COND(go)                                                                         \
    "def cond(%i: i64[], %acc: f32[], %state: f32[]) captures(%state) {\n"                    \
    "  mul_(%state, 0.5)\n  %go = " go "\n  return %go\n}\n"

static const char seed_text[] = SEED_F SEED_COND("lt(%i, 2)") SEED_BODY_WITH("");
static const char false_tensor_text[] = SEED_F SEED_COND("lt(%i, 0)") SEED_BODY_WITH("");
static const char constant_false_text[] = SEED_F SEED_COND("full([], 0, bool)") SEED_BODY_WITH("");
static const char shared_text[] = SEED_F SEED_COND("lt(%i, 2)") SEED_BODY_WITH("  add_(%state, 1)\n");

static const char two_captured_text[] =
    "def f(%a: f32[], %b: f32[]) {\n  mul_(%a, 0.8)\n  mul_(%b, 0.8)\n"
    "  %i0 = full([], 0, i64)\n  %i = while_loop(@cond, @body, %i0, %a, %b)\n"
    "  %sa = clone(%a)\n  %sb = clone(%b)\n  return %i, %sa, %sb\n}\n"
    "def cond(%i: i64[], %a: f32[], %b: f32[]) captures(%a, %b) {\n  mul_(%a, 0.5)\n"
    "  %go = lt(%i, 2)\n  return %go\n}\n"
    "def body(%i: i64[], %a: f32[], %b: f32[]) captures(%a, %b) {\n  add_(%b, %a)\n"
    "  %i1 = add(%i, 1)\n  return %i1\n}\n";

static const char nested_text[] =
    "def f(%state: f32[]) {\n  mul_(%state, 0.8)\n  %i0 = full([], 0, i64)\n"
    "  %acc0 = zeros_like(%state)\n"
    "  %i, %acc = while_loop(@outer_cond, @outer_body, %i0, %acc0, %state)\n"
    "  %snapshot = clone(%state)\n  return %i, %acc, %snapshot\n}\n"
    "def outer_cond(%i: i64[], %acc: f32[], %state: f32[]) captures(%state) {\n"
    "  %go = lt(%i, 2)\n  return %go\n}\n"
    "def outer_body(%i: i64[], %acc: f32[], %state: f32[]) captures(%state) {\n"
    "  %j0 = full([], 0, i64)\n  %j = while_loop(@inner_cond, @inner_body, %j0, %state)\n"
    "  %i1 = add(%i, 1)\n  %acc1 = add(%acc, %state)\n  return %i1, %acc1\n}\n"
    "def inner_cond(%j: i64[], %s: f32[]) captures(%s) {\n  mul_(%s, 0.5)\n"
    "  %go = lt(%j, 1)\n  return %go\n}\n"
    "def inner_body(%j: i64[], %s: f32[]) captures(%s) {\n  %j1 = add(%j, 1)\n"
    "  return %j1\n}\n";

static IrProgram *parse_ok(const char *text)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = ir_parse(text, "test", &err);
    cr_assert_not_null(program, "%s", err.message);
    return program;
}

static CompiledProgram *compile_ok(const IrProgram *program, IrLoopAnalysis analysis)
{
    LgError err = LG_ERROR_INIT;
    CompileOptions options;
    memset(&options, 0, sizeof options);
    options.analysis = analysis;
    CompiledProgram *c = compile_program(program, &options, &err);
    cr_assert_not_null(c, "%s", err.message);
    return c;
}

static uint32_t bits0(const Tensor *t)
{
    return tensor_f32_bits(tensor_get(t, 0).f32);
}

/* One call of Chapter 12's f (eager when c is NULL); check its four numbers and counts. */
static void call_seed(const IrProgram *program, const CompiledProgram *c, Tensor *state,
                      uint32_t acc, uint32_t clone, uint32_t after, size_t conds, size_t bodies)
{
    LgError err = LG_ERROR_INIT;
    IrResults r;
    InterpRun run = {.depth = 0};
    LgStatus status = c != NULL ? compile_call_in(&run, c, &state, 1, &r, &err)
                                : interp_call_in(&run, program, 0, &state, 1, &r, &err);
    cr_assert_eq(status, LG_OK, "%s", err.message);
    size_t cond_runs = run.cond_runs, body_runs = run.body_runs;
    cr_assert_eq(r.count, 3);
    cr_assert_eq(tensor_get(r.tensors[0], 0).i64, (conds == 1 ? 0 : 2));
    cr_assert_eq(bits0(r.tensors[1]), acc, "acc 0x%08x, want 0x%08x", bits0(r.tensors[1]), acc);
    cr_assert_eq(bits0(r.tensors[2]), clone, "clone 0x%08x, want 0x%08x", bits0(r.tensors[2]),
                 clone);
    cr_assert(!tensor_same_storage(r.tensors[2], state), "the clone has its own storage");
    cr_assert_eq(bits0(state), after, "state 0x%08x, want 0x%08x", bits0(state), after);
    cr_assert_eq(cond_runs, conds);
    cr_assert_eq(body_runs, bodies);
    interp_results_free(&r);
}

/* Three calls on one state tensor, eager and compiled with the union alike. */
static void seed_three_calls(const IrProgram *program, const CompiledProgram *c)
{
    LgError err = LG_ERROR_INIT;
    Tensor *state = tensor_full(&F32, 1.0, &err);
    call_seed(program, c, state, 0x3f19999a, 0x3dcccccd, 0x3dcccccd, 3, 2);
    call_seed(program, c, state, 0x3d75c290, 0x3c23d70b, 0x3c23d70b, 3, 2);
    call_seed(program, c, state, 0x3bc49ba6, 0x3a83126f, 0x3a83126f, 3, 2);
    tensor_free(&state);
}

Test(stage12, the_seed_eagerly_three_calls_bit_for_bit)
{
    IrProgram *program = parse_ok(seed_text);
    seed_three_calls(program, NULL);
    ir_program_free(&program);
}

Test(stage12, the_seed_compiled_with_the_union_equals_eager)
{
    IrProgram *program = parse_ok(seed_text);
    CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
    seed_three_calls(program, c);
    compile_free(&c);
    ir_program_free(&program);
}

/* The bug of PyTorch issue 195327: call 1 returns the right acc and clone and leaves 0.8; call 2 returns
 * acc 0.48; the caller's state is the pre-loop value 0.8, 0.64, 0.512. */
Test(stage12, the_body_only_analysis_reproduces_issue_195327)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(seed_text);
    CompiledProgram *c = compile_ok(program, IR_ANALYSIS_BODY_ONLY);
    Tensor *state = tensor_full(&F32, 1.0, &err);
    call_seed(program, c, state, 0x3f19999a, 0x3dcccccd, 0x3f4ccccd, 3, 2);
    call_seed(program, c, state, 0x3ef5c290, 0x3da3d70b, 0x3f23d70b, 3, 2);
    call_seed(program, c, state, 0x3ec49ba6, 0x3d83126f, 0x3f03126f, 3, 2);
    tensor_free(&state);
    compile_free(&c);
    ir_program_free(&program);
}

/* The node of the loop, its kernel, and the kernel of the copy-back. */
static size_t kernel_of(const CompiledProgram *c, size_t node)
{
    for (size_t k = 0; k < c->nkernels; k++)
        for (size_t j = 0; j < c->kernels[k].count; j++)
            if (c->order[c->kernels[k].first + j] == node)
                return k;
    cr_assert_fail("node %zu is in no kernel", node);
    return SIZE_MAX;
}

static size_t node_of_op(const CompiledProgram *c, IrOp op)
{
    for (size_t n = 0; n < c->nnodes; n++)
        if (c->functional->functions[0].instrs[c->nodes[n].instr].op == op)
            return n;
    cr_assert_fail("no node of op %d", (int)op);
    return SIZE_MAX;
}

static size_t mutation_records(const CompiledNode *node)
{
    size_t count = 0;
    for (size_t w = 0; w < node->nwrites; w++)
        count += node->writes[w].kind == WRITE_MUTATION;
    return count;
}

Test(stage12, the_union_orders_the_copy_back_after_the_loop_and_body_only_before)
{
    IrProgram *program = parse_ok(seed_text);
    for (int mode = 0; mode < 2; mode++) {
        CompiledProgram *c = compile_ok(program, mode ? IR_ANALYSIS_BODY_ONLY : IR_ANALYSIS_UNION);
        size_t loop = node_of_op(c, IR_WHILE_LOOP), copy = node_of_op(c, IR_COPY_INPLACE);
        size_t mul = node_of_op(c, IR_MUL), clone = node_of_op(c, IR_CLONE);
        cr_assert_eq(mutation_records(&c->nodes[loop]), mode ? 0u : 1u);
        cr_assert_eq(kernel_of(c, clone) > kernel_of(c, loop), true, "the clone waits");
        if (mode == 0) {
            cr_assert_gt(kernel_of(c, copy), kernel_of(c, loop));
            bool raw = false;
            for (size_t d = 0; d < c->ndeps; d++)
                raw = raw || (c->deps[d].before == loop && c->deps[d].after == copy &&
                              c->deps[d].kind == DEP_RAW);
            cr_assert(raw, "the copy-back reads what the loop wrote");
        } else {
            cr_assert_eq(kernel_of(c, copy), kernel_of(c, mul), "fused into the pre-loop kernel");
            cr_assert_lt(kernel_of(c, copy), kernel_of(c, loop));
        }
        compile_free(&c);
    }
    ir_program_free(&program);
}

/* Stage 11's fusion rules alone (rules 4 and 5 off), given the body-only records, move
 * the clone too. */
Test(stage12, stage_11_scheduling_alone_would_also_move_the_clone)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(seed_text);
    CompileOptions options;
    memset(&options, 0, sizeof options);
    options.analysis = IR_ANALYSIS_BODY_ONLY;
    options.fuse_across_loops = true;
    CompiledProgram *c = compile_program(program, &options, &err);
    cr_assert_not_null(c, "%s", err.message);
    cr_assert_lt(kernel_of(c, node_of_op(c, IR_CLONE)), kernel_of(c, node_of_op(c, IR_WHILE_LOOP)));
    compile_free(&c);
    ir_program_free(&program);
}

/* The state in the first call, watched as the loop begins and after each run of cond:
 * mul_(0.8) made it 0.8, and each of cond's three runs halves it: 0.4, 0.2, 0.1. The
 * program prints the same trace, and the chapter quotes it from the program's output. */
typedef struct Trace {
    size_t count;
    uint32_t bits[8];
} Trace;

static void record_captured(const IrInstr *loop, Tensor *const *inputs, size_t n,
                            void *context)
{
    Trace *trace = context;
    cr_assert_lt(loop->nresults, n, "the loop captures the state");
    cr_assert_lt(trace->count, 8);
    trace->bits[trace->count++] = bits0(inputs[loop->nresults]);
}

Test(stage12, the_state_halves_at_every_run_of_cond)
{
    IrProgram *program = parse_ok(seed_text);
    LgError err = LG_ERROR_INIT;
    Tensor *state = tensor_full(&F32, 1.0, &err);
    IrResults r = {0, {NULL}};
    Trace trace = {0, {0}};
    InterpRun watched = {.watch = record_captured, .watch_context = &trace};
    LgStatus status = interp_call_in(&watched, program, 0, &state, 1, &r, &err);
    cr_assert_eq(status, LG_OK, "%s", err.message);
    const uint32_t want[] = {0x3f4ccccd, 0x3ecccccd, 0x3e4ccccd, 0x3dcccccd};
    cr_assert_eq(trace.count, 4, "the loop begins, then cond runs three times");
    for (size_t k = 0; k < 4; k++)
        cr_assert_eq(trace.bits[k], want[k], "step %zu: 0x%08x, want 0x%08x", k,
                     trace.bits[k], want[k]);
    interp_results_free(&r);
    tensor_free(&state);
    ir_program_free(&program);
    ProgramRun run;
    run_program_stdout(&run, "stage-12", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "The state in the first eager call, as the loop begins and "
                                 "after each cond:\n  0x3f4ccccd 0.8 -> 0x3ecccccd 0.4 -> "
                                 "0x3e4ccccd 0.2 -> 0x3dcccccd 0.1\n"), "%s", run.output);
}

/* False at the first check, as a tensor (the case that PyTorch PR 195393 tests) or as the
 * constant false (the case of PyTorch issue 195970, still open, where Dynamo drops cond's
 * mutation): cond runs once, body never; 0.4, 0.16, 0.064. */
Test(stage12, a_cond_false_at_once_still_runs_once)
{
    const char *texts[] = {false_tensor_text, constant_false_text};
    const uint32_t want[] = {0x3ecccccd, 0x3e23d70b, 0x3d83126f};
    for (size_t t = 0; t < 2; t++) {
        IrProgram *program = parse_ok(texts[t]);
        CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
        bool value = true;
        const IrInstr *loop = &program->functions[0].instrs[3];
        cr_assert_eq(loop_cond_constant(program, loop, &value), t == 1);
        for (int compiled = 0; compiled < 2; compiled++) {
            LgError err = LG_ERROR_INIT;
            Tensor *state = tensor_full(&F32, 1.0, &err);
            for (size_t k = 0; k < 3; k++)
                call_seed(program, compiled ? c : NULL, state, 0, want[k], want[k], 1, 0);
            tensor_free(&state);
        }
        compile_free(&c);
        ir_program_free(&program);
    }
}

/* Run `text` eagerly and compiled (union) on inputs made of `value`, three calls, and
 * require equal returned values and inputs, bit for bit. Returns mismatching calls of
 * the body-only compile. */
static size_t eager_union_body_only(const char *text, size_t ninputs)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(text);
    CompiledProgram *cu = compile_ok(program, IR_ANALYSIS_UNION);
    CompiledProgram *cb = compile_ok(program, IR_ANALYSIS_BODY_ONLY);
    Tensor *in[3][2];
    for (size_t w = 0; w < 3; w++)
        for (size_t p = 0; p < ninputs; p++)
            in[w][p] = tensor_full(&F32, 1.0, &err);
    size_t body_only_mismatches = 0;
    for (size_t k = 0; k < 3; k++) {
        IrResults r[3];
        cr_assert_eq(interp_call(program, 0, in[0], ninputs, &r[0], &err), LG_OK, "%s", err.message);
        cr_assert_eq(compile_call(cu, in[1], ninputs, &r[1], &err), LG_OK, "%s", err.message);
        cr_assert_eq(compile_call(cb, in[2], ninputs, &r[2], &err), LG_OK, "%s", err.message);
        bool same = true;
        for (size_t i = 0; i < r[0].count; i++) {
            cr_assert(tensor_equal_bits(r[0].tensors[i], r[1].tensors[i]), "call %zu result %zu",
                      k + 1, i);
            same = same && tensor_equal_bits(r[0].tensors[i], r[2].tensors[i]);
        }
        for (size_t p = 0; p < ninputs; p++) {
            cr_assert(tensor_equal_bits(in[0][p], in[1][p]), "call %zu input %zu", k + 1, p);
            same = same && tensor_equal_bits(in[0][p], in[2][p]);
        }
        body_only_mismatches += !same;
        for (size_t w = 0; w < 3; w++)
            interp_results_free(&r[w]);
    }
    for (size_t w = 0; w < 3; w++)
        for (size_t p = 0; p < ninputs; p++)
            tensor_free(&in[w][p]);
    compile_free(&cu);
    compile_free(&cb);
    ir_program_free(&program);
    return body_only_mismatches;
}

Test(stage12, cond_and_body_mutating_one_tensor_make_one_record)
{
    IrProgram *program = parse_ok(shared_text);
    CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
    cr_assert_eq(mutation_records(&c->nodes[node_of_op(c, IR_WHILE_LOOP)]), 1u);
    compile_free(&c);
    ir_program_free(&program);
    cr_assert_eq(eager_union_body_only(shared_text, 1), 0u, "the body mutates it too");
}

Test(stage12, two_captured_tensors_one_mutated_in_cond_one_in_body)
{
    IrProgram *program = parse_ok(two_captured_text);
    for (int mode = 0; mode < 2; mode++) {
        CompiledProgram *c = compile_ok(program, mode ? IR_ANALYSIS_BODY_ONLY : IR_ANALYSIS_UNION);
        const CompiledNode *loop = &c->nodes[node_of_op(c, IR_WHILE_LOOP)];
        cr_assert_eq(mutation_records(loop), mode ? 1u : 2u);
        compile_free(&c);
    }
    IrMutation captured[IR_ARGS_MAX];
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(loop_mutations(program, &program->functions[0].instrs[3], IR_ANALYSIS_UNION,
                                captured, &err), LG_OK);
    cr_assert(captured[0].mutated && captured[1].mutated);
    cr_assert_eq(captured[0].function, 1u, "%%a: found in cond");
    cr_assert_eq(captured[1].function, 2u, "%%b: found in body");
    ir_program_free(&program);
    cr_assert_eq(eager_union_body_only(two_captured_text, 2), 3u);
}

Test(stage12, a_nested_loops_cond_mutating_the_outermost_tensor_is_found)
{
    IrProgram *program = parse_ok(nested_text);
    CompiledProgram *cu = compile_ok(program, IR_ANALYSIS_UNION);
    CompiledProgram *cb = compile_ok(program, IR_ANALYSIS_BODY_ONLY);
    cr_assert_eq(mutation_records(&cu->nodes[node_of_op(cu, IR_WHILE_LOOP)]), 1u);
    cr_assert_eq(mutation_records(&cb->nodes[node_of_op(cb, IR_WHILE_LOOP)]), 0u);
    compile_free(&cu);
    compile_free(&cb);
    LgError err = LG_ERROR_INIT;
    Tensor *state = tensor_full(&F32, 1.0, &err);
    IrResults r;
    InterpRun run = {.depth = 0};
    cr_assert_eq(interp_call_in(&run, program, 0, &state, 1, &r, &err), LG_OK, "%s",
                 err.message);
    size_t conds = run.cond_runs, bodies = run.body_runs;
    cr_assert_eq(conds, 3u + 2 * 2, "outer cond 3 times, inner cond twice per outer body");
    cr_assert_eq(bodies, 2u + 2 * 1);
    cr_assert_eq(tensor_get(state, 0).f32, 0.8f * 0.5f * 0.5f * 0.5f * 0.5f);
    interp_results_free(&r);
    tensor_free(&state);
    ir_program_free(&program);
    cr_assert_eq(eager_union_body_only(nested_text, 1), 3u);
}

/* Each rule, with the message that names it. */
static void refused(const char *text, LgStatus status, const char *message)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = ir_parse(text, "t", &err);
    cr_assert_null(program, "accepted: %s", text);
    cr_assert_eq(err.status, status, "%s", err.message);
    cr_assert(strstr(err.message, message), "%s\nwanted: %s", err.message, message);
}

#define LOOP_F(loop)                                                                          \
    "def f(%s: f32[]) {\n  %a0 = full([], 0, f32)\n  %a = " loop "\n  return %a\n}\n"
#define SUB(name, body) "def " name "(%a: f32[], %s: f32[]) captures(%s) {\n" body "}\n"
#define COND_OK SUB("c", "  %go = lt(%a, 1)\n  return %go\n")
#define BODY_OK SUB("b", "  %a1 = add(%a, %s)\n  return %a1\n")

Test(stage12, every_rule_is_checked_before_anything_runs)
{
    refused(LOOP_F("while_loop(@c, @nope, %a0, %s)") COND_OK,
            LG_ERR_IR_INVALID, "t:3:8: while_loop: no function @nope for its body");
    refused(LOOP_F("while_loop(@c, @d, %a0, %s)") COND_OK
                "def d(%s: f32[]) captures(%s) {\n  %z = full([], 0, f32)\n  return %z\n}\n",
            LG_ERR_IR_INVALID, "body @d takes 0 carried values: the loop carries 1");
    refused(LOOP_F("while_loop(@c, @b, %a0)") COND_OK BODY_OK,
            LG_ERR_IR_INVALID, "cond @c captures 1 tensor: the loop passes 0");
    refused("def f(%s: f32[]) {\n  %a0 = full([], 0, i64)\n  %a = while_loop(@c, @b, %a0, %s)\n"
            "  return %a\n}\n" COND_OK BODY_OK,
            LG_ERR_TENSOR_DTYPE, "carried value 1 is %a0: i64[], but @c takes %a: f32[]");
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)") SUB("c", "  return %a\n") BODY_OK,
            LG_ERR_TENSOR_DTYPE, "cond @c must return one bool[] value: it returns %a: f32[]");
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)")
                SUB("c", "  %x = lt(%a, 1)\n  %y = lt(%a, 2)\n  return %x, %y\n") BODY_OK,
            LG_ERR_IR_INVALID, "cond @c must return one bool[] value: it returns 2");
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)") SUB("c", "  %t = full([], 1, bool)\n"
                                                       "  return %t\n") BODY_OK,
            LG_ERR_IR_INVALID, "cond @c returns the constant true: the loop would never end");
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)") COND_OK
                SUB("b", "  %a1 = add(%a, 1)\n  %a2 = add(%a, 2)\n  return %a1, %a2\n"),
            LG_ERR_IR_INVALID, "body @b returns 2 values: the loop carries 1");
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)") COND_OK
                SUB("b", "  %n = lt(%a, %s)\n  return %n\n"),
            LG_ERR_TENSOR_DTYPE, "body @b returns %n: bool[] for carried value 1, which is f32[]");
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)") COND_OK
                SUB("b", "  %y = alias(%s)\n  return %y\n"),
            LG_ERR_IR_INVALID, "body @b returns %y, on the storage of its parameter %s");
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)") COND_OK
                SUB("b", "  add_(%a, 1)\n  %a1 = clone(%a)\n  return %a1\n"),
            LG_ERR_IR_INVALID, "body @b mutates its carried value %a in place (add_ at 11:3); a "
                               "loop may mutate captured tensors, never carried values");
    /* PyTorch issue 195966: a captured mutation next to the carried one hides nothing. */
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)")
                SUB("c", "  mul_(%s, 0.5)\n  %y = alias(%a)\n  mul_(%y, 2)\n  %go = lt(%a, 1)\n"
                         "  return %go\n") BODY_OK,
            LG_ERR_IR_INVALID, "t:3:8: while_loop: cond @c mutates its carried value %a in place "
                               "(mul_ at 9:3)");
    /* ... nor a nested loop that mutates the carried value as its captured tensor. */
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)") COND_OK
                SUB("b", "  %j0 = full([], 0, f32)\n  %j = while_loop(@c, @m, %j0, %a)\n"
                         "  %a1 = add(%a, %s)\n  return %a1\n")
                SUB("m", "  mul_(%s, 0.5)\n  %a1 = add(%a, 1)\n  return %a1\n"),
            LG_ERR_IR_INVALID, "body @b mutates its carried value %a in place (while_loop at "
                               "12:8)");
    /* PR 196005: a captured operand on a carried operand's storage may not be mutated. */
    refused(LOOP_F("while_loop(@c, @b, %a0, %a0)") COND_OK
                SUB("b", "  mul_(%s, 0.5)\n  %a1 = add(%a, 1)\n  return %a1\n"),
            LG_ERR_IR_INVALID, "captured %a0 shares its storage with carried %a0 and the loop "
                               "mutates it");
    refused(LOOP_F("while_loop(@c, @f2, %a0, %s)") COND_OK
                SUB("f2", "  %r = while_loop(@c, @f2, %a, %s)\n  %r1 = clone(%r)\n"
                          "  return %r1\n"),
            LG_ERR_IR_INVALID, "@f2 reaches f2 again through loops: a loop may not recurse");
    refused(LOOP_F("while_loop(@c, @b)") COND_OK BODY_OK,
            LG_ERR_IR_INVALID, "t:3:8: while_loop takes at least 3 operands: got 2");
    refused("def f(%s: f32[]) {\n  %a, %b = while_loop(@c, @b, %s)\n  return %a\n}\n"
            COND_OK BODY_OK,
            LG_ERR_IR_INVALID, "while_loop defines 2 values, so it takes @cond, @body and 2 "
                               "carried values: got 3 operands");
    refused(LOOP_F("while_loop(%a0, @b, %a0, %s)") COND_OK BODY_OK,
            LG_ERR_IR_INVALID, "operand 1 of while_loop must be a function: got a value");
    refused(LOOP_F("while_loop(@c, @b, @c, %s)") COND_OK BODY_OK,
            LG_ERR_IR_INVALID, "operand 3 of while_loop must be a value: got a function");
    refused("def f(%s: f32[]) {\n  while_loop(@c, @b, %s)\n  return\n}\n",
            LG_ERR_IR_INVALID, "while_loop defines its final carried values: it defines none");
    refused("def f(%s: f32[]) captures(%s) {\n  return %s\n}\n",
            LG_ERR_IR_INVALID, "f is the program's entry function");
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)")
                "def c(%a: f32[], %s: f32[]) captures(%a) {\n  %go = lt(%a, 1)\n"
                "  return %go\n}\n" BODY_OK,
            LG_ERR_IR_INVALID, "captures(...) must name the last 1 parameter of c in order");
    refused(LOOP_F("while_loop(@c, @b, %a0, %s)")
                "def c(%a: f32[], %s: f32[]) captures(%t) {\n  %go = lt(%a, 1)\n"
                "  return %go\n}\n" BODY_OK,
            LG_ERR_IR_INVALID, "t:6:38: captured %t is not a parameter of c");
}

/* Every operand after @cond and @body is a value, carried or captured: a number, a shape
 * or a dtype there is refused by the operation's signature, before any loop rule reads it
 * as a value. */
static const char *const not_values[][2] = {
    {"0.8", "a number"}, {"-5", "a number"}, {"1e300", "a number"}, {"0", "a number"},
    {"2", "a number"}, {"i64", "a dtype"}, {"bool", "a dtype"}, {"f32", "a dtype"},
    {"[]", "a shape"}, {"[2]", "a shape"}, {"[1, 2]", "a shape"},
};

Test(stage12, a_loop_operand_that_is_not_a_value_is_refused)
{
    for (size_t k = 0; k < sizeof not_values / sizeof not_values[0]; k++) {
        char loop[64], text[1024], message[128];
        for (int captured = 0; captured < 2; captured++) {
            snprintf(loop, sizeof loop, captured ? "while_loop(@c, @b, %%a0, %s)"
                                                 : "while_loop(@c, @b, %s, %%s)",
                     not_values[k][0]);
            snprintf(text, sizeof text, "%s%s%s", "def f(%s: f32[]) {\n  %a0 = full([], 0, "
                     "f32)\n  %a = ", loop, "\n  return %a\n}\n" COND_OK BODY_OK);
            snprintf(message, sizeof message, "t:3:8: operand %d of while_loop must be a "
                     "value: got %s", captured ? 4 : 3, not_values[k][1]);
            LgError err = LG_ERROR_INIT;
            cr_assert_null(ir_parse(text, "t", &err), "accepted: %s", loop);
            cr_assert_eq(err.status, LG_ERR_IR_INVALID, "%s", err.message);
            cr_assert_str_eq(err.message, message);
            cr_assert_eq(mem_live_blocks(), 0u, "%s left blocks", loop);
        }
    }
}

/* The program: a number as the carried operand exits 2 with one line, printing nothing. */
Test(stage12, the_program_refuses_a_number_as_a_carried_value_with_one_line)
{
    for (size_t k = 0; k < sizeof not_values / sizeof not_values[0]; k++) {
        char path[] = "/tmp/lg12-operand-XXXXXX", args[64], want[160];
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        FILE *file = fdopen(fd, "w");
        cr_assert_not_null(file);
        fprintf(file, "def f(%%a: f32[]) {\n  %%i = while_loop(@c, @b, %s)\n  return %%i\n}\n"
                "def c(%%i: f32[]) {\n  %%g = lt(%%i, 1)\n  return %%g\n}\n"
                "def b(%%i: f32[]) {\n  %%j = add(%%i, 1)\n  return %%j\n}\n",
                not_values[k][0]);
        cr_assert_eq(fclose(file), 0);
        snprintf(args, sizeof args, "%s --input a=0.5", path);
        static LgRun run;
        lg_run(&run, "", "stage-12", args);
        unlink(path);
        snprintf(want, sizeof want, "stage-12: error: %s:2:8: operand 3 of while_loop must be "
                 "a value: got %s\n", path, not_values[k][1]);
        cr_assert_eq(run.status, 2, "%s: %s", not_values[k][0], run.err);
        cr_assert_str_eq(run.out, "");
        cr_assert_str_eq(run.err, want);
    }
}

/* An entry function with no instruction, and a loop in a later function: the loop rules
 * look up the instruction that mutates a carried value only when one does, so nothing is
 * computed from the entry function's empty (NULL) instruction array. */
Test(stage12, a_loop_after_an_empty_entry_function_is_checked)
{
    IrProgram *program = parse_ok("def f(%s: f32[]) {\n  return %s\n}\n"
                                  "def g(%s: f32[]) {\n  %a0 = full([], 0, f32)\n"
                                  "  %a = while_loop(@c, @b, %a0, %s)\n  return %a\n}\n"
                                  COND_OK BODY_OK);
    cr_assert_null(program->functions[0].instrs);
    ir_program_free(&program);
    refused("def f(%s: f32[]) {\n  return %s\n}\n"
            "def g(%s: f32[]) {\n  %a0 = full([], 0, f32)\n"
            "  %a = while_loop(@c, @b, %a0, %s)\n  return %a\n}\n" COND_OK
            SUB("b", "  add_(%a, 1)\n  %a1 = clone(%a)\n  return %a1\n"),
            LG_ERR_IR_INVALID, "body @b mutates its carried value %a in place (add_ at 14:3)");
}

/* A refused program runs nothing: the program exits 2 before the first call. */
Test(stage12, a_refused_program_runs_nothing)
{
    ProgramRun run;
    run_program(&run, "stage-12", "docs/examples/while_loop/malformed/carried_mutated.lgir "
                                  "--input state=1");
    cr_assert_eq(run.status, 2, "%s", run.output);
    cr_assert(strstr(run.output, "mutates its carried value %acc in place (mul_ at 15:3)"),
              "%s", run.output);
    cr_assert_null(strstr(run.output, "call 1"));
}

/* Printing a program with loops and captures gives a text that parses to the same text. */
Test(stage12, loops_and_captures_print_and_parse_back)
{
    const char *texts[] = {seed_text, two_captured_text, nested_text, constant_false_text};
    for (size_t t = 0; t < 4; t++) {
        IrProgram *program = parse_ok(texts[t]);
        char *first = NULL, *second = NULL;
        size_t size = 0;
        FILE *out = open_memstream(&first, &size);
        ir_print_program(program, out);
        fclose(out);
        IrProgram *again = parse_ok(first);
        out = open_memstream(&second, &size);
        ir_print_program(again, out);
        fclose(out);
        cr_assert_str_eq(first, second);
        cr_assert(strstr(first, ") captures(%"), "%s", first);
        free(first);
        free(second);
        ir_program_free(&again);
        ir_program_free(&program);
    }
}

/* The functional program keeps the loop, mapped to the current version of the state. */
Test(stage12, functionalization_keeps_the_loop_on_the_current_version)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(seed_text);
    IrProgram *functional = functionalize_program(program, &err);
    cr_assert_not_null(functional, "%s", err.message);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    ir_print_program(functional, out);
    fclose(out);
    cr_assert(strstr(text, "  %i, %acc = while_loop(@cond, @body, %i0, %acc0, %state.1)\n"
                           "  %snapshot = clone(%state.1)\n  copy_(%state, %state.1)\n"),
              "%s", text);
    cr_assert(strstr(text, "def cond(%i: i64[], %acc: f32[], %state: f32[]) captures(%state)"));
    free(text);
    ir_program_free(&functional);
    ir_program_free(&program);
}

Test(stage12, a_loop_that_never_ends_is_stopped)
{
    LgError err = LG_ERROR_INIT;
    IrProgram *program = parse_ok(LOOP_F("while_loop(@c, @b, %a0, %s)")
                                      SUB("c", "  %go = lt(%a, 1)\n  return %go\n")
                                      SUB("b", "  %a1 = mul(%a, 1)\n  return %a1\n"));
    Tensor *s = tensor_full(&F32, 1.0, &err);
    IrResults r;
    cr_assert_eq(interp_call(program, 0, &s, 1, &r, &err), LG_ERR_BUDGET);
    cr_assert(strstr(err.message, "while_loop @c: cond still true after 65536 iterations"),
              "%s", err.message);
    /* Compiled: the same refusal, after the same runs of cond and body. */
    CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
    InterpRun run = {.depth = 0};
    cr_assert_eq(compile_call_in(&run, c, &s, 1, &r, &err), LG_ERR_BUDGET);
    size_t cond_runs = run.cond_runs, body_runs = run.body_runs;
    cr_assert(strstr(err.message, "while_loop @c: cond still true after 65536 iterations"),
              "%s", err.message);
    cr_assert_eq(cond_runs, 65537u);
    cr_assert_eq(body_runs, 65536u);
    cr_assert_eq(r.count, 0u);
    compile_free(&c);
    tensor_free(&s);
    ir_program_free(&program);
}

/* A loop that counts to %n: its iterations are an input. */
static const char count_to_text[] =
    "def f(%x: f32[], %n: i64[]) {\n  %i0 = full([], 0, i64)\n  %a0 = zeros_like(%x)\n"
    "  %i, %acc = while_loop(@cond, @body, %i0, %a0, %x, %n)\n  return %acc\n}\n"
    "def cond(%i: i64[], %acc: f32[], %x: f32[], %n: i64[]) captures(%x, %n) {\n"
    "  %go = lt(%i, %n)\n  return %go\n}\n"
    "def body(%i: i64[], %acc: f32[], %x: f32[], %n: i64[]) captures(%x, %n) {\n"
    "  %i1 = add(%i, 1)\n  %acc1 = add(%acc, %x)\n  return %i1, %acc1\n}\n";

/* The allocations of one call: the first k at which an injected failure no longer hits. */
static size_t allocations_of_call(const IrProgram *program, const CompiledProgram *c,
                                  int64_t n)
{
    static const TensorType I64 = {TENSOR_INT64, 0, {0}};
    for (size_t k = 1;; k++) {
        LgError err = LG_ERROR_INIT;
        Tensor *in[2] = {tensor_full(&F32, 0.5, &err), tensor_full(&I64, (double)n, &err)};
        IrResults r;
        mem_fail_at(k);
        LgStatus status = c != NULL ? compile_call(c, in, 2, &r, &err)
                                    : interp_call(program, 0, in, 2, &r, &err);
        mem_fail_at(0);
        if (status == LG_OK) {
            cr_assert_eq(tensor_get(r.tensors[0], 0).f32, 0.5f * (float)n);
            interp_results_free(&r);
        }
        tensor_free(&in[0]);
        tensor_free(&in[1]);
        if (status == LG_OK)
            return k - 1;
        cr_assert_eq(status, LG_ERR_ALLOC, "k = %zu: %s", k, err.message);
    }
}

/* The compiled loop runs planned steps in the call's scratch: a call of 300 iterations
 * allocates exactly what a call of 3 does. The interpreter allocates per iteration. */
/* The program: a loop stopped at run time in the first call prints nothing on standard
 * output, not even the header line; the refusal is one line on standard error, exit 1. */
Test(stage12, a_run_refused_in_its_first_call_prints_no_header)
{
    char path[] = "/tmp/lg12-forever-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *file = fdopen(fd, "w");
    cr_assert_not_null(file);
    fputs("def f(%i: i64[]) {\n  %r = while_loop(@cond, @body, %i)\n  return %r\n}\n"
          "def cond(%i: i64[]) {\n  %go = gt(%i, 0)\n  return %go\n}\n"
          "def body(%i: i64[]) {\n  %i1 = add(%i, 1)\n  return %i1\n}\n", file);
    cr_assert_eq(fclose(file), 0);
    char args[64];
    snprintf(args, sizeof args, "%s --input i=1", path);
    static LgRun run;
    lg_run(&run, "", "stage-12", args);
    unlink(path);
    cr_assert_eq(run.status, 1, "%s", run.err);
    cr_assert_str_eq(run.out, "");
    cr_assert_str_eq(run.err, "stage-12: error: while_loop @cond: cond still true after "
                     "65536 iterations\n");
}

Test(stage12, a_compiled_loop_allocates_nothing_per_iteration)
{
    IrProgram *program = parse_ok(count_to_text);
    CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
    size_t compiled3 = allocations_of_call(program, c, 3);
    cr_assert_eq(allocations_of_call(program, c, 300), compiled3);
    cr_assert_gt(allocations_of_call(program, NULL, 300), allocations_of_call(program, NULL, 3),
                 "the interpreter allocates per iteration");
    compile_free(&c);
    ir_program_free(&program);
}

/* One cond for an outer and an inner loop: its frame is bound again at every call. A body
 * with an alias, a clone, a full, a number operand and a 0-d operand beside f32[3] ones:
 * eager and compiled agree bit for bit, call after call, with the same runs. */
Test(stage12, a_function_shared_by_two_loops_and_every_form_compiled_match_eager)
{
    static const char text[] =
        "def f(%x: f32[3], %s: f32[]) {\n  %i0 = full([], 0, i64)\n  %y0 = clone(%x)\n"
        "  %i, %y = while_loop(@c, @outer, %i0, %y0, %x, %s)\n  return %i, %y\n}\n"
        "def c(%i: i64[], %y: f32[3], %x: f32[3], %s: f32[]) captures(%x, %s) {\n"
        "  %go = lt(%i, 3)\n  return %go\n}\n"
        "def outer(%i: i64[], %y: f32[3], %x: f32[3], %s: f32[]) captures(%x, %s) {\n"
        "  %j0 = full([], 0, i64)\n  %j, %z = while_loop(@c, @inner, %j0, %y, %x, %s)\n"
        "  %i1 = add(%i, 1)\n  %w = mul(%z, %s)\n  return %i1, %w\n}\n"
        "def inner(%j: i64[], %y: f32[3], %x: f32[3], %s: f32[]) captures(%x, %s) {\n"
        "  %a = alias(%x)\n  add_(%a, 0.25)\n  %k = clone(%a)\n  %t = sub(%y, %k)\n"
        "  %j1 = add(%j, 1)\n  %u = div(%t, 3)\n  return %j1, %u\n}\n";
    IrProgram *program = parse_ok(text);
    CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
    static const TensorType F32x3 = {TENSOR_FLOAT32, 1, {3}};
    LgError err = LG_ERROR_INIT;
    Tensor *eager_in[2] = {tensor_full(&F32x3, 1.5, &err), tensor_full(&F32, -2.0, &err)};
    Tensor *compiled_in[2] = {tensor_full(&F32x3, 1.5, &err), tensor_full(&F32, -2.0, &err)};
    for (int call = 0; call < 3; call++) {
        IrResults eager, compiled;
        size_t eager_runs[2], compiled_runs[2];
        char differs[256];
        InterpRun eager_run = {.depth = 0}, compiled_run = {.depth = 0};
        cr_assert_eq(interp_call_in(&eager_run, program, 0, eager_in, 2, &eager, &err),
                     LG_OK, "%s", err.message);
        eager_runs[0] = eager_run.cond_runs;
        eager_runs[1] = eager_run.body_runs;
        cr_assert_eq(compile_call_in(&compiled_run, c, compiled_in, 2, &compiled, &err),
                     LG_OK, "%s", err.message);
        compiled_runs[0] = compiled_run.cond_runs;
        compiled_runs[1] = compiled_run.body_runs;
        cr_assert(compiledemo_compare_calls(&program->functions[0], eager_in, &eager,
                                            compiled_in, &compiled, differs, sizeof differs),
                  "call %d:%s", call + 1, differs);
        cr_assert_eq(tensor_get(compiled.tensors[0], 0).i64, 3);
        cr_assert_eq(eager_runs[0], 4u + 3u * 4u, "outer cond 4 times, inner cond 3 x 4");
        cr_assert_eq(compiled_runs[0], eager_runs[0]);
        cr_assert_eq(compiled_runs[1], eager_runs[1]);
        interp_results_free(&eager);
        interp_results_free(&compiled);
    }
    for (int k = 0; k < 2; k++) {
        tensor_free(&eager_in[k]);
        tensor_free(&compiled_in[k]);
    }
    compile_free(&c);
    ir_program_free(&program);
}

/* Every allocation failure while parsing, compiling or calling leaves nothing behind. */
Test(stage12, allocation_failures_leave_nothing_behind)
{
    const char *texts[] = {seed_text, nested_text};
    for (size_t t = 0; t < 2; t++) {
        size_t before = mem_live_blocks(), k;
        for (k = 1;; k++) {
            LgError err = LG_ERROR_INIT;
            mem_fail_at(k);
            IrProgram *program = ir_parse(texts[t], "t", &err);
            mem_fail_at(0);
            if (program != NULL) {
                ir_program_free(&program);
                break;
            }
            cr_assert_eq(err.status, LG_ERR_ALLOC, "k = %zu: %s", k, err.message);
            cr_assert_eq(mem_live_blocks(), before, "parse: failure %zu leaked", k);
        }
        cr_assert_gt(k, 10);
        IrProgram *program = parse_ok(texts[t]);
        for (int mode = 0; mode < 2; mode++) {
            CompileOptions options;
            memset(&options, 0, sizeof options);
            options.analysis = mode ? IR_ANALYSIS_BODY_ONLY : IR_ANALYSIS_UNION;
            before = mem_live_blocks();
            for (k = 1;; k++) {
                LgError err = LG_ERROR_INIT;
                mem_fail_at(k);
                CompiledProgram *c = compile_program(program, &options, &err);
                mem_fail_at(0);
                if (c != NULL) {
                    compile_free(&c);
                    break;
                }
                cr_assert_eq(err.status, LG_ERR_ALLOC, "k = %zu: %s", k, err.message);
                cr_assert_eq(mem_live_blocks(), before, "compile: failure %zu leaked", k);
            }
            cr_assert_gt(k, 10);
        }
        CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
        for (int compiled = 0; compiled < 2; compiled++) {
            before = mem_live_blocks();
            for (k = 1;; k++) {
                LgError err = LG_ERROR_INIT;
                Tensor *state = tensor_full(&F32, 1.0, &err);
                IrResults r;
                size_t live = mem_live_blocks();
                mem_fail_at(k);
                LgStatus status = compiled ? compile_call(c, &state, 1, &r, &err)
                                           : interp_call(program, 0, &state, 1, &r, &err);
                mem_fail_at(0);
                if (status == LG_OK)
                    interp_results_free(&r);
                else
                    cr_assert_eq(status, LG_ERR_ALLOC, "k = %zu: %s", k, err.message);
                cr_assert_eq(mem_live_blocks(), live, "call: failure %zu leaked", k);
                tensor_free(&state);
                if (status == LG_OK)
                    break;
            }
            cr_assert_gt(k, 10);
            cr_assert_eq(mem_live_blocks(), before);
        }
        compile_free(&c);
        ir_program_free(&program);
    }
}

/* The program: the story of f, options, and every example MATCHes by default. */
Test(stage12, the_program_tells_the_story_and_checks_its_options)
{
    ProgramRun run;
    run_program_stdout(&run, "stage-12", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "  1     0x3f800000 1       2  0x3f19999a 0.6     "
                                 "0x3dcccccd 0.1     0x3f4ccccd 0.8     3    2\n"), "%s", run.output);
    cr_assert(strstr(run.output, "0x3ef5c290 0.48"));
    cr_assert(strstr(run.output, "0x3ecccccd 0x3e23d70b 0x3d83126f"));
    cr_assert(strstr(run.output, "live blocks at the end: 0"));
    lg_expect_short_lines(run.output);
    run_program(&run, "stage-12", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "--analysis union|body-only"), "%s", run.output);
    static const LgBadLine lines[] = {
        LG_FILE_PROGRAM_BAD_LINES,
        {"docs/examples/while_loop/cond_halves.lgir --input state=1 --analysis all",
         "--analysis must be one of union|body-only: got 'all'"},
        {"docs/examples/while_loop/cond_halves.lgir --input state=1 --analysis union --analysis union",
         "option '--analysis' is given twice"},
        {"--analysis body-only", "option '--analysis' applies only with FILE"},
        {"--figure-data /tmp docs/examples/halve.lgir",
         "option '--figure-data' does not apply with FILE"},
        {"--figure-data /tmp --dump", "option '--dump' does not apply with '--figure-data'"},
        {"--figure-data=/tmp --figure-data=/tmp", "option '--figure-data' is given twice"},
        {"--figure-data {LONG}", "--figure-data: a directory name has 5000 bytes"},
        {"docs/examples/while_loop/malformed/carried_mutated.lgir --input state=1",
         "carried_mutated.lgir"},
    };
    size_t n = lg_expect_usage_errors("stage-12", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
    run_program(&run, "stage-12", "docs/examples/while_loop/cond_halves.lgir --input state=1 --calls 2 "
                                  "--analysis body-only --dump");
    cr_assert_eq(run.status, 1, "a mismatch exits 1: %s", run.output);
    cr_assert(strstr(run.output, "MISMATCH in input %state"), "%s", run.output);
    cr_assert(strstr(run.output, "-- loop mutation analysis: body-only"));
    cr_assert(strstr(run.output, "writes buf4 (new) buf5 (new)\n"), "%s", run.output);
    run_program(&run, "stage-12", "docs/examples/while_loop/cond_halves.lgir --input state=1 --dump");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "writes buf4 (new) buf5 (new) buf1 (MutationOutput)\n"),
              "%s", run.output);
}

static void expect_example_matches(const LgExample *ex, void *context)
{
    (void)context;
    ProgramRun run;
    run_program(&run, "stage-12", ex->args);
    cr_assert_eq(run.status, 0, "%s: %s", ex->path, run.output);
    cr_assert(strstr(run.output, "call 1:\n"), "%s", ex->path);
    cr_assert_null(strstr(run.output, "MISMATCH"), "%s", ex->path);
}

static void expect_example_refused(const LgExample *ex, void *context)
{
    (void)context;
    ProgramRun run;
    run_program(&run, "stage-12", ex->args);
    cr_assert_eq(run.status, 2, "%s: %s", ex->path, run.output);
    cr_assert(strstr(run.output, ex->expected_error), "%s: %s", ex->path, run.output);
    cr_assert_null(strstr(run.output, "call 1"));
}

Test(stage12, every_example_matches_under_the_union)
{
    size_t seen = lg_for_each_example("docs/examples/while_loop", expect_example_matches, NULL);
    cr_assert_geq(seen, 6, "%zu loop examples", seen);
    seen += lg_for_each_example("docs/examples", expect_example_matches, NULL);
    cr_assert_geq(seen, 14, "%zu examples in all", seen);
    seen = lg_for_each_example("docs/examples/while_loop/malformed", expect_example_refused, NULL);
    cr_assert_geq(seen, 4);
}

/* ---- scale: programs generated here, checked for acceptance or refusal (never timed) ---- */

/* A growing text for generated programs. */
typedef struct GenText {
    char *text;
    size_t used, size;
} GenText;

static void gen(GenText *g, const char *fmt, ...) LG_PRINTF(2, 3);

static void gen(GenText *g, const char *fmt, ...)
{
    for (;;) {
        va_list args;
        va_start(args, fmt);
        int n = vsnprintf(g->text == NULL ? NULL : g->text + g->used, g->size - g->used, fmt,
                          args);
        va_end(args);
        cr_assert(n >= 0);
        if (g->used + (size_t)n < g->size) {
            g->used += (size_t)n;
            return;
        }
        g->size = 2 * g->size + (size_t)n + 64;
        g->text = realloc(g->text, g->size);
        cr_assert_not_null(g->text);
    }
}

/* Loops nested `depth` deep: f's loop runs b1, b1's loop runs b2, ... b<depth> mutates the
 * captured %s. With `twice`, every b<k> below the last holds two loops over b<k+1>. */
static char *nested_loops(size_t depth, bool twice)
{
    GenText g = {NULL, 0, 0};
    gen(&g, "def f(%%s: f32[]) {\n  %%i0 = full([], 0, i64)\n"
            "  %%i = while_loop(@c, @b1, %%i0, %%s)\n  return %%i\n}\n"
            "def c(%%i: i64[], %%s: f32[]) captures(%%s) {\n  %%go = lt(%%i, 1)\n  return %%go\n}\n");
    for (size_t k = 1; k < depth; k++) {
        gen(&g, "def b%zu(%%i: i64[], %%s: f32[]) captures(%%s) {\n"
                "  %%j = while_loop(@c, @b%zu, %%i, %%s)\n", k, k + 1);
        if (twice)
            gen(&g, "  %%l = while_loop(@c, @b%zu, %%j, %%s)\n  return %%l\n}\n", k + 1);
        else
            gen(&g, "  return %%j\n}\n");
    }
    gen(&g, "def b%zu(%%i: i64[], %%s: f32[]) captures(%%s) {\n  mul_(%%s, 0.5)\n"
            "  %%k = add(%%i, 1)\n  return %%k\n}\n", depth);
    return g.text;
}

Test(stage12, loops_nest_up_to_the_bound_and_no_deeper)
{
    char *text = nested_loops(IR_LOOP_DEPTH_MAX, false);
    IrProgram *program = parse_ok(text);
    free(text);
    CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
    cr_assert_eq(mutation_records(&c->nodes[node_of_op(c, IR_WHILE_LOOP)]), 1u,
                 "the mutation 64 loops down reaches the outermost loop");
    compile_free(&c);
    LgError err = LG_ERROR_INIT;
    Tensor *s = tensor_full(&F32, 1.0, &err);
    IrResults r;
    cr_assert_eq(interp_call(program, 0, &s, 1, &r, &err), LG_OK, "%s", err.message);
    cr_assert_eq(tensor_get(s, 0).f32, 0.5f, "each level runs its body once");
    interp_results_free(&r);
    tensor_free(&s);
    ir_program_free(&program);

    text = nested_loops(IR_LOOP_DEPTH_MAX + 1, false);
    cr_assert_null(ir_parse(text, "t", &err));
    free(text);
    cr_assert_eq(err.status, LG_ERR_IR_INVALID);
    cr_assert_str_eq(err.message, "t:263:8: while_loop: loops nest 65 deep through @c: at most "
                     "64 (IR_LOOP_DEPTH_MAX)");
}

Test(stage12, two_loops_per_level_are_analysed_once_per_function)
{
    /* Analysed afresh at every level, this program would take 2^40 walks of b40. Its
     * work, each loop run once, is as large: the compiler refuses it, the analysis of
     * either kind still finds the mutation 40 levels down, once per function. */
    char *text = nested_loops(40, true);
    IrProgram *program = parse_ok(text);
    free(text);
    LgError err = LG_ERROR_INIT;
    for (int mode = 0; mode < 2; mode++) {
        IrMutationSummary *summary = loop_mutation_summary(
            program, mode ? IR_ANALYSIS_BODY_ONLY : IR_ANALYSIS_UNION, &err);
        cr_assert_not_null(summary, "%s", err.message);
        IrMutation captured[IR_ARGS_MAX];
        loop_summary_loop(summary, &program->functions[0].instrs[1], captured);
        cr_assert(captured[0].mutated, "the mul_ 40 loops down reaches f's loop");
        loop_mutation_summary_free(&summary);
    }
    CompileOptions options;
    memset(&options, 0, sizeof options);
    cr_assert_null(compile_program(program, &options, &err));
    cr_assert_eq(err.status, LG_ERR_BUDGET);
    cr_assert(strstr(err.message, "its instructions, each loop run once, make ") != NULL, "%s",
              err.message);
    ir_program_free(&program);
}

/* A chain of `count` values: %x, then `count - 1` neg instructions, names of 3 letters. */
static char *long_chain(size_t count)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    GenText g = {NULL, 0, 0};
    char prev[4] = "x", name[4];
    gen(&g, "def f(%%x: f32[]) {\n");
    for (size_t i = 0; i + 1 < count; i++) {
        for (size_t k = 0, v = i; k < 3; k++, v /= 52)
            name[k] = letters[v % 52];
        name[3] = '\0';
        gen(&g, "%%%s=neg(%%%s)\n", name, prev);
        memcpy(prev, name, sizeof prev);
    }
    gen(&g, "return %%%s\n}\n", prev);
    return g.text;
}

Test(stage12, a_program_of_65536_values_compiles_into_one_kernel_and_one_more_is_refused)
{
    char *text = long_chain(IR_VALUES_MAX);
    cr_assert_leq(strlen(text), (size_t)1 << 20, "it fits the 1 MiB file limit");
    IrProgram *program = parse_ok(text);
    free(text);
    CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
    cr_assert_eq(c->nnodes, IR_VALUES_MAX - 1);
    cr_assert_eq(c->nkernels, 1u, "65,535 pointwise nodes of one element fuse into one kernel");
    LgError err = LG_ERROR_INIT;
    Tensor *e = tensor_full(&F32, 1.5, &err), *k = tensor_full(&F32, 1.5, &err);
    IrResults re, rc;
    cr_assert_eq(interp_call(program, 0, &e, 1, &re, &err), LG_OK, "%s", err.message);
    cr_assert_eq(compile_call(c, &k, 1, &rc, &err), LG_OK, "%s", err.message);
    cr_assert_eq(tensor_get(re.tensors[0], 0).f32, -1.5f, "an odd number of negations");
    cr_assert(tensor_equal_bits(re.tensors[0], rc.tensors[0]));
    interp_results_free(&re);
    interp_results_free(&rc);
    tensor_free(&e);
    tensor_free(&k);
    compile_free(&c);
    ir_program_free(&program);

    text = long_chain(IR_VALUES_MAX + 1);
    cr_assert_null(ir_parse(text, "t", &err));
    free(text);
    cr_assert_eq(err.status, LG_ERR_IR_LIMIT, "a limit of a program file, not a budget");
    cr_assert_str_eq(err.message, "t:65537:6: a function has at most 65536 values: need 65537");
}

Test(stage12, many_functions_are_found_by_name)
{
    GenText g = {NULL, 0, 0};
    enum { FUNCTIONS = 20000 };
    gen(&g, "def f(%%s: f32[]) {\n  %%i0 = full([], 0, i64)\n"
            "  %%i = while_loop(@c%d, @b%d, %%i0, %%s)\n  return %%i\n}\n", FUNCTIONS - 1,
        FUNCTIONS - 1);
    for (int k = 0; k < FUNCTIONS; k++)
        gen(&g, "def c%d(%%i: i64[], %%s: f32[]) captures(%%s) {\n  %%go = lt(%%i, 1)\n"
                "  return %%go\n}\ndef b%d(%%i: i64[], %%s: f32[]) captures(%%s) {\n"
                "  %%k = add(%%i, 1)\n  return %%k\n}\n", k, k);
    IrProgram *program = parse_ok(g.text);
    cr_assert_eq(program->nfunctions, 2u * FUNCTIONS + 1);
    cr_assert_eq(ir_find_function(program, "b12345"), 2u * 12345 + 2);
    ir_program_free(&program);
    gen(&g, "def b7() {\n  return\n}\n");
    LgError err = LG_ERROR_INIT;
    cr_assert_null(ir_parse(g.text, "t", &err));
    cr_assert(strstr(err.message, ": function b7 is defined twice") != NULL, "%s", err.message);
    free(g.text);
}

Test(stage12, a_call_does_bounded_work_whatever_the_file_asks)
{
    /* Two loops of 65,536 iterations, one inside the other: 2^32 inner iterations. */
    static const char nested[] =
        "def f(%x: f32[]) {\n  %i0 = full([], 0, i64)\n"
        "  %i = while_loop(@c, @outer, %i0, %x)\n  return %i\n}\n"
        "def c(%i: i64[], %x: f32[]) captures(%x) {\n  %go = lt(%i, 65536)\n  return %go\n}\n"
        "def outer(%i: i64[], %x: f32[]) captures(%x) {\n  %j0 = full([], 0, i64)\n"
        "  %j = while_loop(@c, @inner, %j0, %x)\n  %i1 = add(%i, 1)\n  return %i1\n}\n"
        "def inner(%j: i64[], %x: f32[]) captures(%x) {\n  add_(%x, 1)\n  %j1 = add(%j, 1)\n"
        "  return %j1\n}\n";
    IrProgram *program = parse_ok(nested);
    LgError err = LG_ERROR_INIT;
    Tensor *x = tensor_full(&F32, 0.0, &err);
    IrResults r;
    cr_assert_eq(interp_call(program, 0, &x, 1, &r, &err), LG_ERR_BUDGET);
    cr_assert(strstr(err.message, "a call does at most 67108864 units of work") != NULL, "%s",
              err.message);
    cr_assert_eq(r.count, 0u);
    CompiledProgram *c = compile_ok(program, IR_ANALYSIS_UNION);
    cr_assert_eq(compile_call(c, &x, 1, &r, &err), LG_ERR_BUDGET, "the loop's kernel too");
    compile_free(&c);
    tensor_free(&x);
    ir_program_free(&program);

    /* Four operations on tensors of 2^24 elements: refused by the compiler before any call. */
    IrProgram *big = parse_ok("def f(%x: f32[4096, 4096]) {\n  %a = exp(%x)\n  %b = exp(%a)\n"
                              "  %c = exp(%b)\n  %d = exp(%c)\n  return %d\n}\n");
    CompileOptions options;
    memset(&options, 0, sizeof options);
    cr_assert_null(compile_program(big, &options, &err));
    cr_assert_eq(err.status, LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "f: a call does at most 67108864 units of work (64 an "
                     "instruction, 1 an element): its instructions, each loop run once, make "
                     "67109120");
    ir_program_free(&big);
}

/* The scalar loop of the hostile files: `limit` iterations asked, 14 adds an iteration. */
static IrProgram *scalar_loop(size_t limit)
{
    char text[1024];
    int n = snprintf(text, sizeof text,
                     "def f(%%x: f32[]) {\n  %%i0 = full([], 0, i64)\n"
                     "  %%i, %%a = while_loop(@cond, @body, %%i0, %%x)\n  return %%a\n}\n"
                     "def cond(%%i: i64[], %%a: f32[]) {\n  %%go = lt(%%i, %zu)\n"
                     "  return %%go\n}\ndef body(%%i: i64[], %%a: f32[]) {\n"
                     "  %%i1 = add(%%i, 1)\n  %%b0 = add(%%a, 1)\n", limit);
    for (int k = 1; k < 14; k++)
        n += snprintf(text + n, sizeof text - (size_t)n, "  %%b%d = add(%%b%d, 1)\n", k, k - 1);
    snprintf(text + n, sizeof text - (size_t)n, "  return %%i1, %%b13\n}\n");
    return parse_ok(text);
}

/* Call f of `program` eagerly and compiled on x = 1; return the two statuses and messages. */
static void call_both(const IrProgram *program, LgStatus status[2], char message[2][512])
{
    LgError err = LG_ERROR_INIT;
    CompiledProgram *c = NULL;
    for (int way = 0; way < 2; way++) {
        Tensor *x = tensor_full(&F32, 1.0, &err);
        IrResults r = {0};
        message[way][0] = '\0';
        if (way == 0) {
            status[way] = interp_call(program, 0, &x, 1, &r, &err);
        } else {
            CompileOptions options;
            memset(&options, 0, sizeof options);
            c = compile_program(program, &options, &err);
            status[way] = c != NULL ? compile_call(c, &x, 1, &r, &err) : err.status;
        }
        if (status[way] != LG_OK)
            snprintf(message[way], 512, "%s", err.message);
        interp_results_free(&r);
        tensor_free(&x);
    }
    compile_free(&c);
}

/* The work is decided before a call: the work table's entry of f, charged at once; then
 * each iteration after the first, before it runs, the entries of cond and body. Eager
 * and compiled are charged the same units and accept and refuse the same programs, at
 * the bound and one unit (or one iteration) past it, with the same message. */
Test(stage12, eager_and_compiled_charge_the_same_work_at_the_bound)
{
    LgError err = LG_ERROR_INIT;
    for (size_t extra = 0; extra < 2; extra++) {   /* 4 (64 + n): the bound, then 4 more */
        char text[256];
        snprintf(text, sizeof text, "def f(%%x: f32[]) {\n  %%v0 = full([%zu], 1, f32)\n"
                 "  %%v1 = exp(%%v0)\n  %%v2 = exp(%%v1)\n  %%v3 = exp(%%v2)\n"
                 "  return %%x\n}\n", (size_t)TENSOR_NUMEL_MAX - 64 + extra);
        IrProgram *program = parse_ok(text);
        size_t *table = interp_work_table(program, &err);
        cr_assert_eq(table[0], INTERP_WORK_MAX + 4 * extra);
        mem_free(table);
        CompileOptions options;
        memset(&options, 0, sizeof options);
        CompiledProgram *c = compile_program(program, &options, &err);
        char compiled_message[LG_MESSAGE_MAX];
        snprintf(compiled_message, sizeof compiled_message, "%s", c ? "" : err.message);
        InterpRun run = {.depth = 0};
        LgStatus eager = interp_work_begin(&run, program, NULL, 0, &err);
        if (eager == LG_OK)
            interp_work_end(&run);
        cr_assert_eq(c != NULL, extra == 0, "the compiler accepts exactly the bound");
        cr_assert_eq(eager == LG_OK, extra == 0, "so does the interpreter, before running");
        if (extra == 1) {
            Tensor *x = tensor_full(&F32, 1.0, &err);
            IrResults r;
            cr_assert_eq(interp_call(program, 0, &x, 1, &r, &err), LG_ERR_BUDGET);
            cr_assert_str_eq(err.message, "f: a call does at most 67108864 units of work (64 "
                             "an instruction, 1 an element): its instructions, each loop run "
                             "once, make 67108868");
            cr_assert_str_eq(compiled_message, err.message);
            tensor_free(&x);
        }
        compile_free(&c);
        ir_program_free(&program);
    }

    /* 1236 units before the first iteration, 1040 for each further one: 64,527
     * iterations make 1236 + 64,526 * 1040 <= 2^26; the 64,528th would cross it. */
    IrProgram *program = scalar_loop(64527);
    size_t *table = interp_work_table(program, &err);
    cr_assert_eq(table[0], 1236u);
    cr_assert_eq(table[1] + table[2], 1040u, "cond and body: one iteration");
    cr_assert_leq(1236u + 64526u * 1040u, INTERP_WORK_MAX);
    cr_assert_gt(1236u + 64527u * 1040u, INTERP_WORK_MAX);
    mem_free(table);
    LgStatus status[2];
    char message[2][512];
    call_both(program, status, message);
    cr_assert_eq(status[0], LG_OK, "eager: %s", message[0]);
    cr_assert_eq(status[1], LG_OK, "compiled: %s", message[1]);
    ir_program_free(&program);
    program = scalar_loop(64528);
    call_both(program, status, message);
    cr_assert_eq(status[0], LG_ERR_BUDGET);
    cr_assert_eq(status[1], LG_ERR_BUDGET);
    cr_assert_str_eq(message[0], "f: a call does at most 67108864 units of work (64 an "
                     "instruction, 1 an element): iteration 64528 of while_loop(@cond, @body) "
                     "(1040 units) would make 67109316");
    cr_assert_str_eq(message[1], message[0], "compiled: the same iteration, the same words");
    ir_program_free(&program);
}

/* Every hostile file fits the loader's limit and is decided as its case says: a result,
 * or a refusal with its status, its exit status and the numbers of its message. */
Test(stage12, every_hostile_file_is_decided_as_its_case_says)
{
    size_t results = 0;
    for (size_t k = 0; k < HOSTILE_CASES; k++) {
        const HostileCase *hc = hostile_case(k);
        LgError err = LG_ERROR_INIT;
        char *text = hostile_text(k, &err);
        cr_assert_not_null(text);
        cr_assert_leq(strlen(text), RUNNER_FILE_MAX, "%s", hc->name);
        LgStatus status = hostile_decide(k, text, &err);
        mem_free(text);
        cr_assert_eq(status, hc->status, "%s: %s", hc->name, status ? err.message : "a result");
        if (hc->message != NULL)
            cr_assert(strstr(err.message, hc->message) != NULL, "%s: %s", hc->name,
                      err.message);
        cr_assert_eq(compiledemo_exit_status(status), status == LG_OK ? 0
                                                   : status == LG_ERR_BUDGET ? 1 : 2);
        results += status == LG_OK;
    }
    cr_assert_eq(results, 7u, "seven cases at their bounds run to a result");
}

/* The program says the same from a file: exit 1 and the work bound's message, at once;
 * exit 2 for every limit of a program file: the nesting bound's, the value bound's and
 * the inputs' size. */
Test(stage12, the_program_refuses_hostile_files_with_exit_1_or_2)
{
    static const struct { size_t k; int status; const char *input, *says; } runs[] = {
        {1, 1, "x=1", "its instructions, each loop run once, make 67108868"},
        {7, 2, "s=1", "loops nest 65 deep through @c: at most 64 (IR_LOOP_DEPTH_MAX)"},
        {11, 2, "x=1", ":65537:6: a function has at most 65536 values: need 65537"},
        {16, 2, "a=1 --input b=1", "the inputs of a run have at most 16777216 elements "
                                   "together: f's parameters have 33554432"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        char path[] = "/tmp/litgrad-hostile-XXXXXX", args[128];
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        LgError err = LG_ERROR_INIT;
        char *text = hostile_text(runs[i].k, &err);
        size_t size = strlen(text);
        cr_assert_eq(write(fd, text, size), (ssize_t)size);
        close(fd);
        mem_free(text);
        snprintf(args, sizeof args, "%s --input %s", path, runs[i].input);
        ProgramRun run;
        run_program(&run, "stage-12", args);
        unlink(path);
        cr_assert_eq(run.status, runs[i].status, "%s", run.output);
        cr_assert(strstr(run.output, runs[i].says) != NULL, "%s", run.output);
    }
}

/* The figure of the two schedules is drawn from the compiled programs: with the body-only
 * analysis the copy-back shares kernel 0 with the mul before the loop (red); with the
 * union it runs in the last kernel, after the loop (green), behind a RAW edge from it. */
Test(stage12, the_schedule_figure_shows_the_copy_back_before_and_after_the_loop)
{
    char dir[] = "/tmp/litgrad-figure-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char args[64], path[128];
    snprintf(args, sizeof args, "--figure-data %s", dir);
    ProgramRun run;
    run_program(&run, "stage-12", args);
    cr_assert_eq(run.status, 0, "%s", run.output);
    snprintf(path, sizeof path, "%s/fig-12-schedule-body-only.dot", dir);
    char *before = lg_read_text(path);
    snprintf(path, sizeof path, "%s/fig-12-schedule-union.dot", dir);
    char *after = lg_read_text(path);
    cr_assert(strstr(before, "label=\"body-only analysis:\\ncopy-back n5 in kernel 0, loop n3 "
                             "in kernel 2\""), "%s", before);
    cr_assert(strstr(before, "n5 [label=\"n5: copy_(%state, %state.1)\"];"), "%s", before);
    /* drawn, each node is labelled by its operation alone (the figure fits the page) */
    cr_assert(strstr(before, "  n5 [label=\"n5: copy_\"];\n  n5 [style=filled"), "%s", before);
    cr_assert(strstr(before, "  n3 [label=\"n3: while_loop\"];\n"), "%s", before);
    cr_assert(strstr(before, "n5 [style=filled, fillcolor=\"#f4b6b6\"];"), "%s", before);
    cr_assert_null(strstr(before, "n3 -> n5"), "nothing orders the copy-back after the loop");
    cr_assert(strstr(after, "label=\"union analysis:\\ncopy-back n5 in kernel 4, loop n3 in "
                            "kernel 2\""), "%s", after);
    cr_assert(strstr(after, "n5 [style=filled, fillcolor=\"#b9e4b9\"];"), "%s", after);
    cr_assert(strstr(after, "n3 -> n5 [label=<<table border=\"0\" cellborder=\"0\" "
                            "cellpadding=\"1\" bgcolor=\"white\"><tr><td>RAW %state.1</td>"
                            "</tr></table>>];"),
              "%s", after);
    free(before);
    free(after);
    static const char *const files[] = {
        "fig-12-schedule-body-only.dot", "fig-12-schedule-union.dot", "dump-12-body-only.txt",
        "dump-12-union.txt", "fig-12-caller-state.dat",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        remove(path);
    }
    cr_assert_eq(rmdir(dir), 0, "the figure run wrote only the files it names");
}

/* A FIFO or a symbolic link at any of the dumps', the chart's or the schedules' names is
 * refused when the command line is read, before f is compiled: exit 2,
 * nothing written, nothing left behind. */
/* The five files of --figure-data are one output, all or nothing: under a file-size
 * limit of 2800 bytes the body-only dump fits and the union's does not. Whether the
 * write fails with EFBIG or SIGXFSZ ends the run, the dump already in place is removed
 * too. */
Test(stage12, a_figure_run_stopped_by_the_file_size_limit_leaves_no_dump)
{
    lg_expect_group_stopped_by_size_limit("stage-12", "--figure-data", 2800,
                                          "dump-12-union.txt");
}

Test(stage12, a_fifo_at_a_figure_name_is_refused_before_anything)
{
    size_t runs = lg_expect_outputs_refused("stage-12", "--figure-data",
                                            LOOPDEMO_FIGURE_FILES, "");
    cr_assert_eq(runs, 6);
}

/* Appendix A's exporter (built for the last stage's tests by the Makefile) declares what
 * its options can mean: --steps is at most 280, the whole iris run (40 epochs of 7
 * steps), and a step it would never take is refused with the command line, exit 2,
 * before the data file is read; its options are written in full, like every program's. */
Test(stage12, the_crosscheck_exporter_declares_the_steps_of_the_iris_run)
{
    static const LgBadLine lines[] = {
        {"--train data/iris.csv --steps 281",
         "--steps must be an integer in [1, 280]: got '281'"},
        {"--train data/iris.csv --steps 0", "--steps must be an integer in [1, 280]: got '0'"},
        {"--steps=281 --train data/iris.csv", "--steps must be an integer in [1, 280]"},
        {"--tra data/iris.csv", "option '--tra' is abbreviated: write '--train'"},
        {"--steps 5", "option '--steps' applies only with '--train'"},
    };
    size_t n = lg_expect_usage_errors("crosscheck-export", lines,
                                      sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 5);
    static LgRun run;
    lg_run(&run, "", "crosscheck-export", "--train data/iris.csv --steps 280");
    cr_assert_eq(run.status, 0, "%s", run.err);
    const char *last = strstr(run.out, "\nstep 280 ");
    cr_assert(last != NULL && strstr(run.out, "\nstep 281 ") == NULL, "the last step is 280");
}
