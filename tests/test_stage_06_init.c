/* Stage 06: deterministic initialization; the variance experiments.
 *
 * Two kinds of test. The contract is exact: known answers of the generator, messages,
 * bit-identical values in any order, exact initializer-call counts, finiteness. The
 * variance is statistical: large samples, several seeds, and a tolerance of five
 * standard deviations of the sampling distribution that each test names. No test
 * expects the value that one seed happened to give. */
#include "litgrad_test.h"

#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "init.h"
#include "initdemo.h"
#include "rng.h"
#include "variance.h"

LG_SUITE(stage06);

static const InitSpec STANDARD = {INIT_NORMAL, 1.0, 1, INIT_ROLE_LINEAR};
static const InitSpec HE = {INIT_NORMAL, 1.0, 1, INIT_ROLE_RELU};

static InitSpec seeded(InitSpec spec, uint64_t seed)
{
    spec.seed = seed;
    return spec;
}

/* Random123's examples/kat_vectors: "philox4x32 10 CTR(4) KEY(2) EXPECTED(4)". The first
 * three lines are the ones Random123 has always shipped; the fourth (counter word 1 and
 * key word 0 set) is from the extended list in girving/random123-manual and pins the
 * order of the words. */
Test(stage06, philox_matches_random123_known_answers)
{
    static const uint32_t vectors[][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
         0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
        {0, 1, 0, 0, 1, 0, 0x833ff8dc, 0x225c963c, 0x232b88b3, 0x0b334b07},
    };
    for (size_t v = 0; v < sizeof vectors / sizeof vectors[0]; v++) {
        uint32_t out[4];
        rng_philox4x32(vectors[v], vectors[v] + 4, out);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(out[i], vectors[v][6 + i], "vector %zu word %d: %08x, want %08x", v,
                         i, out[i], vectors[v][6 + i]);
    }
}

/* FNV-1a 64 reference values (draft-eastlake-fnv; also Zig's std.hash tests). */
Test(stage06, name_key_is_fnv1a_64)
{
    cr_assert_eq(rng_name_key(""), UINT64_C(0xcbf29ce484222325));
    cr_assert_eq(rng_name_key("a"), UINT64_C(0xaf63dc4c8601ec8c));
    cr_assert_eq(rng_name_key("foobar"), UINT64_C(0x85944171f73967e8));
}

Test(stage06, unit_draws_lie_strictly_inside_the_unit_interval)
{
    cr_assert_eq(rng_unit_open(0), 0x1p-53, "the smallest value is 2^-53, never 0");
    cr_assert_eq(rng_unit_open(UINT64_MAX), 1.0 - 0x1p-53, "the largest is 1 - 2^-53");
    cr_assert_eq(rng_unit_open(UINT64_C(0xfff)), 0x1p-53, "the low 12 bits are dropped");
    cr_assert_eq(rng_unit_open(UINT64_C(1) << 63), 0.5 + 0x1p-53);
}

/* Box--Muller at points where the answer is known in closed form; 4 ulp of slack for
 * the C library's log and cos, which need not be correctly rounded. */
Test(stage06, box_muller_at_known_points)
{
    cr_assert_float_eq(rng_normal_box_muller(exp(-0.5), 0.0), 1.0, 4 * DBL_EPSILON);
    cr_assert_float_eq(rng_normal_box_muller(exp(-2.0), 0.5), -2.0, 8 * DBL_EPSILON);
    cr_assert_float_eq(rng_normal_box_muller(0x1p-53, 0.0), sqrt(106 * log(2.0)), 1e-13);
    cr_assert_lt(fabs(rng_normal_box_muller(0.3, 0.25)), 1e-15, "cos(pi/2) is 0");
}

