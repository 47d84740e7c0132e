/* Stage 07: LinearPlan, ModelPlan, the identity seal, ModelForwardPlan, the forward.
 *
 * Every number of the chapter is asserted here: 20 parameters, 76 = 40 + 8 + 28 nodes
 * counted three ways, 0 initializer calls under a parameter budget of 19, 0 scalar
 * operations under a node budget of 37 and exactly 38 under 38, delta P = 6 and
 * delta G = 12, the identity errors, the gradient of the seed's Linear. Each row of the
 * blast-radius table is a test that asserts the error, where it was stopped, and that
 * nothing was done before it: initializer calls, nodes written on any tape (the hook),
 * live blocks, the graph tape's count. */
#include "litgrad_test.h"

#include <math.h>
#include <stdint.h>
#include <sys/resource.h>

#include "cost.h"
#include "init.h"
#include "matrix.h"
#include "model.h"
#include "mlpdemo.h"
#include "value.h"
#include "variance.h"

#include "litgrad_test_model.h"

LG_SUITE(stage07);

static const InitSpec SPEC = {INIT_NORMAL, 1.0, 1, INIT_ROLE_LINEAR};

static ModelPlan mlp_plan(const size_t widths[], size_t count, int bias, size_t limit)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan;
    cr_assert_eq(model_plan_mlp("mlp", widths, count, bias, &SPEC, limit, &plan, &err), LG_OK,
                 "%s", err.message);
    return plan;
}

static Model *seed_model(int bias)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan = mlp_plan((const size_t[]){3, 4, 2}, 3, bias, SIZE_MAX);
    Model *m = model_new(&plan, &err);
    cr_assert_not_null(m, "%s", err.message);
    return m;
}

/* x: (T, C) of small binary fractions, as the program's input. */
static Matrix *input(Tape *tape, size_t rows, size_t cols)
{
    LgError err = LG_ERROR_INIT;
    Matrix *x = matrix_new_leaves(tape, (Shape){rows, cols}, NULL, "x", &err);
    cr_assert_not_null(x, "%s", err.message);
    for (size_t k = 0; k < rows * cols; k++)
        x->values[k]->data = (double)((int)(k % 7) - 3) / 4;
    return x;
}

static int has(const LgError *err, const char *text)
{
    return strstr(err->message, text) != NULL;
}

/* ---- LinearPlan and ModelPlan ------------------------------------------------------ */

Test(stage07, linear_plan_derives_shapes_and_parameter_count)
{
    LgError err = LG_ERROR_INIT;
    LinearPlan p;
    cr_assert_eq(model_plan_layer("fc1", 3, 4, 0, &SPEC, &p, &err), LG_OK, "%s", err.message);
    cr_assert_str_eq(p.name, "fc1");
    cr_assert_eq(p.weight_shape.rows, 4, "one row per output feature");
    cr_assert_eq(p.weight_shape.cols, 3);
    cr_assert_eq(p.bias_length, 0);
    cr_assert_eq(p.parameters, 12, "P_linear = C_out C_in");
    cr_assert_eq(model_plan_layer("fc1", 3, 4, 1, &SPEC, &p, &err), LG_OK);
    cr_assert_eq(p.bias_length, 4);
    cr_assert_eq(p.parameters, 16, "P_linear = C_out C_in + C_out");
}

/* Row 1 of the table: invalid feature, name, init -- stopped by LinearPlan validation
 * before any parameter exists. C's version of "an exact int, not a bool": 0 is refused,
 * a negative int converted to size_t is refused by the shape bound, use_bias must be
 * exactly 0 or 1. */
Test(stage07, row1_invalid_feature_name_or_init_is_refused_by_the_linear_plan)
{
    LgError err = LG_ERROR_INIT;
    LinearPlan p;
    memset(&p, 0x5a, sizeof p);
    LinearPlan untouched = p;
    InitSpec bad_gain = SPEC, bad_role = SPEC;
    bad_gain.gain = 0.0;
    bad_role.role = (InitRole)7;
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_layer("fc1", 0, 4, 0, &SPEC, &p, &err), LG_ERR_SHAPE);
    cr_assert(has(&err, "features of fc1 must be positive: got in 0, out 4"), "%s", err.message);
    cr_assert_eq(model_plan_layer("fc1", (size_t)-1, 4, 0, &SPEC, &p, &err), LG_ERR_SHAPE);
    cr_assert(has(&err, "shape of fc1.weight too large: (4, 18446744073709551615)"), "%s",
              err.message);
    cr_assert_eq(model_plan_layer("fc1", 3, 4, 2, &SPEC, &p, &err), LG_ERR_INVALID);
    cr_assert(has(&err, "use_bias of fc1 must be 0 or 1: got 2"), "%s", err.message);
    static const char *const names[] = {"", "fc 1", " fc1", "fc1.weight", "fc[1]",
                                        "a_name_of_thirty_two_characters_"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        cr_assert_eq(model_plan_layer(names[k], 3, 4, 0, &SPEC, &p, &err), LG_ERR_INVALID,
                     "'%s'", names[k]);
        cr_assert(has(&err, "a layer name must be 1 to 31 characters of A-Z, a-z, 0-9 and _"),
                  "%s", err.message);
    }
    cr_assert_eq(model_plan_layer("fc1", 3, 4, 0, &bad_gain, &p, &err), LG_ERR_INVALID);
    cr_assert(has(&err, "fc1: init gain must be finite and > 0: got 0"), "%s", err.message);
    cr_assert_eq(model_plan_layer("fc1", 3, 4, 0, &bad_role, &p, &err), LG_ERR_INVALID);
    cr_assert(has(&err, "fc1: init role must be linear (0) or relu (1): got 7"));
    cr_assert_eq(memcmp(&p, &untouched, sizeof p), 0, "a refused plan writes nothing");
    assert_nothing_since(before, "refused LinearPlans");
    cr_assert_eq(model_plan_layer("a_name_of_thirty_one_characters", 3, 4, 0, &SPEC, &p, &err),
                 LG_OK, "31 characters are allowed");
}

Test(stage07, the_seed_mlp_plan_has_20_parameters_and_the_roles_of_stage_06)
{
    ModelPlan plan = mlp_plan((const size_t[]){3, 4, 2}, 3, 0, SIZE_MAX);
    cr_assert_eq(plan.layers, 2);
    cr_assert_str_eq(plan.layer[0].name, "fc1");
    cr_assert_str_eq(plan.layer[1].name, "fc2");
    cr_assert_eq(plan.layer[0].parameters, 12);
    cr_assert_eq(plan.layer[1].parameters, 8);
    cr_assert_eq(plan.parameters, 20, "P_MLP = 3 * 4 + 4 * 2");
    cr_assert_eq(plan.layer[0].init.role, INIT_ROLE_RELU, "fc1 feeds a ReLU: He");
    cr_assert_eq(plan.layer[1].init.role, INIT_ROLE_LINEAR, "fc2 is last: standard");
    ModelPlan with_bias = mlp_plan((const size_t[]){3, 4, 2}, 3, 1, SIZE_MAX);
    cr_assert_eq(with_bias.parameters - plan.parameters, 6, "delta P = 4 + 2");
}

/* Row 2: adjacent widths that do not connect are refused by the ModelPlan, before any
 * layer is materialized. A plan's derived fields come from the rules, not the caller. */
Test(stage07, row2_adjacent_width_mismatch_is_refused_by_the_model_plan)
{
    LgError err = LG_ERROR_INIT;
    LinearPlan layers[2];
    ModelPlan plan;
    cr_assert_eq(model_plan_layer("fc1", 3, 4, 0, &SPEC, &layers[0], &err), LG_OK);
    cr_assert_eq(model_plan_layer("fc2", 5, 2, 0, &SPEC, &layers[1], &err), LG_OK);
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_make("mlp", layers, 2, SIZE_MAX, &plan, &err), LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "layer widths do not connect: mlp.fc1 has 4 outputs, mlp.fc2 "
                                  "expects 5 inputs");
    assert_nothing_since(before, "width mismatch");
    layers[1].in_features = 4;
    layers[1].parameters = 1; /* a derived field the caller got wrong */
    cr_assert_eq(model_plan_make("mlp", layers, 2, SIZE_MAX, &plan, &err), LG_OK, "%s",
                 err.message);
    cr_assert_eq(plan.parameters, 20, "re-derived from the sizes");
    cr_assert_eq(model_plan_make("mlp", layers, 0, SIZE_MAX, &plan, &err), LG_ERR_INVALID);
    cr_assert(has(&err, "a model must have 1 to 16 layers: got 0"));
    cr_assert_eq(model_plan_make("m.1", layers, 2, SIZE_MAX, &plan, &err), LG_ERR_INVALID);
    cr_assert(has(&err, "a model name must be 1 to 31 characters"));
    cr_assert_eq(model_plan_mlp("mlp", (const size_t[]){3}, 1, 0, &SPEC, SIZE_MAX, &plan, &err),
                 LG_ERR_INVALID);
    cr_assert(has(&err, "an MLP needs 2 to 17 widths: got 1"));
}

/* Row 3: the seed's "parameter budget 19: 0 initializer calls", at the plan and at
 * model_new (which checks the plan again), with nothing allocated. */
