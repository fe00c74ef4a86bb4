/* pair.h: a connected endpoint pair over loopback, one CQ per side, for the provider's C
 * test programs that need one connection (fi_atomic_check.c, fi_inject_check.c).
 * pair_connect() opens fabric, domain, the server's passive endpoint and both endpoints from
 * an fi_info and connects them (client cep/ccq/ceq, server sep/scq/seq); pair_close_eps()
 * closes the two endpoints (before the caller's memory registrations), pair_close() the rest.
 */
#ifndef SOFTRNIC_FABRIC_TESTS_PAIR_H
#define SOFTRNIC_FABRIC_TESTS_PAIR_H

#include <stdint.h>
#include <netinet/in.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include "check.h"

static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_eq *seq, *ceq;
static struct fid_pep *pep;
static struct fid_cq *ccq, *scq;
static struct fid_ep *cep, *sep;

static uint32_t eq_wait(struct fid_eq *eq, struct fi_eq_cm_entry *entry)
{
	uint32_t ev = 0;
	ssize_t r = fi_eq_sread(eq, &ev, entry, sizeof(*entry), 10000, 0);
	CHECK(r >= (ssize_t)sizeof(*entry), "fi_eq_sread = %zd", r);
	return ev;
}

static struct fid_cq *pair_cq(size_t size)
{
	struct fi_cq_attr attr = { .size = size, .format = FI_CQ_FORMAT_DATA,
				   .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cq *cq;
	OK(fi_cq_open(domain, &attr, &cq, NULL));
	return cq;
}

static struct fid_ep *pair_ep(struct fi_info *fi, struct fid_eq *eq, struct fid_cq *cq)
{
	struct fid_ep *ep;
	OK(fi_endpoint(domain, fi, &ep, NULL));
	OK(fi_ep_bind(ep, &eq->fid, 0));
	OK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	OK(fi_enable(ep));
	return ep;
}

/* Connects a client endpoint to a server endpoint accepted from a passive endpoint, both
 * from `info`, each with a CQ of `cq_size` entries. */
static void pair_connect(struct fi_info *info, size_t cq_size)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct sockaddr_in addr;
	size_t alen = sizeof(addr);
	struct fi_eq_cm_entry cm;

	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_domain(fabric, info, &domain, NULL));
	OK(fi_eq_open(fabric, &eq_attr, &seq, NULL));
	OK(fi_eq_open(fabric, &eq_attr, &ceq, NULL));
	OK(fi_passive_ep(fabric, info, &pep, NULL));
	OK(fi_pep_bind(pep, &seq->fid, 0));
	OK(fi_listen(pep));
	OK(fi_getname(&pep->fid, &addr, &alen));

	ccq = pair_cq(cq_size);
	scq = pair_cq(cq_size);
	cep = pair_ep(info, ceq, ccq);
	OK(fi_connect(cep, &addr, NULL, 0));
	CHECK(eq_wait(seq, &cm) == FI_CONNREQ, "CONNREQ");
	sep = pair_ep(cm.info, seq, scq);
	fi_freeinfo(cm.info);
	OK(fi_accept(sep, NULL, 0));
	CHECK(eq_wait(seq, &cm) == FI_CONNECTED, "server CONNECTED");
	CHECK(eq_wait(ceq, &cm) == FI_CONNECTED, "client CONNECTED");
}

static void pair_close_eps(void)
{
	fi_close(&cep->fid);
	fi_close(&sep->fid);
}

static void pair_close(void)
{
	OK(fi_close(&ccq->fid));
	OK(fi_close(&scq->fid));
	OK(fi_close(&pep->fid));
	OK(fi_close(&seq->fid));
	OK(fi_close(&ceq->fid));
	OK(fi_close(&domain->fid));
	OK(fi_close(&fabric->fid));
}

#endif
