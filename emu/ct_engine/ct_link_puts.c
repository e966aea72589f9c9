/* ct_link_puts.c: small puts sharing a packet (PUTS, docs/protocol.md). The MPG sends a small
 * put that the next message of its class list, a small put to the same peer, follows as one
 * PUTS packet with as many of the puts queued after it as fit: one header, one MAC, one psn and
 * one ACK for all, each put a 32-byte entry and a request message of its own (msg_ids in order).
 * A retransmission builds the entries again from the messages, which wait for the ACK of their
 * packet. The receiver takes each entry as the one-packet PUT it stands for. Runs under the link
 * lock. */
#include "emu/ct_engine/ct_internal.h"

#include <endian.h>
#include <string.h>

/* Whether message m, of peer p, can be an entry: a put not started yet, small, not by
 * rendezvous. */
static int small_put(const ct_engine_t *e, const ct_peer_t *p, const ct_msg_t *m)
{
	return m->kind == MK_PUT && m->state == MS_READY && m->req.len <= e->small_max &&
	       !ct_rndv_choose(e, p, m);
}

static size_t entry_of(const ct_engine_t *e, const ct_msg_t *m, uint8_t *buf)
{
	ct_put_entry_t pe = {.rkey = m->req.rkey, .roff = m->req.roff, .len = (uint16_t)m->req.len};

	if (m->req.flags & CT_RF_SIGNAL) {
		pe.flags = ct_sig_flags(&m->req);
		pe.sig_id = m->req.sig_id;
		pe.value = m->req.value;
	}
	return ct_proto_entry_build(&pe, e->base + m->req.src_off, buf);
}

/* The message at the head of class q fits after `len` bytes of entries of a packet of at most
 * room payload bytes to peer p. */
static int head_fits(const ct_engine_t *e, const ct_peer_t *p, uint32_t peer, uint32_t q, uint32_t len,
		     uint32_t room)
{
	uint32_t j = e->act_head[q];
	const ct_msg_t *n = j == CT_NIL ? NULL : &e->msgs[j];

	return n && n->peer == peer && small_put(e, p, n) &&
	       len + CT_PUT_ENTRY_BYTES + n->req.len <= GICE_MIN(room, n->mtu);
}

int ct_puts_start(const ct_engine_t *e, uint32_t q, uint32_t idx)
{
	const ct_msg_t *m = &e->msgs[idx];
	const ct_peer_t *p = &e->peers[m->peer];

	/* nothing behind it (a lone put: the ping-pong's path) is the first thing to look at */
	if (e->act_head[q] == CT_NIL || !e->small_max || p->dead || ct_tx_window_full(e, p) || p->next_msg_id + 1 - p->done_upto >= CT_PEER_WIN ||
	    !small_put(e, p, m) || CT_PUT_ENTRY_BYTES + m->req.len > m->mtu)
		return 0;
	return head_fits(e, p, m->peer, q, CT_PUT_ENTRY_BYTES + (uint32_t)m->req.len, m->mtu);
}

