/* libsoftrnic-fi.so: the libfabric provider "softrnic" (FI_EP_MSG, FI_MSG | FI_RMA | FI_ATOMIC) on
 * libsoftrnic's C ABI. libfabric 1.17 loads it through FI_PROVIDER_PATH (fi_prov_ini).
 *
 * Objects: the fabric owns one softrnic RNIC (with its progress thread); a domain is a
 * protection domain of it; an fi_cq is a softrnic CQ (FI_WAIT_FD: on a completion channel);
 * an active endpoint is a QP, created by fi_enable; a passive endpoint is a listener. The
 * EQ is fed by the RNIC's events (ESTABLISHED, REJECTED, CONNECT_FAILED, DISCONNECTED),
 * routed to the EQ of the endpoint whose QP they name, and by the connection requests of
 * the passive endpoints bound to it; every EQ read drains both under the fabric's lock.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include "softrnic.h"

#define SR_PROV_NAME "softrnic"
#define SR_PROV_VERSION FI_VERSION(0, 1)
#define SR_API_VERSION FI_VERSION(1, 17)
#define SR_CAPS (FI_MSG | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ | FI_WRITE | \
		 FI_REMOTE_READ | FI_REMOTE_WRITE | FI_LOCAL_COMM | FI_REMOTE_COMM)
#define SR_MR_MODE (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)
/* RDMAP over one LLP stream keeps these (RFC 5040 §5.5): Sends, Writes and Read Requests
 * are placed in order; a Read's response is not ordered against later Writes/Sends. */
#define SR_MSG_ORDER (FI_ORDER_SAS | FI_ORDER_RAW | FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAW)
#define SR_QUEUE 256          /* send and receive queue depth */
#define SR_MAX_SGE 6          /* the C ABI's default SGEs per work request */
#define SR_MAX_MSG (1u << 30) /* largest message */
/* CM data on the wire: the layout of libfabric's verbs provider (struct vrb_cm_data_hdr in
 * prov/verbs/include/fi_verbs.h, 1.17), so that this provider and `-p verbs` on an iWARP
 * RNIC (rdma_cm adds no header of its own on iWARP; Linux siw puts rdma_cm's private data
 * into the MPA frame right after RFC 6581's IRD/ORD words) read each other's CM data: one
 * octet giving the length of the application's data, then that data. The verbs provider
 * does so in its connect, accept and reject and takes the length octet from every
 * CONNECT_REQUEST, ESTABLISHED and REJECTED event's private data.
 * The limit is the verbs provider's too (VERBS_CM_DATA_SIZE: 56 octets less the header),
 * so that an application that sizes its CM data from fi_getopt(FI_OPT_CM_DATA_SIZE) on each
 * side (fabtests' fi_cm_data does) asks the same of both ends. It fits every peer: Linux
 * siw takes up to 256 octets of MPA private data (MPA_MAX_PRIVDATA; RFC 5044 §7.1.1 allows
 * 512), RFC 6581's IRD/ORD take 4 of them, and rdma_cm hands at most 255 to the application. */
#define SR_CM_DATA 55
#define SR_CM_HDR 1
/* libfabric's internal "do not cache" registration flag (its utility providers set it). */
#define SR_MR_NOCACHE (1ULL << 60)
#define SR_IRD_ORD 16
#define SR_CQ_BUF 64
/* RFC 7306 atomics (Fetch and Add, Compare and Swap) act on one 64-bit value at an 8-byte
 * aligned remote address. */
#define SR_ATOMIC_SIZE 8
/* Set in the wr_id of an fi_atomic (no fetch), whose Fetch and Add returns the original
 * value into the endpoint's scratch word and completes with FI_WRITE rather than FI_READ,
 * and of fi_senddata's Immediate Data, which completes with FI_MSG | FI_SEND rather than
 * fi_writedata's FI_RMA | FI_WRITE. User-space pointers on 64-bit Linux never have bit 63
 * set; a context that has it gets the other flags (the context is reported unchanged). */
#define SR_WRID_ATOMIC_WRITE (1ULL << 63)
/* fi_inject*: the most bytes copied into the provider's bounce buffer (inject_size). */
#define SR_INJECT 128
/* Bounce slots per endpoint: twice the send queue. A slot is taken by the post with
 * sequence number n (every send-queue post of the endpoint counts) and used again by post
 * n + SR_INJECT_SLOTS; that one is written only after post n + SR_QUEUE was accepted, which
 * a queue of SR_QUEUE entries allows only once post n has left it (the RNIC retires the
 * send queue in order, after the message's data went to the LLP). */
#define SR_INJECT_SLOTS (2 * SR_QUEUE)
#define SR_SCRATCH_OFF (SR_INJECT_SLOTS * SR_INJECT)
/* The endpoint's own registered memory: the bounce slots, then fi_atomic's scratch word. */
#define SR_OWN_SIZE (SR_SCRATCH_OFF + 64)

static struct fi_provider sr_prov;

/* libsoftrnic's functions, resolved at load time (dlopen) so that a provider whose
 * libsoftrnic.so is missing still loads and says why through libfabric's log. */
#define SR_FUNCS(X) X(channel_create) X(channel_destroy) X(channel_fd) X(channel_get_cq) X(conn_request_accept) X(conn_request_peer) X(conn_request_private_data) X(conn_request_reject) X(cq_arm) X(cq_create) X(cq_create_with_channel) X(cq_destroy) X(cq_poll) X(cq_poll_block) X(deregister_mem) X(last_error) X(listen) X(listener_destroy) X(listener_get_request) X(listener_port) X(mr_query) X(nsmr_register_mem) X(pd_allocate) X(pd_deallocate) X(qp_connect) X(qp_create) X(qp_destroy) X(qp_disconnect) X(qp_id) X(qp_post_rq) X(qp_post_sq) X(rnic_advance) X(rnic_close) X(rnic_event_fd) X(rnic_open) X(rnic_poll_event_data)
#define SR_MEMBER(f) __typeof__(&softrnic_##f) f;
static struct {
	SR_FUNCS(SR_MEMBER)
} sr_lib;
static const char *sr_load_error; /* why libsoftrnic could not be loaded */
/* FI_SOFTRNIC_PROGRESS=manual: no progress thread; the application's calls into the
 * provider (CQ and EQ reads) run the RNIC, as FI_PROGRESS_MANUAL says. */
static int sr_manual;
/* FI_SOFTRNIC_FIRST_FPDU_DELAY_MS: an active endpoint holds its first message this long after
 * the MPA Reply (0 by default; 50 for Linux siw 6.1 peers, see softrnic_qp_attr). */
static int sr_first_fpdu_delay_ms;


#define SR_WARN(subsys, ...) FI_WARN(&sr_prov, subsys, __VA_ARGS__)

/* A libsoftrnic status as a libfabric error code (negative). */
static int sr_err(int st)
{
	switch (st) {
	case SOFTRNIC_OK: return 0;
	case SOFTRNIC_ERR_NULL:
	case SOFTRNIC_ERR_BAD_HANDLE:
	case SOFTRNIC_ERR_INVALID_ARG:
	case SOFTRNIC_ERR_INVALID_WR:
	case SOFTRNIC_ERR_RANGE: return -FI_EINVAL;
	case SOFTRNIC_ERR_NO_MEMORY: return -FI_ENOMEM;
	case SOFTRNIC_ERR_BUSY: return -FI_EBUSY;
	case SOFTRNIC_ERR_UNKNOWN_STAG: return -FI_EKEYREJECTED;
	case SOFTRNIC_ERR_ACCESS: return -FI_EACCES;
	case SOFTRNIC_ERR_QP_STATE: return -FI_EOPBADSTATE;
	case SOFTRNIC_ERR_QUEUE_FULL: return -FI_EAGAIN;
	case SOFTRNIC_ERR_TIMEOUT: return -FI_ETIMEDOUT;
	case SOFTRNIC_ERR_CONNECT: return -FI_ECONNREFUSED;
	case SOFTRNIC_ERR_REJECTED: return -FI_ECONNREFUSED;
	case SOFTRNIC_ERR_IO: return -FI_EIO;
	case SOFTRNIC_ERR_CLOSED: return -FI_ESHUTDOWN;
	default: return -FI_EOTHER;
	}
}

static int sr_check(int st, const char *what)
{
	if (st < 0) {
		SR_WARN(FI_LOG_CORE, "%s: %s\n", what, sr_lib.last_error());
		return sr_err(st);
	}
	return st;
}

/* ------------------------------------------------------------------ objects */

struct sr_eq_entry {
	struct sr_eq_entry *next;
	uint32_t event;
	int is_err;
	struct fi_eq_err_entry err;
	size_t len;
	uint8_t buf[]; /* a struct fi_eq_cm_entry plus its data */
};

struct sr_fabric {
	struct fid_fabric fabric_fid;
	softrnic_rnic *rnic;
	pthread_mutex_t lock;
	struct sr_ep *eps;   /* endpoints with a QP, for routing events */
	struct sr_pep *peps; /* listening passive endpoints */
	/* Endpoint memory the library still held when its endpoint closed (deregistration
	 * said busy): freed after the RNIC is closed. */
	struct sr_orphan { struct sr_orphan *next; void *mem; } *orphans;
};

struct sr_eq {
	struct fid_eq eq_fid;
	struct sr_fabric *fab;
	struct sr_eq_entry *head, *tail;
	void *err_data; /* owned, valid until the next read */
	enum fi_wait_obj wait;
	/* FI_WAIT_FD: an eventfd readable while entries are queued (fi_eq_write's and the
	 * routed ones), and the wait fd FI_GETWAIT gives: an epoll set of it and the RNIC's
	 * event fd (readable while events wait to be routed). -1 without. */
	int efd, epfd;
};

struct sr_domain {
	struct fid_domain domain_fid;
	struct sr_fabric *fab;
	softrnic_pd *pd;
	struct fi_info *info;
};

struct sr_mr {
	struct fid_mr mr_fid;
	struct sr_domain *dom;
	softrnic_mr *mr;
	uint32_t stag;
};

struct sr_cq {
	struct fid_cq cq_fid;
	struct sr_domain *dom;
	softrnic_cq *cq;
	softrnic_channel *ch;
	enum fi_cq_format format;
	softrnic_wc buf[SR_CQ_BUF];
	int head, count;
	int err_pending; /* buf[head] is an error */
};

struct sr_connreq {
	struct fid fid; /* FI_CLASS_CONNREQ: the fi_info handle of FI_CONNREQ */
	softrnic_conn_request *req;
};

struct sr_pep {
	struct fid_pep pep_fid;
	struct sr_fabric *fab;
	struct sr_eq *eq;
	struct fi_info *info;
	struct sockaddr_in src;
	softrnic_listener *listener;
	struct sr_pep *next;
};

struct sr_ep {
	struct fid_ep ep_fid;
	struct sr_domain *dom;
	struct sr_eq *eq;
	struct sr_cq *tx_cq, *rx_cq, *own_cq;
	uint64_t tx_sel, rx_sel; /* FI_SELECTIVE_COMPLETION */
	uint64_t tx_flags, rx_flags;
	struct fi_info *info;
	softrnic_qp *qp;
	uint32_t qp_id;
	struct sr_connreq *connreq;
	struct sockaddr_in peer;
	int connected;
	int cq_data; /* fi_writedata allowed (FI_RX_CQ_DATA mode in the info) */
	/* Provider-owned registered memory (made by fi_enable): the scratch word that the
	 * original values of fi_atomic's Fetch and Adds land in. */
	uint8_t *own;
	softrnic_mr *own_mr;
	uint32_t own_stag;
	pthread_mutex_t post_lock; /* send-queue posts and their count */
	uint64_t sq_posts;
	struct sr_ep *next;
};

/* ------------------------------------------------------------------ shared stubs */

static int sr_no_bind(struct fid *f, struct fid *b, uint64_t fl) { (void)f; (void)b; (void)fl; return -FI_ENOSYS; }
static int sr_no_control(struct fid *f, int c, void *a) { (void)f; (void)c; (void)a; return -FI_ENOSYS; }
static int sr_no_ops_open(struct fid *f, const char *n, uint64_t fl, void **o, void *c)
{ (void)f; (void)n; (void)fl; (void)o; (void)c; return -FI_ENOSYS; }

/* ------------------------------------------------------------------ addresses */

static int sr_addr_str(const struct sockaddr_in *sin, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN];
	if (!inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip)))
		return -FI_EINVAL;
	snprintf(buf, len, "%s:%u", ip, ntohs(sin->sin_port));
	return 0;
}

static int sr_resolve(const char *node, const char *service, struct sockaddr_in *out)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	if (!node && !service)
		return -FI_EINVAL;
	if (!node)
		hints.ai_flags = AI_PASSIVE;
	if (getaddrinfo(node, service, &hints, &res) != 0)
		return -FI_ENODATA;
	memcpy(out, res->ai_addr, sizeof(*out));
	freeaddrinfo(res);
	return 0;
}

/* ------------------------------------------------------------------ EQ */

/* Fabric lock held. The first entry makes the EQ's eventfd readable. */
static void sr_eq_push(struct sr_eq *eq, struct sr_eq_entry *e)
{
	e->next = NULL;
	if (eq->tail) {
		eq->tail->next = e;
	} else {
		eq->head = e;
		if (eq->efd >= 0) {
			uint64_t one = 1;
			if (write(eq->efd, &one, sizeof(one)) != sizeof(one))
				SR_WARN(FI_LOG_EQ, "EQ eventfd: %s\n", strerror(errno));
		}
	}
	eq->tail = e;
}

