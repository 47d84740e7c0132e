#include "litgrad_test.h"

#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint.h"
#include "cost.h"
#include "dataset.h"
#include "model.h"
#include "train.h"

LG_SUITE(stage09);

/* ---- fixtures ------------------------------------------------------------------ */

typedef struct Run {
    Dataset train, test;
    Model *model;
    Trainer *trainer;
} Run;

static const TrainConfig IRIS_CONFIG = {40, 16, 0.05, 0.9, 1, SIZE_MAX};
static const TrainConfig DIGITS_CONFIG = {15, 32, 0.05, 0.9, 1, SIZE_MAX};
static const InitSpec SEED_INIT = {INIT_NORMAL, 1.0, 1, INIT_ROLE_LINEAR};

static void run_open(Run *r, const DatasetSpec *spec, size_t hidden, const TrainConfig *c)
{
    LgError err = LG_ERROR_INIT;
    Dataset all;
    char path[256];
    snprintf(path, sizeof path, "data/%s", spec->file);
    cr_assert_eq(dataset_load(spec, path, &all, &err), LG_OK, "%s", err.message);
    cr_assert_eq(dataset_split(&all, 5, &r->train, &r->test, &err), LG_OK);
    dataset_free(&all);
    cr_assert_eq(dataset_standardize(&r->train, &r->test, &err), LG_OK);
    cr_assert_eq(dataset_append_one(&r->train, &err), LG_OK);
    cr_assert_eq(dataset_append_one(&r->test, &err), LG_OK);
    size_t widths[3] = {r->train.features, hidden, r->train.classes};
    ModelPlan plan;
    cr_assert_eq(model_plan_mlp("mlp", widths, 3, 0, &SEED_INIT, SIZE_MAX, &plan, &err), LG_OK);
    r->model = model_new(&plan, &err);
    cr_assert_not_null(r->model, "%s", err.message);
    r->trainer = trainer_new(r->model, &r->train, c, &err);
    cr_assert_not_null(r->trainer, "%s", err.message);
}

static void run_close(Run *r)
{
    trainer_free(&r->trainer);
    model_free(&r->model);
    dataset_free(&r->train);
    dataset_free(&r->test);
}

static uint32_t params_crc(const Model *m)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t k = 0; k < m->seal.count; k++)
        crc = crc32(crc, (const Bytef *)&m->seal.refs[k].value->data, sizeof(double));
    return (uint32_t)crc;
}

static void train_epochs(Trainer *t, size_t until)
{
    LgError err = LG_ERROR_INIT;
    TrainStepReport r;
    while (t->at.epoch < until)
        cr_assert_eq(trainer_run_epoch(t, &r, &err), LG_OK, "%s", err.message);
}

/* ---- losses ---------------------------------------------------------------------- */

static void expect_loss_cost(LossKind kind, size_t T, size_t C)
{
    LgError err = LG_ERROR_INIT;
    size_t planned = 0;
    cr_assert_eq(loss_node_count(kind, T, C, &planned, &err), LG_OK);
    cr_assert_eq(planned, kind == LOSS_MSE ? 3 * T * C : T * (3 * C + 2));
    Tape *leaves = lg_new_tape(T * C), *graph = lg_new_tape(planned);
    Matrix *z = matrix_new_leaves(leaves, (Shape){T, C}, NULL, "z", &err);
    cr_assert_not_null(z);
    double target[64];
    size_t label[16];
    for (size_t k = 0; k < T * C; k++) {
        z->values[k]->data = (double)((int)(k % 5) - 2) / 3;
        target[k] = (double)(k % 2);
    }
    for (size_t i = 0; i < T; i++)
        label[i] = i % C;
    size_t hook = value_nodes_written;
    Value *loss = kind == LOSS_MSE ? loss_mse(graph, z, target, &err)
                                   : loss_cross_entropy(graph, z, label, &err);
    cr_assert_not_null(loss, "%s", err.message);
    cr_assert_eq(tape_count(graph), planned);
    cr_assert_eq(value_nodes_written - hook, planned);
    CostReach reach;
    cr_assert_eq(cost_count_reachable(graph, &loss, 1, &reach, &err), LG_OK);
    cr_assert_eq(reach.operations, planned);
    matrix_free(&z);
    tape_free(&graph);
    tape_free(&leaves);
}

