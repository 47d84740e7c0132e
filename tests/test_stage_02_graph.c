/* Stage 02: operations build a graph; forward rules, edges, topological order, DOT. */
#include "litgrad_test.h"

#include <math.h>
#include <unistd.h> /* rmdir */
#include <stdint.h>

#include "graph.h"
#include "value.h"

LG_SUITE(stage02);

/* Run `program --figure-data DIR` on a fresh directory, check that it succeeds with
 * nothing on standard output, and return the text of DIR/file (the caller frees it);
 * the file and the directory are removed. */
static char *figure_text(const char *program, const char *file)
{
    char dir[] = "/tmp/litgrad-figure-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char args[64], path[96];
    snprintf(args, sizeof args, "--figure-data %s", dir);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    ProgramRun run;
    run_program_stdout(&run, program, args);
    cr_assert_eq(run.status, 0, "%s %s", program, args);
    cr_assert_str_eq(run.output, "", "a figure run prints nothing on standard output");
    char *text = lg_read_text(path);
    remove(path);
    cr_assert_eq(rmdir(dir), 0, "%s holds no other file (no temporary one left)", dir);
    return text;
}

static Tape *planned_tape(size_t nodes)
{
    LgError err = LG_ERROR_INIT;
    Tape *tape = tape_new(nodes, &err);
    cr_assert_not_null(tape, "%s", err.message);
    cr_assert_eq(tape_require(tape, nodes, &err), LG_OK, "%s", err.message);
    return tape;
}

/* Equal as doubles, or both NaN (the edges of the text produce NaN on purpose). */
static int same(double x, double y)
{
    return x == y || (isnan(x) && isnan(y));
}

/* The text says: the forward rules are C's IEEE 754 operations and math library, so each
 * node's data equals the C expression exactly (compared with ==, not a tolerance). */
Test(stage02, every_operation_computes_its_ieee_rule_exactly)
{
    Tape *t = planned_tape(64);
    static const double as[] = {3.0, -4.0, 0.5, 2.75, 1e-3};
    static const double bs[] = {2.0, 5.0, -0.25, 3.0, 7.0};
    for (size_t i = 0; i < sizeof as / sizeof as[0]; i++) {
        tape_reset(t);
        double x = as[i], y = bs[i];
        Value *a = value_new(t, x), *b = value_new(t, y);
        cr_assert(same(value_add(t, a, b)->data, x + y));
        cr_assert(same(value_sub(t, a, b)->data, x - y));
        cr_assert(same(value_mul(t, a, b)->data, x * y));
        cr_assert(same(value_div(t, a, b)->data, x / y));
        cr_assert(same(value_neg(t, a)->data, -x));
        cr_assert(same(value_pow(t, a, 3.0)->data, pow(x, 3.0)));
        cr_assert(same(value_pow(t, b, -0.5)->data, pow(y, -0.5)));
        cr_assert(same(value_exp(t, a)->data, exp(x)));
        cr_assert(same(value_log(t, b)->data, log(y)));
        cr_assert(same(value_tanh(t, a)->data, tanh(x)));
        cr_assert(same(value_relu(t, a)->data, x > 0 ? x : 0.0));
        cr_assert(same(value_add_number(t, a, 1.5)->data, x + 1.5));
        cr_assert(same(value_number_add(t, 1.5, a)->data, 1.5 + x));
        cr_assert(same(value_sub_number(t, a, 1.5)->data, x - 1.5));
        cr_assert(same(value_number_sub(t, 1.5, a)->data, 1.5 - x));
        cr_assert(same(value_mul_number(t, a, -2.5)->data, x * -2.5));
        cr_assert(same(value_number_mul(t, -2.5, a)->data, -2.5 * x));
        cr_assert(same(value_div_number(t, a, 3.0)->data, x / 3.0));
        cr_assert(same(value_number_div(t, 10.0, a)->data, 10.0 / x));
    }
    tape_free(&t);
}

