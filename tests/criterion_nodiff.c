/* criterion_nodiff.c -- Criterion's diff of two texts, without libgit2.
 *
 * Criterion forks and re-executes the test binary for every test (BoxFort's sandbox), so
 * whatever the binary loads and initialises at start is paid once per test: make test runs
 * about two thousand of them. Debian's libcriterion.so pulls in libgit2 and with it about
 * fifteen more shared libraries (mbedTLS, libssh2, OpenSSL's libcrypto, Kerberos, PCRE2),
 * and calls git_libgit2_init() in every test process, which reads and parses the system's
 * certificate bundle: measured, about half of the 50 ms that each test cost before a line
 * of it ran. Criterion uses libgit2 for one thing, the diff it draws under a failed
 * new-style equality assertion on strings (cr_assert(eq(str, ...))); litgrad's tests use
 * the classic assertions (cr_assert_str_eq prints both texts), which never draw it.
 *
 * So the Makefile links Criterion statically (libcriterion.a, with BoxFort, nanopb and
 * libffi) and this file in front of it: these are the three functions of Criterion's own
 * build without diffs (its meson option diffs=disabled, src/string/diff-stubs.c), and the
 * linker then takes them instead of the archive's libgit2 version, which is never linked.
 * Where Criterion would have drawn a diff, this prints both texts whole, the expected one
 * with '-' and the actual one with '+' before each line. The declarations are Criterion
 * 2.4's (src/string/diff.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cri_diff_buffer {
    char *ptr;
    size_t size;
};

void cri_diff_init(void);
void cri_diff_fini(void);
int cri_diff_buffer_to_buffer(const struct cri_diff_buffer *b1,
                              const struct cri_diff_buffer *b2, struct cri_diff_buffer *out);

void cri_diff_init(void)
{
}

void cri_diff_fini(void)
{
}

/* Append buffer b (its lines, each prefixed by mark) to out at *used; 0, or -1 if out of
 * memory. */
static int append_lines(struct cri_diff_buffer *out, size_t *used, char mark,
                        const struct cri_diff_buffer *b)
{
    size_t length = b->size;
    while (length > 0 && (b->ptr[length - 1] == '\0' || b->ptr[length - 1] == '\n'))
        length--;
    size_t lines = 1;
    for (size_t i = 0; i < length; i++)
        lines += b->ptr[i] == '\n';
    size_t need = *used + length + 2 * lines + 1;
    if (need > out->size) {
        char *grown = realloc(out->ptr, need);
        if (grown == NULL)
            return -1;
        out->ptr = grown;
        out->size = need;
    }
    char *to = out->ptr + *used;
    *to++ = mark;
    for (size_t i = 0; i < length; i++) {
        *to++ = b->ptr[i];
        if (b->ptr[i] == '\n')
            *to++ = mark;
    }
    *to++ = '\n';
    *to = '\0';
    *used = (size_t)(to - out->ptr);
    return 0;
}

int cri_diff_buffer_to_buffer(const struct cri_diff_buffer *b1,
                              const struct cri_diff_buffer *b2, struct cri_diff_buffer *out)
{
    size_t used = 0;
    out->ptr = NULL;
    out->size = 0;
    if (append_lines(out, &used, '-', b1) < 0 || append_lines(out, &used, '+', b2) < 0) {
        free(out->ptr);
        out->ptr = NULL;
        out->size = 0;
        return -1;
    }
    return 0;
}
