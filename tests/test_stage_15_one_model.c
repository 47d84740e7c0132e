#include "litgrad_test.h"

#include <math.h>
#include <stdint.h>

#include "mem.h"
#include "mprog.h"
#include "mprogdemo.h"

LG_SUITE(stage15);

static const TrainConfig IRIS_CONFIG = {40, 16, 0.05, 0.9, 1, SIZE_MAX};

static const MprogType F64_16x5 = {MPROG_F64, 16, 5}, F64_16x4 = {MPROG_F64, 16, 4};
static const MprogType F64_3x16 = {MPROG_F64, 3, 16}, F64_16x3 = {MPROG_F64, 16, 3};
static const MprogType F64_16x1 = {MPROG_F64, 16, 1}, F64_1x1 = {MPROG_F64, 1, 1};
static const MprogType I64_16x1 = {MPROG_I64, 16, 1};

/* ---- the rules ---------------------------------------------------------------------- */

Test(stage15, the_products_take_their_shapes_from_the_outer_dimensions)
{
    LgError err = LG_ERROR_INIT;
    MprogType t;
    cr_assert_eq(mprog_op_type(MPROG_MM_NT, &F64_16x5, &(MprogType){MPROG_F64, 16, 5}, NULL,
                               &t, &err), LG_OK);
    cr_assert(t.rows == 16 && t.cols == 16);
    cr_assert_eq(mprog_op_type(MPROG_MM_NN, &F64_16x3, &F64_3x16, NULL, &t, &err), LG_OK);
    cr_assert(t.rows == 16 && t.cols == 16);
    cr_assert_eq(mprog_op_type(MPROG_MM_TN, &F64_16x3, &F64_16x5, NULL, &t, &err), LG_OK);
    cr_assert(t.rows == 3 && t.cols == 5);
    cr_assert_eq(mprog_op_type(MPROG_MM_NT, &F64_16x5, &F64_16x4, NULL, &t, &err),
                 LG_ERR_TENSOR_SHAPE);
    cr_assert_str_eq(err.message, "mm_nt needs a[T, K] and b[N, K]: got f64[16, 5] and "
                     "f64[16, 4]");
}

Test(stage15, broadcasting_takes_a_column_or_a_scalar_and_refuses_the_rest)
{
    LgError err = LG_ERROR_INIT;
    MprogType t;
    cr_assert_eq(mprog_op_type(MPROG_SUB, &F64_16x3, &F64_16x1, NULL, &t, &err), LG_OK);
    cr_assert(t.rows == 16 && t.cols == 3);
    cr_assert_eq(mprog_op_type(MPROG_DIV, &F64_1x1, &F64_16x1, NULL, &t, &err), LG_OK);
    cr_assert(t.rows == 16 && t.cols == 1);
    cr_assert_eq(mprog_op_type(MPROG_ADD, &F64_16x3, &F64_16x5, NULL, &t, &err),
                 LG_ERR_TENSOR_SHAPE);
    cr_assert_str_eq(err.message, "add needs equal sizes or a size 1 in each dimension: got "
                     "f64[16, 3] and f64[16, 5]");
    cr_assert_eq(mprog_op_type(MPROG_ADD_INPLACE, &F64_16x1, &F64_16x3, NULL, &t, &err),
                 LG_ERR_TENSOR_SHAPE);
    cr_assert_str_eq(err.message, "add_ cannot write f64[16, 3] into f64[16, 1]: in place "
                     "keeps the type");
}

Test(stage15, the_label_lookup_needs_i64_labels_one_per_row)
{
    LgError err = LG_ERROR_INIT;
    MprogType t;
    cr_assert_eq(mprog_op_type(MPROG_PICK, &F64_16x3, &I64_16x1, NULL, &t, &err), LG_OK);
    cr_assert(t.rows == 16 && t.cols == 1 && t.dtype == MPROG_F64);
    cr_assert_eq(mprog_op_type(MPROG_PICK, &F64_16x3, &F64_16x1, NULL, &t, &err),
                 LG_ERR_TENSOR_DTYPE);
    cr_assert_eq(mprog_op_type(MPROG_SUB_AT_INPLACE, &F64_16x3, &I64_16x1, &F64_16x1, &t,
                               &err), LG_ERR_TENSOR_SHAPE);
    cr_assert_eq(mprog_op_type(MPROG_MUL, &F64_16x3, &I64_16x1, NULL, &t, &err),
                 LG_ERR_TENSOR_DTYPE);
    cr_assert_str_eq(err.message, "mul needs f64 operands");
}