Test(stage02, a_node_records_its_op_ordered_parents_and_constant)
{
    Tape *t = planned_tape(9);
    Value *a = value_new(t, 3.0), *b = value_new(t, 2.0);
    cr_assert_eq(a->op, VALUE_LEAF);
    cr_assert_null(a->parents[0]);
    cr_assert_null(a->parents[1]);
    Value *d = value_sub(t, b, a);
    cr_assert_eq(d->op, VALUE_SUB);
    cr_assert_eq(d->parents[0], b, "the first operand is parents[0]");
    cr_assert_eq(d->parents[1], a);
    cr_assert_eq(d->data, -1.0);
    Value *p = value_pow(t, a, 3.0);
    cr_assert_eq(p->op, VALUE_POW);
    cr_assert_eq(p->parents[0], a);
    cr_assert_null(p->parents[1]);
    cr_assert_eq(p->constant, 3.0);
    cr_assert_eq(p->data, 27.0);
    Value *q = value_number_div(t, 10.0, a);
    cr_assert_eq(q->op, VALUE_NUMBER_DIV);
    cr_assert_eq(q->constant, 10.0);
    cr_assert_eq(value_number_add(t, 7.0, a)->op, VALUE_ADD_NUMBER,
                 "c + a and a + c are the same node");
    cr_assert_eq(value_number_mul(t, 7.0, a)->op, VALUE_MUL_NUMBER);
    cr_assert_eq(value_number_sub(t, 7.0, a)->op, VALUE_NUMBER_SUB);
    cr_assert_eq(value_sub_number(t, a, 7.0)->op, VALUE_SUB_NUMBER);
    cr_assert_eq(tape_count(t), 9, "one node per operation");
    tape_free(&t);
}

Test(stage02, op_descriptions_give_operands_and_forms)
{
    cr_assert_eq(value_op_info(VALUE_LEAF).operands, 0);
    cr_assert_eq(value_op_info(VALUE_MUL).operands, 2);
    cr_assert_str_eq(value_op_info(VALUE_MUL).form, "A * B");
    cr_assert_eq(value_op_info(VALUE_TANH).operands, 1);
    cr_assert_str_eq(value_op_info(VALUE_NUMBER_SUB).form, "C - A");
    cr_assert_str_eq(value_op_info(VALUE_POW).name, "pow");
}

/* micrograd's second check, as a graph: every parent on the tape precedes its node. */
Test(stage02, creation_order_is_a_topological_order)
{
    Tape *t = planned_tape(64);
    Value *a = value_new(t, -4.0), *b = value_new(t, 2.0);
    Value *c = value_add(t, a, b);
    Value *ab = value_mul(t, a, b);
    Value *b3 = value_pow(t, b, 3.0);
    Value *d = value_add(t, ab, b3);
    Value *r = value_add(t, c, c);
    r = value_add_number(t, r, 1.0);
    c = value_add(t, r, c);
    r = value_add(t, b, a);
    r = value_relu(t, r);
    d = value_add(t, d, r);
    Value *e = value_sub(t, c, d);
    Value *f = value_pow(t, e, 2.0);
    value_number_div(t, 10.0, f);
    for (size_t i = 0; i < tape_count(t); i++) {
        Value *v = tape_at(t, i);
        for (int k = 0; k < 2; k++)
            if (v->parents[k] != NULL)
                cr_assert_lt(tape_position(t, v->parents[k]), i, "node %zu parent %d", i, k);
    }
    tape_free(&t);
}

Test(stage02, tape_holds_only_written_values_of_that_tape)
{
    Tape *t = planned_tape(4), *other = planned_tape(1);
    Value *a = value_new(t, 1.0);
    Value *x = value_new(other, 2.0);
    cr_assert(tape_holds(t, a));
    cr_assert_eq(tape_position(t, a), 0);
    cr_assert_not(tape_holds(t, x), "a value on another tape");
    cr_assert_not(tape_holds(t, a + 1), "a slot not yet written");
    cr_assert_not(tape_holds(t, (const Value *)((const char *)a + 8)), "inside a value");
    cr_assert_not(tape_holds(t, NULL));
    tape_free(&t);
    tape_free(&other);
}

/* Parameters on one tape, the result on another: the result records pointers to them. */
Test(stage02, parents_may_live_on_another_tape)
{
    Tape *params = planned_tape(2), *graph = planned_tape(2);
    Value *w = value_new(params, 2.0);
    Value *x = value_new(graph, 3.0);
    Value *y = value_mul(graph, x, w);
    cr_assert(tape_holds(graph, y));
    cr_assert_eq(y->parents[1], w);
    cr_assert_eq(y->data, 6.0);
    cr_assert_eq(tape_count(params), 1, "the parameter tape is only read");
    tape_free(&params);
    tape_free(&graph);
}