Test(stage09, loss_closed_forms_equal_tape_hook_and_walk)
{
    expect_loss_cost(LOSS_MSE, 1, 1);
    expect_loss_cost(LOSS_MSE, 4, 3);
    expect_loss_cost(LOSS_CROSS_ENTROPY, 1, 1);
    expect_loss_cost(LOSS_CROSS_ENTROPY, 4, 3);
    expect_loss_cost(LOSS_CROSS_ENTROPY, 6, 10);
    size_t n = 0;
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(loss_node_count(LOSS_CROSS_ENTROPY, 16, 3, &n, &err), LG_OK);
    cr_assert_eq(n, 176);
    cr_assert_eq(loss_node_count(LOSS_CROSS_ENTROPY, 32, 10, &n, &err), LG_OK);
    cr_assert_eq(n, 1024);
    cr_assert_eq(loss_node_count(LOSS_MSE, 0, 3, &n, &err), LG_ERR_SHAPE);
    cr_assert_eq(loss_node_count(LOSS_MSE, SIZE_MAX, 3, &n, &err), LG_ERR_OVERFLOW);
}

Test(stage09, cross_entropy_is_stable_and_its_gradient_is_softmax_minus_onehot)
{
    LgError err = LG_ERROR_INIT;
    Tape *leaves = lg_new_tape(3), *graph = lg_new_tape(64);
    Matrix *z = matrix_new_leaves(leaves, (Shape){1, 3}, (double[]){1000, 0, -1000}, "z", &err);
    size_t label = 1;
    Value *loss = loss_cross_entropy(graph, z, &label, &err);
    cr_assert_not_null(loss);
    cr_assert_eq(loss->data, 1000.0, "log-sum-exp of (1000, 0, -1000) minus 0 is 1000");
    value_backward(graph, loss);
    cr_assert_eq(z->values[0]->grad, 1.0);
    cr_assert_eq(z->values[1]->grad, -1.0);
    tape_reset(graph);
    tape_zero_grad(leaves);
    z->values[0]->data = 0.3, z->values[1]->data = -1.2, z->values[2]->data = 2.0;
    loss = loss_cross_entropy(graph, z, &label, &err);
    GradientCheck check;
    cr_assert_eq(value_check_gradient(graph, loss, z->values, 3, &check, &err), LG_OK);
    cr_assert_lt(check.error, GRADCHECK_TOLERANCE);
    double s = exp(0.3) + exp(-1.2) + exp(2.0);
    cr_assert_float_eq(z->values[1]->grad, exp(-1.2) / s - 1, 1e-15);
    label = 3;
    cr_assert_null(loss_cross_entropy(graph, z, &label, &err));
    cr_assert_str_eq(err.message, "label of row 0 is 3: the scores have 3 classes");
    matrix_free(&z);
    tape_free(&graph);
    tape_free(&leaves);
}

Test(stage09, mse_value_is_exact)
{
    LgError err = LG_ERROR_INIT;
    Tape *leaves = lg_new_tape(4), *graph = lg_new_tape(12);
    Matrix *z = matrix_new_leaves(leaves, (Shape){2, 2}, (double[]){1, 2, 3, 4}, "z", &err);
    Value *loss = loss_mse(graph, z, (double[]){0, 2, 5, 4}, &err);
    cr_assert_not_null(loss);
    cr_assert_eq(loss->data, 1.25, "(1 + 0 + 4 + 0) / 4");
    cr_assert_null(loss_mse(graph, z, (double[]){0, NAN, 5, 4}, &err));
    cr_assert_eq(err.status, LG_ERR_NONFINITE);
    matrix_free(&z);
    tape_free(&graph);
    tape_free(&leaves);
}

/* ---- data -------------------------------------------------------------------------- */