Test(stage07, row3_parameter_budget_19_makes_0_initializer_calls)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan;
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_mlp("mlp", (const size_t[]){3, 4, 2}, 3, 0, &SPEC, 19, &plan, &err),
                 LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "parameter budget exceeded: need 20, limit 19");
    assert_nothing_since(before, "budget 19 at the plan");
    plan = mlp_plan((const size_t[]){3, 4, 2}, 3, 0, 20);
    plan.parameter_limit = 19; /* changed after planning: model_new checks again */
    before = mlpdemo_tally_now();
    cr_assert_null(model_new(&plan, &err));
    cr_assert_str_eq(err.message, "parameter budget exceeded: need 20, limit 19");
    assert_nothing_since(before, "budget 19 at model_new");
    plan.parameter_limit = 20;
    Model *m = model_new(&plan, &err);
    cr_assert_not_null(m, "an exact budget is enough: %s", err.message);
    model_free(&m);
}

/* Row 1, Stage 06's scale check: a gain whose variance overflows (1.79e308 at fan-in 3)
 * or underflows (1e-200) is refused at the plan, with the layer's name, before any
 * initializer call; and again by model_new when the gain was changed after planning. */
Test(stage07, row1_a_gain_whose_scale_is_not_finite_and_positive_is_refused_at_the_plan)
{
    LgError err = LG_ERROR_INIT;
    InitSpec hot = SPEC, cold = SPEC;
    hot.gain = 1.79e308;
    cold.gain = 1e-200;
    ModelPlan plan;
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_mlp("mlp", (const size_t[]){3, 4, 2}, 3, 0, &hot, SIZE_MAX, &plan,
                                &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "fc1: init variance must be finite: gain 1.79e+308, fan-in 3 "
                                  "gives inf");
    cr_assert_eq(model_plan_mlp("mlp", (const size_t[]){3, 4, 2}, 3, 0, &cold, SIZE_MAX, &plan,
                                &err), LG_ERR_INVALID);
    cr_assert(has(&err, "fc1: init variance must be > 0: gain 1e-200"), "%s", err.message);
    assert_nothing_since(before, "gain refused at the plan");
    plan = mlp_plan((const size_t[]){3, 4, 2}, 3, 0, SIZE_MAX);
    plan.layer[1].init.gain = 1.79e308; /* changed after planning: model_new checks again */
    before = mlpdemo_tally_now();
    cr_assert_null(model_new(&plan, &err));
    cr_assert_eq(err.status, LG_ERR_NONFINITE);
    cr_assert(has(&err, "fc2: init variance must be finite: gain 1.79e+308, fan-in 4"), "%s",
              err.message);
    assert_nothing_since(before, "gain refused at model_new");
}

/* A raw initializer that is Stage 06's init_draw except that its call number bad_at
 * returns bad_value; it counts its calls. */
typedef struct BrokenInit {
    size_t calls, bad_at;
    double bad_value;
} BrokenInit;

static double broken_init(void *context, const InitSpec *spec, size_t fan_in, InitPosition at)
{
    BrokenInit *b = context;
    double w = init_draw(spec, fan_in, at);
    return ++b->calls == b->bad_at ? b->bad_value : w;
}

/* Row 4: a non-finite raw initializer result stops creation at the call that returned
 * it, before any Value exists: exactly k calls, 0 nodes written, no block left, the
 * error naming the parameter's logical position and the call. Positions of the 3-4-2
 * MLP in call order: fc1.weight (4, 3) for calls 1-12, fc2.weight (2, 4) for 13-20. */
Test(stage07, row4_nonfinite_initializer_result_stops_before_materialization)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan = mlp_plan((const size_t[]){3, 4, 2}, 3, 0, SIZE_MAX);
    static const struct {
        size_t k;
        double value;
        const char *message;
    } cases[] = {
        {1, NAN, "raw initializer result mlp.fc1.weight[0,0] is not finite: got nan (call 1)"},
        {5, -INFINITY, "raw initializer result mlp.fc1.weight[1,1] is not finite: got -inf "
                       "(call 5)"},
        {12, INFINITY, "raw initializer result mlp.fc1.weight[3,2] is not finite: got inf "
                       "(call 12)"},
        {13, NAN, "raw initializer result mlp.fc2.weight[0,0] is not finite: got nan "
                  "(call 13)"},
        {20, -NAN, "raw initializer result mlp.fc2.weight[1,3] is not finite: got "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        BrokenInit broken = {0, cases[i].k, cases[i].value};
        Tally before = mlpdemo_tally_now();
        cr_assert_null(model_new_with_initializer(&plan, broken_init, &broken, &err));
        cr_assert_eq(err.status, LG_ERR_NONFINITE);
        cr_assert(has(&err, cases[i].message), "%s", err.message);
        cr_assert_eq(broken.calls, cases[i].k, "stopped after exactly %zu calls: %zu",
                     cases[i].k, broken.calls);
        cr_assert_eq(init_call_count() - before.calls, cases[i].k);
        cr_assert_eq(value_nodes_written(), before.nodes, "no Value was materialized");
        cr_assert_eq(mem_live_blocks(), before.blocks, "no parameter, no buffer left");
    }
}

/* The default raw initializer is Stage 06's: a model made with model_raw_init_draw, or
 * with a raw initializer that never fails, has bit for bit the values of model_new, and
 * both make exactly 20 calls. */
Test(stage07, the_raw_initializer_of_model_new_is_stage_06s_init_draw)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan = mlp_plan((const size_t[]){3, 4, 2}, 3, 1, SIZE_MAX);
    size_t calls = init_call_count();
    Model *a = model_new(&plan, &err);
    cr_assert_not_null(a, "%s", err.message);
    cr_assert_eq(init_call_count() - calls, 20, "biases are not drawn");
    Model *b = model_new_with_initializer(&plan, model_raw_init_draw, NULL, &err);
    BrokenInit never = {0, 0, NAN};
    Model *c = model_new_with_initializer(&plan, broken_init, &never, &err);
    cr_assert_not_null(b);
    cr_assert_not_null(c);
    cr_assert_eq(never.calls, 20);
    size_t P = model_parameter_count(a);
    cr_assert_eq(P, 26);
    for (size_t k = 0; k < P; k++) {
        double x = a->seal.refs[k].value->data;
        cr_assert(memcmp(&x, &b->seal.refs[k].value->data, sizeof x) == 0);
        cr_assert(memcmp(&x, &c->seal.refs[k].value->data, sizeof x) == 0);
    }
    double w[12];
    cr_assert_eq(init_fill(&plan.layer[0].init, "mlp.fc1.weight", 4, 3, w, &err), LG_OK);
    for (size_t k = 0; k < 12; k++)
        cr_assert(memcmp(&w[k], &a->layer[0].weight->values[k]->data, sizeof w[k]) == 0,
                  "fc1.weight entry %zu is init_fill's value", k);
    model_free(&c);
    model_free(&b);
    model_free(&a);
}

/* Row 5: a duplicate layer name is refused by the ModelPlan before anything exists, and,
 * for storage assembled without a plan, by the identity seal. */