/* ---- the costs --------------------------------------------------------------------- */

/* The program's instructions, grouped as Stage 14's kernels: the products, ReLU, its rule
 * and the update cost what the kernels cost; the loss costs T (C - 1) more (the row's
 * maximum, a plain number on the tape, is computed by comparisons here) and its gradient
 * T - 1 less (1/T once, and one subtraction at the label where the tape's node adds
 * 0 - 1/T). */
Test(stage15, the_step_costs_what_stage_14s_kernels_cost_but_for_the_loss)
{
    LgError err = LG_ERROR_INIT;
    MprogdemoRun r;
    cr_assert_eq(mprogdemo_open(&r, &DATASET_IRIS, 16, &IRIS_CONFIG, &err), LG_OK, "%s",
                 err.message);
    const size_t T = 16, C = 3;
    size_t kernels[3] = {0, 0, 0}, program[3] = {0, 0, 0}; /* loss, its gradient, rest */
    for (size_t k = 0; k < r.dense->plan.kernels; k++) {
        const DenseKernel *kn = &r.dense->plan.kernel[k];
        kernels[kn->kind == DENSE_CROSS_ENTROPY ? 0 : kn->kind == DENSE_CROSS_ENTROPY_BACK
                ? 1 : 2] += kn->operations;
    }
    size_t z = mprog_find(&r.program, "z"), gz = mprog_find(&r.program, "gz");
    int part = 2;
    for (size_t k = 0; k < r.program.ninstrs; k++) {
        const MprogInstr *in = &r.program.instr[k];
        program[part] += in->operations;
        if (in->result == z)
            part = 0;
        else if (in->result == mprog_find(&r.program, "loss"))
            part = 1;
        else if (in->op == MPROG_SUB_AT_INPLACE && in->a == gz)
            part = 2;
    }
    cr_assert_eq(program[2], kernels[2]);
    cr_assert_eq(program[0], kernels[0] + T * (C - 1));
    cr_assert_eq(program[1], kernels[1] - (T - 1));
    cr_assert_eq(r.program.operations, r.dense->plan.operations + T * (C - 1) - (T - 1));
    mprogdemo_close(&r);
}

Test(stage15, a_budget_one_short_is_refused_with_the_numbers)
{
    LgError err = LG_ERROR_INIT;
    MprogProgram p;
    MprogMlp mlp = {16, 5, 16, 3, 0.05, 0.9, SIZE_MAX};
    cr_assert_eq(mprog_build_mlp_step(&p, &mlp, &err), LG_OK, "%s", err.message);
    size_t need = p.operations;
    mlp.budget = need - 1;
    cr_assert_eq(mprog_build_mlp_step(&p, &mlp, &err), LG_ERR_BUDGET);
    char expect[128];
    snprintf(expect, sizeof expect, "model program operation budget exceeded: need %zu, "
             "limit %zu", need, need - 1);
    cr_assert_str_eq(err.message, expect);
}