/* Fabric lock held. Takes the head entry; the last one taken clears the eventfd. */
static void sr_eq_pop(struct sr_eq *eq)
{
	struct sr_eq_entry *e = eq->head;
	eq->head = e->next;
	if (!eq->head) {
		eq->tail = NULL;
		if (eq->efd >= 0) {
			uint64_t n;
			if (read(eq->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
				SR_WARN(FI_LOG_EQ, "EQ eventfd: %s\n", strerror(errno));
		}
	}
	free(e);
}

static struct sr_eq_entry *sr_cm_entry(uint32_t event, fid_t fid, struct fi_info *info,
				       const uint8_t *data, size_t len)
{
	struct sr_eq_entry *e = calloc(1, sizeof(*e) + sizeof(struct fi_eq_cm_entry) + len);
	if (!e)
		return NULL;
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)e->buf;
	e->event = event;
	cm->fid = fid;
	cm->info = info;
	if (len)
		memcpy(cm->data, data, len);
	e->len = sizeof(*cm) + len;
	return e;
}

static struct sr_eq_entry *sr_err_entry(fid_t fid, int err, const uint8_t *data, size_t len)
{
	struct sr_eq_entry *e = calloc(1, sizeof(*e) + len);
	if (!e)
		return NULL;
	e->is_err = 1;
	e->err.fid = fid;
	e->err.context = fid->context;
	e->err.err = err;
	e->err.prov_errno = -err;
	if (len)
		memcpy(e->buf, data, len);
	e->len = len;
	return e;
}

static struct sr_ep *sr_find_ep(struct sr_fabric *fab, uint32_t qp_id)
{
	for (struct sr_ep *ep = fab->eps; ep; ep = ep->next)
		if (ep->qp && ep->qp_id == qp_id)
			return ep;
	return NULL;
}

static struct fi_info *sr_connreq_info(struct sr_pep *pep, softrnic_conn_request *req,
				       struct sr_connreq **creq)
{
	struct fi_info *info = fi_dupinfo(pep->info);
	char peer[64];
	if (!info)
		return NULL;
	*creq = calloc(1, sizeof(**creq));
	if (!*creq) {
		fi_freeinfo(info);
		return NULL;
	}
	(*creq)->fid.fclass = FI_CLASS_CONNREQ;
	(*creq)->req = req;
	info->handle = &(*creq)->fid;
	if (sr_lib.conn_request_peer(req, peer, sizeof(peer)) > 0) {
		char *colon = strrchr(peer, ':');
		struct sockaddr_in *sin = calloc(1, sizeof(*sin));
		if (colon && sin) {
			*colon = 0;
			sin->sin_family = AF_INET;
			sin->sin_port = htons((uint16_t)atoi(colon + 1));
			inet_pton(AF_INET, peer, &sin->sin_addr);
			free(info->dest_addr);
			info->dest_addr = sin;
			info->dest_addrlen = sizeof(*sin);
		} else {
			free(sin);
		}
	}
	return info;
}

/* Lays out `len` bytes of CM data for the wire in `wire` (SR_CM_HDR + SR_CM_DATA bytes): the
 * length octet, then the data (see SR_CM_DATA). Returns the private data's length, or
 * -FI_EINVAL for more than SR_CM_DATA bytes or data without a pointer. */
static ssize_t sr_cm_wrap(const void *param, size_t len, uint8_t *wire)
{
	if (len > SR_CM_DATA || (len && !param))
		return -FI_EINVAL;
	wire[0] = (uint8_t)len;
	if (len)
		memcpy(wire + SR_CM_HDR, param, len);
	return SR_CM_HDR + len;
}

/* The application's CM data inside the peer's private data `pd` of `len` bytes: after the
 * length octet, as many bytes as it says. No private data at all (a peer that sends none,
 * e.g. rping or a plain rdma_cm application) is no CM data; a length octet claiming more
 * than the frame carried gets what was carried (the verbs provider would read past it). */
static size_t sr_cm_unwrap(const uint8_t *pd, size_t len, const uint8_t **out)
{
	size_t n;
	*out = pd + (len ? SR_CM_HDR : 0);
	if (!len)
		return 0;
	n = pd[0];
	if (n > len - SR_CM_HDR) {
		FI_WARN(&sr_prov, FI_LOG_EP_CTRL,
			"CM data: the length octet says %zu bytes, the private data carries %zu\n", n,
			len - SR_CM_HDR);
		n = len - SR_CM_HDR;
	}
	return n;
}

/* Moves the RNIC's events and the listeners' requests into the EQs. Fabric lock held. */
static void sr_progress_cm(struct sr_fabric *fab)
{
	softrnic_event ev;
	uint8_t data[512]; /* the most an MPA frame carries */
	size_t dlen;
	while (sr_lib.rnic_poll_event_data(fab->rnic, &ev, data, sizeof(data), &dlen) == 1) {
		struct sr_ep *ep = sr_find_ep(fab, ev.qp_id);
		struct sr_eq_entry *e = NULL;
		const uint8_t *cm;
		size_t cmlen;
		if (dlen > sizeof(data))
			dlen = sizeof(data);
		if (!ep || !ep->eq)
			continue;
		cmlen = sr_cm_unwrap(data, dlen, &cm);
		switch (ev.kind) {
		case SOFTRNIC_EVENT_ESTABLISHED:
			ep->connected = 1;
			e = sr_cm_entry(FI_CONNECTED, &ep->ep_fid.fid, NULL, cm, cmlen);
			break;
		case SOFTRNIC_EVENT_REJECTED:
			e = sr_err_entry(&ep->ep_fid.fid, FI_ECONNREFUSED, cm, cmlen);
			break;
		case SOFTRNIC_EVENT_CONNECT_FAILED:
			e = sr_err_entry(&ep->ep_fid.fid, ep->connreq ? FI_ECONNABORTED : FI_ECONNREFUSED,
					 NULL, 0);
			break;
		case SOFTRNIC_EVENT_DISCONNECTED:
			if (ep->connected) {
				ep->connected = 0;
				e = sr_cm_entry(FI_SHUTDOWN, &ep->ep_fid.fid, NULL, NULL, 0);
			}
			break;
		case SOFTRNIC_EVENT_TERMINATE_SENT:
		case SOFTRNIC_EVENT_TERMINATE_RECEIVED:
			FI_WARN(&sr_prov, FI_LOG_EP_DATA,
				"QP %u: Terminate %s (layer/type/code %#x, RFC 5040 §8)\n", ev.qp_id,
				ev.kind == SOFTRNIC_EVENT_TERMINATE_SENT ? "sent" : "received",
				ev.detail);
			break;
		case SOFTRNIC_EVENT_CQ_OVERFLOW:
			FI_WARN(&sr_prov, FI_LOG_CQ, "QP %u: CQ %u overflowed\n", ev.qp_id,
				ev.detail);
			break;
		default:
			FI_INFO(&sr_prov, FI_LOG_EP_CTRL, "QP %u: event %u (detail %#x)\n",
				ev.qp_id, ev.kind, ev.detail);
			break;
		}
		if (e)
			sr_eq_push(ep->eq, e);
	}
	for (struct sr_pep *pep = fab->peps; pep; pep = pep->next) {
		softrnic_conn_request *req;
		if (!pep->eq || !pep->listener)
			continue;
		while (sr_lib.listener_get_request(pep->listener, 0, &req) == SOFTRNIC_OK) {
			struct sr_connreq *creq = NULL;
			struct fi_info *info = sr_connreq_info(pep, req, &creq);
			int n = sr_lib.conn_request_private_data(req, data, sizeof(data));
			struct sr_eq_entry *e;
			const uint8_t *cm;
			size_t cmlen;
			if (n < 0)
				n = 0;
			if ((size_t)n > sizeof(data))
				n = sizeof(data);
			if (!info) {
				sr_lib.conn_request_reject(req, NULL, 0);
				continue;
			}
			cmlen = sr_cm_unwrap(data, (size_t)n, &cm);
			e = sr_cm_entry(FI_CONNREQ, &pep->pep_fid.fid, info, cm, cmlen);
			if (!e) {
				sr_lib.conn_request_reject(req, NULL, 0);
				free(creq);
				info->handle = NULL;
				fi_freeinfo(info);
				continue;
			}
			sr_eq_push(pep->eq, e);
		}
	}
}

static ssize_t sr_eq_read(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			  uint64_t flags)
{
	struct sr_eq *eq = (struct sr_eq *)eq_fid;
	struct sr_eq_entry *e;
	ssize_t ret;
	if (!event && !(flags & FI_PEEK))
		return -FI_EINVAL;
	if (sr_manual)
		sr_lib.rnic_advance(eq->fab->rnic, 0);
	pthread_mutex_lock(&eq->fab->lock);
	sr_progress_cm(eq->fab);
	e = eq->head;
	if (!e) {
		ret = -FI_EAGAIN;
	} else if (e->is_err) {
		ret = -FI_EAVAIL;
	} else if (len < e->len && len < sizeof(struct fi_eq_cm_entry)) {
		ret = -FI_ETOOSMALL;
	} else {
		size_t n = len < e->len ? len : e->len;
		if (event)
			*event = e->event;
		memcpy(buf, e->buf, n);
		ret = (ssize_t)n;
		if (!(flags & FI_PEEK))
			sr_eq_pop(eq);
	}
	pthread_mutex_unlock(&eq->fab->lock);
	return ret;
}

static ssize_t sr_eq_readerr(struct fid_eq *eq_fid, struct fi_eq_err_entry *buf, uint64_t flags)
{
	struct sr_eq *eq = (struct sr_eq *)eq_fid;
	struct sr_eq_entry *e;
	ssize_t ret;
	if (!buf)
		return -FI_EINVAL;
	pthread_mutex_lock(&eq->fab->lock);
	sr_progress_cm(eq->fab);
	e = eq->head;
	if (!e || !e->is_err) {
		ret = -FI_EAGAIN;
	} else {
		free(eq->err_data);
		eq->err_data = NULL;
		*buf = e->err;
		if (e->len) {
			eq->err_data = malloc(e->len);
			if (eq->err_data)
				memcpy(eq->err_data, e->buf, e->len);
		}
		buf->err_data = eq->err_data;
		buf->err_data_size = eq->err_data ? e->len : 0;
		ret = sizeof(*buf);
		if (!(flags & FI_PEEK))
			sr_eq_pop(eq);
	}
	pthread_mutex_unlock(&eq->fab->lock);
	return ret;
}

static ssize_t sr_eq_write(struct fid_eq *eq_fid, uint32_t event, const void *buf, size_t len,
			   uint64_t flags)
{
	struct sr_eq *eq = (struct sr_eq *)eq_fid;
	struct sr_eq_entry *e;
	(void)flags;
	if (!buf && len)
		return -FI_EINVAL;
	e = calloc(1, sizeof(*e) + len);
	if (!e)
		return -FI_ENOMEM;
	e->event = event;
	e->len = len;
	if (len)
		memcpy(e->buf, buf, len);
	pthread_mutex_lock(&eq->fab->lock);
	sr_eq_push(eq, e);
	pthread_mutex_unlock(&eq->fab->lock);
	return (ssize_t)len;
}

static int64_t sr_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static ssize_t sr_eq_sread(struct fid_eq *eq_fid, uint32_t *event, void *buf, size_t len,
			   int timeout, uint64_t flags)
{
	struct sr_eq *eq = (struct sr_eq *)eq_fid;
	int64_t end = timeout < 0 ? -1 : sr_now_ms() + timeout;
	int fd = eq->epfd >= 0 ? eq->epfd : sr_lib.rnic_event_fd(eq->fab->rnic);
	for (;;) {
		ssize_t ret = sr_eq_read(eq_fid, event, buf, len, flags);
		if (ret != -FI_EAGAIN)
			return ret;
		int wait = 50; /* entries, requests and events all make the fd readable */
		if (end >= 0) {
			int64_t left = end - sr_now_ms();
			if (left <= 0)
				return -FI_EAGAIN;
			if (left < wait)
				wait = (int)left;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (sr_manual)
			sr_lib.rnic_advance(eq->fab->rnic, wait);
		else if (fd >= 0)
			poll(&p, 1, wait);
	}
}

static const char *sr_eq_strerror(struct fid_eq *eq, int prov_errno, const void *err_data,
				  char *buf, size_t len)
{
	(void)eq; (void)err_data;
	const char *s = fi_strerror(prov_errno);
	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

static int sr_eq_close(struct fid *fid)
{
	struct sr_eq *eq = (struct sr_eq *)fid;
	struct sr_eq_entry *e, *n;
	for (e = eq->head; e; e = n) {
		n = e->next;
		if (!e->is_err && e->event == FI_CONNREQ) {
			struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)e->buf;
			fi_freeinfo(cm->info);
		}
		free(e);
	}
	free(eq->err_data);
	if (eq->epfd >= 0)
		close(eq->epfd);
	if (eq->efd >= 0)
		close(eq->efd);
	free(eq);
	return 0;
}

static int sr_eq_control(struct fid *fid, int command, void *arg)
{
	struct sr_eq *eq = (struct sr_eq *)fid;
	if (command != FI_GETWAIT)
		return -FI_ENOSYS;
	if (eq->wait != FI_WAIT_FD)
		return -FI_ENODATA;
	if (!arg)
		return -FI_EINVAL;
	*(int *)arg = eq->epfd;
	return 0;
}

static struct fi_ops sr_eq_fi_ops = {
	.size = sizeof(struct fi_ops), .close = sr_eq_close, .bind = sr_no_bind,
	.control = sr_eq_control, .ops_open = sr_no_ops_open,
};
static struct fi_ops_eq sr_eq_ops = {
	.size = sizeof(struct fi_ops_eq), .read = sr_eq_read, .readerr = sr_eq_readerr,
	.write = sr_eq_write, .sread = sr_eq_sread, .strerror = sr_eq_strerror,
};

static int sr_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **out,
		      void *context)
{
	struct sr_eq *eq;
	if (!attr || !out)
		return -FI_EINVAL;
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC &&
	    attr->wait_obj != FI_WAIT_FD)
		return -FI_ENOSYS;
	if (sr_manual && attr->wait_obj == FI_WAIT_FD)
		return -FI_ENOSYS;
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	eq->fab = (struct sr_fabric *)fabric;
	eq->wait = attr->wait_obj == FI_WAIT_UNSPEC ? (sr_manual ? FI_WAIT_NONE : FI_WAIT_FD) :
						       attr->wait_obj;
	eq->efd = eq->epfd = -1;
	if (eq->wait == FI_WAIT_FD) {
		struct epoll_event ev = { .events = EPOLLIN };
		int rfd = sr_lib.rnic_event_fd(eq->fab->rnic);
		errno = 0;
		eq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		eq->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (eq->efd < 0 || eq->epfd < 0 || rfd < 0 ||
		    epoll_ctl(eq->epfd, EPOLL_CTL_ADD, eq->efd, &ev) ||
		    epoll_ctl(eq->epfd, EPOLL_CTL_ADD, rfd, &ev)) {
			int err = errno ? errno : EINVAL;
			SR_WARN(FI_LOG_EQ, "EQ wait fd: %s\n", strerror(err));
			if (eq->efd >= 0)
				close(eq->efd);
			if (eq->epfd >= 0)
				close(eq->epfd);
			free(eq);
			return -err;
		}
	}
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.fid.context = context;
	eq->eq_fid.fid.ops = &sr_eq_fi_ops;
	eq->eq_fid.ops = &sr_eq_ops;
	*out = &eq->eq_fid;
	return 0;
}

