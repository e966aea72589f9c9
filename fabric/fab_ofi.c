/* fab_ofi.c: the "ofi" fabric backend: one libfabric RDM endpoint with FI_MSG, an address vector
 * (FI_AV_TABLE), one completion queue for sends and receives, and pre-allocated (registered when
 * the provider wants FI_MR_LOCAL) send and receive buffers.
 *
 * Provider "udp" (exactly; "udp;ofi_rxd" is RDM as usual) opens a datagram endpoint
 * (FI_EP_DGRAM, FI_MSG) of the core udp provider instead: unreliable, unordered, no RMA, and
 * max_packet clamped to the provider's max_msg_size (1472 with libfabric 1.17). Everything
 * else is the same code: a datagram is one packet, posted receives are matched in order.
 *
 * Per packet: send copies header and payload into a free tx buffer (or a staging buffer for
 * fi_inject when the packet fits the provider's inject size) and posts it; poll reads the CQ,
 * frees tx buffers on their completions and hands rx buffers to the caller until fab_release
 * reposts them. No malloc, no lock of ours.
 *
 * Progress (reading the CQ) happens in poll and, when tx buffers run out, in send: completions
 * only change buffer state there; poll turns them into events: send errors first, then receives
 * in the order their buffers were posted (see rx_fifo below).
 *
 * Wait fd (FI_WAIT_FD on the CQ, fi_control FI_GETWAIT, fi_trywait), measured with libfabric
 * 1.17 by tests/test_fabric.c (wait_fd_wakes: after fi_trywait said yes, a poll() on the fd with
 * a 1 s timeout must wake when the other endpoint sends 200 ms later):
 *   - tcp (tcp;ofi_rxm): works; poll() returns ~0.3 ms after the send.
 *   - shm: fi_cq_open refuses FI_WAIT_FD (FI_ENOSYS): CQ with FI_WAIT_NONE, wait_fd -1.
 *   - udp;ofi_rxd: the CQ opens with FI_WAIT_FD but FI_GETWAIT is FI_ENOSYS: the CQ is
 *     reopened with FI_WAIT_NONE, wait_fd -1.
 *   - udp (raw datagrams): works (tests/test_faults.c udp_dgram: poll() wakes on a datagram).
 * With wait_fd -1 callers poll (spin briefly, then back off with short sleeps).
 */
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

#define OFI_STRIDE_ALIGN GICE_CACHELINE
#define OFI_CQ_BATCH 16
#define OFI_NO_PEER FAB_ADDR_UNKNOWN

extern const fab_ops_t fab_ofi_ops;

enum { OFI_RX_POSTED, OFI_RX_DONE, OFI_RX_ERR, OFI_RX_USER };

typedef struct {
	struct fi_context2 ctx; /* first: the completion's op_context points here */
	void *data;
	fab_addr_t dest; /* tx: destination of the send in flight; rx: sender (FI_SOURCE), or
			  * OFI_NO_PEER when the provider cannot name it */
	size_t len;      /* rx: bytes received */
	uint32_t idx;
	uint8_t state;   /* rx: OFI_RX_* */
	int8_t status;   /* rx: GICE_ERR_* of an OFI_RX_ERR completion */
} ofi_buf_t;

