/* litgrad_test_model.h -- the fixture that the tests of the planned models (Stage 07 on)
 * share: the assertion that none of the three counters of "nothing happened" moved.
 * The counters are Stage 07's own (mlpdemo.h: Tally, mlpdemo_tally_now, mlpdemo_tally_since), which the
 * demonstration prints. Include after litgrad_test.h. */
#ifndef LITGRAD_TEST_MODEL_H
#define LITGRAD_TEST_MODEL_H

#include "mlpdemo.h"

/* A refused request did no work: no initializer call, no node, no block left behind. */
static inline void assert_nothing_since(Tally before, const char *what)
{
    Tally done = mlpdemo_tally_since(before);
    cr_assert_eq(done.calls, 0, "%s: %zu initializer calls", what, done.calls);
    cr_assert_eq(done.nodes, 0, "%s: %zu nodes written", what, done.nodes);
    cr_assert_eq(done.blocks, 0, "%s: live blocks changed", what);
}

#endif
