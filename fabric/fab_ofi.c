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
 *   - udp (raw datagrams): works (tests/test_faults_udp.c udp_dgram: poll() wakes on a datagram).
 *   - net: wakes, but once a peer has connected the fd stays readable with nothing to read (a
 *     byte of the connection left unread in a socket it watches), so a sleeper spins: opened
 *     with FI_WAIT_NONE, wait_fd -1 (fab_ofi_open.c).
 * With wait_fd -1 callers poll (spin briefly, then back off with short sleeps).
 *
 * This file is the data path; fab_ofi_open.c opens and closes endpoints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "emu/common/tsan.h"
#include "fabric/fab_ofi_internal.h"

static int ofi_is_tx(const ofi_ep_t *e, const ofi_buf_t *b) { return b->idx < e->tx_depth; }

/* ---- receive buffers ---- */

int ofi_post_rx(ofi_ep_t *e, ofi_buf_t *b)
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
		b->state = OFI_RX_IDLE;
		e->rx_pending[e->nrx_pending++] = b->idx;
	}
}

/* Repost receive buffers released since the last poll, or that could not be posted earlier. */
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
		GICE_TSAN_PROVIDER_BEGIN(); /* tsan.h */
		ssize_t got = e->base.source ? fi_cq_readfrom(e->cq, ent, OFI_CQ_BATCH, src)
					     : fi_cq_read(e->cq, ent, OFI_CQ_BATCH);
		GICE_TSAN_PROVIDER_END();

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
		/* the provider copies what it injects: one piece (a bundle) goes as it is, two are
		 * put together first */
		const void *buf = hdr;
		if (plen) {
			memcpy(e->staging, hdr, hlen);
			memcpy((char *)e->staging + hlen, payload, plen);
			buf = e->staging;
		}
		rc = fi_inject(e->ep, buf, total, dest);
		if (rc == -FI_EAGAIN) {
			ofi_progress(e);
			rc = fi_inject(e->ep, buf, total, dest);
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
	/* posted again at the next poll: the caller is taking in what arrived, and a ping-pong's
	 * answer should not wait behind fi_recv */
	e->bufs[i].state = OFI_RX_IDLE;
	e->rx_pending[e->nrx_pending++] = (uint32_t)i;
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

/* The key of a new registration: the provider's (FI_MR_PROV_KEY), else ours to choose, a random
 * one, so that no endpoint outside the job reads a region by guessing its key. */
static uint64_t ofi_mr_requested_key(const ofi_ep_t *e)
{
	return (e->info->domain_attr->mr_mode & FI_MR_PROV_KEY) ? 0 : gice_random_u64() >> 1;
}

static int ofi_mr_reg(fab_ep_t *ep, void *base, size_t len)
{
	ofi_ep_t *e = ofi_ep(ep);
	int ret;

	if (!ep->rma || e->rma_mr)
		return ep->rma ? GICE_ERR_BUSY : GICE_ERR_UNSUPPORTED;
	/* local access only: what peers may read is exposed region by region (ofi_mr_expose) */
	ret = fi_mr_reg(e->domain, base, len, FI_READ, 0, ofi_mr_requested_key(e), 0, &e->rma_mr, NULL);
	if (ret) {
		gice_error("fab", "fi_mr_reg of %zu bytes of device memory on %s failed: %s", len, ep->provider,
			   fi_strerror(-ret));
		return ofi_status(ret);
	}
	e->rma_base = base;
	e->rma_len = len;
	e->rma_desc = fi_mr_desc(e->rma_mr);
	return GICE_OK;
}

static int ofi_mr_expose(fab_ep_t *ep, uint64_t off, size_t len, fab_mr_t **mr, fab_mr_info_t *info)
{
	ofi_ep_t *e = ofi_ep(ep);
	struct fid_mr *m;
	int ret;

	if (!e->rma_mr)
		return GICE_ERR_UNSUPPORTED;
	if (off > e->rma_len || len > e->rma_len - off || !len) {
		gice_error("fab", "exposing [%llu, +%zu) of %zu bytes of device memory: out of bounds",
			   (unsigned long long)off, len, e->rma_len);
		return GICE_ERR_OUT_OF_BOUNDS;
	}
	void *base = (char *)e->rma_base + off;
	ret = fi_mr_reg(e->domain, base, len, FI_REMOTE_READ, 0, ofi_mr_requested_key(e), 0, &m, NULL);
	if (ret) {
		gice_error("fab", "fi_mr_reg of a region of %zu bytes at device offset %llu on %s failed: %s", len,
			   (unsigned long long)off, ep->provider, fi_strerror(-ret));
		return ofi_status(ret);
	}
	info->key = fi_mr_key(m);
	info->addr = (e->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)base : 0;
	*mr = (fab_mr_t *)m;
	return GICE_OK;
}

static void ofi_mr_revoke(fab_ep_t *ep, fab_mr_t *mr)
{
	int ret = fi_close(&((struct fid_mr *)mr)->fid);

	if (ret)
		gice_error("fab", "fi_close of an exposed region on %s failed: %s", ep->provider, fi_strerror(-ret));
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

static int ofi_in_flight(fab_ep_t *ep)
{
	ofi_ep_t *e = ofi_ep(ep);

	return e->ntx_free != e->tx_depth || e->nread_free != FAB_READS_MAX || e->nread_done || e->errs_len;
}

static int ofi_quiet(fab_ep_t *ep) { return !ofi_in_flight(ep) && !ofi_ep(ep)->nrx_pending; }

const fab_ops_t fab_ofi_ops = {
	.name = "ofi",
	.open = ofi_open,
	.close = ofi_close,
	.getname = ofi_getname,
	.insert = ofi_insert,
	.send = ofi_send,
	.poll = ofi_poll,
	.release = ofi_release,
	.quiet = ofi_quiet,
	.in_flight = ofi_in_flight,
	.wait_fd = ofi_wait_fd,
	.trywait = ofi_trywait,
	.mr_reg = ofi_mr_reg,
	.mr_expose = ofi_mr_expose,
	.mr_revoke = ofi_mr_revoke,
	.read = ofi_read,
};
