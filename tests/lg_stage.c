/* lg_stage.c -- the stage whose code a test binary links ("07"), for the tests that run
 * their own stage's program (LG_STAGE in litgrad_test.h). Compiled once per stage with
 * -DLG_STAGE by the Makefile; kept out of the test files so that a test file's object is
 * the same for every stage whose headers it sees unchanged, and is compiled once. */
extern const char lg_stage[];
const char lg_stage[] = LG_STAGE;