/* ------------------------------------------------------------------ memory registration */

static int sr_mr_close(struct fid *fid)
{
	struct sr_mr *mr = (struct sr_mr *)fid;
	int st = sr_lib.deregister_mem(mr->mr);
	if (st == SOFTRNIC_ERR_BUSY)
		SR_WARN(FI_LOG_MR, "region %#x deregistered while work still holds it: %s\n",
			mr->stag, sr_lib.last_error());
	else if (st < 0)
		return sr_check(st, "softrnic_deregister_mem");
	free(mr);
	return 0;
}

static struct fi_ops sr_mr_fi_ops = {
	.size = sizeof(struct fi_ops), .close = sr_mr_close, .bind = sr_no_bind,
	.control = sr_no_control, .ops_open = sr_no_ops_open,
};

static int sr_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
		     uint64_t offset, uint64_t requested_key, uint64_t flags,
		     struct fid_mr **out, void *context)
{
	struct sr_domain *dom = (struct sr_domain *)fid;
	struct sr_mr *mr;
	softrnic_mr_info mi;
	uint32_t acc = SOFTRNIC_ACCESS_LOCAL_WRITE;
	int st;
	(void)requested_key; /* FI_MR_PROV_KEY: the STag is the key */
	/* libfabric's utility providers (ofi_rxm) register their buffer pools with the internal
	 * flag "do not cache this registration" (bit 60); this provider caches nothing, so it
	 * holds trivially. Any other flag is refused, and said why. */
	flags &= ~SR_MR_NOCACHE;
	if (flags) {
		SR_WARN(FI_LOG_MR, "fi_mr_reg: flags 0x%llx not supported\n",
			(unsigned long long)flags);
		return -FI_EINVAL;
	}
	if (!out || (!buf && len) || offset)
		return -FI_EINVAL;
	if (fid->fclass != FI_CLASS_DOMAIN)
		return -FI_EINVAL;
	if (access & FI_REMOTE_READ)
		acc |= SOFTRNIC_ACCESS_REMOTE_READ;
	/* An RDMA Read sink is written by the peer's Read Responses: iWARP needs remote write
	 * rights on it (RFC 5040 §4.4: the sink STag is advertised in the Read Request). */
	if (access & (FI_REMOTE_WRITE | FI_READ))
		acc |= SOFTRNIC_ACCESS_REMOTE_WRITE;
	/* A target of the peer's atomics: RFC 7306 Fetch and Add and Compare and Swap modify
	 * the region, so libfabric's remote write right carries the remote atomic right. */
	if (access & FI_REMOTE_WRITE)
		acc |= SOFTRNIC_ACCESS_REMOTE_ATOMIC;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	st = sr_lib.nsmr_register_mem(dom->pd, (void *)buf, len, acc, &mr->mr);
	if (st < 0) {
		free(mr);
		return sr_check(st, "softrnic_nsmr_register_mem");
	}
	sr_lib.mr_query(mr->mr, &mi);
	mr->stag = mi.stag;
	mr->dom = dom;
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = context;
	mr->mr_fid.fid.ops = &sr_mr_fi_ops;
	mr->mr_fid.mem_desc = mr;
	mr->mr_fid.key = mi.stag;
	*out = &mr->mr_fid;
	return 0;
}

static int sr_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
		      uint64_t offset, uint64_t requested_key, uint64_t flags,
		      struct fid_mr **mr, void *context)
{
	if (count != 1 || !iov)
		return -FI_EINVAL; /* one contiguous region per registration */
	return sr_mr_reg(fid, iov->iov_base, iov->iov_len, access, offset, requested_key,
			 flags, mr, context);
}

static int sr_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
			 struct fid_mr **mr)
{
	if (!attr || attr->iov_count != 1)
		return -FI_EINVAL;
	return sr_mr_reg(fid, attr->mr_iov->iov_base, attr->mr_iov->iov_len, attr->access,
			 attr->offset, attr->requested_key, flags, mr, attr->context);
}

static struct fi_ops_mr sr_mr_ops = {
	.size = sizeof(struct fi_ops_mr), .reg = sr_mr_reg, .regv = sr_mr_regv,
	.regattr = sr_mr_regattr,
};

/* ------------------------------------------------------------------ CQ */

static uint64_t sr_wc_flags(const softrnic_wc *wc)
{
	switch (wc->opcode) {
	case SOFTRNIC_WC_FETCH_ADD:
		if (wc->wr_id & SR_WRID_ATOMIC_WRITE)
			return FI_ATOMIC | FI_WRITE;
		return FI_ATOMIC | FI_READ;
	case SOFTRNIC_WC_CMP_SWAP: return FI_ATOMIC | FI_READ;
	case SOFTRNIC_WC_SEND: return FI_MSG | FI_SEND;
	case SOFTRNIC_WC_RDMA_WRITE: return FI_RMA | FI_WRITE;
	case SOFTRNIC_WC_IMM_DATA:
		if (wc->wr_id & SR_WRID_ATOMIC_WRITE)
			return FI_MSG | FI_SEND;
		return FI_RMA | FI_WRITE;
	case SOFTRNIC_WC_RDMA_READ: return FI_RMA | FI_READ;
	case SOFTRNIC_WC_RECV:
		if (wc->flags & SOFTRNIC_WC_WITH_IMM)
			return FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
		return FI_MSG | FI_RECV;
	default: return 0;
	}
}

static uint64_t sr_wc_data(const softrnic_wc *wc)
{
	uint64_t d = 0;
	if (wc->flags & SOFTRNIC_WC_WITH_IMM)
		for (int i = 0; i < 8; i++)
			d = d << 8 | wc->imm_data[i];
	return d;
}

/* The context a completion reports (without the provider's marker bit). */
static void *sr_wc_context(const softrnic_wc *wc)
{
	uint64_t id = wc->wr_id;
	if (wc->opcode == SOFTRNIC_WC_FETCH_ADD || wc->opcode == SOFTRNIC_WC_IMM_DATA)
		id &= ~SR_WRID_ATOMIC_WRITE;
	return (void *)(uintptr_t)id;
}

static size_t sr_cq_entry_size(enum fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT: return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG: return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA: return sizeof(struct fi_cq_data_entry);
	default: return 0;
	}
}

static void sr_cq_fill(struct sr_cq *cq, const softrnic_wc *wc, void *out)
{
	void *ctx = sr_wc_context(wc);
	switch (cq->format) {
	case FI_CQ_FORMAT_CONTEXT:
		((struct fi_cq_entry *)out)->op_context = ctx;
		break;
	case FI_CQ_FORMAT_MSG: {
		struct fi_cq_msg_entry *m = out;
		m->op_context = ctx;
		m->flags = sr_wc_flags(wc);
		m->len = wc->opcode == SOFTRNIC_WC_RECV && !(wc->flags & SOFTRNIC_WC_WITH_IMM) ?
				 wc->byte_len : 0;
		break;
	}
	default: {
		struct fi_cq_data_entry *d = out;
		d->op_context = ctx;
		d->flags = sr_wc_flags(wc);
		d->len = wc->opcode == SOFTRNIC_WC_RECV && !(wc->flags & SOFTRNIC_WC_WITH_IMM) ?
				 wc->byte_len : 0;
		d->buf = NULL;
		d->data = sr_wc_data(wc);
		break;
	}
	}
}

/* Takes what the RNIC has into the buffer when it is empty. */
static int sr_cq_refill(struct sr_cq *cq, int timeout_ms)
{
	int n;
	if (cq->count)
		return 0;
	cq->head = 0;
	if (timeout_ms == 0)
		n = sr_lib.cq_poll(cq->cq, cq->buf, SR_CQ_BUF);
	else
		n = sr_lib.cq_poll_block(cq->cq, cq->buf, SR_CQ_BUF, timeout_ms);
	if (n == SOFTRNIC_ERR_TIMEOUT)
		return 0;
	if (n < 0)
		return sr_check(n, "softrnic_cq_poll");
	cq->count = n;
	return 0;
}

static ssize_t sr_cq_take(struct sr_cq *cq, void *buf, size_t count)
{
	size_t sz = sr_cq_entry_size(cq->format), done = 0;
	while (done < count && cq->count) {
		softrnic_wc *wc = &cq->buf[cq->head];
		if (wc->status != SOFTRNIC_WC_SUCCESS)
			break;
		sr_cq_fill(cq, wc, (char *)buf + done * sz);
		cq->head++;
		cq->count--;
		done++;
	}
	if (done)
		return (ssize_t)done;
	if (cq->count)
		return -FI_EAVAIL;
	return -FI_EAGAIN;
}

static ssize_t sr_cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
	struct sr_cq *cq = (struct sr_cq *)cq_fid;
	int ret;
	if (!buf && count)
		return -FI_EINVAL;
	ret = sr_cq_refill(cq, 0);
	if (ret)
		return ret;
	if (!cq->count && !sr_manual)
		sched_yield(); /* a busy-polling caller leaves the CPU to the progress thread */
	return sr_cq_take(cq, buf, count);
}

static ssize_t sr_cq_readfrom(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src)
{
	ssize_t n = sr_cq_read(cq, buf, count);
	for (ssize_t i = 0; src && i < n; i++)
		src[i] = FI_ADDR_NOTAVAIL;
	return n;
}

static int sr_wc_errno(enum softrnic_wc_status s)
{
	switch (s) {
	case SOFTRNIC_WC_LOCAL_LENGTH: return FI_ETRUNC;
	case SOFTRNIC_WC_LOCAL_PROTECTION: return FI_EACCES;
	case SOFTRNIC_WC_LOCAL_QP_OPERATION: return FI_EOPNOTSUPP;
	case SOFTRNIC_WC_REMOTE_ACCESS: return FI_EACCES;
	case SOFTRNIC_WC_REMOTE_OPERATION: return FI_EREMOTEIO;
	case SOFTRNIC_WC_TRANSPORT: return FI_EIO;
	case SOFTRNIC_WC_FLUSHED: return FI_ECANCELED;
	default: return FI_EOTHER;
	}
}

static ssize_t sr_cq_readerr(struct fid_cq *cq_fid, struct fi_cq_err_entry *buf, uint64_t flags)
{
	struct sr_cq *cq = (struct sr_cq *)cq_fid;
	softrnic_wc *wc;
	(void)flags;
	if (!buf)
		return -FI_EINVAL;
	if (sr_cq_refill(cq, 0) || !cq->count)
		return -FI_EAGAIN;
	wc = &cq->buf[cq->head];
	if (wc->status == SOFTRNIC_WC_SUCCESS)
		return -FI_EAGAIN;
	/* Route the RNIC's events now, so that the cause (a Terminate) is logged. */
	pthread_mutex_lock(&cq->dom->fab->lock);
	sr_progress_cm(cq->dom->fab);
	pthread_mutex_unlock(&cq->dom->fab->lock);
	/* err_data_size is an input since API 1.5: keep what the caller gave. */
	size_t keep = buf->err_data_size;
	void *keep_data = buf->err_data;
	memset(buf, 0, sizeof(*buf));
	buf->err_data = keep_data;
	buf->err_data_size = keep ? 0 : 0;
	buf->op_context = sr_wc_context(wc);
	buf->flags = sr_wc_flags(wc);
	buf->err = sr_wc_errno(wc->status);
	buf->prov_errno = (int)wc->status;
	buf->len = wc->byte_len;
	cq->head++;
	cq->count--;
	return 1;
}

static ssize_t sr_cq_sread(struct fid_cq *cq_fid, void *buf, size_t count, const void *cond,
			   int timeout)
{
	struct sr_cq *cq = (struct sr_cq *)cq_fid;
	int ret;
	(void)cond;
	if (!buf && count)
		return -FI_EINVAL;
	ret = sr_cq_refill(cq, timeout < 0 ? -1 : timeout);
	if (ret)
		return ret;
	return sr_cq_take(cq, buf, count);
}

static ssize_t sr_cq_sreadfrom(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src,
			       const void *cond, int timeout)
{
	ssize_t n = sr_cq_sread(cq, buf, count, cond, timeout);
	for (ssize_t i = 0; src && i < n; i++)
		src[i] = FI_ADDR_NOTAVAIL;
	return n;
}

static int sr_cq_signal(struct fid_cq *cq) { (void)cq; return -FI_ENOSYS; }

