#include "litgrad_test.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "checkpoint.h"
#include "cli.h"
#include "cost.h"
#include "dataset.h"
#include "dense.h"
#include "densedemo.h"
#include "kernel.h"
#include "linear.h"
#include "model.h"
#include "train.h"
#include "trainer.h"

LG_SUITE(stage14);

/* ---- fixtures ------------------------------------------------------------------------ */

static const TrainConfig IRIS_CONFIG = {40, 16, 0.05, 0.9, 1, SIZE_MAX};
static const TrainConfig DIGITS_CONFIG = {15, 32, 0.05, 0.9, 1, SIZE_MAX};

/* One data set and one plan, with a model for the tape and one for the kernels: both
 * made from the plan, so both start from the same bits (Stage 06's initializer). */
typedef struct Pair {
    Dataset train, test;
    ModelPlan plan;
    Model *tape_model, *dense_model;
    Trainer *tape;
    DenseTrainer *dense;
} Pair;

static void pair_open_plan(Pair *p, const DatasetSpec *spec, const TrainConfig *c)
{
    LgError err = LG_ERROR_INIT;
    p->tape_model = model_new(&p->plan, &err);
    cr_assert_not_null(p->tape_model, "%s", err.message);
    p->dense_model = model_new(&p->plan, &err);
    cr_assert_not_null(p->dense_model, "%s", err.message);
    p->tape = trainer_new(p->tape_model, &p->train, c, &err);
    cr_assert_not_null(p->tape, "%s: %s", spec->name, err.message);
    p->dense = dense_trainer_new(p->dense_model, &p->train, c, DENSE_NO_BUDGET, &err);
    cr_assert_not_null(p->dense, "%s: %s", spec->name, err.message);
}

static void pair_open(Pair *p, const DatasetSpec *spec, int res, size_t hidden,
                      const TrainConfig *c)
{
    LgError err = LG_ERROR_INIT;
    memset(p, 0, sizeof *p);
    cr_assert_eq(densedemo_load(spec, &p->train, &p->test, &err), LG_OK, "%s", err.message);
    cr_assert_eq(densedemo_plan_model(res, hidden, &p->train, &p->plan, &err), LG_OK, "%s",
                 err.message);
    pair_open_plan(p, spec, c);
}