typedef struct {
	fab_ep_t base; /* first: fab_ep_t * and ofi_ep_t * convert */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *desc; /* fi_mr_desc of mr, or NULL */

	void *mem; /* tx_depth + rx_depth buffers + one staging buffer, stride apart */
	size_t mem_len, stride, max_packet, inject_size;
	ofi_buf_t *bufs; /* [0, tx_depth): tx, [tx_depth, tx_depth + rx_depth): rx */
	uint32_t tx_depth, rx_depth;
	uint32_t *tx_free; /* stack of free tx buffer indices */
	uint32_t ntx_free;
	uint32_t *rx_pending; /* rx buffers released but not yet reposted (provider said EAGAIN) */
	uint32_t nrx_pending;
	void *staging; /* fi_inject source */

	/* Posted receive buffers in the order they were posted. Untagged receives are matched in
	 * posting order and FI_ORDER_SAS makes the matching order the send order, but completions
	 * may come out of order: tcp;ofi_rxm 1.17 completes a message above its 16 KiB eager limit
	 * (SAR) after a smaller eager one sent later. Delivering only from the head of this ring
	 * restores the send order. */
	uint32_t *rx_fifo;
	uint32_t rx_head, rx_count;

	fab_event_t *errs; /* ring of send-error events waiting for poll */
	uint32_t errs_cap, errs_head, errs_len;

	int wait_fd; /* of the cq (FI_WAIT_FD), or -1 */

	/* remote reads: the registered region, read contexts, completed reads waiting for poll */
	struct fid_mr *rma_mr;
	void *rma_base, *rma_desc;
	struct ofi_read {
		struct fi_context2 ctx; /* first: op_context points here */
		void *user;
	} reads[FAB_READS_MAX];
	uint32_t read_free[FAB_READS_MAX], nread_free;
	fab_event_t read_done[FAB_READS_MAX];
	uint32_t nread_done;
	uint64_t nerr_cq, nerr_send, nerr_post; /* for rate-limited logging */
} ofi_ep_t;

/* Log the 1st, 2nd, 4th, 8th... occurrence of a per-packet error. */
static int ofi_ratelimit(uint64_t *n)
{
	uint64_t c = ++*n;
	return !(c & (c - 1));
}

/* The one place where libfabric errors (positive FI_E* / errno values) become gice codes. */
static int ofi_status(int fi_err)
{
	switch (fi_err < 0 ? -fi_err : fi_err) {
	case 0: return GICE_OK;
	case FI_EAGAIN: return GICE_ERR_AGAIN;
	case FI_ENOMEM: return GICE_ERR_NO_MEMORY;
	case FI_EINVAL: return GICE_ERR_INVALID;
	case FI_ENODATA:
	case FI_ENOENT: return GICE_ERR_NOT_FOUND;
	case FI_ENOSYS:
	case FI_EOPNOTSUPP: return GICE_ERR_UNSUPPORTED;
	case FI_ETRUNC:
	case FI_EMSGSIZE:
	case FI_ETOOSMALL: return GICE_ERR_BAD_PACKET;
	case FI_ECANCELED: return GICE_ERR_CANCELED;
	case FI_ETIMEDOUT: return GICE_ERR_TIMED_OUT;
	case FI_EHOSTUNREACH:
	case FI_ENETUNREACH:
	case FI_ECONNREFUSED:
	case FI_ECONNRESET:
	case FI_ECONNABORTED:
	case FI_ENOTCONN:
	case FI_EADDRNOTAVAIL:
	case FI_ESHUTDOWN:
	case EPIPE: return GICE_ERR_PEER_DEAD;
	case FI_EIO: return GICE_ERR_IO;
	case FI_EBUSY: return GICE_ERR_BUSY;
	default: return GICE_ERR_FABRIC;
	}
}

static ofi_ep_t *ofi_ep(fab_ep_t *e) { return (ofi_ep_t *)e; }

static int ofi_is_tx(const ofi_ep_t *e, const ofi_buf_t *b) { return b->idx < e->tx_depth; }

/* ---- receive buffers ---- */

static int ofi_post_rx(ofi_ep_t *e, ofi_buf_t *b)
{
	ssize_t rc = fi_recv(e->ep, b->data, e->max_packet, e->desc, FI_ADDR_UNSPEC, &b->ctx);

	if (gice_likely(rc == 0)) {
		b->state = OFI_RX_POSTED;
		e->rx_fifo[(e->rx_head + e->rx_count++) % e->rx_depth] = b->idx;
		return GICE_OK;
	}
	if (rc != -FI_EAGAIN && ofi_ratelimit(&e->nerr_post))
		gice_error("fab", "fi_recv of rx buffer %u failed: %s (%llu so far)", b->idx,
			   fi_strerror((int)-rc), (unsigned long long)e->nerr_post);
	return ofi_status((int)rc);
}

