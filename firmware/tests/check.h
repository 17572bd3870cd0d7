/* The unit tests' one assertion: it counts checks and failures, reports a failure and goes on;
 * main prints "<checks> checks, <failures> failures", which the pytest wrappers read. */
#ifndef NUMAVIA_TEST_CHECK_H
#define NUMAVIA_TEST_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                                   \
        }                                                                                                              \
    } while (0)

#endif
