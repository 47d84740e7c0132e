/* Stage 04: shapes, matrices and vectors of Values, the Linear forward, the rectifier. */
#include "litgrad_test.h"

#include <math.h>
#include <stdint.h>

#include "linear.h"
#include "matrix.h"
#include "value.h"

LG_SUITE(stage04);

static Matrix *leaves(Tape *tape, size_t rows, size_t cols, const double *data)
{
    LgError err = LG_ERROR_INIT;
    Matrix *m = matrix_new_leaves(tape, (Shape){rows, cols}, data, "m", &err);
    cr_assert_not_null(m, "%s", err.message);
    return m;
}

/* A small binary fraction for entry k, so that sums of products are exact. */
static double number(size_t k)
{
    return (double)((int)((k * 7) % 13) - 6) / 8;
}

Test(stage04, shape_check_refuses_non_positive_and_too_large_shapes)
{
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(matrix_check_shape((Shape){2, 3}, "x", &err), LG_OK);
    cr_assert_eq(matrix_check_shape((Shape){1, MATRIX_ENTRIES_MAX}, "x", &err), LG_OK);
    cr_assert_eq(matrix_check_shape((Shape){0, 3}, "x", &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "shape of x must be positive: got (0, 3)");
    cr_assert_eq(matrix_check_shape((Shape){3, 0}, "W", &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "shape of W must be positive: got (3, 0)");
    cr_assert_eq(matrix_check_shape((Shape){2, MATRIX_ENTRIES_MAX / 2 + 1}, "x", &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message,
                     "shape of x too large: (2, 67108865) has more than 134217728 entries");
    /* SIZE_MAX * 2 wraps around to SIZE_MAX - 1 if formed; the check never forms it. */
    cr_assert_eq(matrix_check_shape((Shape){SIZE_MAX, 2}, "W", &err), LG_ERR_SHAPE);
    cr_assert_eq(matrix_check_shape((Shape){(size_t)1 << 32, (size_t)1 << 32}, "W", &err),
                 LG_ERR_SHAPE, "2^64 entries would wrap to 0");
    cr_assert_str_eq(err.message, "shape of W too large: (4294967296, 4294967296) has more"
                                  " than 134217728 entries");
}

Test(stage04, vector_length_must_be_positive_and_bounded)
{
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(matrix_check_length(4, "b", &err), LG_OK);
    cr_assert_eq(matrix_check_length(0, "b", &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "length of b must be positive: got 0");
    cr_assert_eq(matrix_check_length(MATRIX_ENTRIES_MAX + 1, "b", &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "length of b too large: 134217729 entries, more than 134217728");
    Vector *v = matrix_new_vector(0, "b", &err);
    cr_assert_null(v);
    cr_assert_eq(mem_live_blocks(), 0);
}

Test(stage04, a_matrix_is_row_major_and_owns_only_its_pointers)
{
    Tape *t = lg_new_tape(6);
    const double data[6] = {1, 2, 3, 4, 5, 6};
    Matrix *m = leaves(t, 2, 3, data);
    cr_assert_eq(m->rows, 2);
    cr_assert_eq(m->cols, 3);
    cr_assert_eq(mem_live_blocks(), 4, "tape (2 blocks) and matrix (2 blocks)");
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++) {
            cr_assert_eq(matrix_at(m, i, j), m->values[i * 3 + j]);
            cr_assert_eq(matrix_at(m, i, j)->data, data[i * 3 + j]);
            cr_assert_eq(matrix_at(m, i, j), tape_at(t, i * 3 + j), "leaves in row-major order");
            cr_assert_eq(matrix_at(m, i, j)->op, VALUE_LEAF);
        }
    Shape s = matrix_shape(m);
    cr_assert(s.rows == 2 && s.cols == 3);
    matrix_free(&m);
    cr_assert_null(m);
    cr_assert_eq(tape_count(t), 6, "freeing a matrix does not touch its values");
    tape_free(&t);
}

Test(stage04, leaves_without_data_are_zeros_and_matrix_new_leaves_entries_null)
{
    LgError err = LG_ERROR_INIT;
    Tape *t = lg_new_tape(4);
    Vector *b = matrix_new_vector_leaves(t, 4, NULL, "b", &err);
    cr_assert_not_null(b, "%s", err.message);
    cr_assert_eq(b->length, 4);
    for (size_t o = 0; o < 4; o++)
        cr_assert(b->values[o]->data == 0.0 && tape_holds(t, b->values[o]));
    Matrix *m = matrix_new((Shape){2, 2}, "y", &err);
    cr_assert_not_null(m, "%s", err.message);
    for (size_t k = 0; k < 4; k++)
        cr_assert_null(m->values[k]);
    matrix_free(&m);
    matrix_free_vector(&b);
    tape_free(&t);
}

Test(stage04, leaf_constructors_check_everything_before_writing)
{
    LgError err = LG_ERROR_INIT;
    Tape *t = lg_new_tape(4);
    const double bad[4] = {1.0, 2.0, 3.0, NAN};
    cr_assert_null(matrix_new_leaves(t, (Shape){2, 2}, bad, "x", &err));
    cr_assert_eq(err.status, LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "data of x at (1, 1) must be finite: got nan");
    cr_assert_null(matrix_new_vector_leaves(t, 4, bad, "b", &err));
    cr_assert_str_eq(err.message, "data of b at 3 must be finite: got nan");
    cr_assert_null(matrix_new_leaves(t, (Shape){1, 5}, NULL, "x", &err));
    cr_assert_eq(err.status, LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 5 nodes, 4 free of 4");
    cr_assert_null(matrix_new_leaves(t, (Shape){0, 5}, NULL, "x", &err));
    cr_assert_eq(err.status, LG_ERR_SHAPE);
    cr_assert_eq(tape_count(t), 0, "no leaf was written");
    cr_assert_eq(mem_live_blocks(), 2, "only the tape is live");
    tape_free(&t);
}

/* The seed's example: x = (3, -4), w = (2, 5), y = x0 w0 + x1 w1 = -14. */
Test(stage04, the_seed_linear_gives_minus_14_with_three_nodes)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(4), *graph = lg_new_tape(3);
    Matrix *x = leaves(params, 1, 2, (const double[]){3.0, -4.0});
    Matrix *w = leaves(params, 1, 2, (const double[]){2.0, 5.0});
    Matrix *y = linear_forward(graph, x, w, NULL, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert(y->rows == 1 && y->cols == 1);
    Value *out = matrix_at(y, 0, 0);
    cr_assert_eq(out->data, -14.0);
    cr_assert_eq(tape_count(graph), 3);
    cr_assert_eq(out->op, VALUE_ADD);
    Value *p0 = out->parents[0], *p1 = out->parents[1];
    cr_assert(p0->op == VALUE_MUL && p0->parents[0] == x->values[0] &&
              p0->parents[1] == w->values[0]);
    cr_assert(p1->op == VALUE_MUL && p1->parents[0] == x->values[1] &&
              p1->parents[1] == w->values[1]);
    matrix_free(&y);
    matrix_free(&w);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

/* The seed's gradient through linear_forward: y = x0 w0 + x1 w1 = -14, so after
 * value_backward dy/dx = w = (2, 5) and dy/dW = x = (3, -4), exactly. The parameters live
 * on their own tape and are reached through parent pointers (Stage 03, "Two tapes"). */
Test(stage04, the_seed_gradient_flows_through_linear_forward)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(4), *graph = lg_new_tape(3);
    Matrix *x = leaves(params, 1, 2, (const double[]){3.0, -4.0});
    Matrix *w = leaves(params, 1, 2, (const double[]){2.0, 5.0});
    Matrix *y = linear_forward(graph, x, w, NULL, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(matrix_at(y, 0, 0)->data, -14.0);
    value_backward(graph, matrix_at(y, 0, 0));
    cr_assert_eq(matrix_at(x, 0, 0)->grad, 2.0, "dy/dx0 = w0");
    cr_assert_eq(matrix_at(x, 0, 1)->grad, 5.0, "dy/dx1 = w1");
    cr_assert_eq(matrix_at(w, 0, 0)->grad, 3.0, "dy/dW0 = x0");
    cr_assert_eq(matrix_at(w, 0, 1)->grad, -4.0, "dy/dW1 = x1");
    cr_assert_eq(matrix_at(y, 0, 0)->grad, 1.0);
    matrix_free(&y);
    matrix_free(&w);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

/* The text fixes the order: s = x0 W0, s = s + xi Wi for i = 1.., then s + b. Each output
 * is recomputed in that order with doubles and compared exactly (==). The data are not
 * binary fractions here, so a different order would show up in the last bits. */
Test(stage04, linear_forward_sums_left_to_right_with_the_bias_last)
{
    LgError err = LG_ERROR_INIT;
    enum { T = 3, IN = 5, OUT = 4 };
    double xd[T * IN], wd[OUT * IN], bd[OUT];
    for (size_t k = 0; k < T * IN; k++)
        xd[k] = 0.1 * (double)k - 0.7;
    for (size_t k = 0; k < OUT * IN; k++)
        wd[k] = 1.0 / (double)(k + 3);
    for (size_t o = 0; o < OUT; o++)
        bd[o] = 0.3 * (double)o - 0.2;
    Tape *params = lg_new_tape(T * IN + OUT * IN + OUT), *graph = lg_new_tape(T * OUT * 2 * IN);
    Matrix *x = leaves(params, T, IN, xd), *w = leaves(params, OUT, IN, wd);
    Vector *b = matrix_new_vector_leaves(params, OUT, bd, "b", &err);
    Matrix *y = linear_forward(graph, x, w, b, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert(y->rows == T && y->cols == OUT);
    for (size_t t = 0; t < T; t++)
        for (size_t o = 0; o < OUT; o++) {
            double s = xd[t * IN] * wd[o * IN];
            for (size_t i = 1; i < IN; i++)
                s = s + xd[t * IN + i] * wd[o * IN + i];
            s = s + bd[o];
            Value *v = matrix_at(y, t, o);
            cr_assert_eq(v->data, s, "y[%zu][%zu] = %.17g, expected %.17g", t, o, v->data, s);
            cr_assert(v->op == VALUE_ADD && v->parents[1] == b->values[o], "bias added last");
        }
    cr_assert_eq(tape_count(graph), T * OUT * 2 * IN, "T C_out (2 C_in - 1 + 1) nodes");
    matrix_free(&y);
    matrix_free_vector(&b);
    matrix_free(&w);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

/* linear_node_count is what linear_forward writes, over a grid of shapes with and
 * without bias (Stage 05 checks it against the closed form and two independent counts). */
Test(stage04, linear_forward_writes_exactly_linear_node_count_nodes)
{
    LgError err = LG_ERROR_INIT;
    static const size_t ts[] = {1, 2, 3}, ins[] = {1, 2, 4}, outs[] = {1, 3};
    Tape *params = lg_new_tape(64), *graph = lg_new_tape(1024);
    for (size_t a = 0; a < 3; a++)
        for (size_t c = 0; c < 3; c++)
            for (size_t d = 0; d < 2; d++)
                for (int bias = 0; bias <= 1; bias++) {
                    tape_reset(params);
                    tape_reset(graph);
                    Shape xs = {ts[a], ins[c]}, ws = {outs[d], ins[c]};
                    Matrix *x = leaves(params, xs.rows, xs.cols, NULL);
                    Matrix *w = leaves(params, ws.rows, ws.cols, NULL);
                    Vector *b = bias ? matrix_new_vector_leaves(params, ws.rows, NULL, "b", &err) : NULL;
                    Matrix *y = linear_forward(graph, x, w, b, &err);
                    cr_assert_not_null(y, "%s", err.message);
                    size_t expect = ts[a] * outs[d] * (2 * ins[c] - 1 + (size_t)bias);
                    cr_assert_eq(linear_node_count(xs, ws, bias), expect);
                    cr_assert_eq(tape_count(graph), expect, "T=%zu C_in=%zu C_out=%zu bias=%d",
                                 ts[a], ins[c], outs[d], bias);
                    matrix_free(&y);
                    matrix_free_vector(&b);
                    matrix_free(&w);
                    matrix_free(&x);
                }
    tape_free(&graph);
    tape_free(&params);
}

/* Every shape error of linear_forward: the message names the rule and the numbers, the
 * graph tape has no new node and no block was allocated. */
Test(stage04, every_shape_error_is_found_before_the_first_node)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(64), *graph = lg_new_tape(256);
    Matrix *x = leaves(params, 2, 3, NULL), *w = leaves(params, 4, 3, NULL);
    Matrix *w44 = leaves(params, 4, 4, NULL), *w1 = leaves(params, 1, 4, NULL);
    Vector *b3 = matrix_new_vector_leaves(params, 3, NULL, "b", &err);
    Vector *b1 = matrix_new_vector_leaves(params, 1, NULL, "b", &err);
    size_t blocks = mem_live_blocks(), params_count = tape_count(params);
    struct { const Matrix *w; const Vector *b; const char *message; } cases[] = {
        {w44, NULL, "shape mismatch: x has 3 columns, W expects 4"},
        {w1, NULL, "shape mismatch: x has 3 columns, W expects 4"},
        {w, b3, "shape mismatch: b has 3 entries, W has 4 rows"},
        {w, b1, "shape mismatch: b has 1 entry, W has 4 rows"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cr_assert_null(linear_forward(graph, x, cases[k].w, cases[k].b, &err));
        cr_assert_eq(err.status, LG_ERR_SHAPE);
        cr_assert_str_eq(err.message, cases[k].message);
        cr_assert_eq(tape_count(graph), 0, "case %zu wrote a node", k);
        cr_assert_eq(mem_live_blocks(), blocks, "case %zu allocated", k);
        cr_assert_eq(tape_count(params), params_count);
    }
    Shape y = {99, 99};
    cr_assert_eq(linear_output_shape((Shape){2, 1}, (Shape){1, 1}, 1, &y, &err), LG_OK);
    cr_assert(y.rows == 2 && y.cols == 1);
    y = (Shape){99, 99};
    cr_assert_eq(linear_output_shape((Shape){1, 1}, (Shape){3, 1}, 3, &y, &err), LG_OK);
    cr_assert(y.rows == 1 && y.cols == 3);
    cr_assert_eq(linear_output_shape((Shape){1, 2}, (Shape){3, 1}, 0, &y, &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "shape mismatch: x has 2 columns, W expects 1");
    cr_assert_eq(linear_output_shape((Shape){0, 3}, (Shape){4, 3}, 0, &y, &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "shape of x must be positive: got (0, 3)");
    cr_assert_eq(linear_output_shape((Shape){2, 3}, (Shape){4, 0}, 0, &y, &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "shape of W must be positive: got (4, 0)");
    cr_assert_eq(linear_output_shape((Shape){1 << 14, 1}, (Shape){1 << 14, 1}, 0, &y, &err),
                 LG_ERR_SHAPE, "x and W are legal, y (2^14, 2^14) is not");
    cr_assert_str_eq(err.message,
                     "shape of y too large: (16384, 16384) has more than 134217728 entries");
    cr_assert(y.rows == 1 && y.cols == 3, "*y untouched on failure");
    matrix_free_vector(&b1);
    matrix_free_vector(&b3);
    matrix_free(&w1);
    matrix_free(&w44);
    matrix_free(&w);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

Test(stage04, a_tape_one_node_short_is_refused_before_the_first_node)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(80), *graph = lg_new_tape(39);
    Matrix *x = leaves(params, 2, 3, NULL), *w = leaves(params, 4, 3, NULL);
    size_t blocks = mem_live_blocks();
    cr_assert_null(linear_forward(graph, x, w, NULL, &err));
    cr_assert_eq(err.status, LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 40 nodes, 39 free of 39");
    cr_assert_eq(tape_count(graph), 0);
    cr_assert_eq(mem_live_blocks(), blocks);
    Matrix *column = leaves(params, 4, 1, NULL);
    Matrix *r = matrix_relu(graph, column, &err);
    cr_assert_not_null(r, "%s", err.message);
    cr_assert_eq(tape_count(graph), 4);
    Matrix *r2 = matrix_relu(graph, x, &err);
    cr_assert_not_null(r2, "6 more nodes fit: 10 of 39");
    matrix_free(&r2);
    tape_reset(graph);
    Matrix *big = leaves(params, 8, 5, NULL);
    cr_assert_null(matrix_relu(graph, big, &err));
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 40 nodes, 39 free of 39");
    cr_assert_eq(tape_count(graph), 0);
    matrix_free(&big);
    matrix_free(&r);
    matrix_free(&column);
    matrix_free(&w);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

Test(stage04, the_forward_reads_parameters_and_changes_none_of_them)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(32), *graph = lg_new_tape(96);
    double xd[6], wd[12], bd[4];
    for (size_t k = 0; k < 6; k++)
        xd[k] = number(k);
    for (size_t k = 0; k < 12; k++)
        wd[k] = number(k + 6);
    for (size_t k = 0; k < 4; k++)
        bd[k] = number(k + 18);
    Matrix *x = leaves(params, 2, 3, xd), *w = leaves(params, 4, 3, wd);
    Vector *b = matrix_new_vector_leaves(params, 4, bd, "b", &err);
    Value snapshot[32];
    size_t n = tape_count(params);
    for (size_t k = 0; k < n; k++)
        snapshot[k] = *tape_at(params, k);
    for (int run = 0; run < 2; run++) {
        Matrix *y = linear_forward(graph, x, w, b, &err);
        cr_assert_not_null(y, "%s", err.message);
        for (size_t k = 0; k < 8; k++)
            cr_assert(tape_holds(graph, y->values[k]), "outputs are on the graph tape");
        matrix_free(&y);
    }
    cr_assert_eq(tape_count(params), n, "no node was written on the parameter tape");
    for (size_t k = 0; k < n; k++) {
        const Value *v = tape_at(params, k);
        cr_assert(v->data == snapshot[k].data && v->grad == snapshot[k].grad);
        cr_assert(v->op == VALUE_LEAF);
    }
    matrix_free_vector(&b);
    matrix_free(&w);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

/* The limit the chapter states: shapes cannot see a value in two places. Stage 07 refuses it. */
Test(stage04, an_aliased_weight_passes_every_shape_check)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(16), *graph = lg_new_tape(16);
    Matrix *x = leaves(params, 1, 2, (const double[]){1.0, 1.0});
    Matrix *real = leaves(params, 1, 2, (const double[]){0.5, 2.0});
    Matrix *alias = matrix_new((Shape){1, 2}, "W", &err);
    alias->values[0] = real->values[0];
    alias->values[1] = real->values[0];
    Matrix *y = linear_forward(graph, x, alias, NULL, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert(y->rows == 1 && y->cols == 1);
    cr_assert_eq(matrix_at(y, 0, 0)->data, 1.0, "0.5 + 0.5: the second weight is never read");
    matrix_free(&y);
    matrix_free(&alias);
    matrix_free(&real);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

Test(stage04, relu_of_a_matrix_is_one_node_per_entry)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(6), *graph = lg_new_tape(6);
    const double data[6] = {-1.0, 0.0, 2.5, -0.0, NAN, 3.0};
    Matrix *x = matrix_new((Shape){2, 3}, "x", &err);
    for (size_t k = 0; k < 6; k++) /* value_new asserts finite data; NaN comes from an op */
        x->values[k] = value_new(params, isnan(data[k]) ? 0.0 : data[k]);
    x->values[4]->data = NAN;
    Matrix *y = matrix_relu(graph, x, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert(y->rows == 2 && y->cols == 3);
    cr_assert_eq(tape_count(graph), 6);
    static const double expect[6] = {0.0, 0.0, 2.5, 0.0, NAN, 3.0};
    for (size_t k = 0; k < 6; k++) {
        cr_assert_eq(y->values[k]->op, VALUE_RELU);
        cr_assert_eq(y->values[k]->parents[0], x->values[k]);
        if (k == 4)
            cr_assert(isnan(y->values[k]->data), "relu keeps NaN (Stage 02)");
        else
            cr_assert_eq(y->values[k]->data, expect[k]);
    }
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

/* The allocation-failure walk of Stage 01 over every constructor of this stage: fail the
 * k-th allocation for k = 1, 2, ... until the constructor succeeds; after each failure
 * nothing is returned, the status is LG_ERR_ALLOC, no block is left and no node written. */
enum { MAKE_MATRIX, MAKE_MATRIX_LEAVES, MAKE_VECTOR, MAKE_VECTOR_LEAVES, MAKE_LINEAR,
       MAKE_LINEAR_BIAS, MAKE_RELU, MAKE_COUNT };

static void *make(int which, Tape *params, Tape *graph, const Matrix *x, const Matrix *w,
                  const Vector *b, LgError *err)
{
    switch (which) {
    case MAKE_MATRIX: return matrix_new((Shape){2, 3}, "m", err);
    case MAKE_MATRIX_LEAVES: return matrix_new_leaves(params, (Shape){2, 3}, NULL, "m", err);
    case MAKE_VECTOR: return matrix_new_vector(3, "v", err);
    case MAKE_VECTOR_LEAVES: return matrix_new_vector_leaves(params, 3, NULL, "v", err);
    case MAKE_LINEAR: return linear_forward(graph, x, w, NULL, err);
    case MAKE_LINEAR_BIAS: return linear_forward(graph, x, w, b, err);
    case MAKE_RELU: return matrix_relu(graph, x, err);
    }
    return NULL;
}

static void unmake(int which, void *made)
{
    if (which == MAKE_VECTOR || which == MAKE_VECTOR_LEAVES) {
        Vector *v = made;
        matrix_free_vector(&v);
    } else {
        Matrix *m = made;
        matrix_free(&m);
    }
}

Test(stage04, every_constructor_survives_each_allocation_failure)
{
    LgError err = LG_ERROR_INIT;
    Tape *params = lg_new_tape(256), *graph = lg_new_tape(256);
    Matrix *x = leaves(params, 2, 3, NULL), *w = leaves(params, 4, 3, NULL);
    Vector *b = matrix_new_vector_leaves(params, 4, NULL, "b", &err);
    for (int which = 0; which < MAKE_COUNT; which++) {
        size_t k = 1;
        for (;; k++) {
            size_t blocks = mem_live_blocks();
            size_t p = tape_count(params), g = tape_count(graph);
            mem_fail_at(k);
            void *made = make(which, params, graph, x, w, b, &err);
            mem_fail_at(0);
            if (made != NULL) {
                unmake(which, made);
                break;
            }
            cr_assert_eq(err.status, LG_ERR_ALLOC, "constructor %d, allocation %zu", which, k);
            cr_assert_eq(mem_live_blocks(), blocks, "constructor %d, allocation %zu", which, k);
            cr_assert_eq(tape_count(params), p, "constructor %d wrote a leaf", which);
            cr_assert_eq(tape_count(graph), g, "constructor %d wrote a node", which);
        }
        cr_assert_eq(k, 3, "constructor %d: two allocations, the third attempt succeeds", which);
    }
    matrix_free_vector(&b);
    matrix_free(&w);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&params);
}

Test(stage04, program_demonstrates_the_stage)
{
    ProgramRun run;
    run_program(&run, "stage-04", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "y = x W^T = -14, shape (1, 1), 3 nodes") != NULL, "%s",
              run.output);
    cr_assert(strstr(run.output, "without bias: y (2, 4), 40 nodes") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "with bias:    y (2, 4), 48 nodes") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "relu(y): 8 nodes") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "unchanged (data, grad, tape count): yes") != NULL);
    cr_assert(strstr(run.output, "shape mismatch: x has 3 columns, W expects 4") != NULL);
    cr_assert(strstr(run.output, "shape mismatch: b has 3 entries, W has 4 rows") != NULL);
    cr_assert(strstr(run.output, "graph tape: 99 nodes before, 99 after; live blocks: 14 before,"
                                 " 14 after") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "allocation 3: none left to fail") != NULL, "%s", run.output);
    cr_assert(strstr(run.output, "after freeing everything: 0 live blocks") != NULL);
    lg_expect_short_lines(run.output);
}

/* A refused size is shown with the rule it breaks, not a bare status; the alias is a
 * forward reference to Stage 07; legal sizes with a plan of gigabytes are refused. */
Test(stage04, program_names_the_rule_of_each_refusal)
{
    ProgramRun run;
    run_program(&run, "stage-04", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    static const char *const rules[] = {
        "--batch 3.0\n    -> invalid: --batch must be an integer in [1, 1024]: got '3.0'",
        "--batch 18446744073709551616\n    -> invalid: --batch must be an integer in [1, 1024]:",
        ("--batch 1024 --in 64 --out 1024 (each size legal)\n    -> budget: plan limit exceeded: "
         "the plan needs 133300224 nodes (6.4 GB), limit 16777216"),
        "a shape check cannot see it; Stage 07's seal will refuse it",
    };
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
        cr_assert(strstr(run.output, rules[k]) != NULL, "missing: %s\n%s", rules[k],
                  run.output);
    cr_assert(strstr(run.output, "Stage 07's seal refuses it") == NULL, "not yet written");
}

/* Usage errors: exit 2, a message on standard error in the program's words, nothing on
 * standard output. */
Test(stage04, program_checks_its_options)
{
    ProgramRun run;
    run_program(&run, "stage-04", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "usage: stage-04") != NULL);
    cr_assert(strstr(run.output, "a plan of more than 2^24 nodes is refused") != NULL, "%s",
              run.output);
    static const LgBadLine lines[] = {
        {"--batch", "option '--batch' needs a value"},
        {"--batch 2 extra", "unexpected argument 'extra'"},
        {"--capacity 0", "--capacity must be an integer in [1, 134217728]"},
        {"--in 3.0", "--in must be an integer in [1, 1024]: got '3.0'"},
        {"--in 1e3", "got '1e3'"},
        {"--in 0", "got '0'"},
        {"--in -1", "got '-1'"},
        {"--in +3", "got '+3'"},
        {"--in 1025", "got '1025'"},
        {"--in 18446744073709551616", "got '18446744073709551616'"},
        {"--in ''", "--in must be an integer in [1, 1024]: got ''"},
        {"--in=", "--in must be an integer in [1, 1024]: got ''"},
        {"--in 0x10", "got '0x10'"},
        {"--out", "option '--out' needs a value"},
        {"--out 4 --out 4", "option '--out' is given twice"},
        {"--bias --bias", "option '--bias' is given twice"},
        {"--bias=1", "option '--bias' takes no value"},
        {"--batch 1 --batch=2", "option '--batch' is given twice"},
        {"--capacity 134217729", "got '134217729'"},
        {"--capacity=x", "got 'x'"},
        {"{DIR}", "unexpected argument '/tmp'"},
        {"{FIFO}", "unexpected argument"},
        {"/dev/null", "unexpected argument '/dev/null'"},
        {"''", "unexpected argument ''"},
        {"-b", "unknown option '-b'"},
        {"-1", "unknown option '-1'"},
    };
    size_t n = lg_expect_usage_errors("stage-04", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
}

/* A broken rule: exit 1, the rule and its numbers on standard error, nothing on standard
 * output, nothing allocated first. */
static void expect_rule(const char *args, const char *message)
{
    ProgramRun run;
    run_program(&run, "stage-04", args);
    cr_assert_eq(run.status, 1, "%s: %s", args, run.output);
    cr_assert(strstr(run.output, message) != NULL, "%s: %s", args, run.output);
    run_program_stdout(&run, "stage-04", args);
    cr_assert_eq(run.status, 1);
    cr_assert_str_eq(run.output, "", "%s: nothing on standard output", args);
}

Test(stage04, program_runs_one_linear_and_refuses_a_short_tape)
{
    ProgramRun run;
    run_program(&run, "stage-04", "--batch 2 --in 3 --out 4");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "graph tape: 40 of 40 nodes written") != NULL, "%s", run.output);
    run_program(&run, "stage-04", "--bias");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "graph tape: 48 of 48 nodes written") != NULL, "%s", run.output);
    expect_rule("--bias --capacity 47", "tape capacity exceeded: need 48 nodes, 47 free of 47");
}

/* Legal sizes whose plan is gigabytes are refused before anything is allocated: the plan
 * counts the leaves and the graph tape's capacity (2^24 nodes at most). */
Test(stage04, program_refuses_a_plan_over_the_limit_before_allocating)
{
    expect_rule("--batch 1024 --in 64 --out 1024",
                "stage-04: error: plan limit exceeded: the plan needs 133300224 nodes (6.4 GB),"
                " limit 16777216\n");
    expect_rule("--batch 1024 --in 1024 --out 1024",
                "plan limit exceeded: the plan needs 2148532224 nodes (103.2 GB)");
    /* 18 leaves (x (2, 3), W (4, 3)) and a graph tape of 16777199: one node over */
    expect_rule("--capacity 16777199",
                "plan limit exceeded: the plan needs 16777217 nodes (0.8 GB), limit 16777216");
    expect_rule("--capacity 134217728", "the plan needs 134217746 nodes (6.4 GB)");
    ProgramRun run;
    run_program(&run, "stage-04", "--batch 64 --in 64 --out 64");
    cr_assert_eq(run.status, 0, "a plan of 528384 nodes is within the limit: %s", run.output);
    cr_assert(strstr(run.output, "graph tape: 520192 of 520192 nodes written") != NULL, "%s",
              run.output);
}
