/* fi_rma_check: the softrnic provider through libfabric's API, in one process and one
 * thread (connection management is non-blocking): a rejected connect with CM data both
 * ways, an accepted one with CM data both ways, Send/Receive (fi_send, fi_sendv,
 * fi_recvmsg), fi_write, fi_read and fi_writedata with every byte verified, a CQ slept on
 * through its FI_WAIT_FD descriptor, misuse answered with libfabric error codes, and
 * fi_shutdown seen by the peer as FI_SHUTDOWN. Prints one line per check; exits 1 on the
 * first failure.
 */
#include <poll.h>
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

#include "check.h"

#define BIG (64 * 1024)

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fi_info *info;

/* Reads one CM event of `eq` within 10 s; returns its type, copies the entry. */
static uint32_t eq_wait(struct fid_eq *eq, void *entry, size_t len, ssize_t *got)
{
	uint32_t ev = 0;
	ssize_t r = fi_eq_sread(eq, &ev, entry, len, 10000, 0);
	*got = r;
	return ev;
}

static void cq_wait(struct fid_cq *cq, struct fi_cq_data_entry *e, const char *what)
{
	for (int i = 0; i < 10000000; i++) {
		ssize_t r = fi_cq_read(cq, e, 1);
		if (r == 1)
			return;
		if (r == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };
			fi_cq_readerr(cq, &err, 0);
			CHECK(0, "%s: completion error %d (%s)", what, err.err, fi_strerror(err.err));
		}
		CHECK(r == -FI_EAGAIN, "%s: fi_cq_read = %zd", what, r);
		r = fi_cq_sread(cq, e, 1, NULL, 10);
		if (r == 1)
			return;
	}
	CHECK(0, "%s: no completion", what);
}

static struct fid_cq *cq_open(enum fi_wait_obj wait)
{
	struct fi_cq_attr attr = { .size = 256, .format = FI_CQ_FORMAT_DATA, .wait_obj = wait };
	struct fid_cq *cq;
	OK(fi_cq_open(domain, &attr, &cq, NULL));
	return cq;
}

