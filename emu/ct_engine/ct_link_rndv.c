/* ct_link_rndv.c: rendezvous puts at the target — a large put is announced (PUT_RTS) and its
 * bytes move by one remote read that this device issues after validating, or by a copy when the
 * initiator's memory is mapped here (NVLink plane); PUT_DONE tells the initiator. The reads wait
 * in one table for the fabric's read slots. Runs under the link lock, like the rest of the
 * link. */
#include "emu/ct_engine/ct_internal.h"

#include <string.h>

/* ---------------------------------------------------------------- the read table */

static struct ct_read *read_alloc(ct_engine_t *e)
{
	uint32_t i;

	if (e->n_reads_free)
		i = e->reads_free[--e->n_reads_free];
	else if (e->reads_fresh < CT_READS)
		i = e->reads_fresh++;
	else
		return NULL;
	return &e->reads[i];
}

static void read_free(ct_engine_t *e, struct ct_read *r)
{
	r->state = CT_RD_FREE;
	e->reads_free[e->n_reads_free++] = (uint32_t)(r - e->reads);
	atomic_fetch_sub_explicit(&e->msgs_live, 1, memory_order_relaxed);
}

/* Queue read r (filled in) for a fabric read slot, and post what can be posted. */
static void read_queue(ct_engine_t *e, struct ct_read *r)
{
	r->state = CT_RD_WAITING;
	e->reads_wait[(e->reads_wait_head + e->reads_waiting++) % CT_READS] = (uint32_t)(r - e->reads);
	atomic_fetch_add_explicit(&e->msgs_live, 1, memory_order_relaxed); /* keeps CT 0 polling */
	ct_post_reads(e);
}

/* Post the reads waiting for a fabric read slot, oldest first. */
int ct_post_reads(ct_engine_t *e)
{
	int n = 0;

	while (e->reads_waiting) {
		struct ct_read *r = &e->reads[e->reads_wait[e->reads_wait_head % CT_READS]];
		ct_peer_t *p = &e->peers[r->gid];
		int rc = fab_read(e->attr.ep, p->addr, r->off, r->len, &p->mr, r->src_off, r);
		if (rc == GICE_ERR_AGAIN)
			break; /* every slot busy: a read completion frees one */
		e->reads_wait_head++;
		e->reads_waiting--;
		r->state = CT_RD_POSTED;
		if (rc) /* refused at once (logged by the fabric): it ends now */
			ct_read_done(e, r, rc);
		n++;
	}
	return n;
}

void ct_reads_cancel(ct_engine_t *e, uint32_t gid)
{
	uint32_t keep = 0, n = e->reads_waiting;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t ri = e->reads_wait[(e->reads_wait_head + i) % CT_READS];
		if (e->reads[ri].gid == gid)
			read_free(e, &e->reads[ri]);
		else
			e->reads_wait[(e->reads_wait_head + keep++) % CT_READS] = ri;
	}
	e->reads_waiting = keep;
}

/* ---------------------------------------------------------------- puts, at the target */

/* The data of a rendezvous put is in place (or failed): it has landed; tell the initiator. */
static void rts_done(ct_engine_t *e, uint32_t gid, uint32_t msg_id, int status)
{
	ct_peer_t *p = &e->peers[gid];
	ct_rx_slot_t *s = &p->rx[msg_id & (CT_PEER_WIN - 1)];

	if (s->id1 == msg_id + 1) {
		if (status && s->status == GICE_OK)
			s->status = status;
		s->got = s->len;
		ct_landed(e, gid, p, s);
	}
	if (!ct_queue_response(e, MK_PUT_DONE, gid, 0, msg_id, 0, status))
		gice_error("ct", "no response entry for PUT_DONE of message %u to device %u", msg_id, gid);
}

/* A rendezvous read ended. */
void ct_read_done(ct_engine_t *e, struct ct_read *r, int status)
{
	rts_done(e, r->gid, r->msg_id, status);
	read_free(e, r);
}

void ct_rx_rts(ct_engine_t *e, ct_peer_t *p, ct_rx_slot_t *s, const ct_hdr_t *h)
{
	uint64_t off;
	int rc = hbm_translate_key(e->attr.hbm, h->rkey, h->roff, h->msg_len, &off);
	struct ct_read *r = NULL;

	if (!rc && ct_rx_signal_check(e, s, h)) {
		ct_landed(e, h->src_gid, p, s);
		return;
	}
	if (!rc && p->map) {
		/* NVLink plane: the initiator's memory is mapped here; the CT is the copy engine */
		if (h->aux > p->map_size || h->msg_len > p->map_size - h->aux) {
			ct_rx_fail(e, s, h, GICE_ERR_OUT_OF_BOUNDS);
			ct_landed(e, h->src_gid, p, s);
			return;
		}
		memcpy(e->base + off, p->map + h->aux, h->msg_len);
		rts_done(e, h->src_gid, h->msg_id, GICE_OK);
		return;
	}
	if (!rc && !e->rma)
		rc = GICE_ERR_UNSUPPORTED;
	if (!rc && !(r = read_alloc(e)))
		rc = GICE_ERR_AGAIN;
	if (rc) {
		ct_rx_fail(e, s, h, rc);
		ct_landed(e, h->src_gid, p, s);
		return;
	}
	*r = (struct ct_read){.gid = h->src_gid, .msg_id = h->msg_id, .off = off, .len = h->msg_len,
			      .src_off = h->aux};
	read_queue(e, r);
}
