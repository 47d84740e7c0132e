/* Stage 05: closed forms, three independent counts, budgets, overflow, the walk. */
#include "litgrad_test.h"

#include <stdint.h>

#include "cost.h"
#include "linear.h"
#include "matrix.h"
#include "value.h"

LG_SUITE(stage05);

static Matrix *leaves(Tape *tape, size_t rows, size_t cols)
{
    LgError err = LG_ERROR_INIT;
    Matrix *m = matrix_new_leaves(tape, (Shape){rows, cols}, NULL, "m", &err);
    cr_assert_not_null(m, "%s", err.message);
    for (size_t k = 0; k < rows * cols; k++)
        m->values[k]->data = (double)((int)(k % 5) - 2) / 4;
    return m;
}

static size_t planned_linear(size_t batch, size_t in, size_t out, int bias)
{
    LgError err = LG_ERROR_INIT;
    size_t nodes = 0;
    cr_assert_eq(cost_linear_nodes(batch, in, out, bias, &nodes, &err), LG_OK, "%s",
                 err.message);
    return nodes;
}

static CostReach walk(const Tape *tape, const Matrix *y)
{
    LgError err = LG_ERROR_INIT;
    CostReach reach = {SIZE_MAX, SIZE_MAX};
    cr_assert_eq(cost_count_reachable(tape, y->values, y->rows * y->cols, &reach, &err), LG_OK,
                 "%s", err.message);
    return reach;
}

/* The text's claim: closed form = nodes written on the graph tape = the counting hook =
 * operation nodes reached from the outputs, over a grid of (T, C_in, C_out, bias). */
Test(stage05, the_closed_form_equals_three_independent_counts_over_a_grid)
{
    LgError err = LG_ERROR_INIT;
    static const size_t ts[] = {1, 2, 3, 5}, ins[] = {1, 2, 3, 7}, outs[] = {1, 2, 4};
    Tape *params = lg_new_tape(128), *graph = lg_new_tape(512);
    size_t cases = 0;
    for (size_t a = 0; a < 4; a++)
        for (size_t c = 0; c < 4; c++)
            for (size_t d = 0; d < 3; d++)
                for (int bias = 0; bias <= 1; bias++) {
                    size_t T = ts[a], in = ins[c], out = outs[d];
                    tape_reset(params);
                    tape_reset(graph);
                    Matrix *x = leaves(params, T, in), *w = leaves(params, out, in);
                    Vector *b = bias ? matrix_new_vector_leaves(params, out, NULL, "b", &err) : NULL;
                    size_t planned = planned_linear(T, in, out, bias);
                    cr_assert_eq(planned, T * out * (2 * in - 1 + (size_t)bias));
                    cr_assert_eq(planned, linear_node_count((Shape){T, in}, (Shape){out, in},
                                                            bias), "Stage 04's count");
                    size_t hook = value_nodes_written();
                    Matrix *y = cost_linear_forward(graph, x, w, b, planned, &err);
                    cr_assert_not_null(y, "%s", err.message);
                    hook = value_nodes_written() - hook;
                    CostReach reach = walk(graph, y);
                    cr_assert_eq(tape_count(graph), planned, "tape: T=%zu C_in=%zu C_out=%zu "
                                 "bias=%d", T, in, out, bias);
                    cr_assert_eq(hook, planned, "hook: T=%zu C_in=%zu C_out=%zu bias=%d",
                                 T, in, out, bias);
                    cr_assert_eq(reach.operations, planned, "walk: T=%zu C_in=%zu C_out=%zu "
                                 "bias=%d", T, in, out, bias);
                    cr_assert_eq(reach.leaves, 0, "x, W and b live on another tape");
                    matrix_free(&y);
                    matrix_free_vector(&b);
                    matrix_free(&w);
                    matrix_free(&x);
                    cases++;
                }
    cr_assert_eq(cases, 96);
    tape_free(&graph);
    tape_free(&params);
}