Test(stage02, ieee_edges_are_written_as_the_text_states)
{
    Tape *t = planned_tape(32);
    Value *one = value_new(t, 1.0), *zero = value_new(t, 0.0), *m1 = value_new(t, -1.0);
    Value *mzero = value_neg(t, zero);
    cr_assert(signbit(mzero->data) && mzero->data == 0.0, "-0 is a negative zero");
    cr_assert_eq(value_div(t, one, zero)->data, INFINITY);
    cr_assert_eq(value_div(t, m1, zero)->data, -INFINITY);
    cr_assert_eq(value_div(t, one, mzero)->data, -INFINITY, "the sign of zero counts");
    cr_assert(isnan(value_div(t, zero, zero)->data));
    cr_assert_eq(value_log(t, zero)->data, -INFINITY);
    cr_assert_eq(value_log(t, mzero)->data, -INFINITY);
    cr_assert(isnan(value_log(t, m1)->data));
    cr_assert(isfinite(value_exp(t, value_new(t, 709.0))->data));
    cr_assert_eq(value_exp(t, value_new(t, 710.0))->data, INFINITY);
    cr_assert_eq(value_exp(t, value_new(t, -746.0))->data, 0.0);
    cr_assert(isnan(value_pow(t, value_new(t, -8.0), 1.0 / 3.0)->data));
    cr_assert_eq(value_pow(t, value_new(t, -2.0), 3.0)->data, -8.0, "integer exponent");
    cr_assert_eq(value_pow(t, zero, -1.0)->data, INFINITY);
    cr_assert(isnan(value_add(t, one, value_div(t, zero, zero))->data), "NaN in, NaN out");
    LgError err = LG_ERROR_INIT;
    cr_assert_eq(tape_check_finite(t, &err), LG_ERR_NONFINITE);
    cr_assert_str_eq(err.message, "non-finite data at tape position 4: inf",
                     "the first non-finite node is 1 / 0, after four leaves and -0");
    tape_free(&t);
}

Test(stage02, tanh_saturates_to_exactly_one_and_is_never_nan)
{
    Tape *t = planned_tape(2);
    for (double x = -5000.0; x <= 5000.0; x += 0.25) {
        tape_reset(t);
        double y = value_tanh(t, value_new(t, x))->data;
        cr_assert_not(isnan(y), "tanh(%g) is NaN", x);
        cr_assert(y >= -1.0 && y <= 1.0, "tanh(%g) = %g", x, y);
        if (fabs(x) >= 19.25)
            cr_assert_eq(y, x > 0 ? 1.0 : -1.0, "tanh(%g) = %.17g is exactly +-1", x, y);
    }
    double textbook = (exp(2000.0) - 1.0) / (exp(2000.0) + 1.0);
    cr_assert(isnan(textbook), "the formula the text avoids gives NaN at 1000");
    tape_free(&t);
}

Test(stage02, relu_keeps_nan_and_turns_minus_zero_into_plus_zero)
{
    Tape *t = planned_tape(9);
    Value *zero = value_new(t, 0.0);
    Value *r = value_relu(t, value_neg(t, zero));
    cr_assert(r->data == 0.0 && !signbit(r->data), "relu(-0) = +0");
    cr_assert(isnan(value_relu(t, value_div(t, zero, zero))->data), "relu(NaN) = NaN");
    cr_assert_eq(value_relu(t, value_new(t, -3.0))->data, 0.0);
    cr_assert_eq(value_relu(t, value_new(t, 1e-300))->data, 1e-300);
    tape_free(&t);
}

/* Replaying the tape recomputes every op node from the leaves: bit for bit what
 * building it gave, and the new numbers after a leaf changes. */
Test(stage02, tape_forward_replays_the_recorded_graph)
{
    Tape *t = planned_tape(10);
    Value *x0 = value_new(t, 3.0), *w0 = value_new(t, 2.0);
    Value *x1 = value_new(t, -4.0), *w1 = value_new(t, 5.0), *b = value_new(t, 14.5);
    Value *p0 = value_mul(t, x0, w0);
    Value *p1 = value_mul(t, x1, w1);
    Value *s = value_add(t, p0, p1);
    Value *n = value_add(t, s, b);
    Value *o = value_tanh(t, n);
    cr_assert_eq(n->data, 0.5);
    cr_assert_eq(o->data, tanh(0.5));
    tape_forward(t);
    cr_assert_eq(o->data, tanh(0.5), "a replay changes nothing");
    x0->data = 3.25;
    tape_forward(t);
    cr_assert_eq(n->data, 1.0);
    cr_assert_eq(o->data, tanh(1.0));
    cr_assert_eq(x0->data, 3.25, "leaves are not touched");
    tape_free(&t);
}

