/* litgrad_test_model.h -- the fixture that the tests of the planned models (Stage 07 on)
 * share: the three counters of "nothing happened" and the assertion that none of them
 * moved. Include after litgrad_test.h and after init.h, mem.h and value.h. */
#ifndef LITGRAD_TEST_MODEL_H
#define LITGRAD_TEST_MODEL_H

/* Initializer calls, nodes written on any tape, live blocks. */
typedef struct Work {
    size_t calls, nodes, blocks;
} Work;

static inline Work work_now(void)
{
    return (Work){init_call_count(), value_nodes_written, mem_live_blocks()};
}

/* A refused request did no work: no initializer call, no node, no block left behind. */
static inline void assert_nothing_since(Work before, const char *what)
{
    Work now = work_now();
    cr_assert_eq(now.calls, before.calls, "%s: %zu initializer calls", what,
                 now.calls - before.calls);
    cr_assert_eq(now.nodes, before.nodes, "%s: %zu nodes written", what,
                 now.nodes - before.nodes);
    cr_assert_eq(now.blocks, before.blocks, "%s: live blocks changed", what);
}

#endif
