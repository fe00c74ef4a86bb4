/* pingpong: two softrnic RNICs in one process, connected over loopback TCP (MPA), doing
 * Send/Receive, RDMA Write, RDMA Read, Fetch and Add, Compare and Swap, Send with Invalidate,
 * Local Invalidate, fast registration, a memory window, a shared and a re-registered region,
 * an RDMA Write ping-pong polling memory with softrnic_rnic_assist, and a requested Terminate
 * through the C ABI, each verified. Prints one line per operation and exits 0 on success.
 *
 *   cc -Wall -Wextra -Werror -I capi/include capi/examples/c/pingpong.c \
 *      -L target/debug -lsoftrnic -Wl,-rpath,target/debug -pthread -o pingpong
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "softrnic.h"

#define TIMEOUT_MS 10000
#define BUF_LEN 65536

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

struct side {
    softrnic_rnic *rnic;
    softrnic_pd *pd;
    softrnic_cq *cq;
    softrnic_qp *qp;
};

struct accept_args {
    softrnic_listener *listener;
    softrnic_qp *qp;
    int rc;
};

static void *accept_thread(void *p) {
    struct accept_args *a = p;
    a->rc = softrnic_qp_passive_connect(a->listener, a->qp, NULL, TIMEOUT_MS);
    if (a->rc < 0)
        fprintf(stderr, "passive connect: %s\n", softrnic_last_error());
    return NULL;
}

static void open_side(struct side *s) {
    CHECK(softrnic_rnic_open(0, &s->rnic));
    CHECK(softrnic_pd_allocate(s->rnic, &s->pd));
    CHECK(softrnic_cq_create(s->rnic, 64, &s->cq));
    CHECK(softrnic_qp_create(s->pd, s->cq, s->cq, NULL, &s->qp));
}

/* Waits for one completion and checks its wr_id, opcode and status. */
static softrnic_wc wait_wc(softrnic_cq *cq, uint64_t wr_id, softrnic_wc_opcode opcode) {
    softrnic_wc wc;
    int n = softrnic_cq_poll_block(cq, &wc, 1, TIMEOUT_MS);
    CHECK(n);
    EXPECT(n == 1);
    if (wc.status != SOFTRNIC_WC_SUCCESS || wc.wr_id != wr_id || wc.opcode != opcode) {
        fprintf(stderr, "completion: wr_id %llu opcode %d status %d, expected %llu %d success\n",
                (unsigned long long)wc.wr_id, (int)wc.opcode, (int)wc.status,
                (unsigned long long)wr_id, (int)opcode);
        exit(1);
    }
    return wc;
}

/* Spins until the RDMA Write placed `want` at `slot`, doing both RNICs' progress meanwhile. */
static void assist_until(const uint64_t *slot, uint64_t want, softrnic_rnic *a, softrnic_rnic *b) {
    while (__atomic_load_n(slot, __ATOMIC_ACQUIRE) != want) {
        CHECK(softrnic_rnic_assist(a));
        CHECK(softrnic_rnic_assist(b));
    }
}

/* Polls (never blocks) until one completion comes, and checks it as wait_wc does. */
static void spin_wc(softrnic_cq *cq, uint64_t wr_id, softrnic_wc_opcode opcode) {
    softrnic_wc wc;
    int n;
    while ((n = softrnic_cq_poll(cq, &wc, 1)) == 0)
        ;
    CHECK(n);
    EXPECT(wc.status == SOFTRNIC_WC_SUCCESS && wc.wr_id == wr_id && wc.opcode == opcode);
}

static void post_recv(softrnic_qp *qp, uint64_t wr_id, uint32_t stag, uint64_t to, uint32_t len) {
    softrnic_sge sge = {.to = to, .len = len, .stag = stag};
    softrnic_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1};
    CHECK(softrnic_qp_post_rq(qp, &wr));
}

static void post_send(softrnic_qp *qp, uint64_t wr_id, softrnic_wr_opcode op, softrnic_sge sge,
                      uint32_t remote_stag, uint64_t remote_to) {
    softrnic_send_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.remote_stag = remote_stag;
    wr.remote_to = remote_to;
    CHECK(softrnic_qp_post_sq(qp, &wr));
}

