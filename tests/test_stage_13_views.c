/* Stage 13: views as element ranges, the exact overlap test, the view programs' rules,
 * eager and compiled calls, loops over views of one buffer, and the values of PyTorch
 * issues 196903, 97130 and 146213, bit for bit. */
#include "litgrad_test.h"

#include <dirent.h>
#include <stdint.h>

#include "mem.h"
#include "tensor.h"
#include "view.h"
#include "viewexec.h"

LG_SUITE(stage13);

#define VIEWS "docs/examples/views/"

/* The names of the *.lgv files of `dir`, sorted, at most 32; the directory is closed
 * before any test assertion can stop the test. */
typedef struct ViewFiles {
    size_t count;
    char names[32][128];
} ViewFiles;

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void list_view_files(const char *dir, ViewFiles *files)
{
    DIR *d = opendir(dir);
    files->count = 0;
    bool full = false;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len < 5 || len >= 128 || strcmp(e->d_name + len - 4, ".lgv") != 0)
            continue;
        if (files->count == 32) {
            full = true;
            break;
        }
        memcpy(files->names[files->count++], e->d_name, len + 1);
    }
    if (d != NULL)
        closedir(d);
    cr_assert_not_null(d, "cannot open %s", dir);
    cr_assert(!full, "more than 32 files in %s", dir);
    qsort(files->names, files->count, sizeof files->names[0], by_name);
}

static ViewProgram *parse_checked(const char *text, ViewAnalysis analysis)
{
    LgError err = LG_ERROR_INIT;
    ViewProgram *pr = view_parse(text, "t", &err);
    cr_assert_not_null(pr, "%s", err.message);
    cr_assert_eq(view_check_program(pr, "t", analysis, &err), LG_OK, "%s", err.message);
    return pr;
}

static ViewProgram *load_checked(const char *name)
{
    char path[256];
    LgError err = LG_ERROR_INIT;
    snprintf(path, sizeof path, VIEWS "%s", name);
    ViewProgram *pr = view_load_program(path, name, &err);
    cr_assert_not_null(pr, "%s", err.message);
    cr_assert_eq(view_check_program(pr, name, VIEW_ANALYSIS_EXACT, &err), LG_OK, "%s",
                 err.message);
    return pr;
}

/* The refusal of `text`, parse or check: its status and message. */
static LgError refusal(const char *text, ViewAnalysis analysis)
{
    LgError err = LG_ERROR_INIT;
    ViewProgram *pr = view_parse(text, "t", &err);
    if (pr != NULL) {
        cr_assert_neq(view_check_program(pr, "t", analysis, &err), LG_OK, "accepted: %s",
                      text);
        view_program_free(&pr);
    }
    return err;
}

/* The value index named `name`. */
static size_t value_named(const ViewProgram *pr, const char *name)
{
    for (size_t v = 0; v < pr->nvalues; v++)
        if (strcmp(pr->values[v].name, name) == 0)
            return v;
    cr_assert_fail("no value %s", name);
    return SIZE_MAX;
}

static void expect_floats(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(tensor_f32_bits(got[i]), tensor_f32_bits(want[i]),
                     "%s[%zu]: %.9g, want %.9g", what, i, (double)got[i], (double)want[i]);
}

/* One call both ways on their own inputs; both must agree bit for bit. */
typedef struct BothCalls {
    ViewInputs eager_in, compiled_in;
    ViewResults eager, compiled;
} BothCalls;

static void call_both(const ViewProgram *pr, const ViewCompiled *c, BothCalls *b)
{
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(viewexec_eager_call(pr, &b->eager_in, &b->eager, &err), LG_OK, "%s",
                 err.message);
    cr_assert_eq(viewexec_compiled_call(c, &b->compiled_in, &b->compiled, &err), LG_OK, "%s",
                 err.message);
    size_t total = 0;
    for (size_t r = 0; r < b->eager.count; r++)
        total += b->eager.lengths[r];
    expect_floats(b->compiled.elems, b->eager.elems, total, "compiled returned");
    for (size_t v = 0; v < pr->nvalues; v++)
        if (pr->values[v].kind == VIEW_VALUE_INPUT)
            expect_floats(b->compiled_in.elems[v], b->eager_in.elems[v],
                          pr->values[v].range.length, "compiled input");
}

