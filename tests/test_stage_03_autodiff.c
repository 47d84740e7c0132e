/* Stage 03: reverse-mode autodiff, accumulation semantics, zero-grad, gradient check. */
#include "litgrad_test.h"

#include <math.h>
#include <unistd.h> /* rmdir */

#include "autodiffdemo.h"
#include "cli.h"
#include "graph.h"
#include "value.h"

LG_SUITE(stage03);

/* Run `program --figure-data DIR` on a fresh directory, check that it succeeds with
 * nothing on standard output, and return the text of DIR/file (the caller frees it);
 * the file and the directory are removed. */
static char *figure_text(const char *program, const char *file)
{
    char dir[] = "/tmp/litgrad-figure-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char args[64], path[96];
    snprintf(args, sizeof args, "--figure-data %s", dir);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    ProgramRun run;
    run_program_stdout(&run, program, args);
    cr_assert_eq(run.status, 0, "%s %s", program, args);
    cr_assert_str_eq(run.output, "", "a figure run prints nothing on standard output");
    char *text = lg_read_text(path);
    static const char *const written[] = {"fig-03-neuron-grad.dot", "fig-03-sweep.dot"};
    for (size_t i = 0; i < sizeof written / sizeof written[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, written[i]);
        remove(path);
    }
    cr_assert_eq(rmdir(dir), 0, "the figure run writes only the chapter's two figures");
    return text;
}

/* micrograd's reference values (PyTorch's, as its test file checks), to 1e-9: our
 * quotients a/c and c/a round once where micrograd's a * c**-1 rounds twice, so the last
 * bits could differ (today they do not: the program prints the very same doubles). */
#define MICROGRAD_TOLERANCE 1e-9

static Tape *planned_tape(size_t nodes)
{
    LgError err = LG_ERROR_INIT;
    Tape *tape = tape_new(nodes, &err);
    cr_assert_not_null(tape, "%s", err.message);
    cr_assert_eq(tape_require(tape, nodes, &err), LG_OK, "%s", err.message);
    return tape;
}

Test(stage03, seed_linear_example_is_exact)
{
    Tape *t = planned_tape(7);
    Value *x0 = value_new(t, 3.0), *x1 = value_new(t, -4.0);
    Value *w0 = value_new(t, 2.0), *w1 = value_new(t, 5.0);
    Value *p0 = value_mul(t, x0, w0);
    Value *p1 = value_mul(t, x1, w1);
    Value *y = value_add(t, p0, p1);
    cr_assert_eq(tape_at(t, 4), p0, "x0 * w0 is written first, as the text reads");
    value_backward(t, y);
    cr_assert_eq(y->data, -14.0);
    cr_assert_eq(x0->grad, 2.0);
    cr_assert_eq(x1->grad, 5.0);
    cr_assert_eq(w0->grad, 3.0);
    cr_assert_eq(w1->grad, -4.0);
    cr_assert_eq(y->grad, 1.0);
    tape_free(&t);
}

Test(stage03, shared_subexpression_collects_both_children)
{
    Tape *t = planned_tape(4);
    Value *x = value_new(t, 2.0);
    Value *y = value_mul(t, x, x);
    Value *three_y = value_number_mul(t, 3.0, y);
    Value *z = value_add(t, y, three_y);
    value_backward(t, z);
    cr_assert_eq(z->data, 16.0);
    cr_assert_eq(y->grad, 4.0);
    cr_assert_eq(x->grad, 16.0);
    tape_free(&t);
}

/* micrograd's checks, one node per statement in Python's left-to-right order (the
 * order of a call's arguments is unspecified in C, so no operation is an argument). */
static Value *micrograd_first(Tape *t, Value *x)
{
    Value *z = value_number_mul(t, 2.0, x);
    z = value_add_number(t, z, 2.0);
    z = value_add(t, z, x);
    Value *relu_z = value_relu(t, z);
    Value *zx = value_mul(t, z, x);
    Value *q = value_add(t, relu_z, zx);
    Value *zz = value_mul(t, z, z);
    Value *h = value_relu(t, zz);
    Value *hq = value_add(t, h, q);
    Value *qx = value_mul(t, q, x);
    return value_add(t, hq, qx);
}

static Value *micrograd_second(Tape *t, Value *a, Value *b)
{
    Value *c = value_add(t, a, b);
    Value *ab = value_mul(t, a, b);
    Value *b3 = value_pow(t, b, 3.0);
    Value *d = value_add(t, ab, b3);
    Value *r = value_add_number(t, c, 1.0);
    c = value_add(t, c, r);
    r = value_number_add(t, 1.0, c);
    Value *minus_a = value_neg(t, a);
    r = value_add(t, r, minus_a);
    c = value_add(t, c, r);
    r = value_mul_number(t, d, 2.0);
    Value *k = value_add(t, b, a);
    k = value_relu(t, k);
    r = value_add(t, r, k);
    d = value_add(t, d, r);
    r = value_number_mul(t, 3.0, d);
    k = value_sub(t, b, a);
    k = value_relu(t, k);
    r = value_add(t, r, k);
    d = value_add(t, d, r);
    Value *e = value_sub(t, c, d);
    Value *f = value_pow(t, e, 2.0);
    Value *g = value_div_number(t, f, 2.0);
    r = value_number_div(t, 10.0, f);
    return value_add(t, g, r);
}

