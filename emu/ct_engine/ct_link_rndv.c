/* ct_link_rndv.c: rendezvous puts at the target — a large put is announced (PUT_RTS) and its
 * bytes move by one remote read that this device issues after validating, or by a copy when the
 * initiator's memory is mapped here (NVLink plane); PUT_DONE tells the initiator. Runs under
 * the link lock, like the rest of the link. */
#include "emu/ct_engine/ct_internal.h"

#include <string.h>

/* Post the rendezvous reads waiting for a fabric read slot. */
int ct_post_reads(ct_engine_t *e)
{
	int n = 0;

	for (uint32_t i = 0; e->reads_waiting && i < FAB_READS_MAX; i++) {
		struct ct_read *r = &e->reads[i];
		if (r->state != 1)
			continue;
		if (fab_read(e->attr.ep, e->peers[r->gid].addr, r->off, r->len, &e->peers[r->gid].mr, r->src_off, r) ==
		    GICE_ERR_AGAIN)
			break;
		r->state = 2;
		e->reads_waiting--;
		n++;
	}
	return n;
}

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
	r->state = 0;
	atomic_fetch_sub_explicit(&e->msgs_live, 1, memory_order_relaxed);
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
	for (uint32_t i = 0; !rc && i < FAB_READS_MAX && !r; i++)
		if (e->reads[i].state == 0)
			r = &e->reads[i];
	if (!rc && !r)
		rc = GICE_ERR_AGAIN;
	if (rc) {
		ct_rx_fail(e, s, h, rc);
		ct_landed(e, h->src_gid, p, s);
		return;
	}
	*r = (struct ct_read){.gid = h->src_gid, .msg_id = h->msg_id, .off = off, .len = h->msg_len,
			      .src_off = h->aux, .state = 1};
	e->reads_waiting++;
	atomic_fetch_add_explicit(&e->msgs_live, 1, memory_order_relaxed); /* keeps CT 0 polling */
	ct_post_reads(e);
}
