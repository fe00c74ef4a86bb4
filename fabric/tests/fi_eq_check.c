/* fi_eq_check: the softrnic provider's event queue wait object through libfabric's API:
 * an FI_WAIT_FD EQ's descriptor (fi_control FI_GETWAIT) is quiet while the EQ is empty,
 * becomes readable on fi_eq_write (no connection event involved), stays readable while an
 * entry is queued (FI_PEEK), and is quiet again once it is read; fi_trywait agrees; a thread
 * blocked in fi_eq_sread without timeout returns the entry another thread writes.
 * Prints one line per check; exits 1 on the first failure.
 */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "check.h"

static struct fid_eq *eq;

static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, ms);
	CHECK(n >= 0, "poll");
	return n == 1 && (p.revents & POLLIN);
}

struct sread_result {
	ssize_t ret;
	uint32_t event;
	struct fi_eq_entry entry;
};

static void *sreader(void *arg)
{
	struct sread_result *r = arg;
	r->ret = fi_eq_sread(eq, &r->event, &r->entry, sizeof(r->entry), -1, 0);
	return NULL;
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	struct fi_eq_attr attr = { .wait_obj = FI_WAIT_FD };
	struct fid_fabric *fabric;
	struct fi_eq_entry in = { 0 }, out;
	uint32_t ev;
	int fd = -1, ctx;

	hints->ep_attr->type = FI_EP_MSG;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("softrnic");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	OK(fi_fabric(info->fabric_attr, &fabric, NULL));
	OK(fi_eq_open(fabric, &attr, &eq, NULL));
	OK(fi_control(&eq->fid, FI_GETWAIT, &fd));
	CHECK(fd >= 0, "wait fd %d", fd);
	struct fid *fids[1] = { &eq->fid };

	CHECK(!readable(fd, 100), "the wait fd of an empty EQ is readable");
	OK(fi_trywait(fabric, fids, 1));
	in.fid = &eq->fid;
	in.context = &ctx;
	in.data = 0x5eed;
	CHECK(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0) == sizeof(in), "fi_eq_write");
	CHECK(readable(fd, 5000), "fi_eq_write did not make the wait fd readable");
	CHECK(fi_trywait(fabric, fids, 1) == -FI_EAGAIN, "trywait with an entry queued");
	CHECK(fi_eq_read(eq, &ev, &out, sizeof(out), FI_PEEK) == sizeof(out), "peek");
	CHECK(readable(fd, 0), "the wait fd went quiet after a peek");
	CHECK(fi_eq_read(eq, &ev, &out, sizeof(out), 0) == sizeof(out), "read");
	CHECK(ev == FI_NOTIFY && out.context == &ctx && out.data == 0x5eed, "entry");
	CHECK(!readable(fd, 100), "the wait fd stays readable after the EQ is drained");
	OK(fi_trywait(fabric, fids, 1));
	printf("wait fd: ok (quiet when empty, readable after fi_eq_write and a peek, quiet "
	       "after the read)\n");

	/* Two entries: readable until both are read. */
	CHECK(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0) == sizeof(in), "write 1");
	CHECK(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0) == sizeof(in), "write 2");
	CHECK(fi_eq_read(eq, &ev, &out, sizeof(out), 0) == sizeof(out), "read 1");
	CHECK(readable(fd, 0), "quiet with one entry left");
	CHECK(fi_eq_read(eq, &ev, &out, sizeof(out), 0) == sizeof(out), "read 2");
	CHECK(!readable(fd, 0), "readable with none left");
	printf("two entries: ok (readable until the second is read)\n");

	/* A thread asleep in fi_eq_sread(-1) gets the entry another thread writes. */
	{
		pthread_t t;
		struct sread_result r = { 0 };
		CHECK(pthread_create(&t, NULL, sreader, &r) == 0, "thread");
		struct timespec pause = { 0, 200 * 1000 * 1000 };
		nanosleep(&pause, NULL);
		in.data = 0xfeed;
		CHECK(fi_eq_write(eq, FI_NOTIFY, &in, sizeof(in), 0) == sizeof(in), "write");
		CHECK(pthread_join(t, NULL) == 0, "join");
		CHECK(r.ret == sizeof(r.entry) && r.event == FI_NOTIFY && r.entry.data == 0xfeed,
		      "sread %zd %u", r.ret, r.event);
		CHECK(!readable(fd, 0), "readable after sread took the entry");
		printf("sread: ok (a blocked fi_eq_sread returned the written entry)\n");
	}

	OK(fi_close(&eq->fid));
	OK(fi_close(&fabric->fid));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("fi_eq_check: all checks passed\n");
	return 0;
}