Test(stage05, the_relu_closed_form_equals_its_counts)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(64), *graph = lg_new_tape(64);
    for (size_t T = 1; T <= 4; T++)
        for (size_t C = 1; C <= 5; C++) {
            tape_reset(params);
            tape_reset(graph);
            Matrix *h = leaves(params, T, C);
            size_t planned = 0, hook = value_nodes_written();
            cr_assert_eq(cost_relu_nodes(T, C, &planned, &err), LG_OK);
            cr_assert_eq(planned, T * C);
            Matrix *r = matrix_relu(graph, h, &err);
            cr_assert_not_null(r, "%s", err.message);
            cr_assert_eq(value_nodes_written() - hook, planned);
            cr_assert_eq(tape_count(graph), planned);
            cr_assert_eq(walk(graph, r).operations, planned);
            matrix_free(&r);
            matrix_free(&h);
        }
    tape_free(&graph);
    tape_free(&params);
}

/* The seed's 3 -> 4 -> 2 network through the library's cost_mlp_forward, the function the
 * program runs too (Stage 07 will do the same for any depth). */
typedef struct Mlp {
    CostMlpPlan plan;
    size_t hook, walk, blocks_left;
    Shape output;
    LgStatus status;
} Mlp;

static Mlp run_mlp(size_t T, int bias, size_t limit, LgError *err)
{
    Mlp m = {{0, 0, 0, 0}, 0, 0, 0, {0, 0}, LG_OK};
    Tape *params = lg_new_tape(64), *graph = lg_new_tape(256);
    Matrix *x = leaves(params, T, 3), *w1 = leaves(params, 4, 3), *w2 = leaves(params, 2, 4);
    Vector *b1 = bias ? matrix_new_vector_leaves(params, 4, NULL, "b1", err) : NULL;
    Vector *b2 = bias ? matrix_new_vector_leaves(params, 2, NULL, "b2", err) : NULL;
    size_t blocks = mem_live_blocks(), hook = value_nodes_written();
    Matrix *y = cost_mlp_forward(graph, x, w1, b1, w2, b2, limit, &m.plan, err);
    m.hook = value_nodes_written() - hook;
    if (y != NULL) {
        cr_assert_eq(mem_live_blocks(), blocks + 2, "y and nothing else is left: h, relu(h)"
                     " are freed");
        m.walk = walk(graph, y).operations;
        m.output = matrix_shape(y);
        matrix_free(&y);
    } else {
        m.status = err->status;
        m.blocks_left = mem_live_blocks() - blocks;
    }
    cr_assert_eq(tape_count(graph), m.hook, "every node written went on the graph tape");
    matrix_free_vector(&b2);
    matrix_free_vector(&b1);
    matrix_free(&w2);
    matrix_free(&w1);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
    return m;
}

Test(stage05, the_seed_network_costs_40_8_28_and_76_exactly)
{
    LgError err = LG_ERROR_INIT;
    Mlp m = run_mlp(2, 0, SIZE_MAX, &err);
    cr_assert_eq(m.status, LG_OK, "%s", err.message);
    cr_assert(m.plan.fc1 == 40 && m.plan.relu == 8 && m.plan.fc2 == 28 && m.plan.total == 76);
    cr_assert_eq(m.hook, 76);
    cr_assert_eq(m.walk, 76, "counted from the output");
    cr_assert(m.output.rows == 2 && m.output.cols == 2);
    Mlp one = run_mlp(1, 0, SIZE_MAX, &err);
    cr_assert(one.plan.fc1 == 20 && one.plan.relu == 4 && one.plan.fc2 == 14 &&
              one.plan.total == 38);
    cr_assert(one.hook == 38 && one.walk == 38);
    Mlp with_bias = run_mlp(2, 1, SIZE_MAX, &err);
    cr_assert_eq(with_bias.plan.total - m.plan.total, 12, "Delta G = T (4 + 2) = 12");
    cr_assert(with_bias.hook == 88 && with_bias.walk == 88);
}

/* The seed: a node budget of 37 fails after 0 scalar operations; 38 succeeds with exactly
 * 38 and output shape (1, 2). The library's code is exercised, not a copy of it. */