Test(stage03, micrograd_first_check)
{
    Tape *t = planned_tape(12);
    Value *x = value_new(t, -4.0);
    Value *y = micrograd_first(t, x);
    cr_assert_eq(tape_count(t), 12, "1 leaf and 11 operations");
    value_backward(t, y);
    cr_assert_float_eq(y->data, -20.0, MICROGRAD_TOLERANCE);
    cr_assert_float_eq(x->grad, 46.0, MICROGRAD_TOLERANCE);
    tape_free(&t);
}

Test(stage03, micrograd_second_check)
{
    Tape *t = planned_tape(27);
    Value *a = value_new(t, -4.0), *b = value_new(t, 2.0);
    Value *g = micrograd_second(t, a, b);
    cr_assert_eq(tape_count(t), 27, "2 leaves and 25 operations");
    value_backward(t, g);
    cr_assert_float_eq(g->data, 24.70408163265306, MICROGRAD_TOLERANCE);
    cr_assert_float_eq(a->grad, 138.83381924198252, MICROGRAD_TOLERANCE);
    cr_assert_float_eq(b->grad, 645.5772594752186, MICROGRAD_TOLERANCE);
    tape_free(&t);
}

/* The text: backward and the gradient check allocate nothing. With the next allocation
 * armed to fail, both still succeed, and the failure is still pending afterwards: no
 * allocation was attempted in between. */
Test(stage03, backward_and_the_gradient_check_allocate_nothing)
{
    Tape *t = planned_tape(27);
    Value *a = value_new(t, -4.0), *b = value_new(t, 2.0);
    Value *g = micrograd_second(t, a, b);
    LgError err = LG_ERROR_INIT;
    GradientCheck check;
    Value *inputs[] = {a, b};
    mem_fail_at(1);
    value_backward(t, g);
    LgStatus status = value_check_gradient(t, g, inputs, 2, &check, &err);
    Tape *probe = tape_new(1, &err);
    mem_fail_at(0);
    cr_assert_null(probe, "the armed failure was consumed: something allocated");
    cr_assert_eq(err.status, LG_ERR_ALLOC);
    cr_assert_eq(status, LG_OK);
    cr_assert_leq(check.error, GRADCHECK_TOLERANCE);
    cr_assert_float_eq(b->grad, 645.5772594752186, MICROGRAD_TOLERANCE);
    tape_free(&t);
}

/* The example of the text: leaves add once per call, interior grads are recomputed. */
Test(stage03, backward_twice_adds_leaves_once_per_call_and_never_compounds)
{
    Tape *t = planned_tape(5);
    Value *a = value_new(t, 3.0), *b = value_new(t, 2.0);
    Value *c = value_add(t, a, b);
    Value *d = value_new(t, 1.0);
    Value *e = value_mul(t, c, d);
    value_backward(t, e);
    cr_assert(a->grad == 1.0 && b->grad == 1.0 && d->grad == 5.0);
    value_backward(t, e);
    cr_assert_eq(a->grad, 2.0);
    cr_assert_eq(b->grad, 2.0);
    cr_assert_eq(d->grad, 10.0);
    cr_assert_eq(c->grad, 1.0, "an interior gradient is recomputed, not compounded");
    cr_assert_eq(e->grad, 1.0);
    for (int k = 0; k < 8; k++)
        value_backward(t, e);
    cr_assert_eq(a->grad, 10.0, "ten calls, ten contributions");
    cr_assert_eq(c->grad, 1.0);
    tape_free(&t);
}

Test(stage03, zero_grad_ends_the_accumulation)
{
    Tape *t = planned_tape(3);
    Value *a = value_new(t, 3.0), *b = value_new(t, 2.0);
    Value *c = value_mul(t, a, b);
    value_backward(t, c);
    value_backward(t, c);
    cr_assert_eq(a->grad, 4.0);
    tape_zero_grad(t);
    cr_assert(a->grad == 0.0 && b->grad == 0.0 && c->grad == 0.0);
    value_backward(t, c);
    cr_assert_eq(a->grad, 2.0);
    cr_assert_eq(b->grad, 3.0);
    tape_free(&t);
}

