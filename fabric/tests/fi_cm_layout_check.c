/* fi_cm_layout_check.c: the provider's CM data on the wire has the layout of libfabric's
 * verbs provider (struct vrb_cm_data_hdr: one length octet, then the application's data),
 * checked against a plain softrnic RNIC of libsoftrnic's C ABI that plays the verbs peer
 * and sees the MPA private data itself (RFC 5044 §7.1.1 Private Data; RFC 6581's IRD/ORD
 * words are the RNIC's and not part of it):
 *   - fi_connect's CM data arrives as [len][data] in the MPA Request, and so does an empty
 *     one ([0], what fi_pingpong's connect sends through the verbs provider);
 *   - a Reject / Reply carrying [len][data] (as the verbs provider's fi_reject / fi_accept
 *     send it) reaches the application as exactly `len` bytes of err_data / CM data;
 *   - a Request carrying [len][data] gives FI_CONNREQ exactly the data; fi_accept and
 *     fi_reject answer with [len][data];
 *   - a length octet larger than what the frame carries gives what was carried, no more;
 *   - fi_getopt(FI_OPT_CM_DATA_SIZE) says 55, as the verbs provider does, and 56 is refused.
 * Prints one line per check; exits 1 at the first failure.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include "check.h"
#include "softrnic.h"

#define RAW(call)                                                                          \
	do {                                                                               \
		int _s = (call);                                                           \
		CHECK(_s == SOFTRNIC_OK, "%s = %d (%s)", #call, _s, softrnic_last_error()); \
	} while (0)

struct cm_buf {
	struct fi_eq_cm_entry e;
	uint8_t data[256];
};

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_eq *eq;
static struct fid_cq *cq;
static struct fi_info *info;

static struct softrnic_rnic *rnic;
static struct softrnic_pd *pd;
static struct softrnic_cq *rcq;

static struct fid_ep *fab_ep(struct fi_info *fi)
{
	struct fid_ep *ep;
	OK(fi_endpoint(domain, fi, &ep, NULL));
	OK(fi_ep_bind(ep, &eq->fid, 0));
	OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_enable(ep));
	return ep;
}

/* The next EQ entry: its event (or -FI_EAVAIL's error entry in *err) and length. */
static ssize_t eq_next(uint32_t *ev, struct cm_buf *b, struct fi_eq_err_entry *err)
{
	ssize_t r = fi_eq_sread(eq, ev, b, sizeof(*b), 10000, 0);
	if (r == -FI_EAVAIL) {
		memset(err, 0, sizeof(*err));
		CHECK(fi_eq_readerr(eq, err, 0) == sizeof(*err), "fi_eq_readerr");
	}
	return r;
}

static struct softrnic_qp *raw_qp(void)
{
	struct softrnic_qp *qp;
	RAW(softrnic_qp_create(pd, rcq, rcq, NULL, &qp));
	return qp;
}