static const char *sr_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data,
				  char *buf, size_t len)
{
	static const char *names[] = {
		"success", "local length error", "local protection error",
		"local QP operation error", "remote access error", "remote operation error",
		"transport error", "fatal QP error", "flushed",
	};
	const char *s = prov_errno >= 0 && prov_errno <= 8 ? names[prov_errno] : "unknown";
	(void)cq; (void)err_data;
	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

/* fi_trywait: 0 when the CQ is empty and armed (its fd will signal), else -FI_EAGAIN. */
static int sr_cq_trywait(struct sr_cq *cq)
{
	softrnic_cq *fired;
	if (!cq->ch)
		return -FI_EINVAL;
	while (sr_lib.channel_get_cq(cq->ch, 0, &fired) == SOFTRNIC_OK)
		;
	if (cq->count)
		return -FI_EAGAIN;
	sr_lib.cq_arm(cq->cq, 0);
	if (sr_cq_refill(cq, 0) == 0 && cq->count)
		return -FI_EAGAIN;
	return 0;
}

static int sr_cq_control(struct fid *fid, int command, void *arg)
{
	struct sr_cq *cq = (struct sr_cq *)fid;
	if (command != FI_GETWAIT)
		return -FI_ENOSYS;
	if (!cq->ch)
		return -FI_ENODATA;
	if (!arg)
		return -FI_EINVAL;
	*(int *)arg = sr_lib.channel_fd(cq->ch);
	return 0;
}

static int sr_cq_close(struct fid *fid)
{
	struct sr_cq *cq = (struct sr_cq *)fid;
	int st = sr_lib.cq_destroy(cq->cq);
	if (st < 0)
		return sr_check(st, "softrnic_cq_destroy");
	if (cq->ch)
		sr_lib.channel_destroy(cq->ch);
	free(cq);
	return 0;
}

static struct fi_ops sr_cq_fi_ops = {
	.size = sizeof(struct fi_ops), .close = sr_cq_close, .bind = sr_no_bind,
	.control = sr_cq_control, .ops_open = sr_no_ops_open,
};
static struct fi_ops_cq sr_cq_ops = {
	.size = sizeof(struct fi_ops_cq), .read = sr_cq_read, .readfrom = sr_cq_readfrom,
	.readerr = sr_cq_readerr, .sread = sr_cq_sread, .sreadfrom = sr_cq_sreadfrom,
	.signal = sr_cq_signal, .strerror = sr_cq_strerror,
};

static int sr_cq_create(struct sr_domain *dom, struct fi_cq_attr *attr, struct sr_cq **out,
			void *context)
{
	struct sr_cq *cq;
	size_t depth = attr && attr->size ? attr->size : 4096;
	enum fi_wait_obj wait = attr ? attr->wait_obj : FI_WAIT_NONE;
	int st;
	if (attr && attr->format == FI_CQ_FORMAT_TAGGED)
		return -FI_ENOSYS;
	if (wait != FI_WAIT_NONE && wait != FI_WAIT_UNSPEC && wait != FI_WAIT_FD)
		return -FI_ENOSYS;
	if (sr_manual && wait == FI_WAIT_FD)
		return -FI_ENOSYS; /* nothing would signal it between the application's calls */
	if (sr_manual)
		wait = FI_WAIT_NONE; /* fi_cq_sread still waits, running the RNIC */
	if (depth > (1u << 22))
		return -FI_EINVAL;
	if (depth < 2 * SR_QUEUE)
		depth = 2 * SR_QUEUE;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->dom = dom;
	cq->format = attr && attr->format != FI_CQ_FORMAT_UNSPEC ? attr->format :
								   FI_CQ_FORMAT_CONTEXT;
	if (wait == FI_WAIT_FD || wait == FI_WAIT_UNSPEC) {
		st = sr_lib.channel_create(dom->fab->rnic, &cq->ch);
		if (st == SOFTRNIC_OK)
			st = sr_lib.cq_create_with_channel(dom->fab->rnic, (uint32_t)depth, cq->ch,
							     &cq->cq);
	} else {
		st = sr_lib.cq_create(dom->fab->rnic, (uint32_t)depth, &cq->cq);
	}
	if (st < 0) {
		if (cq->ch)
			sr_lib.channel_destroy(cq->ch);
		free(cq);
		return sr_check(st, "softrnic_cq_create");
	}
	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.context = context;
	cq->cq_fid.fid.ops = &sr_cq_fi_ops;
	cq->cq_fid.ops = &sr_cq_ops;
	*out = cq;
	return 0;
}

static int sr_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **out,
		      void *context)
{
	struct sr_cq *cq;
	int ret;
	if (!out)
		return -FI_EINVAL;
	ret = sr_cq_create((struct sr_domain *)domain, attr, &cq, context);
	if (ret)
		return ret;
	*out = &cq->cq_fid;
	return 0;
}

/* ------------------------------------------------------------------ data transfer */

static int sr_sgl(const struct iovec *iov, void **desc, size_t count, softrnic_sge *sge)
{
	if (count > SR_MAX_SGE || (count && (!iov || !desc)))
		return -FI_EINVAL;
	for (size_t i = 0; i < count; i++) {
		struct sr_mr *mr = desc[i];
		if (!mr && iov[i].iov_len)
			return -FI_EINVAL; /* FI_MR_LOCAL: every buffer needs its descriptor */
		if (iov[i].iov_len > SR_MAX_MSG)
			return -FI_EMSGSIZE;
		sge[i].to = (uint64_t)(uintptr_t)iov[i].iov_base;
		sge[i].len = (uint32_t)iov[i].iov_len;
		sge[i].stag = mr ? mr->stag : 0;
	}
	return 0;
}

/* Posts to the send queue and counts the post. The endpoint's post lock is held. */
static ssize_t sr_post_locked(struct sr_ep *ep, softrnic_send_wr *wr, uint64_t flags)
{
	int st;
	if ((ep->tx_sel && !(flags & FI_COMPLETION)) || (flags & FI_INJECT))
		wr->flags |= SOFTRNIC_WR_UNSIGNALED; /* FI_INJECT: no completion on success */
	if (flags & FI_FENCE)
		wr->flags |= SOFTRNIC_WR_FENCE;
	st = sr_lib.qp_post_sq(ep->qp, wr);
	if (st == SOFTRNIC_ERR_QUEUE_FULL)
		return -FI_EAGAIN;
	if (st < 0)
		return sr_check(st, "softrnic_qp_post_sq");
	ep->sq_posts++;
	return 0;
}

static ssize_t sr_post_send(struct sr_ep *ep, softrnic_send_wr *wr, uint64_t flags)
{
	ssize_t r;
	if (!ep->qp)
		return -FI_EOPBADSTATE;
	pthread_mutex_lock(&ep->post_lock);
	r = sr_post_locked(ep, wr, flags);
	pthread_mutex_unlock(&ep->post_lock);
	return r;
}

/* FI_INJECT: gathers `iov` into the endpoint's next bounce slot and posts `wr` (a Send or
 * RDMA Write) from it without a completion, then `imm` (Immediate Data) if given. The
 * caller's buffers are free again on return and need no descriptor. */
static ssize_t sr_post_inject(struct sr_ep *ep, softrnic_send_wr *wr, const struct iovec *iov,
			      size_t count, softrnic_send_wr *imm)
{
	softrnic_sge sge;
	size_t len = 0;
	ssize_t r;
	uint8_t *slot;
	if (count && !iov)
		return -FI_EINVAL;
	for (size_t i = 0; i < count; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -FI_EINVAL;
		if (iov[i].iov_len > SR_INJECT - len)
			return -FI_EMSGSIZE;
		len += iov[i].iov_len;
	}
	if (!ep->qp)
		return -FI_EOPBADSTATE;
	pthread_mutex_lock(&ep->post_lock);
	slot = ep->own + (ep->sq_posts % SR_INJECT_SLOTS) * SR_INJECT;
	len = 0;
	for (size_t i = 0; i < count; i++) {
		if (iov[i].iov_len)
			memcpy(slot + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	sge.to = (uint64_t)(uintptr_t)slot;
	sge.len = (uint32_t)len;
	sge.stag = ep->own_stag;
	wr->sg_list = len ? &sge : NULL;
	wr->num_sge = len ? 1 : 0;
	r = sr_post_locked(ep, wr, FI_INJECT);
	if (!r && imm)
		r = sr_post_locked(ep, imm, FI_INJECT);
	pthread_mutex_unlock(&ep->post_lock);
	return r;
}

/* RFC 7306 Immediate Data carrying `data` (big-endian, as the peer's completion reads it). */
static void sr_imm_wr(softrnic_send_wr *wr, uint64_t data, void *context)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = (uint64_t)(uintptr_t)context;
	wr->opcode = SOFTRNIC_WR_IMM_DATA;
	for (int i = 7; i >= 0; i--, data >>= 8)
		wr->imm_data[i] = (uint8_t)data;
}

static size_t sr_iov_len(const struct iovec *iov, size_t count)
{
	size_t len = 0;
	for (size_t i = 0; iov && i < count; i++)
		len += iov[i].iov_len;
	return len;
}

/* fi_senddata / fi_injectdata: RFC 7306 has Immediate Data only as a message of its own,
 * without payload (§4: Immediate Data, 8 bytes, consuming an untagged buffer of the peer),
 * and no Send that carries both. Remote CQ data with no payload is that message; with a
 * payload it is -FI_ENOSYS. At the peer it completes a receive with FI_REMOTE_CQ_DATA and
 * length 0, as fi_writedata's does (the wire does not tell them apart). */
static ssize_t sr_senddata_post(struct sr_ep *ep, size_t len, uint64_t data, void *context,
				uint64_t flags)
{
	softrnic_send_wr wr;
	if (!ep->cq_data)
		return -FI_ENOSYS;
	if (len) {
		FI_INFO(&sr_prov, FI_LOG_EP_DATA,
			"remote CQ data with %zu bytes: RFC 7306 Immediate Data has no payload\n",
			len);
		return -FI_ENOSYS;
	}
	sr_imm_wr(&wr, data, context);
	wr.wr_id |= SR_WRID_ATOMIC_WRITE;
	return sr_post_send(ep, &wr, flags);
}

static ssize_t sr_recvv_flags(struct sr_ep *ep, const struct iovec *iov, void **desc,
			      size_t count, void *context)
{
	softrnic_sge sge[SR_MAX_SGE];
	softrnic_recv_wr wr = { .wr_id = (uint64_t)(uintptr_t)context, .sg_list = sge,
				.num_sge = (uint32_t)count };
	int ret = sr_sgl(iov, desc, count, sge), st;
	if (ret)
		return ret;
	if (!ep->qp)
		return -FI_EOPBADSTATE;
	st = sr_lib.qp_post_rq(ep->qp, &wr);
	if (st == SOFTRNIC_ERR_QUEUE_FULL)
		return -FI_EAGAIN;
	return st < 0 ? sr_check(st, "softrnic_qp_post_rq") : 0;
}

static ssize_t sr_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
		       void *context)
{
	struct iovec iov = { buf, len };
	(void)src;
	return sr_recvv_flags((struct sr_ep *)ep, &iov, &desc, 1, context);
}

static ssize_t sr_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			fi_addr_t src, void *context)
{
	(void)src;
	return sr_recvv_flags((struct sr_ep *)ep, iov, desc, count, context);
}

static ssize_t sr_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	(void)flags;
	if (!msg)
		return -FI_EINVAL;
	return sr_recvv_flags((struct sr_ep *)ep, msg->msg_iov, msg->desc, msg->iov_count,
			      msg->context);
}

static ssize_t sr_sendv_flags(struct sr_ep *ep, const struct iovec *iov, void **desc,
			      size_t count, void *context, uint64_t flags)
{
	softrnic_sge sge[SR_MAX_SGE];
	softrnic_send_wr wr;
	int ret;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)(uintptr_t)context;
	wr.opcode = SOFTRNIC_WR_SEND;
	if (flags & FI_INJECT)
		return sr_post_inject(ep, &wr, iov, count, NULL);
	ret = sr_sgl(iov, desc, count, sge);
	if (ret)
		return ret;
	wr.sg_list = sge;
	wr.num_sge = (uint32_t)count;
	return sr_post_send(ep, &wr, flags);
}

static ssize_t sr_send(struct fid_ep *ep_fid, const void *buf, size_t len, void *desc,
		       fi_addr_t dest, void *context)
{
	struct sr_ep *ep = (struct sr_ep *)ep_fid;
	struct iovec iov = { (void *)buf, len };
	(void)dest;
	return sr_sendv_flags(ep, &iov, &desc, 1, context, ep->tx_flags);
}

static ssize_t sr_sendv(struct fid_ep *ep_fid, const struct iovec *iov, void **desc,
			size_t count, fi_addr_t dest, void *context)
{
	struct sr_ep *ep = (struct sr_ep *)ep_fid;
	(void)dest;
	return sr_sendv_flags(ep, iov, desc, count, context, ep->tx_flags);
}

static ssize_t sr_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
	if (!msg)
		return -FI_EINVAL;
	if (flags & FI_REMOTE_CQ_DATA)
		return sr_senddata_post((struct sr_ep *)ep,
					sr_iov_len(msg->msg_iov, msg->iov_count), msg->data,
					msg->context, flags);
	return sr_sendv_flags((struct sr_ep *)ep, msg->msg_iov, msg->desc, msg->iov_count,
			      msg->context, flags);
}

static ssize_t sr_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest)
{
	struct iovec iov = { (void *)buf, len };
	(void)dest;
	return sr_sendv_flags((struct sr_ep *)ep, &iov, NULL, 1, NULL, FI_INJECT);
}

static ssize_t sr_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			   uint64_t data, fi_addr_t dest, void *context)
{
	(void)buf; (void)desc; (void)dest;
	return sr_senddata_post((struct sr_ep *)ep, len, data, context,
				((struct sr_ep *)ep)->tx_flags);
}

static ssize_t sr_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			     fi_addr_t dest)
{
	(void)buf; (void)dest;
	return sr_senddata_post((struct sr_ep *)ep, len, data, NULL, FI_INJECT);
}

static struct fi_ops_msg sr_msg_ops = {
	.size = sizeof(struct fi_ops_msg), .recv = sr_recv, .recvv = sr_recvv,
	.recvmsg = sr_recvmsg, .send = sr_send, .sendv = sr_sendv, .sendmsg = sr_sendmsg,
	.inject = sr_inject, .senddata = sr_senddata, .injectdata = sr_injectdata,
};

/* RMA: one contiguous remote range per operation (as libfabric's verbs provider). */
static ssize_t sr_rma(struct sr_ep *ep, uint32_t opcode, const struct iovec *iov, void **desc,
		      size_t count, uint64_t addr, uint64_t key, void *context, uint64_t flags,
		      int with_data, uint64_t data)
{
	softrnic_sge sge[SR_MAX_SGE];
	softrnic_send_wr wr, imm;
	int ret;
	ssize_t r;
	if (key > UINT32_MAX)
		return -FI_EINVAL;
	if (with_data && !ep->cq_data)
		return -FI_ENOSYS;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)(uintptr_t)context;
	wr.opcode = opcode;
	wr.remote_stag = (uint32_t)key;
	wr.remote_to = addr;
	if (with_data)
		sr_imm_wr(&imm, data, context);
	if (flags & FI_INJECT) {
		if (opcode != SOFTRNIC_WR_RDMA_WRITE)
			return -FI_EINVAL; /* only writes inject */
		return sr_post_inject(ep, &wr, iov, count, with_data ? &imm : NULL);
	}
	ret = sr_sgl(iov, desc, count, sge);
	if (ret)
		return ret;
	wr.sg_list = sge;
	wr.num_sge = (uint32_t)count;
	if (!with_data)
		return sr_post_send(ep, &wr, flags);
	/* fi_writedata: the RDMA Write, then RFC 7306 Immediate Data carrying the 8 bytes of
	 * `data`, which completes a receive of the peer with FI_REMOTE_CQ_DATA. Only the
	 * Immediate Data completes locally: ordering on the QP means the Write was placed. */
	wr.flags |= SOFTRNIC_WR_UNSIGNALED;
	r = sr_post_send(ep, &wr, flags | FI_COMPLETION);
	if (r)
		return r;
	return sr_post_send(ep, &imm, flags);
}