Test(stage02, a_reused_slot_forgets_its_parents)
{
    Tape *t = planned_tape(3);
    Value *a = value_new(t, 1.0);
    value_pow(t, a, 2.0);
    tape_reset(t);
    value_new(t, 5.0);
    Value *v = value_new(t, 6.0);
    cr_assert_eq(v->op, VALUE_LEAF);
    cr_assert_null(v->parents[0]);
    cr_assert_eq(v->constant, 0.0);
    tape_free(&t);
}

Test(stage02, an_operation_on_a_full_tape_is_a_programmer_error, .signal = SIGABRT,
     .init = cr_redirect_stderr)
{
    Tape *t = planned_tape(1);
    Value *a = value_new(t, 1.0);
    value_exp(t, a); /* no room was required: the assertion stops the program */
}

Test(stage02, a_missing_operand_is_a_programmer_error, .signal = SIGABRT,
     .init = cr_redirect_stderr)
{
    Tape *t = planned_tape(2);
    Value *a = value_new(t, 1.0);
    value_op(t, VALUE_MUL, a, NULL, 0.0);
}

/* A Value * kept across tape_reset points at a forgotten slot; here the slot the next
 * node goes to, so the node would be its own parent. value_op refuses it. */
Test(stage02, a_parent_forgotten_by_tape_reset_is_a_programmer_error, .signal = SIGABRT,
     .init = cr_redirect_stderr)
{
    Tape *t = planned_tape(3);
    value_new(t, 1.0);
    Value *stale = value_new(t, 2.0); /* position 1 */
    tape_reset(t);
    Value *x = value_new(t, 3.0);     /* position 0; the next node is written at 1 */
    value_add(t, x, stale);
}

/* What the assertion lets through: parents on another tape, and a pointer to a slot that
 * has been written again (it names the new node, which precedes its child). */
Test(stage02, parents_elsewhere_or_rewritten_are_accepted)
{
    Tape *t = planned_tape(3), *other = planned_tape(1);
    Value *w = value_new(other, 2.0);
    Value *old = value_new(t, 1.0);
    tape_reset(t);
    Value *x = value_new(t, 3.0);
    cr_assert_eq(old, x, "the same slot");
    Value *y = value_mul(t, old, w);
    cr_assert_eq(y->data, 6.0);
    cr_assert_eq(tape_position(t, y), 1);
    tape_free(&t);
    tape_free(&other);
}

Test(stage02, nodes_are_described_by_their_forms)
{
    Tape *t = planned_tape(8);
    Value *a = value_new(t, 1.0), *b = value_new(t, 2.0);
    value_sub(t, b, a);
    value_number_div(t, 10.0, a);
    value_pow(t, b, 0.5);
    static const char *const names[] = {"a", NULL, "d", "q", "p"};
    char out[64];
    graph_describe_node(t, 0, names, out, sizeof out);
    cr_assert_str_eq(out, "leaf");
    graph_describe_node(t, 2, names, out, sizeof out);
    cr_assert_str_eq(out, "v1 - a", "an unnamed parent is v<position>");
    graph_describe_node(t, 3, NULL, out, sizeof out);
    cr_assert_str_eq(out, "10 / v0");
    graph_describe_node(t, 4, names, out, sizeof out);
    cr_assert_str_eq(out, "v1^0.5");
    graph_describe_node(t, 2, names, out, 4);
    cr_assert_str_eq(out, "v1 ", "cut to the buffer, terminated");
    tape_free(&t);
}

Test(stage02, dot_export_is_exact_and_escapes_record_characters)
{
    Tape *t = planned_tape(3), *params = planned_tape(1);
    Value *x = value_new(t, 3.0), *w = value_new(params, 2.0);
    Value *y = value_mul(t, x, w);
    value_tanh(t, y);
    static const char *const names[] = {"x", "y|z", NULL};
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    graph_write_dot(out, t, names);
    fclose(out);
    char expected[1024];
    snprintf(expected, sizeof expected,
             "digraph litgrad {\n  rankdir=LR;\n"
             "  node [shape=record, fontname=\"Helvetica\", fontsize=10];\n"
             "  v0 [label=\"x | data 3 | grad 0\"];\n"
             "  v1 [label=\"y\\|z = x * other tape | data 6 | grad 0\"];\n"
             "  v0 -> v1;\n"
             "  \"p%p\" [label=\"other tape | data 2 | grad 0\"];\n"
             "  \"p%p\" -> v1;\n"
             "  v2 [label=\"v2 = tanh(y\\|z) | data %g | grad 0\"];\n"
             "  v1 -> v2;\n"
             "}\n",
             (void *)w, (void *)w, tanh(6.0));
    cr_assert_str_eq(text, expected);
    free(text);
    tape_free(&t);
    tape_free(&params);
}