static void both_begin(const ViewProgram *pr, BothCalls *b)
{
    LgError err = LG_ERROR_INIT;
    memset(b, 0, sizeof *b);
    cr_assert_eq(viewexec_inputs_new(pr, &b->eager_in, &err), LG_OK);
    cr_assert_eq(viewexec_inputs_new(pr, &b->compiled_in, &err), LG_OK);
}

static void both_results_free(BothCalls *b)
{
    viewexec_results_free(&b->eager);
    viewexec_results_free(&b->compiled);
}

static void both_end(BothCalls *b)
{
    both_results_free(b);
    viewexec_inputs_free(&b->eager_in);
    viewexec_inputs_free(&b->compiled_in);
}

static ViewCompiled *compile_or_fail(const ViewProgram *pr, ViewAnalysis analysis,
                                     bool one_at_a_time)
{
    LgError err = LG_ERROR_INIT;
    ViewCompileOptions options = {analysis, one_at_a_time};
    ViewCompiled *c = viewexec_compile(pr, &options, &err);
    cr_assert_not_null(c, "%s", err.message);
    return c;
}

/* The overlap test against the sets themselves, over every pair of small ranges. */
Test(stage13, the_overlap_test_is_exact_on_every_small_pair)
{
    size_t pairs = 0, overlapping = 0;
    for (size_t a = 0; a < 7; a++)
        for (size_t s = 1; s < 6; s++)
            for (size_t m = 1; m < 5; m++)
                for (size_t b = 0; b < 7; b++)
                    for (size_t t = 1; t < 6; t++)
                        for (size_t n = 1; n < 5; n++) {
                            ViewRange x = {0, a, m, m == 1 ? 1 : s};
                            ViewRange y = {0, b, n, n == 1 ? 1 : t};
                            size_t want = SIZE_MAX, first = SIZE_MAX;
                            for (size_t i = 0; i < m && want == SIZE_MAX; i++)
                                for (size_t j = 0; j < n; j++)
                                    if (a + i * x.step == b + j * y.step &&
                                        (want == SIZE_MAX || a + i * x.step < want))
                                        want = a + i * x.step;
                            bool got = view_overlap(&x, &y, &first);
                            cr_assert_eq(got, want != SIZE_MAX, "[%zu, %zu, %zu] [%zu, %zu, "
                                         "%zu]", a, m, s, b, n, t);
                            if (got)
                                cr_assert_eq(first, want);
                            pairs++;
                            overlapping += got;
                        }
    cr_assert_eq(pairs, 7 * 5 * 4 * 7 * 5 * 4);
    cr_assert_gt(overlapping, 0);
    ViewRange even = {0, 0, 4, 2}, odd = {0, 1, 4, 2}, other = {1, 0, 4, 2};
    cr_assert(!view_overlap(&even, &odd, NULL), "interleaved views share nothing");
    cr_assert(!view_overlap(&even, &other, NULL), "another storage");
    ViewRange two = {0, 0, 4, 2}, three = {0, 4, 4, 3};
    size_t first = 0;
    cr_assert(view_overlap(&two, &three, &first));
    cr_assert_eq(first, 4);
}