Test(stage05, a_budget_one_short_does_nothing_and_an_exact_budget_is_used_exactly)
{
    LgError err = LG_ERROR_INIT;
    Mlp short_by_one = run_mlp(1, 0, 37, &err);
    cr_assert_eq(short_by_one.status, LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "node budget exceeded: need 38, limit 37");
    cr_assert_eq(short_by_one.hook, 0, "0 scalar operations");
    cr_assert_eq(short_by_one.blocks_left, 0, "nothing allocated");
    cr_assert_eq(short_by_one.plan.total, 38, "the refused plan is reported");
    Mlp exact = run_mlp(1, 0, 38, &err);
    cr_assert_eq(exact.status, LG_OK, "%s", err.message);
    cr_assert_eq(exact.hook, 38);
    cr_assert(exact.output.rows == 1 && exact.output.cols == 2);
}

/* Contracts before computation: a refused budget is found before the first allocation is
 * even attempted (an armed mem_fail_at(1) does not fire), and a tape one node short, a
 * shape mismatch and every allocation failure leave no node and no block. */
Test(stage05, the_network_forward_refuses_before_allocating_anything)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(64), *graph = lg_new_tape(38), *short_tape = lg_new_tape(37);
    Matrix *x = leaves(params, 1, 3), *w1 = leaves(params, 4, 3), *w2 = leaves(params, 2, 4);
    size_t blocks = mem_live_blocks(), hook = value_nodes_written();
    CostMlpPlan plan = {0, 0, 0, 0};
    mem_fail_at(1);
    cr_assert_null(cost_mlp_forward(graph, x, w1, NULL, w2, NULL, 37, &plan, &err));
    mem_fail_at(0);
    cr_assert_eq(err.status, LG_ERR_BUDGET, "no allocation before the budget: %s", err.message);
    cr_assert_eq(mem_live_blocks(), blocks);
    cr_assert_eq(value_nodes_written(), hook);
    cr_assert_eq(tape_count(graph), 0);
    cr_assert(plan.fc1 == 20 && plan.relu == 4 && plan.fc2 == 14 && plan.total == 38);
    cr_assert_null(cost_mlp_forward(short_tape, x, w1, NULL, w2, NULL, 38, &plan, &err));
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 38 nodes, 37 free of 37");
    cr_assert_null(cost_mlp_forward(graph, x, w1, NULL, w1, NULL, 38, &plan, &err));
    cr_assert_str_eq(err.message, "shape mismatch: x has 4 columns, W expects 3");
    cr_assert_eq(mem_live_blocks(), blocks);
    cr_assert_eq(value_nodes_written(), hook);
    size_t k = 1;
    for (;; k++) {
        mem_fail_at(k);
        Matrix *y = cost_mlp_forward(graph, x, w1, NULL, w2, NULL, 38, &plan, &err);
        mem_fail_at(0);
        if (y != NULL) {
            cr_assert_eq(value_nodes_written() - hook, 38);
            matrix_free(&y);
            break;
        }
        cr_assert_eq(err.status, LG_ERR_ALLOC);
        cr_assert_eq(mem_live_blocks(), blocks, "allocation %zu", k);
        cr_assert_eq(value_nodes_written(), hook, "allocation %zu", k);
    }
    cr_assert_eq(k, 7, "three matrices of two blocks each");
    matrix_free(&w2);
    matrix_free(&w1);
    matrix_free(&x);
    tape_free(&short_tape);
    tape_free(&graph);
    tape_free(&params);
}

/* cost_mlp_plan from bare sizes: the seed's numbers, and its errors. */
Test(stage05, the_network_plan_is_three_closed_forms)
{
    LgError err = LG_ERROR_INIT;
    CostMlpPlan plan = {1, 2, 3, 4};
    cr_assert_eq(cost_mlp_plan(2, 3, 4, 2, 1, &plan, &err), LG_OK);
    cr_assert(plan.fc1 == 48 && plan.relu == 8 && plan.fc2 == 32 && plan.total == 88);
    cr_assert_eq(cost_mlp_plan(2, 3, 0, 2, 0, &plan, &err), LG_ERR_SHAPE);
    cr_assert_eq(cost_mlp_plan(1, 1, SIZE_MAX / 2, 1, 0, &plan, &err), LG_ERR_OVERFLOW,
                 "each count fits, their sum does not");
    cr_assert_str_eq(err.message, "node count overflows: 18446744073709551614 + "
                                  "18446744073709551613");
    cr_assert_eq(plan.total, 88, "*plan written only on success");
}