/* A chain of a million additions: one loop, no recursion; the gradient is exact. */
Test(stage03, a_chain_of_a_million_additions_differentiates)
{
    enum { N = 1000000 };
    Tape *t = planned_tape(N + 1);
    Value *x = value_new(t, 1.0), *s = x;
    for (size_t k = 0; k < N; k++)
        s = value_add(t, s, x);
    value_backward(t, s);
    cr_assert_eq(s->data, N + 1.0);
    cr_assert_eq(x->grad, N + 1.0);
    cr_assert_eq(tape_at(t, 1)->grad, 1.0, "the deepest interior node");
    tape_free(&t);
}

/* Each rule as derived in the text, at one point, exactly (the same double
 * expression as the text's formula). */
Test(stage03, local_derivatives_are_the_derived_rules)
{
    Tape *t = planned_tape(4);
    struct { ValueOp op; double a, b, c, da, db; } rules[] = {
        {VALUE_ADD, 3, -4, 0, 1, 1},
        {VALUE_SUB, 3, -4, 0, 1, -1},
        {VALUE_MUL, 3, -4, 0, -4, 3},
        {VALUE_DIV, 3, -4, 0, 1 / -4.0, -(3 / -4.0) / -4.0},
        {VALUE_NEG, 3, 0, 0, -1, 0},
        {VALUE_POW, -2, 0, 3, 3 * pow(-2, 2), 0},
        {VALUE_POW, 0, 0, 0, 0, 0},
        {VALUE_POW, 0, 0, 0.5, INFINITY, 0},
        {VALUE_EXP, 1.5, 0, 0, exp(1.5), 0},
        {VALUE_LOG, 0.25, 0, 0, 4, 0},
        {VALUE_TANH, 0.5, 0, 0, 1 - tanh(0.5) * tanh(0.5), 0},
        {VALUE_TANH, 1000, 0, 0, 0, 0},
        {VALUE_TANH, -5000, 0, 0, 0, 0},
        {VALUE_RELU, 2, 0, 0, 1, 0},
        {VALUE_RELU, -2, 0, 0, 0, 0},
        {VALUE_RELU, 0, 0, 0, 0, 0},
        {VALUE_ADD_NUMBER, 3, 0, 7, 1, 0},
        {VALUE_SUB_NUMBER, 3, 0, 7, 1, 0},
        {VALUE_MUL_NUMBER, 3, 0, -2.5, -2.5, 0},
        {VALUE_DIV_NUMBER, 3, 0, 4, 0.25, 0},
        {VALUE_NUMBER_SUB, 3, 0, 7, -1, 0},
        {VALUE_NUMBER_DIV, 4, 0, 10, -(10 / 4.0) / 4.0, 0},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        tape_reset(t);
        Value *a = value_new(t, rules[i].a), *b = value_new(t, rules[i].b);
        int two = value_op_info(rules[i].op).operands == 2;
        Value *v = value_op(t, rules[i].op, a, two ? b : NULL, rules[i].c);
        value_backward(t, v);
        cr_assert_eq(a->grad, rules[i].da, "rule %zu (%s at %g): d/da = %.17g, want %.17g",
                     i, value_op_info(rules[i].op).name, rules[i].a, a->grad, rules[i].da);
        cr_assert_eq(b->grad, rules[i].db, "rule %zu: d/db = %.17g", i, b->grad);
    }
    tape_free(&t);
}

Test(stage03, a_value_used_twice_in_one_node_gets_both_contributions)
{
    Tape *t = planned_tape(4);
    Value *x = value_new(t, 3.0);
    value_backward(t, value_mul(t, x, x));
    cr_assert_eq(x->grad, 6.0);
    tape_zero_grad(t);
    value_backward(t, value_div(t, x, x));
    cr_assert_eq(x->grad, 0.0, "x/x: 1/x and -1/x cancel exactly");
    tape_zero_grad(t);
    value_backward(t, value_add(t, x, x));
    cr_assert_eq(x->grad, 2.0);
    tape_free(&t);
}

/* The text's neighbouring branch: a = 0, log(a) beside y = a + 1. */
Test(stage03, a_branch_the_output_does_not_use_passes_nothing)
{
    Tape *t = planned_tape(3);
    Value *a = value_new(t, 0.0);
    Value *l = value_log(t, a);
    Value *y = value_add_number(t, a, 1.0);
    value_backward(t, y);
    cr_assert_eq(a->grad, 1.0, "not 1 + 0 * (1/0) = NaN");
    cr_assert_eq(l->grad, 0.0);
    tape_free(&t);
}

Test(stage03, backward_from_the_middle_leaves_later_nodes_alone)
{
    Tape *t = planned_tape(4);
    Value *a = value_new(t, 2.0);
    Value *b = value_mul_number(t, a, 3.0);
    Value *c = value_exp(t, b);
    c->grad = 42.0;
    value_backward(t, b);
    cr_assert_eq(a->grad, 3.0);
    cr_assert_eq(c->grad, 42.0, "a node above the output is not touched");
    value_backward(t, a);
    cr_assert_eq(a->grad, 4.0, "backward from a leaf adds d(a)/d(a) = 1");
    tape_free(&t);
}