/* A view of a view is a range of the root: offsets add, steps multiply. */
Test(stage13, a_view_of_a_view_is_a_range_of_its_root)
{
    ViewProgram *pr = parse_checked("input %b[16] = 0\n%v = view %b[1:16:3]\n"
                                    "%w = view %v[1:5:2]\n%one = view %w[1:2]\n",
                                    VIEW_ANALYSIS_EXACT);
    const ViewRange *v = &pr->values[value_named(pr, "v")].range;
    const ViewRange *w = &pr->values[value_named(pr, "w")].range;
    const ViewRange *one = &pr->values[value_named(pr, "one")].range;
    cr_assert(v->root == 0 && v->offset == 1 && v->length == 5 && v->step == 3);
    cr_assert(w->root == 0 && w->offset == 4 && w->length == 2 && w->step == 6);
    cr_assert(one->offset == 10 && one->length == 1 && one->step == 1);
    view_program_free(&pr);
}

/* Each hostile slice gets its own one-line refusal, exit 2, nothing on stdout. */
Test(stage13, every_hostile_file_is_refused_with_one_line_and_exit_2)
{
    ViewFiles files;
    list_view_files(VIEWS "malformed", &files);
    for (size_t k = 0; k < files.count; k++) {
        char path[512], line[256], want[1024];
        snprintf(path, sizeof path, VIEWS "malformed/%s", files.names[k]);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f);
        cr_assert_not_null(fgets(line, sizeof line, f));
        fclose(f);
        line[strcspn(line, "\n")] = '\0';
        cr_assert_eq(strncmp(line, "# error: ", 9), 0, "%s", path);
        snprintf(want, sizeof want, "stage-13: error: %s:%s", path, line + 9);
        static LgRun run;
        lg_run(&run, "", "stage-13", path);
        cr_assert_eq(run.status, 2, "%s: %s", path, run.err);
        cr_assert_str_eq(run.out, "");
        cr_assert_eq(strncmp(run.err, want, strlen(want)), 0, "%s\nwant %s", run.err, want);
        cr_assert_eq(strchr(run.err, '\n'), run.err + strlen(run.err) - 1, "one line");
    }
    cr_assert_eq(files.count, 6);
}

/* Refusals that need no file: an empty view, a partial in-place overlap, a mutated
 * carried value, a nested loop, a name used outside its block. */
Test(stage13, the_rules_refuse_with_the_numbers)
{
    LgError e = refusal("input %b[8] = 0\n%v = view %b[3:3]\n", VIEW_ANALYSIS_EXACT);
    cr_assert_str_eq(e.message, "t:2: view [3:3:1] of %b is empty");
    e = refusal("input %b[8] = 0\n%x = view %b[0:4]\n%y = view %b[1:5]\nadd_ %x, %y\n",
                VIEW_ANALYSIS_EXACT);
    cr_assert_str_eq(e.message, "t:4: add_ writes %x = %b[0:4:1] while reading %y = "
                                "%b[1:5:1], which overlaps it in part (PyTorch refuses "
                                "this too: clone the operand first)");
    e = refusal("input %b[2] = 0\n%z = full 1, 0\n%r = while_loop (%c = %z) {\ncond:\n"
                "  %g = lt %c, 1\n  yield %g\nbody:\n  add_ %c, 1\n  yield %c\n}\n",
                VIEW_ANALYSIS_EXACT);
    cr_assert_str_eq(e.message, "t:8: while_loop: add_ mutates carried %c in place (through "
                                "%c); a loop's carried values are never mutated (PyTorch "
                                "issue 195966)");
    e = refusal("input %b[2] = 0\n%z = full 1, 0\n%r = while_loop (%c = %z) {\ncond:\n"
                "  %g = lt %b, 1\n  yield %g\nbody:\n  yield %c\n}\n", VIEW_ANALYSIS_EXACT);
    cr_assert(strstr(e.message, "t:5: '%b' is not visible here") == e.message, "%s",
              e.message);
    e = refusal("input %b[4] = 0\n%v = view %b[0:4:0]\n", VIEW_ANALYSIS_EXACT);
    cr_assert_str_eq(e.message, "t:2: step 0 of a view must be >= 1");
    e = refusal("input %b[4] = 0\n%v = view %b[-1:4]\n", VIEW_ANALYSIS_EXACT);
    cr_assert_str_eq(e.message, "t:2: a view's start -1 is negative: no negative indexing, "
                                "no reversed views");
}