Test(stage05, the_budgeted_linear_refuses_before_the_first_node)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(32), *graph = lg_new_tape(64);
    Matrix *x = leaves(params, 1, 3), *w = leaves(params, 4, 3);
    size_t blocks = mem_live_blocks(), hook = value_nodes_written();
    cr_assert_null(cost_linear_forward(graph, x, w, NULL, 19, &err));
    cr_assert_eq(err.status, LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "node budget exceeded: need 20, limit 19");
    cr_assert_eq(value_nodes_written(), hook, "0 operations");
    cr_assert_eq(tape_count(graph), 0);
    cr_assert_eq(mem_live_blocks(), blocks);
    cr_assert_null(cost_linear_forward(graph, x, w, NULL, 0, &err));
    cr_assert_str_eq(err.message, "node budget exceeded: need 20, limit 0");
    Matrix *y = cost_linear_forward(graph, x, w, NULL, 20, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(value_nodes_written() - hook, 20);
    cr_assert_eq(tape_count(graph), 20);
    matrix_free(&y);
    /* the budget passes but the tape is short: the tape's rule, still before any node */
    Tape *small = lg_new_tape(19);
    hook = value_nodes_written();
    cr_assert_null(cost_linear_forward(small, x, w, NULL, 1000, &err));
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 20 nodes, 19 free of 19");
    cr_assert_eq(value_nodes_written(), hook);
    /* shape errors come first, with Stage 04's messages */
    Matrix *w4 = leaves(params, 2, 4);
    hook = value_nodes_written();
    cr_assert_null(cost_linear_forward(graph, x, w4, NULL, 1000, &err));
    cr_assert_str_eq(err.message, "shape mismatch: x has 3 columns, W expects 4");
    cr_assert_eq(value_nodes_written(), hook);
    matrix_free(&w4);
    tape_free(&small);
    matrix_free(&w);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

/* C_in = C_out = 2^32: the true count is about 2^65; wrapped, it would be 2^64 - 2^32, or
 * exactly 0 with a bias. Both are refused with the sizes in the message. */
Test(stage05, counts_that_overflow_are_refused_never_wrapped)
{
    LgError err = LG_ERROR_INIT;
    size_t big = (size_t)1 << 32, nodes = 12345;
    cr_assert_eq(big * (2 * big - 1), SIZE_MAX - big + 1, "the wrapped value without bias");
    cr_assert_eq(big * (2 * big), 0, "the wrapped value with bias");
    cr_assert_eq(cost_linear_nodes(1, big, big, 0, &nodes, &err), LG_ERR_OVERFLOW);
    cr_assert_str_eq(err.message,
                     "node count overflows: T = 1, C_in = 4294967296, C_out = 4294967296, bias 0");
    cr_assert_eq(cost_linear_nodes(1, big, big, 1, &nodes, &err), LG_ERR_OVERFLOW);
    cr_assert_str_eq(err.message,
                     "node count overflows: T = 1, C_in = 4294967296, C_out = 4294967296, bias 1");
    cr_assert_eq(nodes, 12345, "the result is written only on success");
    cr_assert_eq(cost_linear_nodes(1, SIZE_MAX / 2 + 1, 1, 0, &nodes, &err), LG_ERR_OVERFLOW,
                 "2 C_in overflows");
    cr_assert_eq(cost_linear_nodes(big, 1, big, 0, &nodes, &err), LG_ERR_OVERFLOW,
                 "T C_out overflows");
    cr_assert_eq(cost_linear_nodes(3, 1, SIZE_MAX / 3 + 1, 0, &nodes, &err), LG_ERR_OVERFLOW);
    /* the largest counts that do fit are accepted */
    cr_assert_eq(cost_linear_nodes(1, 1, SIZE_MAX, 0, &nodes, &err), LG_OK);
    cr_assert_eq(nodes, SIZE_MAX);
    cr_assert_eq(cost_linear_nodes(1, SIZE_MAX / 2, 1, 1, &nodes, &err), LG_OK);
    cr_assert_eq(nodes, SIZE_MAX - 1);
    cr_assert_eq(cost_relu_nodes(SIZE_MAX, 2, &nodes, &err), LG_ERR_OVERFLOW);
    cr_assert_str_eq(err.message, "node count overflows: T = 18446744073709551615, C = 2");
    cr_assert_eq(cost_relu_nodes(SIZE_MAX, 1, &nodes, &err), LG_OK);
    size_t total = SIZE_MAX - 1;
    cr_assert_eq(cost_add_nodes(&total, 1, &err), LG_OK);
    cr_assert_eq(total, SIZE_MAX);
    cr_assert_eq(cost_add_nodes(&total, 1, &err), LG_ERR_OVERFLOW);
    cr_assert_str_eq(err.message, "node count overflows: 18446744073709551615 + 1");
    cr_assert_eq(total, SIZE_MAX, "the total is left as it was");
}

Test(stage05, a_plan_with_a_size_of_zero_is_a_shape_error)
{
    LgError err = LG_ERROR_INIT;
    size_t nodes = 7;
    cr_assert_eq(cost_linear_nodes(0, 3, 4, 0, &nodes, &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "Linear sizes must be positive: got T = 0, C_in = 3, C_out = 4");
    cr_assert_eq(cost_linear_nodes(2, 0, 4, 1, &nodes, &err), LG_ERR_SHAPE);
    cr_assert_eq(cost_linear_nodes(2, 3, 0, 1, &nodes, &err), LG_ERR_SHAPE);
    cr_assert_eq(cost_relu_nodes(2, 0, &nodes, &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "ReLU sizes must be positive: got T = 2, C = 0");
    cr_assert_eq(nodes, 7);
}

/* The walk counts each reachable node once, skips dead nodes, does not follow parents on
 * other tapes, and does not depend on the closed form. */
Test(stage05, the_walk_counts_each_reachable_node_once)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(4), *t = lg_new_tape(16);
    Value *p = value_new(params, 2.0);
    Value *a = value_new(t, 3.0), *b = value_new(t, -1.0);
    Value *c = value_mul(t, a, b);
    Value *d = value_add(t, c, c);       /* c used twice */
    Value *dead = value_exp(t, a);        /* written, never used by e */
    Value *e = value_mul(t, d, c);
    Value *f = value_mul(t, e, p);        /* a parent on another tape */
    (void)dead;
    CostReach reach = {0, 0};
    Value *outputs[] = {f, e, f};         /* repeated and nested outputs count once */
    cr_assert_eq(cost_count_reachable(t, outputs, 3, &reach, &err), LG_OK);
    cr_assert_eq(reach.operations, 4, "c, d, e, f");
    cr_assert_eq(reach.leaves, 2, "a and b; p is on another tape");
    cr_assert_eq(tape_count(t), 7, "the tape also holds the dead node");
    cr_assert_eq(tape_count(params), 1);
    Value *only_dead[] = {dead};
    cr_assert_eq(cost_count_reachable(t, only_dead, 1, &reach, &err), LG_OK);
    cr_assert(reach.operations == 1 && reach.leaves == 1);
    tape_free(&t);
    tape_free(&params);
}

/* A chain of a million additions: the walk has its own stack, so depth costs memory on
 * the heap, not frames on the C stack. */
Test(stage05, the_walk_handles_a_chain_of_a_million_nodes)
{
    LgError err = LG_ERROR_INIT;
    enum { N = 1000000 };
    Tape *t = lg_new_tape(N + 2);
    Value *x = value_new(t, 1.0), *s = x;
    for (size_t k = 0; k < N; k++)
        s = value_add_number(t, s, 1.0);
    CostReach reach = {0, 0};
    cr_assert_eq(cost_count_reachable(t, &s, 1, &reach, &err), LG_OK, "%s", err.message);
    cr_assert_eq(reach.operations, N);
    cr_assert_eq(reach.leaves, 1);
    tape_free(&t);
}

/* The counting hook sees every tape, and leaves as well as operations. */
Test(stage05, the_hook_counts_every_node_on_every_tape)
{
    Tape *one = lg_new_tape(4), *two = lg_new_tape(4);
    size_t before = value_nodes_written();
    Value *a = value_new(one, 1.0);
    Value *b = value_new(two, 2.0);
    value_add(one, a, b);
    value_relu(two, b);
    cr_assert_eq(value_nodes_written() - before, 4);
    tape_reset(one);
    cr_assert_eq(value_nodes_written() - before, 4, "tape_reset does not reset the hook");
    value_new(one, 3.0);
    cr_assert_eq(value_nodes_written() - before, 5);
    tape_free(&one);
    tape_free(&two);
}

/* The allocation-failure walk over this stage's allocating functions. */
Test(stage05, allocation_failures_leave_nothing_behind)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(32), *graph = lg_new_tape(256);
    Matrix *x = leaves(params, 2, 3), *w = leaves(params, 4, 3);
    Vector *b = matrix_new_vector_leaves(params, 4, NULL, "b", &err);
    size_t k = 1;
    for (;; k++) {
        size_t blocks = mem_live_blocks(), nodes = tape_count(graph), hook = value_nodes_written();
        mem_fail_at(k);
        Matrix *y = cost_linear_forward(graph, x, w, b, SIZE_MAX, &err);
        mem_fail_at(0);
        if (y != NULL) {
            matrix_free(&y);
            break;
        }
        cr_assert_eq(err.status, LG_ERR_ALLOC);
        cr_assert_eq(mem_live_blocks(), blocks, "allocation %zu", k);
        cr_assert_eq(tape_count(graph), nodes);
        cr_assert_eq(value_nodes_written(), hook, "no operation before the allocations");
    }
    cr_assert_eq(k, 3);
    Matrix *y = cost_linear_forward(graph, x, w, b, SIZE_MAX, &err);
    for (k = 1;; k++) {
        size_t blocks = mem_live_blocks();
        CostReach reach = {99, 99};
        mem_fail_at(k);
        LgStatus status = cost_count_reachable(graph, y->values, 8, &reach, &err);
        mem_fail_at(0);
        if (status == LG_OK) {
            cr_assert_eq(reach.operations, 48, "y depends on its own forward only; the"
                         " graph tape also holds the first one");
            cr_assert_eq(tape_count(graph), 96);
            break;
        }
        cr_assert_eq(status, LG_ERR_ALLOC);
        cr_assert_eq(mem_live_blocks(), blocks, "allocation %zu", k);
        cr_assert(reach.operations == 99 && reach.leaves == 99, "*reach untouched");
    }
    cr_assert_eq(k, 3);
    matrix_free(&y);
    matrix_free_vector(&b);
    matrix_free(&w);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

Test(stage05, program_prints_planned_and_counted_nodes)
{
    ProgramRun run;
    run_program(&run, "stage-05", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "DIFFER") == NULL, "%s", run.output);
    cr_assert(strstr(run.output, "         T      C_in     C_out  bias   planned      tape"
                                 "      hook      walk\n") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "         2         3         4    no        40        40"
                                 "        40        40\n") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "T = 2: 40 + 8 + 28 = 76 planned; hook 76; walk from y 76;"
                                 " output (2, 2)") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "the bias adds 12 nodes") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "budget 37: plan 20 + 4 + 14 = 38 -> node budget exceeded: "
                                 "need 38, limit 37; 0 nodes written\n") != NULL, "%s",
              run.output);
    cr_assert(strstr(run.output, "budget 38: plan 20 + 4 + 14 = 38 -> output (1, 2) after 38 "
                                 "operations, walk 38") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "C_in = 4294967296, C_out = 4294967296, bias 1") != NULL);
    cr_assert(strstr(run.output, "after freeing everything: 0 live blocks") != NULL);
    lg_expect_short_lines(run.output);
}

