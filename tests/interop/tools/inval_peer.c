/*
 * inval-peer: the initiator of the lab's remote-invalidation exchange (scenario
 * siw-send-invalidate), written against librdmacm and libibverbs so that it runs on Linux siw
 * in a lab guest. It is built on the host (tools/build-inval-peer.sh) and linked dynamically
 * against the guest's libibverbs.so.1 and librdmacm.so.1.
 *
 *   inval-peer -a HOST [-p PORT] [-t SECONDS] [-s]
 *
 * One connection per run. The target (verbs/examples/invalidate_peer.rs) advertises one STag;
 * this program sends a Send with Invalidate naming it (IBV_WR_SEND_WITH_INV, invalidate_rkey:
 * RFC 5040 section 5.3) and, when the target says it invalidated the STag, an RDMA Write of
 * the advertised length to it, which the target must refuse with a Terminate. The messages
 * (big endian), each a Send:
 *
 *   here -> target  "HELO" u32 0                              (the initiator's first FPDU)
 *   target -> here  "ADVT" u32 case u32 stag u32 len u64 to u32 expect
 *   here -> target  Send with Invalidate of stag, payload "SINV" u32 stag
 *   target -> here  "GOWR" u32 0          (expect 1 only; then the RDMA Write)
 *
 * It prints one line per step ("inval-peer: ...") and what ended the connection. Exit status
 * 0 when every step ran and the connection ended after the access the target must refuse,
 * 1 otherwise, 2 for bad arguments.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define MSG 32
#define WBUF 16384

static struct rdma_event_channel *ch;
static struct rdma_cm_id *id;
static struct ibv_cq *cq;
static int timeout_s = 30;
static int disconnected;
static int strict;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The next CM event of type want (others are printed and skipped); 0 on success. */
static int wait_cm(enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;

	for (;;) {
		if (rdma_get_cm_event(ch, &ev)) {
			perror("inval-peer: rdma_get_cm_event");
			return -1;
		}
		enum rdma_cm_event_type got = ev->event;
		int status = ev->status;

		rdma_ack_cm_event(ev);
		if (got == want)
			return 0;
		printf("inval-peer: CM event %s (status %d) while waiting for %s\n",
		       rdma_event_str(got), status, rdma_event_str(want));
		if (got == RDMA_CM_EVENT_ADDR_ERROR || got == RDMA_CM_EVENT_ROUTE_ERROR ||
		    got == RDMA_CM_EVENT_CONNECT_ERROR || got == RDMA_CM_EVENT_UNREACHABLE ||
		    got == RDMA_CM_EVENT_REJECTED || got == RDMA_CM_EVENT_DISCONNECTED)
			return -1;
	}
}

/* Non-blocking look at the CM channel: notes a disconnect. */
static void poll_cm(void)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(ch, &ev) == 0) {
		printf("inval-peer: CM event %s (status %d)\n", rdma_event_str(ev->event),
		       ev->status);
		if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
			disconnected = 1;
		rdma_ack_cm_event(ev);
	}
}