static void ofi_repost(ofi_ep_t *e, ofi_buf_t *b)
{
	if (ofi_post_rx(e, b) != GICE_OK) {
		b->state = OFI_RX_USER;
		e->rx_pending[e->nrx_pending++] = b->idx;
	}
}

/* Repost receive buffers that could not be posted earlier. */
static void ofi_repost_pending(ofi_ep_t *e)
{
	while (e->nrx_pending) {
		if (ofi_post_rx(e, &e->bufs[e->rx_pending[e->nrx_pending - 1]]) != GICE_OK)
			return;
		e->nrx_pending--;
	}
}

/* ---- completion queue ---- */

/* One CQ error: a send error becomes an event in the errs ring (its buffer is freed), a receive
 * error marks its buffer for in-order delivery as an error event. */
/* A completion of one of our reads: queue its event for poll and free the context. */
static int ofi_read_done(ofi_ep_t *e, void *op_context, int status)
{
	struct ofi_read *r = op_context;

	if (r < e->reads || r >= e->reads + FAB_READS_MAX)
		return 0;
	e->read_done[e->nread_done++] = (fab_event_t){.type = FAB_EV_READ, .ctx = r->user, .status = status,
						      .peer = OFI_NO_PEER};
	e->read_free[e->nread_free++] = (uint32_t)(r - e->reads);
	return 1;
}

static void ofi_cq_error(ofi_ep_t *e)
{
	struct fi_cq_err_entry err = {0};
	char pbuf[128];
	ofi_buf_t *b;
	ssize_t rc = fi_cq_readerr(e->cq, &err, 0);
	int status;

	if (rc < 0) {
		if (ofi_ratelimit(&e->nerr_cq))
			gice_error("fab", "fi_cq_readerr failed: %s", fi_strerror((int)-rc));
		return;
	}
	status = ofi_status(err.err);
	b = err.op_context;
	if (ofi_read_done(e, err.op_context, status)) {
		if (ofi_ratelimit(&e->nerr_cq))
			gice_error("fab", "remote read failed on %s: %s", e->base.provider, fi_strerror(err.err));
		return;
	}
	if (ofi_ratelimit(&e->nerr_cq))
		gice_error("fab", "%s completion error on %s: %s (provider: %s) (%llu so far)",
			   (err.flags & FI_RECV) ? "receive" : "send", e->base.provider, fi_strerror(err.err),
			   fi_cq_strerror(e->cq, err.prov_errno, err.err_data, pbuf, sizeof(pbuf)),
			   (unsigned long long)e->nerr_cq);
	if (b && b->idx >= e->tx_depth && b->idx < e->tx_depth + e->rx_depth) {
		b->state = OFI_RX_ERR;
		b->status = (int8_t)status;
		return;
	}
	e->errs[(e->errs_head + e->errs_len++) % e->errs_cap] =
		(fab_event_t){.type = FAB_EV_ERR, .status = status, .peer = b ? b->dest : OFI_NO_PEER};
	if (b && b->idx < e->tx_depth)
		e->tx_free[e->ntx_free++] = b->idx;
}

/* Progress: read what the CQ has (a bounded number of batches). tx completions free their
 * buffers, rx completions mark theirs, errors as above. An error is only read while the errs ring
 * has room; otherwise it stays in the CQ until poll has drained the ring. */