Test(stage09, both_data_sets_load_with_their_documented_shapes)
{
    LgError err = LG_ERROR_INIT;
    Dataset d, train, test;
    cr_assert_eq(dataset_load(&DATASET_IRIS, "data/iris.csv", &d, &err), LG_OK, "%s",
                 err.message);
    size_t per_class[10] = {0};
    for (size_t i = 0; i < d.rows; i++)
        per_class[d.label[i]]++;
    cr_assert(per_class[0] == 50 && per_class[1] == 50 && per_class[2] == 50);
    cr_assert_eq(d.x[0], 5.1);
    cr_assert_eq(dataset_split(&d, 5, &train, &test, &err), LG_OK);
    cr_assert(train.rows == 120 && test.rows == 30);
    for (size_t c = 0; c < 3; c++) {
        size_t n = 0;
        for (size_t i = 0; i < test.rows; i++)
            n += test.label[i] == c;
        cr_assert_eq(n, 10);
    }
    cr_assert_eq(dataset_standardize(&train, &test, &err), LG_OK);
    double mean = 0;
    for (size_t i = 0; i < train.rows; i++)
        mean += train.x[i * 4 + 2];
    cr_assert_float_eq(mean / 120, 0.0, 1e-12);
    dataset_free(&train);
    dataset_free(&test);
    dataset_free(&d);
    cr_assert_eq(dataset_load(&DATASET_DIGITS, "data/digits.csv.gz", &d, &err), LG_OK, "%s",
                 err.message);
    cr_assert(d.rows == 1797 && d.features == 64 && d.classes == 10);
    double max = 0;
    for (size_t k = 0; k < d.rows * d.features; k++)
        max = d.x[k] > max ? d.x[k] : max;
    cr_assert_eq(max, 16.0);
    cr_assert_eq(dataset_split(&d, 5, &train, &test, &err), LG_OK);
    cr_assert(train.rows == 1438 && test.rows == 359);
    dataset_free(&train);
    dataset_free(&test);
    dataset_free(&d);
}

static void expect_bad_data(const char *content, const char *message)
{
    char path[] = "/tmp/lg09-data-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(content, f);
    fclose(f);
    DatasetSpec spec = DATASET_IRIS;
    spec.sha256 = NULL;
    spec.rows = 2;
    LgError err = LG_ERROR_INIT;
    Dataset d = {0};
    char header[] = "2,4,a,b,c\n";
    (void)header;
    cr_assert_neq(dataset_load(&spec, path, &d, &err), LG_OK, "accepted: %s", content);
    char want[512];
    snprintf(want, sizeof want, "%s:%s", path, message);
    cr_assert_str_eq(err.message, want);
    cr_assert_null(d.x);
    unlink(path);
}

Test(stage09, a_malformed_data_file_is_refused_with_file_line_column_and_rule)
{
    expect_bad_data("2,4,a,b,c\n5.1,3.5,1.4,0.2,0\n4.9,3.0,1.4,x,0\n",
                    "3:13: a feature is digits with an optional fraction: got 'x'");
    expect_bad_data("2,4,a,b,c\n5.1,3.5,1.4,0.2,0\n4.9,3.0,1.4,0.2\n",
                    "3:16: too few fields: a line has the features and a label: got ''");
    expect_bad_data("2,4,a,b,c\n5.1,3.5,1.4,0.2,0,7\n",
                    "2:18: too many fields: a line has the features and a label: got ',7'");
    expect_bad_data("2,4,a,b,c\n5.1,3.5,1.4,0.2,3\n",
                    "2:17: a label is an integer in [0, 2]: got '3'");
    expect_bad_data("2,4,a,b,c\n5.1,3.5,1.4,-0.2,0\n",
                    "2:13: a feature is digits with an optional fraction: got '-0.2'");
    expect_bad_data("2,4,a,b,c\n5.1,3.5,1.4,200,0\n", "2:13: a feature is in [0, 100]: got '200'");
    expect_bad_data("2,4,a,b,c\n\n", "2:1: a line is not empty: got ''");
    expect_bad_data("3,4,a,b,c\n", "1:1: the header's first field is the number of examples: "
                    "got '3'");
    expect_bad_data("2,4,a,b,c\n5.1,3.5,1.4,0.2,0\n",
                    "3: the file ends after 1 examples; the data set has 2");
    expect_bad_data("2,4,a,b,c\n5.1,3.5,1.4,0.2,0\n5.1,3.5,1.4,0.2,0\n5.1,3.5,1.4,0.2,0\n",
                    "4:1: no more lines after the last example: got '5.1,3.5,1.4,0.2,0'");
}