/* Non-blocking look at the device's asynchronous events. */
static void poll_async(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	while (ibv_get_async_event(ctx, &ev) == 0) {
		printf("inval-peer: async event %s\n", ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
}

/*
 * The next completion, polling for at most timeout_s seconds (CM and async events are
 * printed meanwhile); 0 when one arrived.
 */
static int wait_wc(struct ibv_wc *wc, int stop_on_disconnect)
{
	double end = now() + timeout_s;

	while (now() < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n < 0) {
			printf("inval-peer: ibv_poll_cq failed\n");
			return -1;
		}
		if (n == 1) {
			printf("inval-peer: completion wr_id %llu opcode %d status %s\n",
			       (unsigned long long)wc->wr_id, wc->opcode,
			       ibv_wc_status_str(wc->status));
			return 0;
		}
		poll_cm();
		poll_async(id->verbs);
		if (stop_on_disconnect && disconnected)
			return -1;
		usleep(1000);
	}
	printf("inval-peer: no completion in %d s\n", timeout_s);
	return -1;
}

static int post_recv(struct ibv_mr *mr, char *buf, int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(buf + slot * MSG), .length = MSG, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(id->qp, &wr, &bad);
}

static void usage(void)
{
	fprintf(stderr, "usage: inval-peer -a HOST [-p PORT] [-t SECONDS] [-s]\n");
}

int main(int argc, char **argv)
{
	const char *host = NULL, *port = "7180";
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "a:p:t:s")) != -1) {
		switch (c) {
		case 'a':
			host = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 't':
			timeout_s = atoi(optarg);
			break;
		case 's':
			strict = 1;
			break;
		default:
			usage();
			return 2;
		}
	}
	if (!host || timeout_s <= 0) {
		usage();
		return 2;
	}

	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;

	if (getaddrinfo(host, port, &hints, &ai)) {
		fprintf(stderr, "inval-peer: cannot resolve %s:%s\n", host, port);
		return 2;
	}
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		perror("inval-peer: rdma_create_id");
		return 1;
	}
	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 5000) || wait_cm(RDMA_CM_EVENT_ADDR_RESOLVED))
		return 1;
	if (rdma_resolve_route(id, 5000) || wait_cm(RDMA_CM_EVENT_ROUTE_RESOLVED))
		return 1;
	printf("inval-peer: device %s\n", ibv_get_device_name(id->verbs->device));

	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);

	cq = pd ? ibv_create_cq(id->verbs, 16, NULL, NULL, 0) : NULL;
	if (!cq) {
		perror("inval-peer: PD/CQ");
		return 1;
	}
	struct ibv_qp_init_attr qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	if (rdma_create_qp(id, pd, &qa)) {
		perror("inval-peer: rdma_create_qp");
		return 1;
	}
	static char rbuf[4 * MSG], sbuf[4 * MSG], wbuf[WBUF];
	struct ibv_mr *rmr = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *smr = ibv_reg_mr(pd, sbuf, sizeof(sbuf), 0);
	struct ibv_mr *wmr = ibv_reg_mr(pd, wbuf, sizeof(wbuf), 0);

	if (!rmr || !smr || !wmr) {
		perror("inval-peer: ibv_reg_mr");
		return 1;
	}
	memset(wbuf, 0xa5, sizeof(wbuf));
	if (post_recv(rmr, rbuf, 0) || post_recv(rmr, rbuf, 1)) {
		perror("inval-peer: ibv_post_recv");
		return 1;
	}
	struct rdma_conn_param cp = {
		.responder_resources = 1, .initiator_depth = 1, .retry_count = 7 };
	if (rdma_connect(id, &cp) || wait_cm(RDMA_CM_EVENT_ESTABLISHED)) {
		printf("inval-peer: no connection\n");
		return 1;
	}
	printf("inval-peer: connected to %s:%s\n", host, port);
	/* From here on the CM channel is only looked at between completions. */
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	fcntl(id->verbs->async_fd, F_SETFL, fcntl(id->verbs->async_fd, F_GETFL) | O_NONBLOCK);

	struct ibv_wc wc;
	struct ibv_sge sge = { .addr = (uintptr_t)sbuf, .length = MSG, .lkey = smr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 10, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED }, *bad;

	memcpy(sbuf, "HELO", 4);
	if (ibv_post_send(id->qp, &wr, &bad)) {
		printf("inval-peer: HELO not posted\n");
		return 1;
	}
	/* HELO's completion and the advertisement (receive 0) come in either order. */
	for (int sent = 0, adv = 0; !(sent && adv);) {
		if (wait_wc(&wc, 1) || wc.status != IBV_WC_SUCCESS) {
			printf("inval-peer: no advertisement\n");
			return 1;
		}
		if (wc.wr_id == 10 && wc.opcode == IBV_WC_SEND)
			sent = 1;
		else if (wc.wr_id == 0 && wc.opcode == IBV_WC_RECV && memcmp(rbuf, "ADVT", 4) == 0)
			adv = 1;
	}
	uint32_t kase, stag, len, expect;
	uint64_t to;

	memcpy(&kase, rbuf + 4, 4);
	memcpy(&stag, rbuf + 8, 4);
	memcpy(&len, rbuf + 12, 4);
	memcpy(&to, rbuf + 16, 8);
	memcpy(&expect, rbuf + 24, 4);
	kase = ntohl(kase);
	stag = ntohl(stag);
	len = ntohl(len);
	to = be64toh(to);
	expect = ntohl(expect);
	printf("inval-peer: advertised case %u STag 0x%08x TO 0x%llx length %u expect %u\n", kase,
	       stag, (unsigned long long)to, len, expect);
	if (len > WBUF) {
		printf("inval-peer: length %u is more than %d\n", len, WBUF);
		return 1;
	}

	/* RFC 5040 section 5.3: Send with Invalidate, the STag in the Invalidate STag field. */
	uint32_t be = htonl(stag);

	memcpy(sbuf + MSG, "SINV", 4);
	memcpy(sbuf + MSG + 4, &be, 4);
	sge.addr = (uintptr_t)(sbuf + MSG);
	wr.wr_id = 11;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.invalidate_rkey = stag;
	/*
	 * rdma-core's siw provider (44.0) copies wr.rdma.rkey into the send queue element and
	 * never reads invalidate_rkey: with only invalidate_rkey set, siw sends Send with
	 * Invalidate carrying Invalidate STag 0. Setting both works with every provider (-s sets
	 * invalidate_rkey alone, to see what a provider does with the ibverbs field only).
	 */
	if (!strict)
		wr.wr.rdma.rkey = stag;
	if (ibv_post_send(id->qp, &wr, &bad)) {
		printf("inval-peer: ibv_post_send(IBV_WR_SEND_WITH_INV) refused: %s\n",
		       strerror(errno));
		return 1;
	}
	printf("inval-peer: posted IBV_WR_SEND_WITH_INV invalidate_rkey 0x%08x wr.rdma.rkey 0x%08x\n",
	       stag, wr.wr.rdma.rkey);

	if (expect == 1) {
		/*
		 * The Send's completion and the target's go-ahead (receive 1) come in either
		 * order: siw may report the Send complete after the go-ahead arrived.
		 */
		int sent = 0, go = 0;

		while (!(sent && go)) {
			if (wait_wc(&wc, 1) || wc.status != IBV_WC_SUCCESS) {
				printf("inval-peer: no go-ahead after the Send with Invalidate\n");
				return 1;
			}
			if (wc.wr_id == 11 && wc.opcode == IBV_WC_SEND)
				sent = 1;
			else if (wc.wr_id == 1 && wc.opcode == IBV_WC_RECV &&
				 memcmp(rbuf + MSG, "GOWR", 4) == 0)
				go = 1;
		}
		/* The target invalidated the STag: this Write must be refused. */
		struct ibv_sge ws = { .addr = (uintptr_t)wbuf, .length = len, .lkey = wmr->lkey };
		struct ibv_send_wr ww = {
			.wr_id = 12, .sg_list = &ws, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = { .remote_addr = to, .rkey = stag } };

		if (ibv_post_send(id->qp, &ww, &bad)) {
			printf("inval-peer: RDMA Write not posted: %s\n", strerror(errno));
			return 1;
		}
		printf("inval-peer: posted RDMA Write of %u bytes to STag 0x%08x TO 0x%llx\n", len,
		       stag, (unsigned long long)to);
	}
	/*
	 * The target ends the connection with a Terminate: wait for the disconnect (siw reports
	 * its Write complete once sent, or failed once the Terminate arrived, so its completion
	 * says nothing either way).
	 */
	double end = now() + timeout_s;

	while (!disconnected && now() < end) {
		if (ibv_poll_cq(cq, 1, &wc) == 1)
			printf("inval-peer: completion wr_id %llu opcode %d status %s\n",
			       (unsigned long long)wc.wr_id, wc.opcode,
			       ibv_wc_status_str(wc.status));
		poll_cm();
		poll_async(id->verbs);
		usleep(1000);
	}
	while (ibv_poll_cq(cq, 1, &wc) == 1)
		printf("inval-peer: completion wr_id %llu opcode %d status %s\n",
		       (unsigned long long)wc.wr_id, wc.opcode, ibv_wc_status_str(wc.status));
	if (!disconnected) {
		printf("inval-peer: the connection did not end within %d s\n", timeout_s);
		return 1;
	}
	printf("inval-peer: connection ended by the target (case %u)\n", kase);
	rdma_disconnect(id);
	return 0;
}
