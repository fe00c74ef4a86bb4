/* fi_rma_peer: one side of an RMA exchange between two processes over FI_EP_MSG, with any
 * provider on either side (softrnic here, libfabric's verbs provider on Linux siw there):
 *
 *   fi_rma_peer -p PROV [-P PORT] [-n ITERS]          the target (server)
 *   fi_rma_peer -p PROV [-P PORT] [-n ITERS] ADDR     the initiator (client)
 *
 * Each side registers one buffer (a write region, a read region and two message slots) with
 * remote read and write rights, and tells the other its address and key in the CM data of
 * the connect and of the accept (16 octets: the RMA address, then the key, each 64 bits in
 * the host's order). The target fills its read region with a known pattern and posts a
 * receive. The initiator, per size (64, 4096, 65536 octets) and iteration: fi_write()s a
 * pattern into the target's write region, fi_read()s the target's read region and checks
 * every byte, then fi_send()s "check SIZE SEED"; the target checks every byte of its write
 * region and answers with a Send carrying 0 (good) or 1. A last message of size 0 ends the
 * run. Each side prints one line per check and "rma verified" at the end; exit 1 on the first
 * failure (with the libfabric error), 2 on bad arguments. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "check.h"

#define BIG (64 * 1024)
#define W_OFF 0
#define R_OFF BIG
#define RX_OFF (2 * BIG)
#define TX_OFF (2 * BIG + 64)
#define LEN (2 * BIG + 128)
#define TIMEOUT_MS 30000

static const size_t sizes[] = { 64, 4096, BIG };

struct cm_data {
	uint64_t addr;
	uint64_t key;
};

struct check_msg {
	uint32_t size;
	uint32_t seed;
};

static struct fid_cq *cq;
static struct fi_context2 ctx;

static unsigned char pattern(size_t i, uint32_t seed)
{
	return (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

static void fill(unsigned char *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(i, seed);
}

/* The index of the first octet that is not the pattern, or n. */
static size_t first_bad(const unsigned char *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != pattern(i, seed))
			return i;
	return n;
}

/* Waits for one completion and returns its flags (FI_SEND, FI_RECV, FI_RMA ...); fails with
 * the provider's error entry when there is one. */
static uint64_t wait_cq(const char *what)
{
	struct fi_cq_data_entry e;
	ssize_t r = fi_cq_sread(cq, &e, 1, NULL, TIMEOUT_MS);
	if (r == -FI_EAVAIL) {
		struct fi_cq_err_entry err = { 0 };
		fi_cq_readerr(cq, &err, 0);
		CHECK(0, "%s: completion error %d (%s), provider error %d", what, err.err,
		      fi_strerror(err.err), err.prov_errno);
	}
	CHECK(r == 1, "%s: fi_cq_sread = %zd (%s)", what, r, fi_strerror((int)-r));
	return e.flags;
}

/* Waits for the completions of a Send and of a Receive, in either order. */
static void wait_send_recv(const char *what)
{
	int send = 0, recv = 0;
	while (!send || !recv) {
		uint64_t f = wait_cq(what);
		if (f & FI_RECV)
			recv++;
		else
			send++;
	}
}

/* Reads one CM event of `eq`; returns its type and copies its CM data (if any) to `data`. */
static uint32_t wait_eq(struct fid_eq *eq, struct fi_info **info, struct cm_data *data)
{
	struct {
		struct fi_eq_cm_entry e;
		unsigned char data[256];
	} buf;
	uint32_t ev = 0;
	ssize_t r = fi_eq_sread(eq, &ev, &buf, sizeof(buf), TIMEOUT_MS, 0);
	if (r == -FI_EAVAIL) {
		struct fi_eq_err_entry err = { 0 };
		fi_eq_readerr(eq, &err, 0);
		CHECK(0, "CM error %d (%s), provider error %d", err.err, fi_strerror(err.err),
		      err.prov_errno);
	}
	CHECK(r >= (ssize_t)sizeof(buf.e), "fi_eq_sread = %zd (%s)", r, fi_strerror((int)-r));
	if (info)
		*info = buf.e.info;
	if (data && (size_t)r >= sizeof(buf.e) + sizeof(*data))
		memcpy(data, buf.data, sizeof(*data));
	return ev;
}

