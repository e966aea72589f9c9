/* fab_ofi_open.c: opening an endpoint of the "ofi" backend — the provider's fi_info (best
 * first: ordered with remote reads, then fewer promises; FI_SOURCE when offered), fabric,
 * domain, completion queue (with a wait fd when the provider has one), address vector,
 * endpoint, the registered packet buffers and the first posted receives — and closing it in
 * reverse. fab_ofi.c has the data path. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "fabric/fab_ofi_internal.h"

static int ofi_getinfo_caps(const char *provider, uint64_t caps, int dgram, int want_sas, struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	int rc;

	if (!hints)
		return GICE_ERR_NO_MEMORY;
	hints->caps = caps;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = dgram ? FI_EP_DGRAM : FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->av_type = FI_AV_TABLE;
	if (want_sas) {
		hints->tx_attr->msg_order = FI_ORDER_SAS;
		hints->rx_attr->msg_order = FI_ORDER_SAS;
	}
	hints->fabric_attr->prov_name = strdup(provider);
	if (!hints->fabric_attr->prov_name) {
		fi_freeinfo(hints);
		return GICE_ERR_NO_MEMORY;
	}
	rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, out);
	fi_freeinfo(hints);
	if (rc && rc != -FI_ENODATA)
		gice_error("fab", "fi_getinfo for provider %s failed: %s", provider, fi_strerror(-rc));
	return rc ? ofi_status(rc) : GICE_OK;
}

/* fi_getinfo for provider with FI_SOURCE (received messages name their sender: the engine binds
 * the device a packet claims to the endpoint it came from), else without. */
static int ofi_getinfo(const char *provider, int dgram, int want_sas, int want_rma, struct fi_info **out)
{
	uint64_t caps = FI_MSG | (want_rma ? FI_RMA | FI_READ | FI_REMOTE_READ : 0);
	int rc = ofi_getinfo_caps(provider, caps | FI_SOURCE, dgram, want_sas, out);

	return rc == GICE_ERR_NOT_FOUND ? ofi_getinfo_caps(provider, caps, dgram, want_sas, out) : rc;
}

/* fi_close and log; used on teardown paths */
static void ofi_close_fid(struct fid *fid, const char *what)
{
	int ret = fi_close(fid);

	if (ret)
		gice_error("fab", "fi_close of the %s failed: %s", what, fi_strerror(-ret));
}

/* Providers whose CQ wait fd cannot be slept on: libfabric 1.17's net leaves a byte of a
 * connection unread in the socket its wait fd watches, so after fi_trywait said yes the fd is
 * readable for good and a CT sleeping on it spins (an idle 2-rank job: ~60% of a core per
 * rank). Their CQ is opened without one: callers poll (fab_ofi.c). */
static int ofi_wait_fd_broken(const char *provider) { return !strcmp(provider, "net"); }

/* One CQ for sends and receives. Ask for FI_WAIT_FD and keep it only when FI_GETWAIT hands us
 * the fd; otherwise (re)open with FI_WAIT_NONE and wait_fd is -1. */
static int ofi_open_cq(ofi_ep_t *e)
{
	struct fi_cq_attr cq_attr = {
		.size = e->tx_depth + e->rx_depth + 1,
		.format = FI_CQ_FORMAT_MSG,
		.wait_obj = FI_WAIT_FD,
		.wait_cond = FI_CQ_COND_NONE,
	};
	int ret;

	if (ofi_wait_fd_broken(e->base.provider)) {
		gice_debug("fab", "%s: its wait fd stays readable once a peer connected: polling without one",
			   e->base.provider);
		goto no_wait_fd;
	}
	ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);

	if (ret == 0) {
		ret = fi_control(&e->cq->fid, FI_GETWAIT, &e->wait_fd);
		if (ret == 0)
			return GICE_OK;
		gice_debug("fab", "%s: fi_control(FI_GETWAIT) of the cq: %s, polling without a wait fd",
			   e->base.provider, fi_strerror(-ret));
		e->wait_fd = -1;
		ofi_close_fid(&e->cq->fid, "cq");
	} else {
		gice_debug("fab", "%s: fi_cq_open with FI_WAIT_FD: %s, polling without a wait fd",
			   e->base.provider, fi_strerror(-ret));
	}
no_wait_fd:
	cq_attr.wait_obj = FI_WAIT_NONE;
	ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
	if (ret) {
		gice_error("fab", "fi_cq_open of %zu entries failed: %s", cq_attr.size, fi_strerror(-ret));
		return ofi_status(ret);
	}
	return GICE_OK;
}