/* Waits for the raw RNIC's next connection event of `qp`; its private data goes to buf. */
static uint32_t raw_event(struct softrnic_qp *qp, uint8_t *buf, size_t len, size_t *dlen)
{
	uint32_t id;
	RAW(softrnic_qp_id(qp, &id));
	for (int i = 0; i < 10000; i++) {
		softrnic_event ev;
		if (softrnic_rnic_poll_event_data(rnic, &ev, buf, len, dlen) == 1) {
			if (ev.qp_id == id && ev.kind != SOFTRNIC_EVENT_PATH)
				return ev.kind;
			continue;
		}
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	CHECK(0, "no event for the raw QP within 10 s");
	return 0;
}

static struct softrnic_conn_request *raw_request(struct softrnic_listener *l, uint8_t *pd_buf,
						  int *n)
{
	struct softrnic_conn_request *req;
	RAW(softrnic_listener_get_request(l, 10000, &req));
	*n = softrnic_conn_request_private_data(req, pd_buf, 512);
	CHECK(*n >= 0, "private data of the request");
	return req;
}

static void hex(const uint8_t *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 3 * i, "%02x%s", p[i], i + 1 < n ? " " : "");
	if (!n)
		out[0] = 0;
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_cq_attr cq_attr = { .size = 64, .format = FI_CQ_FORMAT_CONTEXT };
	struct fi_eq_err_entry err;
	struct cm_buf b;
	uint8_t pdb[512];
	char hx[3 * 512 + 1];
	uint32_t ev;
	ssize_t got;
	int n;

	CHECK(hints, "fi_allocinfo");
	hints->fabric_attr->prov_name = strdup("softrnic");
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_domain(fabric, info, &domain, NULL));
	OK(fi_eq_open(fabric, &eq_attr, &eq, NULL));
	OK(fi_cq_open(domain, &cq_attr, &cq, NULL));

	RAW(softrnic_rnic_open(0, &rnic));
	RAW(softrnic_pd_allocate(rnic, &pd));
	RAW(softrnic_cq_create(rnic, 64, &rcq));
	struct softrnic_listener *l;
	uint16_t port;
	RAW(softrnic_listen(rnic, "127.0.0.1:0", &l));
	RAW(softrnic_listener_port(l, &port));
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(port) };
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	/* fi_getopt and the limit. */
	{
		struct fid_ep *ep = fab_ep(info);
		size_t size = 0, len = sizeof(size);
		OK(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &size, &len));
		CHECK(size == 55, "FI_OPT_CM_DATA_SIZE = %zu", size);
		char big[56] = { 0 };
		CHECK(fi_connect(ep, &to, big, 56) == -FI_EINVAL, "56 bytes of CM data");
		OK(fi_close(&ep->fid));
		printf("cm_data_size: ok (55, the verbs provider's; 56 refused)\n");
	}

	/* fi_connect with CM data, rejected the verbs provider's way. */
	{
		struct fid_ep *ep = fab_ep(info);
		OK(fi_connect(ep, &to, "hello", 5));
		struct softrnic_conn_request *req = raw_request(l, pdb, &n);
		hex(pdb, (size_t)n, hx);
		CHECK(n == 6 && !memcmp(pdb, "\x05hello", 6), "request private data [%s]", hx);
		printf("connect: ok (MPA Request private data [%s])\n", hx);
		RAW(softrnic_conn_request_reject(req, (const uint8_t *)"\x04nope", 5));
		got = eq_next(&ev, &b, &err);
		CHECK(got == -FI_EAVAIL && err.err == FI_ECONNREFUSED, "reject: %zd %d", got,
		      err.err);
		CHECK(err.err_data_size == 4 && !memcmp(err.err_data, "nope", 4),
		      "reject data (%zu bytes)", err.err_data_size);
		printf("rejected: ok (MPA Reply [04 6e 6f 70 65] -> err_data \"nope\", 4 bytes)\n");
		OK(fi_close(&ep->fid));
	}

	/* fi_connect without CM data, accepted with CM data. */
	{
		struct fid_ep *ep = fab_ep(info);
		OK(fi_connect(ep, &to, NULL, 0));
		struct softrnic_conn_request *req = raw_request(l, pdb, &n);
		hex(pdb, (size_t)n, hx);
		CHECK(n == 1 && pdb[0] == 0, "empty CM data: private data [%s]", hx);
		struct softrnic_qp *qp = raw_qp();
		softrnic_conn_param cp = { .ird = 1, .ord = 1, .private_data_len = 8,
					   .private_data = (const uint8_t *)"\x07welcome" };
		RAW(softrnic_conn_request_accept(req, qp, &cp));
		got = eq_next(&ev, &b, &err);
		CHECK(ev == FI_CONNECTED && got == (ssize_t)sizeof(b.e) + 7 &&
			      !memcmp(b.data, "welcome", 7),
		      "accepted: %zd %u", got, ev);
		size_t dlen;
		CHECK(raw_event(qp, pdb, sizeof(pdb), &dlen) == SOFTRNIC_EVENT_ESTABLISHED,
		      "raw established");
		printf("connect without CM data: ok (MPA Request private data [%s]); accepted: "
		       "ok (MPA Reply [07 'welcome'] -> FI_CONNECTED with 7 bytes)\n", hx);
		OK(fi_close(&ep->fid));
		RAW(softrnic_qp_destroy(qp));
	}

	/* The provider listening: a Request with [len][data], accepted with CM data. */
	struct fid_pep *pep;
	struct sockaddr_in pa;
	size_t palen = sizeof(pa);
	char at[64];
	OK(fi_passive_ep(fabric, info, &pep, NULL));
	OK(fi_pep_bind(pep, &eq->fid, 0));
	OK(fi_listen(pep));
	OK(fi_getname(&pep->fid, &pa, &palen));
	snprintf(at, sizeof(at), "127.0.0.1:%u", ntohs(pa.sin_port));
	{
		struct softrnic_qp *qp = raw_qp();
		softrnic_conn_param cp = { .ird = 1, .ord = 1, .private_data_len = 4,
					   .private_data = (const uint8_t *)"\x03" "abc" };
		RAW(softrnic_qp_connect(qp, at, &cp));
		got = eq_next(&ev, &b, &err);
		CHECK(ev == FI_CONNREQ && got == (ssize_t)sizeof(b.e) + 3 &&
			      !memcmp(b.data, "abc", 3),
		      "CONNREQ: %zd %u", got, ev);
		struct fid_ep *ep = fab_ep(b.e.info);
		fi_freeinfo(b.e.info);
		OK(fi_accept(ep, "ok!", 3));
		size_t dlen = 0;
		CHECK(raw_event(qp, pdb, sizeof(pdb), &dlen) == SOFTRNIC_EVENT_ESTABLISHED,
		      "raw established");
		hex(pdb, dlen, hx);
		CHECK(dlen == 4 && !memcmp(pdb, "\x03ok!", 4), "reply private data [%s]", hx);
		got = eq_next(&ev, &b, &err);
		CHECK(ev == FI_CONNECTED, "server CONNECTED: %zd %u", got, ev);
		printf("accept: ok (MPA Request [03 'abc'] -> FI_CONNREQ with 3 bytes; "
		       "fi_accept \"ok!\" -> MPA Reply private data [%s])\n", hx);
		OK(fi_close(&ep->fid));
		RAW(softrnic_qp_destroy(qp));
	}

	/* A length octet claiming more than the frame carries; fi_reject with CM data. */
	{
		struct softrnic_qp *qp = raw_qp();
		softrnic_conn_param cp = { .ird = 1, .ord = 1, .private_data_len = 2,
					   .private_data = (const uint8_t *)"\xc8x" };
		RAW(softrnic_qp_connect(qp, at, &cp));
		got = eq_next(&ev, &b, &err);
		CHECK(ev == FI_CONNREQ && got == (ssize_t)sizeof(b.e) + 1 && b.data[0] == 'x',
		      "CONNREQ with a long length octet: %zd %u", got, ev);
		OK(fi_reject(pep, b.e.info->handle, "bye", 3));
		fi_freeinfo(b.e.info);
		size_t dlen = 0;
		CHECK(raw_event(qp, pdb, sizeof(pdb), &dlen) == SOFTRNIC_EVENT_REJECTED,
		      "raw rejected");
		hex(pdb, dlen, hx);
		CHECK(dlen == 4 && !memcmp(pdb, "\x03" "bye", 4), "reject private data [%s]", hx);
		printf("long length octet: ok (MPA Request [c8 78] -> FI_CONNREQ with the 1 byte "
		       "carried); fi_reject \"bye\" -> MPA Reply private data [%s]\n", hx);
		RAW(softrnic_qp_destroy(qp));
	}

	OK(fi_close(&pep->fid));
	RAW(softrnic_listener_destroy(l));
	OK(fi_close(&cq->fid));
	OK(fi_close(&eq->fid));
	OK(fi_close(&domain->fid));
	OK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	RAW(softrnic_rnic_close(rnic));
	printf("fi_cm_layout_check: all checks passed\n");
	return 0;
}