Test(stage09, a_file_with_another_digest_or_no_file_is_refused)
{
    LgError err = LG_ERROR_INIT;
    Dataset d = {0};
    char path[] = "/tmp/lg09-iris-XXXXXX";
    int fd = mkstemp(path);
    FILE *in = fopen("data/iris.csv", "rb"), *out = fdopen(fd, "wb");
    cr_assert(in && out);
    for (int c, k = 0; (c = fgetc(in)) != EOF; k++)
        fputc(k == 40 ? (c == '1' ? '2' : '1') : c, out);
    fclose(in);
    fclose(out);
    cr_assert_eq(dataset_load(&DATASET_IRIS, path, &d, &err), LG_ERR_INVALID);
    cr_assert(strstr(err.message, "SHA-256 is") && strstr(err.message, "pins f13ffa8fdd56fd8e"),
              "%s", err.message);
    unlink(path);
    cr_assert_eq(dataset_load(&DATASET_IRIS, "/nonexistent/iris.csv", &d, &err), LG_ERR_IO);
    cr_assert_str_eq(err.message, "/nonexistent/iris.csv: cannot read: No such file or "
                     "directory");
    cr_assert_eq(dataset_load(&DATASET_IRIS, "data", &d, &err), LG_ERR_IO);
    cr_assert_str_eq(err.message, "data: not a regular file");
    cr_assert_null(d.x);
}

/* ---- the step, the loop -------------------------------------------------------------- */

Test(stage09, bad_hyper_parameters_and_a_budget_one_short_are_refused_before_the_first_step)
{
    Run r;
    run_open(&r, &DATASET_IRIS, 16, &IRIS_CONFIG);
    const struct { TrainConfig c; const char *message; } bad[] = {
        {{40, 16, 0, 0.9, 1, SIZE_MAX}, "learning rate must be finite and > 0: got 0"},
        {{40, 16, -0.1, 0.9, 1, SIZE_MAX}, "learning rate must be finite and > 0: got -0.1"},
        {{40, 16, NAN, 0.9, 1, SIZE_MAX}, "learning rate must be finite and > 0: got nan"},
        {{40, 16, INFINITY, 0.9, 1, SIZE_MAX}, "learning rate must be finite and > 0: got inf"},
        {{40, 0, 0.05, 0.9, 1, SIZE_MAX}, "batch must be in [1, 120] (the training examples): "
                                          "got 0"},
        {{40, 121, 0.05, 0.9, 1, SIZE_MAX}, "batch must be in [1, 120] (the training "
                                            "examples): got 121"},
        {{0, 16, 0.05, 0.9, 1, SIZE_MAX}, "epochs must be in [1, 1000000]: got 0"},
        {{40, 16, 0.05, 1, 1, SIZE_MAX}, "momentum must be finite and in [0, 1): got 1"},
        {{40, 16, 0.05, 0.9, 1, 4223}, "step node budget exceeded: need 4224, limit 4223"},
    };
    uint32_t crc = params_crc(r.model);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        LgError err = LG_ERROR_INIT;
        size_t blocks = mem_live_blocks(), ops = value_nodes_written;
        cr_assert_null(trainer_new(r.model, &r.train, &bad[i].c, &err));
        cr_assert_str_eq(err.message, bad[i].message);
        cr_assert_eq(mem_live_blocks(), blocks);
        cr_assert_eq(value_nodes_written, ops);
    }
    cr_assert_eq(params_crc(r.model), crc);
    cr_assert_eq(r.trainer->plan.nodes, 4224, "forward 4048 + loss 176");
    LgError err = LG_ERROR_INIT;
    TrainConfig exact = IRIS_CONFIG;
    exact.node_limit = 4224;
    Trainer *t = trainer_new(r.model, &r.train, &exact, &err);
    cr_assert_not_null(t);
    trainer_free(&t);
    run_close(&r);
}

Test(stage09, the_loop_allocates_nothing_over_100_steps)
{
    Run r;
    run_open(&r, &DATASET_IRIS, 16, &IRIS_CONFIG);
    LgError err = LG_ERROR_INIT;
    TrainStepReport rep;
    cr_assert_eq(trainer_step(r.trainer, &rep, &err), LG_OK);
    size_t blocks = mem_live_blocks();
    mem_fail_at(1); /* any allocation from here on fails, and the step reports it */
    for (size_t i = 0; i < 100; i++) {
        cr_assert_eq(trainer_step(r.trainer, &rep, &err), LG_OK, "step %zu: %s", i + 2,
                     err.message);
        cr_assert_eq(rep.graph_nodes, 4224);
        cr_assert_eq(rep.scalar_ops, 4224);
    }
    mem_fail_at(0);
    cr_assert_eq(mem_live_blocks(), blocks);
    cr_assert_eq(r.trainer->at.epoch, 101 / 7);
    run_close(&r);
}