Test(stage07, row5_duplicate_names_are_refused_by_the_plan_and_by_the_seal)
{
    LgError err = LG_ERROR_INIT;
    LinearPlan layers[2];
    ModelPlan plan;
    cr_assert_eq(model_plan_layer("fc", 3, 4, 0, &SPEC, &layers[0], &err), LG_OK);
    cr_assert_eq(model_plan_layer("fc", 4, 2, 0, &SPEC, &layers[1], &err), LG_OK);
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_make("mlp", layers, 2, SIZE_MAX, &plan, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "duplicate layer name: mlp.fc (layers 1 and 2)");
    assert_nothing_since(before, "duplicate at the plan");
    Model *m = seed_model(0);
    Linear twins[2] = {m->layer[0], m->layer[1]};
    strcpy(twins[0].plan.name, "fc");
    strcpy(twins[1].plan.name, "fc");
    ParameterSeal seal;
    before = mlpdemo_tally_now();
    cr_assert_eq(model_seal_layers("mlp", twins, 2, &seal, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "duplicate parameter name: mlp.fc.weight[0,0] (layers 1 and "
                                  "2 are both fc)");
    assert_nothing_since(before, "duplicate at the seal");
    model_free(&m);
}

/* Row 6: the seed's 2 x 2 example. Shape (2, 2) is right; one Value sits at [0,0] and
 * [0,1]. The seal refuses it, and frees what it allocated for the check. */
Test(stage07, row6_the_seeds_2x2_alias_is_refused_at_the_creation_boundary)
{
    LgError err = LG_ERROR_INIT;
    Tape *hand = lg_new_tape(3);
    Matrix *w = matrix_new((Shape){2, 2}, "W", &err);
    Value *shared = value_new(hand, 0.5);
    w->values[0] = shared;
    w->values[1] = shared;
    w->values[2] = value_new(hand, 1.0);
    w->values[3] = value_new(hand, 2.0);
    Linear layer = {.weight = w, .bias = NULL};
    cr_assert_eq(model_plan_layer("fc1", 2, 2, 0, &SPEC, &layer.plan, &err), LG_OK);
    ParameterSeal seal;
    memset(&seal, 0, sizeof seal);
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_seal_layers("mlp", &layer, 1, &seal, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "undeclared parameter alias: mlp.fc1.weight[0,0] and "
                                  "mlp.fc1.weight[0,1] are one Value");
    assert_nothing_since(before, "the alias");
    cr_assert_null(seal.refs, "a refused seal is untouched");
    matrix_free(&w);
    tape_free(&hand);
}

/* Aliases across layers, and the reported pair is always the first in sealed order. */
Test(stage07, aliases_across_layers_are_refused_with_a_deterministic_pair)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Linear layers[2] = {m->layer[0], m->layer[1]};
    Matrix *w2 = matrix_new((Shape){2, 4}, "W2", &err);
    for (size_t k = 0; k < 8; k++)
        w2->values[k] = m->layer[1].weight->values[k];
    w2->values[6] = m->layer[0].weight->values[5]; /* fc2[1,2] is fc1[1,2] */
    w2->values[7] = m->layer[0].weight->values[0]; /* fc2[1,3] is fc1[0,0] */
    layers[1].weight = w2;
    ParameterSeal seal;
    cr_assert_eq(model_seal_layers("mlp", layers, 2, &seal, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "undeclared parameter alias: mlp.fc1.weight[1,2] and "
                                  "mlp.fc2.weight[1,2] are one Value");
    matrix_free(&w2);
    model_free(&m);
}

/* ---- the model: materialization, identity, bias ------------------------------------ */

Test(stage07, the_model_materializes_20_distinct_parameters_on_a_full_tape)
{
    Tally before = mlpdemo_tally_now();
    Model *m = seed_model(0);
    cr_assert_eq(init_call_count() - before.calls, 20, "one call per weight value");
    cr_assert_eq(value_nodes_written() - before.nodes, 20, "20 leaves, nothing else");
    cr_assert_eq(model_parameter_count(m), 20);
    cr_assert_eq(tape_count(m->parameters), 20);
    cr_assert_eq(tape_capacity(m->parameters), 20, "the parameter tape is exactly full");
    size_t distinct = 0;
    for (size_t k = 0; k < 20; k++) {
        const Value *v = m->seal.refs[k].value;
        cr_assert(tape_holds(m->parameters, v), "parameter %zu lives on the parameter tape", k);
        cr_assert_eq(tape_position(m->parameters, v), k, "sealed order is tape order");
        size_t j = 0;
        while (j < k && m->seal.refs[j].value != v)
            j++;
        distinct += j == k;
    }
    cr_assert_eq(distinct, 20, "20 distinct physical identities");
    cr_assert_null(m->layer[0].bias);
    cr_assert_null(m->layer[1].bias);
    model_free(&m);
    cr_assert_null(m);
}

/* The value of mlp.fc1.weight[2,1] is Stage 06's: it depends on seed and position only. */
Test(stage07, parameter_values_are_stage_06_draws_at_their_logical_positions)
{
    Model *m = seed_model(0);
    char name[MODEL_PARAMETER_NAME_MAX];
    model_parameter_name(m, 7, name, sizeof name);
    cr_assert_str_eq(name, "mlp.fc1.weight[2,1]");
    cr_assert_eq(m->seal.refs[7].value->data, -0.056472078594707806,
                 "Stage 06's program prints this value for seed 1, He, C_in 3");
    InitSpec he = SPEC, standard = SPEC;
    he.role = INIT_ROLE_RELU;
    for (size_t r = 0; r < 2; r++)
        for (size_t c = 0; c < 4; c++)
            cr_assert_eq(m->layer[1].weight->values[r * 4 + c]->data,
                         init_draw(&standard, 4, init_position("mlp.fc2.weight", r, c)));
    cr_assert_eq(m->layer[0].weight->values[0]->data,
                 init_draw(&he, 3, init_position("mlp.fc1.weight", 0, 0)));
    model_parameter_name(m, 19, name, sizeof name);
    cr_assert_str_eq(name, "mlp.fc2.weight[1,3]");
    model_free(&m);
}

/* A bias is an independent zero-initialized vector, or nothing at all: delta P = 6. */
Test(stage07, a_bias_is_a_zero_vector_of_its_own_or_nothing)
{
    Tally before = mlpdemo_tally_now();
    Model *m = seed_model(1);
    cr_assert_eq(init_call_count() - before.calls, 20, "a bias is not drawn");
    cr_assert_eq(model_parameter_count(m), 26, "20 + delta P = 6");
    cr_assert_eq(tape_count(m->parameters), 26);
    cr_assert_eq(m->layer[0].bias->length, 4);
    cr_assert_eq(m->layer[1].bias->length, 2);
    char name[MODEL_PARAMETER_NAME_MAX];
    model_parameter_name(m, 12, name, sizeof name);
    cr_assert_str_eq(name, "mlp.fc1.bias[0]", "the bias follows its weight");
    for (size_t l = 0; l < 2; l++)
        for (size_t o = 0; o < m->layer[l].bias->length; o++) {
            const Value *b = m->layer[l].bias->values[o];
            cr_assert(b->data == 0.0 && !signbit(b->data), "bias starts at +0");
            cr_assert(tape_holds(m->parameters, b));
        }
    model_free(&m);
    Model *plain = seed_model(0);
    cr_assert_eq(tape_count(plain->parameters), 20, "no placeholder of zeros");
    model_free(&plain);
}

/* ---- the forward ----------------------------------------------------------------- */

/* The chapter's run: input (2, 3) -> output (2, 2); planned 40 + 8 + 28 = 76; exactly 76 on
 * the graph tape, by the hook, and walked back from the output. */
Test(stage07, forward_of_the_seed_mlp_plans_and_builds_exactly_76_nodes)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Tape *inputs = lg_new_tape(6), *graph = lg_new_tape(76);
    Matrix *x = input(inputs, 2, 3);
    ModelForwardReport r;
    Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(r.plan.steps, 3);
    cr_assert_eq(r.plan.step[0].kind, MODEL_STEP_LINEAR);
    cr_assert_eq(r.plan.step[0].nodes, 40);
    cr_assert_eq(r.plan.step[1].kind, MODEL_STEP_RELU);
    cr_assert_eq(r.plan.step[1].nodes, 8);
    cr_assert_eq(r.plan.step[2].nodes, 28);
    cr_assert_eq(r.plan.nodes, 76);
    cr_assert_eq(r.plan.input.rows, 2);
    cr_assert_eq(r.plan.input.cols, 3);
    cr_assert_eq(y->rows, 2);
    cr_assert_eq(y->cols, 2);
    cr_assert_eq(r.graph_nodes, 76);
    cr_assert_eq(r.scalar_ops, 76);
    cr_assert_eq(tape_count(graph), 76, "a graph tape of exactly the plan is enough");
    CostReach reach;
    cr_assert_eq(cost_count_reachable(graph, y->values, 4, &reach, &err), LG_OK);
    cr_assert_eq(reach.operations, 76, "76 counted from the output");
    cr_assert_eq(reach.leaves, 0, "input and parameters live on other tapes");
    cr_assert_eq(tape_count(m->parameters), 20, "the forward wrote nothing on the parameters");
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* The forward computes y = relu(x W1^T) W2^T, summed left to right (Stage 04): plain
 * double arithmetic in the same order gives the same bits. */
Test(stage07, forward_values_equal_plain_double_arithmetic)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Tape *inputs = lg_new_tape(6), *graph = lg_new_tape(76);
    Matrix *x = input(inputs, 2, 3);
    ModelForwardReport r;
    Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
    cr_assert_not_null(y);
    for (size_t t = 0; t < 2; t++) {
        double h[4];
        for (size_t o = 0; o < 4; o++) {
            double s = x->values[t * 3]->data * m->layer[0].weight->values[o * 3]->data;
            for (size_t i = 1; i < 3; i++)
                s += x->values[t * 3 + i]->data * m->layer[0].weight->values[o * 3 + i]->data;
            h[o] = s > 0.0 ? s : 0.0;
        }
        for (size_t o = 0; o < 2; o++) {
            double s = h[0] * m->layer[1].weight->values[o * 4]->data;
            for (size_t i = 1; i < 4; i++)
                s += h[i] * m->layer[1].weight->values[o * 4 + i]->data;
            cr_assert_eq(y->values[t * 2 + o]->data, s, "y[%zu,%zu]", t, o);
        }
    }
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* delta G = T (4 + 2) = 12, against the graph the executor really built. */
Test(stage07, a_bias_adds_exactly_12_nodes_to_the_real_graph)
{
    LgError err = LG_ERROR_INIT;
    size_t built[2];
    for (int bias = 0; bias <= 1; bias++) {
        Model *m = seed_model(bias);
        Tape *inputs = lg_new_tape(6), *graph = lg_new_tape(128);
        Matrix *x = input(inputs, 2, 3);
        ModelForwardReport r;
        Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
        cr_assert_not_null(y, "%s", err.message);
        CostReach reach;
        cr_assert_eq(cost_count_reachable(graph, y->values, 4, &reach, &err), LG_OK);
        cr_assert_eq(reach.operations, r.plan.nodes);
        cr_assert_eq(r.scalar_ops, r.plan.nodes);
        built[bias] = reach.operations;
        matrix_free(&y);
        matrix_free(&x);
        tape_free(&graph);
        tape_free(&inputs);
        model_free(&m);
    }
    cr_assert_eq(built[0], 76);
    cr_assert_eq(built[1], 88);
    cr_assert_eq(built[1] - built[0], 12, "delta G");
}

/* Row 9, the seed's controlled experiment at T = 1: 20 + 4 + 14 = 38. A node budget of
 * 37 fails after 0 scalar operations with no partial graph; 38 makes (1, 2) with
 * exactly 38. */
Test(stage07, row9_node_budget_37_fails_after_0_operations_and_38_uses_exactly_38)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Tape *inputs = lg_new_tape(3), *graph = lg_new_tape(64);
    Matrix *x = input(inputs, 1, 3);
    ModelForwardPlan f;
    cr_assert_eq(model_plan_forward(&m->plan, (Shape){1, 3}, SIZE_MAX, &f, &err), LG_OK);
    cr_assert_eq(f.step[0].nodes, 20);
    cr_assert_eq(f.step[1].nodes, 4);
    cr_assert_eq(f.step[2].nodes, 14);
    cr_assert_eq(f.nodes, 38);
    ModelForwardReport r;
    Tally before = mlpdemo_tally_now();
    cr_assert_null(model_forward(m, graph, x, 37, &r, &err));
    cr_assert_eq(err.status, LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "node budget exceeded: need 38, limit 37");
    cr_assert_eq(r.scalar_ops, 0, "0 scalar operations");
    cr_assert_eq(tape_count(graph), 0, "no partial graph");
    assert_nothing_since(before, "budget 37");
    Matrix *y = model_forward(m, graph, x, 38, &r, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(y->rows, 1);
    cr_assert_eq(y->cols, 2);
    cr_assert_eq(r.scalar_ops, 38);
    cr_assert_eq(tape_count(graph), 38);
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* A forward no graph tape can hold is refused by the plan, as the node budget is:
 * (1000, 10000) through a 10000-10000 Linear is 1000 * 10000 * 19999 nodes, which fits
 * size_t and an unlimited budget but not a tape of 2^27. Decided from the ModelPlan,
 * before any parameter exists; the node budget is asked first. */
Test(stage07, row12_a_forward_larger_than_any_tape_is_refused_by_the_plan)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan = mlp_plan((const size_t[]){10000, 10000}, 2, 0, SIZE_MAX);
    ModelForwardPlan f;
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_forward(&plan, (Shape){1000, 10000}, SIZE_MAX, &f, &err),
                 LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 199990000000 nodes, "
                                  "134217728 free of 134217728");
    cr_assert_eq(model_plan_forward(&plan, (Shape){1000, 10000}, 1, &f, &err), LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "node budget exceeded: need 199990000000, limit 1");
    assert_nothing_since(before, "a forward larger than any tape");
    plan = mlp_plan((const size_t[]){1, 8192, 1}, 3, 0, SIZE_MAX);
    cr_assert_eq(model_plan_forward(&plan, (Shape){4096, 1}, SIZE_MAX, &f, &err), LG_OK,
                 "%s", err.message);
    cr_assert_eq(f.nodes, 134213632, "4096 (8192 + 8192 + 16383): just under 2^27");
    cr_assert_eq(model_plan_forward(&plan, (Shape){4097, 1}, SIZE_MAX, &f, &err),
                 LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 134246399 nodes, "
                                  "134217728 free of 134217728");
}