/* A number the text cannot hold is a mistake in the file: the parser's status, the
 * number's own message, at its line. */
/* A file with nothing in it, or only comments, is not a program: Stage 10's rule that a
 * program has a function, said in this language's words. */
Test(stage13, an_empty_program_is_refused)
{
    const char *texts[] = {"", "# only a comment\n", "\n\n"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        LgError e = LG_ERROR_INIT;
        cr_assert_null(view_parse(texts[i], "t", &e), "case %zu", i);
        cr_assert_eq(e.status, LG_ERR_IR_INVALID);
        cr_assert(strstr(e.message, "a program needs at least one input or instruction")
                  != NULL, "case %zu: %s", i, e.message);
    }
}

/* A byte that is not printable ASCII is named by its code, never printed raw, as Stage
 * 10's lexer names it. */
Test(stage13, a_byte_outside_printable_ascii_is_named_by_its_code)
{
    LgError e = LG_ERROR_INIT;
    cr_assert_null(view_parse("input %b[3] = \xff\n", "t", &e));
    cr_assert(strstr(e.message, "byte 0xff") != NULL, "%s", e.message);
    for (const char *m = e.message; *m != '\0'; m++)
        cr_assert((unsigned char)*m >= 0x20 && (unsigned char)*m <= 0x7e, "%s", e.message);
}

/* A list shorter than its input's length is named as such, with both counts. */
Test(stage13, a_short_input_list_is_refused_with_both_counts)
{
    LgError e = LG_ERROR_INIT;
    cr_assert_null(view_parse("input %b[3] = [1, 2]\n", "t", &e));
    cr_assert_eq(e.status, LG_ERR_IR_INVALID);
    cr_assert(strstr(e.message, "input %b has 3 elements: its list has 2") != NULL, "%s",
              e.message);
}

Test(stage13, a_malformed_or_unrepresentable_number_is_the_files_mistake)
{
    LgError e = refusal("input %b[8] = 1\nadd_ %b, 10endent\n", VIEW_ANALYSIS_EXACT);
    cr_assert_eq(e.status, LG_ERR_IR_INVALID, "%s", e.message);
    cr_assert_str_eq(e.message, "t:2: an element or an operand must be a number: got "
                                "'10endent'");
    e = refusal("input %b[2] = [1, 1e39]\n", VIEW_ANALYSIS_EXACT);
    cr_assert_eq(e.status, LG_ERR_IR_INVALID, "%s", e.message);
    cr_assert(strncmp(e.message, "t:1: ", 5) == 0 && strstr(e.message, "1e39") != NULL,
              "%s", e.message);
    e = refusal("input %b[2x] = 1\n", VIEW_ANALYSIS_EXACT);
    cr_assert_eq(e.status, LG_ERR_IR_INVALID, "%s", e.message);
}

/* PyTorch issue 196903, exactly: (2, [6, 6, 6, 6]), buf[:4] = 1, buf[4:] = 3; the later
 * calls go on from the buffer the earlier ones left; compiled = eager on every call. */
Test(stage13, issue_196903_gives_eagers_values_compiled_and_eager)
{
    ViewProgram *pr = load_checked("issue_196903.lgv");
    ViewCompiled *c = compile_or_fail(pr, VIEW_ANALYSIS_EXACT, false);
    BothCalls b;
    both_begin(pr, &b);
    static const float acc[3] = {6, 10, 14}, captured[3] = {3, 5, 7};
    for (int call = 0; call < 3; call++) {
        call_both(pr, c, &b);
        float want[5] = {2, acc[call], acc[call], acc[call], acc[call]};
        float buf[8] = {1, 1, 1, 1, captured[call], captured[call], captured[call],
                        captured[call]};
        expect_floats(b.eager.elems, want, 5, "returned");
        expect_floats(b.eager_in.elems[value_named(pr, "buf")], buf, 8, "buf");
        both_results_free(&b);
    }
    ViewCompileStats s = viewexec_compiled_stats(c);
    cr_assert_eq(s.copy_back_elements, 4, "the captured half alone is copied back");
    cr_assert_eq(s.nodes, 2);
    both_end(&b);
    viewexec_compiled_free(&c);
    view_program_free(&pr);
}

