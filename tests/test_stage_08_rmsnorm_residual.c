/* Stage 08: RMSNorm, the residual path, epsilon as an execution contract.
 *
 * Every number of the chapter is asserted here: the example row x = (3, -4) (ms, r, y,
 * its 10 nodes four ways, its gradient three ways, x . dL/dx = 0), the identity with
 * eps = 1e-5, the output rms 0.3015113445777636, the gradient 316.2277660168379 at zero,
 * the addition 12.5 + 1e-17 that does nothing; the chapter's model (68 parameters, 64
 * initializer calls, 292 = 36 + 112 + 16 + 120 + 8 nodes four ways, budgets one below);
 * each row of the blast-radius table with the work done before it was stopped; the
 * numbers the two charts show, read from their data files; the program's bad inputs. */
#include "litgrad_test.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "block.h"
#include "blockdemo.h"
#include "cost.h"
#include "init.h"
#include "matrix.h"
#include "model.h"
#include "value.h"

#include "litgrad_test_model.h"

LG_SUITE(stage08);

static const InitSpec SPEC = {INIT_NORMAL, 1.0, 1, INIT_ROLE_LINEAR};

/* A row of `width` leaves on `inputs` and a gain on it too. */
static Matrix *row_leaves(Tape *inputs, size_t rows, size_t width, const double *data)
{
    LgError err = LG_ERROR_INIT;
    Matrix *x = matrix_new_leaves(inputs, (Shape){rows, width}, data, "x", &err);
    cr_assert_not_null(x, "%s", err.message);
    return x;
}

static Vector *gain_leaves(Tape *inputs, size_t width, const double *data)
{
    LgError err = LG_ERROR_INIT;
    Vector *g = matrix_new_vector_leaves(inputs, width, data, "g", &err);
    cr_assert_not_null(g, "%s", err.message);
    if (data == NULL)
        for (size_t i = 0; i < width; i++)
            g->values[i]->data = 1.0;
    return g;
}

/* ---- the example row ---------------------------------------------------------------- */