static ssize_t sr_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
		       uint64_t addr, uint64_t key, void *context)
{
	struct iovec iov = { buf, len };
	(void)src;
	return sr_rma((struct sr_ep *)ep, SOFTRNIC_WR_RDMA_READ, &iov, &desc, 1, addr, key,
		      context, ((struct sr_ep *)ep)->tx_flags, 0, 0);
}

static ssize_t sr_readv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
	(void)src;
	return sr_rma((struct sr_ep *)ep, SOFTRNIC_WR_RDMA_READ, iov, desc, count, addr, key,
		      context, ((struct sr_ep *)ep)->tx_flags, 0, 0);
}

static ssize_t sr_readmsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov)
		return -FI_EINVAL;
	return sr_rma((struct sr_ep *)ep, SOFTRNIC_WR_RDMA_READ, msg->msg_iov, msg->desc,
		      msg->iov_count, msg->rma_iov->addr, msg->rma_iov->key, msg->context, flags,
		      0, 0);
}

static ssize_t sr_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	struct iovec iov = { (void *)buf, len };
	(void)dest;
	return sr_rma((struct sr_ep *)ep, SOFTRNIC_WR_RDMA_WRITE, &iov, &desc, 1, addr, key,
		      context, ((struct sr_ep *)ep)->tx_flags, 0, 0);
}

static ssize_t sr_writev(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
	(void)dest;
	return sr_rma((struct sr_ep *)ep, SOFTRNIC_WR_RDMA_WRITE, iov, desc, count, addr, key,
		      context, ((struct sr_ep *)ep)->tx_flags, 0, 0);
}

static ssize_t sr_writemsg(struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags)
{
	if (!msg || msg->rma_iov_count != 1 || !msg->rma_iov)
		return -FI_EINVAL;
	return sr_rma((struct sr_ep *)ep, SOFTRNIC_WR_RDMA_WRITE, msg->msg_iov, msg->desc,
		      msg->iov_count, msg->rma_iov->addr, msg->rma_iov->key, msg->context, flags,
		      !!(flags & FI_REMOTE_CQ_DATA), msg->data);
}

static ssize_t sr_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
			    uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
			    void *context)
{
	struct iovec iov = { (void *)buf, len };
	(void)dest;
	return sr_rma((struct sr_ep *)ep, SOFTRNIC_WR_RDMA_WRITE, &iov, &desc, 1, addr, key,
		      context, ((struct sr_ep *)ep)->tx_flags, 1, data);
}

static ssize_t sr_inject_write(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest,
			       uint64_t addr, uint64_t key)
{
	struct iovec iov = { (void *)buf, len };
	(void)dest;
	return sr_rma((struct sr_ep *)ep, SOFTRNIC_WR_RDMA_WRITE, &iov, NULL, 1, addr, key, NULL,
		      FI_INJECT, 0, 0);
}

static ssize_t sr_inject_writedata(struct fid_ep *ep, const void *buf, size_t len,
				   uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	struct iovec iov = { (void *)buf, len };
	(void)dest;
	return sr_rma((struct sr_ep *)ep, SOFTRNIC_WR_RDMA_WRITE, &iov, NULL, 1, addr, key, NULL,
		      FI_INJECT, 1, data);
}

static struct fi_ops_rma sr_rma_ops = {
	.size = sizeof(struct fi_ops_rma), .read = sr_read, .readv = sr_readv,
	.readmsg = sr_readmsg, .write = sr_write, .writev = sr_writev, .writemsg = sr_writemsg,
	.inject = sr_inject_write, .writedata = sr_writedata,
	.injectdata = sr_inject_writedata,
};

/* ------------------------------------------------------------------ atomics (RFC 7306) */

enum sr_atomic_kind { SR_AT_WRITE, SR_AT_FETCH, SR_AT_COMPARE };

/* What RFC 7306 carries: Fetch and Add (FI_SUM, fetching or not) and Compare and Swap
 * (FI_CSWAP) of one 64-bit integer. Signed and unsigned add and compare alike in two's
 * complement. Anything else: -FI_EOPNOTSUPP. */
static int sr_atomic_valid(enum sr_atomic_kind kind, enum fi_datatype dt, enum fi_op op,
			   size_t *count)
{
	int ok;
	if (dt != FI_UINT64 && dt != FI_INT64)
		return -FI_EOPNOTSUPP;
	ok = kind == SR_AT_COMPARE ? op == FI_CSWAP : op == FI_SUM;
	if (!ok)
		return -FI_EOPNOTSUPP;
	if (count)
		*count = 1;
	return 0;
}

static int sr_atomic_writevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				size_t *count)
{
	(void)ep;
	return sr_atomic_valid(SR_AT_WRITE, dt, op, count);
}

static int sr_atomic_readwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				    size_t *count)
{
	(void)ep;
	return sr_atomic_valid(SR_AT_FETCH, dt, op, count);
}

static int sr_atomic_compwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op,
				    size_t *count)
{
	(void)ep;
	return sr_atomic_valid(SR_AT_COMPARE, dt, op, count);
}

static int sr_query_atomic(struct fid_domain *d, enum fi_datatype dt, enum fi_op op,
			   struct fi_atomic_attr *attr, uint64_t flags)
{
	size_t count;
	enum sr_atomic_kind kind = (flags & FI_COMPARE_ATOMIC) ? SR_AT_COMPARE :
				   (flags & FI_FETCH_ATOMIC)   ? SR_AT_FETCH :
								 SR_AT_WRITE;
	int ret;
	(void)d;
	if (!attr || (flags & ~(uint64_t)(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC)) ||
	    (flags & FI_FETCH_ATOMIC && flags & FI_COMPARE_ATOMIC))
		return -FI_EINVAL;
	ret = sr_atomic_valid(kind, dt, op, &count);
	if (ret)
		return ret;
	attr->count = count;
	attr->size = SR_ATOMIC_SIZE;
	return 0;
}

/* One RFC 7306 atomic: `count` (1) 64-bit operand at `buf`, at remote `addr` (8-byte
 * aligned) of `key`; the original value lands in `result` (registered: `result_desc`), or
 * for SR_AT_WRITE in the endpoint's scratch word. */
static ssize_t sr_atomic_post(struct sr_ep *ep, enum sr_atomic_kind kind, const void *buf,
			      size_t count, const void *compare, void *result,
			      void *result_desc, uint64_t addr, uint64_t key,
			      enum fi_datatype dt, enum fi_op op, void *context, uint64_t flags)
{
	softrnic_sge sge;
	softrnic_send_wr wr;
	uint64_t operand;
	int ret = sr_atomic_valid(kind, dt, op, NULL);
	if (ret)
		return ret;
	if (count != 1 || !buf || key > UINT32_MAX)
		return -FI_EINVAL;
	if (addr % SR_ATOMIC_SIZE) {
		FI_INFO(&sr_prov, FI_LOG_EP_DATA,
			"atomic at %#llx: RFC 7306 needs an 8-byte aligned target\n",
			(unsigned long long)addr);
		return -FI_EINVAL;
	}
	if (!ep->qp)
		return -FI_EOPBADSTATE;
	memcpy(&operand, buf, sizeof(operand));
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)(uintptr_t)context;
	wr.remote_stag = (uint32_t)key;
	wr.remote_to = addr;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	sge.len = SR_ATOMIC_SIZE;
	if (kind == SR_AT_WRITE) {
		sge.to = (uint64_t)(uintptr_t)(ep->own + SR_SCRATCH_OFF);
		sge.stag = ep->own_stag;
		wr.wr_id |= SR_WRID_ATOMIC_WRITE;
	} else {
		struct sr_mr *mr = result_desc;
		if (!result || !mr)
			return -FI_EINVAL; /* FI_MR_LOCAL: the result buffer needs its descriptor */
		sge.to = (uint64_t)(uintptr_t)result;
		sge.stag = mr->stag;
	}
	if (kind == SR_AT_COMPARE) {
		if (!compare)
			return -FI_EINVAL;
		wr.opcode = SOFTRNIC_WR_CMP_SWAP;
		memcpy(&wr.compare_add, compare, sizeof(wr.compare_add));
		wr.compare_add_mask = UINT64_MAX;
		wr.swap = operand;
		wr.swap_mask = UINT64_MAX;
	} else {
		wr.opcode = SOFTRNIC_WR_FETCH_ADD;
		wr.compare_add = operand;
	}
	return sr_post_send(ep, &wr, flags);
}

/* The one remote IOV and the one local IOV an RFC 7306 atomic has. */
static int sr_atomic_msg_ok(const struct fi_msg_atomic *msg)
{
	return msg && msg->iov_count == 1 && msg->msg_iov && msg->rma_iov_count == 1 &&
	       msg->rma_iov && msg->rma_iov->count == msg->msg_iov->count;
}

static ssize_t sr_atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc,
			       fi_addr_t dest, uint64_t addr, uint64_t key,
			       enum fi_datatype dt, enum fi_op op, void *context)
{
	(void)desc; (void)dest; /* the operand travels in the request */
	return sr_atomic_post((struct sr_ep *)ep, SR_AT_WRITE, buf, count, NULL, NULL, NULL,
			      addr, key, dt, op, context, ((struct sr_ep *)ep)->tx_flags);
}

static ssize_t sr_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
				enum fi_datatype dt, enum fi_op op, void *context)
{
	if (count != 1 || !iov)
		return -FI_EINVAL;
	return sr_atomic_write(ep, iov->addr, iov->count, desc ? desc[0] : NULL, dest, addr,
			       key, dt, op, context);
}

static ssize_t sr_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				  uint64_t flags)
{
	if (!sr_atomic_msg_ok(msg))
		return -FI_EINVAL;
	return sr_atomic_post((struct sr_ep *)ep, SR_AT_WRITE, msg->msg_iov->addr,
			      msg->msg_iov->count, NULL, NULL, NULL, msg->rma_iov->addr,
			      msg->rma_iov->key, msg->datatype, msg->op, msg->context, flags);
}

static ssize_t sr_atomic_inject(struct fid_ep *ep, const void *buf, size_t count,
				fi_addr_t dest, uint64_t addr, uint64_t key,
				enum fi_datatype dt, enum fi_op op)
{
	(void)dest;
	/* No completion on success (FI_INJECT): the operand is copied into the request. */
	return sr_atomic_post((struct sr_ep *)ep, SR_AT_WRITE, buf, count, NULL, NULL, NULL,
			      addr, key, dt, op, NULL, FI_INJECT);
}

static ssize_t sr_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count,
				   void *desc, void *result, void *result_desc,
				   fi_addr_t dest, uint64_t addr, uint64_t key,
				   enum fi_datatype dt, enum fi_op op, void *context)
{
	(void)desc; (void)dest;
	return sr_atomic_post((struct sr_ep *)ep, SR_AT_FETCH, buf, count, NULL, result,
			      result_desc, addr, key, dt, op, context,
			      ((struct sr_ep *)ep)->tx_flags);
}

static ssize_t sr_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				    size_t count, struct fi_ioc *resultv, void **result_desc,
				    size_t result_count, fi_addr_t dest, uint64_t addr,
				    uint64_t key, enum fi_datatype dt, enum fi_op op,
				    void *context)
{
	if (count != 1 || !iov || result_count != 1 || !resultv || !result_desc ||
	    resultv->count != iov->count)
		return -FI_EINVAL;
	return sr_atomic_readwrite(ep, iov->addr, iov->count, desc ? desc[0] : NULL,
				   resultv->addr, result_desc[0], dest, addr, key, dt, op,
				   context);
}

static ssize_t sr_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				      struct fi_ioc *resultv, void **result_desc,
				      size_t result_count, uint64_t flags)
{
	if (!sr_atomic_msg_ok(msg) || result_count != 1 || !resultv || !result_desc ||
	    resultv->count != msg->msg_iov->count)
		return -FI_EINVAL;
	return sr_atomic_post((struct sr_ep *)ep, SR_AT_FETCH, msg->msg_iov->addr,
			      msg->msg_iov->count, NULL, resultv->addr, result_desc[0],
			      msg->rma_iov->addr, msg->rma_iov->key, msg->datatype, msg->op,
			      msg->context, flags);
}

static ssize_t sr_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count,
				   void *desc, const void *compare, void *compare_desc,
				   void *result, void *result_desc, fi_addr_t dest,
				   uint64_t addr, uint64_t key, enum fi_datatype dt,
				   enum fi_op op, void *context)
{
	(void)desc; (void)compare_desc; (void)dest;
	return sr_atomic_post((struct sr_ep *)ep, SR_AT_COMPARE, buf, count, compare, result,
			      result_desc, addr, key, dt, op, context,
			      ((struct sr_ep *)ep)->tx_flags);
}

static ssize_t sr_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
				    size_t count, const struct fi_ioc *comparev,
				    void **compare_desc, size_t compare_count,
				    struct fi_ioc *resultv, void **result_desc,
				    size_t result_count, fi_addr_t dest, uint64_t addr,
				    uint64_t key, enum fi_datatype dt, enum fi_op op,
				    void *context)
{
	(void)compare_desc; (void)desc; (void)dest;
	if (count != 1 || !iov || compare_count != 1 || !comparev || result_count != 1 ||
	    !resultv || !result_desc || comparev->count != iov->count ||
	    resultv->count != iov->count)
		return -FI_EINVAL;
	return sr_atomic_post((struct sr_ep *)ep, SR_AT_COMPARE, iov->addr, iov->count,
			      comparev->addr, resultv->addr, result_desc[0], addr, key, dt, op,
			      context, ((struct sr_ep *)ep)->tx_flags);
}