/* Row 13: an option run's three tapes over the plan limit of the book's programs
 * (2^24 nodes) are refused by the plans alone, before any tape exists, though a tape
 * could hold the forward: the 3-4-2 MLP at T = 500000 plans 19 * 10^6 nodes. */
Test(stage07, row13_an_option_run_over_the_plan_limit_is_refused_before_any_tape)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan = mlp_plan((const size_t[]){3, 4, 2}, 3, 0, SIZE_MAX);
    ModelForwardPlan f;
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_forward(&plan, (Shape){500000, 3}, SIZE_MAX, &f, &err), LG_OK,
                 "%s", err.message);
    cr_assert_eq(f.nodes, 19000000);
    cr_assert_eq(mlpdemo_check_plan_limit(&plan, &f, &err), LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "plan limit exceeded: the plan needs 20500020 nodes "
                                  "(1.0 GB), limit 16777216");
    assert_nothing_since(before, "an option run over the plan limit");
}

/* The room on the graph tape is asked for the whole plan, before the first node. */
Test(stage07, a_graph_tape_too_small_for_the_plan_is_refused_before_the_first_node)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Tape *inputs = lg_new_tape(6), *graph = lg_new_tape(75), *params = m->parameters;
    Matrix *x = input(inputs, 2, 3);
    ModelForwardReport r;
    Tally before = mlpdemo_tally_now();
    cr_assert_null(model_forward(m, graph, x, SIZE_MAX, &r, &err));
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 76 nodes, 75 free of 75");
    cr_assert_eq(tape_count(graph), 0);
    assert_nothing_since(before, "a small graph tape");
    cr_assert_null(model_forward(m, params, x, SIZE_MAX, &r, &err));
    cr_assert_eq(err.status, LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "the graph tape must not be the parameter tape");
    assert_nothing_since(before, "the parameter tape as graph tape");
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* Row 8: an input of the wrong width is refused at the model's entry. */
Test(stage07, row8_input_width_mismatch_is_refused_at_the_model_entry)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Tape *inputs = lg_new_tape(10), *graph = lg_new_tape(100);
    Matrix *x = input(inputs, 2, 5);
    ModelForwardReport r;
    Tally before = mlpdemo_tally_now();
    cr_assert_null(model_forward(m, graph, x, SIZE_MAX, &r, &err));
    cr_assert_eq(err.status, LG_ERR_SHAPE);
    cr_assert_str_eq(err.message, "input width mismatch: x has 5 columns, mlp.fc1 expects 3");
    cr_assert_eq(r.scalar_ops, 0);
    cr_assert_eq(tape_count(graph), 0, "no dot product was built");
    assert_nothing_since(before, "width 5");
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* Row 7 and the seed's discovery: after layer.weight = another_matrix -- here one with
 * the very same numbers -- a check of the manifest alone still passes, while the seal
 * check rebuilt from live storage refuses, and the forward makes 0 operations. */
Test(stage07, row7_replaced_storage_is_caught_though_the_manifest_looks_fine)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Tape *inputs = lg_new_tape(6), *graph = lg_new_tape(76), *elsewhere = lg_new_tape(12);
    Matrix *x = input(inputs, 2, 3), *own = m->layer[0].weight;
    double numbers[12];
    for (size_t k = 0; k < 12; k++)
        numbers[k] = own->values[k]->data;
    Matrix *other = matrix_new_leaves(elsewhere, (Shape){4, 3}, numbers, "other", &err);
    m->layer[0].weight = other;
    int manifest_ok = 1;
    for (size_t k = 0; k < m->seal.count; k++) {
        manifest_ok &= isfinite(m->seal.refs[k].value->data);
        for (size_t j = 0; j < k; j++)
            manifest_ok &= m->seal.refs[j].value != m->seal.refs[k].value;
    }
    cr_assert(manifest_ok, "the old manifest still looks fine");
    ModelForwardReport r;
    Tally before = mlpdemo_tally_now();
    cr_assert_null(model_forward(m, graph, x, SIZE_MAX, &r, &err));
    cr_assert_eq(err.status, LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "fc1 parameter storage identity changed: mlp.fc1.weight[0,0] "
                                  "is not the sealed Value");
    cr_assert_eq(r.scalar_ops, 0);
    cr_assert_eq(tape_count(graph), 0);
    assert_nothing_since(before, "replaced storage");
    m->layer[0].weight = own;
    cr_assert_eq(model_check_seal(m, &err), LG_OK, "restored: %s", err.message);
    matrix_free(&other);
    matrix_free(&x);
    tape_free(&elsewhere);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* The other ways the live storage can differ from the seal: one entry replaced, a layer
 * renamed, a bias added, a weight of another shape, a NaN from an optimizer. */