Test(stage09, replaced_storage_between_steps_is_refused_after_0_scalar_operations)
{
    Run r;
    run_open(&r, &DATASET_IRIS, 16, &IRIS_CONFIG);
    LgError err = LG_ERROR_INIT;
    TrainStepReport rep;
    cr_assert_eq(trainer_step(r.trainer, &rep, &err), LG_OK);
    Matrix *w = r.model->layer[0].weight;
    Tape *other = lg_new_tape(w->rows * w->cols);
    Matrix *fake = matrix_new_leaves(other, matrix_shape(w), NULL, "fake", &err);
    for (size_t i = 0; i < w->rows * w->cols; i++)
        fake->values[i]->data = w->values[i]->data;
    r.model->layer[0].weight = fake;
    uint32_t crc = params_crc(r.model);
    size_t ops = value_nodes_written;
    TrainPosition at = r.trainer->at;
    cr_assert_eq(trainer_step(r.trainer, &rep, &err), LG_ERR_IDENTITY);
    cr_assert_str_eq(err.message, "fc1 parameter storage identity changed: "
                     "mlp.fc1.weight[0,0] is not the sealed Value");
    cr_assert_eq(value_nodes_written, ops);
    cr_assert_eq(r.trainer->at.step, at.step);
    for (size_t i = 0; i < w->rows * w->cols; i++)
        cr_assert_eq(fake->values[i]->data, w->values[i]->data);
    r.model->layer[0].weight = w;
    cr_assert_eq(params_crc(r.model), crc);
    cr_assert_eq(trainer_step(r.trainer, &rep, &err), LG_OK, "the sealed storage trains on");
    matrix_free(&fake);
    tape_free(&other);
    run_close(&r);
}

Test(stage09, the_same_seed_gives_the_same_bits_another_seed_another_order)
{
    Run a, b, c;
    TrainConfig other = IRIS_CONFIG;
    other.seed = 2;
    run_open(&a, &DATASET_IRIS, 16, &IRIS_CONFIG);
    run_open(&b, &DATASET_IRIS, 16, &IRIS_CONFIG);
    run_open(&c, &DATASET_IRIS, 16, &other);
    cr_assert_eq(memcmp(a.trainer->order, b.trainer->order, 120 * sizeof(size_t)), 0);
    cr_assert_neq(memcmp(a.trainer->order, c.trainer->order, 120 * sizeof(size_t)), 0);
    train_epochs(a.trainer, 3);
    train_epochs(b.trainer, 3);
    train_epochs(c.trainer, 3);
    cr_assert_eq(params_crc(a.model), params_crc(b.model));
    cr_assert_neq(params_crc(a.model), params_crc(c.model));
    run_close(&a);
    run_close(&b);
    run_close(&c);
}

Test(stage09, divergence_is_reported_at_its_step_and_the_last_checkpoint_loads)
{
    Run r, back;
    TrainConfig wild = IRIS_CONFIG;
    wild.learning_rate = 100;
    run_open(&r, &DATASET_IRIS, 16, &wild);
    run_open(&back, &DATASET_IRIS, 16, &wild);
    LgError err = LG_ERROR_INIT;
    TrainStepReport rep;
    const char *path = "/tmp/lg09-diverge.ckpt";
    LgStatus s = LG_OK;
    while (s == LG_OK && r.trainer->at.epoch < wild.epochs)
        if ((s = trainer_run_epoch(r.trainer, &rep, &err)) == LG_OK)
            cr_assert_eq(checkpoint_save(r.trainer, path, &err), LG_OK);
    cr_assert_eq(s, LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "training diverged at step 88 (epoch 13): the loss is inf");
    cr_assert_eq(checkpoint_load(back.trainer, path, &err), LG_OK, "%s", err.message);
    cr_assert_eq(back.trainer->at.epoch, 12);
    unlink(path);
    run_close(&back);
    run_close(&r);
}

/* ---- accuracy ------------------------------------------------------------------------ */

static void expect_accuracy(const DatasetSpec *spec, size_t hidden, const TrainConfig *c,
                            size_t correct, size_t count)
{
    Run r;
    run_open(&r, spec, hidden, c);
    train_epochs(r.trainer, c->epochs);
    LgError err = LG_ERROR_INIT;
    TrainEvaluation e;
    cr_assert_eq(train_evaluate(r.model, &r.test, 64, NULL, &e, &err), LG_OK);
    cr_assert_eq(e.count, count);
    cr_assert_eq(e.correct, correct, "%s: %zu of %zu", spec->name, e.correct, e.count);
    cr_assert_geq((double)e.correct / (double)e.count, 0.95);
    run_close(&r);
}

