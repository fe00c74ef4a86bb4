/* cm: connection management step by step, in one thread: a connect started without
 * blocking (softrnic_qp_connect), the request taken from the listener unanswered with its
 * private data and peer address, rejected with private data (RFC 5044 §7.1.1: an MPA Reply
 * with the Reject bit carries the responder's private data), which the initiator gets with
 * its REJECTED event; then a second connect accepted with private data both ways
 * (ESTABLISHED events on both QPs with the peer's data). Prints one line per step and
 * exits 0 on success.
 *
 *   cc -Wall -Wextra -Werror -I capi/include capi/examples/c/cm.c \
 *      -L target/debug -lsoftrnic -Wl,-rpath,target/debug -o cm
 */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "softrnic.h"

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

/* Events taken from the RNIC but not yet asked for (with their private data). */
#define KEEP 16
static struct {
    softrnic_event e;
    uint8_t data[512];
    size_t len;
} kept[KEEP];
static int nkept;

/* Waits for the next event of `qp_id`; its private data goes into `data` (512 bytes). */
static softrnic_event next_event(softrnic_rnic *rnic, uint32_t qp_id, uint8_t *data,
                                 size_t *len) {
    struct pollfd pfd = {.fd = softrnic_rnic_event_fd(rnic), .events = POLLIN};
    CHECK(pfd.fd);
    for (int round = 0; round < 1000; round++) {
        for (int i = 0; i < nkept; i++)
            if (kept[i].e.qp_id == qp_id) {
                softrnic_event e = kept[i].e;
                memcpy(data, kept[i].data, kept[i].len);
                *len = kept[i].len;
                kept[i] = kept[--nkept];
                return e;
            }
        softrnic_event e;
        size_t n = 0;
        int got = softrnic_rnic_poll_event_data(rnic, &e, data, 512, &n);
        CHECK(got);
        if (got == 1 && e.qp_id == qp_id) {
            *len = n;
            return e;
        }
        if (got == 1 && nkept < KEEP) {
            kept[nkept].e = e;
            memcpy(kept[nkept].data, data, n < 512 ? n : 512);
            kept[nkept].len = n < 512 ? n : 512;
            nkept++;
        }
        if (got == 0)
            poll(&pfd, 1, 10);
    }
    fprintf(stderr, "no event for QP %u\n", qp_id);
    exit(1);
}

static softrnic_conn_request *next_request(softrnic_listener *l) {
    softrnic_conn_request *req = NULL;
    CHECK(softrnic_listener_get_request(l, 10000, &req));
    return req;
}