/* Packet buffers: tx, rx, then the inject staging buffer, `stride` bytes apart, registered
 * when the provider wants FI_MR_LOCAL. */
static void ofi_free_bufs(ofi_ep_t *e);

static int ofi_alloc_bufs(ofi_ep_t *e)
{
	int ret;

	e->stride = GICE_ALIGN_UP(e->max_packet, OFI_STRIDE_ALIGN);
	e->mem_len = GICE_ALIGN_UP(e->stride * (e->tx_depth + e->rx_depth + 1), 4096);
	e->mem = mmap(NULL, e->mem_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->mem == MAP_FAILED) {
		gice_error("fab", "mmap of %zu bytes of packet buffers failed: %m", e->mem_len);
		e->mem = NULL;
		return GICE_ERR_NO_MEMORY;
	}
	e->staging = (char *)e->mem + e->stride * (e->tx_depth + e->rx_depth);
	e->errs_cap = e->tx_depth + 1; /* + 1: an inject error has no tx buffer */
	e->bufs = calloc(e->tx_depth + e->rx_depth, sizeof(*e->bufs));
	e->tx_free = calloc(e->tx_depth, sizeof(*e->tx_free));
	e->rx_pending = calloc(e->rx_depth, sizeof(*e->rx_pending));
	e->rx_fifo = calloc(e->rx_depth, sizeof(*e->rx_fifo));
	e->errs = calloc(e->errs_cap, sizeof(*e->errs));
	if (!e->bufs || !e->tx_free || !e->rx_pending || !e->rx_fifo || !e->errs) {
		gice_error("fab", "no memory for %u tx and %u rx buffer descriptors", e->tx_depth, e->rx_depth);
		goto err_free_descs;
	}
	for (uint32_t i = 0; i < e->tx_depth + e->rx_depth; i++) {
		e->bufs[i].data = (char *)e->mem + (size_t)i * e->stride;
		e->bufs[i].idx = i;
		e->bufs[i].dest = OFI_NO_PEER;
	}
	for (uint32_t i = 0; i < e->tx_depth; i++)
		e->tx_free[i] = e->tx_depth - 1 - i;
	e->ntx_free = e->tx_depth;
	if (e->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		ret = fi_mr_reg(e->domain, e->mem, e->mem_len, FI_SEND | FI_RECV, 0, 0, 0, &e->mr, NULL);
		if (ret) {
			gice_error("fab", "fi_mr_reg of %zu bytes of packet buffers failed: %s", e->mem_len,
				   fi_strerror(-ret));
			goto err_free_descs;
		}
		e->desc = fi_mr_desc(e->mr);
	}
	return GICE_OK;

err_free_descs:
	ofi_free_bufs(e);
	return GICE_ERR_NO_MEMORY;
}

/* Undo ofi_alloc_bufs (also its partial work: free(NULL) is fine, mr is NULL until registered). */
static void ofi_free_bufs(ofi_ep_t *e)
{
	int ret;

	if (e->mr && (ret = fi_close(&e->mr->fid)))
		gice_error("fab", "fi_close of the packet buffer registration failed: %s", fi_strerror(-ret));
	e->mr = NULL;
	free(e->errs);
	free(e->rx_fifo);
	free(e->rx_pending);
	free(e->tx_free);
	free(e->bufs);
	munmap(e->mem, e->mem_len);
}

static pid_t ofi_swept_pid; /* the pid fab_ofi_sweep_stale_shm ran for (a fork runs it again) */
static pthread_mutex_t ofi_sweep_lock = PTHREAD_MUTEX_INITIALIZER;