Test(stage15, a_label_outside_its_row_is_refused_before_anything_runs)
{
    LgError err = LG_ERROR_INIT;
    MprogProgram p;
    const MprogMlp mlp = {16, 5, 16, 3, 0.05, 0.9, SIZE_MAX};
    cr_assert_eq(mprog_build_mlp_step(&p, &mlp, &err), LG_OK, "%s", err.message);
    MprogFrame *f = mprog_frame_new(&p, &err);
    cr_assert_not_null(f);
    mprog_frame_i64(f, mprog_find(&p, "y"))[2] = 3;
    cr_assert_eq(mprog_frame_check_labels(f, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "label 3 of row 2 is not a column of d: f64[16, 3]");
    mprog_frame_free(&f);
}

/* ---- three machines ------------------------------------------------------------------ */

Test(stage15, one_step_on_iris_equals_the_tape_and_the_kernels_bit_for_bit)
{
    LgError err = LG_ERROR_INIT;
    MprogdemoRun r;
    cr_assert_eq(mprogdemo_open(&r, &DATASET_IRIS, 16, &IRIS_CONFIG, &err), LG_OK, "%s",
                 err.message);
    int same = 0;
    double loss = 0;
    cr_assert_eq(mprogdemo_step(&r, &same, &loss, &err), LG_OK, "%s", err.message);
    cr_assert(same, "step 1 differs: program loss %a", loss);
    cr_assert(isfinite(loss) && loss > 0.5 && loss < 2.0);
    mprogdemo_close(&r);
}

Test(stage15, forty_epochs_on_iris_equal_the_tape_after_every_step)
{
    LgError err = LG_ERROR_INIT;
    MprogdemoRun r;
    cr_assert_eq(mprogdemo_open(&r, &DATASET_IRIS, 16, &IRIS_CONFIG, &err), LG_OK, "%s",
                 err.message);
    for (size_t k = 1; k <= 280; k++) {
        int same = 0;
        double loss = 0;
        cr_assert_eq(mprogdemo_step(&r, &same, &loss, &err), LG_OK, "%s", err.message);
        cr_assert(same, "step %zu differs: program loss %a", k, loss);
    }
    mprogdemo_close(&r);
}

Test(stage15, odd_sizes_stay_bit_identical)
{
    LgError err = LG_ERROR_INIT;
    MprogdemoRun r;
    TrainConfig odd = IRIS_CONFIG;
    odd.batch = 7;
    odd.epochs = 3;
    cr_assert_eq(mprogdemo_open(&r, &DATASET_IRIS, 11, &odd, &err), LG_OK, "%s",
                 err.message);
    for (size_t k = 1; k <= 51; k++) {
        int same = 0;
        double loss = 0;
        cr_assert_eq(mprogdemo_step(&r, &same, &loss, &err), LG_OK, "%s", err.message);
        cr_assert(same, "step %zu differs: program loss %a", k, loss);
    }
    mprogdemo_close(&r);
}

Test(stage15, digits_steps_equal_the_tape_bit_for_bit, .timeout = 120)
{
    static const TrainConfig digits = {15, 32, 0.05, 0.9, 1, SIZE_MAX};
    LgError err = LG_ERROR_INIT;
    MprogdemoRun r;
    cr_assert_eq(mprogdemo_open(&r, &DATASET_DIGITS, 32, &digits, &err), LG_OK, "%s",
                 err.message);
    for (size_t k = 1; k <= 50; k++) {
        int same = 0;
        double loss = 0;
        cr_assert_eq(mprogdemo_step(&r, &same, &loss, &err), LG_OK, "%s", err.message);
        cr_assert(same, "step %zu differs: program loss %a", k, loss);
    }
    mprogdemo_close(&r);
}

Test(stage15, emit_prints_the_program_of_each_data_set)
{
    ProgramRun run;
    run_program(&run, "stage-15", "--emit digits");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert_not_null(strstr(run.output, "# the training step of the bias-free MLP 65 -> "
                              "32 -> 10 on digits, T = 32\n"), "%s", run.output);
    cr_assert_not_null(strstr(run.output, "  %h = mm_nt %x, %w1"), "%s", run.output);
    run_program(&run, "stage-15", "--emit mnist");
    cr_assert_eq(run.status, 2, "%s", run.output);
}

/* Appendix A's exporter (built for the last stage's tests by the Makefile) begins its
 * --model-program output with the text --emit prints, so that the program PyTorch runs
 * is the one a reader reads, and then runs the whole iris run: 280 steps. */
Test(stage15, the_crosscheck_exporter_prints_the_emitted_program_and_every_step)
{
    ProgramRun emit;
    run_program(&emit, "stage-15", "--emit iris");
    cr_assert_eq(emit.status, 0, "%s", emit.output);
    static LgRun run;
    lg_run(&run, "", "crosscheck-export", "--model-program iris");
    cr_assert_eq(run.status, 0, "%s", run.err);
    cr_assert_eq(strncmp(run.out, emit.output, strlen(emit.output)), 0, "%s", run.out);
    cr_assert_not_null(strstr(run.out, "\nstep 280 "), "the last step is 280");
    cr_assert_null(strstr(run.out, "\nstep 281 "));
    cr_assert_not_null(strstr(run.out, "\nfinal v2 3 16 "), "%s", run.out);
}

Test(stage15, the_default_run_prints_every_step_bit_identical)
{
    ProgramRun run;
    run_program(&run, "stage-15", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert_not_null(strstr(run.output, "  280 of 280 steps bit-identical on all three "
                              "machines\n"), "%s", run.output);
}

Test(stage15, a_frame_that_cannot_be_made_leaves_nothing)
{
    LgError err = LG_ERROR_INIT;
    MprogProgram p;
    const MprogMlp mlp = {16, 5, 16, 3, 0.05, 0.9, SIZE_MAX};
    cr_assert_eq(mprog_build_mlp_step(&p, &mlp, &err), LG_OK, "%s", err.message);
    for (size_t k = 1; k <= 3; k++) {
        size_t live = mem_live_blocks();
        mem_fail_at(k);
        MprogFrame *f = mprog_frame_new(&p, &err);
        mem_fail_at(0);
        cr_assert_null(f, "allocation %zu", k);
        cr_assert_eq(err.status, LG_ERR_ALLOC);
        cr_assert_eq(mem_live_blocks(), live);
    }
}

/* ---- the run as one loop ------------------------------------------------------------ */

static void open_iris_loop(MprogdemoLoop *l)
{
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(mprogdemo_loop_open(l, &DATASET_IRIS, 16, &IRIS_CONFIG, &err), LG_OK, "%s",
                 err.message);
    cr_assert_eq(l->per_epoch, 7);
    cr_assert_eq(l->steps, 280);
}

Test(stage15, the_union_finds_the_conds_counter_and_the_body_only_analysis_does_not)
{
    LgError err = LG_ERROR_INIT;
    MprogLoop loop;
    const MprogMlp mlp = {16, 5, 16, 3, 0.05, 0.9, SIZE_MAX};
    cr_assert_eq(mprog_build_mlp_loop(&loop, &mlp, 120, 280, &err), LG_OK, "%s",
                 err.message);
    int all[MPROG_VALUES_MAX], body[MPROG_VALUES_MAX];
    mprog_loop_mutations(&loop, MPROG_ANALYSIS_UNION, all);
    mprog_loop_mutations(&loop, MPROG_ANALYSIS_BODY_ONLY, body);
    static const char *const names[] = {"w1", "w2", "v1", "v2"};
    for (size_t k = 0; k < 4; k++) {
        size_t v = mprog_find(&loop.program, names[k]);
        cr_assert(all[v] && body[v], "%s", names[k]);
    }
    size_t k = mprog_find(&loop.program, "k");
    cr_assert(all[k] && !body[k]);
    cr_assert(!all[mprog_find(&loop.program, "X")] && !all[mprog_find(&loop.program, "end")]);
    cr_assert_eq(loop.cond_end, 2);
}

Test(stage15, the_run_as_one_loop_equals_the_tape_after_every_step_eager_and_compiled)
{
    for (int compiled = 0; compiled <= 1; compiled++) {
        LgError err = LG_ERROR_INIT;
        MprogdemoLoop l;
        open_iris_loop(&l);
        cr_assert_eq(mprogdemo_loop_run(&l, compiled, MPROG_ANALYSIS_UNION, 40, &err), LG_OK,
                     "%s", err.message);
        cr_assert_eq(l.ran, 280);
        cr_assert_eq(l.identical, 280, "compiled %d: step %zu differs", compiled,
                     l.first_difference);
        cr_assert_eq(mprog_frame_f64(l.frame, l.k)[0], 280.0);
        mprogdemo_loop_close(&l);
    }
}

Test(stage15, compiled_body_only_training_differs_from_the_first_step_of_the_second_call)
{
    LgError err = LG_ERROR_INIT;
    MprogdemoLoop l;
    open_iris_loop(&l);
    cr_assert_eq(mprogdemo_loop_run(&l, 1, MPROG_ANALYSIS_BODY_ONLY, 1, &err), LG_OK, "%s",
                 err.message);
    cr_assert_eq(l.identical, 7);
    cr_assert_eq(mprog_frame_f64(l.frame, l.k)[0], 0.0, "the cond's count is lost");
    cr_assert_eq(mprogdemo_loop_run(&l, 1, MPROG_ANALYSIS_BODY_ONLY, 2, &err), LG_OK, "%s",
                 err.message);
    cr_assert_eq(l.first_difference, 8);
    cr_assert(isfinite(mprog_frame_f64(l.frame, l.loss)[0]));
    mprogdemo_loop_close(&l);
}

Test(stage15, a_batch_beyond_the_order_is_refused_with_the_numbers)
{
    LgError err = LG_ERROR_INIT;
    MprogdemoLoop l;
    open_iris_loop(&l);
    mprog_frame_f64(l.frame, l.end)[0] = 281.0;
    mprog_frame_f64(l.frame, l.k)[0] = 279.0;
    cr_assert_eq(mprog_loop_run_eager(l.frame, &l.loop, NULL, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "take_rows: batch 280 is not a line of order: 280 lines");
    mprogdemo_loop_close(&l);
}

Test(stage15, take_rows_needs_a_scalar_batch_number)
{
    LgError err = LG_ERROR_INIT;
    MprogType t;
    const MprogType order = {MPROG_I64, 280, 16}, data = {MPROG_F64, 120, 5};
    cr_assert_eq(mprog_op_type(MPROG_TAKE_ROWS, &data, &order, &F64_1x1, &t, &err), LG_OK);
    cr_assert(t.dtype == MPROG_F64 && t.rows == 16 && t.cols == 5);
    cr_assert_eq(mprog_op_type(MPROG_TAKE_ROWS, &data, &order, &F64_16x1, &t, &err),
                 LG_ERR_TENSOR_SHAPE);
    cr_assert_str_eq(err.message, "take_rows takes the batch's number as a scalar f64[1, 1]: "
                     "got f64[16, 1]");
}

/* --analysis asks whether one analysis trains as the tape trains: the body-only run
 * prints what it did, then ends with exit 1 and one line naming the analysis and the
 * first step that differs. The union's run is exit 0. */
Test(stage15, the_default_run_shows_the_body_only_loss_of_the_conds_count)
{
    static LgRun run;
    lg_run(&run, "", "stage-15", "--analysis body-only");
    cr_assert_eq(run.status, 1, "%s%s", run.out, run.err);
    cr_assert_not_null(strstr(run.out, "7 of 280 bit-identical, k after the last call 0\n"),
                       "%s", run.out);
    cr_assert_not_null(strstr(run.out, "first step that differs: 8;"), "%s", run.out);
    cr_assert_str_eq(run.err, "stage-15: error: compiled with the body-only analysis, the "
                     "loop departs from the tape at step 8\n");
    lg_run(&run, "", "stage-15", "--analysis union");
    cr_assert_eq(run.status, 0, "%s%s", run.out, run.err);
    cr_assert_str_eq(run.err, "");
}

Test(stage15, the_whole_storage_check_and_the_fold_leave_training_as_the_tape_trains)
{
    for (int a = MPROG_ANALYSIS_WHOLE_STORAGE; a <= MPROG_ANALYSIS_FOLD_FALSE; a++) {
        LgError err = LG_ERROR_INIT;
        MprogdemoLoop l;
        open_iris_loop(&l);
        cr_assert_eq(mprogdemo_loop_run(&l, 1, (MprogAnalysis)a, 40, &err), LG_OK, "%s",
                     err.message);
        cr_assert_eq(l.ran, 280, "%s", mprog_analysis_name((MprogAnalysis)a));
        cr_assert_eq(l.identical, 280, "%s: step %zu differs",
                     mprog_analysis_name((MprogAnalysis)a), l.first_difference);
        cr_assert_eq(mprog_frame_f64(l.frame, l.k)[0], 280.0);
        mprogdemo_loop_close(&l);
    }
}

Test(stage15, the_fold_of_a_call_with_no_step_left_loses_only_an_add_of_zero)
{
    LgError err = LG_ERROR_INIT;
    MprogdemoLoop l;
    open_iris_loop(&l);
    int mutated[MPROG_VALUES_MAX];
    mprog_loop_mutations(&l.loop, MPROG_ANALYSIS_FOLD_FALSE, mutated);
    cr_assert(mutated[l.k], "the fold's analysis is the union's");
    /* a cond false at once whose add_ would move k: go is 0, so k += 0 */
    mprog_frame_f64(l.frame, l.k)[0] = 5.0;
    mprog_frame_f64(l.frame, l.end)[0] = 3.0;
    cr_assert_eq(mprog_loop_run_compiled(l.frame, &l.loop, MPROG_ANALYSIS_FOLD_FALSE, NULL,
                                         &err), LG_OK, "%s", err.message);
    cr_assert_eq(mprog_frame_f64(l.frame, l.k)[0], 5.0);
    cr_assert_eq(l.ran, 0);
    mprogdemo_loop_close(&l);
}

Test(stage15, the_default_run_trains_digits_as_one_loop_bit_for_bit, .timeout = 120)
{
    ProgramRun run;
    run_program(&run, "stage-15", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    const char *digits = strstr(run.output, "Digits, 15 epochs as one while_loop");
    cr_assert_not_null(digits, "%s", run.output);
    cr_assert_not_null(strstr(digits, "digits, compiled, union   660 steps, 660 of 660 "
                              "bit-identical"), "%s", run.output);
}

Test(stage15, bench_trains_digits_on_four_machines_to_the_same_bits, .timeout = 120)
{
    ProgramRun run;
    run_program(&run, "stage-15", "--bench");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert_not_null(strstr(run.output, "  program, compiled "), "%s", run.output);
    cr_assert_not_null(strstr(run.output, "bit-identical after the last step, all four: yes\n"),
                       "%s", run.output);
}