/* Parameters on their own tape, activations on a graph tape reset per step. */
Test(stage03, gradients_flow_into_parameters_on_another_tape)
{
    Tape *params = planned_tape(2), *graph = planned_tape(8);
    Value *w = value_new(params, 2.0), *bias = value_new(params, 0.5);
    for (int step = 0; step < 2; step++) {
        tape_zero_grad(params);
        tape_reset(graph);
        Value *x = value_new(graph, 3.0);
        Value *xw = value_mul(graph, x, w);
        Value *n = value_add(graph, xw, bias);
        Value *y = value_tanh(graph, n);
        value_backward(graph, y);
        double dy = 1.0 - tanh(6.5) * tanh(6.5);
        cr_assert_eq(w->grad, dy * 3.0, "step %d", step);
        cr_assert_eq(bias->grad, dy);
        cr_assert_eq(x->grad, dy * 2.0);
        value_backward(graph, y);
        cr_assert_eq(w->grad, 2 * (dy * 3.0), "backward twice: parameters add twice");
        cr_assert_eq(y->grad, 1.0, "nothing on the graph tape compounds");
    }
    cr_assert_eq(tape_count(params), 2);
    tape_free(&params);
    tape_free(&graph);
}

Test(stage03, backward_from_a_value_on_another_tape_is_a_programmer_error,
     .signal = SIGABRT, .init = cr_redirect_stderr)
{
    Tape *t = planned_tape(1), *other = planned_tape(1);
    value_new(t, 1.0);
    Value *x = value_new(other, 2.0);
    value_backward(t, x);
}

/* The gradient check on every operation at ordinary and awkward points (the text's
 * table and more). The tolerance is the text's, GRADCHECK_TOLERANCE. */
Test(stage03, every_operation_passes_the_gradient_check)
{
    Tape *t = planned_tape(4);
    static const struct { ValueOp op; double x, y, c; } points[] = {
        {VALUE_ADD, 3, -4, 0},     {VALUE_ADD, -0.5, 1e3, 0},  {VALUE_SUB, 3, -4, 0},
        {VALUE_SUB, 1000, 999.5, 0}, {VALUE_MUL, 3, -4, 0},    {VALUE_MUL, 0, 7, 0},
        {VALUE_MUL, 0.01, 1e3, 0}, {VALUE_DIV, 3, -4, 0},      {VALUE_DIV, 1, 0.01, 0},
        {VALUE_DIV, -2, -0.01, 0}, {VALUE_DIV, 1e4, 3, 0},     {VALUE_NEG, 3, 0, 0},
        {VALUE_NEG, 0, 0, 0},      {VALUE_POW, -2, 0, 3},      {VALUE_POW, 0, 0, 3},
        {VALUE_POW, 0.01, 0, 0.5}, {VALUE_POW, 5, 0, 0.5},     {VALUE_POW, -0.25, 0, -1},
        {VALUE_POW, 3, 0, 0},      {VALUE_POW, 1.5, 0, 2.5},   {VALUE_EXP, 0, 0, 0},
        {VALUE_EXP, 30, 0, 0},     {VALUE_EXP, -20, 0, 0},     {VALUE_LOG, 1, 0, 0},
        {VALUE_LOG, 0.01, 0, 0},   {VALUE_LOG, 1e4, 0, 0},     {VALUE_TANH, 0, 0, 0},
        {VALUE_TANH, 0.5, 0, 0},   {VALUE_TANH, -3, 0, 0},     {VALUE_TANH, 20, 0, 0},
        {VALUE_TANH, -1000, 0, 0}, {VALUE_RELU, 2, 0, 0},      {VALUE_RELU, -2, 0, 0},
        {VALUE_RELU, 0.01, 0, 0},  {VALUE_RELU, -0.01, 0, 0},  {VALUE_ADD_NUMBER, -4, 0, 3},
        {VALUE_SUB_NUMBER, -4, 0, 3}, {VALUE_MUL_NUMBER, 3, 0, -2.5},
        {VALUE_MUL_NUMBER, 1e3, 0, 1e-3}, {VALUE_DIV_NUMBER, 3, 0, 0.01},
        {VALUE_DIV_NUMBER, -7, 0, 3}, {VALUE_NUMBER_SUB, 3, 0, 10},
        {VALUE_NUMBER_DIV, 0.01, 0, 10}, {VALUE_NUMBER_DIV, -3, 0, 10},
    };
    LgError err = LG_ERROR_INIT;
    int covered[64] = {0};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        tape_reset(t);
        Value *a = value_new(t, points[i].x), *b = value_new(t, points[i].y);
        int two = value_op_info(points[i].op).operands == 2;
        Value *v = value_op(t, points[i].op, a, two ? b : NULL, points[i].c);
        Value *inputs[] = {a, b};
        GradientCheck check;
        cr_assert_eq(value_check_gradient(t, v, inputs, two ? 2 : 1, &check, &err), LG_OK,
                     "point %zu: %s", i, err.message);
        cr_assert_leq(check.error, GRADCHECK_TOLERANCE,
                      "point %zu (%s at %g, %g): backward %.17g, central %.17g", i,
                      value_op_info(points[i].op).name, points[i].x, points[i].y,
                      check.analytic, check.numeric);
        covered[points[i].op] = 1;
    }
    for (int op = VALUE_ADD; op <= VALUE_NUMBER_DIV; op++)
        cr_assert(covered[op], "operation %s is not checked", value_op_info(op).name);
    tape_free(&t);
}