Test(stage06, spec_check_names_the_rule_and_the_number)
{
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(init_spec_check(&HE, &err), LG_OK);
    InitSpec bad = HE;
    const double gains[] = {0.0, -1.0, NAN, INFINITY};
    const char *const messages[] = {
        "init gain must be finite and > 0: got 0", "init gain must be finite and > 0: got -1",
        "init gain must be finite and > 0: got nan", "init gain must be finite and > 0: got inf",
    };
    for (int i = 0; i < 4; i++) {
        bad.gain = gains[i];
        cr_assert_eq(init_spec_check(&bad, &err), LG_ERR_INVALID);
        cr_assert_str_eq(err.message, messages[i]);
    }
    bad = HE;
    bad.distribution = (InitDistribution)7;
    cr_assert_eq(init_spec_check(&bad, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "init distribution must be normal (0) or uniform (1): got 7");
    bad = HE;
    bad.role = (InitRole)5;
    cr_assert_eq(init_spec_check(&bad, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "init role must be linear (0) or relu (1): got 5");
    cr_assert_str_eq(init_distribution_name(INIT_UNIFORM), "uniform");
    cr_assert_str_eq(init_role_name(INIT_ROLE_RELU), "relu");
}

/* The seed's targets are exact doubles: 1/64 and 2/64. */
Test(stage06, scale_of_the_standard_and_he_policies)
{
    LgError err = LG_ERROR_INIT;
    double variance = 0.0, sigma = 0.0;
    cr_assert_eq(init_scale(&STANDARD, 64, &variance, &sigma, &err), LG_OK);
    cr_assert_eq(variance, 0.015625);
    cr_assert_eq(sigma, 0.125);
    cr_assert_eq(init_scale(&HE, 64, &variance, &sigma, &err), LG_OK);
    cr_assert_eq(variance, 0.03125);
    cr_assert_float_eq(sigma, sqrt(2.0) / 8.0, 2 * DBL_EPSILON);
    InitSpec half = {INIT_UNIFORM, 0.5, 0, INIT_ROLE_RELU};
    cr_assert_eq(init_scale(&half, 2, &variance, NULL, &err), LG_OK);
    cr_assert_eq(variance, 0.25, "gain^2 k / C_in = 0.25 * 2 / 2");
    cr_assert_eq(init_scale(&HE, 0, &variance, &sigma, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "init fan-in must be >= 1: got 0");
    InitSpec huge = {INIT_NORMAL, DBL_MAX, 0, INIT_ROLE_RELU};
    cr_assert_eq(init_scale(&huge, 1, &variance, &sigma, &err), LG_ERR_NONFINITE);
    cr_assert(strstr(err.message, "init sigma must be finite: gain 1.79769e+308, fan-in 1"),
              "%s", err.message);
}

/* A finite, positive gain can still break the contract: 1e200 with fan-in 1 gives a
 * finite sigma (1.4e200) but an infinite variance; 1e-200 a positive sigma but a variance
 * that underflows to 0. Both are refused, before any draw, and the outputs untouched. */
Test(stage06, scale_refuses_an_infinite_or_zero_variance)
{
    LgError err = LG_ERROR_INIT;
    double variance = -1.0, sigma = -1.0, out[4];
    InitSpec spec = {INIT_NORMAL, 1e200, 0, INIT_ROLE_RELU};
    cr_assert(isfinite(spec.gain * sqrt(2.0)), "sigma alone would pass");
    cr_assert_eq(init_scale(&spec, 1, &variance, &sigma, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "init variance must be finite: gain 1e+200, fan-in 1 gives inf");
    cr_assert_eq(variance, -1.0);
    cr_assert_eq(sigma, -1.0);
    init_reset_call_count();
    cr_assert_eq(init_fill(&spec, "big", 2, 2, out, &err), LG_ERR_NONFINITE);
    cr_assert_eq(init_call_count(), 0, "refused before the first draw");
    spec.gain = 1e-200;
    cr_assert_eq(init_scale(&spec, 1, &variance, &sigma, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "init variance must be > 0: gain 1e-200, fan-in 1 gives 0");
    spec.gain = DBL_TRUE_MIN;
    cr_assert_eq(init_scale(&spec, 4096, &variance, &sigma, &err), LG_ERR_INVALID);
    cr_assert(strstr(err.message, "init sigma must be > 0: gain 4.94066e-324, fan-in 4096"),
              "%s", err.message);
    cr_assert_eq(init_fill(&spec, "small", 2, 2, out, &err), LG_ERR_INVALID);
    cr_assert_eq(init_call_count(), 0);
    /* The largest gains that pass: sigma^2 finite, so sigma * 8.58 is finite too. */
    spec.gain = 1e150;
    cr_assert_eq(init_scale(&spec, 1, &variance, &sigma, &err), LG_OK);
    cr_assert(isfinite(variance) && variance > 0.0 && isfinite(8.58 * sigma));
}

/* The contract: the same (seed, position) gives the same bits however the values are
 * visited, whatever else was drawn first, and wherever the memory came from. */
Test(stage06, same_seed_and_position_are_bit_identical_in_any_order)
{
    enum { ROWS = 16, COLS = 12, N = ROWS * COLS };
    LgError err = LG_ERROR_INIT;
    InitSpec spec = seeded(HE, 42);
    double *first = mem_alloc(N, sizeof *first, "first fill", &err);
    cr_assert_eq(init_fill(&spec, "mlp.fc1.weight", ROWS, COLS, first, &err), LG_OK);
    for (int order = 0; order < 4; order++) {
        double *filler = mem_alloc(1000 + (size_t)order * 777, sizeof *filler, "filler", &err);
        cr_assert_eq(init_fill(&spec, "mlp.fc2.weight", 10, 100, filler, &err), LG_OK);
        double *again = mem_alloc(N, sizeof *again, "second fill", &err);
        for (size_t k = 0; k < N; k++) {
            /* 0: row-major; 1: column-major; 2: backwards; 3: a stride-7 permutation */
            size_t j = order == 0 ? k : order == 1 ? (k % ROWS) * COLS + k / ROWS
                     : order == 2 ? N - 1 - k : (k * 7) % N;
            again[j] = init_draw(&spec, COLS, init_position("mlp.fc1.weight", j / COLS, j % COLS));
        }
        cr_assert(memcmp(first, again, N * sizeof *first) == 0, "order %d differs", order);
        mem_free(again);
        mem_free(filler);
    }
    mem_free(first);
}

Test(stage06, a_value_depends_on_seed_tensor_and_position_only)
{
    InitPosition at = init_position("mlp.fc1.weight", 2, 1);
    double z = init_unit_normal(7, at);
    cr_assert_eq(at.row, 2);
    cr_assert_eq(at.col, 1);
    cr_assert_eq(at.tensor, rng_name_key("mlp.fc1.weight"));
    cr_assert_neq(z, init_unit_normal(8, at), "another seed, another value");
    cr_assert_neq(z, init_unit_normal(7, init_position("mlp.fc2.weight", 2, 1)));
    cr_assert_neq(z, init_unit_normal(7, init_position("mlp.fc1.weight", 1, 2)),
                  "row and column are not interchangeable");
    /* The shape changes the scale, never the unit draw: W[2,1] of a (4,3) and of a (4,5)
     * weight are sigma_3 z and sigma_5 z with the same z. */
    LgError err = LG_ERROR_INIT;
    InitSpec spec = seeded(STANDARD, 7);
    double narrow[12], wide[20], sigma3 = 0.0, sigma5 = 0.0;
    cr_assert_eq(init_fill(&spec, "mlp.fc1.weight", 4, 3, narrow, &err), LG_OK);
    cr_assert_eq(init_fill(&spec, "mlp.fc1.weight", 4, 5, wide, &err), LG_OK);
    init_scale(&spec, 3, NULL, &sigma3, &err);
    init_scale(&spec, 5, NULL, &sigma5, &err);
    cr_assert_eq(narrow[2 * 3 + 1], sigma3 * z);
    cr_assert_eq(wide[2 * 5 + 1], sigma5 * z);
    cr_assert_eq(init_unit_uniform(7, at), init_unit_uniform(7, at));
}

/* Stage 07's bias-free 3 -> 4 -> 2 MLP has 20 weights: exactly 20 initializer calls;
 * a refused spec or shape makes none. */
Test(stage06, initializer_calls_are_counted_exactly)
{
    LgError err = LG_ERROR_INIT;
    double fc1[12], fc2[8];
    init_reset_call_count();
    cr_assert_eq(init_call_count(), 0);
    cr_assert_eq(init_fill(&HE, "mlp.fc1.weight", 4, 3, fc1, &err), LG_OK);
    cr_assert_eq(init_call_count(), 12);
    cr_assert_eq(init_fill(&STANDARD, "mlp.fc2.weight", 2, 4, fc2, &err), LG_OK);
    cr_assert_eq(init_call_count(), 20);
    InitSpec bad = HE;
    bad.gain = 0.0;
    cr_assert_eq(init_fill(&bad, "mlp.fc1.weight", 4, 3, fc1, &err), LG_ERR_INVALID);
    cr_assert_eq(init_fill(&HE, "mlp.fc1.weight", 0, 3, fc1, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "init shape of mlp.fc1.weight must be in [1, 4294967296] x "
                                  "[1, 4294967296]: got (0, 3)");
    cr_assert_eq(init_call_count(), 20, "refused fills draw nothing");
    init_draw(&HE, 3, init_position("mlp.fc1.weight", 0, 0));
    cr_assert_eq(init_call_count(), 21);
    for (size_t j = 0; j < 12; j++)
        cr_assert(isfinite(fc1[j]) && fc1[j] != 0.0, "value %zu: %g", j, fc1[j]);
}

/* A gain of 1e308 passes the spec (it is finite) and sigma = 1.41e308 is finite, but the
 * variance is not, and sigma z would overflow once |z| > 1.27: init_scale refuses the
 * spec, so the fill stops before its first draw. Every gain that passes keeps all 4096
 * values of a fan-in-1 weight finite. */
Test(stage06, a_gain_that_would_overflow_a_value_is_refused_before_any_draw)
{
    enum { ROWS = 4096 };
    LgError err = LG_ERROR_INIT;
    InitSpec huge = {INIT_NORMAL, 1e308, 3, INIT_ROLE_RELU};
    double *out = mem_alloc(ROWS, sizeof *out, "weights", &err);
    init_reset_call_count();
    cr_assert_eq(init_fill(&huge, "big", ROWS, 1, out, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "init variance must be finite: gain 1e+308, fan-in 1 gives inf");
    cr_assert_eq(init_call_count(), 0);
    huge.gain = 1e153; /* variance 2e306, sigma 1.41e153 */
    cr_assert_eq(init_fill(&huge, "big", ROWS, 1, out, &err), LG_OK, "%s", err.message);
    cr_assert_eq(init_call_count(), ROWS);
    for (size_t j = 0; j < ROWS; j++)
        cr_assert(isfinite(out[j]), "value %zu: %g", j, out[j]);
    mem_free(out);
}

/* Every value is finite and inside the range its distribution allows: |z| <= 8.58 for
 * Box--Muller on (0, 1) uniforms, |w| < a = sigma sqrt(3) for the uniform. */
Test(stage06, every_value_is_finite_and_in_range)
{
    enum { ROWS = 512, COLS = 64, N = ROWS * COLS };
    LgError err = LG_ERROR_INIT;
    double *w = mem_alloc(N, sizeof *w, "weights", &err), sigma = 0.0;
    const InitSpec specs[2] = {{INIT_NORMAL, 1.0, 5, INIT_ROLE_RELU},
                               {INIT_UNIFORM, 1.0, 5, INIT_ROLE_RELU}};
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(init_fill(&specs[k], "range", ROWS, COLS, w, &err), LG_OK);
        init_scale(&specs[k], COLS, NULL, &sigma, &err);
        double bound = k == 0 ? 8.58 * sigma : sqrt(3.0) * sigma;
        for (size_t j = 0; j < N; j++)
            cr_assert(isfinite(w[j]) && fabs(w[j]) < bound, "%s value %zu: %g",
                      init_distribution_name(specs[k].distribution), j, w[j]);
    }
    mem_free(w);
}

Test(stage06, sample_variance_uses_two_passes)
{
    const double small[] = {1, 2, 3, 4};
    cr_assert_eq(variance_sample(small, 4), 5.0 / 3.0);
    const double offset[] = {1e9 + 1, 1e9 + 2, 1e9 + 3, 1e9 + 4};
    cr_assert_eq(variance_sample(offset, 4), 5.0 / 3.0, "no cancellation at an offset of 1e9");
    cr_assert_float_eq(variance_sd_of_normal(0.015625, 4096), 0.015625 * sqrt(2.0 / 4095),
                       1e-18);
}

/* For n normal values, sd(s^2) = sigma^2 sqrt(2 / (n - 1)) (chi-square). With
 * n = 65536 per seed that is 0.55% of the target; each of 8 seeds must be within 5 such
 * standard deviations, their mean within 5 / sqrt(8) of them, and each sample mean
 * within 5 sigma / sqrt(n) of zero. */
Test(stage06, normal_sample_variance_meets_both_targets_over_seeds)
{
    enum { ROWS = 1024, COLS = 64, N = ROWS * COLS, SEEDS = 8 };
    LgError err = LG_ERROR_INIT;
    double *w = mem_alloc(N, sizeof *w, "weights", &err);
    const InitSpec *policies[2] = {&STANDARD, &HE};
    const double sd_ratio = sqrt(2.0 / (N - 1));
    for (int k = 0; k < 2; k++) {
        double target = 0.0, ratio_sum = 0.0;
        init_scale(policies[k], COLS, &target, NULL, &err);
        for (uint64_t s = 0; s < SEEDS; s++) {
            InitSpec spec = seeded(*policies[k], 1000 + s);
            cr_assert_eq(init_fill(&spec, "stat.weight", ROWS, COLS, w, &err), LG_OK);
            double ratio = variance_sample(w, N) / target, mean = 0.0;
            for (size_t j = 0; j < N; j++)
                mean += w[j] / N;
            cr_assert_lt(fabs(ratio - 1.0), 5 * sd_ratio, "policy %d seed %llu: ratio %g", k,
                         (unsigned long long)s, ratio);
            cr_assert_lt(fabs(mean), 5 * sqrt(target / N), "mean %g", mean);
            ratio_sum += ratio;
        }
        cr_assert_lt(fabs(ratio_sum / SEEDS - 1.0), 5 * sd_ratio / sqrt(SEEDS));
    }
    mem_free(w);
}

/* A uniform on (-a, a) has E[w^4] = 9/5 sigma^4, so sd(s^2) ~ sigma^2 sqrt(0.8 / n). */
Test(stage06, uniform_sample_variance_meets_its_target_over_seeds)
{
    enum { ROWS = 1024, COLS = 64, N = ROWS * COLS, SEEDS = 8 };
    LgError err = LG_ERROR_INIT;
    double *w = mem_alloc(N, sizeof *w, "weights", &err), target = 0.0;
    InitSpec spec = {INIT_UNIFORM, 1.0, 0, INIT_ROLE_RELU};
    init_scale(&spec, COLS, &target, NULL, &err);
    for (uint64_t s = 0; s < SEEDS; s++) {
        spec.seed = 2000 + s;
        cr_assert_eq(init_fill(&spec, "stat.weight", ROWS, COLS, w, &err), LG_OK);
        double ratio = variance_sample(w, N) / target;
        cr_assert_lt(fabs(ratio - 1.0), 5 * sqrt(0.8 / N), "seed %llu: ratio %g",
                     (unsigned long long)s, ratio);
    }
    mem_free(w);
}

/* Shape, not only scale: the fraction of normal draws within one sigma is
 * p = erf(1/sqrt(2)) = 0.6827; over n draws its sd is sqrt(p (1 - p) / n). */
Test(stage06, normal_draws_have_the_normal_shape)
{
    enum { N = 1 << 19 };
    const double p = erf(1.0 / sqrt(2.0));
    size_t inside = 0;
    for (size_t j = 0; j < N; j++)
        inside += fabs(init_unit_normal(11, init_position("shape", j / 512, j % 512))) < 1.0;
    cr_assert_lt(fabs((double)inside / N - p), 5 * sqrt(p * (1 - p) / N), "%zu of %d", inside,
                 N);
}

/* The four depth policies draw the same tensors, so their weights differ by a constant
 * factor g, and since ReLU commutes with positive factors, q at layer l differs by
 * g^(2l) -- up to rounding. This is exact in the sense of the text: scale compounds. */
Test(stage06, depth_policies_differ_only_by_their_compounded_scale)
{
    enum { DEPTH = 20 };
    LgError err = LG_ERROR_INIT;
    double he[DEPTH], large[DEPTH], standard[DEPTH];
    const InitSpec he_spec = seeded(HE, 9), standard_spec = seeded(STANDARD, 9);
    const InitSpec large_spec = {INIT_NORMAL, sqrt(2.0), 9, INIT_ROLE_RELU};
    cr_assert_eq(variance_through_depth(&he_spec, 32, DEPTH, 16, he, &err), LG_OK, "%s",
                 err.message);
    cr_assert_eq(variance_through_depth(&large_spec, 32, DEPTH, 16, large, &err), LG_OK);
    cr_assert_eq(variance_through_depth(&standard_spec, 32, DEPTH, 16, standard, &err), LG_OK);
    for (int l = 0; l < DEPTH; l++) {
        double g2l = ldexp(1.0, l + 1); /* (C_in Var(W) ratio = 2)^(l + 1) */
        cr_assert_float_eq(large[l] / he[l], g2l, g2l * 1e-12, "layer %d", l + 1);
        cr_assert_float_eq(he[l] / standard[l], g2l, g2l * 1e-12, "layer %d", l + 1);
    }
}

/* He keeps E[q_l] = 2 (for C_in Var(W) = 2 and unit inputs); the standard policy loses
 * half per layer. Relative variance of one input's q_l: v_l = (1 + 2/C)^2 (1 + 5/C)^(l-1)
 * - 1 (the chapter's derivation); a batch average does not exceed it. So the mean over
 * S seeds lies within 5 sqrt(v_l / S) of the theory. */
Test(stage06, he_keeps_the_signal_and_standard_loses_it)
{
    enum { WIDTH = 64, DEPTH = 20, BATCH = 64, SEEDS = 24 };
    LgError err = LG_ERROR_INIT;
    double he[DEPTH] = {0}, standard[DEPTH] = {0}, q[DEPTH];
    for (uint64_t s = 0; s < SEEDS; s++) {
        const InitSpec he_spec = seeded(HE, 300 + s), standard_spec = seeded(STANDARD, 300 + s);
        cr_assert_eq(variance_through_depth(&he_spec, WIDTH, DEPTH, BATCH, q, &err), LG_OK);
        for (int l = 0; l < DEPTH; l++)
            he[l] += q[l] / SEEDS;
        cr_assert_eq(variance_through_depth(&standard_spec, WIDTH, DEPTH, BATCH, q, &err), LG_OK);
        for (int l = 0; l < DEPTH; l++)
            standard[l] += q[l] / SEEDS;
    }
    for (int l = 0; l < DEPTH; l++) {
        double v = pow(1.0 + 2.0 / WIDTH, 2) * pow(1.0 + 5.0 / WIDTH, l) - 1.0;
        double tolerance = 5 * sqrt(v / SEEDS);
        cr_assert_lt(fabs(he[l] / 2.0 - 1.0), tolerance, "He, layer %d: %g", l + 1, he[l]);
        double theory = ldexp(1.0, -l); /* 1 * (1/2)^l */
        cr_assert_lt(fabs(standard[l] / theory - 1.0), tolerance, "standard, layer %d: %g",
                     l + 1, standard[l]);
    }
    cr_assert_lt(standard[DEPTH - 1], 1e-5, "twenty layers: the standard signal vanishes");
}

/* The test above bounds q_l against its theory with 5 sqrt(v_l / S), which passes any
 * q_l below the theory from about layer 10 on. One step at a time does not compound:
 * for one input (batch 1), R = q_l / q_(l-1) = (c/C) chi2_C B has mean exactly c/2 and
 * relative variance 5/C at every layer l >= 2 (the chapter's derivation). Over S = 128
 * independent seeds, each layer's mean of R / (c/2) lies within 5 sqrt(5 / (C S)) =
 * 12.4% of 1, on both sides: a policy off by a factor two (0.5 or 2) fails at every
 * layer. The pooled sample variance of R / (c/2) checks the 5/C itself, within 25% (its
 * own sampling sd over 19 * 128 ratios is about 5%). */
Test(stage06, every_layer_multiplies_the_signal_by_c_over_2)
{
    enum { WIDTH = 64, DEPTH = 20, SEEDS = 128 };
    LgError err = LG_ERROR_INIT;
    const InitSpec *policies[2] = {&STANDARD, &HE};
    const double half_c[2] = {0.5, 1.0};
    const double tolerance = 5 * sqrt(5.0 / WIDTH / SEEDS);
    for (int k = 0; k < 2; k++) {
        double sum[DEPTH] = {0}, pooled = 0.0, q[DEPTH];
        for (uint64_t s = 0; s < SEEDS; s++) {
            const InitSpec spec = seeded(*policies[k], 5000 + s);
            cr_assert_eq(variance_through_depth(&spec, WIDTH, DEPTH, 1, q, &err), LG_OK);
            for (int l = 1; l < DEPTH; l++) {
                double r = q[l] / q[l - 1] / half_c[k];
                sum[l] += r / SEEDS;
                pooled += (r - 1.0) * (r - 1.0) / (SEEDS * (DEPTH - 1));
            }
        }
        for (int l = 1; l < DEPTH; l++)
            cr_assert_lt(fabs(sum[l] - 1.0), tolerance, "policy %d, q_%d / q_%d / (c/2) = %g", k,
                         l + 1, l, sum[l]);
        cr_assert_lt(fabs(pooled / (5.0 / WIDTH) - 1.0), 0.25, "policy %d: relative variance "
                     "%g, theory 5/C = %g", k, pooled, 5.0 / WIDTH);
    }
}

Test(stage06, depth_experiment_refuses_bad_sizes_and_leaks_nothing)
{
    LgError err = LG_ERROR_INIT;
    double q[8];
    cr_assert_eq(variance_through_depth(&HE, 0, 8, 4, q, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "depth experiment needs width in [1, 4096], depth in "
                                  "[1, 1000], batch in [1, 65536]: got 0, 8, 4");
    InitSpec bad = HE;
    bad.gain = -2.0;
    cr_assert_eq(variance_through_depth(&bad, 4, 8, 4, q, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "init gain must be finite and > 0: got -2");
    size_t k = 1;
    for (;; k++) {
        mem_fail_at(k);
        LgStatus status = variance_through_depth(&HE, 4, 8, 4, q, &err);
        mem_fail_at(0);
        if (status == LG_OK)
            break;
        cr_assert_eq(status, LG_ERR_ALLOC);
        cr_assert_eq(mem_live_blocks(), 0, "failure at allocation %zu leaked", k);
    }
    cr_assert_eq(k, 4, "three buffers");
    InitSpec huge = {INIT_NORMAL, 1e100, 1, INIT_ROLE_RELU};
    double deep[1000];
    cr_assert_eq(variance_through_depth(&huge, 4, 1000, 2, deep, &err), LG_ERR_NONFINITE);
    cr_assert(strncmp(err.message, "mean square at layer ", 21) == 0, "%s", err.message);
}

Test(stage06, program_shows_the_contract_and_the_experiments)
{
    static ProgramRun run;
    run_program(&run, "stage-06", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "counter 0, key 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8"));
    lg_expect_short_lines(run.output);
    size_t identical = 0;
    for (const char *p = run.output; (p = strstr(p, "12 of 12 values bit-identical")); p++)
        identical++;
    cr_assert_eq(identical, 4, "%s", run.output);
    cr_assert(strstr(run.output, "initializer calls for the four orders: 48"));
    cr_assert(strstr(run.output, "standard  linear  0.015625 "), "%s", run.output);
    cr_assert(strstr(run.output, "He        relu    0.03125 "), "%s", run.output);
    cr_assert(strstr(run.output, "a second generator saw 0.016176814002937006 (z = +1.60) and "
                                 "0.031363356828254293 (z = +0.16)"), "%s", run.output);
    cr_assert(strstr(run.output, "initializer calls: 12288 (3 weights of 4096 values)"));
    cr_assert(strstr(run.output, "    512  0.00195312"), "%s", run.output);
    cr_assert(strstr(run.output, "theory  1.8190e-12       1.9073e-06       2.0000e+00"));
}

Test(stage06, program_output_is_bit_identical_across_runs)
{
    static ProgramRun first, second, other;
    run_program(&first, "stage-06", "--seed 12345 --fan-in 8 --samples 64");
    run_program(&second, "stage-06", "--seed 12345 --fan-in 8 --samples 64");
    run_program(&other, "stage-06", "--seed 12346 --fan-in 8 --samples 64");
    cr_assert_eq(first.status, 0, "%s", first.output);
    cr_assert_str_eq(first.output, second.output, "two runs, one seed: the same digits");
    cr_assert_str_neq(first.output, other.output);
    cr_assert(strstr(first.output, "C_in = 8, 64 samples = a (8, 8) weight, seed 12345"));
    cr_assert_null(strstr(first.output, "a second generator"), "only for the seed's sizes");
}

Test(stage06, program_conventions_for_help_usage_and_rules)
{
    static ProgramRun run;
    run_program(&run, "stage-06", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "usage: stage-06"));
    run_program(&run, "stage-06", "--help extra");
    cr_assert_eq(run.status, 2, "--help does not hide a mistake (Stage 01's rule)");
    cr_assert_null(strstr(run.output, "usage: stage-06"), "%s", run.output);
    run_program(&run, "stage-06", "--fan-in 0");
    cr_assert_eq(run.status, 2);
    cr_assert(strstr(run.output, "--fan-in must be an integer in [1, 4096]: got '0'"));
    run_program(&run, "stage-06", "--samples 100");
    cr_assert_eq(run.status, 2);
    cr_assert(strstr(run.output, "--samples must be a multiple of --fan-in: 100 is not a "
                                 "multiple of 64"), "%s", run.output);
    run_program(&run, "stage-06", "--seed -1");
    cr_assert_eq(run.status, 2);
}

/* Every usage error, an unusable figure directory included: exit 2, one message in the
 * program's words on standard error, and nothing at all on standard output. The
 * directory is checked before anything is computed. */
Test(stage06, usage_errors_print_one_message_and_nothing_on_stdout)
{
    static const LgBadLine lines[] = {
        {"-xy", "unknown option '-x'"},
        {"--seed", "option '--seed' needs a value"},
        {"--fan-in 8 --figure-data", "option '--figure-data' needs a value"},
        {"extra", "unexpected argument 'extra'"},
        {"--seed 3 extra", "unexpected argument 'extra'"},
        {"--figure-data ''", "--figure-data must name a directory: got ''"},
        {"--figure-data=", "--figure-data must name a directory: got ''"},
        {"--fan-in 0", "--fan-in must be an integer in [1, 4096]: got '0'"},
        {"--fan-in 4097", "got '4097'"},
        {"--samples 1", "--samples must be an integer in [2, 4194304]: got '1'"},
        {"--samples 100", "--samples must be a multiple of --fan-in: 100 is not a multiple "
                          "of 64"},
        {"--seed -1", "--seed must be an integer in [0, 18446744073709551615]: got '-1'"},
        {"--seed 18446744073709551616", "got '18446744073709551616'"},
        {"--seed 0x10", "got '0x10'"},
        {"--seed 1 --seed 1", "option '--seed' is given twice"},
        {"--figure-data /tmp --figure-data /tmp", "option '--figure-data' is given twice"},
        {"--figure-data /nonexistent/litgrad-06",
         "--figure-data: cannot use /nonexistent/litgrad-06: No such file or directory"},
        {"--figure-data {FILE}", "is not a directory"},
        {"--figure-data {FIFO}", "is not a directory"},
        {"--figure-data /dev/null", "/dev/null is not a directory"},
        {"--figure-data {LONG}", "--figure-data: a directory name has 5000 bytes"},
        {"{DIR}", "unexpected argument '/tmp'"},
        {"/dev/null", "unexpected argument '/dev/null'"},
        {"--samples=", "--samples must be an integer"},
        {"--fan-in 8.0", "got '8.0'"},
    };
    size_t n = lg_expect_usage_errors("stage-06", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
    if (geteuid() != 0) { /* root may write anywhere */
        static ProgramRun run;
        char dir[] = "/tmp/litgrad-06-ro-XXXXXX", args[256];
        cr_assert_not_null(mkdtemp(dir));
        chmod(dir, 0500);
        snprintf(args, sizeof args, "--figure-data %s", dir);
        run_program(&run, "stage-06", args);
        cr_assert_eq(run.status, 2);
        cr_assert(strstr(run.output, "Permission denied"), "%s", run.output);
        rmdir(dir);
    }
}

/* A full standard output is a failure: exit 1 with the reason (the shell sends stderr to
 * the pipe before stdout goes to /dev/full). */
Test(stage06, a_report_that_cannot_be_written_exits_1)
{
    static ProgramRun run;
    run_program(&run, "stage-06", "--fan-in 8 --samples 64 2>&1 >/dev/full; echo \"exit $?\"");
    cr_assert_str_eq(run.output, "stage-06: error: cannot write the report to standard output: "
                                 "No space left on device\nexit 1\n");
    run_program(&run, "stage-06", "--help 2>&1 >/dev/full; echo \"exit $?\"");
    cr_assert(strstr(run.output, "exit 1\n"), "%s", run.output);
}

/* Nothing half-written: a name the renames would replace held by a directory or a FIFO
 * is refused before the report begins (exit 2, the one line, nothing else), and a report
 * that cannot be written leaves no data file and no temporary file. */
Test(stage06, a_failed_figure_run_leaves_no_data_file)
{
    char dir[] = "/tmp/litgrad-06-XXXXXX", args[256], blocker[256], want[512];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(args, sizeof args, "--figure-data %s", dir);
    static ProgramRun run;
    const char *kinds[] = {"a directory", "a FIFO"};
    for (int k = 0; k < 2; k++) {
        snprintf(blocker, sizeof blocker, "%s/fig-06-%s.dat", dir,
                 k == 0 ? "variance-fanin" : "depth");
        cr_assert_eq(k == 0 ? mkdir(blocker, 0700) : mkfifo(blocker, 0600), 0);
        run_program(&run, "stage-06", args);
        snprintf(want, sizeof want, "stage-06: error: cannot write %s: it is %s; only a "
                 "regular file is replaced; try 'stage-06 --help'\n", blocker, kinds[k]);
        cr_assert_eq(run.status, 2, "%s", run.output);
        cr_assert_str_eq(run.output, want);
        cr_assert_eq(lg_count_entries(dir), 1, "only the blocker is left");
        struct stat info;
        cr_assert(lstat(blocker, &info) == 0 &&
                  (k == 0 ? S_ISDIR(info.st_mode) : S_ISFIFO(info.st_mode)));
        if (k == 0)
            rmdir(blocker);
        else
            unlink(blocker);
    }
    snprintf(args, sizeof args, "--figure-data %s 2>&1 >/dev/full; echo \"exit $?\"", dir);
    run_program(&run, "stage-06", args);
    cr_assert(strstr(run.output, "cannot write the report to standard output: No space left on "
                                 "device\nexit 1\n"), "%s", run.output);
    cr_assert_eq(lg_count_entries(dir), 0, "the report failed, so no data file either");
    rmdir(dir);
}

/* A data file past the file-size limit (SIGXFSZ ignored, so the write fails with EFBIG)
 * is exit 1, and the message names the data file, not its temporary name, which is
 * already gone. Nothing is left in the directory. */
Test(stage06, a_data_file_past_the_size_limit_is_named_in_the_message)
{
    char dir[] = "/tmp/litgrad-06-XXXXXX", args[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(args, sizeof args, "--figure-data %s", dir);
    static char out[1 << 16];
    cr_assert_eq(lg_run_past_size_limit("stage-06", args, 1, out, sizeof out), 1, "%s", out);
    const char *file = strstr(out, "stage-06: error: cannot write ");
    cr_assert_not_null(file, "%s", out);
    file += strlen("stage-06: error: cannot write ");
    cr_assert(strncmp(file, dir, strlen(dir)) == 0, "%s", out);
    const char *name = file + strlen(dir) + 1;
    size_t len = strcspn(name, ":");
    cr_assert(len > 4 && strncmp(name + len - 4, ".dat", 4) == 0,
              "the message names %.*s, not a data file", (int)len, name);
    cr_assert(strstr(name, ": File too large\n") == name + len, "%s", out);
    cr_assert_eq(lg_count_entries(dir), 0, "a file was left in %s", dir);
    cr_assert_eq(rmdir(dir), 0);
}

static size_t count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s was not written", path);
    size_t lines = 0;
    for (int c; (c = fgetc(f)) != EOF;)
        lines += c == '\n';
    fclose(f);
    return lines;
}

/* The numbers of a data file's lines, comments and blank lines skipped: up to `rows`
 * lines of exactly `cols` numbers each, into x[row * cols + col]. Returns the rows read. */
static size_t read_table(const char *path, size_t rows, size_t cols, double *x)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s was not written", path);
    char line[512];
    size_t row = 0;
    while (row < rows && fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *p = line, *end;
        for (size_t c = 0; c < cols; c++, p = end) {
            x[row * cols + c] = strtod(p, &end);
            cr_assert(end != p, "%s line %zu: only %zu numbers", path, row + 1, c);
        }
        row++;
    }
    fclose(f);
    return row;
}

/* The rows of numbers that follow the line containing `title` in the report, after
 * `skip` more lines, as read_table reads a file. */
static void read_report(const char *report, const char *title, int skip, size_t rows,
                        size_t cols, double *x)
{
    const char *p = strstr(report, title);
    cr_assert_not_null(p, "no '%s' in the report", title);
    for (int i = 0; i <= skip; i++)
        p = strchr(p, '\n') + 1;
    for (size_t row = 0; row < rows; row++, p = strchr(p, '\n') + 1) {
        char *end;
        for (size_t c = 0; c < cols; c++, p = end) {
            x[row * cols + c] = strtod(p, &end);
            cr_assert(end != p, "report '%s' row %zu: only %zu numbers", title, row, c);
        }
    }
}

static void assert_close(double got, double want, double relative, const char *what, size_t i)
{
    cr_assert_leq(fabs(got - want), relative * fabs(want), "%s %zu: %.9g, want %.9g", what, i,
                  got, want);
}

/* The chart data are the program's own numbers: each file is checked against the report
 * (at the report's precision) or against the closed forms -- targets 1/C_in and 2/C_in,
 * sqrt(2 / (n - 1)), c (c/2)^(l-1), the normal densities, and the histogram's variance,
 * which must be experiment 1's sample variance plus Sheppard's width^2 / 12 (within 2%,
 * the binning). The densities are computed from 6-digit abscissae: 2e-4 in the tails. */
Test(stage06, figure_data_files_hold_the_reported_numbers)
{
    char dir[] = "/tmp/litgrad-06-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char args[256], path[256];
    snprintf(args, sizeof args, "--figure-data %s", dir);
    static ProgramRun run;
    run_program_stdout(&run, "stage-06", args);
    cr_assert_eq(run.status, 0, "%s", run.output);
    static const char *const names[] = {"fig-06-histogram", "fig-06-variance-fanin",
                                        "fig-06-depth"};
    const size_t lines[] = {1 + 40 + 2 + 1 + 161, 1 + 10, 2 + 20};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s.dat", dir, names[i]);
        cr_assert_eq(count_lines(path), lines[i], "%s", path);
    }

    static double hist[(40 + 161) * 3], fan[10 * 8], depth[20 * 10];
    static double table2[10 * 9], table3[20 * 5];
    snprintf(path, sizeof path, "%s/fig-06-histogram.dat", dir);
    cr_assert_eq(read_table(path, 40 + 161, 3, hist), 40 + 161);
    const char *rows[2] = {strstr(run.output, "  standard  linear  "),
                           strstr(run.output, "  He        relu    ")};
    double s2[2]; /* experiment 1's sample variances, as reported */
    for (int k = 0; k < 2; k++)
        cr_assert(rows[k] && sscanf(rows[k], " %*s %*s %*f %lf", &s2[k]) == 1);
    const double sd[2] = {0.125, sqrt(2.0) / 8}, width = 9.0 * sd[1] / 40, pi = acos(-1.0);
    for (int k = 0; k < 2; k++) {
        double mass = 0.0, second = 0.0;
        for (size_t b = 0; b < 40; b++) {
            assert_close(hist[b * 3], -4.5 * sd[1] + (b + 0.5) * width, 1e-5, "bin centre", b);
            mass += hist[b * 3 + 1 + k] * width;
            second += hist[b * 3] * hist[b * 3] * hist[b * 3 + 1 + k] * width;
        }
        cr_assert(mass > 0.999 && mass < 1.000001, "policy %d: mass %g", k, mass);
        assert_close(second, s2[k] + width * width / 12, 0.02, "binned variance, policy", k);
        for (size_t j = 40; j < 40 + 161; j++) {
            double x = hist[j * 3];
            assert_close(hist[j * 3 + 1 + k],
                         exp(-x * x / (2 * sd[k] * sd[k])) / (sd[k] * sqrt(2 * pi)), 2e-4,
                         "normal density, point", j - 40);
        }
    }

    snprintf(path, sizeof path, "%s/fig-06-variance-fanin.dat", dir);
    cr_assert_eq(read_table(path, 10, 8, fan), 10);
    read_report(run.output, "experiment 2:", 1, 10, 9, table2);
    for (size_t p = 0; p < 10; p++) {
        double c_in = ldexp(1.0, (int)p), *f = fan + p * 8, *t = table2 + p * 9;
        cr_assert_eq(f[0], c_in);
        assert_close(f[1], 1.0 / c_in, 1e-9, "1/C_in at point", p);
        assert_close(f[4], 2.0 / c_in, 1e-9, "2/C_in at point", p);
        assert_close(f[7], sqrt(2.0 / 4095), 1e-9, "sqrt(2/(n-1)) at point", p);
        assert_close(f[2], t[2], 1e-5, "standard mean at point", p);
        assert_close(f[3], t[3], 6e-3, "standard sd at point", p);
        assert_close(f[5], t[6], 1e-5, "He mean at point", p);
        assert_close(f[6], t[7], 6e-3, "He sd at point", p);
    }

    snprintf(path, sizeof path, "%s/fig-06-depth.dat", dir);
    cr_assert_eq(read_table(path, 20, 10, depth), 20);
    read_report(run.output, "experiment 3:", 2, 20, 5, table3);
    const double c[4] = {0.5, 1.0, 2.0, 4.0};
    for (size_t l = 0; l < 20; l++) {
        double *f = depth + l * 10;
        cr_assert_eq(f[0], (double)(l + 1));
        cr_assert_eq(table3[l * 5], (double)(l + 1));
        for (int k = 0; k < 4; k++) {
            assert_close(f[1 + k], table3[l * 5 + 1 + k], 1e-4, "measured q, layer", l + 1);
            assert_close(f[5 + k], c[k] * pow(c[k] / 2, (double)l), 1e-8, "theory, layer", l + 1);
        }
        double v = pow(1 + 2.0 / 64, 2) * pow(1 + 5.0 / 64, (double)l) - 1;
        assert_close(f[9], sqrt(v / 5), 1e-8, "band, layer", l + 1);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s.dat", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* A FIFO or a symbolic link at any of the three data files' names is refused when the
 * command line is read, before the experiments: exit 2, nothing on standard output. */
Test(stage06, a_fifo_at_a_data_file_name_is_refused_before_anything)
{
    size_t runs = lg_expect_outputs_refused("stage-06", "--figure-data",
                                            INITDEMO_FIGURE_FILES, "");
    cr_assert_eq(runs, 4);
}