static ssize_t sr_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
				      const struct fi_ioc *comparev, void **compare_desc,
				      size_t compare_count, struct fi_ioc *resultv,
				      void **result_desc, size_t result_count, uint64_t flags)
{
	(void)compare_desc;
	if (!sr_atomic_msg_ok(msg) || compare_count != 1 || !comparev || result_count != 1 ||
	    !resultv || !result_desc || comparev->count != msg->msg_iov->count ||
	    resultv->count != msg->msg_iov->count)
		return -FI_EINVAL;
	return sr_atomic_post((struct sr_ep *)ep, SR_AT_COMPARE, msg->msg_iov->addr,
			      msg->msg_iov->count, comparev->addr, resultv->addr,
			      result_desc[0], msg->rma_iov->addr, msg->rma_iov->key,
			      msg->datatype, msg->op, msg->context, flags);
}

static struct fi_ops_atomic sr_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic), .write = sr_atomic_write,
	.writev = sr_atomic_writev, .writemsg = sr_atomic_writemsg,
	.inject = sr_atomic_inject, .readwrite = sr_atomic_readwrite,
	.readwritev = sr_atomic_readwritev, .readwritemsg = sr_atomic_readwritemsg,
	.compwrite = sr_atomic_compwrite, .compwritev = sr_atomic_compwritev,
	.compwritemsg = sr_atomic_compwritemsg, .writevalid = sr_atomic_writevalid,
	.readwritevalid = sr_atomic_readwritevalid,
	.compwritevalid = sr_atomic_compwritevalid,
};

/* ------------------------------------------------------------------ endpoints */

static void sr_ep_unlink(struct sr_ep *ep)
{
	struct sr_fabric *fab = ep->dom->fab;
	pthread_mutex_lock(&fab->lock);
	for (struct sr_ep **p = &fab->eps; *p; p = &(*p)->next)
		if (*p == ep) {
			*p = ep->next;
			break;
		}
	pthread_mutex_unlock(&fab->lock);
}

static int sr_ep_close(struct fid *fid)
{
	struct sr_ep *ep = (struct sr_ep *)fid;
	sr_ep_unlink(ep);
	if (ep->qp)
		sr_lib.qp_destroy(ep->qp);
	if (ep->connreq) {
		if (ep->connreq->req)
			sr_lib.conn_request_reject(ep->connreq->req, NULL, 0);
		free(ep->connreq);
	}
	if (ep->own_cq)
		sr_cq_close(&ep->own_cq->cq_fid.fid);
	if (ep->own_mr && sr_lib.deregister_mem(ep->own_mr) == SOFTRNIC_ERR_BUSY) {
		/* Work still holds the bounce slots: keep them until the RNIC is closed. */
		struct sr_orphan *o = malloc(sizeof(*o));
		struct sr_fabric *fab = ep->dom->fab;
		if (o) {
			o->mem = ep->own;
			pthread_mutex_lock(&fab->lock);
			o->next = fab->orphans;
			fab->orphans = o;
			pthread_mutex_unlock(&fab->lock);
		}
		ep->own = NULL; /* without a list node it is leaked, never freed under work */
	}
	free(ep->own);
	fi_freeinfo(ep->info);
	pthread_mutex_destroy(&ep->post_lock);
	free(ep);
	return 0;
}

static int sr_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct sr_ep *ep = (struct sr_ep *)fid;
	if (!bfid)
		return -FI_EINVAL;
	if (ep->qp)
		return -FI_EOPBADSTATE; /* bind before fi_enable */
	switch (bfid->fclass) {
	case FI_CLASS_EQ:
		ep->eq = (struct sr_eq *)bfid;
		return 0;
	case FI_CLASS_CQ:
		if (!(flags & (FI_TRANSMIT | FI_RECV)))
			return -FI_EINVAL;
		if (flags & FI_TRANSMIT) {
			ep->tx_cq = (struct sr_cq *)bfid;
			ep->tx_sel = flags & FI_SELECTIVE_COMPLETION;
		}
		if (flags & FI_RECV) {
			ep->rx_cq = (struct sr_cq *)bfid;
			ep->rx_sel = flags & FI_SELECTIVE_COMPLETION;
		}
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int sr_ep_enable(struct sr_ep *ep)
{
	softrnic_qp_attr attr = { .sq_depth = SR_QUEUE, .rq_depth = SR_QUEUE,
				  .max_sge = SR_MAX_SGE,
				  .first_fpdu_delay_ms = (uint32_t)sr_first_fpdu_delay_ms };
	struct sr_fabric *fab = ep->dom->fab;
	int st;
	if (ep->qp)
		return 0;
	if (!ep->eq)
		return -FI_ENOEQ;
	if (!ep->tx_cq && !ep->rx_cq)
		return -FI_ENOCQ;
	if (!ep->tx_cq || !ep->rx_cq) {
		int ret = sr_cq_create(ep->dom, NULL, &ep->own_cq, NULL);
		if (ret)
			return ret;
	}
	if (!ep->own_mr) {
		softrnic_mr_info mi;
		ep->own = aligned_alloc(64, SR_OWN_SIZE);
		if (!ep->own)
			return -FI_ENOMEM;
		memset(ep->own, 0, SR_OWN_SIZE);
		st = sr_lib.nsmr_register_mem(ep->dom->pd, ep->own, SR_OWN_SIZE,
					      SOFTRNIC_ACCESS_LOCAL_WRITE, &ep->own_mr);
		if (st < 0) {
			free(ep->own);
			ep->own = NULL;
			return sr_check(st, "softrnic_nsmr_register_mem");
		}
		sr_lib.mr_query(ep->own_mr, &mi);
		ep->own_stag = mi.stag;
	}
	st = sr_lib.qp_create(ep->dom->pd, ep->tx_cq ? ep->tx_cq->cq : ep->own_cq->cq,
				ep->rx_cq ? ep->rx_cq->cq : ep->own_cq->cq, &attr, &ep->qp);
	if (st < 0)
		return sr_check(st, "softrnic_qp_create");
	sr_lib.qp_id(ep->qp, &ep->qp_id);
	pthread_mutex_lock(&fab->lock);
	ep->next = fab->eps;
	fab->eps = ep;
	pthread_mutex_unlock(&fab->lock);
	return 0;
}

static int sr_ep_control(struct fid *fid, int command, void *arg)
{
	struct sr_ep *ep = (struct sr_ep *)fid;
	switch (command) {
	case FI_ENABLE:
		return sr_ep_enable(ep);
	case FI_GETOPSFLAG:
		if (!arg)
			return -FI_EINVAL;
		*(uint64_t *)arg = (*(uint64_t *)arg & FI_RECV) ? ep->rx_flags : ep->tx_flags;
		return 0;
	case FI_SETOPSFLAG:
		if (!arg)
			return -FI_EINVAL;
		if (*(uint64_t *)arg & FI_RECV)
			ep->rx_flags = *(uint64_t *)arg & ~(uint64_t)FI_RECV;
		else
			ep->tx_flags = *(uint64_t *)arg & ~(uint64_t)FI_TRANSMIT;
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static struct fi_ops sr_ep_fi_ops = {
	.size = sizeof(struct fi_ops), .close = sr_ep_close, .bind = sr_ep_bind,
	.control = sr_ep_control, .ops_open = sr_no_ops_open,
};

static ssize_t sr_ep_cancel(fid_t fid, void *ctx) { (void)fid; (void)ctx; return -FI_ENOSYS; }
static int sr_ep_getopt(fid_t fid, int level, int name, void *val, size_t *len)
{
	(void)fid;
	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	if (name == FI_OPT_CM_DATA_SIZE) {
		if (!val || !len || *len < sizeof(size_t))
			return -FI_ETOOSMALL;
		*(size_t *)val = SR_CM_DATA;
		*len = sizeof(size_t);
		return 0;
	}
	return -FI_ENOPROTOOPT;
}
static int sr_ep_setopt(fid_t fid, int level, int name, const void *val, size_t len)
{ (void)fid; (void)level; (void)name; (void)val; (void)len; return -FI_ENOPROTOOPT; }
static ssize_t sr_size_left(struct fid_ep *ep) { (void)ep; return -FI_ENOSYS; }

static struct fi_ops_ep sr_ep_ops = {
	.size = sizeof(struct fi_ops_ep), .cancel = sr_ep_cancel, .getopt = sr_ep_getopt,
	.setopt = sr_ep_setopt, .rx_size_left = sr_size_left, .tx_size_left = sr_size_left,
};

/* The connection parameters for fi_connect/fi_accept: CM data of `len` bytes laid out in
 * `wire` (SR_CM_HDR + SR_CM_DATA bytes, which must outlive the call taking `cp`). */
static int sr_conn_param(const void *param, size_t len, softrnic_conn_param *cp, uint8_t *wire)
{
	ssize_t n = sr_cm_wrap(param, len, wire);
	if (n < 0)
		return (int)n;
	memset(cp, 0, sizeof(*cp));
	cp->ird = SR_IRD_ORD;
	cp->ord = SR_IRD_ORD;
	cp->private_data = wire;
	cp->private_data_len = (uint32_t)n;
	return 0;
}

static int sr_ep_connect(struct fid_ep *ep_fid, const void *addr, const void *param,
			 size_t paramlen)
{
	struct sr_ep *ep = (struct sr_ep *)ep_fid;
	softrnic_conn_param cp;
	uint8_t wire[SR_CM_HDR + SR_CM_DATA];
	char to[64];
	int ret;
	const struct sockaddr_in *sin = addr ? addr :
				       (ep->info ? ep->info->dest_addr : NULL);
	if (!sin) {
		/* E.g. an info from fi_getinfo(NULL, service, FI_SOURCE, ...): it names only a
		 * source (fabtests 1.17 with -b and no -s asks for exactly that). */
		SR_WARN(FI_LOG_EP_CTRL, "fi_connect: no destination (no address given and the "
					"endpoint's info has no dest_addr)\n");
		return -FI_EINVAL;
	}
	if (sin->sin_family != AF_INET)
		return -FI_EINVAL;
	ret = sr_conn_param(param, paramlen, &cp, wire);
	if (ret)
		return ret;
	ret = sr_ep_enable(ep);
	if (ret)
		return ret;
	if (sr_addr_str(sin, to, sizeof(to)))
		return -FI_EINVAL;
	ep->peer = *sin;
	return sr_check(sr_lib.qp_connect(ep->qp, to, &cp), "softrnic_qp_connect");
}

static int sr_ep_accept(struct fid_ep *ep_fid, const void *param, size_t paramlen)
{
	struct sr_ep *ep = (struct sr_ep *)ep_fid;
	softrnic_conn_param cp;
	uint8_t wire[SR_CM_HDR + SR_CM_DATA];
	int ret;
	if (!ep->connreq || !ep->connreq->req)
		return -FI_EINVAL; /* not an endpoint made from a FI_CONNREQ */
	ret = sr_conn_param(param, paramlen, &cp, wire);
	if (ret)
		return ret;
	ret = sr_ep_enable(ep);
	if (ret)
		return ret;
	ret = sr_check(sr_lib.conn_request_accept(ep->connreq->req, ep->qp, &cp),
		       "softrnic_conn_request_accept");
	if (!ret)
		ep->connreq->req = NULL;
	return ret;
}

static int sr_ep_shutdown(struct fid_ep *ep_fid, uint64_t flags)
{
	struct sr_ep *ep = (struct sr_ep *)ep_fid;
	(void)flags;
	if (!ep->qp)
		return -FI_EOPBADSTATE;
	return sr_check(sr_lib.qp_disconnect(ep->qp), "softrnic_qp_disconnect");
}

static int sr_ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct sr_ep *ep = (struct sr_ep *)fid;
	if (!addrlen)
		return -FI_EINVAL;
	if (*addrlen < sizeof(struct sockaddr_in)) {
		*addrlen = sizeof(struct sockaddr_in);
		return -FI_ETOOSMALL;
	}
	if (!ep->info || !ep->info->src_addr)
		return -FI_EADDRNOTAVAIL; /* the C ABI does not report a QP's local address */
	memcpy(addr, ep->info->src_addr, sizeof(struct sockaddr_in));
	*addrlen = sizeof(struct sockaddr_in);
	return 0;
}

static int sr_ep_getpeer(struct fid_ep *ep_fid, void *addr, size_t *addrlen)
{
	struct sr_ep *ep = (struct sr_ep *)ep_fid;
	if (!addrlen)
		return -FI_EINVAL;
	if (*addrlen < sizeof(struct sockaddr_in)) {
		*addrlen = sizeof(struct sockaddr_in);
		return -FI_ETOOSMALL;
	}
	if (!ep->peer.sin_family)
		return -FI_ENOTCONN;
	memcpy(addr, &ep->peer, sizeof(ep->peer));
	*addrlen = sizeof(ep->peer);
	return 0;
}

static int sr_no_setname(fid_t fid, void *addr, size_t len)
{ (void)fid; (void)addr; (void)len; return -FI_ENOSYS; }
static int sr_no_listen(struct fid_pep *pep) { (void)pep; return -FI_ENOSYS; }
static int sr_no_reject(struct fid_pep *pep, fid_t h, const void *p, size_t l)
{ (void)pep; (void)h; (void)p; (void)l; return -FI_ENOSYS; }
static int sr_no_join(struct fid_ep *ep, const void *a, uint64_t f, struct fid_mc **mc, void *c)
{ (void)ep; (void)a; (void)f; (void)mc; (void)c; return -FI_ENOSYS; }
static int sr_no_connect(struct fid_ep *ep, const void *a, const void *p, size_t l)
{ (void)ep; (void)a; (void)p; (void)l; return -FI_ENOSYS; }
static int sr_no_accept(struct fid_ep *ep, const void *p, size_t l)
{ (void)ep; (void)p; (void)l; return -FI_ENOSYS; }
static int sr_no_shutdown(struct fid_ep *ep, uint64_t f) { (void)ep; (void)f; return -FI_ENOSYS; }
static int sr_no_getpeer(struct fid_ep *ep, void *a, size_t *l)
{ (void)ep; (void)a; (void)l; return -FI_ENOSYS; }

static struct fi_ops_cm sr_ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm), .setname = sr_no_setname, .getname = sr_ep_getname,
	.getpeer = sr_ep_getpeer, .connect = sr_ep_connect, .listen = sr_no_listen,
	.accept = sr_ep_accept, .reject = sr_no_reject, .shutdown = sr_ep_shutdown,
	.join = sr_no_join,
};