Test(stage07, every_difference_between_live_storage_and_seal_is_refused)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Tape *spare = lg_new_tape(8);
    Value *stranger = value_new(spare, 0.0), *kept = m->layer[1].weight->values[5];
    m->layer[1].weight->values[5] = stranger;
    cr_assert_eq(model_check_seal(m, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "fc2 parameter storage identity changed: mlp.fc2.weight[1,1] "
                                  "is not the sealed Value");
    m->layer[1].weight->values[5] = kept;
    strcpy(m->layer[1].plan.name, "fc9");
    cr_assert_eq(model_check_seal(m, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "parameter names changed: sealed mlp.fc2, live mlp.fc9");
    strcpy(m->layer[1].plan.name, "fc2");
    Vector *b = matrix_new_vector_leaves(spare, 2, NULL, "b", &err);
    m->layer[1].bias = b;
    cr_assert_eq(model_check_seal(m, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "parameter storage changed: sealed 20 parameters, live 22");
    m->layer[1].bias = NULL;
    Matrix *own = m->layer[1].weight, *turned = matrix_new((Shape){4, 2}, "turned", &err);
    for (size_t k = 0; k < 8; k++)
        turned->values[k] = own->values[k];
    m->layer[1].weight = turned;
    cr_assert_eq(model_check_seal(m, &err), LG_ERR_IDENTITY, "same Values, another shape");
    cr_assert(has(&err, "mlp.fc2.weight[0,2] is not the sealed Value"), "%s", err.message);
    m->layer[1].weight = own;
    double was = own->values[3]->data;
    own->values[3]->data = NAN;
    cr_assert_eq(model_check_seal(m, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "parameter mlp.fc2.weight[0,3] must be finite: got nan");
    own->values[3]->data = was;
    cr_assert_eq(model_check_seal(m, &err), LG_OK, "%s", err.message);
    matrix_free(&turned);
    matrix_free_vector(&b);
    tape_free(&spare);
    model_free(&m);
}

/* Repeated forwards keep every identity, leave every parameter's data and grad
 * bit-identical, and give bit-identical outputs. Between forwards an optimizer may
 * change data: the seal does not mind, because identity is the Value, not the number. */
Test(stage07, repeated_forwards_keep_identities_and_change_no_parameter)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Tape *inputs = lg_new_tape(6), *graph = lg_new_tape(76);
    Matrix *x = input(inputs, 2, 3);
    ParameterRef before[20], after[20];
    double data[20], grad[20], first[4];
    model_collect_parameter_refs(m->layer, 2, before);
    for (size_t k = 0; k < 20; k++) {
        m->layer[k < 12 ? 0 : 1].weight->values[k < 12 ? k : k - 12]->grad = 0.25 * (double)k;
        data[k] = before[k].value->data;
        grad[k] = before[k].value->grad;
    }
    for (int run = 0; run < 4; run++) {
        tape_reset(graph);
        ModelForwardReport r;
        Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
        cr_assert_not_null(y, "%s", err.message);
        for (size_t k = 0; k < 4; k++) {
            if (run == 0)
                first[k] = y->values[k]->data;
            cr_assert_eq(memcmp(&first[k], &y->values[k]->data, sizeof first[k]), 0);
        }
        matrix_free(&y);
    }
    model_collect_parameter_refs(m->layer, 2, after);
    for (size_t k = 0; k < 20; k++) {
        cr_assert_eq(after[k].value, before[k].value, "identity %zu", k);
        cr_assert_eq(memcmp(&after[k].value->data, &data[k], sizeof data[k]), 0);
        cr_assert_eq(memcmp(&after[k].value->grad, &grad[k], sizeof grad[k]), 0);
    }
    m->layer[0].weight->values[0]->data += 1.0; /* an optimizer step between forwards */
    tape_reset(graph);
    ModelForwardReport r;
    Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
    cr_assert_not_null(y, "a changed number is the same parameter: %s", err.message);
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* The checks of a forward walk the storage once before it and once after, tensor by
 * tensor; a difference in the last tensor walked is reported with the message of the
 * separate checks, and storage replaced between two forwards is refused before the
 * first node of the second, whatever the walk did to the snapshot before it stopped. */
Test(stage07, the_one_pass_checks_of_a_forward_report_as_the_separate_checks_do)
{
    LgError err = LG_ERROR_INIT, alone = LG_ERROR_INIT;
    Model *m = seed_model(1);
    Tape *inputs = lg_new_tape(6), *graph = lg_new_tape(88), *spare = lg_new_tape(1);
    Matrix *x = input(inputs, 2, 3);
    Vector *b = m->layer[1].bias;
    cr_assert_eq(model_check_seal_and_snapshot(m, &err), LG_OK, "%s", err.message);
    for (size_t k = 0; k < 26; k++) {
        const Value *v = m->seal.addresses[k];
        cr_assert_eq(memcmp(&m->snapshot[2 * k], &v->data, sizeof v->data), 0);
        cr_assert_eq(memcmp(&m->snapshot[2 * k + 1], &v->grad, sizeof v->grad), 0);
    }
    cr_assert_eq(model_check_seal_unchanged(m, &err), LG_OK, "%s", err.message);
    Value *kept = b->values[1], *stranger = value_new(spare, kept->data);
    b->values[1] = stranger;
    cr_assert_eq(model_check_seal_and_snapshot(m, &err), LG_ERR_IDENTITY);
    cr_assert_eq(model_check_seal(m, &alone), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, alone.message);
    cr_assert_str_eq(err.message, "fc2 parameter storage identity changed: mlp.fc2.bias[1] is "
                                  "not the sealed Value");
    cr_assert_eq(model_check_seal_unchanged(m, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, alone.message);
    b->values[1] = kept;
    kept->data = INFINITY;
    cr_assert_eq(model_check_seal_and_snapshot(m, &err), LG_ERR_NONFINITE);
    cr_assert_eq(model_check_seal(m, &alone), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, alone.message);
    cr_assert_str_eq(err.message, "parameter mlp.fc2.bias[1] must be finite: got inf");
    kept->data = 0.0;
    cr_assert_eq(model_check_seal_and_snapshot(m, &err), LG_OK, "%s", err.message);
    kept->grad = -0.0;
    cr_assert_eq(model_check_seal_unchanged(m, &err), LG_ERR_POSTCONDITION);
    cr_assert_str_eq(err.message, "forward changed parameter mlp.fc2.bias[1]: grad 0 -> -0");
    kept->grad = 0.0;
    ModelForwardReport r;
    Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
    cr_assert_not_null(y, "%s", err.message);
    double first = y->values[3]->data;
    matrix_free(&y);
    b->values[1] = stranger;
    tape_reset(graph);
    Tally before = mlpdemo_tally_now();
    cr_assert_null(model_forward(m, graph, x, SIZE_MAX, &r, &err));
    cr_assert_str_eq(err.message, "fc2 parameter storage identity changed: mlp.fc2.bias[1] is "
                                  "not the sealed Value");
    cr_assert_eq(r.scalar_ops, 0);
    cr_assert_eq(tape_count(graph), 0);
    assert_nothing_since(before, "storage replaced between two forwards");
    b->values[1] = kept;
    y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
    cr_assert_not_null(y, "restored: %s", err.message);
    cr_assert_eq(memcmp(&first, &y->values[3]->data, sizeof first), 0);
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&spare);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* The executor's checks are assertion-level: on in the build the tests run (make bench's
 * program alone compiles them out), where the checks the forward runs after its last node
 * catch a changed parameter; the caller's errors are refused before the first node. */
Test(stage07, the_executor_checks_are_on_where_the_tests_run)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(1);
    Tape *spare = lg_new_tape(1);
    cr_assert_eq(model_checks_executor(), 1, "the tests run with the executor checked");
    cr_assert_eq(model_check_before_forward(m, &err), LG_OK, "%s", err.message);
    cr_assert_eq(model_check_after_forward(m, &err), LG_OK, "%s", err.message);
    Value *w = m->layer[0].weight->values[2];
    w->grad = 0.5;
    cr_assert_eq(model_check_after_forward(m, &err), LG_ERR_POSTCONDITION);
    cr_assert_str_eq(err.message, "forward changed parameter mlp.fc1.weight[0,2]: "
                                  "grad 0 -> 0.5");
    w->grad = 0.0;
    Value *kept = m->layer[1].weight->values[0];
    m->layer[1].weight->values[0] = value_new(spare, kept->data);
    cr_assert_eq(model_check_before_forward(m, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "fc2 parameter storage identity changed: "
                                  "mlp.fc2.weight[0,0] is not the sealed Value");
    m->layer[1].weight->values[0] = kept;
    kept->data = NAN;
    cr_assert_eq(model_check_before_forward(m, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "parameter mlp.fc2.weight[0,0] must be finite: got nan");
    cr_assert_eq(model_check_seal(m, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "parameter mlp.fc2.weight[0,0] must be finite: got nan");
    tape_free(&spare);
    model_free(&m);
}

/* Row 10: a forward that changed a parameter's data or grad is caught by the snapshot
 * postcondition. A correct executor never does; the check is handed a changed state. */
Test(stage07, row10_a_changed_parameter_is_caught_by_the_postcondition)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    model_snapshot_parameters(m);
    cr_assert_eq(model_check_parameters_unchanged(m, &err), LG_OK);
    Value *w = m->layer[0].weight->values[0];
    w->grad = 1.0;
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_check_parameters_unchanged(m, &err), LG_ERR_POSTCONDITION);
    cr_assert_str_eq(err.message, "forward changed parameter mlp.fc1.weight[0,0]: grad 0 -> 1");
    assert_nothing_since(before, "the check");
    w->grad = 0.0;
    double was = m->layer[1].weight->values[7]->data;
    m->layer[1].weight->values[7]->data = -was;
    cr_assert_eq(model_check_parameters_unchanged(m, &err), LG_ERR_POSTCONDITION);
    cr_assert(has(&err, "forward changed parameter mlp.fc2.weight[1,3]: data "), "%s",
              err.message);
    m->layer[1].weight->values[7]->data = was;
    w->grad = -0.0; /* -0 == +0, but not to a checkpoint: compared as bits */
    cr_assert_eq(model_check_parameters_unchanged(m, &err), LG_ERR_POSTCONDITION);
    w->grad = 0.0;
    cr_assert_eq(model_check_parameters_unchanged(m, &err), LG_OK);
    model_free(&m);
}

/* Row 11: planner and executor disagreeing on a shape or a count is caught by the
 * output postcondition. */
Test(stage07, row11_a_planner_executor_mismatch_is_caught_by_the_postcondition)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    ModelForwardPlan f;
    cr_assert_eq(model_plan_forward(&m->plan, (Shape){2, 3}, SIZE_MAX, &f, &err), LG_OK);
    cr_assert_eq(model_forward_check_result(&f, (Shape){2, 2}, 76, 76, &err), LG_OK);
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_forward_check_result(&f, (Shape){2, 3}, 76, 76, &err),
                 LG_ERR_POSTCONDITION);
    cr_assert_str_eq(err.message, "postcondition failed: planned output (2, 2), the executor "
                                  "made (2, 3)");
    cr_assert_eq(model_forward_check_result(&f, (Shape){2, 2}, 75, 75, &err),
                 LG_ERR_POSTCONDITION);
    cr_assert_str_eq(err.message, "postcondition failed: planned 76 nodes, the graph tape got "
                                  "75");
    cr_assert_eq(model_forward_check_result(&f, (Shape){2, 2}, 76, 96, &err),
                 LG_ERR_POSTCONDITION);
    cr_assert_str_eq(err.message, "postcondition failed: planned 76 nodes, 96 were written on "
                                  "all tapes");
    assert_nothing_since(before, "the checks");
    model_free(&m);
}

/* The seed's gradient example through a Linear: x = (3, -4), w = (2, 5), y = -14,
 * dy/dx = (2, 5), dy/dw = (3, -4), exactly. */
Test(stage07, the_gradient_of_the_seeds_linear_is_exact)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan = mlp_plan((const size_t[]){2, 1}, 2, 0, SIZE_MAX);
    Model *m = model_new(&plan, &err);
    cr_assert_not_null(m);
    m->layer[0].weight->values[0]->data = 2.0;
    m->layer[0].weight->values[1]->data = 5.0;
    Tape *inputs = lg_new_tape(2), *graph = lg_new_tape(3);
    Matrix *x = matrix_new_leaves(inputs, (Shape){1, 2}, (const double[]){3.0, -4.0}, "x", &err);
    ModelForwardReport r;
    Matrix *y = model_forward(m, graph, x, 3, &r, &err);
    cr_assert_not_null(y, "%s", err.message);
    cr_assert_eq(r.plan.nodes, 3, "1 * 1 * (2 * 2 - 1)");
    value_backward(graph, y->values[0]);
    cr_assert_eq(y->values[0]->data, -14.0);
    cr_assert_eq(x->values[0]->grad, 2.0);
    cr_assert_eq(x->values[1]->grad, 5.0);
    cr_assert_eq(m->layer[0].weight->values[0]->grad, 3.0);
    cr_assert_eq(m->layer[0].weight->values[1]->grad, -4.0);
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* Backward through the whole MLP against Stage 03's finite-difference check, for every
 * parameter of both layers. */
Test(stage07, backward_through_the_mlp_passes_the_gradient_check)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(1);
    for (size_t l = 0; l < 2; l++) /* nonzero biases, so that the check sees them */
        for (size_t o = 0; o < m->layer[l].bias->length; o++)
            m->layer[l].bias->values[o]->data = 0.125 * (double)(o + 1);
    Tape *inputs = lg_new_tape(6), *graph = lg_new_tape(128);
    Matrix *x = input(inputs, 2, 3);
    ModelForwardReport r;
    Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
    cr_assert_not_null(y);
    Value *sum = value_add(graph, value_add(graph, y->values[0], y->values[1]),
                           value_add(graph, y->values[2], y->values[3]));
    Value *params[26];
    for (size_t k = 0; k < 26; k++)
        params[k] = (Value *)m->seal.refs[k].value;
    GradientCheck check;
    cr_assert_eq(value_check_gradient(graph, sum, params, 26, &check, &err), LG_OK, "%s",
                 err.message);
    cr_assert_leq(check.error, GRADCHECK_TOLERANCE, "worst %zu: %g vs %g", check.worst,
                  check.analytic, check.numeric);
    matrix_free(&y);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* The standard and ReLU sample variances of a real model's weights are near their
 * targets. C_in = 64 and 4096 values per weight, as in the seed. For n normal values
 * sd(s^2) = sigma^2 sqrt(2 / (n - 1)) = 2.21% of the target (Stage 06), and
 * z = (s^2 - target) / sd(s^2). Over 8 seeds each |z| must be below 5 (a correct policy
 * fails that about once in 1.7 million draws; a variance off by a factor of 2 is 22.6 or
 * 45 sd away), and the mean of the 8 values of z, whose sd is 1 / sqrt(8), below 5 / sqrt(8). */
Test(stage07, standard_and_relu_sample_variances_are_near_their_targets)
{
    LgError err = LG_ERROR_INIT;
    enum { SEEDS = 8, N = 4096 };
    double *w = mem_alloc(N, sizeof *w, "weights", &err);
    double z_sum[2] = {0.0, 0.0};
    for (uint64_t s = 0; s < SEEDS; s++) {
        InitSpec spec = SPEC;
        spec.seed = 100 + s;
        ModelPlan plan;
        cr_assert_eq(model_plan_mlp("stat", (const size_t[]){64, 64, 64}, 3, 0, &spec, SIZE_MAX,
                                    &plan, &err), LG_OK);
        Model *m = model_new(&plan, &err);
        cr_assert_not_null(m);
        for (size_t l = 0; l < 2; l++) {
            double target = 0.0;
            cr_assert_eq(init_scale(&m->layer[l].plan.init, 64, &target, NULL, &err), LG_OK);
            cr_assert_eq(target, l == 0 ? 0.03125 : 0.015625, "He, then standard");
            for (size_t k = 0; k < N; k++)
                w[k] = m->layer[l].weight->values[k]->data;
            double z = (variance_sample(w, N) - target) / variance_sd_of_normal(target, N);
            cr_assert_lt(fabs(z), 5.0, "seed %llu layer %zu: z = %g", (unsigned long long)s,
                         l, z);
            z_sum[l] += z;
        }
        model_free(&m);
    }
    for (size_t l = 0; l < 2; l++)
        cr_assert_lt(fabs(z_sum[l] / SEEDS), 5.0 / sqrt(SEEDS), "mean z of layer %zu", l);
    mem_free(w);
}

/* ---- planning ---------------------------------------------------------------------- */

/* Planning allocates nothing and writes no node, at T = 1 and at T = 8000 (near the
 * largest batch whose forward fits a tape), and the plan is exact at both. */
Test(stage07, planning_a_forward_builds_nothing_at_any_batch)
{
    LgError err = LG_ERROR_INIT;
    ModelPlan plan = mlp_plan((const size_t[]){64, 64, 64, 1}, 4, 1, SIZE_MAX);
    ModelForwardPlan small, large;
    Tally before = mlpdemo_tally_now();
    cr_assert_eq(model_plan_forward(&plan, (Shape){1, 64}, SIZE_MAX, &small, &err), LG_OK);
    cr_assert_eq(model_plan_forward(&plan, (Shape){8000, 64}, SIZE_MAX, &large, &err), LG_OK);
    assert_nothing_since(before, "planning");
    cr_assert_eq(small.steps, 5);
    cr_assert_eq(small.nodes, 64 * 128 + 64 + 64 * 128 + 64 + 128, "fc1 relu fc2 relu fc3");
    cr_assert_eq(large.nodes, 8000 * small.nodes, "nodes are linear in T");
    cr_assert_eq(large.output.rows, 8000);
    cr_assert_eq(large.output.cols, 1);
    ModelForwardPlan untouched = small;
    cr_assert_eq(model_plan_forward(&plan, (Shape){1000000, 64}, SIZE_MAX, &small, &err),
                 LG_ERR_BUDGET, "16,640,000,000 nodes exceed a tape");
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 16640000000 nodes, "
                                  "134217728 free of 134217728");
    cr_assert_eq(model_plan_forward(&plan, (Shape){3000000, 64}, SIZE_MAX, &small, &err),
                 LG_ERR_SHAPE, "3e6 x 64 entries exceed a tape");
    cr_assert(has(&err, "shape of x too large"), "%s", err.message);
    cr_assert_eq(model_plan_forward(&plan, (Shape){0, 64}, SIZE_MAX, &small, &err),
                 LG_ERR_SHAPE);
    cr_assert_eq(memcmp(&small, &untouched, sizeof small), 0, "written only on success");
}