static void ofi_progress(ofi_ep_t *e)
{
	struct fi_cq_msg_entry ent[OFI_CQ_BATCH];
	fi_addr_t src[OFI_CQ_BATCH];

	for (int round = 0; round < 4; round++) {
		/* with FI_SOURCE, who sent each message (FI_ADDR_NOTAVAIL: not in our address vector) */
		ssize_t got = e->base.source ? fi_cq_readfrom(e->cq, ent, OFI_CQ_BATCH, src)
					     : fi_cq_read(e->cq, ent, OFI_CQ_BATCH);

		if (got == -FI_EAGAIN)
			return;
		if (got == -FI_EAVAIL) {
			if (e->errs_len == e->errs_cap)
				return;
			ofi_cq_error(e);
			continue;
		}
		if (gice_unlikely(got < 0)) {
			if (ofi_ratelimit(&e->nerr_cq))
				gice_error("fab", "fi_cq_read failed: %s (%llu so far)", fi_strerror((int)-got),
					   (unsigned long long)e->nerr_cq);
			return;
		}
		for (ssize_t i = 0; i < got; i++) {
			ofi_buf_t *b = ent[i].op_context;

			if (gice_unlikely(!b))
				continue;
			if (ofi_read_done(e, ent[i].op_context, GICE_OK))
				continue;
			if (ofi_is_tx(e, b)) {
				e->tx_free[e->ntx_free++] = b->idx;
			} else {
				b->len = ent[i].len;
				b->dest = e->base.source && src[i] != FI_ADDR_NOTAVAIL ? (fab_addr_t)src[i] : OFI_NO_PEER;
				b->state = OFI_RX_DONE;
			}
		}
		if (got < OFI_CQ_BATCH)
			return;
	}
}

/* Something poll would return without reading the CQ. */
static int ofi_ready(const ofi_ep_t *e)
{
	return e->errs_len || e->nread_done ||
	       (e->rx_count && e->bufs[e->rx_fifo[e->rx_head]].state != OFI_RX_POSTED);
}

/* ---- ops ---- */

static int ofi_send(fab_ep_t *ep, fab_addr_t dest, const void *hdr, size_t hlen, const void *payload,
		    size_t plen)
{
	ofi_ep_t *e = ofi_ep(ep);
	size_t total;
	ofi_buf_t *b;
	ssize_t rc;

	if (gice_unlikely(hlen > e->max_packet || plen > e->max_packet - hlen)) {
		if (ofi_ratelimit(&e->nerr_send))
			gice_error("fab", "send of %zu + %zu bytes exceeds max_packet %zu", hlen, plen,
				   e->max_packet);
		return GICE_ERR_INVALID;
	}
	total = hlen + plen;

	if (total <= e->inject_size) {
		memcpy(e->staging, hdr, hlen);
		if (plen)
			memcpy((char *)e->staging + hlen, payload, plen);
		rc = fi_inject(e->ep, e->staging, total, dest);
		if (rc == -FI_EAGAIN) {
			ofi_progress(e);
			rc = fi_inject(e->ep, e->staging, total, dest);
		}
		goto out_status;
	}

	if (!e->ntx_free)
		ofi_progress(e);
	if (!e->ntx_free)
		return GICE_ERR_AGAIN;
	b = &e->bufs[e->tx_free[--e->ntx_free]];
	memcpy(b->data, hdr, hlen);
	if (plen)
		memcpy((char *)b->data + hlen, payload, plen);
	b->dest = dest;
	rc = fi_send(e->ep, b->data, total, e->desc, dest, &b->ctx);
	if (rc == -FI_EAGAIN) {
		ofi_progress(e);
		rc = fi_send(e->ep, b->data, total, e->desc, dest, &b->ctx);
	}
	if (rc)
		e->tx_free[e->ntx_free++] = b->idx;
out_status:
	if (gice_likely(rc == 0))
		return GICE_OK;
	if (rc == -FI_EAGAIN)
		return GICE_ERR_AGAIN;
	if (ofi_ratelimit(&e->nerr_send))
		gice_error("fab", "%s of %zu bytes to peer %llu failed: %s (%llu so far)",
			   total <= e->inject_size ? "fi_inject" : "fi_send", total, (unsigned long long)dest,
			   fi_strerror((int)-rc), (unsigned long long)e->nerr_send);
	return ofi_status((int)rc);
}