/* The whole-storage check refuses 196903's loop; a real overlap is refused by both,
 * naming both ranges. */
Test(stage13, a_carried_view_overlapping_a_captured_one_is_refused_naming_both)
{
    LgError err = LG_ERROR_INIT;
    ViewProgram *pr = view_load_program(VIEWS "issue_196903.lgv", "f.lgv", &err);
    cr_assert_not_null(pr);
    cr_assert_eq(view_check_program(pr, "f.lgv", VIEW_ANALYSIS_WHOLE_STORAGE, &err),
                 LG_ERR_IR_INVALID);
    cr_assert_str_eq(err.message, "f.lgv:7: while_loop: captured %captured and carried "
                                  "%carried share %buf");
    view_program_free(&pr);
    pr = view_load_program(VIEWS "malformed/overlap.lgv", "o.lgv", &err);
    cr_assert_not_null(pr);
    cr_assert_eq(view_check_program(pr, "o.lgv", VIEW_ANALYSIS_EXACT, &err),
                 LG_ERR_IR_INVALID);
    cr_assert_str_eq(err.message, "o.lgv:6: while_loop: carried %car = %b[1:5:1] and "
                                  "written %cap = %b[4:8:1] share element 4");
    view_program_free(&pr);
}

/* A captured value the loop only reads may overlap a carried one; one written through a
 * view made in the body, disjoint from the carried one, is accepted too (the review of
 * PyTorch PR 196005), and refused by the whole-storage check. */
Test(stage13, only_the_elements_a_loop_writes_must_avoid_its_carried_views)
{
    ViewProgram *pr = parse_checked("input %b[8] = 1\n%c = view %b[0:4]\n%r = view %b[2:6]\n"
                                    "%i = while_loop (%ci = %c) captures (%r) {\ncond:\n"
                                    "  %h = view %r[0:1]\n  %g = lt %h, 0\n  yield %g\n"
                                    "body:\n  yield %ci\n}\nreturn %i\n",
                                    VIEW_ANALYSIS_EXACT);
    view_program_free(&pr);
    pr = load_checked("review_196005.lgv");
    ViewCompiled *c = compile_or_fail(pr, VIEW_ANALYSIS_EXACT, false);
    BothCalls b;
    both_begin(pr, &b);
    call_both(pr, c, &b);
    expect_floats(b.compiled.elems, (const float[]){2, 3, 3, 3, 3}, 5, "returned");
    expect_floats(b.compiled_in.elems[0], (const float[]){1, 1, 1, 1, 3, 3, 3, 3}, 8, "x");
    both_end(&b);
    viewexec_compiled_free(&c);
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(view_check_program(pr, "r.lgv", VIEW_ANALYSIS_WHOLE_STORAGE, &err),
                 LG_ERR_IR_INVALID);
    cr_assert_str_eq(err.message, "r.lgv:7: while_loop: captured %x and carried %carried "
                                  "share %x");
    view_program_free(&pr);
}

/* PyTorch issue 97130: b[0] = 2 through b is seen through c, eager and compiled. */
Test(stage13, a_write_through_one_view_is_seen_through_another)
{
    ViewProgram *pr = load_checked("issue_97130.lgv");
    ViewCompiled *c = compile_or_fail(pr, VIEW_ANALYSIS_EXACT, false);
    BothCalls b;
    both_begin(pr, &b);
    for (int call = 0; call < 3; call++) {
        call_both(pr, c, &b);
        expect_floats(b.compiled.elems, (const float[]){2, 1}, 2, "c");
        expect_floats(b.compiled_in.elems[0], (const float[]){2, 1}, 2, "a");
        both_results_free(&b);
    }
    cr_assert_eq(viewexec_compiled_stats(c).copy_back_elements, 1, "only a[0] was written");
    both_end(&b);
    viewexec_compiled_free(&c);
    view_program_free(&pr);
}