/* The head and a row of the table have the same length, and so the same column ends,
 * whatever the number of digits (up to the plan limit's eight). */
Test(stage05, program_table_columns_stay_aligned_for_large_sizes)
{
    ProgramRun run;
    run_program(&run, "stage-05", "--batch 1 --in 1 --out 123456");
    cr_assert_eq(run.status, 0, "%s", run.output);
    const char *head = run.output, *row = strchr(head, '\n');
    cr_assert_not_null(row);
    row++;
    const char *row_end = strchr(row, '\n');
    cr_assert_not_null(row_end);
    cr_assert_eq(row_end - row, row - 1 - head, "head and row differ in length:\n%s",
                 run.output);
    cr_assert(strstr(row, "    123456    no    123456    123456    123456    123456\n") != NULL,
              "%s", run.output);
}

/* Usage errors exit 2 with the program's message on standard error and nothing on standard
 * output; getopt's own messages are silenced. */
Test(stage05, program_checks_its_options)
{
    ProgramRun run;
    run_program(&run, "stage-05", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "usage: stage-05") != NULL);
    cr_assert(strstr(run.output, "as size_t allows") == NULL, "%s", run.output);
    cr_assert(strstr(run.output, "more than 2^24 nodes is refused") != NULL, "%s",
              run.output);
    static const LgBadLine lines[] = {
        {"--node-budget", "option '--node-budget' needs a value"},
        {"--batch 2 extra", "unexpected argument 'extra'"},
        {"--node-budget -1", "--node-budget must be an integer in [0, "},
        {"--in 3.0", "--in must be an integer in [1, "},
        {"--in 1e3", "got '1e3'"},
        {"--in 0", "got '0'"},
        {"--in -1", "got '-1'"},
        {"--in 18446744073709551616", "got '18446744073709551616'"},
        {"--in x", "got 'x'"},
        {"--in ''", "--in must be an integer"},
        {"--in=", "--in must be an integer"},
        {"--in 0x10", "got '0x10'"},
        {"--batch", "option '--batch' needs a value"},
        {"--batch 1 --batch 1", "option '--batch' is given twice"},
        {"--node-budget 3 --node-budget=3", "option '--node-budget' is given twice"},
        {"--bias --bias", "option '--bias' is given twice"},
        {"--bias=yes", "option '--bias' takes no value"},
        {"--out ' 3'", "got ' 3'"},
        {"--out 3,4", "got '3,4'"},
        {"{DIR}", "unexpected argument '/tmp'"},
        {"{FIFO}", "unexpected argument"},
        {"{LONG}", "unexpected argument"},
        {"/dev/null", "unexpected argument '/dev/null'"},
        {"-T2", "unknown option '-T'"},
        {"-1", "unknown option '-1'"},
    };
    size_t n = lg_expect_usage_errors("stage-05", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
}