int ct_puts_send(ct_engine_t *e, uint32_t q, uint32_t idx)
{
	ct_msg_t *m = &e->msgs[idx];
	ct_peer_t *p = &e->peers[m->peer];
	uint32_t take[CT_PUTS_MAX], n = 0, len = 0, room = m->mtu;
	int rc;

	take[n++] = idx;
	len += (uint32_t)entry_of(e, m, e->puts_buf);
	while (n < CT_PUTS_MAX && p->next_msg_id + n - p->done_upto < CT_PEER_WIN &&
	       head_fits(e, p, m->peer, q, len, room)) {
		uint32_t j = ct_fifo_pop(e, &e->act_head[q], &e->act_tail[q]);
		room = GICE_MIN(room, e->msgs[j].mtu);
		len += (uint32_t)entry_of(e, &e->msgs[j], e->puts_buf + len);
		take[n++] = j;
	}
	ct_hdr_t h = {.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .op = CT_PKT_PUTS,
		      .flags = CT_HF_FIRST | CT_HF_LAST, .qos = m->qos, .src_gid = e->attr.gid, .dst_gid = m->peer,
		      .conn_id = m->req.conn, .msg_id = p->next_msg_id, .psn = p->next_psn, .payload_len = len,
		      .msg_len = len, .value = n};
	uint32_t psn = h.psn;

	rc = ct_send_seq(e, p, &h, 1, e->puts_buf, len, CT_POFF_PUTS);
	if (rc == GICE_ERR_AGAIN) {
		/* all back where they were, the first by the caller: sent later as they are */
		for (uint32_t i = n; i-- > 1;) {
			e->msgs[take[i]].next = e->act_head[q];
			e->act_head[q] = take[i];
			if (e->act_tail[q] == CT_NIL)
				e->act_tail[q] = take[i];
		}
		ct_stat_add(e, CT_STAT_tx_again, 1);
		return CT_SEND_FULL;
	}
	if (rc)
		gice_error("ct", "send of %s (%u puts) to device %u failed: %s", ct_pkt_name(h.op), n, m->peer,
			   gice_status_name(rc));
	e->act_len[q] -= n;
	for (uint32_t i = 0; i < n; i++) {
		ct_msg_t *mm = &e->msgs[take[i]];
		if (rc) { /* the peer will never ack it: fail it now */
			mm->status = mm->status ? mm->status : rc;
			mm->need = 0;
			ct_complete_msg(e, take[i]);
			continue;
		}
		mm->msg_id = p->next_msg_id++;
		p->by_id[mm->msg_id & (CT_PEER_WIN - 1)] = take[i] + 1;
		mm->need = NEED_ACK;
		mm->state = MS_WAITING;
		mm->sent = mm->req.len;
		mm->first_psn = mm->last_psn = psn;
		mm->t_first_tx = GICE_MAX(p->t_tx, mm->t_pickup); /* a held clock: never before pickup */
		ct_fifo_push(e, &p->wait_head, &p->wait_tail, take[i]);
	}
	if (!rc)
		ct_stat_link(&e->st[CT_STAT_tx_small_puts], n);
	return CT_SEND_TAKEN;
}

const void *ct_puts_rebuild(ct_engine_t *e, ct_peer_t *p, const uint8_t *hdr, uint32_t plen)
{
	uint32_t len = 0, msg_id;
	uint64_t n;

	/* the header as we built it: the first msg_id and the count */
	memcpy(&msg_id, hdr + 20, 4);
	memcpy(&n, hdr + 64, 8);
	msg_id = le32toh(msg_id);
	n = le64toh(n);
	for (uint64_t i = 0; i < n; i++) {
		uint32_t idx;
		const ct_msg_t *m = ct_req_by_id(e, p, msg_id + (uint32_t)i, MK_PUT, &idx);
		if (!m || len + CT_PUT_ENTRY_BYTES + m->req.len > plen)
			return NULL; /* cannot happen: its puts wait for its ACK */
		len += (uint32_t)entry_of(e, m, e->puts_buf + len);
	}
	return len == plen ? e->puts_buf : NULL;
}

void ct_rx_puts(ct_engine_t *e, ct_peer_t *p, const ct_hdr_t *h, const uint8_t *payload)
{
	ct_hdr_t put = *h;

	put.op = CT_PKT_PUT;
	put.moff = 0;
	ct_rx_signals_batch(e);
	for (uint64_t i = 0; i < h->value; i++) {
		ct_put_entry_t pe;
		payload += ct_proto_entry_parse(payload, &pe);
		put.msg_id = h->msg_id + (uint32_t)i;
		put.flags = CT_HF_FIRST | CT_HF_LAST | pe.flags;
		put.rkey = pe.rkey;
		put.roff = pe.roff;
		put.msg_len = put.payload_len = pe.len;
		put.sig_id = pe.sig_id;
		put.value = pe.value;
		ct_rx_request(e, p, &put, pe.data);
	}
	ct_rx_signals_flush(e);
}
