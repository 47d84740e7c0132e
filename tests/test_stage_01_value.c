/* Stage 01: Values on a tape, the error model, the one allocator, strict parsing. */
#define _GNU_SOURCE /* RTLD_NEXT: the test's mkdtemp calls the C library's */
#include "litgrad_test.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>

#include "cli.h"
#include "error.h"
#include "parse.h"
#include "value.h"

LG_SUITE(stage01);

Test(stage01, tape_starts_empty_with_its_capacity)
{
    LgError err = LG_ERROR_INIT;
    Tape *tape = tape_new(4, &err);
    cr_assert_not_null(tape, "%s", err.message);
    cr_assert_eq(tape_count(tape), 0);
    cr_assert_eq(tape_capacity(tape), 4);
    cr_assert_eq(mem_live_blocks(), 2, "a tape is two blocks: the tape and its nodes");
    tape_free(&tape);
    cr_assert_null(tape, "tape_free clears the caller's pointer");
}

Test(stage01, values_are_written_in_order_with_zero_grad)
{
    LgError err = LG_ERROR_INIT;
    Tape *tape = tape_new(4, &err);
    const double numbers[] = {3.0, -4.0, 2.0, 5.0};
    cr_assert_eq(tape_require(tape, 4, &err), LG_OK);
    Value *first = NULL;
    for (size_t i = 0; i < 4; i++) {
        Value *v = value_new(tape, numbers[i]);
        if (i == 0)
            first = v;
        cr_assert_eq(v, tape_at(tape, i), "value %zu is at tape position %zu", i, i);
        cr_assert_eq(v->data, numbers[i]);
        cr_assert_eq(v->grad, 0.0);
    }
    cr_assert_eq(tape_count(tape), 4);
    cr_assert_eq(first->data, 3.0, "earlier values never move");
    tape_free(&tape);
}

Test(stage01, capacity_outside_its_range_is_refused_before_allocating)
{
    LgError err = LG_ERROR_INIT;
    cr_assert_null(tape_new(0, &err));
    cr_assert_eq(err.status, LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "tape capacity must be in [1, 134217728] nodes: got 0");
    cr_assert_null(tape_new(TAPE_CAPACITY_MAX + 1, &err));
    cr_assert_str_eq(err.message,
                     "tape capacity must be in [1, 134217728] nodes: got 134217729");
    cr_assert_eq(mem_live_blocks(), 0);
}