/* PyTorch issue 146213: zero iterations; the output is a storage of its own, so out *= 3
 * and then view += 10 give [3, 3] and [11, 1, 11, 1], then [33, 33], [63, 63]. */
Test(stage13, a_loops_outputs_never_alias_its_inputs_after_zero_iterations)
{
    ViewProgram *pr = load_checked("issue_146213.lgv");
    ViewCompiled *c = compile_or_fail(pr, VIEW_ANALYSIS_EXACT, false);
    BothCalls b;
    both_begin(pr, &b);
    static const float out[3] = {3, 33, 63}, a0[3] = {11, 21, 31};
    for (int call = 0; call < 3; call++) {
        call_both(pr, c, &b);
        expect_floats(b.compiled.elems, (const float[]){5, out[call], out[call]}, 3, "out");
        expect_floats(b.compiled_in.elems[0], (const float[]){a0[call], 1, a0[call], 1}, 4,
                      "a");
        both_results_free(&b);
    }
    both_end(&b);
    viewexec_compiled_free(&c);
    view_program_free(&pr);
}

/* The carry as one parallel assignment: eager and compiled agree on the permutation,
 * the shift register and the swap; copied one at a time, the compiled loop does not. */
Test(stage13, a_carry_is_one_parallel_assignment_in_eager_and_compiled)
{
    static const struct {
        const char *file;
        size_t n;
        float right[4], naive[4];
    } cases[3] = {
        {"permutation.lgv", 3, {2, 2, 1}, {2, 2, 2}},
        {"shift_register.lgv", 2, {30, 20}, {30, 30}},
        {"swap.lgv", 4, {3, 4, 1, 2}, {3, 4, 3, 4}},
    };
    for (int k = 0; k < 3; k++) {
        ViewProgram *pr = load_checked(cases[k].file);
        ViewCompiled *c = compile_or_fail(pr, VIEW_ANALYSIS_EXACT, false);
        BothCalls b;
        both_begin(pr, &b);
        for (int call = 0; call < 3; call++) {
            call_both(pr, c, &b);
            expect_floats(b.eager.elems, cases[k].right, cases[k].n, cases[k].file);
            both_results_free(&b);
        }
        both_end(&b);
        viewexec_compiled_free(&c);
        c = compile_or_fail(pr, VIEW_ANALYSIS_EXACT, true);
        ViewInputs in;
        ViewResults r;
        LgError err = LG_ERROR_INIT;
        cr_assert_eq(viewexec_inputs_new(pr, &in, &err), LG_OK);
        cr_assert_eq(viewexec_compiled_call(c, &in, &r, &err), LG_OK);
        expect_floats(r.elems, cases[k].naive, cases[k].n, "one at a time");
        viewexec_results_free(&r);
        viewexec_inputs_free(&in);
        viewexec_compiled_free(&c);
        view_program_free(&pr);
    }
}

/* Two strided views that share no element make no dependency and fuse into one kernel;
 * the whole-storage analysis orders and splits them, for the same values. */
Test(stage13, disjoint_strided_views_fuse_and_whole_storage_splits_them)
{
    ViewProgram *pr = load_checked("disjoint_halves.lgv");
    ViewCompiled *exact = compile_or_fail(pr, VIEW_ANALYSIS_EXACT, false);
    ViewCompiled *whole = compile_or_fail(pr, VIEW_ANALYSIS_WHOLE_STORAGE, false);
    ViewCompileStats e = viewexec_compiled_stats(exact), w = viewexec_compiled_stats(whole);
    cr_assert_eq(e.nodes, 3);
    cr_assert_eq(e.deps, 2, "the sum reads each view after its write: two RAW");
    cr_assert_eq(e.kernels, 1);
    cr_assert_eq(w.deps, 5);
    cr_assert_eq(w.kernels, 3);
    BothCalls b;
    both_begin(pr, &b);
    call_both(pr, exact, &b);
    expect_floats(b.eager.elems, (const float[]){104, 110, 116, 122}, 4, "sum");
    both_results_free(&b);
    both_end(&b);
    viewexec_compiled_free(&exact);
    viewexec_compiled_free(&whole);
    view_program_free(&pr);
}