/* ---- allocation failures --------------------------------------------------------- */

/* Every allocation of model_new fails in turn: each time, no model, LG_ERR_ALLOC, no
 * live block. The walk ends when model_new has no allocation left to fail. */
Test(stage07, every_allocation_failure_of_model_new_leaves_nothing)
{
    LgError err = LG_ERROR_INIT;
    for (int bias = 0; bias <= 1; bias++) {
        ModelPlan plan = mlp_plan((const size_t[]){3, 4, 2}, 3, bias, SIZE_MAX);
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
        /* raw buffer, model, tape (2), 2 per weight and per bias, seal references, the
         * alias check's sort, live references, snapshot: 12 without bias, 16 with. */
        cr_assert_eq(k - 1, bias ? 16 : 12, "allocations of model_new (bias %d): %zu", bias,
                     k - 1);
    }
}

/* Every allocation of a forward fails in turn: no output, no node, no block. */
Test(stage07, every_allocation_failure_of_a_forward_leaves_nothing)
{
    LgError err = LG_ERROR_INIT;
    Model *m = seed_model(0);
    Tape *inputs = lg_new_tape(6), *graph = lg_new_tape(76);
    Matrix *x = input(inputs, 2, 3);
    size_t k = 1;
    for (;; k++) {
        ModelForwardReport r;
        Tally before = mlpdemo_tally_now();
        mem_fail_at(k);
        Matrix *y = model_forward(m, graph, x, SIZE_MAX, &r, &err);
        mem_fail_at(0);
        if (y != NULL) {
            matrix_free(&y);
            break;
        }
        cr_assert_eq(err.status, LG_ERR_ALLOC, "allocation %zu: %s", k, err.message);
        cr_assert_eq(r.scalar_ops, 0);
        cr_assert_eq(tape_count(graph), 0, "allocation %zu: no partial graph", k);
        assert_nothing_since(before, "an allocation failure of the forward");
    }
    cr_assert_eq(k, 7, "3 step results of 2 blocks each: %zu", k - 1);
    matrix_free(&x);
    tape_free(&graph);
    tape_free(&inputs);
    model_free(&m);
}