static struct fid_ep *ep_open(struct fi_info *fi, struct fid_eq *eq, struct fid_cq *tx,
			      struct fid_cq *rx)
{
	struct fid_ep *ep;
	OK(fi_endpoint(domain, fi, &ep, NULL));
	OK(fi_ep_bind(ep, &eq->fid, 0));
	OK(fi_ep_bind(ep, &tx->fid, FI_TRANSMIT));
	OK(fi_ep_bind(ep, &rx->fid, FI_RECV));
	OK(fi_enable(ep));
	return ep;
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fid_eq *seq, *ceq;
	struct fid_pep *pep;
	struct sockaddr_in addr;
	size_t alen = sizeof(addr);
	struct {
		struct fi_eq_cm_entry e;
		char data[256];
	} cm;
	ssize_t got;
	uint32_t ev;

	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_RMA;
	hints->mode = FI_RX_CQ_DATA; /* remote CQ data may consume receives */
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("softrnic");
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info));
	CHECK(!strcmp(info->fabric_attr->prov_name, "softrnic"), "provider %s",
	      info->fabric_attr->prov_name);
	CHECK(info->ep_attr->type == FI_EP_MSG, "ep type");
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_domain(fabric, info, &domain, NULL));
	OK(fi_eq_open(fabric, &eq_attr, &seq, NULL));
	OK(fi_eq_open(fabric, &eq_attr, &ceq, NULL));
	OK(fi_passive_ep(fabric, info, &pep, NULL));
	OK(fi_pep_bind(pep, &seq->fid, 0));
	OK(fi_listen(pep));
	OK(fi_getname(&pep->fid, &addr, &alen));
	CHECK(alen == sizeof(addr) && addr.sin_port != 0, "listener port");
	printf("listen: ok (port %u)\n", ntohs(addr.sin_port));

	/* Misuse before any connection. */
	{
		struct fid_cq *cq;
		struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_TAGGED };
		CHECK(fi_cq_open(domain, &attr, &cq, NULL) == -FI_ENOSYS, "tagged CQ");
		struct fid_cq *tx = cq_open(FI_WAIT_NONE), *rx = cq_open(FI_WAIT_NONE);
		struct fid_ep *ep = ep_open(info, ceq, tx, rx);
		char b[8];
		CHECK(fi_accept(ep, NULL, 0) == -FI_EINVAL, "accept without request");
		CHECK(fi_send(ep, b, sizeof(b), NULL, 0, NULL) == -FI_EINVAL,
		      "send without descriptor (FI_MR_LOCAL)");
		struct fid_mr *mr;
		CHECK(fi_mr_reg(domain, b, sizeof(b), FI_SEND, 0, 0, 0xdead, &mr, NULL) ==
			      -FI_EINVAL,
		      "mr_reg with unknown flags");
		OK(fi_mr_reg(domain, b, sizeof(b), FI_SEND, 0, 0, 0, &mr, NULL));
		CHECK(fi_send(ep, b, sizeof(b), fi_mr_desc(mr), 0, NULL) == -FI_EOPBADSTATE,
		      "send before connecting: %s", "");
		CHECK(fi_inject(ep, b, 4, 0) == -FI_EOPBADSTATE, "inject before connecting");
		CHECK(fi_reject(pep, &mr->fid, NULL, 0) == -FI_EINVAL, "reject of a non-request");
		CHECK(fi_connect(ep, NULL, NULL, 0) == -FI_EINVAL, "connect without address");
		char big[1024];
		CHECK(fi_connect(ep, &addr, big, 56) == -FI_EINVAL, "CM data > 55");
		OK(fi_close(&ep->fid));
		OK(fi_close(&mr->fid));
		OK(fi_close(&tx->fid));
		OK(fi_close(&rx->fid));
		printf("misuse: ok (%s for a CQ format, %s for a post before connecting)\n",
		       fi_strerror(FI_ENOSYS), fi_strerror(FI_EOPBADSTATE));
	}

	/* A connect rejected with CM data both ways. */
	{
		struct fid_cq *tx = cq_open(FI_WAIT_NONE), *rx = cq_open(FI_WAIT_NONE);
		struct fid_ep *ep = ep_open(info, ceq, tx, rx);
		OK(fi_connect(ep, &addr, "knock knock", 12));
		ev = eq_wait(seq, &cm, sizeof(cm), &got);
		CHECK(got > 0 && ev == FI_CONNREQ, "CONNREQ: %zd %u", got, ev);
		CHECK((size_t)got == sizeof(cm.e) + 12 && !memcmp(cm.e.data, "knock knock", 12),
		      "CONNREQ data (%zd bytes)", got);
		CHECK(cm.e.info && cm.e.info->handle, "CONNREQ info");
		OK(fi_reject(pep, cm.e.info->handle, "go away", 8));
		fi_freeinfo(cm.e.info);
		ev = eq_wait(ceq, &cm, sizeof(cm), &got);
		CHECK(got == -FI_EAVAIL, "rejected connect: %zd", got);
		struct fi_eq_err_entry err = { 0 };
		CHECK(fi_eq_readerr(ceq, &err, 0) == sizeof(err), "eq_readerr");
		CHECK(err.err == FI_ECONNREFUSED, "err %d", err.err);
		CHECK(err.fid == &ep->fid, "err fid");
		CHECK(err.err_data_size == 8 && !memcmp(err.err_data, "go away", 8),
		      "reject data (%zu bytes)", err.err_data_size);
		OK(fi_close(&ep->fid));
		OK(fi_close(&tx->fid));
		OK(fi_close(&rx->fid));
		printf("reject: ok (FI_ECONNREFUSED, \"%s\", 12 + 8 bytes of CM data)\n",
		       fi_strerror(err.err));
	}

	/* An accepted connection with CM data both ways. */
	struct fid_cq *ctx = cq_open(FI_WAIT_NONE), *crx = cq_open(FI_WAIT_NONE);
	struct fid_cq *stx = cq_open(FI_WAIT_NONE), *srx = cq_open(FI_WAIT_FD);
	struct fid_ep *cep = ep_open(info, ceq, ctx, crx), *sep;
	OK(fi_connect(cep, &addr, "hello", 6));
	ev = eq_wait(seq, &cm, sizeof(cm), &got);
	CHECK(got == (ssize_t)sizeof(cm.e) + 6 && ev == FI_CONNREQ, "CONNREQ 2");
	CHECK(!memcmp(cm.e.data, "hello", 6), "CONNREQ 2 data");
	sep = ep_open(cm.e.info, seq, stx, srx);
	fi_freeinfo(cm.e.info);
	OK(fi_accept(sep, "welcome", 8));
	ev = eq_wait(seq, &cm, sizeof(cm), &got);
	CHECK(got >= (ssize_t)sizeof(cm.e) && ev == FI_CONNECTED && cm.e.fid == &sep->fid,
	      "server CONNECTED: %zd %u", got, ev);
	ev = eq_wait(ceq, &cm, sizeof(cm), &got);
	CHECK(ev == FI_CONNECTED && cm.e.fid == &cep->fid, "client CONNECTED: %zd %u", got, ev);
	CHECK(got == (ssize_t)sizeof(cm.e) + 8 && !memcmp(cm.e.data, "welcome", 8),
	      "accept data (%zd)", got);
	printf("connect: ok (CM data \"hello\" in the request, \"welcome\" in the reply)\n");

	char *cbuf = aligned_alloc(4096, BIG), *sbuf = aligned_alloc(4096, BIG);
	struct fid_mr *cmr, *smr;
	memset(cbuf, 0, BIG);
	memset(sbuf, 0, BIG);
	OK(fi_mr_reg(domain, cbuf, BIG, FI_SEND | FI_RECV | FI_READ | FI_WRITE, 0, 0, 0, &cmr,
		     NULL));
	OK(fi_mr_reg(domain, sbuf, BIG,
		     FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &smr, NULL));
	void *cd = fi_mr_desc(cmr), *sd = fi_mr_desc(smr);
	uint64_t skey = fi_mr_key(smr);
	struct fi_cq_data_entry e;
	int ctx_a, ctx_b;

	/* Send/Receive: fi_sendv of two pieces into fi_recvmsg; the receive CQ is slept on
	 * through its wait fd. */
	{
		struct iovec riov = { sbuf, 1024 };
		struct fi_msg msg = { .msg_iov = &riov, .desc = &sd, .iov_count = 1,
				      .context = &ctx_b };
		int fd = -1;
		OK(fi_recvmsg(sep, &msg, 0));
		OK(fi_control(&srx->fid, FI_GETWAIT, &fd));
		CHECK(fd >= 0, "wait fd");
		struct fid *fids[1] = { &srx->fid };
		OK(fi_trywait(fabric, fids, 1));
		memcpy(cbuf, "ping-", 5);
		memcpy(cbuf + 100, "pong!", 5);
		struct iovec siov[2] = { { cbuf, 5 }, { cbuf + 100, 5 } };
		void *sdesc[2] = { cd, cd };
		OK(fi_sendv(cep, siov, sdesc, 2, 0, &ctx_a));
		struct pollfd p = { .fd = fd, .events = POLLIN };
		CHECK(poll(&p, 1, 10000) == 1, "wait fd did not fire");
		cq_wait(srx, &e, "recv");
		CHECK(e.op_context == &ctx_b && e.len == 10 && (e.flags & FI_RECV) &&
			      (e.flags & FI_MSG),
		      "recv entry len %zu flags %#lx", e.len, (unsigned long)e.flags);
		CHECK(!memcmp(sbuf, "ping-pong!", 10), "received bytes");
		cq_wait(ctx, &e, "send");
		CHECK(e.op_context == &ctx_a && (e.flags & FI_SEND), "send entry");
		printf("send/recv: ok (fi_sendv 2 pieces -> fi_recvmsg, 10 bytes, woken by the "
		       "CQ's wait fd)\n");
	}

	/* fi_write of 64 KiB. */
	for (int i = 0; i < BIG; i++)
		cbuf[i] = (char)(i * 7 + 3);
	OK(fi_write(cep, cbuf, BIG, cd, 0, (uint64_t)(uintptr_t)sbuf, skey, &ctx_a));
	cq_wait(ctx, &e, "write");
	CHECK(e.op_context == &ctx_a && (e.flags & FI_WRITE) && (e.flags & FI_RMA),
	      "write entry");
	/* The Write is placed before a Send that follows it (RDMAP ordering); a Send and its
	 * receive make sure the target has it before the bytes are compared. */
	OK(fi_recv(sep, sbuf + BIG - 16, 16, sd, 0, &ctx_b));
	OK(fi_send(cep, cbuf + 16, 1, cd, 0, &ctx_a));
	cq_wait(srx, &e, "fence recv");
	cq_wait(ctx, &e, "fence send");
	for (int i = 0; i < BIG - 16; i++)
		CHECK(sbuf[i] == (char)(i * 7 + 3), "written byte %d", i);
	printf("rdma write: ok (%d bytes placed and verified)\n", BIG);

	/* fi_read of 32 KiB from the server's buffer. */
	for (int i = 0; i < BIG / 2; i++)
		sbuf[i] = (char)(i * 13 + 1);
	memset(cbuf, 0, BIG);
	OK(fi_read(cep, cbuf, BIG / 2, cd, 0, (uint64_t)(uintptr_t)sbuf, skey, &ctx_b));
	cq_wait(ctx, &e, "read");
	CHECK(e.op_context == &ctx_b && (e.flags & FI_READ), "read entry");
	for (int i = 0; i < BIG / 2; i++)
		CHECK(cbuf[i] == (char)(i * 13 + 1), "read byte %d", i);
	printf("rdma read: ok (%d bytes read and verified)\n", BIG / 2);

	/* fi_writedata: the Write plus 8 bytes of remote CQ data, which complete a receive. */
	for (int i = 0; i < 4096; i++)
		cbuf[i] = (char)(i ^ 0x5a);
	OK(fi_recv(sep, sbuf + BIG - 64, 64, sd, 0, &ctx_a));
	OK(fi_writedata(cep, cbuf, 4096, cd, 0x1122334455667788ull, 0,
			(uint64_t)(uintptr_t)sbuf + 8192, skey, &ctx_b));
	cq_wait(srx, &e, "writedata target");
	CHECK((e.flags & FI_REMOTE_CQ_DATA) && e.data == 0x1122334455667788ull &&
		      e.op_context == &ctx_a,
	      "remote CQ data %#llx flags %#lx", (unsigned long long)e.data,
	      (unsigned long)e.flags);
	for (int i = 0; i < 4096; i++)
		CHECK(sbuf[8192 + i] == (char)(i ^ 0x5a), "writedata byte %d", i);
	cq_wait(ctx, &e, "writedata");
	CHECK(e.op_context == &ctx_b && (e.flags & FI_WRITE), "writedata entry");
	printf("rdma writedata: ok (4096 bytes and remote CQ data 0x1122334455667788)\n");

	/* A Read from a key the peer never gave: a completion error, not a crash (a Write
	 * would complete locally first: iWARP completes a Write once it is sent). */
	OK(fi_read(cep, cbuf, 64, cd, 0, (uint64_t)(uintptr_t)sbuf, skey ^ 0x100, &ctx_a));
	for (int i = 0;; i++) {
		ssize_t r = fi_cq_read(ctx, &e, 1);
		if (r == -FI_EAVAIL)
			break;
		CHECK(r == -FI_EAGAIN && i < 1000, "bad key write: %zd", r);
		fi_cq_sread(ctx, &e, 0, NULL, 10);
	}
	{
		struct fi_cq_err_entry err = { 0 };
		CHECK(fi_cq_readerr(ctx, &err, 0) == 1, "cq_readerr");
		CHECK(err.op_context == &ctx_a && err.err != 0, "error entry");
		char buf[64];
		printf("bad key: ok (completion error %s, provider: %s)\n", fi_strerror(err.err),
		       fi_cq_strerror(ctx, err.prov_errno, err.err_data, buf, sizeof(buf)));
	}

	/* The peer's Terminate ends the connection: both sides see FI_SHUTDOWN. */
	ev = eq_wait(seq, &cm, sizeof(cm), &got);
	CHECK(ev == FI_SHUTDOWN && cm.e.fid == &sep->fid, "server SHUTDOWN: %zd %u", got, ev);
	OK(fi_shutdown(cep, 0));
	printf("shutdown: ok (FI_SHUTDOWN on the server)\n");

	OK(fi_close(&cep->fid));
	OK(fi_close(&sep->fid));
	OK(fi_close(&cmr->fid));
	OK(fi_close(&smr->fid));
	OK(fi_close(&ctx->fid));
	OK(fi_close(&crx->fid));
	OK(fi_close(&stx->fid));
	OK(fi_close(&srx->fid));
	OK(fi_close(&pep->fid));
	OK(fi_close(&seq->fid));
	OK(fi_close(&ceq->fid));
	OK(fi_close(&domain->fid));
	OK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	free(cbuf);
	free(sbuf);
	printf("fi_rma_check: all checks passed\n");
	return 0;
}