/* Every example runs three calls through the program with MATCH on each. */
Test(stage13, every_example_matches_eager_over_three_calls)
{
    ViewFiles files;
    list_view_files(VIEWS, &files);
    for (size_t k = 0; k < files.count; k++) {
        char args[512];
        snprintf(args, sizeof args, VIEWS "%s --calls 3", files.names[k]);
        ProgramRun run;
        run_program(&run, "stage-13", args);
        cr_assert_eq(run.status, 0, "%s: %s", args, run.output);
        cr_assert(strstr(run.output, "MISMATCH") == NULL, "%s", run.output);
        const char *p = run.output;
        size_t matches = 0;
        while ((p = strstr(p, "  MATCH\n")) != NULL)
            matches++, p++;
        cr_assert_eq(matches, 3, "%s", run.output);
    }
    cr_assert_eq(files.count, 8);
}

/* --carry one-at-a-time makes the swap MISMATCH: exit 1, naming the calls. */
Test(stage13, a_carry_copied_one_at_a_time_is_a_mismatch)
{
    ProgramRun run;
    run_program(&run, "stage-13", VIEWS "swap.lgv --calls 2 --carry one-at-a-time");
    cr_assert_eq(run.status, 1, "%s", run.output);
    cr_assert(strstr(run.output, "stage-13: error: 2 of 2 calls differ between eager and "
                                 "compiled") != NULL, "%s", run.output);
    run_program(&run, "stage-13", VIEWS "issue_196903.lgv --analysis whole-storage");
    cr_assert_eq(run.status, 2, "%s", run.output);
}

/* The printer writes a text that parses to the same program. */
Test(stage13, the_printer_round_trips)
{
    LgError err = LG_ERROR_INIT;
    ViewProgram *pr = load_checked("issue_196903.lgv");
    char first[4096], second[4096];
    FILE *out = fmemopen(first, sizeof first, "w");
    view_print_program(pr, out);
    fclose(out);
    ViewProgram *again = view_parse(first, "again", &err);
    cr_assert_not_null(again, "%s\n%s", err.message, first);
    out = fmemopen(second, sizeof second, "w");
    view_print_program(again, out);
    fclose(out);
    cr_assert_str_eq(first, second);
    view_program_free(&again);
    view_program_free(&pr);
}

/* An input of one number prints as that number: the printed text of a file's program
 * fits in a file (2^24 elements printed as a list would be 48 MB). */
Test(stage13, an_input_of_one_number_prints_as_that_number)
{
    LgError err = LG_ERROR_INIT;
    ViewProgram *pr = view_parse("input %b[16777213] = 1.5\ninput %c[3] = [2, 2, -0]\n"
                                 "return %b, %c\n", "t", &err);
    cr_assert_not_null(pr, "%s", err.message);
    char text[256];
    FILE *out = fmemopen(text, sizeof text, "w");
    view_print_program(pr, out);
    fclose(out);
    view_program_free(&pr);
    cr_assert_str_eq(text, "input %b[16777213] = 1.5\ninput %c[3] = [2, 2, -0]\n"
                           "return %b, %c\n");
}