Test(stage02, program_lists_the_neuron_and_the_edges)
{
    ProgramRun run;
    run_program(&run, "stage-02", "");
    cr_assert_eq(run.status, 0, "%s", run.output);
    cr_assert(strstr(run.output, "tape: 10 of 10 nodes used, 48 bytes per Value"), "%s",
              run.output);
    cr_assert(strstr(run.output, "    8  n     s + b             0.5\n"), "%s", run.output);
    cr_assert(strstr(run.output, "    9  o     tanh(n)           0.46211715726000974\n"));
    cr_assert(strstr(run.output, "(a topological order): yes"));
    cr_assert(strstr(run.output, "replayed with x0 = 3.25: n = 1, o = 0.76159415595576485"));
    cr_assert(strstr(run.output, "  tanh(1000)                   = 1\n"), "%s", run.output);
    cr_assert(strstr(run.output, "  textbook tanh(1000)          = nan\n"));
    cr_assert(strstr(run.output, "non-finite data at tape position 4: inf"), "%s",
              run.output);
    lg_expect_short_lines(run.output);
}

Test(stage02, program_help_and_dot_output)
{
    ProgramRun run;
    run_program(&run, "stage-02", "--help");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "usage: stage-02 [--dot] [--figure-data DIR]"), "%s",
              run.output);
    run_program(&run, "stage-02", "--dot");
    cr_assert_eq(run.status, 0);
    cr_assert(strstr(run.output, "  v9 [label=\"o = tanh(n) | data 0.462117 | grad 0\"];\n"
                                 "  v8 -> v9;\n}\n"),
              "%s", run.output);
}

Test(stage02, figure_data_writes_the_neuron_dot)
{
    char *dot = figure_text("stage-02", "fig-02-neuron.dot");
    cr_assert(strstr(dot, "  v5 [label=\"p0 = x0 * w0 | data 6 | grad 0\"];\n"
                          "  v0 -> v5;\n  v1 -> v5;\n"), "%s", dot);
    cr_assert(strstr(dot, "  v9 [label=\"o = tanh(n) | data 0.462117 | grad 0\"];\n"), "%s",
              dot);
    free(dot);
}

/* Usage errors and unusable figure directories: exit 2, one line naming the option or
 * the directory, and nothing at all on standard output. */
Test(stage02, program_refuses_bad_command_lines_alike)
{
    static const LgBadLine lines[] = {
        {"--figure-data", "option '--figure-data' needs a value"},
        {"--figure-data=", "--figure-data must name a directory: got ''"},
        {"--figure-data ''", "--figure-data must name a directory: got ''"},
        {"--figure-data {LONG}", "--figure-data: a directory name has 5000 bytes"},
        {"--figure-data /nonexistent/dir", "cannot use /nonexistent/dir: No such file"},
        {"--figure-data={FILE}", "is not a directory"},
        {"--figure-data {FIFO}", "is not a directory"},
        {"--figure-data /dev/null", "/dev/null is not a directory"},
        {"--figure-data /etc/passwd/x", "cannot use /etc/passwd/x: Not a directory"},
        {"--fig /tmp", "option '--fig' is abbreviated: write '--figure-data'"},
        {"--fig=/tmp", "option '--fig' is abbreviated: write '--figure-data'"},
        {"--d", "option '--d' is abbreviated: write '--dot'"},
        {"--figure-data /tmp --figure-data /tmp", "option '--figure-data' is given twice"},
        {"--figure-data=/tmp --figure-data=/tmp", "option '--figure-data' is given twice"},
        {"--dot --dot", "option '--dot' is given twice"},
        {"--dot --figure-data /tmp", "options '--dot' and '--figure-data' exclude each other"},
        {"--figure-data /tmp --dot", "options '--dot' and '--figure-data' exclude each other"},
        {"--dot=1", "option '--dot' takes no value"},
        {"--dot=", "option '--dot' takes no value"},
        {"extra", "unexpected argument 'extra'"},
        {"--dot extra", "unexpected argument 'extra'"},
        {"''", "unexpected argument ''"},
        {"{DIR}", "unexpected argument '/tmp'"},
        {"{FIFO}", "unexpected argument"},
        {"/dev/null", "unexpected argument '/dev/null'"},
        {"-d", "unknown option '-d'"},
        {"-1", "unknown option '-1' (a number must follow its option)"},
        {"--dots", "unknown option '--dots'"},
    };
    size_t n = lg_expect_usage_errors("stage-02", lines, sizeof lines / sizeof lines[0]);
    cr_assert_geq(n, 25);
}