static int sr_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **out,
		       void *context)
{
	struct sr_domain *dom = (struct sr_domain *)domain;
	struct sr_ep *ep;
	if (!info || !out)
		return -FI_EINVAL;
	if (info->ep_attr && info->ep_attr->type != FI_EP_MSG &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	if (info->handle && info->handle->fclass != FI_CLASS_CONNREQ)
		return -FI_EINVAL;
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->dom = dom;
	ep->info = fi_dupinfo(info);
	if (!ep->info) {
		free(ep);
		return -FI_ENOMEM;
	}
	pthread_mutex_init(&ep->post_lock, NULL);
	if (info->handle) {
		ep->connreq = (struct sr_connreq *)info->handle;
		ep->info->handle = NULL;
		if (info->dest_addr && info->dest_addrlen >= sizeof(ep->peer))
			memcpy(&ep->peer, info->dest_addr, sizeof(ep->peer));
	}
	ep->cq_data = info->domain_attr && info->domain_attr->cq_data_size > 0;
	if (info->tx_attr)
		ep->tx_flags = info->tx_attr->op_flags;
	if (info->rx_attr)
		ep->rx_flags = info->rx_attr->op_flags;
	ep->ep_fid.fid.fclass = FI_CLASS_EP;
	ep->ep_fid.fid.context = context;
	ep->ep_fid.fid.ops = &sr_ep_fi_ops;
	ep->ep_fid.ops = &sr_ep_ops;
	ep->ep_fid.cm = &sr_ep_cm_ops;
	ep->ep_fid.msg = &sr_msg_ops;
	ep->ep_fid.rma = &sr_rma_ops;
	ep->ep_fid.atomic = &sr_atomic_ops;
	*out = &ep->ep_fid;
	return 0;
}

/* ------------------------------------------------------------------ passive endpoint */

static int sr_pep_close(struct fid *fid)
{
	struct sr_pep *pep = (struct sr_pep *)fid;
	struct sr_fabric *fab = pep->fab;
	pthread_mutex_lock(&fab->lock);
	for (struct sr_pep **p = &fab->peps; *p; p = &(*p)->next)
		if (*p == pep) {
			*p = pep->next;
			break;
		}
	pthread_mutex_unlock(&fab->lock);
	if (pep->listener)
		sr_lib.listener_destroy(pep->listener);
	fi_freeinfo(pep->info);
	free(pep);
	return 0;
}

static int sr_pep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct sr_pep *pep = (struct sr_pep *)fid;
	(void)flags;
	if (!bfid || bfid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	pep->eq = (struct sr_eq *)bfid;
	return 0;
}

static struct fi_ops sr_pep_fi_ops = {
	.size = sizeof(struct fi_ops), .close = sr_pep_close, .bind = sr_pep_bind,
	.control = sr_no_control, .ops_open = sr_no_ops_open,
};

static int sr_pep_setname(fid_t fid, void *addr, size_t len)
{
	struct sr_pep *pep = (struct sr_pep *)fid;
	const struct sockaddr_in *sin = addr;
	if (!sin || len < sizeof(*sin) || sin->sin_family != AF_INET)
		return -FI_EINVAL;
	if (pep->listener)
		return -FI_EOPBADSTATE;
	pep->src = *sin;
	return 0;
}

/* A connectable address for a listener bound to INADDR_ANY: the host's first IPv4
 * address that is up and not loopback, else 127.0.0.1. */
static struct in_addr sr_host_addr(void)
{
	struct ifaddrs *ifs, *i;
	struct in_addr a = { htonl(INADDR_LOOPBACK) };
	if (getifaddrs(&ifs))
		return a;
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
		    !(i->ifa_flags & IFF_LOOPBACK)) {
			a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
			break;
		}
	freeifaddrs(ifs);
	return a;
}

static int sr_pep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct sr_pep *pep = (struct sr_pep *)fid;
	struct sockaddr_in name;
	if (!addrlen)
		return -FI_EINVAL;
	if (*addrlen < sizeof(struct sockaddr_in)) {
		*addrlen = sizeof(struct sockaddr_in);
		return -FI_ETOOSMALL;
	}
	name = pep->src;
	if (name.sin_addr.s_addr == htonl(INADDR_ANY))
		name.sin_addr = sr_host_addr();
	memcpy(addr, &name, sizeof(name));
	*addrlen = sizeof(pep->src);
	return 0;
}

static int sr_pep_listen(struct fid_pep *pep_fid)
{
	struct sr_pep *pep = (struct sr_pep *)pep_fid;
	char at[64];
	uint16_t port;
	int st;
	if (pep->listener)
		return 0;
	if (!pep->eq)
		return -FI_ENOEQ;
	if (sr_addr_str(&pep->src, at, sizeof(at)))
		return -FI_EINVAL;
	st = sr_lib.listen(pep->fab->rnic, at, &pep->listener);
	if (st < 0)
		return sr_check(st, "softrnic_listen") == -FI_EIO ? -FI_EADDRINUSE : sr_err(st);
	if (sr_lib.listener_port(pep->listener, &port) == SOFTRNIC_OK)
		pep->src.sin_port = htons(port);
	pthread_mutex_lock(&pep->fab->lock);
	pep->next = pep->fab->peps;
	pep->fab->peps = pep;
	pthread_mutex_unlock(&pep->fab->lock);
	return 0;
}

static int sr_pep_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t len)
{
	struct sr_connreq *creq = (struct sr_connreq *)handle;
	uint8_t wire[SR_CM_HDR + SR_CM_DATA];
	ssize_t n;
	int st;
	(void)pep;
	if (!creq || creq->fid.fclass != FI_CLASS_CONNREQ || !creq->req)
		return -FI_EINVAL;
	n = sr_cm_wrap(param, len, wire);
	if (n < 0)
		return (int)n;
	st = sr_lib.conn_request_reject(creq->req, wire, (size_t)n);
	creq->req = NULL;
	free(creq);
	return sr_check(st, "softrnic_conn_request_reject");
}

static struct fi_ops_cm sr_pep_cm_ops = {
	.size = sizeof(struct fi_ops_cm), .setname = sr_pep_setname, .getname = sr_pep_getname,
	.getpeer = sr_no_getpeer, .connect = sr_no_connect, .listen = sr_pep_listen,
	.accept = sr_no_accept, .reject = sr_pep_reject, .shutdown = sr_no_shutdown,
	.join = sr_no_join,
};

static struct fi_ops_ep sr_pep_ops = {
	.size = sizeof(struct fi_ops_ep), .cancel = sr_ep_cancel, .getopt = sr_ep_getopt,
	.setopt = sr_ep_setopt, .rx_size_left = sr_size_left, .tx_size_left = sr_size_left,
};

static int sr_passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **out,
			 void *context)
{
	struct sr_pep *pep;
	if (!info || !out)
		return -FI_EINVAL;
	pep = calloc(1, sizeof(*pep));
	if (!pep)
		return -FI_ENOMEM;
	pep->fab = (struct sr_fabric *)fabric;
	pep->info = fi_dupinfo(info);
	if (!pep->info) {
		free(pep);
		return -FI_ENOMEM;
	}
	pep->src.sin_family = AF_INET;
	if (info->src_addr && info->src_addrlen >= sizeof(pep->src) &&
	    ((struct sockaddr_in *)info->src_addr)->sin_family == AF_INET)
		memcpy(&pep->src, info->src_addr, sizeof(pep->src));
	pep->pep_fid.fid.fclass = FI_CLASS_PEP;
	pep->pep_fid.fid.context = context;
	pep->pep_fid.fid.ops = &sr_pep_fi_ops;
	pep->pep_fid.ops = &sr_pep_ops;
	pep->pep_fid.cm = &sr_pep_cm_ops;
	*out = &pep->pep_fid;
	return 0;
}

/* ------------------------------------------------------------------ domain, fabric */

static int sr_domain_close(struct fid *fid)
{
	struct sr_domain *dom = (struct sr_domain *)fid;
	int st = sr_lib.pd_deallocate(dom->pd);
	if (st < 0)
		return sr_check(st, "softrnic_pd_deallocate");
	fi_freeinfo(dom->info);
	free(dom);
	return 0;
}

static struct fi_ops sr_domain_fi_ops = {
	.size = sizeof(struct fi_ops), .close = sr_domain_close, .bind = sr_no_bind,
	.control = sr_no_control, .ops_open = sr_no_ops_open,
};

static int sr_no_av(struct fid_domain *d, struct fi_av_attr *a, struct fid_av **av, void *c)
{ (void)d; (void)a; (void)av; (void)c; return -FI_ENOSYS; }
static int sr_no_sep(struct fid_domain *d, struct fi_info *i, struct fid_ep **e, void *c)
{ (void)d; (void)i; (void)e; (void)c; return -FI_ENOSYS; }
static int sr_no_cntr(struct fid_domain *d, struct fi_cntr_attr *a, struct fid_cntr **n, void *c)
{ (void)d; (void)a; (void)n; (void)c; return -FI_ENOSYS; }
static int sr_no_poll(struct fid_domain *d, struct fi_poll_attr *a, struct fid_poll **p)
{ (void)d; (void)a; (void)p; return -FI_ENOSYS; }
static int sr_no_stx(struct fid_domain *d, struct fi_tx_attr *a, struct fid_stx **s, void *c)
{ (void)d; (void)a; (void)s; (void)c; return -FI_ENOSYS; }
static int sr_no_srx(struct fid_domain *d, struct fi_rx_attr *a, struct fid_ep **e, void *c)
{ (void)d; (void)a; (void)e; (void)c; return -FI_ENOSYS; }
static int sr_no_qcoll(struct fid_domain *d, enum fi_collective_op c,
		       struct fi_collective_attr *a, uint64_t f)
{ (void)d; (void)c; (void)a; (void)f; return -FI_ENOSYS; }

static struct fi_ops_domain sr_domain_ops = {
	.size = sizeof(struct fi_ops_domain), .av_open = sr_no_av, .cq_open = sr_cq_open,
	.endpoint = sr_endpoint, .scalable_ep = sr_no_sep, .cntr_open = sr_no_cntr,
	.poll_open = sr_no_poll, .stx_ctx = sr_no_stx, .srx_ctx = sr_no_srx,
	.query_atomic = sr_query_atomic, .query_collective = sr_no_qcoll,
};

static int sr_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **out,
		     void *context)
{
	struct sr_fabric *fab = (struct sr_fabric *)fabric;
	struct sr_domain *dom;
	int st;
	if (!info || !out)
		return -FI_EINVAL;
	if (info->domain_attr && info->domain_attr->name &&
	    strcmp(info->domain_attr->name, SR_PROV_NAME))
		return -FI_EINVAL;
	dom = calloc(1, sizeof(*dom));
	if (!dom)
		return -FI_ENOMEM;
	dom->fab = fab;
	st = sr_lib.pd_allocate(fab->rnic, &dom->pd);
	if (st < 0) {
		free(dom);
		return sr_check(st, "softrnic_pd_allocate");
	}
	dom->info = fi_dupinfo(info);
	dom->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom->domain_fid.fid.context = context;
	dom->domain_fid.fid.ops = &sr_domain_fi_ops;
	dom->domain_fid.ops = &sr_domain_ops;
	dom->domain_fid.mr = &sr_mr_ops;
	*out = &dom->domain_fid;
	return 0;
}

static int sr_fabric_close(struct fid *fid)
{
	struct sr_fabric *fab = (struct sr_fabric *)fid;
	if (fab->eps || fab->peps)
		return -FI_EBUSY;
	sr_lib.rnic_close(fab->rnic);
	while (fab->orphans) {
		struct sr_orphan *o = fab->orphans;
		fab->orphans = o->next;
		free(o->mem);
		free(o);
	}
	pthread_mutex_destroy(&fab->lock);
	free(fab);
	return 0;
}

static struct fi_ops sr_fabric_fi_ops = {
	.size = sizeof(struct fi_ops), .close = sr_fabric_close, .bind = sr_no_bind,
	.control = sr_no_control, .ops_open = sr_no_ops_open,
};

static int sr_no_wait(struct fid_fabric *f, struct fi_wait_attr *a, struct fid_wait **w)
{ (void)f; (void)a; (void)w; return -FI_ENOSYS; }

static int sr_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	(void)fabric;
	for (int i = 0; i < count; i++) {
		int ret;
		if (!fids[i])
			return -FI_EINVAL;
		switch (fids[i]->fclass) {
		case FI_CLASS_CQ:
			ret = sr_cq_trywait((struct sr_cq *)fids[i]);
			break;
		case FI_CLASS_EQ: {
			struct sr_eq *eq = (struct sr_eq *)fids[i];
			if (sr_manual)
				return -FI_EAGAIN; /* nothing signals the fd without progress calls */
			pthread_mutex_lock(&eq->fab->lock);
			sr_progress_cm(eq->fab);
			ret = eq->head ? -FI_EAGAIN : 0;
			pthread_mutex_unlock(&eq->fab->lock);
			break;
		}
		default:
			ret = -FI_EINVAL;
		}
		if (ret)
			return ret;
	}
	return 0;
}

static struct fi_ops_fabric sr_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric), .domain = sr_domain, .passive_ep = sr_passive_ep,
	.eq_open = sr_eq_open, .wait_open = sr_no_wait, .trywait = sr_trywait,
};

static int sr_fabric(struct fi_fabric_attr *attr, struct fid_fabric **out, void *context)
{
	struct sr_fabric *fab;
	int st;
	if (!out)
		return -FI_EINVAL;
	if (attr && attr->name && strcmp(attr->name, SR_PROV_NAME))
		return -FI_EINVAL;
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -FI_ENOMEM;
	st = sr_lib.rnic_open(sr_manual ? SOFTRNIC_RNIC_MANUAL_PROGRESS : 0, &fab->rnic);
	if (st < 0) {
		free(fab);
		return sr_check(st, "softrnic_rnic_open");
	}
	pthread_mutex_init(&fab->lock, NULL);
	fab->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab->fabric_fid.fid.context = context;
	fab->fabric_fid.fid.ops = &sr_fabric_fi_ops;
	fab->fabric_fid.ops = &sr_fabric_ops;
	fab->fabric_fid.api_version = SR_API_VERSION;
	*out = &fab->fabric_fid;
	return 0;
}