/* Every allocation failure in parsing, checking, compiling and calling leaves nothing. */
Test(stage13, every_allocation_failure_leaves_nothing)
{
    char *text = lg_read_text(VIEWS "issue_196903.lgv");
    size_t k = 1;
    for (;; k++) {
        LgError err = LG_ERROR_INIT;
        mem_fail_at(k);
        ViewProgram *pr = view_parse(text, "t", &err);
        ViewCompiled *c = NULL;
        ViewInputs in = {0};
        ViewResults r = {0};
        LgStatus status = pr == NULL ? err.status : LG_OK;
        if (status == LG_OK)
            status = view_check_program(pr, "t", VIEW_ANALYSIS_EXACT, &err);
        if (status == LG_OK && (c = viewexec_compile(pr, NULL, &err)) == NULL)
            status = err.status;
        if (status == LG_OK)
            status = viewexec_inputs_new(pr, &in, &err);
        if (status == LG_OK)
            status = viewexec_compiled_call(c, &in, &r, &err);
        if (status == LG_OK)
            viewexec_results_free(&r);
        if (status == LG_OK && (status = viewexec_eager_call(pr, &in, &r, &err)) == LG_OK)
            viewexec_results_free(&r);
        mem_fail_at(0);
        if (in.elems != NULL)
            viewexec_inputs_free(&in);
        viewexec_compiled_free(&c);
        view_program_free(&pr);
        cr_assert_eq(mem_live_blocks(), 0, "k = %zu", k);
        if (status == LG_OK)
            break;
        cr_assert_eq(status, LG_ERR_ALLOC, "k = %zu: %s", k, err.message);
    }
    cr_assert_gt(k, 10);
    free(text);
}

/* 10^4 overlapping strided views of one buffer: one dependency per neighbour pair. */
Test(stage13, ten_thousand_overlapping_views_make_one_dependency_per_neighbour)
{
    size_t size = 64 + 10000 * 64, at = 0;
    char *text = malloc(size);
    cr_assert_not_null(text);
    at += (size_t)snprintf(text, size, "input %%b[%d] = 0\n", 4 * 10000 + 16);
    for (size_t k = 0; k < 10000; k++) {
        size_t step = 2 + k % 2;
        at += (size_t)snprintf(text + at, size - at, "%%v%zu = view %%b[%zu:%zu:%zu]\n"
                               "add_ %%v%zu, 1\n", k, 4 * k, 4 * k + 3 * step + 1, step, k);
    }
    ViewProgram *pr = parse_checked(text, VIEW_ANALYSIS_EXACT);
    ViewCompiled *c = compile_or_fail(pr, VIEW_ANALYSIS_EXACT, false);
    ViewCompileStats s = viewexec_compiled_stats(c);
    cr_assert_eq(s.nodes, 10000);
    cr_assert_eq(s.deps, 9999);
    viewexec_compiled_free(&c);
    view_program_free(&pr);
    free(text);
}

/* The bounds: a cond that stays true stops after 65536 iterations, eager and compiled,
 * with the same message. */
Test(stage13, a_loop_that_never_ends_is_stopped_the_same_way_both_ways)
{
    ViewProgram *pr = parse_checked("%z = full 1, 0\n%r = while_loop (%c = %z) {\ncond:\n"
                                    "  %g = lt %c, 1\n  yield %g\nbody:\n  %d = mul %c, 1\n"
                                    "  yield %d\n}\nreturn %r\n", VIEW_ANALYSIS_EXACT);
    ViewCompiled *c = compile_or_fail(pr, VIEW_ANALYSIS_EXACT, false);
    LgError e1 = LG_ERROR_INIT, e2 = LG_ERROR_INIT;
    ViewInputs in = {0};
    ViewResults r = {0};
    cr_assert_eq(viewexec_inputs_new(pr, &in, &e1), LG_OK);
    cr_assert_eq(viewexec_eager_call(pr, &in, &r, &e1), LG_ERR_BUDGET);
    cr_assert_eq(viewexec_compiled_call(c, &in, &r, &e2), LG_ERR_BUDGET);
    cr_assert_str_eq(e1.message, e2.message);
    cr_assert_str_eq(e1.message, "while_loop (line 2): cond still true after 65536 "
                                 "iterations");
    viewexec_inputs_free(&in);
    viewexec_compiled_free(&c);
    view_program_free(&pr);
}