Test(stage08, example_row_numbers_and_its_10_nodes_four_ways)
{
    LgError err = LG_ERROR_INIT;
    Tape *inputs = lg_new_tape(4), *graph = lg_new_tape(11);
    Matrix *x = row_leaves(inputs, 1, 2, (const double[]){3.0, -4.0});
    Vector *g = gain_leaves(inputs, 2, NULL);
    size_t closed = 0, hook = value_nodes_written();
    Matrix *y = rmsnorm_forward(graph, x, g, 0.0, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(value_nodes_written() - hook, 10, "the hook");
    cr_assert_eq(rmsnorm_nodes(1, 2, &closed, &err), LG_OK);
    cr_assert_eq(closed, 10, "T (4C + 2)");
    cr_assert_eq(tape_count(graph), 10, "the tape");
    CostReach reach = {0, 0};
    cr_assert_eq(cost_count_reachable(graph, y->values, 2, &reach, &err), LG_OK);
    cr_assert_eq(reach.operations, 10, "walked from y");
    cr_assert_eq(tape_at(graph, 3)->data, 12.5, "ms, exactly");
    cr_assert_eq(tape_at(graph, 5)->data, 3.5355339059327378, "r, the double nearest sqrt 12.5");
    cr_assert_float_eq(y->values[0]->data, 0.848528137423857, 1e-15);
    cr_assert_float_eq(y->values[1]->data, -1.131370849898476, 1e-15);
    matrix_free(&y);
    matrix_free_vector(&g);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* The closed form T (4C + 2) = the tape = the hook = the walk, over a grid of shapes, with
 * gains and inputs that are not special. */
Test(stage08, rmsnorm_node_count_closed_form_equals_tape_hook_and_walk)
{
    static const size_t batches[] = {1, 2, 3}, widths[] = {1, 2, 5, 16};
    LgError err = LG_ERROR_INIT;
    for (size_t a = 0; a < 3; a++) {
        for (size_t b = 0; b < 4; b++) {
            size_t T = batches[a], C = widths[b], closed = 0;
            Tape *inputs = lg_new_tape(T * C + C), *graph = lg_new_tape(T * (4 * C + 2));
            Matrix *x = row_leaves(inputs, T, C, NULL);
            for (size_t k = 0; k < T * C; k++)
                x->values[k]->data = (double)((int)(k % 5) - 2) / 3 + 0.1;
            Vector *g = gain_leaves(inputs, C, NULL);
            size_t hook = value_nodes_written();
            Matrix *y = rmsnorm_forward(graph, x, g, 1e-5, &err);
            cr_assert_not_null(y, "%s", err.message);
            cr_assert_eq(rmsnorm_nodes(T, C, &closed, &err), LG_OK);
            CostReach reach = {0, 0};
            cr_assert_eq(cost_count_reachable(graph, y->values, T * C, &reach, &err), LG_OK);
            cr_assert_eq(closed, T * (4 * C + 2));
            cr_assert_eq(tape_count(graph), closed, "T %zu C %zu", T, C);
            cr_assert_eq(value_nodes_written() - hook, closed, "T %zu C %zu", T, C);
            cr_assert_eq(reach.operations, closed, "T %zu C %zu", T, C);
            matrix_free(&y);
            matrix_free_vector(&g);
            matrix_free(&x);
            tape_free(&graph);
            tape_free(&inputs);
        }
    }
    cr_assert_eq(rmsnorm_nodes(0, 4, &(size_t){0}, &err), LG_ERR_SHAPE);
    cr_assert_eq(rmsnorm_nodes(SIZE_MAX / 4, 4, &(size_t){0}, &err), LG_ERR_OVERFLOW);
    cr_assert_eq(rmsnorm_nodes(1, SIZE_MAX / 2, &(size_t){0}, &err), LG_ERR_OVERFLOW);
}

/* The gradient of L = y0 + y1 three ways: backward, the closed form, central differences. */
Test(stage08, example_gradient_three_ways_and_orthogonal_to_x)
{
    static const double xs[2] = {3.0, -4.0}, ones[2] = {1.0, 1.0};
    LgError err = LG_ERROR_INIT;
    Tape *inputs = lg_new_tape(4), *graph = lg_new_tape(11);
    Matrix *x = row_leaves(inputs, 1, 2, xs);
    Vector *g = gain_leaves(inputs, 2, NULL);
    Matrix *y = rmsnorm_forward(graph, x, g, 0.0, &err);
    Value *L = value_add(graph, y->values[0], y->values[1]);
    value_backward(graph, L);
    double dx[2] = {x->values[0]->grad, x->values[1]->grad}, closed[2], dg[2];
    rmsnorm_row_gradient(xs, ones, 2, 0.0, ones, closed, dg);
    cr_assert_float_eq(dx[0], 0.31678383797157333, 1e-16);
    cr_assert_float_eq(dx[1], 0.23758787847867996, 1e-16);
    cr_assert_float_eq(closed[0], dx[0], 1e-16);
    cr_assert_float_eq(closed[1], dx[1], 1e-16);
    cr_assert_float_eq(dg[0], g->values[0]->grad, 1e-16, "dL/dg = dy x / r");
    cr_assert_float_eq(dg[1], g->values[1]->grad, 1e-16);
    cr_assert_lt(fabs(xs[0] * dx[0] + xs[1] * dx[1]), 1e-15, "x . dL/dx = 0");
    GradientCheck check;
    Value *const v[4] = {x->values[0], x->values[1], g->values[0], g->values[1]};
    cr_assert_eq(value_check_gradient(graph, L, v, 4, &check, &err), LG_OK, "%s", err.message);
    cr_assert_lt(check.error, GRADCHECK_TOLERANCE);
    matrix_free(&y);
    matrix_free_vector(&g);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* The same three ways on a row that is not special: width 5, gains not 1, eps 1e-3, and a
 * loss that weighs the outputs differently. */
Test(stage08, gradient_three_ways_on_a_general_row)
{
    static const double xs[5] = {0.7, -1.3, 0.2, 2.1, -0.4}, gs[5] = {1.5, -0.5, 2.0, 0.3, 1.1};
    static const double w[5] = {1.0, -2.0, 0.5, 3.0, -1.0};
    LgError err = LG_ERROR_INIT;
    Tape *inputs = lg_new_tape(10), *graph = lg_new_tape(40);
    Matrix *x = row_leaves(inputs, 1, 5, xs);
    Vector *g = gain_leaves(inputs, 5, gs);
    Matrix *y = rmsnorm_forward(graph, x, g, 1e-3, &err);
    Value *L = value_mul_number(graph, y->values[0], w[0]);
    for (size_t i = 1; i < 5; i++)
        L = value_add(graph, L, value_mul_number(graph, y->values[i], w[i]));
    value_backward(graph, L);
    double closed[5], dg[5];
    rmsnorm_row_gradient(xs, gs, 5, 1e-3, w, closed, dg);
    for (size_t i = 0; i < 5; i++) {
        cr_assert_float_eq(closed[i], x->values[i]->grad, 1e-14, "dx[%zu]", i);
        cr_assert_float_eq(dg[i], g->values[i]->grad, 1e-14, "dg[%zu]", i);
    }
    GradientCheck check;
    Value *const v[5] = {x->values[0], x->values[1], x->values[2], x->values[3], x->values[4]};
    cr_assert_eq(value_check_gradient(graph, L, v, 5, &check, &err), LG_OK, "%s", err.message);
    cr_assert_lt(check.error, GRADCHECK_TOLERANCE);
    matrix_free(&y);
    matrix_free_vector(&g);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* ---- epsilon ------------------------------------------------------------------------ */

Test(stage08, eps_identity_both_sides_at_1e_5)
{
    static const double xs[2] = {3.0, -4.0};
    LgError err = LG_ERROR_INIT;
    Tape *inputs = lg_new_tape(4), *graph = lg_new_tape(11);
    Matrix *x = row_leaves(inputs, 1, 2, xs);
    Vector *g = gain_leaves(inputs, 2, NULL);
    Matrix *y = rmsnorm_forward(graph, x, g, 1e-5, &err);
    value_backward(graph, value_add(graph, y->values[0], y->values[1]));
    double lhs = xs[0] * x->values[0]->grad + xs[1] * x->values[1]->grad;
    double rhs = 1e-5 / (12.5 + 1e-5) * (y->values[0]->data + y->values[1]->data);
    cr_assert_float_eq(lhs, -2.2627389845e-07, 1e-15);
    cr_assert_float_eq(rhs, -2.2627389845e-07, 1e-15);
    matrix_free(&y);
    matrix_free_vector(&g);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* Input scale: rms 1e-3 gives 0.3015113445777636; gradient at zero: 1 / sqrt(1e-5). */
Test(stage08, eps_sets_input_scale_and_the_largest_gradient)
{
    LgError err = LG_ERROR_INIT;
    Tape *inputs = lg_new_tape(4), *graph = lg_new_tape(10);
    Matrix *x = row_leaves(inputs, 1, 2, (const double[]){1e-3, -1e-3});
    Vector *g = gain_leaves(inputs, 2, NULL);
    Matrix *y = rmsnorm_forward(graph, x, g, 1e-5, &err);
    double a = y->values[0]->data, b = y->values[1]->data;
    cr_assert_float_eq(sqrt((a * a + b * b) / 2), 0.3015113445777636, 1e-15);
    x->values[0]->data = x->values[1]->data = 0.0;
    tape_forward(graph);
    cr_assert_eq(y->values[0]->data, 0.0);
    value_backward(graph, y->values[0]);
    cr_assert_eq(x->values[0]->grad, 316.2277660168379, "g / sqrt(eps), exactly");
    cr_assert_eq(x->values[1]->grad, 0.0);
    matrix_free(&y);
    matrix_free_vector(&g);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* Precision: 12.5 + 1e-17 == 12.5, the spacing at 12.5, and y bit-identical. */
Test(stage08, eps_below_the_spacing_of_the_doubles_does_nothing)
{
    volatile double ms = 12.5, tiny = 1e-17;
    cr_assert(ms + tiny == ms);
    cr_assert_eq(nextafter(12.5, INFINITY) - 12.5, 1.7763568394002505e-15);
    LgError err = LG_ERROR_INIT;
    Tape *inputs = lg_new_tape(4), *graph = lg_new_tape(20);
    Matrix *x = row_leaves(inputs, 1, 2, (const double[]){3.0, -4.0});
    Vector *g = gain_leaves(inputs, 2, NULL);
    Matrix *y0 = rmsnorm_forward(graph, x, g, 0.0, &err);
    Matrix *y1 = rmsnorm_forward(graph, x, g, 1e-17, &err);
    for (size_t i = 0; i < 2; i++)
        cr_assert(memcmp(&y0->values[i]->data, &y1->values[i]->data, sizeof(double)) == 0);
    matrix_free(&y1);
    matrix_free(&y0);
    matrix_free_vector(&g);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* Negative, NaN and infinite epsilons are refused everywhere one enters, by name. */
Test(stage08, eps_negative_nan_infinite_refused_with_rule_and_number)
{
    static const double bad[3] = {-1e-5, NAN, INFINITY};
    static const char *const shown[3] = {"got -1.0000000000000001e-05", "got nan", "got inf"};
    LgError err = LG_ERROR_INIT;
    Tape *inputs = lg_new_tape(4), *graph = lg_new_tape(10);
    Matrix *x = row_leaves(inputs, 1, 2, (const double[]){3.0, -4.0});
    Vector *g = gain_leaves(inputs, 2, NULL);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(rmsnorm_check_eps(bad[k], "eps", &err), LG_ERR_INVALID);
        Tally before = mlpdemo_tally_now();
        cr_assert_null(rmsnorm_forward(graph, x, g, bad[k], &err));
        cr_assert(strstr(err.message, "rmsnorm epsilon must be finite and >= 0") != NULL);
        cr_assert(strstr(err.message, shown[k]) != NULL, "%s", err.message);
        ModelPlan plan;
        cr_assert_eq(model_plan_prenorm("res", 4, 8, 1, 0, 0, bad[k], &SPEC, SIZE_MAX, &plan,
                                        &err), LG_ERR_INVALID);
        cr_assert(strstr(err.message, "fc1.rmsnorm epsilon must be finite and >= 0: ") !=
                  NULL, "%s", err.message);
        assert_nothing_since(before, "a bad epsilon");
        /* a plan changed by hand after it was made is refused by model_new */
        cr_assert_eq(model_plan_prenorm("res", 4, 8, 1, 0, 0, 1e-5, &SPEC, SIZE_MAX, &plan, &err),
                     LG_OK);
        plan.layer[0].eps = bad[k];
        before = mlpdemo_tally_now();
        cr_assert_null(model_new(&plan, &err));
        cr_assert_eq(err.status, LG_ERR_INVALID);
        assert_nothing_since(before, "model_new of a changed plan");
    }
    cr_assert_eq(tape_count(graph), 0);
    cr_assert_eq(rmsnorm_check_eps(0.0, "eps", &err), LG_OK);
    cr_assert_eq(rmsnorm_check_eps(DBL_MAX, "eps", &err), LG_OK);
    /* the number in the message is the number refused: it reads back as the same double */
    const double refused = -0.12345678901234567;
    cr_assert_eq(rmsnorm_check_eps(refused, "eps", &err), LG_ERR_INVALID);
    const char *got = strstr(err.message, "got ");
    cr_assert_not_null(got, "%s", err.message);
    double back = strtod(got + 4, NULL);
    cr_assert(memcmp(&back, &refused, sizeof back) == 0, "%s", err.message);
    matrix_free_vector(&g);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* A zero row with eps = 0: the checked forward names the row; nothing is left but nodes. */
Test(stage08, zero_row_with_eps_0_is_reported_with_its_row)
{
    LgError err = LG_ERROR_INIT;
    Tape *inputs = lg_new_tape(8), *graph = lg_new_tape(20);
    Matrix *x = row_leaves(inputs, 2, 2, (const double[]){3.0, -4.0, 0.0, 0.0});
    Vector *g = gain_leaves(inputs, 2, NULL);
    size_t blocks = mem_live_blocks();
    cr_assert_null(rmsnorm_forward(graph, x, g, 0.0, &err));
    cr_assert_eq(err.status, LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "rmsnorm row 1 is not finite: ms + eps = 0 (eps 0)");
    cr_assert_eq(mem_live_blocks(), blocks);
    tape_reset(graph);
    Matrix *y = rmsnorm_forward(graph, x, g, 1e-5, &err);
    cr_assert_not_null(y, "eps > 0 makes the zero row finite: %s", err.message);
    cr_assert_eq(y->values[2]->data, 0.0);
    matrix_free(&y);
    matrix_free_vector(&g);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* The checked forward refuses a gain of the wrong length and a tape too small, first. */
Test(stage08, rmsnorm_forward_refuses_before_the_first_node)
{
    LgError err = LG_ERROR_INIT;
    Tape *inputs = lg_new_tape(8), *graph = lg_new_tape(9);
    Matrix *x = row_leaves(inputs, 1, 2, (const double[]){3.0, -4.0});
    Vector *g3 = gain_leaves(inputs, 3, NULL), *g = gain_leaves(inputs, 2, NULL);
    Tally before = mlpdemo_tally_now();
    cr_assert_null(rmsnorm_forward(graph, x, g3, 0.0, &err));
    cr_assert_str_eq(err.message, "rmsnorm gain has 3 entries, x has 2 columns");
    cr_assert_null(rmsnorm_forward(graph, x, g, 0.0, &err));
    cr_assert_eq(err.status, LG_ERR_BUDGET, "10 nodes do not fit 9: %s", err.message);
    assert_nothing_since(before, "refused rmsnorm");
    matrix_free_vector(&g);
    matrix_free_vector(&g3);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* ---- the residual ------------------------------------------------------------------- */

Test(stage08, residual_costs_T_C_and_refuses_a_width_change)
{
    LgError err = LG_ERROR_INIT;
    size_t n = 0;
    cr_assert_eq(residual_nodes(2, 4, &n, &err), LG_OK);
    cr_assert_eq(n, 8);
    cr_assert_eq(residual_nodes(2, 0, &n, &err), LG_ERR_SHAPE);
    cr_assert_eq(residual_nodes(SIZE_MAX, 2, &n, &err), LG_ERR_OVERFLOW);
    Tape *inputs = lg_new_tape(26), *graph = lg_new_tape(8);
    Matrix *x = row_leaves(inputs, 2, 4, NULL), *f5 = row_leaves(inputs, 2, 5, NULL);
    Matrix *f4 = row_leaves(inputs, 2, 4, NULL);
    Tally before = mlpdemo_tally_now();
    cr_assert_null(residual_add(graph, x, f5, &err));
    cr_assert_str_eq(err.message, "residual shape rule: f must map (2, 4) to (2, 4): got (2, 5) "
                                  "from the branch");
    assert_nothing_since(before, "width-changing residual");
    size_t hook = value_nodes_written();
    Matrix *y = residual_add(graph, x, f4, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(value_nodes_written() - hook, 8, "T C");
    matrix_free(&y);
    matrix_free(&f4);
    matrix_free(&f5);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
}

/* The model plan checks the residual's width rule before anything exists. */
Test(stage08, model_plan_refuses_a_branch_that_changes_the_width)
{
    LgError err = LG_ERROR_INIT;
    LinearPlan layers[2];
    ModelPlan plan;
    cr_assert_eq(model_plan_layer("fc1", 4, 8, 0, &SPEC, &layers[0], &err), LG_OK);
    cr_assert_eq(model_plan_norm(&layers[0], 1e-5, &err), LG_OK);
    cr_assert_eq(model_plan_layer("fc2", 8, 5, 0, &SPEC, &layers[1], &err), LG_OK);
    cr_assert_eq(model_plan_residual(&layers[1], 2, &err), LG_OK);
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_make("res", layers, 2, SIZE_MAX, &plan, &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "residual shape rule: res.fc1..fc2 must map width 4 to width "
                                  "4: it maps 4 to 5");
    layers[1].residual = 3;
    cr_assert_eq(model_plan_make("res", layers, 2, SIZE_MAX, &plan, &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "the residual of res.fc2 spans 3 layers, only 2 end there");
    cr_assert_eq(model_plan_residual(&layers[1], 0, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "a residual spans 1 to 16 layers: got 0 at fc2");
    layers[0].use_norm = 2;
    cr_assert_eq(model_plan_make("res", layers, 2, SIZE_MAX, &plan, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "use_norm of fc1 must be 0 or 1: got 2");
    cr_assert_eq(model_plan_norm(&layers[1], 1e-5, &err), LG_OK);
    cr_assert_eq(model_plan_norm(&layers[1], 1e-5, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "fc2 already has an input norm");
    assert_nothing_since(before, "refused plans");
}

/* ---- the chapter's model ----------------------------------------------------------- */

static Model *chapter_model(double eps)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan;
    cr_assert_eq(model_plan_prenorm("res", 4, 8, 1, 0, 0, eps, &SPEC, SIZE_MAX, &plan, &err),
                 LG_OK, "%s", err.message);
    Model *m = model_new(&plan, &err);
    cr_assert_not_null(m, "%s", err.message);
    return m;
}

static Matrix *chapter_input(Tape *inputs, int zero_row)
{
    tape_reset(inputs);
    Matrix *x = row_leaves(inputs, 2, 4, NULL);
    for (size_t k = 0; k < 8; k++)
        x->values[k]->data = zero_row && k >= 4 ? 0.0 : (double)((int)(k % 7) - 3) / 4;
    return x;
}

Test(stage08, chapter_model_68_parameters_292_nodes_four_ways)
{
    LgError err = LG_ERROR_INIT;
    size_t calls = init_call_count();
    Model *m = chapter_model(1e-5);
    cr_assert_eq(init_call_count() - calls, 64, "the gain is not drawn");
    cr_assert_eq(model_parameter_count(m), 68);
    cr_assert_eq(m->plan.parameters, 68);
    cr_assert_eq(tape_count(m->parameters), 68);
    char name[MODEL_PARAMETER_NAME_MAX];
    model_parameter_name(m, 32, name, sizeof name);
    cr_assert_str_eq(name, "res.fc1.gain[0]");
    model_parameter_name(m, 35, name, sizeof name);
    cr_assert_str_eq(name, "res.fc1.gain[3]");
    model_parameter_name(m, 36, name, sizeof name);
    cr_assert_str_eq(name, "res.fc2.weight[0,0]");
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(m->layer[0].gain->values[i]->data, 1.0);
    ModelForwardPlan f;
    cr_assert_eq(model_plan_forward(&m->plan, (Shape){2, 4}, SIZE_MAX, &f, &err), LG_OK);
    static const ModelStepKind kinds[5] = {MODEL_STEP_RMSNORM, MODEL_STEP_LINEAR,
                                           MODEL_STEP_RELU, MODEL_STEP_LINEAR,
                                           MODEL_STEP_RESIDUAL};
    static const size_t nodes[5] = {36, 112, 16, 120, 8};
    cr_assert_eq(f.steps, 5);
    for (size_t s = 0; s < 5; s++) {
        cr_assert_eq(f.step[s].kind, kinds[s], "step %zu", s);
        cr_assert_eq(f.step[s].nodes, nodes[s], "step %zu", s);
    }
    cr_assert_eq(f.step[4].from, MODEL_STEP_INPUT, "the residual adds x");
    cr_assert_eq(f.nodes, 292);
    Tape *inputs = lg_new_tape(8), *graph = lg_new_tape(292);
    Matrix *x = chapter_input(inputs, 0);
    ModelForwardReport r;
    Matrix *y = model_forward(m, graph, x, 292, &r, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(y->rows, 2);
    cr_assert_eq(y->cols, 4);
    cr_assert_eq(r.graph_nodes, 292);
    cr_assert_eq(r.scalar_ops, 292);
    CostReach reach = {0, 0};
    cr_assert_eq(cost_count_reachable(graph, y->values, 8, &reach, &err), LG_OK);
    cr_assert_eq(reach.operations, 292);
    /* the residual: y = x + fc2(...), and the gains are parents of the norm's outputs */
    cr_assert_eq(y->values[0]->parents[0], x->values[0]);
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

Test(stage08, chapter_model_budgets_one_below_do_nothing)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan;
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_prenorm("res", 4, 8, 1, 0, 0, 1e-5, &SPEC, 67, &plan, &err),
                 LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "parameter budget exceeded: need 68, limit 67");
    assert_nothing_since(before, "parameter budget 67");
    cr_assert_eq(model_plan_prenorm("res", 4, 8, 1, 0, 0, 1e-5, &SPEC, 68, &plan, &err), LG_OK);
    Model *m = chapter_model(1e-5);
    Tape *inputs = lg_new_tape(8), *graph = lg_new_tape(292);
    Matrix *x = chapter_input(inputs, 0);
    ModelForwardReport r;
    before = mlpdemo_tally_now();
    cr_assert_null(model_forward(m, graph, x, 291, &r, &err));
    cr_assert_str_eq(err.message, "node budget exceeded: need 292, limit 291");
    cr_assert_eq(r.scalar_ops, 0);
    assert_nothing_since(before, "node budget 291");
    Matrix *y = model_forward(m, graph, x, 292, &r, &err);
    cr_assert_not_null(y);
    cr_assert_eq(r.scalar_ops, 292);
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* The seal covers the gains: a short gain, an aliased gain, a replaced gain. */
Test(stage08, seal_refuses_short_aliased_and_replaced_gains)
{
    LgError err = LG_ERROR_INIT;
    Model *m = chapter_model(1e-5);
    Tape *hand = lg_new_tape(8);
    Vector *short_gain = gain_leaves(hand, 3, NULL), *other = gain_leaves(hand, 4, NULL);
    Linear layers[2] = {m->layer[0], m->layer[1]};
    ParameterSeal seal;
    layers[0].gain = short_gain;
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_seal_layers("res", layers, 2, &seal, &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "res.fc1.gain has 3 entries, its plan says 4");
    Value *aliased[4];
    Vector alias = {4, aliased};
    memcpy(aliased, m->layer[0].gain->values, sizeof aliased);
    aliased[1] = m->layer[0].weight->values[0];
    layers[0].gain = &alias;
    cr_assert_eq(model_seal_layers("res", layers, 2, &seal, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "undeclared parameter alias: res.fc1.weight[0,0] and "
                                  "res.fc1.gain[1] are one Value");
    layers[0].gain = NULL;
    cr_assert_eq(model_seal_layers("res", layers, 2, &seal, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "res.fc1 declares an input norm and has no gain");
    layers[0].gain = m->layer[0].gain;
    layers[1].gain = other;
    cr_assert_eq(model_seal_layers("res", layers, 2, &seal, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "res.fc2 has a gain its plan does not declare");
    assert_nothing_since(before, "refused seals");
    Tape *inputs = lg_new_tape(8), *graph = lg_new_tape(292);
    Matrix *x = chapter_input(inputs, 0);
    Vector *own = m->layer[0].gain;
    m->layer[0].gain = other;
    ModelForwardReport r;
    before = mlpdemo_tally_now();
    cr_assert_null(model_forward(m, graph, x, SIZE_MAX, &r, &err));
    cr_assert_str_eq(err.message, "fc1 parameter storage identity changed: res.fc1.gain[0] is "
                                  "not the sealed Value");
    assert_nothing_since(before, "replaced gain");
    m->layer[0].gain = own;
    /* an optimizer may change a gain's data between forwards; the seal does not mind */
    own->values[2]->data = 0.5;
    Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(own->values[2]->data, 0.5, "a forward changes no gain");
    matrix_free(&y);
    matrix_free(&x);
    matrix_free_vector(&other);
    matrix_free_vector(&short_gain);
    tape_free(&graph);
    tape_free(&inputs);
    tape_free(&hand);
    model_free(&m);
}

/* A zero row with eps = 0 in the model: reported with its step, row and position. */
Test(stage08, model_forward_reports_a_zero_row_with_its_position)
{
    LgError err = LG_ERROR_INIT;
    Model *m = chapter_model(0.0);
    Tape *inputs = lg_new_tape(8), *graph = lg_new_tape(292);
    Matrix *x = chapter_input(inputs, 1);
    ModelForwardReport r;
    size_t blocks = mem_live_blocks();
    cr_assert_null(model_forward(m, graph, x, SIZE_MAX, &r, &err));
    cr_assert_eq(err.status, LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "forward made nan at res.fc1.rmsnorm (step 1), row 1, tape "
                     "position 28: ms + eps = 0 (eps 0)", "a NaN without a sign");
    cr_assert_eq(r.graph_nodes, 292, "the nodes stay on the graph tape");
    cr_assert_eq(mem_live_blocks(), blocks, "no block is left");
    tape_reset(graph);
    x->values[4]->data = 1.0; /* a row that is not zero: the same model runs */
    Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
    cr_assert_not_null(y, "%s", err.message);
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* A network that mixes every kind: two blocks and a head; the ReLU rule and the steps. */
Test(stage08, prenorm_network_with_head_plans_every_kind_in_order)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan;
    cr_assert_eq(model_plan_prenorm("net", 4, 8, 2, 3, 1, 1e-5, &SPEC, SIZE_MAX, &plan, &err),
                 LG_OK, "%s", err.message);
    cr_assert_eq(plan.layers, 5);
    cr_assert_str_eq(plan.layer[4].name, "head");
    /* 2 blocks of (4 + 32 + 8 + 32 + 4) and a head of 4 + 12 + 3 */
    cr_assert_eq(plan.parameters, 2 * 80 + 19);
    cr_assert_eq(plan.layer[0].init.role, INIT_ROLE_RELU);
    cr_assert_eq(plan.layer[1].init.role, INIT_ROLE_LINEAR);
    ModelForwardPlan f;
    cr_assert_eq(model_plan_forward(&plan, (Shape){3, 4}, SIZE_MAX, &f, &err), LG_OK);
    static const ModelStepKind kinds[] = {
        MODEL_STEP_RMSNORM, MODEL_STEP_LINEAR, MODEL_STEP_RELU, MODEL_STEP_LINEAR,
        MODEL_STEP_RESIDUAL, MODEL_STEP_RMSNORM, MODEL_STEP_LINEAR, MODEL_STEP_RELU,
        MODEL_STEP_LINEAR, MODEL_STEP_RESIDUAL, MODEL_STEP_RMSNORM, MODEL_STEP_LINEAR};
    cr_assert_eq(f.steps, 12);
    for (size_t s = 0; s < 12; s++)
        cr_assert_eq(f.step[s].kind, kinds[s], "step %zu", s);
    cr_assert_eq(f.step[4].from, MODEL_STEP_INPUT);
    cr_assert_eq(f.step[9].from, 4, "block 2 adds block 1's output");
    size_t block = 3 * 18 + 3 * 8 * (2 * 4) + 3 * 8 + 3 * 4 * (2 * 8) + 3 * 4;
    cr_assert_eq(f.nodes, 2 * block + 3 * 18 + 3 * 3 * (2 * 4));
    Model *m = model_new(&plan, &err);
    cr_assert_not_null(m, "%s", err.message);
    Tape *inputs = lg_new_tape(12), *graph = lg_new_tape(f.nodes);
    Matrix *x = row_leaves(inputs, 3, 4, NULL);
    for (size_t k = 0; k < 12; k++)
        x->values[k]->data = (double)((int)(k % 7) - 3) / 4;
    ModelForwardReport r;
    Matrix *y = model_forward(m, graph, x, f.nodes, &r, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(r.graph_nodes, f.nodes);
    cr_assert_eq(y->cols, 3);
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
    cr_assert_eq(model_plan_prenorm("net", 4, 8, 8, 3, 0, 1e-5, &SPEC, SIZE_MAX, &plan, &err),
                 LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "a pre-norm network has 1 to 7 blocks: got 8");
    cr_assert_eq(model_plan_prenorm("net", 4, 8, 0, 0, 0, 1e-5, &SPEC, SIZE_MAX, &plan, &err),
                 LG_ERR_INVALID);
}

/* Every allocation of model_new fails in turn: nothing is left. */
Test(stage08, every_allocation_failure_of_model_new_with_gains_leaves_nothing)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan;
    cr_assert_eq(model_plan_prenorm("res", 4, 8, 1, 0, 0, 1e-5, &SPEC, SIZE_MAX, &plan, &err),
                 LG_OK);
    size_t blocks = mem_live_blocks(), k = 1;
    for (;; k++) {
        mem_fail_at(k);
        Model *m = model_new(&plan, &err);
        mem_fail_at(0);
        if (m != NULL) {
            model_free(&m);
            break;
        }
        cr_assert_eq(err.status, LG_ERR_ALLOC, "allocation %zu: %s", k, err.message);
        cr_assert_eq(mem_live_blocks(), blocks, "allocation %zu left a block", k);
    }
    /* Stage 07's 12 for two bias-free layers, and 2 for the gain */
    cr_assert_eq(k - 1, 14);
}

/* ---- the program and its charts ----------------------------------------------------- */

Test(stage08, program_prints_every_number_and_passes_its_sanity_check)
{
    static ProgramRun run;
    run_program(&run, "stage-08", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    lg_expect_short_lines(run.output);
    static const char *const expected[] = {
        "ms = 12.5, r = 3.5355339059327378",
        "y = (0.848528137423857, -1.131370849898476)",
        "nodes: T (4C + 2) = 10; graph tape 10; hook 10; walked from y 10",
        "output rms 0.3015113445777636, not 1",
        "dy0/dx0 = 316.2277660168379 = g / sqrt(eps)",
        "12.5 + 1e-17 == 12.5: yes; the doubles near 12.5 are 1.7763568394002505e-15 apart",
        "bit-identical to y with eps = 0: yes",
        "parameters: 68 = 4 (gain) + 32 (fc1) + 32 (fc2); initializer calls 64",
        "plan: rmsnorm 36 + fc1 112 + relu 16 + fc2 120 + residual 8 = 292 nodes",
        "built: output (2, 4); 292 nodes on the graph tape, 292 by the hook, 292 walked",
        "parameter budget 67: parameter budget exceeded: need 68, limit 67 -> 0 initializer",
        "node budget 291: node budget exceeded: need 292, limit 291 -> scalar operations 0",
        "node budget 292: output after exactly 292 scalar operations",
        "sanity check: PASS",
    };
    for (size_t k = 0; k < sizeof expected / sizeof expected[0]; k++)
        cr_assert(strstr(run.output, expected[k]) != NULL, "missing '%s'", expected[k]);
}

/* Each blast-radius row: the status and no work (but row 8's nodes, which stay). */
Test(stage08, program_blast_radius_rows_do_no_work)
{
    static ProgramRun run;
    run_program(&run, "stage-08", "");
    static const char *const rows[] = {
        " 1  epsilon -1e-05                     invalid        0     0      0",
        " 1  epsilon nan                        invalid        0     0      0",
        " 1  epsilon inf                        invalid        0     0      0",
        " 2  residual branch maps 4 to 5        shape          0     0      0",
        " 3  parameter budget 67 (need 68)      budget         0     0      0",
        " 4  gain of length 3 (needs 4)         shape          0     0      0",
        " 5  gain aliased with a weight         identity       0     0      0",
        " 6  replaced gain storage              identity       0     0      0",
        " 7  node budget 291 (need 292)         budget         0     0      0",
        " 8  zero row, epsilon 0                nonfinite      0   292      0",
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
        cr_assert(strstr(run.output, rows[k]) != NULL, "missing row '%s'", rows[k]);
}

/* A row that loses an allocation is the table's last. The run is the same up to its
 * lost allocation, so the row of the loss only moves on as k grows: bisection finds the
 * first k whose loss still prints row 5, which is then a loss inside row 5's seal. */
Test(stage08, program_blast_radius_stops_at_the_row_that_lost_its_allocation)
{
    static LgRun run;
    static const char row5[] = " 5  gain aliased with a weight ";
    char env[64];
    size_t lo = 1, hi = 4096;
    while (lo < hi) {
        size_t k = lo + (hi - lo) / 2;
        snprintf(env, sizeof env, "LITGRAD_FAIL_ALLOC=%zu", k);
        lg_run(&run, env, "stage-08", "");
        if (strstr(run.out, row5) != NULL)
            hi = k;
        else
            lo = k + 1;
    }
    snprintf(env, sizeof env, "LITGRAD_FAIL_ALLOC=%zu", lo);
    lg_run(&run, env, "stage-08", "");
    cr_assert(strstr(run.out, " 5  gain aliased with a weight         alloc") != NULL,
              "k = %zu: %s", lo, run.out);
    cr_assert(strstr(run.out, " 4  gain of length 3 (needs 4)         shape") != NULL);
    cr_assert_null(strstr(run.out, " 6  replaced gain storage"), "rows after 5 not run");
    cr_assert_null(strstr(run.out, " 7  node budget 291"));
    cr_assert_null(strstr(run.out, " 8  zero row"));
    cr_assert_eq(run.status, 1, "%s", run.err);
    cr_assert(strstr(run.err, "stage-08: error: out of memory") != NULL, "%s", run.err);
}

/* A rule the command line breaks is refused before anything is done or printed: exit 1,
 * one line on stderr, nothing on stdout (the zero row is found by the forward, and is
 * reported the same way). */
Test(stage08, program_broken_rules_exit_1_with_one_line_and_no_output)
{
    static LgRun run;
    static const struct {
        const char *args, *message;
    } cases[] = {
        {"--branch-out 5", "residual shape rule: res.fc1..fc2 must map width 4 to width 4: it "
                           "maps 4 to 5"},
        {"--param-budget 67", "parameter budget exceeded: need 68, limit 67"},
        {"--node-budget 291", "node budget exceeded: need 292, limit 291"},
        {"--blocks 2 --node-budget 583", "node budget exceeded: need 584, limit 583"},
        /* the plan limit of the book's programs (Stage 03), before the model exists */
        {"--width 2048 --hidden 2048 --batch 1", "plan limit exceeded: the plan needs "
                                                 "25178114 nodes (1.2 GB), limit 16777216"},
        {"--eps 0 --zero-row", "forward made nan at res.fc1.rmsnorm (step 1), row 1, tape "
                               "position 28: ms + eps = 0 (eps 0)"},
        /* -0 is read as 0 (Stage 01, read_double): the message says eps 0 */
        {"--eps -0 --zero-row", "forward made nan at res.fc1.rmsnorm (step 1), row 1, tape "
                                "position 28: ms + eps = 0 (eps 0)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        lg_run(&run, "", "stage-08", cases[k].args);
        cr_assert_eq(run.status, 1, "'%s': %s", cases[k].args, run.err);
        cr_assert(strncmp(run.err, "stage-08: error: ", 17) == 0, "%s", run.err);
        cr_assert(strstr(run.err, cases[k].message) != NULL, "'%s': %s", cases[k].args,
                  run.err);
        cr_assert_eq(strchr(run.err, '\n'), run.err + strlen(run.err) - 1, "one line");
        cr_assert_str_eq(run.out, "", "'%s': nothing on stdout", cases[k].args);
    }
    lg_run(&run, "", "stage-08", "--zero-row --batch 1"); /* no row 1: the command line's */
    cr_assert_eq(run.status, 2, "%s", run.err);
    cr_assert_str_eq(run.err, "stage-08: error: --zero-row zeros row 1 of the input, which "
                     "has rows 0..0: --batch must be at least 2, not 1\n");
    cr_assert_str_eq(run.out, "");
    lg_run(&run, "", "stage-08", "--node-budget 292");
    cr_assert_eq(run.status, 0);
    cr_assert_str_eq(run.out, "width: 4\nhidden: 8\nblocks: 1\neps: 1.0000000000000001e-05\n"
                     "parameters: 68\ninitializer calls: 64\nplanned nodes: 292\n"
                     "scalar ops: 292\noutput shape: (2, 4)\nactual nodes: 292\n");
}

/* A network whose forward no tape can hold is refused by the forward plan, before the
 * parameters are materialized: 8 blocks of width 1 and hidden width 10000 at T = 1000
 * plan 320,048,000 nodes (160,008 parameters). LITGRAD_FAIL_ALLOC=1 fails the run's
 * first allocation, so a run that made anything before the refusal would report
 * running out of memory instead. */
Test(stage08, program_refuses_a_forward_larger_than_a_tape_before_any_allocation)
{
    static LgRun run;
    lg_run(&run, "LITGRAD_FAIL_ALLOC=1 timeout 20", "stage-08",
           "--blocks 8 --width 1 --hidden 10000 --batch 1000");
    cr_assert_eq(run.status, 1, "%s", run.err);
    cr_assert_str_eq(run.err, "stage-08: error: tape capacity exceeded: need 320048000 nodes, "
                              "134217728 free of 134217728\n");
    cr_assert_str_eq(run.out, "");
}

Test(stage08, program_bad_command_lines_exit_2)
{
    static const LgBadLine lines[] = {
        {"--eps nan", "--eps must be a number in [0, inf): got 'nan'"},
        {"--eps inf", "--eps must be a number in [0, inf): got 'inf'"},
        {"--eps -inf", "--eps must be a number in [0, inf): got '-inf'"},
        {"--eps 1e999", "--eps must be a number in [0, inf): got '1e999'"},
        {"--eps -1e-5", "--eps must be a number in [0, inf): got '-1e-5'"},
        {"--eps -0.12345678901234567", "got '-0.12345678901234567'"},
        {"--eps -4.9e-324", "--eps must be a number in [0, inf): got '-4.9e-324'"},
        /* in [0, inf) as typed, but no double holds it: the message says so */
        {"--eps 1e-400", "--eps underflows to zero: got '1e-400' (the smallest nonzero "
                         "double is 4.9e-324)"},
        {"--eps x", "--eps"},
        {"--eps", "option '--eps' needs a value"},
        {"--blocks 9", "--blocks must be an integer in [1, 8]"},
        {"--blocks 0", "--blocks must be an integer in [1, 8]"},
        {"--width 0", "--width must be an integer"},
        {"--branch-out -4", "--branch-out"},
        {"--node-budget 1e3", "--node-budget"},
        {"extra", "unexpected argument 'extra'"},
        {"--figure-data ''", "--figure-data"},
        {"--figure-data {FILE}", "--figure-data"},
        {"--figure-data /tmp --eps 1e-5", "option '--figure-data' does not apply"},
    };
    size_t n = lg_expect_usage_errors("stage-08", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 15);
    static LgRun run;
    lg_run(&run, "", "stage-08", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.out, "usage: stage-08") != NULL);
    lg_expect_short_lines(run.out);
}

/* Every allocation of the option run fails in turn: exit 1 with the out-of-memory
 * message, never a success with other output. */
Test(stage08, program_option_run_survives_every_allocation_failure)
{
    size_t k = lg_walk_allocation_failures("stage-08", "--blocks 2 --node-budget 100000");
    cr_assert_geq(k, 10, "the option run makes %zu allocations", k);
}

/* The charts' data: what the text says they show, checked in numbers. */
Test(stage08, chart_data_shows_what_the_text_states)
{
    char dir[] = "/tmp/lg-stage08-XXXXXX", path[512], args[600], line[512];
    cr_assert_not_null(mkdtemp(dir));
    static ProgramRun run;
    snprintf(args, sizeof args, "--figure-data %s", dir);
    run_program(&run, "stage-08", args);
    cr_assert_eq(run.status, 0, "%s", run.output);
    snprintf(path, sizeof path, "%s/fig-08-rms.dat", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t rows = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#')
            continue;
        double v[9];
        cr_assert_eq(sscanf(line, "%lf %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2],
                            &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]), 9);
        cr_assert_float_eq(v[0], pow(10.0, -10.0 + 0.25 * (double)rows), 1e-9 * v[0]);
        cr_assert_float_eq(v[1], 1.0, 1e-15, "eps = 0 normalizes at every scale: %g", v[0]);
        for (int e = 1; e < 5; e++)
            cr_assert_float_eq(v[e], v[e + 4], 1e-14 * v[e + 4], "row %zu eps %d", rows, e);
        rows++;
    }
    fclose(f);
    cr_assert_eq(rows, 49, "twelve decades, four points each");
    snprintf(path, sizeof path, "%s/fig-08-depth.dat", dir);
    f = fopen(path, "r");
    cr_assert_not_null(f);
    double g[32][3], a[32][3];
    rows = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#')
            continue;
        int d;
        cr_assert_eq(sscanf(line, "%d %lf %lf %lf %lf %lf %lf", &d, &g[rows][0], &g[rows][1],
                            &g[rows][2], &a[rows][0], &a[rows][1], &a[rows][2]), 7);
        cr_assert_eq((size_t)d, rows + 1);
        rows++;
    }
    fclose(f);
    cr_assert_eq(rows, 32);
    /* without a norm the residual stack grows exponentially, activations and gradients */
    cr_assert_gt(g[31][1] / g[0][1], 1000.0, "residual gradient x%g", g[31][1] / g[0][1]);
    cr_assert_gt(a[31][1] / a[0][1], 1000.0, "residual activations x%g", a[31][1] / a[0][1]);
    /* with the pre-norm the mean square grows by about one per block: 1 + d */
    cr_assert_lt(fabs(a[15][2] * a[15][2] / 17.0 - 1.0), 0.1, "ms at 16: %g", a[15][2]);
    cr_assert_lt(fabs(a[31][2] * a[31][2] / 33.0 - 1.0), 0.1, "ms at 32: %g", a[31][2]);
    cr_assert(g[31][2] / g[0][2] > 1.0 && g[31][2] / g[0][2] < 32.0, "pre-norm gradient x%g",
              g[31][2] / g[0][2]);
    /* with an identity path the gradient never falls below 1; without one, it does */
    double low[3] = {INFINITY, INFINITY, INFINITY};
    for (size_t d = 0; d < 32; d++)
        for (int s = 0; s < 3; s++)
            low[s] = fmin(low[s], g[d][s]);
    cr_assert_geq(low[1], 1.0);
    cr_assert_geq(low[2], 1.0);
    cr_assert_lt(low[0], 0.2, "plain: %g", low[0]);
    cr_assert_lt(a[31][0], 0.1, "plain activations at 32: %g", a[31][0]);
    remove(path);
    snprintf(path, sizeof path, "%s/fig-08-rms.dat", dir);
    remove(path);
    rmdir(dir);
}

/* A FIFO or a symbolic link at either chart's data file is refused when the command line
 * is read, before the chapter's report: exit 2, nothing on standard output. */
Test(stage08, a_fifo_at_a_data_file_name_is_refused_before_anything)
{
    size_t runs = lg_expect_outputs_refused("stage-08", "--figure-data",
                                            BLOCKDEMO_FIGURE_FILES, "");
    cr_assert_eq(runs, 3);
}
