/* fuzz_files.c -- a libFuzzer target for the files a user hands to Stage 09: checkpoints
 * (checkpoint_load) and data files (dataset_load, plain or gzip, with the iris and the
 * digits specs, unpinned as a DATA operand is).
 *
 * Every input is written to one temporary file and given to the three readers. What
 * must hold, whatever the bytes:
 *   - a refusal leaves no block of litgrad's allocator live, leaves the model's
 *     parameters, the velocities and the position as they were, and says why in one
 *     line: not empty, shorter than LG_MESSAGE_MAX, no control byte (a CR or a NUL in
 *     the input is named, never echoed);
 *   - a data file that loads has the spec's rows, every feature finite and in
 *     [0, feature_max], every label below the number of classes;
 *   - a checkpoint that loads leaves the seal intact, the parameters and velocities
 *     finite and the position one the run can be at; saved again and loaded again, it
 *     gives the same bits.
 * A broken property aborts, which libFuzzer reports as a crash.
 *
 * Built by hand (make fuzz builds it the same way), from a tangled tree T of Stage 09
 * or later:
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -IT -DLG_DATA_DIR='"data"' \
 *     tests/fuzz/fuzz_files.c LIB -lz -lnettle -lm
 * where LIB is every .c file of T but the programs (stage-NN.c), then
 *   ./a.out tests/fuzz/corpus/files
 * Without libFuzzer, a driver that calls LLVMFuzzerTestOneInput on each file of
 * tests/fuzz/regressions/files/ runs the findings kept there. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dataset.h"
#include "mem.h"
#include "model.h"
#include "train.h"

#ifndef LG_DATA_DIR
#define LG_DATA_DIR "data"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                                    \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz_files: %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static struct {
    int ready;
    char input[64], saved[80];   /* the temporary files: the input, a checkpoint saved */
    char base[80];               /* the state of setup, saved: restore_state loads it */
    Dataset train, test;
    Model *model;
    Trainer *trainer;
    double *params, *velocity;   /* the state before every input, in sealed order */
    TrainPosition at;
    size_t blocks;               /* live blocks between inputs */
} F;

static const TrainConfig IRIS_CONFIG = {40, 16, 0.05, 0.9, 1, SIZE_MAX};
static const InitSpec SEED_INIT = {INIT_NORMAL, 1.0, 1, INIT_ROLE_LINEAR};

static void remove_files(void)
{
    unlink(F.input);
    unlink(F.saved);
    unlink(F.base);
}

/* The iris run of stage-09's default settings (Stage 07's mlp, 16 hidden), as the
 * program and tests/test_stage_09_training.c make it, so that a checkpoint written by
 * `stage-09 --save` gets past the header. */
static void setup(void)
{
    LgError err = LG_ERROR_INIT;
    Dataset all;
    REQUIRE(dataset_load(&DATASET_IRIS, LG_DATA_DIR "/iris.csv", &all, &err) == LG_OK);
    REQUIRE(dataset_split(&all, 5, &F.train, &F.test, &err) == LG_OK);
    dataset_free(&all);
    REQUIRE(dataset_standardize(&F.train, &F.test, &err) == LG_OK);
    REQUIRE(dataset_append_one(&F.train, &err) == LG_OK);
    REQUIRE(dataset_append_one(&F.test, &err) == LG_OK);
    const size_t widths[3] = {F.train.features, 16, F.train.classes};
    ModelPlan plan;
    REQUIRE(model_plan_mlp("mlp", widths, 3, 0, &SEED_INIT, SIZE_MAX, &plan, &err) == LG_OK);
    REQUIRE((F.model = model_new(&plan, &err)) != NULL);
    REQUIRE((F.trainer = trainer_new(F.model, &F.train, &IRIS_CONFIG, &err)) != NULL);
    size_t P = F.model->seal.count;
    REQUIRE((F.params = malloc(2 * P * sizeof *F.params)) != NULL);
    F.velocity = F.params + P;
    for (size_t k = 0; k < P; k++)
        F.params[k] = F.model->seal.refs[k].value->data;
    memcpy(F.velocity, F.trainer->velocity, P * sizeof *F.velocity);
    F.at = F.trainer->at;
    strcpy(F.input, "/tmp/lg-fuzz-files-XXXXXX");
    int fd = mkstemp(F.input);
    REQUIRE(fd >= 0);
    close(fd);
    snprintf(F.saved, sizeof F.saved, "%s.ckpt", F.input);
    snprintf(F.base, sizeof F.base, "%s.base", F.input);
    atexit(remove_files);
    REQUIRE(checkpoint_save(F.trainer, F.base, &err) == LG_OK);
    F.blocks = mem_live_blocks();
    F.ready = 1;
}