/* A FIFO or a symbolic link where the figure goes is refused when the command line is
 * read, exit 2, and left as it was: no reader of it gets the figure, nothing replaces it,
 * no temporary file stays. */
Test(stage02, a_fifo_at_the_figure_name_is_refused_and_left_alone)
{
    static const char *const names[] = {"fig-02-neuron.dot", NULL};
    cr_assert_eq(lg_expect_outputs_refused("stage-02", "--figure-data", names, ""), 2);
}

/* value_dot writes the nodes that value_mul and value_add write, in the same order, with
 * the same parents (by position) and the same numbers, bit for bit; with and without c. */
Test(stage02, value_dot_writes_the_nodes_of_the_loop_it_replaces)
{
    enum { N = 5 };
    Tape *inputs = planned_tape(2 * N + 1);
    Value *a[N], *b[N];
    for (int i = 0; i < N; i++) {
        a[i] = value_new(inputs, 0.1 * (i + 1) - 0.35);
        b[i] = value_new(inputs, 1.0 / (i + 3));
    }
    Value *c = value_new(inputs, 0.7);
    for (int with_c = 0; with_c < 2; with_c++) {
        Tape *loop = planned_tape(2 * N), *dot = planned_tape(2 * N);
        Value *sum = value_mul(loop, a[0], b[0]);
        for (int i = 1; i < N; i++) {
            Value *product = value_mul(loop, a[i], b[i]);
            sum = value_add(loop, sum, product);
        }
        if (with_c)
            sum = value_add(loop, sum, c);
        Value *got = value_dot(dot, a, b, N, with_c ? c : NULL);
        cr_assert_eq(tape_count(dot), (size_t)(2 * N - 1 + with_c));
        cr_assert_eq(tape_count(dot), tape_count(loop));
        cr_assert_eq(tape_position(dot, got), tape_position(loop, sum), "the sum is the last node");
        for (size_t k = 0; k < tape_count(loop); k++) {
            const Value *x = tape_at(loop, k), *y = tape_at(dot, k);
            cr_assert_eq(x->op, y->op, "node %zu", k);
            cr_assert_eq(memcmp(&x->data, &y->data, sizeof x->data), 0, "node %zu", k);
            cr_assert_eq(x->constant, y->constant);
            for (int p = 0; p < 2; p++) {
                const Value *px = x->parents[p], *py = y->parents[p];
                if (tape_holds(loop, px))
                    cr_assert_eq(tape_position(loop, px), tape_position(dot, py), "node %zu", k);
                else
                    cr_assert_eq(px, py, "node %zu, parent %d", k, p);
            }
        }
        tape_free(&loop);
        tape_free(&dot);
    }
    tape_free(&inputs);
}

/* Its checks are value_op's: a stale parent (kept across tape_reset) and a tape without
 * room for every node stop the program before a node is written. */
Test(stage02, value_dot_refuses_a_parent_forgotten_by_tape_reset, .signal = SIGABRT,
     .init = cr_redirect_stderr)
{
    Tape *t = planned_tape(8);
    Value *x = value_new(t, 1.0);
    Value *stale = value_new(t, 2.0);
    tape_reset(t);
    x = value_new(t, 3.0);
    Value *a[2] = {x, x}, *b[2] = {x, stale};
    value_dot(t, a, b, 2, NULL);
}

Test(stage02, value_dot_on_a_tape_without_room_is_a_programmer_error, .signal = SIGABRT,
     .init = cr_redirect_stderr)
{
    Tape *t = planned_tape(3);
    Value *x = value_new(t, 1.0);
    Value *a[2] = {x, x};
    value_dot(t, a, a, 2, NULL); /* 3 nodes, 2 free */
}