int ofi_open(const fab_attr_t *attr, fab_ep_t **out)
{
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE, .count = 64};
	uint64_t tx_depth = attr->tx_depth, rx_depth = attr->rx_depth;
	struct fi_info *info = NULL;
	int dgram = !strcmp(attr->provider ? attr->provider : "", "udp");
	int sas = 1, rc, ret;
	ofi_ep_t *e;

	if (!attr->provider || !attr->max_packet || attr->max_packet > (1u << 30)) {
		gice_error("fab", "open: max_packet %zu is not in [1, 1 GiB] or no provider given", attr->max_packet);
		return GICE_ERR_INVALID;
	}
	if (!tx_depth && (rc = gice_param_u64(&fab_params[P_TX_DEPTH], &tx_depth)))
		return rc;
	if (!rx_depth && (rc = gice_param_u64(&fab_params[P_RX_DEPTH], &rx_depth)))
		return rc;
	if (tx_depth > 65536 || rx_depth > 65536) {
		gice_error("fab", "open: tx_depth %llu or rx_depth %llu above 65536", (unsigned long long)tx_depth,
			   (unsigned long long)rx_depth);
		return GICE_ERR_INVALID;
	}

	pthread_mutex_lock(&ofi_sweep_lock);
	if (ofi_swept_pid != getpid()) {
		ofi_swept_pid = getpid();
		fab_ofi_sweep_stale_shm();
	}
	pthread_mutex_unlock(&ofi_sweep_lock);
	fab_ofi_bind_iface();
	if ((rc = fab_ofi_bound_rxm()))
		return rc;
	int rma = !dgram;
	if (dgram) {
		/* raw datagrams: no order, no reads, no reliability to ask for */
		sas = 0;
		rc = ofi_getinfo(attr->provider, 1, 0, 0, &info);
	} else {
		/* best first: ordered with remote reads, then without reads, then unordered */
		rc = ofi_getinfo(attr->provider, 0, 1, 1, &info);
		if (rc == GICE_ERR_NOT_FOUND) {
			rma = 0;
			rc = ofi_getinfo(attr->provider, 0, 1, 0, &info);
		}
		if (rc == GICE_ERR_NOT_FOUND) {
			/* the provider exists but does not promise send-after-send order: take it
			 * anyway and say so in ep->ordered (the engine then tolerates reordering) */
			sas = 0;
			rc = ofi_getinfo(attr->provider, 0, 0, 0, &info);
		}
	}
	if (rc == GICE_ERR_NOT_FOUND)
		gice_info("fab", "fi_getinfo finds no provider \"%s\" with %s messaging", attr->provider,
			  dgram ? "datagram" : "RDM");
	if (rc)
		return rc;

	e = calloc(1, sizeof(*e));
	if (!e) {
		fi_freeinfo(info);
		return GICE_ERR_NO_MEMORY;
	}
	e->base.ops = &fab_ofi_ops;
	e->info = info;
	e->wait_fd = -1;
	e->base.rma = rma;
	for (uint32_t i = 0; i < FAB_READS_MAX; i++)
		e->read_free[e->nread_free++] = FAB_READS_MAX - 1 - i;
	e->max_packet = attr->max_packet;
	snprintf(e->base.provider, sizeof(e->base.provider), "%s", info->fabric_attr->prov_name);
	e->base.ordered = sas && (info->tx_attr->msg_order & FI_ORDER_SAS) &&
			  (info->rx_attr->msg_order & FI_ORDER_SAS);
	e->base.reliable = !dgram;
	/* libfabric 1.17's shm names a sender it was never given (not in our address vector) as
	 * address 0, a real peer, instead of FI_ADDR_NOTAVAIL: its FI_SOURCE proves nothing. A shm
	 * sender is a process of this host allowed to map our region (the same user, or root). */
	e->base.source = (info->caps & FI_SOURCE) != 0 && strncmp(e->base.provider, "shm", 3) != 0;
	e->base.closed_peer_unsafe = !strncmp(e->base.provider, "shm", 3);
	if (dgram && e->max_packet > info->ep_attr->max_msg_size) {
		gice_info("fab", "%s: max_packet %zu lowered to the provider's max_msg_size %zu (datagrams)",
			  e->base.provider, e->max_packet, info->ep_attr->max_msg_size);
		e->max_packet = info->ep_attr->max_msg_size;
	}
	e->base.max_packet = e->max_packet;
	if (info->tx_attr->size && tx_depth > info->tx_attr->size) {
		gice_info("fab", "%s: tx_depth %llu lowered to the provider's %zu", e->base.provider,
			  (unsigned long long)tx_depth, info->tx_attr->size);
		tx_depth = info->tx_attr->size;
	}
	if (info->rx_attr->size && rx_depth > info->rx_attr->size) {
		gice_info("fab", "%s: rx_depth %llu lowered to the provider's %zu", e->base.provider,
			  (unsigned long long)rx_depth, info->rx_attr->size);
		rx_depth = info->rx_attr->size;
	}
	e->tx_depth = (uint32_t)tx_depth;
	e->rx_depth = (uint32_t)rx_depth;
	e->inject_size = GICE_MIN(info->tx_attr->inject_size, e->max_packet);
	if (e->max_packet > info->ep_attr->max_msg_size) {
		gice_error("fab", "%s: max_packet %zu above the provider's max_msg_size %zu", e->base.provider,
			   e->max_packet, info->ep_attr->max_msg_size);
		rc = GICE_ERR_INVALID;
		goto err_free_info;
	}

	rc = GICE_ERR_FABRIC;
	ret = fi_fabric(info->fabric_attr, &e->fabric, NULL);
	if (ret) {
		gice_error("fab", "fi_fabric of %s failed: %s", e->base.provider, fi_strerror(-ret));
		goto err_free_info;
	}
	ret = fi_domain(e->fabric, info, &e->domain, NULL);
	if (ret) {
		gice_error("fab", "fi_domain of %s failed: %s", e->base.provider, fi_strerror(-ret));
		goto err_close_fabric;
	}
	rc = ofi_alloc_bufs(e);
	if (rc)
		goto err_close_domain;
	ret = fi_av_open(e->domain, &av_attr, &e->av, NULL);
	if (ret) {
		gice_error("fab", "fi_av_open failed: %s", fi_strerror(-ret));
		goto err_free_bufs;
	}
	rc = ofi_open_cq(e);
	if (rc)
		goto err_close_av;
	rc = GICE_ERR_FABRIC; /* for the failures below */
	ret = fi_endpoint(e->domain, info, &e->ep, NULL);
	if (ret) {
		gice_error("fab", "fi_endpoint of %s failed: %s", e->base.provider, fi_strerror(-ret));
		goto err_close_cq;
	}
	if ((ret = fi_ep_bind(e->ep, &e->av->fid, 0))) {
		gice_error("fab", "fi_ep_bind of the av failed: %s", fi_strerror(-ret));
		goto err_close_ep;
	}
	if ((ret = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV))) {
		gice_error("fab", "fi_ep_bind of the cq failed: %s", fi_strerror(-ret));
		goto err_close_ep;
	}
	if ((ret = fi_enable(e->ep))) {
		gice_error("fab", "fi_enable of the %s endpoint failed: %s", e->base.provider, fi_strerror(-ret));
		goto err_close_ep;
	}
	for (uint32_t i = 0; i < e->rx_depth; i++) {
		ret = ofi_post_rx(e, &e->bufs[e->tx_depth + i]);
		if (ret) {
			gice_error("fab", "posting receive buffer %u of %u failed: %s", i, e->rx_depth,
				   gice_status_name(ret));
			rc = ret;
			goto err_close_ep;
		}
	}
	gice_info("fab", "opened %s %s endpoint: max_packet %zu, tx %u, rx %u, inject %zu, %s, wait fd %d, mr %s",
		  e->base.provider, dgram ? "datagram" : "RDM", e->max_packet, e->tx_depth, e->rx_depth,
		  e->inject_size, e->base.ordered ? "ordered (FI_ORDER_SAS)" : "unordered", e->wait_fd,
		  e->mr ? "local" : "none");
	*out = &e->base;
	return GICE_OK;

