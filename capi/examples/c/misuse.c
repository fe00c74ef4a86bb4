/* misuse: the C ABI's answers to wrong calls. NULL and forged handles, handles used after
 * they were destroyed or their RNIC closed, a bad STag, wrong arguments and work requests
 * each return their negative softrnic_status (never a crash), with a message in
 * softrnic_last_error(); softrnic_strerror() describes every code. Prints one line per
 * check and exits 0 when every answer is the expected one.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "softrnic.h"

static int failures;

/* Checks that `call` returned `want`; prints the code and the last error message. */
#define EXPECT_RC(call, want)                                                             \
    do {                                                                                  \
        int rc_ = (call);                                                                 \
        if (rc_ != (want)) {                                                              \
            fprintf(stderr, "FAIL %s: got %d (%s), want %d (%s): %s\n", #call, rc_,       \
                    softrnic_strerror(rc_), (int)(want), softrnic_strerror(want),         \
                    softrnic_last_error());                                               \
            failures++;                                                                   \
        } else if (rc_ < 0) {                                                             \
            printf("%-24s %s: %s\n", #want, #call, softrnic_last_error());                \
        }                                                                                 \
    } while (0)

#define OK(call) EXPECT_RC(call, SOFTRNIC_OK)

int main(void) {
    /* Every code has a static description; an unknown one too. */
    for (int code = 0; code >= SOFTRNIC_ERR_INTERNAL; code--) {
        const char *s = softrnic_strerror(code);
        if (s == NULL || s[0] == '\0' || strcmp(s, "unknown status code") == 0) {
            fprintf(stderr, "FAIL strerror(%d)\n", code);
            failures++;
        }
        printf("strerror(%d) = %s\n", code, s);
    }
    if (strcmp(softrnic_strerror(-1000), "unknown status code") != 0 ||
        strcmp(softrnic_strerror(7), "unknown status code") != 0) {
        fprintf(stderr, "FAIL strerror of unknown codes\n");
        failures++;
    }
    if (softrnic_last_error() == NULL) {
        fprintf(stderr, "FAIL last_error is NULL\n");
        failures++;
    }

    /* NULL handles and out-pointers. */
    EXPECT_RC(softrnic_rnic_open(0, NULL), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_rnic_close(NULL), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_pd_deallocate(NULL), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_cq_poll(NULL, NULL, 0), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_qp_post_sq(NULL, NULL), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_qp_disconnect(NULL), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_deregister_mem(NULL), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_rnic_assist(NULL), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_rnic_end_assist(NULL), SOFTRNIC_ERR_NULL);

    /* Forged handles: numbers the library never handed out, and a handle of the wrong
     * type. */
    EXPECT_RC(softrnic_rnic_close((softrnic_rnic *)(uintptr_t)0x1234), SOFTRNIC_ERR_BAD_HANDLE);
    EXPECT_RC(softrnic_qp_destroy((softrnic_qp *)(uintptr_t)0xdeadbeef0),
              SOFTRNIC_ERR_BAD_HANDLE);

    softrnic_rnic *rnic;
    OK(softrnic_rnic_open(0, &rnic));
    EXPECT_RC(softrnic_pd_deallocate((softrnic_pd *)rnic), SOFTRNIC_ERR_BAD_HANDLE);
    EXPECT_RC(softrnic_rnic_open(0x80, &rnic), SOFTRNIC_ERR_INVALID_ARG);
    EXPECT_RC(softrnic_rnic_progress_stats(rnic, NULL), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_rnic_advance(rnic, 0), SOFTRNIC_ERR_NOT_MANUAL);

    softrnic_pd *pd;
    softrnic_cq *cq;
    softrnic_qp *qp;
    softrnic_mr *mr;
    OK(softrnic_pd_allocate(rnic, &pd));
    EXPECT_RC(softrnic_pd_allocate(rnic, NULL), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_cq_create(rnic, 0, &cq), SOFTRNIC_ERR_INVALID_ARG);
    OK(softrnic_cq_create(rnic, 16, &cq));
    OK(softrnic_qp_create(pd, cq, cq, NULL, &qp));

    /* Memory: bad rights, bad ranges, bad STags. */
    EXPECT_RC(softrnic_nsmr_register(pd, 4096, SOFTRNIC_ACCESS_REMOTE_WRITE, &mr),
              SOFTRNIC_ERR_ACCESS);
    EXPECT_RC(softrnic_nsmr_register(pd, 4096, 0x100, &mr), SOFTRNIC_ERR_INVALID_ARG);
    EXPECT_RC(softrnic_nsmr_register_mem(pd, NULL, 64, SOFTRNIC_ACCESS_LOCAL_WRITE, &mr),
              SOFTRNIC_ERR_NULL);
    OK(softrnic_nsmr_register(pd, 4096, SOFTRNIC_ACCESS_LOCAL_WRITE, &mr));
    char byte = 'x';
    EXPECT_RC(softrnic_mr_write(mr, 4096, &byte, 1), SOFTRNIC_ERR_RANGE);
    EXPECT_RC(softrnic_mr_read(mr, SIZE_MAX, &byte, 2), SOFTRNIC_ERR_RANGE);
    EXPECT_RC(softrnic_mr_write(mr, 0, NULL, 1), SOFTRNIC_ERR_NULL);
    softrnic_mr_info info;
    OK(softrnic_mr_query(mr, &info));
    EXPECT_RC(softrnic_deallocate_stag(rnic, 0xdeadbeef), SOFTRNIC_ERR_UNKNOWN_STAG);
    EXPECT_RC(softrnic_deallocate_stag(rnic, info.stag), SOFTRNIC_ERR_STAG_VALID);
    EXPECT_RC(softrnic_pd_deallocate(pd), SOFTRNIC_ERR_BUSY);
    EXPECT_RC(softrnic_cq_destroy(cq), SOFTRNIC_ERR_BUSY);

    /* Shared and re-registered regions of the caller's memory: each registration is
     * deregistered on its own, without waiting for the other; bad flags and a window-less
     * rights error are refused. */
    static char mine[4096];
    softrnic_mr *own, *twin;
    OK(softrnic_nsmr_register_mem(pd, mine, sizeof mine, SOFTRNIC_ACCESS_LOCAL_WRITE, &own));
    OK(softrnic_smr_register(own, pd, SOFTRNIC_ACCESS_REMOTE_READ, &twin));
    EXPECT_RC(softrnic_smr_register(own, pd, 0x100, &twin), SOFTRNIC_ERR_INVALID_ARG);
    EXPECT_RC(softrnic_nsmr_reregister(own, 0x40, NULL, 0), SOFTRNIC_ERR_INVALID_ARG);
    EXPECT_RC(softrnic_nsmr_reregister(own, SOFTRNIC_REREG_PD, NULL, 0), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_nsmr_reregister(own, SOFTRNIC_REREG_ACCESS, NULL,
                                       SOFTRNIC_ACCESS_REMOTE_WRITE),
              SOFTRNIC_ERR_ACCESS);
    OK(softrnic_deregister_mem(own));
    OK(softrnic_deregister_mem(twin));

    /* Work requests: bad opcode, bad flags, NULL SGL, too many SGEs, an unconnected QP. */
    softrnic_sge sge = {.to = info.base_to, .len = 16, .stag = info.stag};
    softrnic_send_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = 99;
    EXPECT_RC(softrnic_qp_post_sq(qp, &wr), SOFTRNIC_ERR_INVALID_ARG);
    wr.opcode = SOFTRNIC_WR_SEND;
    wr.flags = 0x40;
    EXPECT_RC(softrnic_qp_post_sq(qp, &wr), SOFTRNIC_ERR_INVALID_ARG);
    wr.flags = 0;
    wr.sg_list = NULL;
    EXPECT_RC(softrnic_qp_post_sq(qp, &wr), SOFTRNIC_ERR_NULL);
    wr.sg_list = &sge;
    wr.num_sge = SOFTRNIC_MAX_SGE + 1;
    EXPECT_RC(softrnic_qp_post_sq(qp, &wr), SOFTRNIC_ERR_INVALID_WR);
    wr.num_sge = 1;
    EXPECT_RC(softrnic_qp_post_sq(qp, &wr), SOFTRNIC_ERR_QP_STATE);
    softrnic_recv_wr rwr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1};
    OK(softrnic_qp_post_rq(qp, &rwr));

    /* Polls: nothing waiting, a timeout, a NULL array. */
    softrnic_wc wc[4];
    EXPECT_RC(softrnic_cq_poll(cq, wc, 4), 0);
    EXPECT_RC(softrnic_cq_poll_block(cq, wc, 4, 20), SOFTRNIC_ERR_TIMEOUT);
    EXPECT_RC(softrnic_cq_poll(cq, NULL, 4), SOFTRNIC_ERR_NULL);

    /* Connections: bad addresses, nobody listening, objects of another RNIC. */
    softrnic_listener *lis;
    EXPECT_RC(softrnic_listen(rnic, "nope://127.0.0.1:1", &lis), SOFTRNIC_ERR_INVALID_ARG);
    EXPECT_RC(softrnic_listen(rnic, NULL, &lis), SOFTRNIC_ERR_NULL);
    EXPECT_RC(softrnic_qp_active_connect(qp, "127.0.0.1:1", NULL, 2000), SOFTRNIC_ERR_CONNECT);
    softrnic_rnic *other;
    softrnic_cq *ocq;
    OK(softrnic_rnic_open(SOFTRNIC_RNIC_MANUAL_PROGRESS, &other));
    EXPECT_RC(softrnic_rnic_advance(other, 0), 0);
    OK(softrnic_cq_create(other, 4, &ocq));
    softrnic_qp *qp2;
    EXPECT_RC(softrnic_qp_create(pd, ocq, ocq, NULL, &qp2), SOFTRNIC_ERR_INVALID_ARG);

    /* Stale handles: destroyed objects, then everything of a closed RNIC. */
    OK(softrnic_deregister_mem(mr));
    EXPECT_RC(softrnic_deregister_mem(mr), SOFTRNIC_ERR_BAD_HANDLE);
    EXPECT_RC(softrnic_mr_query(mr, &info), SOFTRNIC_ERR_BAD_HANDLE);
    OK(softrnic_qp_destroy(qp));
    EXPECT_RC(softrnic_qp_post_rq(qp, &rwr), SOFTRNIC_ERR_BAD_HANDLE);
    OK(softrnic_rnic_close(rnic));
    EXPECT_RC(softrnic_rnic_close(rnic), SOFTRNIC_ERR_BAD_HANDLE);
    EXPECT_RC(softrnic_cq_poll(cq, wc, 4), SOFTRNIC_ERR_BAD_HANDLE);
    EXPECT_RC(softrnic_pd_deallocate(pd), SOFTRNIC_ERR_BAD_HANDLE);
    OK(softrnic_rnic_close(other));
    EXPECT_RC(softrnic_cq_destroy(ocq), SOFTRNIC_ERR_BAD_HANDLE);

    if (failures) {
        fprintf(stderr, "misuse: %d check(s) failed\n", failures);
        return 1;
    }
    printf("misuse: all checks passed\n");
    return 0;
}