Test(stage01, require_accepts_exactly_the_free_room)
{
    LgError err = LG_ERROR_INIT;
    Tape *tape = tape_new(4, &err);
    value_new(tape, 1.0);
    cr_assert_eq(tape_require(tape, 3, &err), LG_OK, "3 free of 4: a need of 3 fits");
    cr_assert_eq(tape_require(tape, 4, &err), LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 4 nodes, 3 free of 4");
    cr_assert_eq(tape_count(tape), 1, "a refused request writes nothing");
    cr_assert_eq(tape_require(tape, SIZE_MAX, &err), LG_ERR_BUDGET,
                 "an absurd need does not wrap around");
    tape_free(&tape);
}

Test(stage01, room_is_checked_before_a_tape_exists)
{
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(tape_check_room(4, 4, 4, &err), LG_OK);
    cr_assert_eq(tape_check_room(5, 4, 4, &err), LG_ERR_BUDGET);
    cr_assert_str_eq(err.message, "tape capacity exceeded: need 5 nodes, 4 free of 4");
    cr_assert_eq(mem_live_blocks(), 0, "the question allocates nothing");
}

Test(stage01, reset_forgets_values_and_keeps_capacity)
{
    LgError err = LG_ERROR_INIT;
    Tape *tape = tape_new(2, &err);
    value_new(tape, 1.0)->grad = 5.0;
    value_new(tape, 2.0);
    tape_reset(tape);
    cr_assert_eq(tape_count(tape), 0);
    cr_assert_eq(tape_capacity(tape), 2);
    cr_assert_eq(tape_require(tape, 2, &err), LG_OK);
    cr_assert_eq(value_new(tape, 7.0)->grad, 0.0, "a reused slot starts clean");
    tape_free(&tape);
}

Test(stage01, full_tape_push_is_a_programmer_error, .signal = SIGABRT,
     .init = cr_redirect_stderr)
{
    LgError err = LG_ERROR_INIT;
    Tape *tape = tape_new(1, &err);
    value_new(tape, 1.0);
    value_new(tape, 2.0); /* no tape_require: the assertion stops the program */
}

Test(stage01, nonfinite_leaf_is_a_programmer_error, .signal = SIGABRT,
     .init = cr_redirect_stderr)
{
    LgError err = LG_ERROR_INIT;
    Tape *tape = tape_new(1, &err);
    value_new(tape, NAN);
}

Test(stage01, finite_checks_name_what_and_where)
{
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(value_check_finite(1.5, "x", &err), LG_OK);
    cr_assert_eq(value_check_finite(NAN, "a leaf", &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "a leaf must be finite: got nan");
    cr_assert_eq(value_check_finite(-INFINITY, "w[0]", &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "w[0] must be finite: got -inf");

    Tape *tape = tape_new(3, &err);
    value_new(tape, 1.0);
    Value *b = value_new(tape, 2.0);
    cr_assert_eq(tape_check_finite(tape, &err), LG_OK);
    b->grad = INFINITY;
    cr_assert_eq(tape_check_finite(tape, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "non-finite grad at tape position 1: inf");
    Value *c = tape_push(tape);
    c->data = NAN;
    b->grad = 0.0;
    cr_assert_eq(tape_check_finite(tape, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "non-finite data at tape position 2: nan");
    tape_free(&tape);
}

/* Walk k = 1, 2, ... over tape_new: each injected failure must return NULL, report
 * LG_ERR_ALLOC naming the memory, and leave no block; the walk ends when k passes the
 * last allocation. tape_new makes exactly two. */
Test(stage01, every_allocation_failure_of_tape_new_leaves_nothing)
{
    char nodes_message[LG_MESSAGE_MAX];
    snprintf(nodes_message, sizeof nodes_message,
             "out of memory: cannot allocate 4 x %zu bytes for tape nodes", sizeof(Value));
    LgError err = LG_ERROR_INIT;
    size_t k = 1;
    for (;; k++) {
        mem_fail_at(k);
        Tape *tape = tape_new(4, &err);
        mem_fail_at(0);
        if (tape != NULL) {
            tape_free(&tape);
            break;
        }
        cr_assert_eq(err.status, LG_ERR_ALLOC);
        cr_assert_lt(k, 3);
        if (k == 1)
            cr_assert(strncmp(err.message, "out of memory: cannot allocate 1 x ", 35) == 0 &&
                          strstr(err.message, " bytes for a tape") != NULL,
                      "%s", err.message);
        else
            cr_assert_str_eq(err.message, nodes_message);
        cr_assert_eq(mem_live_blocks(), 0, "failure at allocation %zu leaked", k);
    }
    cr_assert_eq(k, 3, "tape_new makes two allocations");
}

Test(stage01, allocation_size_overflow_is_refused)
{
    LgError err = LG_ERROR_INIT;
    cr_assert_null(mem_alloc(SIZE_MAX / 8 + 1, 16, "a huge array", &err));
    cr_assert_eq(err.status, LG_ERR_ALLOC);
    cr_assert(strstr(err.message, "for a huge array: the size overflows size_t"), "%s",
              err.message);
    cr_assert_eq(mem_live_blocks(), 0);
}

Test(stage01, long_messages_are_cut_visibly)
{
    LgError err = LG_ERROR_INIT;
    char long_word[600];
    memset(long_word, 'x', sizeof long_word - 1);
    long_word[sizeof long_word - 1] = '\0';
    cr_assert_eq(error_set(&err, LG_ERR_INVALID, "rule: %s", long_word), LG_ERR_INVALID);
    cr_assert_eq(strlen(err.message), LG_MESSAGE_MAX - 1);
    cr_assert_str_eq(err.message + LG_MESSAGE_MAX - 4, "...");
    error_clear(&err);
    cr_assert_eq(err.status, LG_OK);
    cr_assert_str_eq(err.message, "");
}

/* Is s well-formed UTF-8 as far as its lead bytes promise: no character cut short? */
static bool whole_characters(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0';) {
        size_t length = *p < 0x80 ? 1 : *p >= 0xf0 ? 4 : *p >= 0xe0 ? 3 : *p >= 0xc0 ? 2 : 0;
        if (length == 0)
            return false; /* a continuation byte with no lead byte: a cut character */
        for (size_t i = 1; i < length; i++)
            if ((p[i] & 0xc0) != 0x80)
                return false;
        p += length;
    }
    return true;
}

/* A message cut by error_set ends at a character's boundary: a quoted word of 60
 * characters of four bytes fits its LgQuoted but not the message after a rule's words,
 * and the cut must not leave half a character before the "...". */
Test(stage01, a_cut_message_never_splits_a_character)
{
    LgError err = LG_ERROR_INIT;
    char euros[3 * 100 + 1] = ""; /* "x" then 3-byte characters: byte 252 is inside one */
    for (int i = 0; i < 100; i++)
        strcat(euros, "\xe2\x82\xac");
    error_set(&err, LG_ERR_INVALID, "x%s", euros);
    cr_assert(whole_characters(err.message), "%s", err.message);
    cr_assert_str_eq(err.message + strlen(err.message) - 3, "...");
    cr_assert_geq(strlen(err.message), LG_MESSAGE_MAX - 1 - 3, "at most a character lost");
    char faces[4 * LG_QUOTE_SHOWN + 1] = ""; /* 60 characters of four bytes */
    for (int i = 0; i < LG_QUOTE_SHOWN; i++)
        strcat(faces, "\xf0\x9f\x98\x80");
    for (int n = 0; n < 4; n++) { /* a rule's words of every length modulo 4 */
        const char *what[] = {"--capacity", "--capacit", "--capaci", "--capac"};
        cr_assert_eq(parse_size(faces, what[n], 1, 9, &(size_t){0}, &err), LG_ERR_INVALID);
        cr_assert(whole_characters(err.message), "%s", err.message);
        cr_assert_str_eq(err.message + strlen(err.message) - 3, "...");
    }
}

/* A quoted word of at most 60 characters is quoted whole; a longer one by its first and
 * last 28 characters and its length; a UTF-8 character is never split, and bytes that
 * are not UTF-8 still give a quote that fits. */
Test(stage01, a_quoted_word_over_60_characters_is_cut_with_its_length)
{
    static char word[100001];
    memset(word, 'a', 100000);
    word[0] = 'b';
    word[99999] = 'z';
    char cut[128];
    snprintf(cut, sizeof cut, "'b%.27s...%.27sz' (100000 characters)", word + 1, word + 1);
    cr_assert_str_eq(error_quote(word).text, cut);
    word[60] = '\0';
    cr_assert_eq(strlen(error_quote(word).text), 62, "60 characters are quoted whole");
    word[61] = '\0';
    word[60] = 'a';
    cr_assert(strstr(error_quote(word).text, "...") && strstr(error_quote(word).text,
              "' (61 characters)"), "%s", error_quote(word).text);
    cr_assert_str_eq(error_quote("").text, "''");
    cr_assert_str_eq(error_quote_span("3.0,4", 3).text, "'3.0'");
    char utf8[2 * 70 + 1] = ""; /* 70 characters of two bytes: the cut keeps each whole */
    for (int i = 0; i < 70; i++)
        strcat(utf8, "\xc3\xa9");
    const char *q = error_quote(utf8).text;
    char want[160] = "'";
    for (int i = 0; i < 28; i++)
        strcat(want, "\xc3\xa9");
    strcat(want, "...");
    for (int i = 0; i < 28; i++)
        strcat(want, "\xc3\xa9");
    strcat(want, "' (70 characters)");
    cr_assert_str_eq(q, want);
    static char junk[5001]; /* one lead byte and 5000 continuation bytes */
    memset(junk, 0x80, 5000);
    junk[0] = (char)0xc3;
    cr_assert(strstr(error_quote(junk).text, "' (1250 characters)"), "%s",
              error_quote(junk).text);
    LgError err = LG_ERROR_INIT;
    memset(word, '7', 100000);
    word[100000] = '\0';
    cr_assert_eq(parse_size(word, "--batch", 1, 9, &(size_t){0}, &err), LG_ERR_INVALID);
    cr_assert(strstr(err.message, "--batch must be an integer in [1, 9]: got '7777777777777"),
              "%s", err.message);
    cr_assert(strstr(err.message, "777' (100000 characters)"), "%s", err.message);
    cr_assert_lt(strlen(err.message), 160);
}

Test(stage01, status_names)
{
    cr_assert_str_eq(error_status_name(LG_OK), "ok");
    cr_assert_str_eq(error_status_name(LG_ERR_INVALID), "invalid");
    cr_assert_str_eq(error_status_name(LG_ERR_BUDGET), "budget");
    cr_assert_str_eq(error_status_name(LG_ERR_NONFINITE), "nonfinite");
    cr_assert_str_eq(error_status_name(LG_ERR_ALLOC), "alloc");
    cr_assert_str_eq(error_status_name(LG_ERR_IO), "io");
    cr_assert_str_eq(error_status_name(LG_ERR_PATH), "path");
}

Test(stage01, sizes_are_exact_decimal_integers)
{
    LgError err = LG_ERROR_INIT;
    size_t out = 99;
    cr_assert_eq(parse_size("3", "--capacity", 1, 10, &out, &err), LG_OK);
    cr_assert_eq(out, 3);
    cr_assert_eq(parse_size("0010", "--capacity", 1, 10, &out, &err), LG_OK);
    cr_assert_eq(out, 10);
    static const char *const refused[] = {
        "", "0", "11", "-1", "+3", "3.0", "1e3", " 3", "3 ", "0x10", "three",
        "99999999999999999999999999",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        out = 99;
        cr_assert_eq(parse_size(refused[i], "--capacity", 1, 10, &out, &err), LG_ERR_INVALID,
                     "'%s' is not a size in [1, 10]", refused[i]);
        cr_assert_eq(out, 99, "nothing is written on failure");
    }
    parse_size("3.0", "--capacity", 1, 10, &out, &err);
    cr_assert_str_eq(err.message, "--capacity must be an integer in [1, 10]: got '3.0'");
    cr_assert_eq(parse_size("18446744073709551615", "n", 0, SIZE_MAX, &out, &err), LG_OK);
    cr_assert_eq(out, SIZE_MAX, "the largest size_t is read exactly");
    cr_assert_eq(parse_size("18446744073709551616", "n", 0, SIZE_MAX, &out, &err),
                 LG_ERR_INVALID, "one more overflows and is refused, not wrapped");
}

Test(stage01, numbers_are_finite_doubles_read_whole)
{
    LgError err = LG_ERROR_INIT;
    double out = 0.0;
    cr_assert_eq(parse_double("-4", "VALUE", &out, &err), LG_OK);
    cr_assert_eq(out, -4.0);
    cr_assert_eq(parse_double("1.5e-3", "VALUE", &out, &err), LG_OK);
    cr_assert_eq(out, 1.5e-3);
    static const char *const malformed[] = {"", "abc", "1.5x", " 1", "\n1", "\r1", "1 ",
                                            "--3"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++)
        cr_assert_eq(parse_double(malformed[i], "VALUE", &out, &err), LG_ERR_INVALID,
                     "'%s'", malformed[i]);
    parse_double("abc", "VALUE", &out, &err);
    cr_assert_str_eq(err.message, "VALUE must be a number: got 'abc'");
    out = 7.0;
    cr_assert_eq(parse_double("1e-400", "VALUE", &out, &err), LG_ERR_INVALID);
    cr_assert_str_eq(err.message, "VALUE underflows to zero: got '1e-400'");
    cr_assert_eq(out, 7.0, "nothing is written on failure");
    cr_assert_eq(parse_double("4.9406564584124654e-324", "VALUE", &out, &err), LG_OK,
                 "the smallest subnormal keeps its value");
    cr_assert_gt(out, 0.0);
    cr_assert_eq(parse_double("-0", "VALUE", &out, &err), LG_OK, "a typed zero is zero");
    static const char *const nonfinite[] = {"nan", "inf", "-inf", "1e999", "-1e999"};
    for (size_t i = 0; i < sizeof nonfinite / sizeof nonfinite[0]; i++)
        cr_assert_eq(parse_double(nonfinite[i], "VALUE", &out, &err), LG_ERR_NONFINITE,
                     "'%s'", nonfinite[i]);
    cr_assert_str_eq(err.message, "VALUE must be finite: got '-1e999'");
}

Test(stage01, program_demonstration_refuses_and_leaks_nothing)
{
    ProgramRun run;
    run_program(&run, "stage-01", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "x1 = -4 at position 1, grad 0"), "%s", run.output);
    cr_assert(strstr(run.output, "tape capacity exceeded: need 1 node, 0 free of 4"));
    cr_assert(strstr(run.output, "allocation 2 fails (0 blocks left): out of memory"), "%s", run.output);
    cr_assert(strstr(run.output, "allocation 3: none left to fail"), "%s", run.output);
    cr_assert(strstr(run.output, "after tape_free: 0 live blocks"), "%s", run.output);
    lg_expect_short_lines(run.output);
}

/* Figure 1.1 is the demonstration's tape: the capacity, the count and the refusal it
 * draws are those that the default run prints. */
Test(stage01, the_figure_draws_the_tape_that_the_demonstration_prints)
{
    char dir[] = "/tmp/litgrad-figure-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char args[64], path[96];
    snprintf(args, sizeof args, "--figure-data %s", dir);
    snprintf(path, sizeof path, "%s/fig-01-tape.dot", dir);
    ProgramRun run;
    run_program_stdout(&run, "stage-01", args);
    cr_assert_eq(run.status, 0, "stage-01 %s", args);
    cr_assert_str_eq(run.output, "", "a figure run prints nothing on standard output");
    char *dot = lg_read_text(path);
    remove(path);
    cr_assert_eq(rmdir(dir), 0, "%s holds no other file", dir);
    const char *refusal = "tape capacity exceeded: need 1 node, 0 free of 4";
    run_program(&run, "stage-01", "");
    cr_assert(strstr(run.output, "tape: capacity 4 nodes"), "%s", run.output);
    cr_assert(strstr(run.output, "tape: 4 of 4 nodes used"), "%s", run.output);
    cr_assert(strstr(run.output, refusal), "%s", run.output);
    cr_assert(strstr(dot, "label=\"tape_require(1): tape capacity exceeded: need 1 node, "
                          "0 free of 4\""), "%s", dot);
    cr_assert(strstr(dot, "count = 4</TD>") && strstr(dot, "capacity = 4</TD>"), "%s", dot);
    cr_assert(strstr(dot, "<TD>w1</TD><TD>5</TD><TD>0</TD>"), "%s", dot);
    cr_assert(strstr(dot, "tape:count -> slots:s4:w;"), "count points at the end: %s", dot);
    free(dot);
}

Test(stage01, program_conventions_for_help_usage_and_rules)
{
    ProgramRun run;
    run_program(&run, "stage-01", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "usage: stage-01"));
    run_program(&run, "stage-01", "--bogus");
    cr_assert_eq(run.status, 2, "an unknown option is a usage error");
    cr_assert(strstr(run.output, "stage-01: error: unknown option '--bogus'; try"), "%s",
              run.output);
    cr_assert_null(strstr(run.output, "negative"), "no hint about negative numbers here");
    char word[203] = "--", shown[128]; /* an unknown option of 202 characters: cut */
    memset(word + 2, 'x', 200);
    word[202] = '\0';
    run_program(&run, "stage-01", word);
    cr_assert_eq(run.status, 2);
    snprintf(shown, sizeof shown, "unknown option '%.28s...%.28s' (202 characters); try",
             word, word + 174);
    cr_assert(strstr(run.output, shown), "%s", run.output);
    run_program(&run, "stage-01", "1 -5");
    cr_assert_eq(run.status, 2, "a negative number without -- is an unknown option");
    cr_assert(strstr(run.output, "unknown option '-5' (a negative number must follow --)"),
              "%s", run.output);
    run_program(&run, "stage-01", "--capacity");
    cr_assert_eq(run.status, 2);
    cr_assert(strstr(run.output, "stage-01: error: option '--capacity' needs a value"), "%s",
              run.output);
    run_program(&run, "stage-01", "--capacity=");
    cr_assert_eq(run.status, 2, "an empty size is not a size");
    cr_assert(strstr(run.output, "--capacity must be an integer in [1, 134217728]: got ''"),
              "%s", run.output);
    run_program(&run, "stage-01", "--capacity 3.0 1");
    cr_assert_eq(run.status, 2);
    cr_assert(strstr(run.output, "--capacity must be an integer in [1, 134217728]: got '3.0'"),
              "%s", run.output);
    run_program(&run, "stage-01", "1 nan");
    cr_assert_eq(run.status, 2);
    cr_assert(strstr(run.output, "VALUE must be finite: got 'nan'"), "%s", run.output);
    run_program(&run, "stage-01", "--capacity 2 1 2 3");
    cr_assert_eq(run.status, 1, "a broken budget is a rule error, found before the tape");
    cr_assert(strstr(run.output, "tape capacity exceeded: need 3 nodes, 2 free of 2"), "%s",
              run.output);
    run_program_stdout(&run, "stage-01", "--capacity 2 1 2 3");
    cr_assert_str_eq(run.output, "", "an error prints nothing on standard output");
    run_program_stdout(&run, "stage-01", "--bogus");
    cr_assert_str_eq(run.output, "");
    run_program(&run, "stage-01", "--capacity 3 -- 1.5 -2");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "tape: 2 of 3 nodes used"), "%s", run.output);
    cr_assert(strstr(run.output, "position 1: data -2, grad 0"), "%s", run.output);
}

