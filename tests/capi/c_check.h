/* The C ABI tests' checks (c_abi_test.c, c_segment_test.c): CHECK prints the
 * failing line, what was checked and the library's last error, and counts. */
#ifndef STOKE_TESTS_CAPI_C_CHECK_H
#define STOKE_TESTS_CAPI_C_CHECK_H

#include <stdio.h>
#include <string.h>

#include "stoke/stoke.h"

static int failures = 0;

#define CHECK(cond, what)                                                                \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      printf("FAIL line %d: %s (last error: %s)\n", __LINE__, what, stoke_last_error()); \
      ++failures;                                                                        \
    }                                                                                    \
  } while (0)

static int contains(const char* text, const char* part) {
  return strstr(text, part) != NULL;
}

#endif