Test(stage09, iris_reaches_30_of_30)
{
    expect_accuracy(&DATASET_IRIS, 16, &IRIS_CONFIG, 30, 30);
}

Test(stage09, digits_reach_348_of_359, .timeout = 300)
{
    expect_accuracy(&DATASET_DIGITS, 32, &DIGITS_CONFIG, 348, 359);
}

/* ---- checkpoints ---------------------------------------------------------------------- */

Test(stage09, resume_is_bit_exact_in_parameters_velocities_and_loss_curve)
{
    Run one, first, second;
    run_open(&one, &DATASET_IRIS, 16, &IRIS_CONFIG);
    run_open(&first, &DATASET_IRIS, 16, &IRIS_CONFIG);
    run_open(&second, &DATASET_IRIS, 16, &IRIS_CONFIG);
    LgError err = LG_ERROR_INIT;
    TrainStepReport a, b;
    double curve_one[10], curve_two[10];
    for (size_t e = 0; e < 10; e++) {
        cr_assert_eq(trainer_run_epoch(one.trainer, &a, &err), LG_OK);
        curve_one[e] = a.epoch_loss;
    }
    for (size_t e = 0; e < 4; e++) {
        cr_assert_eq(trainer_run_epoch(first.trainer, &b, &err), LG_OK);
        curve_two[e] = b.epoch_loss;
    }
    cr_assert_eq(trainer_step(first.trainer, &b, &err), LG_OK, "save in the middle of epoch 5");
    const char *path = "/tmp/lg09-resume.ckpt";
    cr_assert_eq(checkpoint_save(first.trainer, path, &err), LG_OK, "%s", err.message);
    cr_assert_eq(checkpoint_load(second.trainer, path, &err), LG_OK, "%s", err.message);
    cr_assert_eq(second.trainer->at.epoch, 4);
    cr_assert_eq(second.trainer->at.step, 1);
    for (size_t e = 4; e < 10; e++) {
        cr_assert_eq(trainer_run_epoch(second.trainer, &b, &err), LG_OK);
        curve_two[e] = b.epoch_loss;
    }
    cr_assert_eq(memcmp(curve_one, curve_two, sizeof curve_one), 0);
    cr_assert_eq(params_crc(one.model), params_crc(second.model));
    cr_assert_eq(memcmp(one.trainer->velocity, second.trainer->velocity,
                        model_parameter_count(one.model) * sizeof(double)), 0);
    unlink(path);
    run_close(&one);
    run_close(&first);
    run_close(&second);
}

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    static char buf[1 << 16];
    *n = fread(buf, 1, sizeof buf - 1, f);
    buf[*n] = '\0';
    fclose(f);
    return buf;
}

/* Write text with `from` replaced by `to` (first occurrence) and, if reseal, a correct
 * crc32 line for the edited body. */
static void write_edited(const char *path, const char *text, const char *from, const char *to,
                         int reseal)
{
    static char out[1 << 16];
    const char *at = strstr(text, from);
    cr_assert_not_null(at, "no '%s' in the checkpoint", from);
    size_t head = (size_t)(at - text);
    int n = snprintf(out, sizeof out, "%.*s%s%s", (int)head, text, to, at + strlen(from));
    cr_assert(n > 0 && (size_t)n < sizeof out);
    if (reseal) {
        char *crc = strstr(out, "crc32 ");
        cr_assert_not_null(crc);
        *crc = '\0';
        uLong c = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)out, (uInt)strlen(out));
        snprintf(crc, sizeof out - (size_t)(crc - out), "crc32 %08lx\n", (unsigned long)c);
    }
    FILE *f = fopen(path, "wb");
    fputs(out, f);
    fclose(f);
}

