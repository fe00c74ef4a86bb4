/* fi_delay_check: FI_SOFTRNIC_FIRST_FPDU_DELAY_MS (the caller sets it to 400): an active
 * endpoint holds its first message that long after the MPA Reply, the hold that Linux siw
 * 6.1 peers need (siw moves the connection to its QP only after sending the Reply and does
 * not see an FPDU that arrives in between; RFC 5044 §7.1.2 lets the initiator send once it
 * has the Reply). A Send posted as soon as the client is connected reaches the server no
 * sooner than 400 ms after fi_connect was called, with its bytes intact; a second Send on
 * the same connection is not held again (measured: printed, not judged).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "pair.h"

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void cq_wait(struct fid_cq *cq, const char *what)
{
	struct fi_cq_data_entry e;
	for (int i = 0; i < 1000; i++) {
		ssize_t r = fi_cq_sread(cq, &e, 1, NULL, 10);
		if (r == 1)
			return;
		CHECK(r == -FI_EAGAIN, "%s: fi_cq_sread = %zd", what, r);
	}
	CHECK(0, "%s: no completion", what);
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	const char *env = getenv("FI_SOFTRNIC_FIRST_FPDU_DELAY_MS");
	double hold = env ? atof(env) : 0;

	CHECK(hold > 0, "FI_SOFTRNIC_FIRST_FPDU_DELAY_MS is not set");
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("softrnic");
	OK(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "0", FI_SOURCE, hints, &info));

	double t0 = now_ms();
	pair_connect(info, 64);
	double connected = now_ms() - t0;

	char *buf = aligned_alloc(4096, 4096);
	struct fid_mr *mr;
	OK(fi_mr_reg(domain, buf, 4096, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL));
	char *rx = buf, *tx = buf + 2048;
	OK(fi_recv(sep, rx, 64, fi_mr_desc(mr), 0, NULL));
	memcpy(tx, "first message", 14);
	OK(fi_send(cep, tx, 14, fi_mr_desc(mr), 0, NULL));
	cq_wait(scq, "first recv");
	double first = now_ms() - t0;
	cq_wait(ccq, "first send");
	CHECK(!memcmp(rx, "first message", 14), "first message bytes");
	CHECK(first >= hold, "the first message arrived %.0f ms after fi_connect, before the "
			     "%.0f ms hold", first, hold);
	printf("first message: ok (held: arrived %.0f ms after fi_connect, hold %.0f ms)\n",
	       first, hold);

	OK(fi_recv(sep, rx, 64, fi_mr_desc(mr), 0, NULL));
	memcpy(tx, "second", 7);
	double t1 = now_ms();
	OK(fi_send(cep, tx, 7, fi_mr_desc(mr), 0, NULL));
	cq_wait(scq, "second recv");
	double second = now_ms() - t1;
	cq_wait(ccq, "second send");
	CHECK(!memcmp(rx, "second", 7), "second message bytes");
	fprintf(stderr, "connected after %.1f ms; second message %.1f ms after its post\n",
		connected, second);
	printf("second message: ok\n");

	pair_close_eps();
	OK(fi_close(&mr->fid));
	pair_close();
	free(buf);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("fi_delay_check: all checks passed\n");
	return 0;
}