err_close_ep: /* also cancels the receives posted into our buffers */
	ofi_close_fid(&e->ep->fid, "endpoint");
err_close_cq:
	ofi_close_fid(&e->cq->fid, "cq");
err_close_av:
	ofi_close_fid(&e->av->fid, "av");
err_free_bufs:
	ofi_free_bufs(e);
err_close_domain:
	ofi_close_fid(&e->domain->fid, "domain");
err_close_fabric:
	ofi_close_fid(&e->fabric->fid, "fabric");
err_free_info:
	fi_freeinfo(info);
	free(e);
	return rc;
}

/* Reverse of open: endpoint (cancels posted receives), cq, av, packet buffers and their
 * registration, domain, fabric, info. */
void ofi_close(fab_ep_t *ep)
{
	ofi_ep_t *e = ofi_ep(ep);

	if (!e)
		return;
	ofi_close_fid(&e->ep->fid, "endpoint");
	if (e->rma_mr)
		ofi_close_fid(&e->rma_mr->fid, "device memory registration");
	ofi_close_fid(&e->cq->fid, "cq");
	ofi_close_fid(&e->av->fid, "av");
	ofi_free_bufs(e);
	ofi_close_fid(&e->domain->fid, "domain");
	ofi_close_fid(&e->fabric->fid, "fabric");
	fi_freeinfo(e->info);
	free(e);
}