Test(stage09, a_bad_checkpoint_is_refused_whole_and_changes_nothing)
{
    Run r, other;
    run_open(&r, &DATASET_IRIS, 16, &IRIS_CONFIG);
    run_open(&other, &DATASET_IRIS, 16, &IRIS_CONFIG);
    train_epochs(r.trainer, 2);
    LgError err = LG_ERROR_INIT;
    const char *good = "/tmp/lg09-good.ckpt", *bad = "/tmp/lg09-bad.ckpt";
    cr_assert_eq(checkpoint_save(r.trainer, good, &err), LG_OK);
    size_t n = 0;
    char text[1 << 16];
    const char *saved = slurp(good, &n);
    memcpy(text, saved, n + 1);
    const char *first_value = strstr(strstr(text, "tensor mlp.fc1.weight"), "\n") + 1;
    char value[32];
    sscanf(first_value, "%31s", value);
    char nan_row[64];
    snprintf(nan_row, sizeof nan_row, "\n%s ", value);
    const struct { const char *from, *to; int reseal; const char *message; } cases[] = {
        {"epoch", "epocH", 0, "checksum mismatch"},
        {"crc32", "crc3", 0, "truncated or damaged: it does not end with a crc32 line"},
        {"tensor mlp.fc1.weight", "tensor mlp.fc9.weight", 1,
         "unknown tensor name mlp.fc9.weight: the model has no such tensor"},
        {"tensor mlp.fc2.weight 3 16", "tensor mlp.fc2.weight 3 15", 1,
         "tensor mlp.fc2.weight has shape (3, 15), the model's is (3, 16)"},
        {"velocity mlp.fc2.weight", "velocity mlp.fc1.weight", 1,
         "duplicate velocity mlp.fc1.weight (first on line"},
        {"tensor mlp.fc2.weight", "velocity mlp.fc2.weight", 1,
         "duplicate velocity mlp.fc2.weight (first on line"},
        {"plan ", "plan 0", 1, "a checkpoint of another model: plan fingerprint"},
        {"model mlp", "model net", 1, "a checkpoint of model 'net', not of 'mlp'"},
        {"batch 16", "batch 32", 1, "made with batch 32, this run has batch 16"},
        {nan_row, "\nnan ", 1, "must be finite: got 'nan'"},
        {nan_row, "\ninf ", 1, "must be finite: got 'inf'"},
        {"litgrad-checkpoint 1", "litgrad-checkpoint 2", 1, "version 2 is not supported"},
        {"epoch 2", "epoch 41", 1, "epoch 41 is past this run's 40 epochs"},
    };
    uint32_t crc = params_crc(other.model);
    TrainPosition at = other.trainer->at;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_edited(bad, text, cases[i].from, cases[i].to, cases[i].reseal);
        size_t blocks = mem_live_blocks();
        cr_assert_neq(checkpoint_load(other.trainer, bad, &err), LG_OK, "case %zu loaded", i);
        cr_assert(strstr(err.message, cases[i].message) && strstr(err.message, bad),
                  "case %zu: %s", i, err.message);
        cr_assert_eq(mem_live_blocks(), blocks);
        cr_assert_eq(params_crc(other.model), crc);
        cr_assert_eq(memcmp(&other.trainer->at, &at, sizeof at), 0);
    }
    /* a missing tensor: cut the fc2 velocity section off */
    char *cut = strstr(text, "velocity mlp.fc2.weight");
    strcpy(cut, "crc32 00000000\n");
    write_edited(bad, text, "crc32 00000000", "crc32 00000000", 1);
    cr_assert_eq(checkpoint_load(other.trainer, bad, &err), LG_ERR_INVALID);
    cr_assert(strstr(err.message, "missing velocity mlp.fc2.weight"), "%s", err.message);
    FILE *f = fopen(bad, "r+b");
    cr_assert_eq(ftruncate(fileno(f), 100), 0);
    fclose(f);
    cr_assert_eq(checkpoint_load(other.trainer, bad, &err), LG_ERR_INVALID);
    cr_assert_eq(checkpoint_load(other.trainer, "/tmp", &err), LG_ERR_IO);
    cr_assert_str_eq(err.message, "/tmp: not a regular file");
    cr_assert_eq(checkpoint_load(other.trainer, "/nonexistent.ckpt", &err), LG_ERR_IO);
    cr_assert_eq(params_crc(other.model), crc);
    cr_assert_eq(checkpoint_load(other.trainer, good, &err), LG_OK, "%s", err.message);
    cr_assert_eq(params_crc(other.model), params_crc(r.model));
    unlink(good);
    unlink(bad);
    run_close(&other);
    run_close(&r);
}