Test(stage03, composite_examples_pass_the_gradient_check_and_restore_data)
{
    Tape *t = planned_tape(27);
    LgError err = LG_ERROR_INIT;
    Value *a = value_new(t, -4.0), *b = value_new(t, 2.0);
    Value *g = micrograd_second(t, a, b);
    double before = g->data;
    Value *inputs[] = {a, b};
    GradientCheck check;
    cr_assert_eq(value_check_gradient(t, g, inputs, 2, &check, &err), LG_OK);
    cr_assert_leq(check.error, GRADCHECK_TOLERANCE);
    cr_assert_eq(check.worst, 1, "b has the larger error");
    cr_assert_eq(g->data, before, "replays restore every number bit for bit");
    cr_assert_eq(a->data, -4.0);
    cr_assert_float_eq(b->grad, 645.5772594752186, MICROGRAD_TOLERANCE,
                       "the inputs' grads hold the gradient");
    tape_free(&t);
}

/* The text: at the kink the central difference is exactly 1/2, the rule says 0. */
Test(stage03, relu_kink_is_where_the_check_does_not_apply)
{
    Tape *t = planned_tape(2);
    LgError err = LG_ERROR_INIT;
    Value *x = value_new(t, 0.0);
    Value *r = value_relu(t, x);
    GradientCheck check;
    cr_assert_eq(value_check_gradient(t, r, &x, 1, &check, &err), LG_OK);
    cr_assert_eq(check.analytic, 0.0, "relu'(0) = 0, as in PyTorch");
    cr_assert_eq(check.numeric, 0.5);
    cr_assert_eq(check.error, 0.5);
    tape_free(&t);
}