/* 1 if the model, the velocities and the position are those of setup(), bit for bit. */
static int state_unchanged(void)
{
    size_t P = F.model->seal.count;
    for (size_t k = 0; k < P; k++)
        if (memcmp(&F.params[k], &F.model->seal.refs[k].value->data, sizeof(double)) != 0)
            return 0;
    return memcmp(F.velocity, F.trainer->velocity, P * sizeof *F.velocity) == 0 &&
           memcmp(&F.at, &F.trainer->at, sizeof F.at) == 0;
}

/* Back to the state of setup: its own checkpoint, loaded. */
static void restore_state(void)
{
    LgError err = LG_ERROR_INIT;
    REQUIRE(checkpoint_load(F.trainer, F.base, &err) == LG_OK);
    REQUIRE(state_unchanged());
}

/* A refusal's message: one line of printable text (bytes >= 0x80 may be UTF-8). */
static void check_refusal(const LgError *err)
{
    size_t n = strlen(err->message);
    REQUIRE(err->status != LG_OK && n > 0 && n < LG_MESSAGE_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)err->message[i];
        REQUIRE(b >= 0x20 && b != 0x7f);
    }
    REQUIRE(mem_live_blocks() == F.blocks);
}

static void check_data(const DatasetSpec *spec)
{
    DatasetSpec unpinned = *spec;
    unpinned.sha256 = NULL;
    LgError err = LG_ERROR_INIT;
    Dataset d = {0};
    if (dataset_load(&unpinned, F.input, &d, &err) != LG_OK) {
        REQUIRE(d.x == NULL && d.label == NULL);
        check_refusal(&err);
        return;
    }
    REQUIRE(d.rows == spec->rows && d.features == spec->features);
    for (size_t i = 0; i < d.rows * d.features; i++)
        REQUIRE(isfinite(d.x[i]) && d.x[i] >= 0 && d.x[i] <= spec->feature_max);
    for (size_t i = 0; i < d.rows; i++)
        REQUIRE(d.label[i] < spec->classes);
    dataset_free(&d);
    REQUIRE(mem_live_blocks() == F.blocks);
}

static void check_checkpoint(void)
{
    LgError err = LG_ERROR_INIT;
    if (checkpoint_load(F.trainer, F.input, &err) != LG_OK) {
        check_refusal(&err);
        REQUIRE(state_unchanged());
        return;
    }
    REQUIRE(model_check_seal(F.model, &err) == LG_OK);
    size_t P = F.model->seal.count;
    const TrainPosition at = F.trainer->at;
    REQUIRE(at.epoch <= F.trainer->config.epochs && at.loss_sum >= 0);
    REQUIRE(at.step < (at.epoch < F.trainer->config.epochs ? F.trainer->steps_per_epoch : 1));
    double *loaded = malloc(2 * P * sizeof *loaded);
    REQUIRE(loaded != NULL);
    for (size_t k = 0; k < P; k++) {
        loaded[k] = F.model->seal.refs[k].value->data;
        loaded[P + k] = F.trainer->velocity[k];
        REQUIRE(isfinite(loaded[k]) && isfinite(loaded[P + k]));
    }
    /* saved and loaded again (from the state of setup), the same bits */
    REQUIRE(checkpoint_save(F.trainer, F.saved, &err) == LG_OK);
    restore_state();
    REQUIRE(checkpoint_load(F.trainer, F.saved, &err) == LG_OK);
    for (size_t k = 0; k < P; k++) {
        REQUIRE(memcmp(&loaded[k], &F.model->seal.refs[k].value->data, sizeof(double)) == 0);
        REQUIRE(memcmp(&loaded[P + k], &F.trainer->velocity[k], sizeof(double)) == 0);
    }
    REQUIRE(memcmp(&at, &F.trainer->at, sizeof at) == 0);
    free(loaded);
    restore_state();
    REQUIRE(mem_live_blocks() == F.blocks);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!F.ready)
        setup();
    FILE *f = fopen(F.input, "wb");
    REQUIRE(f != NULL);
    REQUIRE(fwrite(data, 1, size, f) == size);
    REQUIRE(fclose(f) == 0);
    check_data(&DATASET_IRIS);
    check_data(&DATASET_DIGITS);
    check_checkpoint();
    return 0;
}