/* ---- the program --------------------------------------------------------------------- */

Test(stage07, program_prints_the_chapters_observations)
{
    static ProgramRun run;
    run_program(&run, "stage-07", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    lg_expect_short_lines(run.output);
    static const char *const lines[] = {
        "  MLP parameters: 20, initializer calls: 20\n",
        "  input (2, 3) -> output (2, 2), planned and built\n",
        "  planned nodes 76, actual nodes 76, walked back from the output 76\n",
        "  distinct physical identities: 20 of 20\n",
        "  parameter budget 19: initializer calls 0\n",
        "  node budget 37: scalar operations 0\n",
        "  node budget 38: scalar operations 38, output (1, 2)\n",
        "  identities equal before and after repeated forwards: yes\n",
        "  alias and replaced storage refused with the identity error: yes\n",
        "  bias: delta P = 6, delta G = 12\n",
        "  gradient: y = -14, dy/dx = (2, 5), dy/dW = (3, -4)\n",
        "  live blocks after freeing everything: 0\n",
        "sanity check: PASS\n",
        "  plan: fc1 40 + relu 8 + fc2 28 = 76 nodes; output (2, 2); 0 operations so far\n",
        ("  T = 1, node budget 37: plan 20 + 4 + 14 = 38 -> node budget exceeded: need 38, "
         "limit 37\n"),
        "  manifest-only check (the sealed list alone): passes\n",
        "  mlp.fc1.weight[2,1] = -0.056472078594707806 at parameter tape position 7",
    };
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++)
        cr_assert(strstr(run.output, lines[k]), "missing: %s\n%s", lines[k], run.output);
    cr_assert(strstr(run.output, "undeclared parameter alias: mlp.fc1.weight[0,0] and "
                                 "mlp.fc1.weight[0,1] are one Value"));
    cr_assert(strstr(run.output, "\n   1  init gain 1.79e308 "), "%s", run.output);
    cr_assert(strstr(run.output, "\n      fc1: init variance must be finite: gain 1.79e+308, "
                                 "fan-in 3 gives inf\n"), "%s", run.output);
    cr_assert(strstr(run.output, "\n      raw initializer result mlp.fc1.weight[1,1] is not "
                                 "finite: got -inf (call 5)\n"), "%s", run.output);
    /* Each blast-radius row ends in its counters: calls, nodes, blocks. Only row 4 makes
     * initializer calls (5: the bad result is the 5th); only rows 10 and 11, whose
     * postconditions are checked after a real forward, write nodes: the 76 of the
     * forward. No row keeps a block. Row 1 is shown twice: both requests must show no
     * work. */
    static const char nothing[] = "    0     0      0", drawn[] = "    5     0      0",
                      forward[] = "    0    76      0";
    for (int row = 1; row <= 13; row++) {
        char head[24];
        snprintf(head, sizeof head, "\n  %2d  ", row);
        int shown = 0;
        for (const char *at = strstr(run.output, head); at != NULL; at = strstr(at + 1, head)) {
            const char *eol = strchr(at + 1, '\n');
            const char *want = row == 4                 ? drawn
                               : row == 10 || row == 11 ? forward
                                                        : nothing;
            cr_assert(eol - at > 18 && strncmp(eol - 18, want, 18) == 0,
                      "row %d did work before it was stopped: %.*s", row, (int)(eol - at), at);
            shown++;
        }
        cr_assert_eq(shown, row == 1 ? 2 : 1, "blast-radius row %d shown %d times", row, shown);
    }
}

Test(stage07, program_option_runs_print_key_value_lines)
{
    static ProgramRun run;
    run_program_stdout(&run, "stage-07", "--arch 3,4,2 --batch 2");
    cr_assert_eq(run.status, 0, "%s", run.output);
    static const char *const keys[] = {"parameters: 20\n", "initializer calls: 20\n",
                                       "planned nodes: 76\n", "actual nodes: 76\n",
                                       "output shape: (2, 2)\n", "scalar ops: 76\n",
                                       "nodes walked from the output: 76\n",
                                       "parameters unchanged: yes, checked\n"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        cr_assert(strstr(run.output, keys[k]), "missing %s in\n%s", keys[k], run.output);
    run_program_stdout(&run, "stage-07", "--bias --batch 2");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "parameters: 26\n"));
    cr_assert(strstr(run.output, "actual nodes: 88\n"));
    run_program_stdout(&run, "stage-07", "--batch 1 --node-budget 38");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "output shape: (1, 2)\n"));
    cr_assert(strstr(run.output, "scalar ops: 38\n"));
    static ProgramRun again;
    run_program_stdout(&run, "stage-07", "--seed 7");
    run_program_stdout(&again, "stage-07", "--seed 7");
    cr_assert_str_eq(run.output, again.output);
}

/* A rule broken by the command line is decided by the two plans, before anything is
 * made: exit 1, one line on stderr, nothing on stdout. LITGRAD_FAIL_ALLOC=1 fails the
 * run's first allocation, so a run that allocated anything before its refusal would
 * report running out of memory instead; the 1000-1000 MLP (10^6 parameters) and the
 * 1-10000-1 MLP at T = 10000 (4 * 10^8 nodes) were built before this refusal once. */