Test(stage03, gradient_check_refuses_what_it_cannot_compare)
{
    Tape *t = planned_tape(3);
    LgError err = LG_ERROR_INIT;
    GradientCheck check;
    Value *x = value_new(t, 0.0);
    Value *l = value_log(t, x);
    cr_assert_eq(value_check_gradient(t, l, &x, 1, &check, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "gradient check: the output must be finite: got -inf");
    tape_reset(t);
    x = value_new(t, 0.0);
    Value *s = value_pow(t, x, 0.5);
    cr_assert_eq(value_check_gradient(t, s, &x, 1, &check, &err), LG_ERR_NONFINITE);
    cr_assert(strstr(err.message, "d/d(input 0) is not finite: backward inf"), "%s",
              err.message);
    tape_reset(t);
    x = value_new(t, 1.0);
    Value *e = value_exp(t, x);
    x->data = NAN;
    cr_assert_eq(value_check_gradient(t, e, &x, 1, &check, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "gradient check: input 0 must be finite: got nan");
    tape_free(&t);
}

Test(stage03, program_prints_the_worked_examples_and_the_table)
{
    ProgramRun run;
    run_program(&run, "stage-03", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    static const char *const lines[] = {
        "  y = -14, dy/dx = (2, 5), dy/dw = (3, -4)\n",
        "  z = 16, dz/dy = 4, dz/dx = 16\n",
        "  y = -20, dy/dx = 46\n",
        "  g = 24.704081632653061, dg/da = 138.83381924198252, dg/db = 645.57725947521863\n",
        "  after backward again:      a 2, b 2, d 10; interior c 1, e 1\n",
        "  s = 1000001, ds/dx = 1000001, 1000001 nodes on the tape\n",
        "  28 of 28 within the tolerance 1e-06\n",
        "  relu at its kink 0: backward 0 (the convention relu'(0) = 0), central 0.5:\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        cr_assert(strstr(run.output, lines[i]), "missing: %s", lines[i]);
    cr_assert_null(strstr(run.output, "FAIL"));
    lg_expect_short_lines(run.output);
}

Test(stage03, program_help_and_chain)
{
    ProgramRun run;
    run_program(&run, "stage-03", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "usage: stage-03 [--chain N] [--figure-data DIR]"), "%s",
              run.output);
    run_program(&run, "stage-03", "--chain 3");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "  s = 4, ds/dx = 4, 4 nodes on the tape\n"), "%s",
              run.output);
}

/* The plan limit (PLAN_NODES_MAX = 2^24 nodes on all the run's tapes) is --chain's range:
 * the longest chain within it passes the check and reaches its first allocation, which
 * LITGRAD_FAIL_ALLOC=1 fails; one more addition is refused at the door, exit 2, one line
 * naming the range and the length, nothing on stdout. A caller other than the program
 * meets the plan limit itself: exit 1, the rule and the numbers. */
Test(stage03, program_chain_within_the_plan_limit_runs_and_one_more_is_refused,
     .init = cr_redirect_stderr)
{
    static LgRun run;
    cr_assert_eq(PLAN_NODES_MAX, (size_t)16777216);
    cr_assert_eq(AUTODIFFDEMO_CHAIN_MAX + 1 + AUTODIFFDEMO_EXAMPLE_NODES, PLAN_NODES_MAX);
    lg_run(&run, "LITGRAD_FAIL_ALLOC=1 timeout 20", "stage-03", "--chain 16777151");
    cr_assert_eq(run.status, 1, "%s", run.err);
    cr_assert(strncmp(run.err, "stage-03: error: out of memory: ", 32) == 0, "%s",
              run.err);
    cr_assert_str_eq(run.out, "");
    static const char *const longer[2] = {"16777152", "134217727"};
    for (int k = 0; k < 2; k++) {
        char args[32], want[160];
        snprintf(args, sizeof args, "--chain %s", longer[k]);
        snprintf(want, sizeof want, "stage-03: error: --chain must be an integer in "
                 "[1, 16777151]: got '%s'; try 'stage-03 --help'\n", longer[k]);
        lg_run(&run, "LITGRAD_FAIL_ALLOC=1 timeout 20", "stage-03", args);
        cr_assert_eq(run.status, 2, "%s", run.err);
        cr_assert_str_eq(run.err, want);
        cr_assert_str_eq(run.out, "");
    }
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(autodiffdemo_examples(AUTODIFFDEMO_CHAIN_MAX + 1, &err), CLI_EXIT_RULE);
    cr_assert_str_eq(err.message, "plan limit exceeded: the plan needs 16777217 nodes "
                                  "(0.8 GB), limit 16777216");
}

/* Figure 3.1: the node titled p0 is x0 * w0 (data 6), whatever order the compiler gives
 * to the arguments of a call -- the program builds one node per statement. */
Test(stage03, figure_data_draws_p0_as_x0_times_w0)
{
    char *dot = figure_text("stage-03", "fig-03-neuron-grad.dot");
    cr_assert(strstr(dot, "  v5 [label=\"p0 = x0 * w0 | data 6 | grad "), "%s", dot);
    cr_assert(strstr(dot, "  v6 [label=\"p1 = x1 * w1 | data -20 | grad "), "%s", dot);
    cr_assert(strstr(dot, "  v0 -> v5;\n  v1 -> v5;\n"), "%s", dot);
    free(dot);
}

/* The program's second figure is the sweep of the same neuron, drawn by
 * graph_write_sweep_dot: ten rows and nine contributions in five steps. */
Test(stage03, figure_data_draws_the_sweep_of_the_neuron)
{
    char *dot = figure_text("stage-03", "fig-03-sweep.dot");
    cr_assert(strstr(dot, "<TD WIDTH=\"14\" HEIGHT=\"18\">9</TD>"
                          "<TD WIDTH=\"80\" HEIGHT=\"18\" ALIGN=\"LEFT\">o = tanh(n)</TD>"
                          "<TD WIDTH=\"86\" HEIGHT=\"18\" ALIGN=\"LEFT\">grad 1</TD>"),
              "%s", dot);
    cr_assert(strstr(dot, "  v9_1a -> v8_1a;\n"), "%s", dot);
    cr_assert(strstr(dot, "  v5_5b -> v1_5b;\n"), "%s", dot);
    cr_assert(strstr(dot, "  step5 [shape=plaintext"), "%s", dot);
    cr_assert_null(strstr(dot, "step6"), "five steps: %s", dot);
    free(dot);
}

/* Usage errors and unusable figure directories: exit 2, one line naming the option or
 * the directory, and nothing at all on standard output. */
Test(stage03, program_refuses_bad_command_lines_alike)
{
    static const LgBadLine lines[] = {
        {"--chain", "option '--chain' needs a value"},
        {"--chain 0", "--chain must be an integer in [1, 16777151]: got '0'"},
        {"--chain 134217728", "got '134217728'"},
        {"--chain 99999999999999999999", "got '99999999999999999999'"},
        {"--chain 1x", "got '1x'"},
        {"--chain=", "--chain must be an integer"},
        {"--chain ''", "--chain must be an integer"},
        {"--chain -3", "got '-3'"},
        {"--chain 0x10", "got '0x10'"},
        {"--chain 1e3", "got '1e3'"},
        {"--chain 3 --chain 3", "option '--chain' is given twice"},
        {"--chain=3 --chain=4", "option '--chain' is given twice"},
        {"--figure-data", "option '--figure-data' needs a value"},
        {"--figure-data ''", "--figure-data must name a directory: got ''"},
        {"--figure-data {LONG}", "--figure-data: a directory name has 5000 bytes"},
        {"--figure-data /nonexistent/dir", "cannot use /nonexistent/dir"},
        {"--figure-data {FILE}", "is not a directory"},
        {"--figure-data {FIFO}", "is not a directory"},
        {"--figure-data /dev/null", "/dev/null is not a directory"},
        {"--figure-data /tmp --chain 3",
         "option '--chain' does not apply with '--figure-data'"},
        {"--chain 3 --figure-data=/tmp",
         "option '--chain' does not apply with '--figure-data'"},
        {"--figure-data /tmp --figure-data /tmp", "option '--figure-data' is given twice"},
        {"extra", "unexpected argument 'extra'"},
        {"{DIR}", "unexpected argument '/tmp'"},
        {"/dev/null", "unexpected argument '/dev/null'"},
        {"-c3", "unknown option '-c'"},
    };
    size_t n = lg_expect_usage_errors("stage-03", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
}

/* Contracts before computation: with too little memory for the chain's tape the program
 * fails before its first line, not after half of its examples. The chain, 16 million
 * additions, is within the plan limit (2^24 nodes) and takes 768 MB; allocations above
 * 512 MB are made to fail: by a virtual-memory limit, or under AddressSanitizer (whose
 * shadow needs far more address space than any limit) by its own allocation limit. */
Test(stage03, too_little_memory_fails_before_anything_is_printed)
{
#if defined(LG_ASAN)
    const char *limit = "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}"
                        "allocator_may_return_null=1:max_allocation_size_mb=512\"";
#else
    const char *limit = "ulimit -v 524288 &&";
#endif
    char command[512];
    snprintf(command, sizeof command, "%s %s/stage-03 --chain 16000000 2>&1", limit,
             lg_bin_dir_word());
    FILE *pipe = popen(command, "r");
    cr_assert_not_null(pipe);
    char out[256];
    size_t used = fread(out, 1, sizeof out - 1, pipe);
    out[used] = '\0';
    int raw = pclose(pipe);
    cr_assert(WIFEXITED(raw) && WEXITSTATUS(raw) == 1, "%s: status %d", command, raw);
    cr_assert(strstr(out, "stage-03: error: out of memory: ") != NULL, "%s", out);
    cr_assert_null(strstr(out, "Stage 03:"), "printed before failing: %s", out);
}

/* The drawing of the sweep (Stage 03, "Drawing the sweep") on the chapter's neuron: boxes
 * in tape order with their gradients, and the contributions step by step from the output
 * down -- o to n, n to s and b, s to p0 and p1, p1 to x1 and w1, p0 to x0 and w0. */
Test(stage03, the_sweep_is_drawn_step_by_step_from_the_output_down)
{
    static const char *const names[] = {"x0", "w0", "x1", "w1", "b", "p0", "p1", "s", "n", "o"};
    Tape *t = lg_new_tape(10);
    Value *x0 = value_new(t, 3.0), *w0 = value_new(t, 2.0);
    Value *x1 = value_new(t, -4.0), *w1 = value_new(t, 5.0);
    Value *b = value_new(t, 14.5);
    Value *p0 = value_mul(t, x0, w0);
    Value *p1 = value_mul(t, x1, w1);
    Value *s = value_add(t, p0, p1);
    Value *n = value_add(t, s, b);
    Value *o = value_tanh(t, n);
    value_backward(t, o);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    cr_assert_not_null(out);
    graph_write_sweep_dot(out, t, o, names);
    fclose(out);
    /* a row: position, title = form, gradient, in cells as wide as the widest of each
     * column at 6 points a character and 8 more: "9", "p0 = x0 * w0", "grad 0.786448" */
    static const char *const rows[] = {
        ">9</TD><TD WIDTH=\"80\" HEIGHT=\"18\" ALIGN=\"LEFT\">o = tanh(n)</TD>"
        "<TD WIDTH=\"86\" HEIGHT=\"18\" ALIGN=\"LEFT\">grad 1</TD>",
        "<TD WIDTH=\"14\" HEIGHT=\"18\">0</TD><TD WIDTH=\"80\" HEIGHT=\"18\" "
        "ALIGN=\"LEFT\">x0</TD><TD WIDTH=\"86\" HEIGHT=\"18\" "
        "ALIGN=\"LEFT\">grad 1.5729</TD>",
        "  v9 [shape=plaintext, style=solid, pos=\"0,-180!\"",
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        cr_assert(strstr(text, rows[i]), "%s missing: %s", rows[i], text);
    /* vI_KL -> vP_KL: at step K, node I passes to its parent P in lane L (its operand) */
    static const char *const arrows[] = {
        "  v9_1a -> v8_1a;\n", "  v8_2a -> v7_2a;\n", "  v8_2b -> v4_2b;\n",
        "  v7_3a -> v5_3a;\n", "  v7_3b -> v6_3b;\n", "  v6_4a -> v2_4a;\n",
        "  v6_4b -> v3_4b;\n", "  v5_5a -> v0_5a;\n", "  v5_5b -> v1_5b;\n",
    };
    size_t count = 0;
    for (const char *line = strstr(text, "\n  v"); line != NULL;
         line = strstr(line + 1, "\n  v")) {
        const char *end = strchr(line + 1, '\n'), *arrow = strstr(line, " -> ");
        count += arrow != NULL && arrow < end;
    }
    cr_assert_eq(count, sizeof arrows / sizeof arrows[0], "one arrow per contribution: %s", text);
    for (size_t i = 0; i < sizeof arrows / sizeof arrows[0]; i++)
        cr_assert(strstr(text, arrows[i]), "%s missing: %s", arrows[i], text);
    free(text);
    tape_free(&t);
}

/* A node whose gradient is 0 takes no step and passes nothing on, as in value_backward. */
Test(stage03, the_sweep_drawing_skips_what_backward_skips)
{
    Tape *t = lg_new_tape(4);
    Value *a = value_new(t, 0.0);
    Value *l = value_log(t, a);
    Value *y = value_add_number(t, a, 1.0);
    value_backward(t, y);
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    graph_write_sweep_dot(out, t, y, NULL);
    fclose(out);
    cr_assert(strstr(text, "  v2_1a -> v0_1a;\n"), "%s", text);
    cr_assert_null(strstr(text, "v1_"), "the log beside the output passes nothing: %s",
                   text);
    cr_assert_null(strstr(text, "step2"), "one step only: %s", text);
    (void)l;
    free(text);
    tape_free(&t);
}

/* backward clears only what an earlier backward on the tape wrote (the tape's mark): after
 * a first backward, a graph grown further and differentiated from a later output gets
 * exact interior gradients; after tape_reset the rebuilt graph does too, and after
 * tape_zero_grad nothing compounds. Each case is compared with a fresh tape. */
Test(stage03, interior_gradients_are_exact_after_growth_reset_and_zero_grad)
{
    Tape *t = planned_tape(16), *fresh = planned_tape(16);
    Value *a = value_new(t, 1.5), *b = value_mul(t, a, a), *c = value_tanh(t, b);
    value_backward(t, c);
    Value *d = value_mul_number(t, b, 3.0), *e = value_add(t, d, c);
    value_backward(t, e);
    Value *fa = value_new(fresh, 1.5), *fb = value_mul(fresh, fa, fa), *fc = value_tanh(fresh, fb);
    Value *fd = value_mul_number(fresh, fb, 3.0), *fe = value_add(fresh, fd, fc);
    value_backward(fresh, fe);
    cr_assert_eq(b->grad, fb->grad, "b: not compounded with the first pass");
    cr_assert_eq(c->grad, fc->grad);
    cr_assert_eq(d->grad, fd->grad);
    cr_assert_eq(e->grad, 1.0);
    tape_reset(t);
    a = value_new(t, 1.5);
    b = value_mul(t, a, a);
    c = value_tanh(t, b);
    value_backward(t, c);
    value_backward(t, c);
    tape_reset(fresh);
    fa = value_new(fresh, 1.5);
    fb = value_mul(fresh, fa, fa);
    fc = value_tanh(fresh, fb);
    value_backward(fresh, fc);
    cr_assert_eq(b->grad, fb->grad, "interior: recomputed, not doubled");
    cr_assert_eq(a->grad, 2.0 * fa->grad, "leaf: added twice");
    tape_zero_grad(t);
    value_backward(t, c);
    cr_assert_eq(b->grad, fb->grad);
    cr_assert_eq(a->grad, fa->grad);
    tape_free(&t);
    tape_free(&fresh);
}

/* A FIFO or a symbolic link at either figure's name is refused when the command line is
 * read (the row lists the names), before the neuron is built: exit 2, nothing written,
 * nothing left behind. */
/* The two figures are one output, all or nothing: under a file-size limit of 1024 bytes
 * the neuron's figure fits and the sweep's does not. Whether the write fails with EFBIG
 * or SIGXFSZ ends the run, the neuron's figure, already in place, is removed too. */
Test(stage03, a_figure_run_stopped_by_the_file_size_limit_leaves_neither_figure)
{
    lg_expect_group_stopped_by_size_limit("stage-03", "--figure-data", 1024,
                                          "fig-03-sweep.dot");
}

Test(stage03, a_fifo_at_a_figure_name_is_refused_before_anything)
{
    size_t runs = lg_expect_outputs_refused("stage-03", "--figure-data",
                                            AUTODIFFDEMO_FIGURE_FILES, "");
    cr_assert_eq(runs, 3);
}