/* A broken rule: exit 1, the rule and its numbers on standard error, nothing on standard
 * output. */
static void expect_rule(const char *args, const char *message)
{
    ProgramRun run;
    run_program(&run, "stage-05", args);
    cr_assert_eq(run.status, 1, "%s: %s", args, run.output);
    cr_assert(strstr(run.output, message) != NULL, "%s: %s", args, run.output);
    run_program_stdout(&run, "stage-05", args);
    cr_assert_eq(run.status, 1);
    cr_assert_str_eq(run.output, "", "%s: nothing on standard output", args);
}

Test(stage05, program_checks_budgets_and_counts)
{
    ProgramRun run;
    expect_rule("--batch 1 --in 3 --out 4 --node-budget 19",
                "stage-05: error: node budget exceeded: need 20, limit 19; 0 operations written");
    run_program(&run, "stage-05", "--batch 1 --in 3 --out 4 --node-budget 20");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "         1         3         4    no        20        20"
                                 "        20        20") != NULL, "%s", run.output);
    expect_rule("--batch 1 --in 4294967296 --out 4294967296 --bias",
                "node count overflows: T = 1, C_in = 4294967296, C_out = 4294967296, bias 1");
    expect_rule("--batch 100000 --in 100000 --out 1", "shape of x too large");
}

/* Legal sizes whose plan is gigabytes are refused before anything is allocated, in terms of
 * the plan, never of a tape capacity the user did not set. */
Test(stage05, program_refuses_a_plan_over_the_limit_before_allocating)
{
    expect_rule("--batch 1 --in 2 --out 44739242",
                "stage-05: error: plan limit exceeded: the plan needs 223696212 nodes (13.0 GB),"
                " limit 16777216\n");
    expect_rule("--batch 1 --in 1 --out 134217728",
                "plan limit exceeded: the plan needs 268435457 nodes (16.2 GB), limit 16777216");
    expect_rule("--batch 8192 --in 64 --out 1024", "plan limit exceeded: the plan needs");
    /* x (1, 1), W (C_out, 1): 2 C_out + 1 leaves and nodes; C_out = 8388608 is one over */
    expect_rule("--batch 1 --in 1 --out 8388608",
                "plan limit exceeded: the plan needs 16777217 nodes");
    ProgramRun run;
    run_program(&run, "stage-05", "--batch 1 --in 1 --out 134217728");
    cr_assert(strstr(run.output, "tape capacity") == NULL, "%s", run.output);
}