Test(stage01, program_refuses_bad_command_lines_alike)
{
    static const LgBadLine lines[] = {
        {"-c", "option '-c' needs a value"},
        {"--capacity", "option '--capacity' needs a value"},
        {"--capacity=", "--capacity must be an integer"},
        {"--capacity ''", "--capacity must be an integer"},
        {"--capacity 0", "--capacity must be an integer in [1, 134217728]: got '0'"},
        {"--capacity 3.0", "got '3.0'"},
        {"--capacity 0x10", "got '0x10'"},
        {"--capacity -3", "got '-3'"},
        {"--capacity 99999999999999999999999", "--capacity must be an integer"},
        {"--capacity 134217729", "got '134217729'"},
        {"--capacity 2 --capacity 3", "option '--capacity' is given twice"},
        {"-c2 -c2", "option '--capacity' is given twice"},
        {"-c2x", "got '2x'"},
        /* options are written in full: a prefix is refused, its value as a word or after = */
        {"--cap 3 1", "option '--cap' is abbreviated: write '--capacity'"},
        {"--cap=3 1", "option '--cap' is abbreviated: write '--capacity'"},
        {"1 --c 3", "option '--c' is abbreviated: write '--capacity'"},
        {"--capacity 3 --capa 4", "option '--capa' is abbreviated: write '--capacity'"},
        {"-1.5", "unknown option '-1.5' (a negative number must follow --)"},
        {"1 -5", "unknown option '-5'"},
        {"-inf", "unknown option '-inf' (a negative number must follow --)"},
        {"1 -nan", "unknown option '-nan' (a negative number must follow --)"},
        {"-i", "unknown option '-i'; try"},
        {"-i -inf", "unknown option '-i'; try"},
        {"-if", "unknown option '-i'; try"},
        {"''", "VALUE must be a number: got ''"},
        {"0x10", "VALUE must be a number: got '0x10'"},
        {"1e999", "VALUE must be finite: got '1e999'"},
        {"1e-400", "VALUE underflows to zero"},
        {"nan", "got 'nan'"},
        {"' 1'", "got ' 1'"},
        {"1,5", "got '1,5'"},
        {"{DIR}", "got '/tmp'"},
        {"{FIFO}", "VALUE must be a number"},
        {"{LONG}", "VALUE must be a number"},
        {"/dev/null", "got '/dev/null'"},
    };
    size_t n = lg_expect_usage_errors("stage-01", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
}

/* Run stage-01 with NAME=value for each of `values`: each is a usage error (exit 2),
 * nothing on standard output, and standard error starts with `message` and does not
 * send the reader to --help: the command line is not at fault. */
static void expect_bad_environment(const char *name, const char *const values[],
                                   size_t count, const char *message)
{
    static LgRun run;
    for (size_t i = 0; i < count; i++) {
        char env[64];
        snprintf(env, sizeof env, "%s=%s", name, values[i]);
        lg_run(&run, env, "stage-01", "");
        cr_assert_eq(run.status, 2, "%s: exit %d", env, run.status);
        cr_assert_str_eq(run.out, "", "%s: nothing on standard output", env);
        cr_assert(strncmp(run.err, message, strlen(message)) == 0, "%s: %s", env, run.err);
        cr_assert_null(strstr(run.err, "--help"), "%s: %s", env, run.err);
    }
}

Test(stage01, a_bad_litgrad_fail_alloc_is_a_usage_error)
{
    static const char *const values[] = {"''", "0", "x", "-1", "0x10", "1e3", "'3 '",
                                         "99999999999999999999999"};
    expect_bad_environment("LITGRAD_FAIL_ALLOC", values, sizeof values / sizeof values[0],
                           "stage-01: error: the environment variable LITGRAD_FAIL_ALLOC "
                           "must be unset, or an integer k in [1, ");
    static const char *const walks[] = {"''", "/no/such/directory", "/dev/null"};
    expect_bad_environment("LITGRAD_FAIL_WALK", walks, sizeof walks / sizeof walks[0],
                           "stage-01: error: LITGRAD_FAIL_WALK must name a directory");
    static LgRun run;
    lg_run(&run, "LITGRAD_FAIL_ALLOC=2", "stage-01", "");
    cr_assert_eq(run.status, 1, "the second allocation is the tape's nodes");
    cr_assert_str_eq(run.out, "", "the demonstration's first tape is made before it prints");
    cr_assert_str_eq(run.err, "stage-01: error: out of memory: cannot allocate 4 x 16 bytes "
                     "for tape nodes\n");
}

/* LITGRAD_FAIL_WALK that cannot start is a usage error found before anything runs, not
 * an abort halfway: standard output in a pipe (lg_run's), and a directory in which
 * DIR/children.out is a directory (which no user, root included, can open for writing). */
Test(stage01, a_walk_that_cannot_start_is_a_usage_error)
{
    static LgRun run;
    char dir[] = "/tmp/lg-stage01-walk-XXXXXX", env[128], path[128], args[320];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(env, sizeof env, "LITGRAD_FAIL_WALK=%s", dir);
    lg_run(&run, env, "stage-01", "");
    cr_assert_eq(run.status, 2, "%s", run.err);
    cr_assert_str_eq(run.out, "");
    cr_assert_str_eq(run.err, "stage-01: error: LITGRAD_FAIL_WALK needs standard output and "
                     "error in regular files: standard output: Illegal seek\n");
    snprintf(path, sizeof path, "%s/children.out", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(args, sizeof args, "> %s/all.out 2> %s/all.err; echo $?", dir, dir);
    lg_run(&run, env, "stage-01", args);
    cr_assert_str_eq(run.out, "2\n", "the program's exit status");
    static char out[LG_OUTPUT_MAX], err[LG_OUTPUT_MAX], expected[LG_OUTPUT_MAX];
    snprintf(path, sizeof path, "%s/all.out", dir);
    lg_read_file(path, out, sizeof out);
    cr_assert_str_eq(out, "");
    snprintf(path, sizeof path, "%s/all.err", dir);
    lg_read_file(path, err, sizeof err);
    snprintf(expected, sizeof expected, "stage-01: error: LITGRAD_FAIL_WALK must name a "
             "directory in which its files can be made: %s/children.out: Is a directory\n",
             dir);
    cr_assert_str_eq(err, expected);
    snprintf(path, sizeof path, "%s/children.err", dir);
    cr_assert_neq(access(path, F_OK), 0, "no file made");
}

/* Every test binary walks the program of its own stage (LG_STAGE), so that each
 * program is walked once by `make test`, with the library it was built from, in one run
 * (LITGRAD_FAIL_WALK). */
Test(stage01, every_program_stops_cleanly_at_each_allocation_failure)
{
    char program[16];
    snprintf(program, sizeof program, "stage-%s", LG_STAGE);
    size_t allocations = lg_walk_allocation_failures(program, "");
    cr_log_info("%s: %zu allocations walked\n", program, allocations);
}

/* An output name that holds a FIFO, a directory or a symbolic link is refused before a
 * byte is written, and stays as it was; a regular file is replaced whole. */
Test(stage01, an_output_that_is_not_a_regular_file_is_refused_and_left_alone,
     .init = cr_redirect_stderr) /* cli_fail prints its line */
{
    char dir[] = "/tmp/lg01-out-XXXXXX", path[128], want[256];
    cr_assert_not_null(mkdtemp(dir));
    static const char *const names[3] = {"fifo", "dir", "link"};
    static const char *const kinds[3] = {"a FIFO", "a directory", "a symbolic link"};
    snprintf(path, sizeof path, "%s/fifo", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    snprintf(path, sizeof path, "%s/dir", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/link", dir);
    cr_assert_eq(symlink("/dev/null", path), 0);
    for (int k = 0; k < 3; k++) {
        LgError err = LG_ERROR_INIT;
        Outfile file;
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        snprintf(want, sizeof want, "cannot write %s: it is %s; only a regular file is "
                 "replaced", path, kinds[k]);
        cr_assert_null(outfile_create(&file, dir, names[k], &err));
        cr_assert_eq(err.status, LG_ERR_PATH);
        cr_assert_str_eq(err.message, want);
        cr_assert_eq(cli_fail(CLI_EXIT_RULE, &err), CLI_EXIT_USAGE, "the user named it");
        char temp[160];
        cr_assert_eq(outfile_open_temp(path, temp, sizeof temp, &err), -1);
        cr_assert_str_eq(temp, "");
        cr_assert_eq(lg_count_entries(dir), 3, "no temporary file, nothing replaced");
    }
    struct stat info;
    snprintf(path, sizeof path, "%s/fifo", dir);
    cr_assert(lstat(path, &info) == 0 && S_ISFIFO(info.st_mode), "the FIFO is still there");
    LgError err = LG_ERROR_INIT;
    Outfile file;
    for (int round = 0; round < 2; round++) { /* created, then replaced */
        FILE *out = outfile_create(&file, dir, "data.txt", &err);
        cr_assert_not_null(out, "%s", err.message);
        fprintf(out, "round %d\n", round);
        cr_assert_eq(outfile_commit(&file, &err), LG_OK, "%s", err.message);
    }
    char text[32];
    snprintf(path, sizeof path, "%s/data.txt", dir);
    lg_read_file(path, text, sizeof text);
    cr_assert_str_eq(text, "round 1\n");
    cr_assert_eq(lg_count_entries(dir), 4);
    unlink(path);
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        cr_assert_eq(k == 1 ? rmdir(path) : unlink(path), 0);
    }
    cr_assert_eq(rmdir(dir), 0);
}

/* A directory that takes no new file when the file is created (it vanished, or root
 * passed access() on /proc) is the user's bad path, exit 2 as the up-front check's. */
Test(stage01, a_directory_that_takes_no_file_is_a_bad_path, .init = cr_redirect_stderr)
{
    LgError err = LG_ERROR_INIT;
    char temp[160];
    const char *path = "/tmp/litgrad-no-such-directory/fig.dat";
    cr_assert_eq(outfile_open_temp(path, temp, sizeof temp, &err), -1);
    cr_assert_eq(err.status, LG_ERR_PATH);
    cr_assert_str_eq(err.message, "cannot write /tmp/litgrad-no-such-directory/fig.dat: "
                                  "No such file or directory");
    cr_assert_str_eq(temp, "");
    cr_assert_eq(cli_fail(CLI_EXIT_RULE, &err), CLI_EXIT_USAGE);
}

/* Every program hints at what a word like -1 must be, in one line (cli, for all). */
Test(stage01, every_program_explains_a_number_read_as_an_option)
{
    char program[16];
    snprintf(program, sizeof program, "stage-%s", LG_STAGE);
    static LgRun run;
    static const char *const words[2] = {"-1", "-.5"};
    for (int k = 0; k < 2; k++) {
        lg_run(&run, "", program, words[k]);
        cr_assert_eq(run.status, 2, "%s %s", program, words[k]);
        cr_assert_str_eq(run.out, "");
        cr_assert(strstr(run.err, " (a negative number must follow --); try") != NULL ||
                      strstr(run.err, " (a number must follow its option); try") != NULL,
                  "%s %s: %s", program, words[k], run.err);
    }
}

/* The usage text of every program (cli, for all) puts at least two blanks between an
 * option and its help, which starts in one column (26); an option too long for the
 * column stands alone, and its help starts in that column on the next line. No line
 * passes column 79, so the text reads in an 80-column terminal. */
Test(stage01, every_program_usage_separates_each_option_from_its_help)
{
    char program[16];
    snprintf(program, sizeof program, "stage-%s", LG_STAGE);
    ProgramRun run;
    run_program(&run, program, "--help");
    cr_assert_eq(run.status, 0, "%s: %s", program, run.output);
    size_t options = 0;
    for (const char *line = run.output; *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
        cr_assert_leq(length, 79, "%s: a usage line of %zu columns: %.*s", program, length,
                      (int)length, line);
        size_t blanks = strspn(line, " ");
        if (blanks >= 2 && blanks < length && line[blanks] == '-') {
            options++;
            const char *next = end != NULL ? end + 1 : "";
            const char *gap = strstr(line + blanks, "  ");
            if (gap != NULL && gap < line + length)
                cr_assert(line[24] == ' ' && line[25] == ' ' && line[26] != ' ',
                          "%s: no gap or not in column 26: %.*s", program, (int)length,
                          line);
            else
                cr_assert(strspn(next, " ") == 26 && next[26] != '\n',
                          "%s: no help in column 26 after: %.*s", program, (int)length,
                          line);
        }
        line += length + (end != NULL);
    }
    cr_assert_geq(options, 1, "%s: --help at least", program);
}

/* A bad command line is refused whether --help comes before or after the mistake; the
 * usage is printed only for a command line that is otherwise good (cli, for all). */
Test(stage01, every_program_refuses_a_mistake_wherever_help_stands)
{
    char program[16];
    snprintf(program, sizeof program, "stage-%s", LG_STAGE);
    static LgRun run;
    static const char *const lines[2] = {"--help --bogus", "--bogus --help"};
    char expected[128];
    snprintf(expected, sizeof expected, "%s: error: unknown option '--bogus'; try '%s "
             "--help'\n", program, program);
    for (int k = 0; k < 2; k++) {
        lg_run(&run, "", program, lines[k]);
        cr_assert_eq(run.status, 2, "%s %s", program, lines[k]);
        cr_assert_str_eq(run.out, "", "%s %s: no usage printed", program, lines[k]);
        cr_assert_str_eq(run.err, expected, "%s %s", program, lines[k]);
    }
    lg_run(&run, "", program, "--help --help");
    cr_assert_eq(run.status, 0, "%s: %s", program, run.err);
    cr_assert(strncmp(run.out, "usage: ", 7) == 0, "%s", run.out);
    static const char *const stray[2] = {"--help extra", "extra --help"};
    snprintf(expected, sizeof expected, "%s: error: unexpected argument 'extra' with "
             "--help; try '%s --help'\n", program, program);
    for (int k = 0; k < 2; k++) { /* --help takes no argument: a word beside it is stray */
        lg_run(&run, "", program, stray[k]);
        cr_assert_eq(run.status, 2, "%s %s", program, stray[k]);
        cr_assert_str_eq(run.out, "", "%s %s: no usage printed", program, stray[k]);
        cr_assert_str_eq(run.err, expected, "%s %s", program, stray[k]);
    }
}

/* A stray word of 100,000 characters, or an unknown option of as many, gets one short
 * line: the word is quoted cut, with its length, or named by its length (a path), never
 * printed whole (cli, for all). */
Test(stage01, every_program_quotes_a_long_word_cut_with_its_length)
{
    char program[16];
    snprintf(program, sizeof program, "stage-%s", LG_STAGE);
    static LgRun run;
    static char args[100003];
    for (int k = 0; k < 2; k++) {
        memset(args, 'a', 100002);
        args[100002] = '\0';
        if (k == 1)
            memcpy(args, "--", 2);
        lg_run(&run, "", program, k == 0 ? args + 2 : args);
        cr_assert_eq(run.status, 2, "%s: %.200s", program, run.err);
        cr_assert_str_eq(run.out, "");
        cr_assert_lt(strlen(run.err), 200, "%s: %.300s", program, run.err);
        cr_assert_eq(strchr(run.err, '\n'), run.err + strlen(run.err) - 1, "one line");
        const char *quote = strchr(run.err, '\'');
        if (quote != NULL && quote[1] == (k == 0 ? 'a' : '-'))
            cr_assert(strstr(run.err, "aaaa...aaaa") &&
                          (strstr(run.err, "a' (100000 characters)") ||
                           strstr(run.err, "a' (100002 characters)")),
                      "%s: %s", program, run.err);
    }
}

/* Run make_output(dir) in a child whose SIGTERM has its default action; the child must
 * end by SIGTERM (make_output raises it, or the code under test does) and leave nothing
 * in dir: the handler removed what was recorded, then the signal ended the run. */
static void expect_sigterm_leaves_nothing(void (*make_output)(const char *dir))
{
    char dir[] = "/tmp/lg01-sig-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    pid_t child = fork();
    cr_assert_neq(child, -1);
    if (child == 0) {
        signal(SIGTERM, SIG_DFL);
        make_output(dir);
        _exit(4); /* not reached: the signal ends the child */
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %#x", status);
    cr_assert_eq(lg_count_entries(dir), 0, "something was left in %s", dir);
    cr_assert_eq(rmdir(dir), 0);
}

/* In the child: a temporary file, then SIGTERM before the caller does anything else. */
static void open_temp_then_terminate(const char *dir)
{
    char path[128], temp[160];
    LgError err = LG_ERROR_INIT;
    snprintf(path, sizeof path, "%s/data.txt", dir);
    if (outfile_open_temp(path, temp, sizeof temp, &err) < 0)
        _exit(3);
    raise(SIGTERM);
}

/* The temporary file is recorded for removal from the moment it exists: a signal that
 * ends the run right after outfile_open_temp leaves nothing behind. */
Test(stage01, a_signal_right_after_outfile_open_temp_leaves_no_file)
{
    expect_sigterm_leaves_nothing(open_temp_then_terminate);
}

/* Set in a child of the test below: mkdtemp then sends SIGTERM to its process at once,
 * the moment its directory exists, before its caller can record it. */
static volatile sig_atomic_t signal_after_mkdtemp;

/* The C library's mkdtemp, which this test binary's calls (cli.c's among them) reach
 * through this one; it raises SIGTERM after making the directory if the flag is set. */
char *mkdtemp(char *template)
{
    char *(*made_by)(char *);
    void *found = dlsym(RTLD_NEXT, "mkdtemp");
    memcpy(&made_by, &found, sizeof made_by);
    char *dir = made_by(template);
    if (dir != NULL && signal_after_mkdtemp)
        raise(SIGTERM);
    return dir;
}

/* In the child: a scratch directory whose mkdtemp is answered by SIGTERM at once. */
static void make_temp_dir_under_sigterm(const char *dir)
{
    char made[128];
    snprintf(made, sizeof made, "%s/scratch-XXXXXX", dir);
    signal_after_mkdtemp = 1;
    if (outfile_make_temp_dir(made) == NULL)
        _exit(3);
}

/* A signal that arrives the moment outfile_make_temp_dir's directory exists waits until the
 * directory is recorded: the handler removes it, then the signal ends the run. */
Test(stage01, a_signal_right_after_mkdtemp_leaves_no_directory)
{
    expect_sigterm_leaves_nothing(make_temp_dir_under_sigterm);
}

/* tools/run-tests on a test binary whose log is given: its one line on standard error. */
static void run_tests_on_log(const char *log, char *why, size_t size)
{
    char dir[] = "/tmp/litgrad-run-tests-XXXXXX", path[128], command[512];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/fake", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "#!/bin/sh\ncat <<'LOG'\n%sLOG\nexit 1\n", log);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, 0700), 0);
    snprintf(command, sizeof command, "tools/run-tests 03 %s %s >/dev/null 2>%s/why", path,
             dir, dir);
    cr_assert_neq(system(command), 0);
    snprintf(path, sizeof path, "%s/why", dir);
    lg_read_file(path, why, size);
    snprintf(command, sizeof command, "rm -r %s", dir);
    cr_assert_eq(system(command), 0);
}

/* A failed assertion ends its test before the test's frees, so the suite's leak check
 * aborts the teardown: tools/run-tests says that the stop explains it, not that a test
 * leaked. A teardown that aborts after a test that passed is a leak, and is named so. */
Test(stage01, run_tests_names_a_leak_only_where_no_assertion_failed)
{
    static const char stopped[] =
        "[----] tests/test_stage_03_autodiff.c:191: Assertion Failed\n"
        "[FAIL] stage03::backward_twice: (0.00s)\n"
        "LEAK: 2 block(s) of litgrad's allocator still live\n"
        "[----] Warning! The test `stage03::backward_twice` crashed during its setup or "
        "teardown.\n"
        "[====] Synthesis: Tested: 1 | Passing: 0 | Failing: 1 | Crashing: 0 \n";
    static const char leaked[] =
        "LEAK: 2 block(s) of litgrad's allocator still live\n"
        "[----] Warning! The test `stage03::backward_twice` crashed during its setup or "
        "teardown.\n"
        "[====] Synthesis: Tested: 1 | Passing: 1 | Failing: 0 | Crashing: 0 \n";
    char why[1024];
    run_tests_on_log(stopped, why, sizeof why);
    cr_assert_null(strstr(why, "leaked"), "%s", why);
    cr_assert_not_null(strstr(why, "1 failed test(s) stopped at the failed assertion"), "%s",
                       why);
    run_tests_on_log(leaked, why, sizeof why);
    cr_assert_not_null(strstr(why, "a test leaked or crashed in its teardown"), "%s", why);
}