static void pair_close(Pair *p)
{
    dense_trainer_free(&p->dense);
    trainer_free(&p->tape);
    model_free(&p->dense_model);
    model_free(&p->tape_model);
    dataset_free(&p->train);
    dataset_free(&p->test);
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Run `steps` steps of each trainer in lockstep, asserting that every loss is the same
 * number, bit for bit; then store the dense parameters in their model. */
static void pair_steps(Pair *p, size_t steps)
{
    LgError err = LG_ERROR_INIT;
    for (size_t k = 0; k < steps; k++) {
        TrainStepReport a, b;
        cr_assert_eq(trainer_step(p->tape, &a, &err), LG_OK, "%s", err.message);
        cr_assert_eq(dense_trainer_step(p->dense, &b, &err), LG_OK, "%s", err.message);
        cr_assert(same_bits(a.loss, b.loss), "step %zu: tape loss %a, dense %a", k + 1,
                  a.loss, b.loss);
        cr_assert_eq(a.correct, b.correct);
        cr_assert_eq(a.epoch_done, b.epoch_done);
        cr_assert_eq(b.graph_nodes, 0);
    }
    cr_assert_eq(dense_trainer_store(p->dense, &err), LG_OK, "%s", err.message);
}

/* Every parameter and velocity of the two trainers, bit for bit, and their positions. */
static void expect_same_state(const Pair *p, const char *what)
{
    size_t P = model_parameter_count(p->tape_model);
    cr_assert_eq(P, model_parameter_count(p->dense_model));
    for (size_t k = 0; k < P; k++) {
        double a = p->tape_model->seal.addresses[k]->data;
        double b = p->dense_model->seal.addresses[k]->data;
        cr_assert(same_bits(a, b), "%s: parameter %zu: tape %a, dense %a", what, k, a, b);
        cr_assert(same_bits(p->tape->velocity[k], p->dense->velocities[k]),
                  "%s: velocity %zu", what, k);
    }
    cr_assert_eq(p->tape->at.epoch, p->dense->at.epoch, "%s", what);
    cr_assert_eq(p->tape->at.step, p->dense->at.step, "%s", what);
    cr_assert(same_bits(p->tape->at.loss_sum, p->dense->at.loss_sum), "%s", what);
    cr_assert_eq(p->tape->at.correct, p->dense->at.correct, "%s", what);
}

/* ---- bit-identical to the tape -------------------------------------------------------- */

static void expect_identical_training(const DatasetSpec *spec, int res, size_t hidden,
                                      const TrainConfig *c, size_t steps)
{
    Pair p;
    pair_open(&p, spec, res, hidden, c);
    pair_steps(&p, steps);
    expect_same_state(&p, spec->name);
    LgError err = LG_ERROR_INIT;
    TrainEvaluation a, b;
    cr_assert_eq(train_evaluate(p.tape_model, &p.test, 64, NULL, &a, &err), LG_OK);
    cr_assert_eq(dense_trainer_evaluate(p.dense, &p.test, NULL, &b, &err), LG_OK);
    cr_assert(same_bits(a.loss, b.loss), "test loss: tape %a, dense %a", a.loss, b.loss);
    cr_assert_eq(a.correct, b.correct);
    cr_assert_eq(a.count, b.count);
    pair_close(&p);
}

Test(stage14, iris_both_models_train_bit_identically_to_the_tape_for_280_steps)
{
    expect_identical_training(&DATASET_IRIS, 0, 16, &IRIS_CONFIG, 280);
    expect_identical_training(&DATASET_IRIS, 1, 16, &IRIS_CONFIG, 280);
}

Test(stage14, digits_both_models_train_bit_identically_to_the_tape_for_150_steps,
     .timeout = 120)
{
    expect_identical_training(&DATASET_DIGITS, 0, 32, &DIGITS_CONFIG, 150);
    expect_identical_training(&DATASET_DIGITS, 1, 32, &DIGITS_CONFIG, 150);
}

/* Sizes that leave remainders everywhere: an odd batch (a row without a pair), widths that
 * are not multiples of eight (outputs and inputs past the last whole block). */
Test(stage14, odd_sizes_and_remainders_stay_bit_identical)
{
    TrainConfig odd = IRIS_CONFIG;
    odd.batch = 7;
    odd.epochs = 3;
    expect_identical_training(&DATASET_IRIS, 0, 11, &odd, 51);
    expect_identical_training(&DATASET_IRIS, 1, 19, &odd, 51);
    expect_identical_training(&DATASET_IRIS, 0, 1, &odd, 17);
}

/* The book's models have no bias; a Linear with one is lowered too, and its gradient is
 * added last in each row's sum, rows from the last. */
Test(stage14, a_model_with_biases_trains_bit_identically)
{
    Pair p;
    LgError err = LG_ERROR_INIT;
    static const InitSpec init = {INIT_NORMAL, 1.0, 1, INIT_ROLE_LINEAR};
    memset(&p, 0, sizeof p);
    cr_assert_eq(densedemo_load(&DATASET_IRIS, &p.train, &p.test, &err), LG_OK);
    const size_t widths[4] = {p.train.features, 9, 17, p.train.classes};
    cr_assert_eq(model_plan_mlp("mlp", widths, 4, 1, &init, SIZE_MAX, &p.plan, &err), LG_OK);
    pair_open_plan(&p, &DATASET_IRIS, &IRIS_CONFIG);
    pair_steps(&p, 70);
    expect_same_state(&p, "biases");
    cr_assert_eq(p.dense->plan.kernels, 3 + 2 + 2 + 1 + 1 + 2 + 1 + 1 + 1 + 1);
    pair_close(&p);
}

/* ---- costs before anything runs ------------------------------------------------------ */

static void expect_costs(const DatasetSpec *spec, int res, size_t hidden, size_t T,
                         size_t operations, size_t arena)
{
    Dataset train, test;
    ModelPlan plan;
    DensePlan d;
    ModelForwardPlan f;
    TrainStepPlan step;
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(densedemo_load(spec, &train, &test, &err), LG_OK);
    cr_assert_eq(densedemo_plan_model(res, hidden, &train, &plan, &err), LG_OK);
    size_t blocks = mem_live_blocks();
    cr_assert_eq(dense_plan_step(&plan, T, train.rows, DENSE_NO_BUDGET, &d, &err), LG_OK);
    cr_assert_eq(mem_live_blocks(), blocks, "planning allocates nothing");
    cr_assert_eq(model_plan_forward(&plan, (Shape){T, train.features}, SIZE_MAX, &f, &err),
                 LG_OK);
    cr_assert_eq(train_plan_step(&plan, T, SIZE_MAX, &step, &err), LG_OK);
    cr_assert_eq(d.scalar_nodes, step.nodes);
    cr_assert_eq(d.forward.steps, f.steps);
    for (size_t s = 0; s < f.steps; s++) {
        cr_assert_eq(d.kernel[s].step, s);
        cr_assert_eq(d.kernel[s].operations, f.step[s].nodes, "%s step %zu", spec->name, s);
        cr_assert_eq(d.kernel[s].nodes, f.step[s].nodes);
    }
    cr_assert_eq(d.kernel[f.steps].kind, DENSE_CROSS_ENTROPY);
    cr_assert_eq(d.kernel[f.steps].operations, step.loss_nodes);
    cr_assert_eq(d.kernel[d.kernels - 1].kind, DENSE_SGD);
    cr_assert_eq(d.kernel[d.kernels - 1].operations, 4 * plan.parameters);
    size_t sum = 0;
    for (size_t k = 0; k < d.kernels; k++)
        sum += d.kernel[k].operations;
    cr_assert_eq(sum, d.operations);
    cr_assert_eq(d.operations, operations);
    cr_assert_eq(d.arena_bytes, arena);
    dataset_free(&train);
    dataset_free(&test);
}

/* The numbers the chapter's plan table prints: each forward kernel's operations are its
 * step's scalar nodes (Stage 05's and Stage 08's closed forms), the loss's G_xent. */
Test(stage14, forward_kernels_cost_the_scalar_plans_nodes)
{
    expect_costs(&DATASET_DIGITS, 0, 32, 32, 339424, 143344);
    expect_costs(&DATASET_DIGITS, 1, 32, 32, 1001840, 371728);
    expect_costs(&DATASET_IRIS, 0, 16, 16, 10720, 14912);
}

/* The step makes no allocation after its first: with every allocation failing from then
 * on, 100 steps and 100 evaluations succeed and leave the blocks as they were. */
Test(stage14, a_dense_step_allocates_nothing_after_the_first)
{
    Pair p;
    pair_open(&p, &DATASET_IRIS, 1, 16, &IRIS_CONFIG);
    LgError err = LG_ERROR_INIT;
    TrainStepReport r;
    TrainEvaluation e;
    cr_assert_eq(dense_trainer_step(p.dense, &r, &err), LG_OK);
    size_t blocks = mem_live_blocks();
    mem_fail_at(1);
    for (size_t k = 0; k < 100; k++) {
        cr_assert_eq(dense_trainer_step(p.dense, &r, &err), LG_OK, "step %zu: %s", k + 2,
                     err.message);
        cr_assert_eq(dense_trainer_evaluate(p.dense, &p.test, NULL, &e, &err), LG_OK);
        cr_assert_eq(e.count, 30);
    }
    mem_fail_at(0);
    cr_assert_eq(mem_live_blocks(), blocks);
    cr_assert_eq(p.dense->at.epoch, 101 / 7);
    pair_close(&p);
}

/* A trainer is two blocks: itself and its arena, of the planned size. */
Test(stage14, a_dense_trainer_is_two_blocks_of_planned_size)
{
    Pair p;
    size_t before = mem_live_blocks();
    pair_open(&p, &DATASET_DIGITS, 0, 32, &DIGITS_CONFIG);
    size_t with = mem_live_blocks();
    dense_trainer_free(&p.dense);
    cr_assert_eq(with - mem_live_blocks(), 2);
    cr_assert_gt(with, before);
    pair_close(&p);
}

/* ---- budgets -------------------------------------------------------------------------- */

Test(stage14, a_budget_one_short_is_refused_before_anything_with_the_numbers)
{
    Dataset train, test;
    ModelPlan plan;
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(densedemo_load(&DATASET_DIGITS, &train, &test, &err), LG_OK);
    cr_assert_eq(densedemo_plan_model(0, 32, &train, &plan, &err), LG_OK);
    Model *m = model_new(&plan, &err);
    size_t blocks = mem_live_blocks(), nodes = value_nodes_written();
    DenseTrainer *t =
        dense_trainer_new(m, &train, &DIGITS_CONFIG, (DenseBudget){339423, SIZE_MAX}, &err);
    cr_assert_null(t);
    cr_assert_eq(err.status, LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "dense operation budget exceeded: need 339424, limit 339423");
    t = dense_trainer_new(m, &train, &DIGITS_CONFIG, (DenseBudget){SIZE_MAX, 143343}, &err);
    cr_assert_null(t);
    cr_assert_str_eq(err.message, "dense arena budget exceeded: need 143344, limit 143343");
    cr_assert_eq(mem_live_blocks(), blocks);
    cr_assert_eq(value_nodes_written(), nodes);
    t = dense_trainer_new(m, &train, &DIGITS_CONFIG, (DenseBudget){339424, 143344}, &err);
    cr_assert_not_null(t, "the exact budget suffices: %s", err.message);
    dense_trainer_free(&t);
    model_free(&m);
    dataset_free(&train);
    dataset_free(&test);
}

Test(stage14, bad_requests_are_refused_with_stage_09s_rules)
{
    Pair p;
    pair_open(&p, &DATASET_IRIS, 0, 16, &IRIS_CONFIG);
    LgError err = LG_ERROR_INIT;
    TrainConfig c = IRIS_CONFIG;
    c.batch = 121;
    cr_assert_null(dense_trainer_new(p.dense_model, &p.train, &c, DENSE_NO_BUDGET, &err));
    cr_assert_str_eq(err.message, "batch must be in [1, 120] (the training examples): got 121");
    c = IRIS_CONFIG;
    c.momentum = 1;
    cr_assert_null(dense_trainer_new(p.dense_model, &p.train, &c, DENSE_NO_BUDGET, &err));
    cr_assert_str_eq(err.message, "momentum must be finite and in [0, 1): got 1");
    Dataset digits, digits_test;
    cr_assert_eq(densedemo_load(&DATASET_DIGITS, &digits, &digits_test, &err), LG_OK);
    cr_assert_null(dense_trainer_new(p.dense_model, &digits, &IRIS_CONFIG, DENSE_NO_BUDGET,
                                     &err));
    cr_assert_str_eq(err.message, "the data has 65 features, mlp.fc1 has 5 inputs");
    TrainEvaluation e;
    cr_assert_eq(dense_trainer_evaluate(p.dense, &digits_test, NULL, &e, &err), LG_ERR_SHAPE);
    dataset_free(&digits);
    dataset_free(&digits_test);
    pair_close(&p);
}

/* ---- divergence and the seal ----------------------------------------------------------- */

Test(stage14, divergence_is_reported_at_the_tapes_step_with_its_message)
{
    TrainConfig wild = IRIS_CONFIG;
    wild.learning_rate = 100;
    Pair p;
    pair_open(&p, &DATASET_IRIS, 0, 16, &wild);
    LgError a = LG_ERROR_INIT, b = LG_ERROR_INIT;
    TrainStepReport ra, rb;
    LgStatus sa = LG_OK, sb = LG_OK;
    while (sa == LG_OK && sb == LG_OK) {
        sa = trainer_step(p.tape, &ra, &a);
        sb = dense_trainer_step(p.dense, &rb, &b);
    }
    cr_assert_eq(sa, LG_ERR_NONFINITE);
    cr_assert_eq(sb, LG_ERR_NONFINITE);
    cr_assert_str_eq(b.message, "training diverged at step 88 (epoch 13): the loss is inf");
    cr_assert_str_eq(a.message, b.message);
    pair_close(&p);
}

Test(stage14, replaced_storage_is_refused_when_the_parameters_cross_the_seal)
{
    Pair p;
    pair_open(&p, &DATASET_IRIS, 0, 16, &IRIS_CONFIG);
    LgError err = LG_ERROR_INIT;
    Matrix *w = p.dense_model->layer[0].weight;
    Tape *other = lg_new_tape(w->rows * w->cols);
    Matrix *fake = matrix_new_leaves(other, matrix_shape(w), NULL, "fake", &err);
    p.dense_model->layer[0].weight = fake;
    double before = fake->values[0]->data;
    cr_assert_eq(dense_trainer_store(p.dense, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "fc1 parameter storage identity changed: "
                     "mlp.fc1.weight[0,0] is not the sealed Value");
    cr_assert(same_bits(fake->values[0]->data, before), "nothing was written");
    p.dense_model->layer[0].weight = w;
    cr_assert_eq(dense_trainer_store(p.dense, &err), LG_OK);
    matrix_free(&fake);
    tape_free(&other);
    pair_close(&p);
}

/* ---- checkpoints ----------------------------------------------------------------------- */

static const char *scratch_file(char dir[32], const char *name)
{
    static char path[96];
    strcpy(dir, "/tmp/lg14-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* A checkpoint saved by the tape in the middle of an epoch resumes in the dense trainer,
 * and one saved by the dense trainer resumes on the tape; either way the run ends with
 * the bits of a run that never stopped. */
static void expect_checkpoints_cross(int res)
{
    char dir[32];
    const char *path = scratch_file(dir, "cross.ckpt");
    LgError err = LG_ERROR_INIT;
    Pair whole, split;
    pair_open(&whole, &DATASET_IRIS, res, 16, &IRIS_CONFIG);
    pair_open(&split, &DATASET_IRIS, res, 16, &IRIS_CONFIG);
    pair_steps(&whole, 280);
    for (size_t k = 0; k < 100; k++) { /* the tape alone, to the middle of epoch 15 */
        TrainStepReport r;
        cr_assert_eq(trainer_step(split.tape, &r, &err), LG_OK);
    }
    cr_assert_eq(checkpoint_save(split.tape, path, &err), LG_OK, "%s", err.message);
    cr_assert_eq(dense_checkpoint_load(split.dense, path, &err), LG_OK, "%s", err.message);
    cr_assert_eq(split.dense->at.epoch, 14);
    cr_assert_eq(split.dense->at.step, 2);
    for (size_t k = 100; k < 200; k++) { /* the kernels on from there */
        TrainStepReport r;
        cr_assert_eq(dense_trainer_step(split.dense, &r, &err), LG_OK);
    }
    cr_assert_eq(dense_checkpoint_save(split.dense, path, &err), LG_OK, "%s", err.message);
    cr_assert_eq(checkpoint_load(split.tape, path, &err), LG_OK, "%s", err.message);
    for (size_t k = 200; k < 280; k++) { /* and the tape to the end */
        TrainStepReport r;
        cr_assert_eq(trainer_step(split.tape, &r, &err), LG_OK);
    }
    for (size_t k = 0; k < model_parameter_count(whole.tape_model); k++) {
        cr_assert(same_bits(whole.tape_model->seal.addresses[k]->data,
                            split.tape_model->seal.addresses[k]->data), "parameter %zu", k);
        cr_assert(same_bits(whole.tape->velocity[k], split.tape->velocity[k]));
    }
    cr_assert_eq(split.tape->at.epoch, 40);
    unlink(path);
    rmdir(dir);
    pair_close(&whole);
    pair_close(&split);
}

Test(stage14, checkpoints_cross_between_tape_and_kernels_bit_exactly)
{
    expect_checkpoints_cross(0);
    expect_checkpoints_cross(1);
}

Test(stage14, a_bad_checkpoint_changes_nothing_in_the_dense_trainer)
{
    char dir[32];
    const char *path = scratch_file(dir, "bad.ckpt");
    Pair p;
    pair_open(&p, &DATASET_IRIS, 0, 16, &IRIS_CONFIG);
    pair_steps(&p, 10);
    LgError err = LG_ERROR_INIT;
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("litgrad-checkpoint 1\nnot a checkpoint\n", f);
    fclose(f);
    size_t P = model_parameter_count(p.dense_model);
    double first = p.dense->parameters[0], v = p.dense->velocities[P - 1];
    TrainPosition at = p.dense->at;
    cr_assert_neq(dense_checkpoint_load(p.dense, path, &err), LG_OK);
    cr_assert(same_bits(p.dense->parameters[0], first));
    cr_assert(same_bits(p.dense->velocities[P - 1], v));
    cr_assert_eq(p.dense->at.step, at.step);
    cr_assert_eq(p.dense->at.epoch, at.epoch);
    unlink(path);
    rmdir(dir);
    pair_close(&p);
}

/* ---- the task the tape cannot reach ---------------------------------------------------- */

Test(stage14, the_wide_task_is_refused_by_the_tape_and_trained_by_the_kernels)
{
    Dataset train, test;
    ModelPlan plan;
    TrainStepPlan step;
    DensePlan d;
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(densedemo_load(&DATASET_DIGITS, &train, &test, &err), LG_OK);
    cr_assert_eq(densedemo_plan_model(0, 4096, &train, &plan, &err), LG_OK);
    cr_assert_eq(train_plan_step(&plan, 32, PLAN_NODES_MAX, &step, &err), LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "step node budget exceeded: need 19661504, limit 16777216");
    cr_assert_eq(dense_plan_step(&plan, 32, train.rows, DENSE_NO_BUDGET, &d, &err), LG_OK);
    cr_assert_eq(d.scalar_nodes, 19661504);
    cr_assert_eq(d.operations, 43304032);
    Model *m = model_new(&plan, &err);
    cr_assert_not_null(m);
    DenseTrainer *t = dense_trainer_new(m, &train, &DIGITS_CONFIG, DENSE_NO_BUDGET, &err);
    cr_assert_not_null(t, "%s", err.message);
    TrainStepReport r;
    double first = 0;
    for (size_t k = 0; k < 20; k++) {
        cr_assert_eq(dense_trainer_step(t, &r, &err), LG_OK, "%s", err.message);
        if (k == 0)
            first = r.loss;
    }
    cr_assert_lt(r.loss, first, "20 steps lower the loss: %g -> %g", first, r.loss);
    dense_trainer_free(&t);
    model_free(&m);
    dataset_free(&train);
    dataset_free(&test);
}

/* ---- the kernels alone ------------------------------------------------------------------ */

/* A Linear of T rows, IN inputs, OUT outputs on a tape and through the kernels of the path
 * in use: the same outputs and, for an upstream gradient, the same input and weight
 * gradients, bit for bit. */
static void expect_linear_equals_tape(size_t T, size_t IN, size_t OUT)
{
    LgError err = LG_ERROR_INIT;
    double *x = calloc(T * IN, sizeof *x), *w = calloc(OUT * IN, sizeof *w);
    double *b = calloc(OUT, sizeof *b), *gy = calloc(T * OUT, sizeof *gy);
    double *y = calloc(T * OUT, sizeof *y), *wt = calloc(IN * OUT, sizeof *wt);
    double *gx = calloc(T * IN, sizeof *gx), *gw = calloc(OUT * IN, sizeof *gw);
    double *gb = calloc(OUT, sizeof *gb);
    cr_assert(x && w && b && gy && y && wt && gx && gw && gb);
    for (size_t k = 0; k < T * IN; k++)
        x[k] = sin(1.0 + (double)k);
    for (size_t k = 0; k < OUT * IN; k++)
        w[k] = cos(0.5 * (double)k) / 3.0;
    for (size_t k = 0; k < OUT; k++)
        b[k] = 0.1 * (double)k - 0.3;
    for (size_t k = 0; k < T * OUT; k++)
        gy[k] = sin(0.7 * (double)k) + 0.25;
    Tape *tape = lg_new_tape(8 * T * IN * OUT + 4 * (T + OUT) * (IN + 1) + 100);
    Matrix *mx = matrix_new_leaves(tape, (Shape){T, IN}, x, "x", &err);
    Matrix *mw = matrix_new_leaves(tape, (Shape){OUT, IN}, w, "w", &err);
    Vector *vb = matrix_new_vector_leaves(tape, OUT, b, "b", &err);
    Matrix *my = linear_forward(tape, mx, mw, vb, &err);
    cr_assert_not_null(my, "%s", err.message);
    Value *loss = NULL; /* L = sum gy * y: dL/dy = gy */
    for (size_t k = 0; k < T * OUT; k++) {
        Value *term = value_mul_number(tape, my->values[k], gy[k]);
        loss = loss == NULL ? term : value_add(tape, loss, term);
    }
    value_backward(tape, loss);
    kernel_linear_forward(T, IN, OUT, x, w, b, wt, y);
    kernel_linear_backward_input(T, IN, OUT, gy, w, gx);
    kernel_linear_backward_weight(T, IN, OUT, gy, x, gw, gb);
    for (size_t k = 0; k < T * OUT; k++)
        cr_assert(same_bits(y[k], my->values[k]->data), "y[%zu]", k);
    for (size_t k = 0; k < T * IN; k++)
        cr_assert(same_bits(gx[k], mx->values[k]->grad), "gx[%zu]", k);
    for (size_t k = 0; k < OUT * IN; k++)
        cr_assert(same_bits(gw[k], mw->values[k]->grad), "gw[%zu]", k);
    for (size_t k = 0; k < OUT; k++)
        cr_assert(same_bits(gb[k], vb->values[k]->grad), "gb[%zu]", k);
    matrix_free(&my);
    matrix_free(&mx);
    matrix_free(&mw);
    matrix_free_vector(&vb);
    tape_free(&tape);
    free(x), free(w), free(b), free(gy), free(y), free(wt), free(gx), free(gw), free(gb);
}

/* A Linear of 3 rows, 9 inputs, 10 outputs, on the path the program takes. */
Test(stage14, the_linear_kernels_equal_a_tape_linear_with_remainders)
{
    expect_linear_equals_tape(3, 9, 10);
}

/* Every path this processor has, on shapes that leave remainders everywhere: rows past
 * the last whole tile, columns past the last whole block of eight (one, two, four, and
 * all three narrow tiles at once), more outputs than rows and fewer, sums of more terms
 * than a block of terms (inputs in the forward, rows in the weight gradient), a
 * weight gradient whose terms lie far apart (copied together first), and rows left below
 * the last whole tile, summed across several blocks of columns (digits' last layer). */
Test(stage14, the_linear_kernels_equal_a_tape_linear_on_every_path_and_shape)
{
    static const size_t shapes[][3] = {{3, 9, 10}, {19, 21, 27}, {9, 70, 3},
                                       {17, 5, 40}, {5, 9, 40}, {6, 15, 7},
                                       {5, 600, 11}, {300, 3, 9}, {1, 1, 1},
                                       {32, 32, 10}};
    for (size_t p = 0; kernel_path_available(p) != NULL; p++) {
        cr_assert_eq(kernel_use_path(kernel_path_available(p)), 0);
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            expect_linear_equals_tape(shapes[k][0], shapes[k][1], shapes[k][2]);
    }
}

/* A sum whose every product is -0 is -0 on the tape (it starts at its first product),
 * and on every path (its lanes start at -0, not at +0). */
Test(stage14, a_sum_of_negative_zeros_stays_negative_on_every_path)
{
    const double x[2 * 3] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    double w[9 * 3], wt[9 * 3], y[2 * 9];
    for (size_t k = 0; k < 9 * 3; k++)
        w[k] = -1.0;
    for (size_t p = 0; kernel_path_available(p) != NULL; p++) {
        cr_assert_eq(kernel_use_path(kernel_path_available(p)), 0);
        kernel_linear_forward(2, 3, 9, x, w, NULL, wt, y);
        for (size_t k = 0; k < 2 * 9; k++)
            cr_assert(same_bits(y[k], -0.0), "%s: y[%zu] = %a", kernel_path_name(), k, y[k]);
    }
}

/* Every path trains both models on iris and digits to the tape's bits, the widest
 * included (the tests above run it too), and the portable one that every processor has;
 * a name that is no path here changes nothing. */
Test(stage14, every_path_trains_both_models_to_the_tapes_bits)
{
    cr_assert_eq(kernel_use_path("no-such-path"), -1);
    cr_assert_not_null(kernel_path_available(0));
    for (size_t p = 0; kernel_path_available(p) != NULL; p++) {
        cr_assert_eq(kernel_use_path(kernel_path_available(p)), 0);
        cr_assert_str_eq(kernel_path_name(), kernel_path_available(p));
        for (int res = 0; res <= 1; res++) {
            expect_identical_training(&DATASET_IRIS, res, 16, &IRIS_CONFIG, 280);
            expect_identical_training(&DATASET_DIGITS, res, 32, &DIGITS_CONFIG, 60);
        }
    }
    cr_assert_eq(kernel_use_path("portable"), 0);
    cr_assert_null(kernel_path_available(3)); /* three paths at most */
}

/* The widest path and the portable one, side by side: every loss and every parameter of
 * 88 digits steps (two epochs), bit for bit. */
static void train_dense_on(const char *path, int res, double *losses, double *params,
                           size_t steps, size_t *count)
{
    Pair p;
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(kernel_use_path(path), 0, "%s", path);
    pair_open(&p, &DATASET_DIGITS, res, 32, &DIGITS_CONFIG);
    for (size_t k = 0; k < steps; k++) {
        TrainStepReport r;
        cr_assert_eq(dense_trainer_step(p.dense, &r, &err), LG_OK, "%s", err.message);
        losses[k] = r.loss;
    }
    cr_assert_eq(dense_trainer_store(p.dense, &err), LG_OK, "%s", err.message);
    *count = model_parameter_count(p.dense_model);
    for (size_t k = 0; k < *count; k++)
        params[k] = p.dense_model->seal.addresses[k]->data;
    pair_close(&p);
}

Test(stage14, the_widest_path_and_the_portable_one_agree_bit_for_bit)
{
    enum { STEPS = 88, PARAMS_MAX = 8192 };
    static double la[STEPS], lb[STEPS], pa[PARAMS_MAX], pb[PARAMS_MAX];
    for (int res = 0; res <= 1; res++) {
        size_t na = 0, nb = 0;
        train_dense_on(kernel_path_available(0), res, la, pa, STEPS, &na);
        train_dense_on("portable", res, lb, pb, STEPS, &nb);
        cr_assert_eq(na, nb);
        cr_assert_leq(na, PARAMS_MAX);
        for (size_t k = 0; k < STEPS; k++)
            cr_assert(same_bits(la[k], lb[k]), "loss %zu: %a, %a", k, la[k], lb[k]);
        for (size_t k = 0; k < na; k++)
            cr_assert(same_bits(pa[k], pb[k]), "parameter %zu: %a, %a", k, pa[k], pb[k]);
    }
}

/* ---- the program ------------------------------------------------------------------------- */

Test(stage14, the_default_run_prints_every_comparison_bit_identical)
{
    ProgramRun run;
    run_program(&run, "stage-14", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert_not_null(strstr(run.output, "iris mlp: 40 epochs, 280 steps; tape and dense "
                              "bit-identical in 280 of 280 losses,\n  128 of 128 parameters, "
                              "128 of 128 velocities; test: tape 30, dense 30 of 30"),
                       "%s", run.output);
    cr_assert_not_null(strstr(run.output, "  185 of 185 parameters, 185 of 185 velocities"));
    cr_assert_not_null(strstr(run.output, "  2400 of 2400 parameters, 2400 of 2400 velocities"));
    cr_assert_not_null(strstr(run.output, "  4940 of 4940 parameters, 4940 of 4940 velocities"));
    cr_assert_not_null(strstr(run.output, "a budget one short: dense operation budget "
                              "exceeded: need 339424, limit 339423 (blocks made: 0)"));
    cr_assert_not_null(strstr(run.output, "  the tape: step node budget exceeded: need "
                              "19661504, limit 16777216"));
    lg_expect_short_lines(run.output);
}

/* LITGRAD_KERNELS=portable forces the portable path, and the default run prints the same
 * numbers on it as on the widest path. */
Test(stage14, the_default_run_prints_the_same_on_the_portable_path)
{
    static ProgramRun widest, portable;
    run_program_stdout(&widest, "stage-14", "");
    portable.status = lg_exec("LITGRAD_KERNELS=portable", "stage-14", "", 0,
                              LG_ERR_DISCARDED, portable.output, sizeof portable.output,
                              NULL, 0);
    cr_assert_eq(widest.status, 0, "%s", widest.output);
    cr_assert_eq(portable.status, 0, "%s", portable.output);
    cr_assert_str_eq(widest.output, portable.output);
}

/* The update says whether every parameter it wrote is finite, on every path: a parameter
 * made infinite or NaN in the lanes or past the last whole vector, or none. Every
 * parameter and velocity is Stage 09's formula's, bit for bit. */
Test(stage14, the_update_says_whether_every_parameter_is_finite_on_every_path)
{
    enum { N = 19 };
    const size_t bad[] = {N, 0, 9, N - 1}; /* N: none */
    for (size_t q = 0; kernel_path_available(q) != NULL; q++) {
        cr_assert_eq(kernel_use_path(kernel_path_available(q)), 0);
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            double g[N], v[N], p[N], v0[N], p0[N];
            for (size_t k = 0; k < N; k++)
                g[k] = 0.25 * (double)k - 1.0, v[k] = v0[k] = 0.5, p[k] = p0[k] = 1.0 / 3;
            if (bad[b] < N)
                g[bad[b]] = b % 2 ? INFINITY : NAN;
            int finite = kernel_sgd_momentum(N, 0.05, 0.9, g, v, p);
            cr_assert_eq(finite, bad[b] == N, "%s, bad %zu", kernel_path_name(), bad[b]);
            for (size_t k = 0; k < N; k++) {
                double vk = 0.9 * v0[k] + g[k], pk = p0[k] - 0.05 * vk;
                cr_assert(same_bits(v[k], vk) && same_bits(p[k], pk), "%zu", k);
            }
        }
    }
}

/* The benchmark's shares compare only when its roofs held: a roof that moved by more than
 * the tolerance either way, a roof measured as NAN, or a share above its roof makes the
 * run not comparable. Fixed figures: nothing here is timed. */
Test(stage14, the_benchmark_flags_a_roof_that_moved_or_a_share_above_it)
{
    double tol = DENSEDEMO_ROOF_TOLERANCE_PERCENT / 100.0;
    cr_assert_eq(densedemo_roofs_held(175.5e9, 169.2e9, 50.2e9, 47.9e9, 0.67), 1);
    cr_assert_eq(densedemo_roofs_held(175.5e9, 175.5e9 * (1 - tol), 50e9, 50e9, 1.0), 1);
    cr_assert_eq(densedemo_roofs_held(175.5e9, 87.8e9, 50.2e9, 50.2e9, 0.67), 0);
    cr_assert_eq(densedemo_roofs_held(87.8e9, 175.5e9, 50.2e9, 50.2e9, 0.67), 0);
    cr_assert_eq(densedemo_roofs_held(175.5e9, 175.5e9, 50.2e9, 30.1e9, 0.67), 0);
    cr_assert_eq(densedemo_roofs_held(175.5e9, 175.5e9, 50.2e9, NAN, 0.67), 0);
    cr_assert_eq(densedemo_roofs_held(175.5e9, 175.5e9, 50.2e9, 50.2e9, 1.04), 0);
}

/* A figure file that cannot be written is a broken rule of the run, exit 1, as in every
 * stage: here the file-size limit of 512 bytes (SIGXFSZ ignored) stops the intensity
 * data (780 bytes), written after the lanes' sums (188), which are already in place.
 * The two files are one output, all or nothing, so the lanes' sums are removed too;
 * likewise when SIGXFSZ ends the run. */
Test(stage14, a_figure_file_past_the_size_limit_is_exit_1)
{
    lg_expect_group_stopped_by_size_limit("stage-14", "--figure-data", 512,
                                          "fig-14-intensity.dat");
}