int main(void) {
    struct side srv, cli;
    open_side(&srv);
    open_side(&cli);

    /* Server memory: its own buffer (caller memory), open to the peer's Writes, Reads
     * and atomics. */
    uint8_t *sbuf = aligned_alloc(4096, BUF_LEN);
    EXPECT(sbuf != NULL);
    memset(sbuf, 0, BUF_LEN);
    softrnic_mr *smr;
    CHECK(softrnic_nsmr_register_mem(srv.pd, sbuf, BUF_LEN,
                                     SOFTRNIC_ACCESS_LOCAL_WRITE | SOFTRNIC_ACCESS_REMOTE_WRITE |
                                         SOFTRNIC_ACCESS_REMOTE_READ |
                                         SOFTRNIC_ACCESS_REMOTE_ATOMIC,
                                     &smr));
    softrnic_mr_info si;
    CHECK(softrnic_mr_query(smr, &si));
    EXPECT(si.addr == sbuf && si.length == BUF_LEN && si.base_to == (uint64_t)(uintptr_t)sbuf);

    /* Client memory: allocated by the library, reached with softrnic_mr_write/read
     * (RDMA Read sinks need remote write too). */
    softrnic_mr *cmr;
    CHECK(softrnic_nsmr_register(cli.pd, BUF_LEN,
                                 SOFTRNIC_ACCESS_LOCAL_WRITE | SOFTRNIC_ACCESS_REMOTE_WRITE, &cmr));
    softrnic_mr_info ci;
    CHECK(softrnic_mr_query(cmr, &ci));

    /* Receives posted before the connection: the server's for the ping and the write
     * notice, the client's for the pong. */
    post_recv(srv.qp, 100, si.stag, si.base_to, 256);
    post_recv(srv.qp, 101, si.stag, si.base_to + 256, 256);
    post_recv(cli.qp, 200, ci.stag, ci.base_to + 1024, 256);

    /* Connect: listener on 127.0.0.1 port 0, its actual port from the handle. */
    softrnic_listener *lis;
    CHECK(softrnic_listen(srv.rnic, "127.0.0.1:0", &lis));
    uint16_t port;
    CHECK(softrnic_listener_port(lis, &port));
    char laddr[64];
    int alen = softrnic_listener_addr(lis, laddr, sizeof laddr);
    CHECK(alen);
    EXPECT((size_t)alen < sizeof laddr && strstr(laddr, "127.0.0.1") != NULL);
    struct accept_args acc = {.listener = lis, .qp = srv.qp, .rc = -1};
    pthread_t t;
    EXPECT(pthread_create(&t, NULL, accept_thread, &acc) == 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", (unsigned)port);
    CHECK(softrnic_qp_active_connect(cli.qp, addr, NULL, TIMEOUT_MS));
    EXPECT(pthread_join(t, NULL) == 0);
    CHECK(acc.rc);
    printf("connect: ok (%s)\n", laddr);

    /* Send / Receive: ping, then pong. */
    const char ping[] = "ping from C over softrnic";
    CHECK(softrnic_mr_write(cmr, 0, ping, sizeof ping));
    post_send(cli.qp, 1, SOFTRNIC_WR_SEND,
              (softrnic_sge){.to = ci.base_to, .len = sizeof ping, .stag = ci.stag}, 0, 0);
    wait_wc(cli.cq, 1, SOFTRNIC_WC_SEND);
    softrnic_wc rwc = wait_wc(srv.cq, 100, SOFTRNIC_WC_RECV);
    EXPECT(rwc.byte_len == sizeof ping && memcmp(sbuf, ping, sizeof ping) == 0);
    const char pong[] = "pong";
    memcpy(sbuf + 512, pong, sizeof pong);
    post_send(srv.qp, 2, SOFTRNIC_WR_SEND,
              (softrnic_sge){.to = si.base_to + 512, .len = sizeof pong, .stag = si.stag}, 0, 0);
    wait_wc(srv.cq, 2, SOFTRNIC_WC_SEND);
    wait_wc(cli.cq, 200, SOFTRNIC_WC_RECV);
    char got[sizeof pong];
    CHECK(softrnic_mr_read(cmr, 1024, got, sizeof pong));
    EXPECT(memcmp(got, pong, sizeof pong) == 0);
    printf("send/recv: ok (%zu bytes ping, %zu bytes pong)\n", sizeof ping, sizeof pong);

    /* RDMA Write of 16 KiB into the server's buffer at offset 4096, then a Send that
     * tells the server it is placed (a Send completes after earlier Writes are placed). */
    enum { WLEN = 16384, WOFF = 4096 };
    uint8_t *pattern = malloc(WLEN);
    EXPECT(pattern != NULL);
    for (int i = 0; i < WLEN; i++)
        pattern[i] = (uint8_t)(i * 7 + 3);
    CHECK(softrnic_mr_write(cmr, 8192, pattern, WLEN));
    post_send(cli.qp, 3, SOFTRNIC_WR_RDMA_WRITE,
              (softrnic_sge){.to = ci.base_to + 8192, .len = WLEN, .stag = ci.stag}, si.stag,
              si.base_to + WOFF);
    post_send(cli.qp, 4, SOFTRNIC_WR_SEND,
              (softrnic_sge){.to = ci.base_to, .len = 4, .stag = ci.stag}, 0, 0);
    wait_wc(cli.cq, 3, SOFTRNIC_WC_RDMA_WRITE);
    wait_wc(cli.cq, 4, SOFTRNIC_WC_SEND);
    wait_wc(srv.cq, 101, SOFTRNIC_WC_RECV);
    EXPECT(memcmp(sbuf + WOFF, pattern, WLEN) == 0);
    printf("rdma write: ok (%d bytes placed and verified)\n", WLEN);

    /* RDMA Read of 8 KiB the server wrote into its own buffer. */
    enum { RLEN = 8192, ROFF = 32768 };
    for (int i = 0; i < RLEN; i++)
        sbuf[ROFF + i] = (uint8_t)(255 - i % 251);
    post_send(cli.qp, 5, SOFTRNIC_WR_RDMA_READ,
              (softrnic_sge){.to = ci.base_to + 32768, .len = RLEN, .stag = ci.stag}, si.stag,
              si.base_to + ROFF);
    softrnic_wc rd = wait_wc(cli.cq, 5, SOFTRNIC_WC_RDMA_READ);
    EXPECT(rd.byte_len == RLEN);
    uint8_t *back = malloc(RLEN);
    EXPECT(back != NULL);
    CHECK(softrnic_mr_read(cmr, 32768, back, RLEN));
    EXPECT(memcmp(back, sbuf + ROFF, RLEN) == 0);
    printf("rdma read: ok (%d bytes read and verified)\n", RLEN);

    /* An RDMA Write ping-pong that polls memory, as a Write latency test does: each side
     * writes the round's number into the other's buffer and spins on its own until the
     * peer's arrives, calling softrnic_rnic_assist meanwhile. While they poll, the progress
     * threads leave the work to this thread: its posts transmit at once, and the arrivals
     * are placed by its assist calls. */
    enum { ROUNDS = 200, SLOT = 50000 };
    uint64_t *sslot = (uint64_t *)(void *)(sbuf + SLOT);
    uint64_t *cslot = (uint64_t *)(void *)((uint8_t *)ci.addr + SLOT);
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        CHECK(softrnic_mr_write(cmr, SLOT + 8, &i, 8));
        post_send(cli.qp, 1000 + i, SOFTRNIC_WR_RDMA_WRITE,
                  (softrnic_sge){.to = ci.base_to + SLOT + 8, .len = 8, .stag = ci.stag}, si.stag,
                  si.base_to + SLOT);
        assist_until(sslot, i, srv.rnic, cli.rnic);
        memcpy(sbuf + SLOT + 8, &i, 8);
        post_send(srv.qp, 2000 + i, SOFTRNIC_WR_RDMA_WRITE,
                  (softrnic_sge){.to = si.base_to + SLOT + 8, .len = 8, .stag = si.stag}, ci.stag,
                  ci.base_to + SLOT);
        assist_until(cslot, i, srv.rnic, cli.rnic);
        spin_wc(cli.cq, 1000 + i, SOFTRNIC_WC_RDMA_WRITE);
        spin_wc(srv.cq, 2000 + i, SOFTRNIC_WC_RDMA_WRITE);
    }
    CHECK(softrnic_rnic_end_assist(srv.rnic));
    CHECK(softrnic_rnic_end_assist(cli.rnic));
    softrnic_progress_stats sst, cst;
    CHECK(softrnic_rnic_progress_stats(srv.rnic, &sst));
    CHECK(softrnic_rnic_progress_stats(cli.rnic, &cst));
    if (sst.assisted_work == 0 || cst.assisted_work == 0 || sst.inline_posts == 0 ||
        cst.inline_posts == 0) {
        fprintf(stderr,
                "progress stats: server %llu posts sent inline, %llu work assisted; client %llu, "
                "%llu: expected the polling thread to have sent and placed\n",
                (unsigned long long)sst.inline_posts, (unsigned long long)sst.assisted_work,
                (unsigned long long)cst.inline_posts, (unsigned long long)cst.assisted_work);
        exit(1);
    }
    printf("polled write ping-pong: ok (%d round trips, sent and placed by the polling thread)\n",
           ROUNDS);

    /* Fetch and Add on a 64-bit counter of the server. */
    uint64_t counter = 40;
    memcpy(sbuf + 60000, &counter, 8);
    softrnic_sge res = {.to = ci.base_to + 60000, .len = 8, .stag = ci.stag};
    softrnic_send_wr fa;
    memset(&fa, 0, sizeof fa);
    fa.wr_id = 6;
    fa.opcode = SOFTRNIC_WR_FETCH_ADD;
    fa.sg_list = &res;
    fa.num_sge = 1;
    fa.remote_stag = si.stag;
    fa.remote_to = si.base_to + 60000;
    fa.compare_add = 2;
    CHECK(softrnic_qp_post_sq(cli.qp, &fa));
    wait_wc(cli.cq, 6, SOFTRNIC_WC_FETCH_ADD);
    uint64_t orig, now;
    CHECK(softrnic_mr_read(cmr, 60000, &orig, 8));
    memcpy(&now, sbuf + 60000, 8);
    EXPECT(orig == 40 && now == 42);
    printf("fetch and add: ok (40 + 2 = %llu)\n", (unsigned long long)now);

    /* Compare and Swap: 42 becomes 100 (both masks all ones: a plain 64-bit CAS). */
    softrnic_send_wr cs;
    memset(&cs, 0, sizeof cs);
    cs.wr_id = 7;
    cs.opcode = SOFTRNIC_WR_CMP_SWAP;
    cs.sg_list = &res;
    cs.num_sge = 1;
    cs.remote_stag = si.stag;
    cs.remote_to = si.base_to + 60000;
    cs.compare_add = 42;
    cs.compare_add_mask = UINT64_MAX;
    cs.swap = 100;
    cs.swap_mask = UINT64_MAX;
    CHECK(softrnic_qp_post_sq(cli.qp, &cs));
    wait_wc(cli.cq, 7, SOFTRNIC_WC_CMP_SWAP);
    CHECK(softrnic_mr_read(cmr, 60000, &orig, 8));
    memcpy(&now, sbuf + 60000, 8);
    EXPECT(orig == 42 && now == 100);
    printf("compare and swap: ok (42 -> %llu)\n", (unsigned long long)now);

    /* Send with Invalidate: the client's message invalidates a server region; the server
     * sees which in its receive completion and releases the STag. */
    softrnic_mr *sinv;
    CHECK(softrnic_nsmr_register(srv.pd, 4096,
                                 SOFTRNIC_ACCESS_LOCAL_WRITE | SOFTRNIC_ACCESS_REMOTE_WRITE, &sinv));
    softrnic_mr_info ii;
    CHECK(softrnic_mr_query(sinv, &ii));
    post_recv(srv.qp, 102, si.stag, si.base_to + 1024, 256);
    softrnic_send_wr sw;
    memset(&sw, 0, sizeof sw);
    softrnic_sge msg = {.to = ci.base_to, .len = 4, .stag = ci.stag};
    sw.wr_id = 8;
    sw.opcode = SOFTRNIC_WR_SEND_WITH_INV;
    sw.sg_list = &msg;
    sw.num_sge = 1;
    sw.invalidate_stag = ii.stag;
    CHECK(softrnic_qp_post_sq(cli.qp, &sw));
    wait_wc(cli.cq, 8, SOFTRNIC_WC_SEND);
    softrnic_wc iwc = wait_wc(srv.cq, 102, SOFTRNIC_WC_RECV);
    EXPECT((iwc.flags & SOFTRNIC_WC_WITH_INV) && iwc.invalidated_stag == ii.stag);
    CHECK(softrnic_deallocate_stag(srv.rnic, ii.stag));
    EXPECT(softrnic_mr_query(sinv, &ii) == SOFTRNIC_ERR_BAD_HANDLE);
    printf("send with invalidate: ok (peer STag invalidated and deallocated)\n");

    /* Local Invalidate of a client region, in send-queue order. */
    softrnic_mr *cinv;
    CHECK(softrnic_nsmr_register(cli.pd, 4096, SOFTRNIC_ACCESS_LOCAL_WRITE, &cinv));
    softrnic_mr_info li;
    CHECK(softrnic_mr_query(cinv, &li));
    EXPECT(softrnic_deallocate_stag(cli.rnic, li.stag) == SOFTRNIC_ERR_STAG_VALID);
    softrnic_send_wr linv;
    memset(&linv, 0, sizeof linv);
    linv.wr_id = 9;
    linv.opcode = SOFTRNIC_WR_LOCAL_INV;
    linv.invalidate_stag = li.stag;
    CHECK(softrnic_qp_post_sq(cli.qp, &linv));
    wait_wc(cli.cq, 9, SOFTRNIC_WC_LOCAL_INV);
    CHECK(softrnic_deallocate_stag(cli.rnic, li.stag));
    printf("local invalidate: ok (STag invalidated and deallocated)\n");

    /* Fast registration: an STag with no memory gets 4 KiB of the server's buffer
     * (zero-based) from a Fast Register work request; the client writes through it and
     * reads it back; a Local Invalidate ends it. */
    enum { FOFF = 32768, FLEN = 4096 };
    uint32_t fr;
    CHECK(softrnic_allocate_stag(srv.pd, FLEN, &fr));
    CHECK(softrnic_fast_reg_map(srv.pd, fr, smr, FOFF, FLEN, 1));
    CHECK(softrnic_qp_post_fast_reg(srv.qp, 10, fr,
                                    SOFTRNIC_ACCESS_LOCAL_WRITE | SOFTRNIC_ACCESS_REMOTE_WRITE |
                                        SOFTRNIC_ACCESS_REMOTE_READ,
                                    0));
    wait_wc(srv.cq, 10, SOFTRNIC_WC_FAST_REG);
    for (int i = 0; i < FLEN; i++)
        pattern[i] = (uint8_t)(i * 7 + 3);
    CHECK(softrnic_mr_write(cmr, 0, pattern, FLEN));
    post_send(cli.qp, 11, SOFTRNIC_WR_RDMA_WRITE,
              (softrnic_sge){.to = ci.base_to, .len = FLEN, .stag = ci.stag}, fr, 0);
    wait_wc(cli.cq, 11, SOFTRNIC_WC_RDMA_WRITE);
    /* The Read is answered after the Write is placed (RFC 5040 §5.5). */
    post_send(cli.qp, 12, SOFTRNIC_WR_RDMA_READ,
              (softrnic_sge){.to = ci.base_to + FLEN, .len = FLEN, .stag = ci.stag}, fr, 0);
    wait_wc(cli.cq, 12, SOFTRNIC_WC_RDMA_READ);
    CHECK(softrnic_mr_read(cmr, FLEN, back, FLEN));
    EXPECT(memcmp(back, pattern, FLEN) == 0 && memcmp(sbuf + FOFF, pattern, FLEN) == 0);
    softrnic_send_wr finv;
    memset(&finv, 0, sizeof finv);
    finv.wr_id = 13;
    finv.opcode = SOFTRNIC_WR_LOCAL_INV;
    finv.invalidate_stag = fr;
    CHECK(softrnic_qp_post_sq(srv.qp, &finv));
    wait_wc(srv.cq, 13, SOFTRNIC_WC_LOCAL_INV);
    CHECK(softrnic_deallocate_stag(srv.rnic, fr));
    printf("fast register: ok (%d bytes written and read through it, invalidated)\n", FLEN);

    /* A Type 1 memory window: read-only, zero-based, over 4 KiB of a region that allows
     * window binds; the client reads through it; a bind of length 0 unbinds it. */
    softrnic_mr *wmr;
    CHECK(softrnic_nsmr_register(srv.pd, 8192,
                                 SOFTRNIC_ACCESS_LOCAL_WRITE | SOFTRNIC_ACCESS_REMOTE_READ |
                                     SOFTRNIC_ACCESS_MW_BIND,
                                 &wmr));
    CHECK(softrnic_mr_write(wmr, 4096, pattern, 4096));
    uint32_t mw;
    CHECK(softrnic_allocate_window(srv.pd, 1, &mw));
    EXPECT(softrnic_allocate_window(srv.pd, 3, &mw) == SOFTRNIC_ERR_INVALID_ARG);
    CHECK(softrnic_bind_window(srv.pd, mw, wmr, 4096, 4096, SOFTRNIC_ACCESS_REMOTE_READ, 1));
    EXPECT(softrnic_bind_window(srv.pd, mw, wmr, 4096, 8192, SOFTRNIC_ACCESS_REMOTE_READ, 1) ==
           SOFTRNIC_ERR_RANGE);
    memset(back, 0, FLEN);
    CHECK(softrnic_mr_write(cmr, 2 * FLEN, back, FLEN));
    post_send(cli.qp, 14, SOFTRNIC_WR_RDMA_READ,
              (softrnic_sge){.to = ci.base_to + 2 * FLEN, .len = 4096, .stag = ci.stag}, mw, 0);
    wait_wc(cli.cq, 14, SOFTRNIC_WC_RDMA_READ);
    CHECK(softrnic_mr_read(cmr, 2 * FLEN, back, 4096));
    EXPECT(memcmp(back, pattern, 4096) == 0);
    EXPECT(softrnic_deregister_mem(wmr) == SOFTRNIC_ERR_BUSY);
    uint32_t mw2 = (mw & ~0xffu) | ((mw + 1) & 0xffu);
    CHECK(softrnic_bind_window(srv.pd, mw2, wmr, 0, 0, SOFTRNIC_ACCESS_REMOTE_READ, 1));
    CHECK(softrnic_deallocate_stag(srv.rnic, mw2));
    CHECK(softrnic_deregister_mem(wmr));
    printf("memory window: ok (4096 bytes read through a read-only Type 1 window)\n");

    /* A shared region: a read-only region registered again with write rights; the client
     * writes through the shared STag and the bytes appear in the original. Then the original
     * is re-registered with write rights and written through its own STag. */
    softrnic_mr *ro, *rw;
    CHECK(softrnic_nsmr_register(srv.pd, 4096,
                                 SOFTRNIC_ACCESS_LOCAL_WRITE | SOFTRNIC_ACCESS_REMOTE_READ, &ro));
    CHECK(softrnic_smr_register(ro, srv.pd,
                                SOFTRNIC_ACCESS_LOCAL_WRITE | SOFTRNIC_ACCESS_REMOTE_WRITE |
                                    SOFTRNIC_ACCESS_REMOTE_READ,
                                &rw));
    softrnic_mr_info roi, rwi;
    CHECK(softrnic_mr_query(ro, &roi));
    CHECK(softrnic_mr_query(rw, &rwi));
    EXPECT(roi.stag != rwi.stag && roi.addr == rwi.addr && rwi.base_to == roi.base_to);
    for (int i = 0; i < 4096; i++)
        pattern[i] = (uint8_t)(i * 13 + 1);
    CHECK(softrnic_mr_write(cmr, 0, pattern, 4096));
    post_send(cli.qp, 15, SOFTRNIC_WR_RDMA_WRITE,
              (softrnic_sge){.to = ci.base_to, .len = 2048, .stag = ci.stag}, rwi.stag,
              rwi.base_to);
    wait_wc(cli.cq, 15, SOFTRNIC_WC_RDMA_WRITE);
    CHECK(softrnic_nsmr_reregister(ro, SOFTRNIC_REREG_ACCESS, NULL,
                                   SOFTRNIC_ACCESS_LOCAL_WRITE | SOFTRNIC_ACCESS_REMOTE_WRITE));
    EXPECT(softrnic_nsmr_reregister(ro, 0x80, NULL, 0) == SOFTRNIC_ERR_INVALID_ARG);
    CHECK(softrnic_mr_query(ro, &roi));
    EXPECT(roi.access == (SOFTRNIC_ACCESS_LOCAL_WRITE | SOFTRNIC_ACCESS_REMOTE_WRITE));
    post_send(cli.qp, 16, SOFTRNIC_WR_RDMA_WRITE,
              (softrnic_sge){.to = ci.base_to + 2048, .len = 2048, .stag = ci.stag}, roi.stag,
              roi.base_to + 2048);
    wait_wc(cli.cq, 16, SOFTRNIC_WC_RDMA_WRITE);
    /* An RDMA Write completes when handed to the transport: a Read behind it returns once
     * both are placed (RFC 5040 §5.5). */
    post_send(cli.qp, 17, SOFTRNIC_WR_RDMA_READ,
              (softrnic_sge){.to = ci.base_to + 4096, .len = 4096, .stag = ci.stag}, rwi.stag,
              rwi.base_to);
    wait_wc(cli.cq, 17, SOFTRNIC_WC_RDMA_READ);
    CHECK(softrnic_mr_read(ro, 0, back, 4096));
    EXPECT(memcmp(back, pattern, 4096) == 0);
    CHECK(softrnic_deregister_mem(rw));
    CHECK(softrnic_deregister_mem(ro));
    printf("shared region: ok (4096 bytes written through a shared and a re-registered STag)\n");

    /* QP state: RTS, then a requested Terminate ends the server's QP. */
    uint32_t st;
    CHECK(softrnic_qp_state(srv.qp, &st));
    EXPECT(st == SOFTRNIC_QPS_RTS);
    EXPECT(softrnic_qp_modify(srv.qp, SOFTRNIC_QPS_RTS) == SOFTRNIC_ERR_QP_STATE);
    CHECK(softrnic_qp_modify(srv.qp, SOFTRNIC_QPS_TERMINATE));
    for (int i = 0; i < 1000; i++) {
        CHECK(softrnic_qp_state(srv.qp, &st));
        if (st == SOFTRNIC_QPS_ERROR)
            break;
        softrnic_wc none;
        softrnic_cq_poll_block(srv.cq, &none, 1, 10);
    }
    EXPECT(st == SOFTRNIC_QPS_ERROR);
    printf("qp modify: ok (RTS -> TERMINATE -> ERROR)\n");

    /* Tear down in verbs order. */
    CHECK(softrnic_qp_disconnect(cli.qp));
    CHECK(softrnic_qp_destroy(cli.qp));
    CHECK(softrnic_qp_destroy(srv.qp));
    CHECK(softrnic_listener_destroy(lis));
    CHECK(softrnic_deregister_mem(cmr));
    /* SOFTRNIC_OK from deregistering caller memory: the library holds it no more. */
    CHECK(softrnic_deregister_mem(smr));
    free(sbuf);
    CHECK(softrnic_cq_destroy(cli.cq));
    CHECK(softrnic_cq_destroy(srv.cq));
    CHECK(softrnic_pd_deallocate(cli.pd));
    CHECK(softrnic_pd_deallocate(srv.pd));
    CHECK(softrnic_rnic_close(cli.rnic));
    CHECK(softrnic_rnic_close(srv.rnic));
    free(pattern);
    free(back);
    printf("teardown: ok\n");
    return 0;
}