static void usage(void)
{
	fprintf(stderr, "usage: fi_rma_peer -p PROV [-P PORT] [-n ITERS] [ADDR]\n"
			"  without ADDR: the target (server); with ADDR: the initiator\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *prov = NULL, *port = "47700", *peer = NULL;
	int iters = 10, opt;
	while ((opt = getopt(argc, argv, "p:P:n:h")) != -1) {
		switch (opt) {
		case 'p':
			prov = optarg;
			break;
		case 'P':
			port = optarg;
			break;
		case 'n':
			iters = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (optind < argc)
		peer = argv[optind];
	if (!prov || iters < 1 || optind + (peer != NULL) != argc)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);

	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	CHECK(hints, "fi_allocinfo");
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_RMA;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov);
	int r = fi_getinfo(FI_VERSION(1, 9), peer, port, peer ? 0 : FI_SOURCE, hints, &info);
	CHECK(r == 0, "fi_getinfo(%s, %s) = %d (%s)", prov, peer ? peer : "listen", r,
	      fi_strerror(-r));
	printf("provider %s, domain %s\n", info->fabric_attr->prov_name, info->domain_attr->name);

	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr cq_attr = { .size = 16, .format = FI_CQ_FORMAT_DATA,
				      .wait_obj = FI_WAIT_UNSPEC };
	struct cm_data mine, theirs = { 0 };
	unsigned char *buf = aligned_alloc(4096, (LEN + 4095) / 4096 * 4096);
	CHECK(buf, "aligned_alloc");
	memset(buf, 0, LEN);

	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_eq_open(fabric, &eq_attr, &eq, NULL));
	struct fi_info *epinfo = info;
	if (!peer) {
		struct fid_pep *pep;
		OK(fi_passive_ep(fabric, info, &pep, NULL));
		OK(fi_pep_bind(pep, &eq->fid, 0));
		OK(fi_listen(pep));
		printf("listening on port %s\n", port);
		CHECK(wait_eq(eq, &epinfo, &theirs) == FI_CONNREQ, "a connection request");
	}
	OK(fi_domain(fabric, epinfo, &domain, NULL));
	OK(fi_mr_reg(domain, buf, LEN,
		     FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0,
		     0, &mr, NULL));
	void *desc = fi_mr_desc(mr);
	mine.addr = (epinfo->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
	mine.key = fi_mr_key(mr);
	OK(fi_cq_open(domain, &cq_attr, &cq, NULL));
	OK(fi_endpoint(domain, epinfo, &ep, NULL));
	OK(fi_ep_bind(ep, &eq->fid, 0));
	OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_enable(ep));
	OK(fi_recv(ep, buf + RX_OFF, 64, desc, 0, &ctx));
	if (peer) {
		OK(fi_connect(ep, info->dest_addr, &mine, sizeof(mine)));
		CHECK(wait_eq(eq, NULL, &theirs) == FI_CONNECTED, "connected");
	} else {
		fill(buf + R_OFF, BIG, 0xbead);
		OK(fi_accept(ep, &mine, sizeof(mine)));
		CHECK(wait_eq(eq, NULL, NULL) == FI_CONNECTED, "connected");
	}
	printf("connected: the peer's buffer at %#llx, key %#llx\n", (unsigned long long)theirs.addr,
	       (unsigned long long)theirs.key);

	struct check_msg *rx = (struct check_msg *)(buf + RX_OFF);
	uint32_t *status_rx = (uint32_t *)(buf + RX_OFF);
	struct check_msg *tx = (struct check_msg *)(buf + TX_OFF);
	uint32_t *status_tx = (uint32_t *)(buf + TX_OFF);
	if (peer) {
		uint32_t seed = 1;
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t size = sizes[s];
			for (int i = 0; i < iters; i++, seed++) {
				fill(buf + W_OFF, size, seed);
				OK(fi_write(ep, buf + W_OFF, size, desc, 0, theirs.addr + W_OFF,
					    theirs.key, &ctx));
				wait_cq("fi_write");
				memset(buf + R_OFF, 0, size);
				OK(fi_read(ep, buf + R_OFF, size, desc, 0, theirs.addr + R_OFF,
					   theirs.key, &ctx));
				wait_cq("fi_read");
				size_t bad = first_bad(buf + R_OFF, size, 0xbead);
				CHECK(bad == size, "fi_read of %zu octets: octet %zu differs", size, bad);
				tx->size = (uint32_t)size;
				tx->seed = seed;
				OK(fi_send(ep, tx, sizeof(*tx), desc, 0, &ctx));
				wait_send_recv("fi_send and the target's answer");
				CHECK(*status_rx == 0, "the target found the fi_write of %zu octets wrong",
				      size);
				OK(fi_recv(ep, buf + RX_OFF, 64, desc, 0, &ctx));
			}
			printf("fi_write, fi_read %zu octets x %d: verified\n", size, iters);
		}
		tx->size = 0;
		tx->seed = 0;
		OK(fi_send(ep, tx, sizeof(*tx), desc, 0, &ctx));
		wait_send_recv("fi_send (end) and the target's last answer");
	} else {
		int checks = 0;
		for (;;) {
			/* Skip the completions of the answers sent before. */
			while (!(wait_cq("a check request") & FI_RECV))
				;
			struct check_msg m = *rx;
			OK(fi_recv(ep, buf + RX_OFF, 64, desc, 0, &ctx));
			uint32_t verdict = 0;
			if (m.size) {
				CHECK(m.size <= BIG, "a check of %u octets", m.size);
				size_t bad = first_bad(buf + W_OFF, m.size, m.seed);
				if (bad != m.size) {
					printf("FAIL: the fi_write of %u octets differs at octet %zu\n",
					       m.size, bad);
					verdict = 1;
				}
				checks++;
			}
			*status_tx = verdict;
			OK(fi_send(ep, status_tx, sizeof(*status_tx), desc, 0, &ctx));
			CHECK(verdict == 0, "data check");
			if (!m.size) {
				while (wait_cq("fi_send (last answer)") & FI_RECV)
					;
				break;
			}
		}
		printf("%d fi_writes checked\n", checks);
	}
	printf("rma verified\n");
	fi_shutdown(ep, 0);
	fi_close(&ep->fid);
	fi_close(&mr->fid);
	fi_close(&cq->fid);
	fi_close(&domain->fid);
	fi_close(&eq->fid);
	fi_close(&fabric->fid);
	if (epinfo != info)
		fi_freeinfo(epinfo);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	free(buf);
	return 0;
}