static int ofi_poll(fab_ep_t *ep, fab_event_t *ev, int max)
{
	ofi_ep_t *e = ofi_ep(ep);
	int n = 0;

	if (e->nrx_pending)
		ofi_repost_pending(e);
	ofi_progress(e);
	while (e->nread_done && n < max)
		ev[n++] = e->read_done[--e->nread_done];
	while (e->errs_len && n < max) {
		ev[n++] = e->errs[e->errs_head];
		e->errs_head = (e->errs_head + 1) % e->errs_cap;
		e->errs_len--;
	}
	/* receives in posting (= send) order: stop at the first one still in flight */
	while (e->rx_count && n < max) {
		ofi_buf_t *b = &e->bufs[e->rx_fifo[e->rx_head]];

		if (b->state == OFI_RX_POSTED)
			break;
		e->rx_head = (e->rx_head + 1) % e->rx_depth;
		e->rx_count--;
		if (b->state == OFI_RX_DONE) {
			b->state = OFI_RX_USER;
			ev[n++] = (fab_event_t){.type = FAB_EV_RX, .buf = b->data, .len = b->len,
						.peer = b->dest};
		} else {
			ev[n++] = (fab_event_t){.type = FAB_EV_ERR, .status = b->status, .peer = OFI_NO_PEER};
			ofi_repost(e, b);
		}
	}
	return n;
}

static void ofi_release(fab_ep_t *ep, void *buf)
{
	ofi_ep_t *e = ofi_ep(ep);
	size_t i = (size_t)((char *)buf - (char *)e->mem) / e->stride;

	if (gice_unlikely((char *)buf < (char *)e->mem || i < e->tx_depth || i >= e->tx_depth + e->rx_depth ||
			  e->bufs[i].data != buf || e->bufs[i].state != OFI_RX_USER)) {
		gice_error("fab", "release of %p: not a receive buffer of this endpoint held by the caller", buf);
		return;
	}
	ofi_repost(e, &e->bufs[i]);
}

static int ofi_getname(fab_ep_t *ep, void *addr, size_t *len)
{
	ofi_ep_t *e = ofi_ep(ep);
	size_t l = *len;
	int rc = fi_getname(&e->ep->fid, addr, &l);

	if (rc) {
		gice_error("fab", "fi_getname into %zu bytes failed: %s (needs %zu)", *len, fi_strerror(-rc), l);
		return rc == -FI_ETOOSMALL ? GICE_ERR_INVALID : ofi_status(rc);
	}
	*len = l;
	return GICE_OK;
}

static int ofi_insert(fab_ep_t *ep, const void *addr, size_t len, fab_addr_t *out)
{
	ofi_ep_t *e = ofi_ep(ep);
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	int rc;

	if (!addr || !len || len > FAB_ADDR_MAX ||
	    (e->info->addr_format == FI_ADDR_STR && !memchr(addr, '\0', len))) {
		gice_error("fab", "insert of a %zu-byte address: not a valid %s address", len, e->base.provider);
		return GICE_ERR_INVALID;
	}
	rc = fi_av_insert(e->av, addr, 1, &fa, 0, NULL);
	if (rc != 1 || fa == FI_ADDR_NOTAVAIL) {
		gice_error("fab", "fi_av_insert of a %zu-byte address failed: %s", len,
			   rc < 0 ? fi_strerror(-rc) : "address not inserted");
		return rc < 0 ? ofi_status(rc) : GICE_ERR_INVALID;
	}
	*out = fa;
	return GICE_OK;
}

static int ofi_wait_fd(fab_ep_t *ep) { return ofi_ep(ep)->wait_fd; }