/* ------------------------------------------------------------------ fi_getinfo */

/* Why hints are refused, at FI_LOG_LEVEL=info (libfabric only says "No data available"). */
static int sr_hints_refuse(const char *why)
{
	FI_INFO(&sr_prov, FI_LOG_CORE, "hints not supported: %s\n", why);
	return 0;
}

static int sr_hints_ok(const struct fi_info *h, uint32_t version)
{
	if (!h)
		return 1;
	if (h->caps & ~(uint64_t)SR_CAPS) {
		uint64_t extra = h->caps & ~(uint64_t)SR_CAPS;
		FI_INFO(&sr_prov, FI_LOG_CORE, "hints not supported: caps %s\n",
			fi_tostr(&extra, FI_TYPE_CAPS));
		return 0;
	}
	if (h->ep_attr && h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_MSG)
		return sr_hints_refuse("endpoint type other than FI_EP_MSG");
	if (h->addr_format != FI_FORMAT_UNSPEC && h->addr_format != FI_SOCKADDR_IN &&
	    h->addr_format != FI_SOCKADDR)
		return sr_hints_refuse("address format other than FI_SOCKADDR_IN");
	if (h->fabric_attr && h->fabric_attr->name &&
	    strcmp(h->fabric_attr->name, SR_PROV_NAME))
		return sr_hints_refuse("another fabric name");
	if (h->domain_attr) {
		int mode = h->domain_attr->mr_mode;
		if (h->domain_attr->name && strcmp(h->domain_attr->name, SR_PROV_NAME))
			return sr_hints_refuse("another domain name");
		if (h->domain_attr->caps & ~(uint64_t)(FI_LOCAL_COMM | FI_REMOTE_COMM))
			return sr_hints_refuse("domain caps beyond FI_LOCAL_COMM, FI_REMOTE_COMM");
		if (sr_manual && (h->domain_attr->data_progress == FI_PROGRESS_AUTO ||
				  h->domain_attr->control_progress == FI_PROGRESS_AUTO))
			return sr_hints_refuse("FI_PROGRESS_AUTO with FI_SOFTRNIC_PROGRESS=manual");
		if (mode == FI_MR_SCALABLE)
			return sr_hints_refuse("FI_MR_SCALABLE");
		/* Before API 1.5 FI_MR_UNSPEC/FI_MR_BASIC meant the basic mode, which is ours. */
		if (!(mode & FI_MR_BASIC) &&
		    !(FI_VERSION_LT(version, FI_VERSION(1, 5)) && mode == FI_MR_UNSPEC) &&
		    (mode & SR_MR_MODE) != SR_MR_MODE)
			return sr_hints_refuse("mr_mode without FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED and FI_MR_PROV_KEY");
	}
	if (h->tx_attr && h->tx_attr->inject_size > SR_INJECT)
		return sr_hints_refuse("inject_size over 128");
	if (h->tx_attr && (h->tx_attr->msg_order & ~(uint64_t)SR_MSG_ORDER))
		return sr_hints_refuse("tx msg_order beyond SAS, RAW, WAW, WAS, SAW");
	if (h->rx_attr && (h->rx_attr->msg_order & ~(uint64_t)SR_MSG_ORDER))
		return sr_hints_refuse("rx msg_order beyond SAS, RAW, WAW, WAS, SAW");
	return 1;
}

static int sr_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		      const struct fi_info *hints, struct fi_info **out)
{
	struct fi_info *fi;
	struct sockaddr_in addr;
	int ret;
	if (sr_load_error) {
		FI_WARN(&sr_prov, FI_LOG_CORE, "cannot start: %s\n", sr_load_error);
		return -FI_ENODATA;
	}
	if (!sr_hints_ok(hints, version))
		return -FI_ENODATA;
	fi = fi_allocinfo();
	if (!fi)
		return -FI_ENOMEM;
	fi->caps = SR_CAPS;
	fi->mode = 0;
	fi->addr_format = FI_SOCKADDR_IN;
	fi->ep_attr->type = FI_EP_MSG;
	fi->ep_attr->protocol = FI_PROTO_IWARP;
	fi->ep_attr->protocol_version = 1;
	fi->ep_attr->max_msg_size = SR_MAX_MSG;
	fi->ep_attr->max_order_raw_size = SR_MAX_MSG;
	fi->ep_attr->max_order_war_size = 0; /* FI_ORDER_WAR is not claimed */
	fi->ep_attr->max_order_waw_size = SR_MAX_MSG;
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;
	fi->tx_attr->caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_SEND | FI_READ | FI_WRITE;
	fi->tx_attr->msg_order = SR_MSG_ORDER;
	fi->tx_attr->comp_order = FI_ORDER_STRICT;
	fi->tx_attr->inject_size = SR_INJECT;
	fi->tx_attr->size = SR_QUEUE;
	fi->tx_attr->iov_limit = SR_MAX_SGE;
	fi->tx_attr->rma_iov_limit = 1;
	fi->rx_attr->caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_RECV | FI_REMOTE_READ |
			    FI_REMOTE_WRITE;
	fi->rx_attr->msg_order = fi->tx_attr->msg_order;
	fi->rx_attr->comp_order = FI_ORDER_STRICT | FI_ORDER_DATA;
	fi->rx_attr->size = SR_QUEUE;
	fi->rx_attr->iov_limit = SR_MAX_SGE;
	fi->domain_attr->name = strdup(SR_PROV_NAME);
	fi->domain_attr->threading = FI_THREAD_SAFE;
	fi->domain_attr->control_progress = sr_manual ? FI_PROGRESS_MANUAL : FI_PROGRESS_AUTO;
	fi->domain_attr->data_progress = sr_manual ? FI_PROGRESS_MANUAL : FI_PROGRESS_AUTO;
	fi->domain_attr->resource_mgmt = FI_RM_DISABLED;
	fi->domain_attr->av_type = FI_AV_UNSPEC;
	fi->domain_attr->mr_mode = SR_MR_MODE;
	fi->domain_attr->mr_key_size = sizeof(uint32_t);
	fi->domain_attr->cq_data_size = sizeof(uint64_t);
	fi->domain_attr->cq_cnt = 1024;
	fi->domain_attr->ep_cnt = 1024;
	fi->domain_attr->tx_ctx_cnt = 1024;
	fi->domain_attr->rx_ctx_cnt = 1024;
	fi->domain_attr->max_ep_tx_ctx = 1;
	fi->domain_attr->max_ep_rx_ctx = 1;
	fi->domain_attr->mr_iov_limit = 1;
	fi->domain_attr->mr_cnt = 1 << 16;
	fi->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
	fi->fabric_attr->name = strdup(SR_PROV_NAME);
	fi->fabric_attr->prov_version = SR_PROV_VERSION;
	fi->fabric_attr->api_version = SR_API_VERSION;
	/* Remote CQ data (fi_writedata's RFC 7306 Immediate Data) consumes a posted receive
	 * of the target, as FI_RX_CQ_DATA says. An application that cannot post receives for
	 * it gets no remote CQ data (cq_data_size 0: fi_writedata is -FI_ENOSYS). */
	if (!hints || (hints->mode & FI_RX_CQ_DATA)) {
		fi->mode |= FI_RX_CQ_DATA;
		fi->rx_attr->mode |= FI_RX_CQ_DATA;
	} else {
		fi->domain_attr->cq_data_size = 0;
	}
	if (hints && hints->caps) {
		/* What was asked for (a subset of SR_CAPS, checked above). */
		fi->caps = hints->caps;
		fi->tx_attr->caps &= fi->caps;
		fi->rx_attr->caps &= fi->caps;
	}
	if (hints && hints->domain_attr) {
		/* The progress thread always progresses; an application that asked to drive
		 * progress itself (FI_PROGRESS_MANUAL) may, and loses nothing. */
		if (hints->domain_attr->data_progress == FI_PROGRESS_MANUAL)
			fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
		if (hints->domain_attr->control_progress == FI_PROGRESS_MANUAL)
			fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
		/* The API 1.0 modes: FI_MR_BASIC (or FI_MR_UNSPEC before 1.5) is what
		 * SR_MR_MODE spells out bit by bit, with FI_LOCAL_MR for FI_MR_LOCAL. */
		if (hints->domain_attr->mr_mode == FI_MR_BASIC ||
		    (hints->domain_attr->mr_mode == FI_MR_UNSPEC &&
		     FI_VERSION_LT(version, FI_VERSION(1, 5)))) {
			fi->domain_attr->mr_mode = FI_MR_BASIC;
			fi->mode |= FI_LOCAL_MR;
		}
	}
	if (hints && hints->tx_attr && hints->tx_attr->op_flags)
		fi->tx_attr->op_flags = hints->tx_attr->op_flags & FI_COMPLETION;
	if (hints && hints->rx_attr && hints->rx_attr->op_flags)
		fi->rx_attr->op_flags = hints->rx_attr->op_flags & FI_COMPLETION;

	if (node || service) {
		ret = sr_resolve(node, service, &addr);
		if (ret) {
			fi_freeinfo(fi);
			return ret;
		}
		struct sockaddr_in *a = malloc(sizeof(*a));
		if (!a) {
			fi_freeinfo(fi);
			return -FI_ENOMEM;
		}
		*a = addr;
		if (flags & FI_SOURCE) {
			fi->src_addr = a;
			fi->src_addrlen = sizeof(*a);
		} else {
			fi->dest_addr = a;
			fi->dest_addrlen = sizeof(*a);
		}
	}
	if (hints && hints->src_addr && !fi->src_addr &&
	    hints->src_addrlen >= sizeof(struct sockaddr_in)) {
		fi->src_addr = malloc(sizeof(struct sockaddr_in));
		if (fi->src_addr) {
			memcpy(fi->src_addr, hints->src_addr, sizeof(struct sockaddr_in));
			fi->src_addrlen = sizeof(struct sockaddr_in);
		}
	}
	if (hints && hints->dest_addr && !fi->dest_addr &&
	    hints->dest_addrlen >= sizeof(struct sockaddr_in)) {
		fi->dest_addr = malloc(sizeof(struct sockaddr_in));
		if (fi->dest_addr) {
			memcpy(fi->dest_addr, hints->dest_addr, sizeof(struct sockaddr_in));
			fi->dest_addrlen = sizeof(struct sockaddr_in);
		}
	}
	if (!fi->src_addr) {
		/* No source given: any local address, a port chosen at fi_listen/connect. */
		struct sockaddr_in *a = calloc(1, sizeof(*a));
		if (!a) {
			fi_freeinfo(fi);
			return -FI_ENOMEM;
		}
		a->sin_family = AF_INET;
		fi->src_addr = a;
		fi->src_addrlen = sizeof(*a);
	}
	*out = fi;
	return 0;
}

static void sr_cleanup(void) {}

static struct fi_provider sr_prov = {
	.version = SR_PROV_VERSION,
	.fi_version = SR_API_VERSION,
	.name = SR_PROV_NAME,
	.getinfo = sr_getinfo,
	.fabric = sr_fabric,
	.cleanup = sr_cleanup,
};

/* Loads libsoftrnic: $SOFTRNIC_LIB if set, else libsoftrnic.so from the library path or
 * the provider's run path. */
static void sr_load(void)
{
	static char why[512];
	const char *name = getenv("SOFTRNIC_LIB");
	void *h;
	if (!name || !*name)
		name = "libsoftrnic.so";
	h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, sizeof(why), "libsoftrnic could not be loaded: %s", dlerror());
		sr_load_error = why;
		FI_WARN(&sr_prov, FI_LOG_CORE, "%s\n", why);
		return;
	}
#define SR_RESOLVE(f)                                                                     \
	if (!sr_load_error) {                                                              \
		*(void **)&sr_lib.f = dlsym(h, "softrnic_" #f);                            \
		if (!sr_lib.f) {                                                           \
			snprintf(why, sizeof(why), "%s has no softrnic_%s (an older library?)", \
				 name, #f);                                                 \
			sr_load_error = why;                                               \
		}                                                                          \
	}
	SR_FUNCS(SR_RESOLVE)
#undef SR_RESOLVE
	if (sr_load_error) {
		FI_WARN(&sr_prov, FI_LOG_CORE, "%s\n", why);
		dlclose(h);
	}
}

FI_EXT_INI
{
	char *progress = NULL;
	fi_param_define(&sr_prov, "progress", FI_PARAM_STRING,
			"auto (default): a progress thread runs the RNIC (FI_PROGRESS_AUTO); "
			"manual: the application's CQ and EQ calls run it (FI_PROGRESS_MANUAL), "
			"which suits busy-polling applications on few cores");
	if (fi_param_get_str(&sr_prov, "progress", &progress) == 0 && progress) {
		if (!strcmp(progress, "manual"))
			sr_manual = 1;
		else if (strcmp(progress, "auto"))
			FI_WARN(&sr_prov, FI_LOG_CORE,
				"FI_SOFTRNIC_PROGRESS=%s: neither auto nor manual; auto\n", progress);
	}
	fi_param_define(&sr_prov, "first_fpdu_delay_ms", FI_PARAM_INT,
			"an active endpoint holds its first message this many milliseconds after "
			"the MPA Reply (default 0); 50 for Linux siw 6.1 peers, which lose a "
			"message that arrives before their QP took over the connection");
	if (fi_param_get_int(&sr_prov, "first_fpdu_delay_ms", &sr_first_fpdu_delay_ms) == 0 &&
	    (sr_first_fpdu_delay_ms < 0 || sr_first_fpdu_delay_ms > 10000)) {
		FI_WARN(&sr_prov, FI_LOG_CORE,
			"FI_SOFTRNIC_FIRST_FPDU_DELAY_MS=%d: not 0..10000; 0\n",
			sr_first_fpdu_delay_ms);
		sr_first_fpdu_delay_ms = 0;
	}
	sr_load();
	return &sr_prov;
}