Test(stage07, program_broken_rules_exit_1_before_any_allocation_and_print_nothing)
{
    static LgRun run;
    static const struct {
        const char *args, *message;
    } cases[] = {
        {"--param-budget 19", "parameter budget exceeded: need 20, limit 19"},
        {"--batch 1 --node-budget 37", "node budget exceeded: need 38, limit 37"},
        {"--arch 100000,100000", "shape of fc1.weight too large"},
        {"--arch 1000,1000 --batch 1 --node-budget 1",
         "node budget exceeded: need 1999000, limit 1"},
        {"--arch 1,10000,1 --batch 10000",
         "tape capacity exceeded: need 399990000 nodes, 134217728 free of 134217728"},
        {"--arch 10000,10000,10000 --batch 1",
         "tape capacity exceeded: need 200000000 nodes, 134217728 free of 134217728"},
        {"--arch 4096,4096,4096 --batch 1",
         "plan limit exceeded: the plan needs 100663296 nodes (4.8 GB), limit 16777216"},
        {"--arch 1,2796202 --batch 5",
         "plan limit exceeded: the plan needs 16777217 nodes (0.8 GB), limit 16777216"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        lg_run(&run, "LITGRAD_FAIL_ALLOC=1 timeout 20", "stage-07", cases[k].args);
        cr_assert_eq(run.status, 1, "'%s': %s", cases[k].args, run.err);
        cr_assert(strncmp(run.err, "stage-07: error: ", 17) == 0, "%s", run.err);
        cr_assert(strstr(run.err, cases[k].message) != NULL, "'%s': %s", cases[k].args,
                  run.err);
        cr_assert_eq(strchr(run.err, '\n'), run.err + strlen(run.err) - 1, "one line");
        cr_assert_str_eq(run.out, "", "'%s': nothing on stdout", cases[k].args);
    }
}

/* An option run that runs out of memory, at any of its allocations, prints nothing: the
 * report comes once the model, the tapes and the forward are all made. */
Test(stage07, program_option_run_out_of_memory_prints_nothing)
{
    static LgRun run;
    size_t k = 1;
    for (;; k++) {
        char env[64];
        snprintf(env, sizeof env, "LITGRAD_FAIL_ALLOC=%zu", k);
        lg_run(&run, env, "stage-07", "--arch 3,4,2 --batch 2");
        if (run.status == 0)
            break;
        cr_assert_eq(run.status, 1, "%s: %s", env, run.err);
        cr_assert(strncmp(run.err, "stage-07: error: out of memory: ", 32) == 0, "%s",
                  run.err);
        cr_assert_str_eq(run.out, "", "%s: nothing on stdout", env);
    }
    cr_assert_gt(k, 5, "the model, two tapes, the input and the forward allocate");
    cr_assert(strstr(run.out, "nodes walked from the output: 76\n"), "%s", run.out);
}

/* The plan limit of the book's programs counts the run's three tapes: 672 parameters,
 * 24928 inputs and 16751616 forward nodes are exactly 2^24, accepted: the run goes on to
 * its first allocation, which LITGRAD_FAIL_ALLOC=1 fails. (The case one node over is
 * among the broken rules above.) */
Test(stage07, program_run_at_the_plan_limit_is_accepted)
{
    static LgRun run;
    cr_assert_eq(672 + 24928 + (size_t)24928 * 672, PLAN_NODES_MAX);
    lg_run(&run, "LITGRAD_FAIL_ALLOC=1 timeout 20", "stage-07",
           "--arch 1,672 --batch 24928");
    cr_assert_eq(run.status, 1, "%s", run.err);
    cr_assert(strncmp(run.err, "stage-07: error: out of memory: ", 32) == 0, "%s",
              run.err);
    cr_assert_str_eq(run.out, "", "the report comes after everything is made");
}

Test(stage07, program_conventions_for_help_and_bad_values)
{
    static ProgramRun run;
    run_program(&run, "stage-07", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "usage: stage-07"));
    static const LgBadLine lines[] = {
        {"--arch 3,,2", "--arch must be integers in [1, 18446744073709551615] joined by "
                        "commas: got '3,,2'"},
        {"--arch 3.0,4", "--arch must be integers in [1, 18446744073709551615] joined by "
                         "commas: got '3.0,4'"},
        {"--batch 0", "--batch must be an integer in [1, "},
        {"--arch 3", "--arch needs at least 2 numbers: got '3'"},
        {"--arch 3,4,", "got '3,4,'"},
        {"--arch ,3", "got ',3'"},
        {"--arch 3,0,2", "got '3,0,2'"},
        {"--arch 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18",
         "--arch has more than 17 numbers"},
        {"--arch ''", "--arch must be integers"},
        {"--arch=", "--arch must be integers"},
        {"--arch 0x3,4", "got '0x3,4'"},
        {"--arch 3,4 --arch 3,4", "option '--arch' is given twice"},
        {"--seed -1", "--seed must be an integer in [0, "},
        {"--seed 1 --seed=1", "option '--seed' is given twice"},
        {"--node-budget 1e3", "got '1e3'"},
        {"--param-budget 18446744073709551616", "got '18446744073709551616'"},
        {"--batch", "option '--batch' needs a value"},
        {"extra", "unexpected argument 'extra'"},
        {"--bench --arch 3,4", "options '--arch' and '--bench' exclude each other"},
        {"--seed 3 --bench", "options '--seed' and '--bench' exclude each other"},
        {"--bench --bench", "option '--bench' is given twice"},
        {"--bench=1", "option '--bench' takes no value"},
        {"--bias --bias", "option '--bias' is given twice"},
        {"{DIR}", "unexpected argument '/tmp'"},
        {"{FIFO}", "unexpected argument"},
        {"/dev/null", "unexpected argument '/dev/null'"},
    };
    size_t n = lg_expect_usage_errors("stage-07", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
}

/* The chapter's figure is the seed's planned forward, drawn from the plan: each step's
 * exact nodes and the running total, the shapes, and the total against the budget. */
Test(stage07, figure_data_draws_the_planned_forward_with_its_node_counts)
{
    char dir[] = "/tmp/litgrad-figure-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char args[64], path[96];
    snprintf(args, sizeof args, "--figure-data %s", dir);
    snprintf(path, sizeof path, "%s/fig-07-plan.dot", dir);
    ProgramRun run;
    run_program(&run, "stage-07", args);
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert_str_eq(run.output, "", "a figure run prints nothing");
    FILE *in = fopen(path, "r");
    cr_assert_not_null(in, "%s was not written", path);
    char text[4096];
    size_t used = fread(text, 1, sizeof text - 1, in);
    text[used] = '\0';
    fclose(in);
    remove(path);
    snprintf(path, sizeof path, "%s/fig-07-seal.dot", dir);
    in = fopen(path, "r");
    cr_assert_not_null(in, "%s was not written", path);
    char seal[8192];
    used = fread(seal, 1, sizeof seal - 1, in);
    seal[used] = '\0';
    fclose(in);
    cr_assert_eq(remove(path), 0, "%s", path);
    cr_assert_eq(rmdir(dir), 0, "the figure run writes two files");
    /* The seal's figure: four sealed tensors, nine Values, four live tensors, and each
     * Value joined to the sealed tensor that names it and to the live one that holds it. */
    static const char *const sealed[] = {
        "s0_0 [label=\"mlp.fc1.weight\\naddresses[0..4)\"]",
        "s1_1 [label=\"mlp.fc2.bias\\naddresses[8..9)\"]",
        "v8 [label=\"mlp.fc2.bias[0] = 0.0000\"]", "l0_0 [label=\"layer[0].weight\\n2 x 2\"]",
        "s0_1:e -> v4:w [style=dashed]", "v6:e -> l1_0:w [dir=back]", "rankdir=LR;",
    };
    for (size_t i = 0; i < sizeof sealed / sizeof sealed[0]; i++)
        cr_assert(strstr(seal, sealed[i]), "%s missing: %s", sealed[i], seal);
    static const char *const expected[] = {
        "s0 [label=\"mlp.fc1: Linear 3 -> 4\\n40 nodes = 2 x 4 x (2 x 3 - 1)\\nrunning total 40\"]",
        "s1 [label=\"ReLU\\n8 nodes = 2 x 4\\nrunning total 48\"]",
        "s2 [label=\"mlp.fc2: Linear 4 -> 2\\n28 nodes = 2 x 2 x (2 x 4 - 1)\\nrunning total 76\"]",
        "x -> s0 [label=\"(2, 3)\"]", "s2 -> y [label=\"(2, 2)\"]",
        "label=\"planned before the first multiplication:\\n76 nodes; node budget 76\"",
        "rankdir=TB;", /* a column of steps: the drawing is read at its natural size */
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        cr_assert(strstr(text, expected[i]), "%s missing: %s", expected[i], text);
}

/* The two figures are one output, all or nothing: under a file-size limit of 1024 bytes
 * the plan's figure (703 bytes) fits and the seal's (1948) does not. Whether the write
 * fails with EFBIG (SIGXFSZ ignored: exit 1, one line naming the file) or SIGXFSZ ends
 * the run, nothing is left in the directory, neither a figure nor a temporary file. */
Test(stage07, a_figure_run_stopped_by_the_file_size_limit_leaves_nothing)
{
    for (int ignore = 1; ignore >= 0; ignore--) {
        char dir[] = "/tmp/litgrad-figure-XXXXXX", err_path[64], err[512], want[160];
        cr_assert_not_null(mkdtemp(dir));
        char into[48];
        snprintf(into, sizeof into, "%s/into", dir);
        snprintf(err_path, sizeof err_path, "%s/err", dir);
        cr_assert_eq(mkdir(into, 0700), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            struct rlimit limit = {1024, 1024};
            int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (e < 0 || dup2(e, 2) < 0 || setrlimit(RLIMIT_FSIZE, &limit) != 0 ||
                signal(SIGXFSZ, ignore ? SIG_IGN : SIG_DFL) == SIG_ERR)
                _exit(126);
            execl(LG_BIN_DIR "/stage-07", "stage-07", "--figure-data", into, (char *)NULL);
            _exit(127);
        }
        int raw;
        cr_assert_eq(waitpid(pid, &raw, 0), pid);
        lg_read_file(err_path, err, sizeof err);
        if (ignore) {
            snprintf(want, sizeof want, "stage-07: error: cannot write %s/fig-07-seal.dot: "
                     "%s\n", into, strerror(EFBIG));
            cr_assert(WIFEXITED(raw) && WEXITSTATUS(raw) == 1, "status %#x %s", raw, err);
            cr_assert_str_eq(err, want);
        } else {
            cr_assert(WIFSIGNALED(raw) && WTERMSIG(raw) == SIGXFSZ, "status %#x", raw);
        }
        cr_assert_eq(lg_count_entries(into), 0, "a figure was left in %s", into);
        cr_assert_eq(rmdir(into), 0);
        cr_assert_eq(unlink(err_path), 0);
        cr_assert_eq(rmdir(dir), 0);
    }
}

/* A FIFO or a symbolic link at the figure's name is refused when the command line is
 * read, before the plan is made: exit 2, nothing written, nothing left behind. */
Test(stage07, a_fifo_at_the_figure_name_is_refused_before_anything)
{
    size_t runs = lg_expect_outputs_refused("stage-07", "--figure-data",
                                            MLPDEMO_FIGURE_FILES, "");
    cr_assert_eq(runs, 3);
}
