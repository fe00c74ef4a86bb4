/* check.h: the failure macros of the provider's C test programs (fabric/tests/fi_*_check.c).
 * CHECK(cond, fmt, ...) prints "FAIL file:line: message" and exits 1 when cond is false;
 * OK(call) checks that a libfabric call returned 0 and names its error otherwise.
 */
#ifndef SOFTRNIC_FABRIC_TESTS_CHECK_H
#define SOFTRNIC_FABRIC_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <rdma/fi_errno.h>

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                        \
			printf(__VA_ARGS__);                                               \
			printf("\n");                                                      \
			exit(1);                                                           \
		}                                                                          \
	} while (0)
#define OK(call)                                                                           \
	do {                                                                               \
		long _r = (long)(call);                                                    \
		CHECK(_r == 0, "%s = %ld (%s)", #call, _r, fi_strerror((int)-_r));         \
	} while (0)

#endif