static int ofi_trywait(fab_ep_t *ep)
{
	ofi_ep_t *e = ofi_ep(ep);
	struct fid *fids[1] = {&e->cq->fid};
	int rc;

	if (e->wait_fd < 0)
		return GICE_ERR_UNSUPPORTED;
	if (ofi_ready(e) || e->nrx_pending)
		return GICE_ERR_AGAIN;
	rc = fi_trywait(e->fabric, fids, 1);
	if (rc == 0)
		return GICE_OK;
	if (rc == -FI_EAGAIN)
		return GICE_ERR_AGAIN;
	gice_error("fab", "fi_trywait failed: %s", fi_strerror(-rc));
	return ofi_status(rc);
}

/* ---- open / close ---- */

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
	int ret = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);

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

static int ofi_open(const fab_attr_t *attr, fab_ep_t **out)
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
static void ofi_close(fab_ep_t *ep)
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

static int ofi_mr_reg(fab_ep_t *ep, void *base, size_t len, fab_mr_info_t *out)
{
	ofi_ep_t *e = ofi_ep(ep);
	uint64_t mode = e->info->domain_attr->mr_mode;
	int ret;

	if (!ep->rma || e->rma_mr)
		return ep->rma ? GICE_ERR_BUSY : GICE_ERR_UNSUPPORTED;
	/* without FI_MR_PROV_KEY the key is ours to choose: a random one */
	ret = fi_mr_reg(e->domain, base, len, FI_READ | FI_REMOTE_READ, 0,
			(mode & FI_MR_PROV_KEY) ? 0 : gice_random_u64() >> 1, 0, &e->rma_mr, NULL);
	if (ret) {
		gice_error("fab", "fi_mr_reg of %zu bytes of device memory on %s failed: %s", len, ep->provider,
			   fi_strerror(-ret));
		return ofi_status(ret);
	}
	e->rma_base = base;
	e->rma_desc = fi_mr_desc(e->rma_mr);
	out->key = fi_mr_key(e->rma_mr);
	out->addr = (mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)base : 0;
	return GICE_OK;
}

static int ofi_read(fab_ep_t *ep, fab_addr_t src, uint64_t local_off, size_t len, const fab_mr_info_t *remote,
		    uint64_t remote_off, void *ctx)
{
	ofi_ep_t *e = ofi_ep(ep);
	struct ofi_read *r;
	ssize_t rc;

	if (!e->rma_mr)
		return GICE_ERR_UNSUPPORTED;
	if (!e->nread_free)
		return GICE_ERR_AGAIN;
	r = &e->reads[e->read_free[--e->nread_free]];
	r->user = ctx;
	rc = fi_read(e->ep, (char *)e->rma_base + local_off, len, e->rma_desc, src, remote->addr + remote_off,
		     remote->key, &r->ctx);
	if (rc == -FI_EAGAIN) {
		ofi_progress(e);
		rc = fi_read(e->ep, (char *)e->rma_base + local_off, len, e->rma_desc, src,
			     remote->addr + remote_off, remote->key, &r->ctx);
	}
	if (rc == 0)
		return GICE_OK;
	e->read_free[e->nread_free++] = (uint32_t)(r - e->reads);
	if (rc == -FI_EAGAIN)
		return GICE_ERR_AGAIN;
	if (ofi_ratelimit(&e->nerr_send))
		gice_error("fab", "fi_read of %zu bytes from peer %llu failed: %s", len, (unsigned long long)src,
			   fi_strerror((int)-rc));
	return ofi_status((int)rc);
}

const fab_ops_t fab_ofi_ops = {
	.name = "ofi",
	.open = ofi_open,
	.close = ofi_close,
	.getname = ofi_getname,
	.insert = ofi_insert,
	.send = ofi_send,
	.poll = ofi_poll,
	.release = ofi_release,
	.wait_fd = ofi_wait_fd,
	.trywait = ofi_trywait,
	.mr_reg = ofi_mr_reg,
	.read = ofi_read,
};
