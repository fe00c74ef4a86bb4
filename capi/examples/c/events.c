/* events: a server RNIC whose two QPs take their receives from one shared receive queue,
 * with its receive CQ on a completion channel: it sleeps in poll(2) on the channel's file
 * descriptor until completions arrive, gets the SRQ limit as an asynchronous event, and
 * sees the Terminate it sends for a bad RDMA Write as an event; the client sees it too.
 * Prints one line per step and exits 0 on success.
 *
 *   cc -Wall -Wextra -Werror -I capi/include capi/examples/c/events.c \
 *      -L target/debug -lsoftrnic -Wl,-rpath,target/debug -pthread -o events
 */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "softrnic.h"

#define TIMEOUT_MS 10000
#define QPS 2
#define MSGS 4
#define SIZE 1024
#define SPARE 2

#define CHECK(call)                                                                      \
    do {                                                                                 \
        int rc_ = (call);                                                                \
        if (rc_ < 0) {                                                                   \
            fprintf(stderr, "%s:%d: %s failed: %d (%s): %s\n", __FILE__, __LINE__, #call, \
                    rc_, softrnic_strerror(rc_), softrnic_last_error());                 \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

#define EXPECT(cond)                                                             \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);  \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

struct accept_args {
    softrnic_listener *listener;
    softrnic_qp *qp;
    int rc;
};

static void *accept_thread(void *p) {
    struct accept_args *a = p;
    a->rc = softrnic_qp_passive_connect(a->listener, a->qp, NULL, TIMEOUT_MS);
    return NULL;
}

/* Waits for the next asynchronous event of `kind` on `rnic` (others are skipped). */
static softrnic_event wait_event(softrnic_rnic *rnic, uint32_t kind) {
    struct pollfd pfd = {.fd = softrnic_rnic_event_fd(rnic), .events = POLLIN};
    CHECK(pfd.fd);
    for (int round = 0; round < 100; round++) {
        softrnic_event e;
        int n;
        while ((n = softrnic_rnic_poll_event(rnic, &e)) == 1) {
            if (e.kind == kind)
                return e;
        }
        CHECK(n);
        poll(&pfd, 1, 100);
    }
    fprintf(stderr, "event %u did not come\n", kind);
    exit(1);
}

int main(void) {
    softrnic_rnic *srv, *cli;
    softrnic_pd *spd, *cpd;
    CHECK(softrnic_rnic_open(0, &srv));
    CHECK(softrnic_rnic_open(0, &cli));
    CHECK(softrnic_pd_allocate(srv, &spd));
    CHECK(softrnic_pd_allocate(cli, &cpd));

    /* Server: a completion channel, a receive CQ on it, a plain send CQ, one SRQ. */
    softrnic_channel *ch;
    CHECK(softrnic_channel_create(srv, &ch));
    softrnic_cq *rcq, *scq, *ccq;
    CHECK(softrnic_cq_create_with_channel(srv, 64, ch, &rcq));
    CHECK(softrnic_cq_create(srv, 64, &scq));
    CHECK(softrnic_cq_create(cli, 64, &ccq));
    EXPECT(softrnic_cq_arm(scq, 0) == SOFTRNIC_ERR_INVALID_ARG);
    softrnic_srq *srq;
    CHECK(softrnic_srq_create(spd, 32, 1, &srq));
    uint32_t srq_id;
    CHECK(softrnic_srq_id(srq, &srq_id));
    softrnic_mr *sink;
    CHECK(softrnic_nsmr_register(spd, (QPS * MSGS + SPARE) * SIZE, SOFTRNIC_ACCESS_LOCAL_WRITE,
                                 &sink));
    softrnic_mr_info si;
    CHECK(softrnic_mr_query(sink, &si));
    for (int i = 0; i < QPS * MSGS + SPARE; i++) {
        softrnic_sge sge = {.to = si.base_to + (uint64_t)i * SIZE, .len = SIZE, .stag = si.stag};
        softrnic_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1};
        CHECK(softrnic_srq_post_recv(srq, &wr));
    }
    CHECK(softrnic_srq_arm_limit(srq, SPARE + 1));

    /* QPS connections; the server's QPs on the SRQ. */
    softrnic_listener *lis;
    CHECK(softrnic_listen(srv, "127.0.0.1:0", &lis));
    uint16_t port;
    CHECK(softrnic_listener_port(lis, &port));
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", (unsigned)port);
    softrnic_qp *sqp[QPS], *cqp[QPS];
    uint32_t sqp_id[QPS];
    for (int k = 0; k < QPS; k++) {
        CHECK(softrnic_qp_create_with_srq(spd, scq, rcq, srq, NULL, &sqp[k]));
        CHECK(softrnic_qp_id(sqp[k], &sqp_id[k]));
        CHECK(softrnic_qp_create(cpd, ccq, ccq, NULL, &cqp[k]));
        struct accept_args acc = {.listener = lis, .qp = sqp[k], .rc = -1};
        pthread_t t;
        EXPECT(pthread_create(&t, NULL, accept_thread, &acc) == 0);
        CHECK(softrnic_qp_active_connect(cqp[k], addr, NULL, TIMEOUT_MS));
        EXPECT(pthread_join(t, NULL) == 0);
        CHECK(acc.rc);
    }
    softrnic_sge none = {0};
    softrnic_recv_wr own = {.wr_id = 1, .sg_list = &none, .num_sge = 0};
    EXPECT(softrnic_qp_post_rq(sqp[0], &own) < 0);
    EXPECT(softrnic_srq_destroy(srq) == SOFTRNIC_ERR_BUSY);
    EXPECT(softrnic_channel_destroy(ch) == SOFTRNIC_ERR_BUSY);
    softrnic_event est = wait_event(srv, SOFTRNIC_EVENT_ESTABLISHED);
    EXPECT(est.qp_id == sqp_id[0] || est.qp_id == sqp_id[1]);
    printf("connect: ok (%d QPs on one SRQ)\n", QPS);

    /* The client sends MSGS messages on each QP, each tagged with its number. */
    softrnic_mr *src;
    CHECK(softrnic_nsmr_register(cpd, QPS * MSGS * SIZE, SOFTRNIC_ACCESS_LOCAL_WRITE, &src));
    softrnic_mr_info ci;
    CHECK(softrnic_mr_query(src, &ci));
    uint8_t msg[SIZE];
    for (int k = 0; k < QPS; k++) {
        for (int m = 0; m < MSGS; m++) {
            int id = k * MSGS + m;
            for (int i = 0; i < SIZE; i++)
                msg[i] = (uint8_t)(id * 31 + i);
            CHECK(softrnic_mr_write(src, (size_t)id * SIZE, msg, SIZE));
            softrnic_sge sge = {.to = ci.base_to + (uint64_t)id * SIZE, .len = SIZE,
                                .stag = ci.stag};
            softrnic_send_wr wr;
            memset(&wr, 0, sizeof wr);
            wr.wr_id = (uint64_t)id;
            wr.opcode = SOFTRNIC_WR_SEND;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            CHECK(softrnic_qp_post_sq(cqp[k], &wr));
        }
    }

    /* The server sleeps on the channel: arm, drain, wait for the CQ to fire. */
    struct pollfd pfd = {.fd = softrnic_channel_fd(ch), .events = POLLIN};
    CHECK(pfd.fd);
    int got = 0, wakeups = 0, per_qp[QPS] = {0};
    while (got < QPS * MSGS) {
        CHECK(softrnic_cq_arm(rcq, 0));
        softrnic_wc wc[8];
        int n;
        while ((n = softrnic_cq_poll(rcq, wc, 8)) > 0) {
            for (int i = 0; i < n; i++) {
                EXPECT(wc[i].status == SOFTRNIC_WC_SUCCESS && wc[i].byte_len == SIZE);
                uint8_t back[SIZE];
                CHECK(softrnic_mr_read(sink, (size_t)wc[i].wr_id * SIZE, back, SIZE));
                int id;
                for (id = 0; id < QPS * MSGS; id++)
                    if (back[0] == (uint8_t)(id * 31) && back[1] == (uint8_t)(id * 31 + 1))
                        break;
                EXPECT(id < QPS * MSGS);
                for (int j = 0; j < SIZE; j++)
                    EXPECT(back[j] == (uint8_t)(id * 31 + j));
                EXPECT(wc[i].qp_id == sqp_id[id / MSGS]);
                per_qp[id / MSGS]++;
                got++;
            }
        }
        CHECK(n);
        if (got == QPS * MSGS)
            break;
        EXPECT(poll(&pfd, 1, TIMEOUT_MS) == 1);
        softrnic_cq *fired;
        CHECK(softrnic_channel_get_cq(ch, 0, &fired));
        EXPECT(fired == rcq);
        wakeups++;
    }
    for (int k = 0; k < QPS; k++)
        EXPECT(per_qp[k] == MSGS);
    printf("completion channel: ok (%d receives, %d wake-ups)\n", got, wakeups);

    softrnic_event lim = wait_event(srv, SOFTRNIC_EVENT_SRQ_LIMIT);
    EXPECT(lim.detail == srq_id);
    printf("srq limit event: ok (SRQ %u)\n", lim.detail);

    /* An RDMA Write to an STag the server does not have: the server sends a Terminate
     * (DDP, Tagged Buffer, Invalid STag: layer 1, type 1, code 0). */
    softrnic_send_wr bad;
    memset(&bad, 0, sizeof bad);
    softrnic_sge one = {.to = ci.base_to, .len = 16, .stag = ci.stag};
    bad.wr_id = 99;
    bad.opcode = SOFTRNIC_WR_RDMA_WRITE;
    bad.sg_list = &one;
    bad.num_sge = 1;
    bad.remote_stag = 0xdead00;
    bad.remote_to = 0;
    CHECK(softrnic_qp_post_sq(cqp[0], &bad));
    softrnic_event ts = wait_event(srv, SOFTRNIC_EVENT_TERMINATE_SENT);
    EXPECT(ts.qp_id == sqp_id[0] && ts.detail == 0x1100);
    softrnic_event tr = wait_event(cli, SOFTRNIC_EVENT_TERMINATE_RECEIVED);
    EXPECT(tr.detail == 0x1100);
    printf("terminate events: ok (sent and received, cause 0x%04x)\n", ts.detail);

    for (int k = 0; k < QPS; k++) {
        CHECK(softrnic_qp_destroy(sqp[k]));
        CHECK(softrnic_qp_destroy(cqp[k]));
    }
    CHECK(softrnic_srq_destroy(srq));
    CHECK(softrnic_cq_destroy(rcq));
    CHECK(softrnic_channel_destroy(ch));
    CHECK(softrnic_rnic_close(srv));
    CHECK(softrnic_rnic_close(cli));
    printf("teardown: ok\n");
    return 0;
}