int main(void) {
    softrnic_rnic *rnic;
    softrnic_pd *pd;
    softrnic_cq *cq;
    softrnic_listener *l;
    softrnic_qp *a, *b, *c;
    uint32_t a_id, b_id, c_id;
    uint16_t port;
    char addr[64], peer[64];
    uint8_t data[512];
    size_t len;

    CHECK(softrnic_rnic_open(0, &rnic));
    CHECK(softrnic_pd_allocate(rnic, &pd));
    CHECK(softrnic_cq_create(rnic, 64, &cq));
    CHECK(softrnic_listen(rnic, "127.0.0.1:0", &l));
    CHECK(softrnic_listener_port(l, &port));
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    CHECK(softrnic_qp_create(pd, cq, cq, NULL, &a));
    CHECK(softrnic_qp_create(pd, cq, cq, NULL, &b));
    CHECK(softrnic_qp_create(pd, cq, cq, NULL, &c));
    CHECK(softrnic_qp_id(a, &a_id));
    CHECK(softrnic_qp_id(b, &b_id));
    CHECK(softrnic_qp_id(c, &c_id));

    /* Nothing waiting yet: a look without waiting times out. */
    softrnic_conn_request *none = NULL;
    EXPECT(softrnic_listener_get_request(l, 0, &none) == SOFTRNIC_ERR_TIMEOUT);

    softrnic_conn_param knock = {.ird = 1, .ord = 1, .private_data_len = 5,
                                 .private_data = (const uint8_t *)"knock"};
    CHECK(softrnic_qp_connect(a, addr, &knock));
    softrnic_conn_request *req = next_request(l);
    int n = softrnic_conn_request_private_data(req, data, sizeof(data));
    EXPECT(n == 5 && memcmp(data, "knock", 5) == 0);
    EXPECT(softrnic_conn_request_private_data(req, data, 2) == 5); /* truncated, full length */
    EXPECT(softrnic_conn_request_peer(req, peer, sizeof(peer)) > 0);
    EXPECT(strncmp(peer, "127.0.0.1:", 10) == 0);
    printf("request: ok (5 bytes of private data from %s)\n", "127.0.0.1");
    CHECK(softrnic_conn_request_reject(req, (const uint8_t *)"go away", 7));
    /* The handle is consumed. */
    EXPECT(softrnic_conn_request_reject(req, NULL, 0) == SOFTRNIC_ERR_BAD_HANDLE);
    softrnic_event e = next_event(rnic, a_id, data, &len);
    EXPECT(e.kind == SOFTRNIC_EVENT_REJECTED);
    EXPECT(len == 7 && memcmp(data, "go away", 7) == 0);
    printf("reject: ok (REJECTED with 7 bytes of the responder's private data)\n");

    softrnic_conn_param hello = {.ird = 1, .ord = 1, .private_data_len = 5,
                                 .private_data = (const uint8_t *)"hello"};
    softrnic_conn_param welcome = {.ird = 1, .ord = 1, .private_data_len = 7,
                                   .private_data = (const uint8_t *)"welcome"};
    CHECK(softrnic_qp_connect(b, addr, &hello));
    req = next_request(l);
    EXPECT(softrnic_conn_request_private_data(req, data, sizeof(data)) == 5);
    /* b is connecting as the initiator: refused, and the request stays answerable. */
    EXPECT(softrnic_conn_request_accept(req, b, NULL) == SOFTRNIC_ERR_BUSY);
    CHECK(softrnic_conn_request_accept(req, c, &welcome));
    e = next_event(rnic, b_id, data, &len);
    EXPECT(e.kind == SOFTRNIC_EVENT_ESTABLISHED);
    EXPECT(len == 7 && memcmp(data, "welcome", 7) == 0);
    e = next_event(rnic, c_id, data, &len);
    EXPECT(e.kind == SOFTRNIC_EVENT_ESTABLISHED);
    EXPECT(len == 5 && memcmp(data, "hello", 5) == 0);
    printf("accept: ok (ESTABLISHED on both QPs, \"hello\" and \"welcome\" delivered)\n");

    /* Misuse: NULL and forged handles are codes, not crashes. */
    EXPECT(softrnic_listener_get_request(l, 0, NULL) == SOFTRNIC_ERR_NULL);
    EXPECT(softrnic_conn_request_private_data(NULL, data, 1) == SOFTRNIC_ERR_NULL);
    EXPECT(softrnic_conn_request_accept((softrnic_conn_request *)(uintptr_t)0x4000, c, NULL) ==
           SOFTRNIC_ERR_BAD_HANDLE);
    EXPECT(softrnic_qp_connect(a, "not an address", NULL) == SOFTRNIC_ERR_INVALID_ARG);
    EXPECT(softrnic_rnic_poll_event_data(rnic, &e, NULL, 4, &len) == SOFTRNIC_ERR_NULL);
    printf("misuse: ok\n");

    CHECK(softrnic_qp_destroy(a));
    CHECK(softrnic_qp_destroy(b));
    CHECK(softrnic_qp_destroy(c));
    CHECK(softrnic_listener_destroy(l));
    CHECK(softrnic_cq_destroy(cq));
    CHECK(softrnic_pd_deallocate(pd));
    CHECK(softrnic_rnic_close(rnic));
    printf("teardown: ok\n");
    return 0;
}