Test(stage09, a_save_killed_50_times_always_leaves_a_checkpoint_that_loads, .timeout = 300)
{
    Run r, back;
    run_open(&r, &DATASET_IRIS, 16, &IRIS_CONFIG);
    run_open(&back, &DATASET_IRIS, 16, &IRIS_CONFIG);
    LgError err = LG_ERROR_INIT;
    const char *path = "/tmp/lg09-killed.ckpt";
    cr_assert_eq(checkpoint_save(r.trainer, path, &err), LG_OK);
    size_t kills = 0;
    for (int round = 0; round < 60; round++) {
        fflush(NULL);
        pid_t child = fork();
        cr_assert(child >= 0);
        if (child == 0) {
            TrainStepReport rep;
            for (;;) { /* train a step, save, forever: the parent kills it */
                if (r.trainer->at.epoch == IRIS_CONFIG.epochs)
                    trainer_seek(r.trainer, (TrainPosition){0, 0, 0.0, 0});
                if (trainer_step(r.trainer, &rep, &err) || checkpoint_save(r.trainer, path, &err))
                    _exit(3);
            }
        }
        struct timespec pause = {0, 200000L + (long)(round % 10) * 350000L};
        nanosleep(&pause, NULL);
        kill(child, SIGKILL);
        int status;
        waitpid(child, &status, 0);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "round %d", round);
        kills++;
        cr_assert_eq(checkpoint_load(back.trainer, path, &err), LG_OK, "after kill %zu: %s",
                     kills, err.message);
    }
    cr_assert_geq(kills, 50);
    unlink(path);
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    run_close(&back);
    run_close(&r);
}

/* ---- the program ---------------------------------------------------------------------- */

Test(stage09, resume_in_a_new_process_gives_the_same_bits_and_curve)
{
    ProgramRun whole, part, rest;
    run_program(&whole, "stage-09", "--set iris --epochs 6");
    cr_assert_eq(whole.status, 0, "%s", whole.output);
    run_program(&part, "stage-09", "--set iris --epochs 3 --save /tmp/lg09-proc.ckpt");
    cr_assert_eq(part.status, 0, "%s", part.output);
    run_program(&rest, "stage-09", "--set iris --epochs 6 --resume /tmp/lg09-proc.ckpt");
    cr_assert_eq(rest.status, 0, "%s", rest.output);
    cr_assert_not_null(strstr(rest.output, "resumed from /tmp/lg09-proc.ckpt at epoch 3"));
    const char *crc = strstr(whole.output, "parameters: crc32");
    cr_assert_not_null(crc);
    cr_assert_not_null(strstr(rest.output, crc), "%s\n---\n%s", whole.output, rest.output);
    const char *six = strstr(whole.output, "\n      6 ");
    cr_assert_not_null(six);
    char line[128];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(six + 1, "\n") + 1, six);
    cr_assert_not_null(strstr(rest.output, line), "epoch 6 differs");
    unlink("/tmp/lg09-proc.ckpt");
}

Test(stage09, the_program_refuses_bad_input_with_a_one_line_error_and_its_status)
{
    const struct { const char *args; int status; const char *message; } cases[] = {
        {"--set roses", 2, "stage-09: error: --set must be iris or digits: got 'roses'"},
        {"--epochs 3", 2, "the training options need --set"},
        {"--set iris --lr 0", 1, "stage-09: error: learning rate must be finite and > 0: got 0"},
        {"--set iris --lr nan", 2, "--lr must be finite: got 'nan'"},
        {"--set iris --batch 0", 1, "batch must be in [1, 120] (the training examples): got 0"},
        {"--set iris --epochs 0", 1, "epochs must be in [1, 1000000]: got 0"},
        {"--set iris --node-budget 4223", 1, "step node budget exceeded: need 4224, limit 4223"},
        {"--set iris --data /nonexistent", 2, "/nonexistent/iris.csv: cannot read"},
        {"--set iris --resume /tmp", 2, "stage-09: error: /tmp: not a regular file"},
        {"--set iris --resume data/iris.csv", 2, "data/iris.csv: truncated or damaged"},
        {"--set iris --lr 100 --epochs 20", 1, "training diverged at step 88 (epoch 13)"},
        {"--bogus", 2, "unknown option"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ProgramRun run;
        run_program(&run, "stage-09", cases[i].args);
        cr_assert_eq(run.status, cases[i].status, "%s: %d\n%s", cases[i].args, run.status,
                     run.output);
        cr_assert_not_null(strstr(run.output, cases[i].message), "%s:\n%s", cases[i].args,
                           run.output);
    }
}
