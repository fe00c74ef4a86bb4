/* fi_atomic_check: the softrnic provider's FI_ATOMIC (RFC 7306 Fetch and Add and Compare
 * and Swap) through libfabric's API, in one process: an endpoint pair over loopback, then
 * fi_fetch_atomic (FI_SUM on FI_UINT64 and FI_INT64), fi_compare_atomic (FI_CSWAP, one
 * that swaps and one whose compare fails), fi_atomic and fi_inject_atomic (FI_SUM, the
 * original value into the provider's scratch word), each result and the target memory
 * checked; fi_atomicvalid / fi_fetch_atomicvalid / fi_compare_atomicvalid and
 * fi_query_atomic answering what is supported; misuse (other ops and datatypes, a
 * misaligned target, count 2, a result without descriptor) refused with libfabric codes;
 * and an atomic on a region registered without FI_REMOTE_WRITE failing at the target.
 * Prints one line per check; exits 1 on the first failure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "pair.h"

/* Waits for one completion; a completion error is returned as its negative errno. */
static int cq_wait(struct fid_cq *cq, struct fi_cq_data_entry *e)
{
	for (int i = 0; i < 100000; i++) {
		ssize_t r = fi_cq_sread(cq, e, 1, NULL, 10);
		if (r == 1)
			return 0;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			CHECK(fi_cq_readerr(cq, &err, 0) == 1, "fi_cq_readerr");
			e->op_context = err.op_context;
			e->flags = err.flags;
			return -err.err;
		}
		CHECK(r == -FI_EAGAIN, "fi_cq_sread = %zd", r);
	}
	CHECK(0, "no completion");
	return 0;
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	size_t count = 0;

	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_ATOMIC;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("softrnic");
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info));
	CHECK(info->caps & FI_ATOMIC, "FI_ATOMIC in the caps");
	CHECK(info->tx_attr->caps & FI_ATOMIC, "FI_ATOMIC in the tx caps");
	pair_connect(info, 256);
	printf("connect: ok\n");

	/* What is valid: exactly FI_SUM and FI_CSWAP on 64-bit integers, one at a time. */
	{
		struct fi_atomic_attr aa = { 0 };
		OK(fi_atomicvalid(cep, FI_UINT64, FI_SUM, &count));
		CHECK(count == 1, "atomicvalid count %zu", count);
		OK(fi_fetch_atomicvalid(cep, FI_INT64, FI_SUM, &count));
		CHECK(count == 1, "fetch_atomicvalid count %zu", count);
		OK(fi_compare_atomicvalid(cep, FI_UINT64, FI_CSWAP, &count));
		CHECK(count == 1, "compare_atomicvalid count %zu", count);
		CHECK(fi_atomicvalid(cep, FI_UINT64, FI_CSWAP, &count) == -FI_EOPNOTSUPP,
		      "atomicvalid CSWAP");
		CHECK(fi_atomicvalid(cep, FI_UINT32, FI_SUM, &count) == -FI_EOPNOTSUPP,
		      "atomicvalid UINT32");
		CHECK(fi_atomicvalid(cep, FI_DOUBLE, FI_SUM, &count) == -FI_EOPNOTSUPP,
		      "atomicvalid DOUBLE");
		CHECK(fi_fetch_atomicvalid(cep, FI_UINT64, FI_MIN, &count) == -FI_EOPNOTSUPP,
		      "fetch_atomicvalid MIN");
		CHECK(fi_fetch_atomicvalid(cep, FI_UINT64, FI_ATOMIC_READ, &count) ==
			      -FI_EOPNOTSUPP,
		      "fetch_atomicvalid ATOMIC_READ");
		CHECK(fi_compare_atomicvalid(cep, FI_UINT64, FI_SUM, &count) == -FI_EOPNOTSUPP,
		      "compare_atomicvalid SUM");
		CHECK(fi_compare_atomicvalid(cep, FI_UINT64, FI_MSWAP, &count) == -FI_EOPNOTSUPP,
		      "compare_atomicvalid MSWAP");
		CHECK(fi_atomicvalid(cep, (enum fi_datatype)999, FI_SUM, &count) == -FI_EOPNOTSUPP,
		      "atomicvalid of a datatype that does not exist");
		OK(fi_query_atomic(domain, FI_UINT64, FI_CSWAP, &aa, FI_COMPARE_ATOMIC));
		CHECK(aa.count == 1 && aa.size == 8, "query_atomic %zu %zu", aa.count, aa.size);
		CHECK(fi_query_atomic(domain, FI_UINT64, FI_CSWAP, &aa, 0) == -FI_EOPNOTSUPP,
		      "query_atomic CSWAP without FI_COMPARE_ATOMIC");
		printf("valid: ok (FI_SUM and FI_CSWAP on FI_UINT64/FI_INT64, count 1, size 8; "
		       "others %s)\n", fi_strerror(FI_EOPNOTSUPP));
	}

	uint64_t *tgt = aligned_alloc(4096, 4096), *loc = aligned_alloc(4096, 4096);
	struct fid_mr *tmr, *lmr, *romr;
	memset(tgt, 0, 4096);
	memset(loc, 0, 4096);
	OK(fi_mr_reg(domain, tgt, 2048, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &tmr, NULL));
	OK(fi_mr_reg(domain, (char *)tgt + 2048, 2048, FI_REMOTE_READ, 0, 0, 0, &romr, NULL));
	OK(fi_mr_reg(domain, loc, 4096, FI_READ | FI_WRITE | FI_ATOMIC, 0, 0, 0, &lmr, NULL));
	uint64_t key = fi_mr_key(tmr), raddr = (uint64_t)(uintptr_t)tgt;
	void *ld = fi_mr_desc(lmr);
	struct fi_cq_data_entry e;
	int c1, c2, c3;

	/* Fetch and Add. */
	tgt[1] = 1000;
	uint64_t add = 42;
	OK(fi_fetch_atomic(cep, &add, 1, NULL, &loc[0], ld, 0, raddr + 8, key, FI_UINT64, FI_SUM,
			   &c1));
	OK(cq_wait(ccq, &e));
	CHECK(e.op_context == &c1 && e.flags == (FI_ATOMIC | FI_READ), "fetch entry %#lx",
	      (unsigned long)e.flags);
	CHECK(loc[0] == 1000 && tgt[1] == 1042, "fetch-add: result %llu target %llu",
	      (unsigned long long)loc[0], (unsigned long long)tgt[1]);
	printf("fetch_atomic FI_SUM: ok (1000 + 42: result 1000, target 1042)\n");

	/* Compare and Swap that swaps. */
	uint64_t cmp = 1042, swp = 7;
	OK(fi_compare_atomic(cep, &swp, 1, NULL, &cmp, NULL, &loc[1], ld, 0, raddr + 8, key,
			     FI_UINT64, FI_CSWAP, &c2));
	OK(cq_wait(ccq, &e));
	CHECK(e.op_context == &c2 && e.flags == (FI_ATOMIC | FI_READ), "compare entry");
	CHECK(loc[1] == 1042 && tgt[1] == 7, "cswap: result %llu target %llu",
	      (unsigned long long)loc[1], (unsigned long long)tgt[1]);
	/* and one whose compare fails: the target stays. */
	cmp = 99;
	swp = 5;
	OK(fi_compare_atomic(cep, &swp, 1, NULL, &cmp, NULL, &loc[2], ld, 0, raddr + 8, key,
			     FI_UINT64, FI_CSWAP, &c2));
	OK(cq_wait(ccq, &e));
	CHECK(loc[2] == 7 && tgt[1] == 7, "failed cswap: result %llu target %llu",
	      (unsigned long long)loc[2], (unsigned long long)tgt[1]);
	printf("compare_atomic FI_CSWAP: ok (1042 == 1042: swapped to 7; 99 != 7: result 7, "
	       "target unchanged)\n");

	/* fi_atomic FI_SUM: no fetch, a completion with FI_WRITE. */
	add = 5;
	OK(fi_atomic(cep, &add, 1, NULL, 0, raddr + 8, key, FI_UINT64, FI_SUM, &c3));
	OK(cq_wait(ccq, &e));
	CHECK(e.op_context == &c3 && e.flags == (FI_ATOMIC | FI_WRITE), "atomic entry %p %#lx",
	      e.op_context, (unsigned long)e.flags);
	CHECK(tgt[1] == 12, "atomic: target %llu", (unsigned long long)tgt[1]);
	/* fi_inject_atomic: no completion at all; the next fetch sees its sum. */
	add = 100;
	OK(fi_inject_atomic(cep, &add, 1, 0, raddr + 8, key, FI_UINT64, FI_SUM));
	int64_t sub = -13;
	OK(fi_fetch_atomic(cep, &sub, 1, NULL, &loc[3], ld, 0, raddr + 8, key, FI_INT64, FI_SUM,
			   &c1));
	OK(cq_wait(ccq, &e));
	CHECK(e.op_context == &c1, "the inject made a completion (context %p)", e.op_context);
	CHECK(loc[3] == 112 && tgt[1] == 99, "inject + int64 fetch: result %llu target %llu",
	      (unsigned long long)loc[3], (unsigned long long)tgt[1]);
	CHECK(fi_cq_read(ccq, &e, 1) == -FI_EAGAIN, "an extra completion");
	printf("atomic FI_SUM: ok (7 + 5 = 12; inject + 100 without completion; "
	       "FI_INT64 - 13: result 112, target 99)\n");

	/* Misuse: refused before anything is sent. */
	add = 1;
	CHECK(fi_fetch_atomic(cep, &add, 1, NULL, &loc[0], ld, 0, raddr + 12, key, FI_UINT64,
			      FI_SUM, &c1) == -FI_EINVAL,
	      "misaligned target");
	CHECK(fi_atomic(cep, &add, 1, NULL, 0, raddr + 4, key, FI_UINT64, FI_SUM, &c1) ==
		      -FI_EINVAL,
	      "misaligned fi_atomic");
	uint64_t two[2] = { 1, 2 };
	CHECK(fi_fetch_atomic(cep, two, 2, NULL, &loc[0], ld, 0, raddr + 8, key, FI_UINT64,
			      FI_SUM, &c1) == -FI_EINVAL,
	      "count 2");
	CHECK(fi_fetch_atomic(cep, &add, 1, NULL, &loc[0], ld, 0, raddr + 8, key, FI_UINT64,
			      FI_MAX, &c1) == -FI_EOPNOTSUPP,
	      "FI_MAX");
	CHECK(fi_atomic(cep, &add, 1, NULL, 0, raddr + 8, key, FI_UINT32, FI_SUM, &c1) ==
		      -FI_EOPNOTSUPP,
	      "FI_UINT32");
	CHECK(fi_compare_atomic(cep, &add, 1, NULL, &cmp, NULL, &loc[0], ld, 0, raddr + 8, key,
				FI_UINT64, FI_SUM, &c1) == -FI_EOPNOTSUPP,
	      "compare with FI_SUM");
	CHECK(fi_fetch_atomic(cep, &add, 1, NULL, &loc[0], NULL, 0, raddr + 8, key, FI_UINT64,
			      FI_SUM, &c1) == -FI_EINVAL,
	      "result without descriptor");
	CHECK(fi_fetch_atomic(cep, NULL, 1, NULL, &loc[0], ld, 0, raddr + 8, key, FI_UINT64,
			      FI_SUM, &c1) == -FI_EINVAL,
	      "no operand");
	CHECK(fi_cq_read(ccq, &e, 1) == -FI_EAGAIN, "a refused atomic completed");
	CHECK(tgt[1] == 99, "a refused atomic changed the target");
	printf("misuse: ok (misaligned, count 2, no descriptor: %s; FI_MAX, FI_UINT32: %s)\n",
	       fi_strerror(FI_EINVAL), fi_strerror(FI_EOPNOTSUPP));

	/* A region without FI_REMOTE_WRITE refuses the peer's atomics (RFC 7306: the
	 * responder checks the STag's rights), reported as a completion error. */
	tgt[256 + 1] = 5;
	OK(fi_fetch_atomic(cep, &add, 1, NULL, &loc[0], ld, 0, raddr + 2048 + 8,
			   fi_mr_key(romr), FI_UINT64, FI_SUM, &c2));
	int err = cq_wait(ccq, &e);
	CHECK(err == -FI_EACCES && e.op_context == &c2, "read-only target: %d (%s)", err,
	      fi_strerror(-err));
	CHECK(tgt[256 + 1] == 5, "read-only target changed");
	printf("read-only target: ok (completion error %s, target unchanged)\n",
	       fi_strerror(-err));

	pair_close_eps();
	OK(fi_close(&tmr->fid));
	OK(fi_close(&romr->fid));
	OK(fi_close(&lmr->fid));
	pair_close();
	fi_freeinfo(info);
	fi_freeinfo(hints);
	free(tgt);
	free(loc);
	printf("fi_atomic_check: all checks passed\n");
	return 0;
}
