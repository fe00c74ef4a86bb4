/* fi_inject_check: the softrnic provider's inject and remote-CQ-data calls through
 * libfabric's API, in one process: fi_inject (the source overwritten right after the call,
 * no completion), 900 fi_injects in rounds (more than the provider's bounce slots), 200
 * round trips of injects both ways, an
 * inject over inject_size refused, fi_inject_write and fi_inject_writedata (bytes placed,
 * remote CQ data received, no completion), fi_senddata and fi_injectdata without payload
 * (RFC 7306 Immediate Data), and with payload refused (-FI_ENOSYS: RFC 7306 has no Send that
 * carries Immediate Data). Prints one line per check; exits 1 on the first failure.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "pair.h"

static void cq_wait(struct fid_cq *cq, struct fi_cq_data_entry *e, const char *what)
{
	for (int i = 0; i < 100000; i++) {
		ssize_t r = fi_cq_sread(cq, e, 1, NULL, 10);
		if (r == 1)
			return;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(cq, &err, 0);
			CHECK(0, "%s: completion error %s", what, fi_strerror(err.err));
		}
		CHECK(r == -FI_EAGAIN, "%s: fi_cq_sread = %zd", what, r);
	}
	CHECK(0, "%s: no completion", what);
}

#define SLOT 16

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	struct fi_cq_data_entry e;

	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_RMA;
	hints->mode = FI_RX_CQ_DATA;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("softrnic");
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info));
	size_t inject = info->tx_attr->inject_size;
	CHECK(inject >= 64, "inject_size %zu", inject);
	pair_connect(info, 1024);
	printf("connect: ok (inject_size %zu)\n", inject);

	enum { RBUF = 256 * 1024 };
	char *rbuf = aligned_alloc(4096, RBUF), *src = malloc(4096);
	struct fid_mr *rmr;
	memset(rbuf, 0, RBUF);
	OK(fi_mr_reg(domain, rbuf, RBUF, FI_RECV | FI_REMOTE_WRITE, 0, 0, 0, &rmr, NULL));
	void *rd = fi_mr_desc(rmr);
	uint64_t rkey = fi_mr_key(rmr), raddr = (uint64_t)(uintptr_t)rbuf;

	/* fi_inject: the bytes are the provider's once the call returns. */
	{
		int rctx;
		OK(fi_recv(sep, rbuf, inject, rd, 0, &rctx));
		for (size_t i = 0; i < inject; i++)
			src[i] = (char)(i * 3 + 1);
		OK(fi_inject(cep, src, inject, 0));
		memset(src, 0xee, inject);
		cq_wait(scq, &e, "inject recv");
		CHECK(e.op_context == &rctx && e.len == inject, "inject recv %zu", e.len);
		for (size_t i = 0; i < inject; i++)
			CHECK(rbuf[i] == (char)(i * 3 + 1), "inject byte %zu", i);
		CHECK(fi_inject(cep, src, inject + 1, 0) == -FI_EMSGSIZE, "inject over size");
		printf("inject: ok (%zu bytes, source reused at once; %zu bytes: %s)\n", inject,
		       inject + 1, fi_strerror(FI_EMSGSIZE));
	}

	/* 900 injects in rounds of 150: more than the bounce slots, every message checked. */
	{
		int total = 0;
		for (int round = 0; round < 6; round++) {
			for (int i = 0; i < 150; i++)
				OK(fi_recv(sep, rbuf + i * SLOT, SLOT, rd, 0, NULL));
			for (int i = 0; i < 150; i++) {
				int n = round * 150 + i;
				ssize_t r;
				snprintf(src, SLOT, "msg %d", n);
				while ((r = fi_inject(cep, src, SLOT, 0)) == -FI_EAGAIN)
					fi_cq_read(ccq, &e, 0);
				CHECK(r == 0, "inject %d: %zd", n, r);
			}
			for (int i = 0; i < 150; i++) {
				char want[SLOT];
				cq_wait(scq, &e, "burst recv");
				snprintf(want, SLOT, "msg %d", round * 150 + i);
				CHECK(!strcmp(rbuf + i * SLOT, want), "message %d: \"%s\"",
				      round * 150 + i, rbuf + i * SLOT);
				total++;
			}
		}
		CHECK(fi_cq_read(ccq, &e, 1) == -FI_EAGAIN, "an inject completed");
		printf("inject burst: ok (%d messages in order, no sender completion)\n", total);
	}

	/* Ping-pong of injects: each side reposts its receive before it answers. */
	{
		int n;
		OK(fi_recv(sep, rbuf, 64, rd, 0, NULL));
		OK(fi_recv(cep, rbuf + 64, 64, rd, 0, NULL));
		for (n = 0; n < 200; n++) {
			snprintf(src, 64, "ping %d", n);
			OK(fi_inject(cep, src, 64, 0));
			cq_wait(scq, &e, "ping");
			CHECK(!strcmp(rbuf, src), "ping %d: \"%s\"", n, rbuf);
			if (n + 1 < 200)
				OK(fi_recv(sep, rbuf, 64, rd, 0, NULL));
			snprintf(src, 64, "pong %d", n);
			OK(fi_inject(sep, src, 64, 0));
			cq_wait(ccq, &e, "pong");
			CHECK(!strcmp(rbuf + 64, src), "pong %d: \"%s\"", n, rbuf + 64);
			if (n + 1 < 200)
				OK(fi_recv(cep, rbuf + 64, 64, rd, 0, NULL));
		}
		printf("inject ping-pong: ok (%d round trips)\n", n);
	}

	/* fi_inject_write, then fi_inject_writedata whose remote CQ data says both landed. */
	{
		int rctx;
		memset(rbuf, 0, 4096);
		for (size_t i = 0; i < inject; i++)
			src[i] = (char)(i ^ 0x33);
		OK(fi_inject_write(cep, src, inject, 0, raddr + 1024, rkey));
		memset(src, 0, inject);
		for (size_t i = 0; i < 64; i++)
			src[i] = (char)(i + 100);
		OK(fi_recv(sep, rbuf + 3000, 16, rd, 0, &rctx));
		OK(fi_inject_writedata(cep, src, 64, 0xabcdef0123456789ull, 0, raddr + 2048, rkey));
		memset(src, 0, 64);
		cq_wait(scq, &e, "inject_writedata target");
		CHECK(e.op_context == &rctx && (e.flags & FI_REMOTE_CQ_DATA) &&
			      e.data == 0xabcdef0123456789ull,
		      "remote CQ data %#llx flags %#lx", (unsigned long long)e.data,
		      (unsigned long)e.flags);
		for (size_t i = 0; i < inject; i++)
			CHECK(rbuf[1024 + i] == (char)(i ^ 0x33), "inject_write byte %zu", i);
		for (size_t i = 0; i < 64; i++)
			CHECK(rbuf[2048 + i] == (char)(i + 100), "inject_writedata byte %zu", i);
		CHECK(fi_inject_write(cep, src, inject + 1, 0, raddr, rkey) == -FI_EMSGSIZE,
		      "inject_write over size");
		CHECK(fi_cq_read(ccq, &e, 1) == -FI_EAGAIN, "an inject write completed");
		printf("inject_write, inject_writedata: ok (%zu and 64 bytes placed, remote CQ data "
		       "0xabcdef0123456789, no sender completion)\n", inject);
	}

	/* fi_senddata / fi_injectdata without payload: RFC 7306 Immediate Data. */
	{
		int r1, r2, sctx;
		OK(fi_recv(sep, rbuf, 16, rd, 0, &r1));
		OK(fi_recv(sep, rbuf + 16, 16, rd, 0, &r2));
		OK(fi_senddata(cep, NULL, 0, NULL, 0x0102030405060708ull, 0, &sctx));
		OK(fi_injectdata(cep, NULL, 0, 0x1111222233334444ull, 0));
		cq_wait(scq, &e, "senddata recv");
		CHECK(e.op_context == &r1 && (e.flags & FI_REMOTE_CQ_DATA) && e.len == 0 &&
			      e.data == 0x0102030405060708ull,
		      "senddata recv %#llx", (unsigned long long)e.data);
		cq_wait(scq, &e, "injectdata recv");
		CHECK(e.op_context == &r2 && (e.flags & FI_REMOTE_CQ_DATA) &&
			      e.data == 0x1111222233334444ull,
		      "injectdata recv %#llx", (unsigned long long)e.data);
		cq_wait(ccq, &e, "senddata");
		CHECK(e.op_context == &sctx && e.flags == (FI_MSG | FI_SEND), "senddata entry %#lx",
		      (unsigned long)e.flags);
		CHECK(fi_cq_read(ccq, &e, 1) == -FI_EAGAIN, "injectdata completed");
		CHECK(fi_senddata(cep, src, 8, NULL, 1, 0, &sctx) == -FI_ENOSYS,
		      "senddata with payload");
		CHECK(fi_injectdata(cep, src, 8, 1, 0) == -FI_ENOSYS, "injectdata with payload");
		printf("senddata, injectdata: ok (Immediate Data 0x0102030405060708 and "
		       "0x1111222233334444; with payload: %s)\n", fi_strerror(FI_ENOSYS));
	}

	pair_close_eps();
	OK(fi_close(&rmr->fid));
	pair_close();
	fi_freeinfo(info);
	fi_freeinfo(hints);
	free(rbuf);
	free(src);
	printf("fi_inject_check: all checks passed\n");
	return 0;
}
