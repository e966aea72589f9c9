/* ct_link.c: the device's link — MPG scheduling of messages into MTU packets (QoS weighted
 * round robin, per-peer credits), the receive path (validate, write, ack, signal) and
 * completion. Every function here runs under the engine's link lock, taken by whichever CT
 * thread gets it first (ct_link_progress); nothing here allocates or blocks.
 *
 * Initiator states of a message: QUEUED (in its CT's ring) → SENDING (on a class list, cut into
 * packets) → WAITING (all packets out; awaiting the cumulative ack and, for get and atomics, the
 * response) → DONE (counter written, ticket retired, entry freed).
 */
#include "emu/ct_engine/ct_internal.h"

#include <endian.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

enum { SEND_OK, SEND_DONE, SEND_BLOCKED, SEND_FULL };

int ct_link_busy(ct_engine_t *e)
{
	/* a delayed ack is link work too: CT 0 keeps polling until it has gone out */
	return atomic_load_explicit(&e->msgs_live, memory_order_relaxed) != 0 ||
	       atomic_load_explicit(&e->acks_delayed, memory_order_relaxed) != 0;
}

/* Received packets that make the receiver acknowledge at once: GICE_CT_ACK_EVERY, but never more
 * than half the sender's window (GICE_CT_CREDITS), so a window smaller than the ack interval
 * cannot close with every packet in it received and none acknowledged — and the sender gets the
 * ACK while it still has the other half to send. */
static uint32_t ack_thresh(const ct_engine_t *e)
{
	return GICE_MIN(e->ack_every, GICE_MAX(e->credits / 2, 1u));
}

/* Delayed ack: packets received and not yet acknowledged get an ACK after this long whatever the
 * counts (a sender whose window is smaller than this device's settings assume, e.g. another
 * process with a smaller GICE_CT_CREDITS). A quarter of GICE_RTO_MIN_US: well below the sender's
 * retransmission timeout. */
static uint64_t ack_delay_ns(const ct_engine_t *e)
{
	return e->rto_min_ns / 4;
}

/* p owes no ACK any more (one went out, or the peer is gone). */
static void ct_ack_owed_clear(ct_engine_t *e, ct_peer_t *p)
{
	if (p->ack_unsent) {
		p->ack_unsent = 0;
		atomic_fetch_sub_explicit(&e->acks_delayed, 1, memory_order_relaxed);
	}
}

/* ---------------------------------------------------------------- completion */

static void trace_add(ct_engine_t *e, const ct_msg_t *m, uint64_t now)
{
	ct_trace_t *tr = &e->trace[e->trace_n++ % CT_TRACE_RING];

	tr->op = m->kind;
	tr->peer_gid = m->peer;
	tr->bytes = m->len;
	tr->t_issue = m->t_issue;
	tr->t_pickup = m->t_pickup;
	tr->t_first_tx = m->t_first_tx;
	tr->t_complete = now;
	tr->status = m->status;
}

void ct_complete_msg(ct_engine_t *e, uint32_t idx)
{
	ct_msg_t *m = &e->msgs[idx];

	if (m->kind <= MK_AMO) {
		ct_peer_t *p = &e->peers[m->peer];
		if (m->started) {
			p->by_id[m->msg_id & (CT_PEER_WIN - 1)] = 0;
			while (p->done_upto != p->next_msg_id && !p->by_id[p->done_upto & (CT_PEER_WIN - 1)])
				p->done_upto++;
		}
		p->inflight--;
		trace_add(e, m, gice_now_ns());
	}
	if (m->kind <= MK_FENCE) {
		ct_stat_add(m->status ? &e->st.msgs_failed : &e->st.msgs_done, 1);
		ct_complete_counter(e, m->counter, m->status);
		ct_retire(e, m->owner, m->ticket);
	}
	m->live = 0;
	atomic_fetch_sub_explicit(&e->msgs_live, 1, memory_order_relaxed);
	ct_msg_release(e, idx);
}

/* ---------------------------------------------------------------- sending */

/* Hand one encoded packet to the fabric, with its CRC32C when checksums are on. hdr is
 * modified (flag and csum) in place. */
int ct_xmit(ct_engine_t *e, ct_peer_t *p, uint8_t *hdr, const void *payload, uint32_t plen)
{
	int rc;

	if (atomic_load_explicit(&e->csum, memory_order_relaxed)) {
		hdr[CT_HDR_FLAGS_OFF] |= CT_HF_CSUM;
		memset(hdr + CT_HDR_CSUM_OFF, 0, 4);
		uint32_t c = htole32(ct_proto_csum(hdr, payload, plen));
		memcpy(hdr + CT_HDR_CSUM_OFF, &c, 4);
	}
	rc = fab_send(e->attr.ep, p->addr, hdr, CT_HDR_BYTES, payload, plen);
	if (rc == GICE_OK)
		p->t_tx = gice_now_ns();
	return rc;
}

static int ct_send_ctrl(ct_engine_t *e, uint32_t gid, uint8_t op, uint32_t psn, uint64_t value, uint64_t aux)
{
	ct_hdr_t h = {.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .op = op, .src_gid = e->attr.gid,
		      .dst_gid = gid, .psn = psn, .value = value, .aux = aux};
	uint8_t buf[CT_HDR_BYTES];

	ct_proto_build(&h, buf);
	return ct_xmit(e, &e->peers[gid], buf, NULL, 0);
}

/* Selective ack: bit i set when psn rx_next_psn + 1 + i has arrived. The bitmap is a ring over
 * [rx_next_psn, rx_next_psn + CT_PSN_WIN) whose bits below rx_next_psn are clear. */
static uint64_t sack_bits(const ct_peer_t *p)
{
	uint32_t start = p->rx_next_psn + 1, w = start / 64, b = start % 64;
	uint64_t lo = p->rx_seen[w % (CT_PSN_WIN / 64)], hi = p->rx_seen[(w + 1) % (CT_PSN_WIN / 64)];

	return b ? (lo >> b) | (hi << (64 - b)) : lo;
}

static void ct_send_ack(ct_engine_t *e, uint32_t gid)
{
	ct_peer_t *p = &e->peers[gid];

	/* An ACK covering a failed message must not overtake its NACK: hold it while NACKs to this
	 * peer wait for a psn. It carries our next psn towards the peer, so the peer completes the
	 * messages it covers only after it has everything we sent before it (NACKs included). */
	if (p->nack_unsent == 0 &&
	    ct_send_ctrl(e, gid, CT_PKT_ACK, p->rx_next_psn, p->next_psn, sack_bits(p)) == GICE_OK) {
		ct_stat_add(&e->st.acks_sent, 1);
		ct_ack_owed_clear(e, p);
		if (p->ack_due) {
			p->ack_due = 0;
			e->acks_pending--;
		}
	} else if (!p->ack_due) {
		p->ack_due = 1;
		e->acks_pending++;
	}
}

/* A NACK is a sequenced response (retransmitted like data until acked). */
static void ct_send_nack(ct_engine_t *e, uint32_t gid, uint32_t msg_id, int status)
{
	ct_stat_add(&e->st.nacks_sent, 1);
	ct_msg_t *m = ct_queue_response(e, MK_NACK, gid, 0, msg_id, 0, status);

	if (!m) {
		gice_error("ct", "no response entry: NACK of message %u to device %u (%s) lost", msg_id, gid,
			   gice_status_name(status));
		return;
	}
	m->nack_unsent = 1;
	e->peers[gid].nack_unsent++;
}

/* A NACK got its psn (or will never be sent): ACKs to its peer may go again. */
static void ct_nack_done(ct_engine_t *e, ct_msg_t *m)
{
	if (m->nack_unsent) {
		m->nack_unsent = 0;
		e->peers[m->peer].nack_unsent--;
	}
}

static void flush_ctrl(ct_engine_t *e)
{
	for (uint32_t g = 0; e->acks_pending && g < e->max_peers; g++)
		if (e->peers[g].ack_due)
			ct_send_ack(e, g);
}

/* Send the next packet of message idx. */
static int send_pkt(ct_engine_t *e, uint32_t idx)
{
	ct_msg_t *m = &e->msgs[idx];
	ct_peer_t *p = &e->peers[m->peer];
	ct_hdr_t h = {.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .qos = m->qos, .src_gid = e->attr.gid,
		      .dst_gid = m->peer, .conn_id = m->conn, .rkey = m->rkey, .roff = m->roff};
	uint8_t buf[CT_HDR_BYTES];
	const void *payload = NULL;
	uint32_t plen = 0;
	int rc;

	if (gice_unlikely(p->dead)) {
		/* a dead peer acks nothing: fail the message now */
		if (!m->status)
			m->status = p->dead_status;
		m->need = 0;
		ct_nack_done(e, m);
		return SEND_DONE;
	}
	if (p->next_psn - p->acked_psn >= e->credits ||
	    (atomic_load_explicit(&e->reliable, memory_order_relaxed) && p->next_psn - p->acked_psn >= p->cwnd))
		return SEND_BLOCKED;
	if (!m->started) {
		if (m->kind <= MK_AMO) {
			if (p->next_msg_id - p->done_upto >= CT_PEER_WIN)
				return SEND_BLOCKED;
			m->msg_id = p->next_msg_id++;
			p->by_id[m->msg_id & (CT_PEER_WIN - 1)] = idx + 1;
			/* a large put moves by one remote read that the target issues after validating;
			 * it completes on the target's PUT_DONE, like a get on its response */
			m->rndv = m->kind == MK_PUT && ((e->rma && p->rma) || p->map) && e->rndv_bytes &&
				  m->len >= e->rndv_bytes;
			m->need = NEED_ACK | (m->kind == MK_PUT && !m->rndv ? 0 : NEED_RESP);
		} else {
			m->need = NEED_ACK;
		}
		m->started = 1;
	}
	h.msg_id = m->msg_id;
	if (m->sent == 0)
		h.flags |= CT_HF_FIRST;
	switch (m->rndv ? (uint8_t)0xff : m->kind) {
	case 0xff: /* rendezvous put: announce it; the target reads the bytes at aux */
		h.op = CT_PKT_PUT_RTS;
		h.msg_len = (uint32_t)m->len;
		h.aux = m->src_off;
		if (m->rflags & CT_RF_SIGNAL) {
			h.flags |= CT_HF_SIGNAL | ((m->rflags & CT_RF_SIG_ADD) ? CT_HF_SIG_ADD : 0) |
				   ((m->rflags & CT_RF_STRONG) ? CT_HF_STRONG : 0);
			h.sig_id = m->sig_id;
			h.value = m->value;
		}
		break;
	case MK_PUT:
	case MK_GET_RESP:
		h.op = m->kind == MK_PUT ? CT_PKT_PUT : CT_PKT_GET_RESP;
		plen = (uint32_t)GICE_MIN(m->len - m->sent, (uint64_t)m->mtu);
		payload = e->base + m->src_off + m->sent;
		h.msg_len = (uint32_t)m->len;
		h.moff = (uint32_t)m->sent;
		h.payload_len = plen;
		if (m->kind == MK_PUT && (m->rflags & CT_RF_SIGNAL)) {
			h.flags |= CT_HF_SIGNAL | ((m->rflags & CT_RF_SIG_ADD) ? CT_HF_SIG_ADD : 0) |
				   ((m->rflags & CT_RF_STRONG) ? CT_HF_STRONG : 0);
			h.sig_id = m->sig_id;
			h.value = m->value;
		}
		if (m->kind == MK_GET_RESP) {
			h.aux = m->aux;
			h.status = m->status;
		}
		break;
	case MK_GET:
		h.op = CT_PKT_GET_REQ;
		h.value = m->len;
		h.aux = m->mtu + CT_HDR_BYTES; /* largest response packet we take */
		break;
	case MK_AMO:
		h.op = CT_PKT_ATOMIC_REQ;
		h.value = m->value;
		if (m->aux == CT_OP_AMO_CSWAP) {
			h.flags |= CT_HF_CSWAP;
			h.aux = m->compare;
		}
		break;
	case MK_AMO_RESP:
	case MK_PUT_DONE:
		h.op = m->kind == MK_AMO_RESP ? CT_PKT_ATOMIC_RESP : CT_PKT_PUT_DONE;
		h.value = m->value;
		h.aux = m->aux;
		h.status = m->status;
		break;
	case MK_NACK:
		h.op = CT_PKT_NACK;
		h.msg_id = (uint32_t)m->aux;
		h.status = m->status;
		break;
	}
	/* get and atomic requests and atomic responses are one packet; data messages end at len */
	int last = m->rndv || (m->kind != MK_PUT && m->kind != MK_GET_RESP) || m->sent + plen >= m->len;
	if (last)
		h.flags |= CT_HF_LAST;
	h.psn = p->next_psn;
	/* keep the packet until it is acked: a retransmission rebuilds it from here */
	ct_txrec_t *tr = &p->tx[h.psn & p->tx_mask];
	ct_proto_build(&h, tr->hdr);
	memcpy(buf, tr->hdr, sizeof(buf));
	rc = ct_xmit(e, p, buf, payload, plen);
	if (rc == GICE_ERR_AGAIN) {
		ct_stat_add(&e->st.tx_again, 1);
		return SEND_FULL;
	}
	if (rc) {
		gice_error("ct", "send of %s to device %u failed: %s", ct_pkt_name(h.op), m->peer, gice_status_name(rc));
		if (!m->status)
			m->status = rc;
		/* count the packet as sent: the peer will never ack it, so fail the message now */
		m->need = 0;
		ct_nack_done(e, m);
		return SEND_DONE;
	}
	tr->poff = payload ? (uint64_t)((const uint8_t *)payload - e->base) : 0;
	tr->plen = plen;
	tr->tries = 1;
	tr->sacked = 0;
	tr->t_tx = p->t_tx;
	if (p->next_psn == p->acked_psn)
		p->t_progress = p->t_tx; /* the ack clock starts with the first packet outstanding */
	if (m->sent == 0 && !m->t_first_tx) {
		m->t_first_tx = p->t_tx;
		m->first_psn = h.psn;
	}
	ct_nack_done(e, m);
	p->next_psn++;
	m->sent += plen;
	ct_stat_add(&e->st.tx_pkts, 1);
	ct_stat_add(&e->st.tx_bytes, plen);
	if (!last)
		return SEND_OK;
	m->last_psn = h.psn;
	return SEND_DONE;
}

/* Move new messages from the CTs' rings (and responses) onto the class lists. A fence holds its
 * ring until every message to its peer is complete. */
static int pull_rings(ct_engine_t *e)
{
	int n = 0;

	for (uint32_t q = 0; q < CT_QOS_CLASSES; q++) {
		for (uint32_t c = 0; c < e->attr.n_cts; c++) {
			ct_ring_t *r = &e->tiles[c].mpg[q];
			uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
			/* acquire: the message entries the CT filled before publishing tail */
			uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
			for (; head != tail; head++) {
				uint32_t idx = r->slot[head & (CT_MSGS_PER_CT - 1)];
				ct_msg_t *m = &e->msgs[idx];
				if (m->kind == MK_FENCE) {
					if (e->peers[m->peer].inflight)
						break;
					ct_complete_msg(e, idx);
				} else {
					e->peers[m->peer].inflight++;
					ct_fifo_push(e, &e->act_head[q], &e->act_tail[q], idx);
					e->act_len[q]++;
				}
				n++;
			}
			atomic_store_explicit(&r->head, head, memory_order_release);
		}
		while (e->resp_head[q] != CT_NIL) {
			ct_fifo_push(e, &e->act_head[q], &e->act_tail[q],
				     ct_fifo_pop(e, &e->resp_head[q], &e->resp_tail[q]));
			e->act_len[q]++;
			n++;
		}
	}
	return n;
}

/* MPG: weighted round robin over QoS classes, round robin over the messages of a class, one
 * packet per message per turn; messages whose peer has no credit wait their turn. */
static int send_some(ct_engine_t *e)
{
	int sent = 0;

	for (uint32_t turn = 0; turn < CT_QOS_CLASSES; turn++) {
		uint32_t q = (e->wrr_class + turn) % CT_QOS_CLASSES;
		uint32_t budget = e->weights[q], tries = e->act_len[q];
		while (budget && tries--) {
			uint32_t idx = ct_fifo_pop(e, &e->act_head[q], &e->act_tail[q]);
			ct_msg_t *m = &e->msgs[idx];
			int rc = send_pkt(e, idx);
			if (rc == SEND_FULL) {
				/* back at the head: keep its place */
				m->next = e->act_head[q];
				e->act_head[q] = idx;
				if (e->act_tail[q] == CT_NIL)
					e->act_tail[q] = idx;
				e->wrr_class = q;
				return sent;
			}
			if (rc == SEND_DONE) {
				ct_peer_t *p = &e->peers[m->peer];
				e->act_len[q]--;
				if (m->need == 0) /* failed at send */
					ct_complete_msg(e, idx);
				else
					ct_fifo_push(e, &p->wait_head, &p->wait_tail, idx);
			} else {
				ct_fifo_push(e, &e->act_head[q], &e->act_tail[q], idx);
			}
			if (rc != SEND_BLOCKED) {
				budget--;
				sent++;
			}
		}
	}
	e->wrr_class = (e->wrr_class + 1) % CT_QOS_CLASSES;
	return sent;
}

/* ---------------------------------------------------------------- receiving */

static ct_msg_t *req_by_id(ct_engine_t *e, ct_peer_t *p, uint64_t msg_id, uint8_t kind, uint32_t *idx)
{
	uint32_t slot = p->by_id[msg_id & (CT_PEER_WIN - 1)];
	ct_msg_t *m;

	if (!slot)
		return NULL;
	m = &e->msgs[slot - 1];
	if (m->msg_id != msg_id || (kind != 0xff && m->kind != kind))
		return NULL;
	*idx = slot - 1;
	return m;
}

static void resp_done(ct_engine_t *e, uint32_t idx, int status)
{
	ct_msg_t *m = &e->msgs[idx];

	if (status && !m->status)
		m->status = status;
	m->need &= (uint8_t)~NEED_RESP;
	if (!m->need)
		ct_complete_msg(e, idx);
}

/* Remember the counters a peer signals (a few, most recent first out): they are what this
 * device waits on for that peer. */
static void note_signal(ct_peer_t *p, uint32_t sig)
{
	for (uint32_t i = 0; i < CT_SIG_RECENT; i++)
		if (p->sig_recent[i] == sig + 1)
			return;
	p->sig_recent[p->sig_next++ % CT_SIG_RECENT] = sig + 1;
}

/* Log a rejected signal: per-message path, rate-limited, with the count so far. */
static void signal_reject_log(ct_engine_t *e, uint32_t src, uint32_t msg_id, uint32_t sig_id, int status,
			      const char *what)
{
	uint64_t n = atomic_fetch_add_explicit(&e->st.rx_bad_signal, 1, memory_order_relaxed);

	if (n < 10 || n % 1000 == 0)
		gice_warn("ct", "device %u: put from device %u (msg %u) signals counter %u, %s (signal counters are "
			  "the allocated ids in %u..%u): %s (%llu so far)", e->attr.gid, src, msg_id, sig_id,
			  status == GICE_ERR_NOT_FOUND ? "which is not allocated" : "which is reserved or out of range",
			  e->attr.n_cts, e->n_counters - 1, what, (unsigned long long)n + 1);
}

/* GICE_OK if counter id may take a signal: one of this device's allocatable ids (not reserved,
 * in range: else GICE_ERR_INVALID) that is allocated now (else GICE_ERR_NOT_FOUND). The
 * allocation is known in the process that created the trigger memory, where the CT runs; a region
 * attached from elsewhere cannot tell, and then only the range is checked. */
static int signal_ok(const ct_engine_t *e, uint32_t id)
{
	if (id < e->attr.n_cts || id >= e->n_counters)
		return GICE_ERR_INVALID;
	return tm_counter_allocated(e->attr.tm, id) == 0 ? GICE_ERR_NOT_FOUND : GICE_OK;
}

static void apply_signal(ct_engine_t *e, uint32_t src, const ct_rx_slot_t *s)
{
	int rc = signal_ok(e, s->sig_id);

	/* validated at every packet; only a counter freed since (a strong signal waits) gets here */
	if (rc) {
		signal_reject_log(e, src, s->id1 - 1, s->sig_id, rc, "freed after the put was accepted; not applied");
		return;
	}
	if (s->flags & CT_HF_SIG_ADD)
		tm_counter_add(e->attr.tm, s->sig_id, s->value);
	else
		tm_counter_set(e->attr.tm, s->sig_id, s->value);
	note_signal(&e->peers[src], s->sig_id);
}

/* A request message has landed: weak signals apply now, strong ones once every earlier
 * message from this peer has landed. */
void ct_landed(ct_engine_t *e, uint32_t src, ct_peer_t *p, ct_rx_slot_t *s)
{
	s->landed = 1;
	if (s->status == GICE_OK && (s->flags & CT_HF_SIGNAL) && !(s->flags & CT_HF_STRONG))
		apply_signal(e, src, s);
	for (;;) {
		ct_rx_slot_t *h = &p->rx[p->rx_landed & (CT_PEER_WIN - 1)];
		if (h->id1 != p->rx_landed + 1 || !h->landed)
			break;
		if (h->status == GICE_OK && (h->flags & CT_HF_STRONG))
			apply_signal(e, src, h);
		h->id1 = 0;
		p->rx_landed++;
	}
}

static ct_rx_slot_t *rx_slot(ct_engine_t *e, ct_peer_t *p, const ct_hdr_t *h)
{
	ct_rx_slot_t *s = &p->rx[h->msg_id & (CT_PEER_WIN - 1)];

	if (s->id1 == h->msg_id + 1)
		return s;
	if (s->id1 || ct_psn_before(h->msg_id, p->rx_landed) || h->msg_id - p->rx_landed >= CT_PEER_WIN) {
		gice_error("ct", "message %u from device %u is outside the receive window [%u, +%u)", h->msg_id,
			   h->src_gid, p->rx_landed, CT_PEER_WIN);
		return NULL;
	}
	memset(s, 0, sizeof(*s));
	s->id1 = h->msg_id + 1;
	s->len = h->msg_len;
	s->flags = h->flags;
	s->sig_id = h->sig_id;
	s->value = h->value;
	return s;
}

void ct_rx_fail(ct_engine_t *e, ct_rx_slot_t *s, const ct_hdr_t *h, int status)
{
	if (s->status == GICE_OK) {
		/* once per message, with the values involved */
		gice_error("ct", "%s from device %u (msg %u): key 0x%llx offset %llu length %u: %s", ct_pkt_name(h->op),
			   h->src_gid, h->msg_id, (unsigned long long)h->rkey, (unsigned long long)h->roff,
			   h->op == CT_PKT_GET_REQ ? (uint32_t)h->value : h->msg_len, gice_status_name(status));
		s->status = status;
		ct_send_nack(e, h->src_gid, h->msg_id, status);
	}
}

/* Check the signal of a PUT or PUT_RTS (if it has one) before a byte of it is written. A bad one
 * fails the whole message: counted, logged (rate-limited) and NACKed once per message. */
int ct_rx_signal_check(ct_engine_t *e, ct_rx_slot_t *s, const ct_hdr_t *h)
{
	int rc;

	if (!(h->flags & CT_HF_SIGNAL) || !(rc = signal_ok(e, h->sig_id)))
		return GICE_OK;
	if (s->status == GICE_OK) {
		signal_reject_log(e, h->src_gid, h->msg_id, h->sig_id, rc, "nothing written, NACK sent");
		s->status = rc;
		ct_send_nack(e, h->src_gid, h->msg_id, rc);
	}
	return rc;
}

/* Queue a response (get data, atomic old value, rendezvous done) to request msg_id of device
 * gid; the caller fills in what else its kind needs. NULL when no response entry is free. */
ct_msg_t *ct_queue_response(ct_engine_t *e, uint8_t kind, uint32_t gid, uint8_t qos, uint32_t msg_id,
			     uint64_t value, int status)
{
	uint32_t ri = e->resp_free;

	if (ri == CT_NIL)
		return NULL;
	e->resp_free = e->msgs[ri].next;
	ct_msg_t *m = &e->msgs[ri];
	memset(m, 0, sizeof(*m));
	m->owner = CT_NIL;
	m->live = 1;
	m->kind = kind;
	m->peer = gid;
	m->qos = qos < CT_QOS_CLASSES ? qos : CT_QOS_CLASSES - 1;
	m->mtu = e->mtu_max - CT_HDR_BYTES;
	m->aux = msg_id;
	m->value = value;
	m->status = status;
	m->ticket = UINT64_MAX;
	m->counter = TM_NONE;
	atomic_fetch_add_explicit(&e->msgs_live, 1, memory_order_relaxed);
	ct_fifo_push(e, &e->resp_head[m->qos], &e->resp_tail[m->qos], ri);
	return m;
}

static void rx_request(ct_engine_t *e, ct_peer_t *p, const ct_hdr_t *h, const uint8_t *payload)
{
	ct_rx_slot_t *s = rx_slot(e, p, h);
	uint64_t off;
	int rc;

	if (!s) {
		ct_stat_add(&e->st.rx_bad, 1);
		return;
	}
	switch (h->op) {
	case CT_PKT_PUT:
		/* the whole message range is checked at every packet: all or nothing lands */
		rc = hbm_translate_key(e->attr.hbm, h->rkey, h->roff, h->msg_len, &off);
		if (rc)
			ct_rx_fail(e, s, h, rc);
		/* and its signal counter: a put signalling no counter lands nothing */
		else if (!ct_rx_signal_check(e, s, h) && s->status == GICE_OK && h->payload_len)
			memcpy(e->base + off + h->moff, payload, h->payload_len);
		s->got += h->payload_len;
		if (s->got >= s->len && (h->payload_len || s->len == 0))
			ct_landed(e, h->src_gid, p, s);
		return;
	case CT_PKT_PUT_RTS:
		ct_rx_rts(e, p, s, h);
		return;
	case CT_PKT_GET_REQ:
	case CT_PKT_ATOMIC_REQ: {
		uint64_t len = h->op == CT_PKT_GET_REQ ? h->value : 8;
		rc = len > UINT32_MAX ? GICE_ERR_INVALID : hbm_translate_key(e->attr.hbm, h->rkey, h->roff, len, &off);
		if (!rc && h->op == CT_PKT_ATOMIC_REQ && (off & 7))
			rc = GICE_ERR_INVALID;
		if (!rc && e->resp_free == CT_NIL)
			rc = GICE_ERR_AGAIN;
		if (rc) {
			ct_rx_fail(e, s, h, rc);
			ct_landed(e, h->src_gid, p, s);
			return;
		}
		if (h->op == CT_PKT_ATOMIC_REQ) {
			_Atomic uint64_t *w = (_Atomic uint64_t *)(e->base + off);
			uint64_t old = h->aux;
			if (h->flags & CT_HF_CSWAP)
				atomic_compare_exchange_strong(w, &old, h->value); /* old value either way */
			else
				old = atomic_fetch_add(w, h->value);
			ct_queue_response(e, MK_AMO_RESP, h->src_gid, h->qos, h->msg_id, old, GICE_OK);
			ct_landed(e, h->src_gid, p, s);
			return;
		}
		ct_msg_t *m = ct_queue_response(e, MK_GET_RESP, h->src_gid, h->qos, h->msg_id, 0, GICE_OK);
		m->src_off = off;
		m->len = len;
		/* cut responses to the requester's packet size (GET_REQ aux), never above ours */
		m->mtu = (uint32_t)GICE_MIN((uint64_t)e->mtu_max, h->aux ? h->aux : e->mtu_max) - CT_HDR_BYTES;
		ct_landed(e, h->src_gid, p, s);
		return;
	}
	}
}

static void rx_response(ct_engine_t *e, ct_peer_t *p, const ct_hdr_t *h, const uint8_t *payload)
{
	uint32_t idx;
	uint8_t kind = h->op == CT_PKT_GET_RESP ? MK_GET : h->op == CT_PKT_PUT_DONE ? MK_PUT : MK_AMO;
	ct_msg_t *m = req_by_id(e, p, h->aux, kind, &idx);

	if (!m || !(m->need & NEED_RESP)) {
		gice_error("ct", "%s from device %u for unknown request %llu: dropped", ct_pkt_name(h->op), h->src_gid,
			   (unsigned long long)h->aux);
		ct_stat_add(&e->st.rx_bad, 1);
		return;
	}
	if (h->status) {
		resp_done(e, idx, h->status);
		return;
	}
	if (h->op == CT_PKT_PUT_DONE) {
		resp_done(e, idx, GICE_OK);
		return;
	}
	if (h->op == CT_PKT_ATOMIC_RESP) {
		if (!(m->rflags & CT_RF_NO_RESULT))
			memcpy(e->base + m->src_off, &h->value, 8);
		resp_done(e, idx, GICE_OK);
		return;
	}
	if (h->msg_len != m->len) {
		gice_error("ct", "get response of %u bytes for a get of %llu: dropped", h->msg_len,
			   (unsigned long long)m->len);
		ct_stat_add(&e->st.rx_bad, 1);
		return;
	}
	memcpy(e->base + m->src_off + h->moff, payload, h->payload_len);
	m->recvd += h->payload_len;
	if (m->recvd >= m->len)
		resp_done(e, idx, GICE_OK);
}

static void ct_rx_packet(ct_engine_t *e, const uint8_t *buf, size_t len)
{
	ct_hdr_t h;
	const char *why;
	ct_peer_t *p;

	/* the checksum first (when on, or claimed): a corrupted header is a checksum failure */
	if ((atomic_load_explicit(&e->csum, memory_order_relaxed) ||
	     (len > CT_HDR_FLAGS_OFF && (buf[CT_HDR_FLAGS_OFF] & CT_HF_CSUM))) &&
	    !((buf[CT_HDR_FLAGS_OFF] & CT_HF_CSUM) && ct_proto_csum_ok(buf, len))) {
		uint64_t n = atomic_fetch_add_explicit(&e->st.rx_csum_bad, 1, memory_order_relaxed);
		if (n < 10 || n % 1000 == 0) /* per-packet path: rate-limited */
			gice_warn("ct", "dropped a packet of %zu bytes: %s (%llu so far)", len,
				  len > CT_HDR_FLAGS_OFF && (buf[CT_HDR_FLAGS_OFF] & CT_HF_CSUM)
					  ? "CRC32C mismatch" : "no checksum (GICE_CHECKSUM is on)",
				  (unsigned long long)n + 1);
		return;
	}
	if (ct_proto_parse(buf, len, &h, &why)) {
		uint64_t n = atomic_fetch_add_explicit(&e->st.rx_bad, 1, memory_order_relaxed);
		if (n < 10 || n % 1000 == 0)
			gice_warn("ct", "dropped a malformed packet of %zu bytes: %s (%llu so far)", len, why,
				  (unsigned long long)n + 1);
		return;
	}
	if (h.src_gid < e->max_peers && e->peers[h.src_gid].dead && h.dst_gid == e->attr.gid &&
	    (h.op == CT_PKT_BYE || h.op == CT_PKT_HEARTBEAT || h.op == CT_PKT_ACK))
		return; /* late control packets of a peer we gave up on */
	if (h.dst_gid != e->attr.gid || h.src_gid >= e->max_peers || !e->peers[h.src_gid].present ||
	    e->peers[h.src_gid].dead) {
		uint64_t n = atomic_fetch_add_explicit(&e->st.rx_unknown, 1, memory_order_relaxed);
		if (n < 10 || n % 1000 == 0)
			gice_warn("ct", "dropped %s from device %u to device %u (this is device %u%s; %llu so far)",
				  ct_pkt_name(h.op), h.src_gid, h.dst_gid, e->attr.gid,
				  h.src_gid < e->max_peers && e->peers[h.src_gid].dead ? ", sender declared dead" : "",
				  (unsigned long long)n + 1);
		return;
	}
	p = &e->peers[h.src_gid];
	p->t_rx = gice_now_ns();
	ct_stat_add(&e->st.rx_pkts, 1);
	ct_stat_add(&e->st.rx_bytes, h.payload_len);
	switch (h.op) {
	case CT_PKT_ACK:
		ct_rx_ack(e, p, h.psn, (uint32_t)h.value, h.aux);
		return;
	case CT_PKT_HEARTBEAT:
		return;
	case CT_PKT_BYE:
		ct_peer_fail(e, h.src_gid, GICE_ERR_PEER_DEAD, "closed its device");
		return;
	}

	tm_progress(e->attr.tm);
	/* sequenced packets: each psn is processed once */
	uint32_t d = h.psn - p->rx_next_psn;
	if ((int32_t)d < 0 || (d < CT_PSN_WIN && (p->rx_seen[(h.psn / 64) % (CT_PSN_WIN / 64)] >> (h.psn % 64)) & 1)) {
		ct_stat_add(&e->st.rx_dup, 1);
		ct_send_ack(e, h.src_gid);
		return;
	}
	if (d >= CT_PSN_WIN) {
		ct_stat_add(&e->st.rx_bad, 1);
		gice_warn("ct", "psn %u from device %u is beyond the window (next %u): dropped", h.psn, h.src_gid,
			  p->rx_next_psn);
		return;
	}
	p->rx_seen[(h.psn / 64) % (CT_PSN_WIN / 64)] |= 1ull << (h.psn % 64);
	while ((p->rx_seen[(p->rx_next_psn / 64) % (CT_PSN_WIN / 64)] >> (p->rx_next_psn % 64)) & 1) {
		p->rx_seen[(p->rx_next_psn / 64) % (CT_PSN_WIN / 64)] &= ~(1ull << (p->rx_next_psn % 64));
		p->rx_next_psn++;
	}

	if (h.op == CT_PKT_NACK) {
		uint32_t idx;
		ct_msg_t *m = req_by_id(e, p, h.msg_id, 0xff, &idx);
		if (m && h.status < 0)
			resp_done(e, idx, h.status);
	} else if (h.op == CT_PKT_GET_RESP || h.op == CT_PKT_ATOMIC_RESP || h.op == CT_PKT_PUT_DONE) {
		rx_response(e, p, &h, buf + CT_HDR_BYTES);
	} else {
		rx_request(e, p, &h, buf + CT_HDR_BYTES);
	}
	/* an ack that waited for the packets we had not yet received from this peer */
	if (p->ack_held && !ct_psn_before(p->rx_next_psn, p->held_fence)) {
		p->ack_held = 0;
		ct_complete_upto(e, p, p->held_cum);
	}
	/* ack at every message end, every ack_thresh packets, and at once when this packet left a
	 * hole (the selective ack lets the sender resend just the hole); whatever is left unacked
	 * gets a delayed ack (ct_flush_delayed_acks) */
	if ((h.flags & CT_HF_LAST) || p->ack_unsent + 1 >= ack_thresh(e) || d != 0 || p->rx_next_psn != h.psn + 1) {
		ct_send_ack(e, h.src_gid); /* not sent now: flush_ctrl retries it */
		return;
	}
	if (p->ack_unsent++ == 0) { /* only a packet left unacknowledged pays for the timer */
		p->t_ack_wait = p->t_rx;
		atomic_fetch_add_explicit(&e->acks_delayed, 1, memory_order_relaxed);
		if (e->dack_next_ns > p->t_rx + ack_delay_ns(e))
			e->dack_next_ns = p->t_rx + ack_delay_ns(e);
	}
}

/* Send the ACKs owed for longer than ack_delay_ns (see there). */
static int ct_flush_delayed_acks(ct_engine_t *e, uint64_t now)
{
	uint64_t delay = ack_delay_ns(e), next = UINT64_MAX;
	int n = 0;

	if (now < e->dack_next_ns)
		return 0;
	for (uint32_t g = 0; g < e->max_peers; g++) {
		ct_peer_t *p = &e->peers[g];
		if (!p->ack_unsent || p->ack_due) /* none owed, or already retried by flush_ctrl */
			continue;
		if (now - p->t_ack_wait >= delay) {
			ct_send_ack(e, g);
			n++;
		} else if (p->t_ack_wait + delay < next) {
			next = p->t_ack_wait + delay;
		}
	}
	e->dack_next_ns = next;
	return n;
}

/* ---------------------------------------------------------------- progress */

/* Send what is queued (new messages, responses, held ACK/NACKs) up to the MPG's budget. */
static int ct_send_pending(ct_engine_t *e)
{
	int work = pull_rings(e);

	if (e->acks_pending)
		flush_ctrl(e);
	return work + send_some(e);
}

int ct_link_progress(ct_engine_t *e)
{
	fab_event_t ev[16];
	int work, n;

	if (!ct_link_trylock(e))
		return 0;
	/* send first: a new request goes out before this pass pays for polling (a syscall on
	 * socket providers) */
	work = ct_send_pending(e);
	n = fab_poll(e->attr.ep, ev, GICE_ARRAY_SIZE(ev));
	atomic_store_explicit(&e->t_poll, gice_now_ns(), memory_order_relaxed);
	for (int i = 0; i < n; i++) {
		if (ev[i].type == FAB_EV_RX) {
			ct_rx_packet(e, ev[i].buf, ev[i].len);
			fab_release(e->attr.ep, ev[i].buf);
		} else if (ev[i].type == FAB_EV_READ) {
			ct_read_done(e, ev[i].ctx, ev[i].status);
		} else {
			gice_warn("ct", "fabric error event: %s", gice_status_name(ev[i].status));
		}
	}
	if (n > 0) {
		/* what arrived may have freed credits or queued responses: send them now */
		work += n;
		if (e->reads_waiting)
			work += ct_post_reads(e);
		work += ct_send_pending(e);
	}
	if (atomic_load_explicit(&e->acks_delayed, memory_order_relaxed))
		work += ct_flush_delayed_acks(e, gice_now_ns());
	if (atomic_load_explicit(&e->reliable, memory_order_relaxed) && ct_link_busy(e)) {
		uint64_t now = gice_now_ns();
		if (now >= e->next_timer_ns) {
			work += ct_check_rto(e, now);
			e->next_timer_ns = now + e->rto_min_ns / 4;
		}
	}
	ct_link_unlock(e);
	return work;
}

/* Remove from a class list every message to peer gid; returns them as a list through next. */
static uint32_t act_take_peer(ct_engine_t *e, uint32_t q, uint32_t gid)
{
	uint32_t keep_h = CT_NIL, keep_t = CT_NIL, out = CT_NIL, idx;

	while ((idx = ct_fifo_pop(e, &e->act_head[q], &e->act_tail[q])) != CT_NIL) {
		if (e->msgs[idx].peer == gid) {
			e->act_len[q]--;
			e->msgs[idx].next = out;
			out = idx;
		} else {
			ct_fifo_push(e, &keep_h, &keep_t, idx);
		}
	}
	e->act_head[q] = keep_h;
	e->act_tail[q] = keep_t;
	return out;
}

static void fail_msg(ct_engine_t *e, uint32_t idx, int status)
{
	ct_msg_t *m = &e->msgs[idx];

	if (!m->live)
		return;
	if (!m->status)
		m->status = status;
	m->need = 0;
	ct_nack_done(e, m);
	if (m->kind <= MK_AMO)
		ct_stat_add(&e->st.timed_out, status == GICE_ERR_TIMED_OUT);
	ct_complete_msg(e, idx);
}

/* Fail every operation of the link to peer gid (sent, being sent, or awaiting a response). */
static uint32_t fail_peer_msgs(ct_engine_t *e, uint32_t gid, int status)
{
	ct_peer_t *p = &e->peers[gid];
	uint32_t n = 0, idx;

	while ((idx = ct_fifo_pop(e, &p->wait_head, &p->wait_tail)) != CT_NIL) {
		n += e->msgs[idx].kind <= MK_FENCE;
		fail_msg(e, idx, status);
	}
	for (uint32_t q = 0; q < CT_QOS_CLASSES; q++) {
		idx = act_take_peer(e, q, gid);
		while (idx != CT_NIL) {
			uint32_t next = e->msgs[idx].next;
			n += e->msgs[idx].kind <= MK_FENCE;
			fail_msg(e, idx, status);
			idx = next;
		}
	}
	/* requests acked but still waiting for their response */
	for (uint32_t id = p->done_upto; id != p->next_msg_id; id++) {
		uint32_t slot = p->by_id[id & (CT_PEER_WIN - 1)];
		if (slot) {
			n++;
			fail_msg(e, slot - 1, status);
		}
	}
	return n;
}

uint32_t ct_peer_fail(ct_engine_t *e, uint32_t gid, int status, const char *why)
{
	ct_peer_t *p = &e->peers[gid];
	uint32_t n;

	if (p->dead)
		return 0;
	p->dead = 1;
	p->dead_status = status;
	n = fail_peer_msgs(e, gid, status);
	for (uint32_t i = 0; i < FAB_READS_MAX; i++) {
		struct ct_read *r = &e->reads[i];
		if (r->state == 1 && r->gid == gid) {
			r->state = 0;
			e->reads_waiting--;
			atomic_fetch_sub_explicit(&e->msgs_live, 1, memory_order_relaxed);
		}
	}
	p->acked_psn = p->next_psn;
	p->ack_held = 0;
	ct_ack_owed_clear(e, p);
	if (p->ack_due) {
		p->ack_due = 0;
		e->acks_pending--;
	}
	if (why)
		gice_log(n ? GICE_LOG_ERROR : GICE_LOG_INFO, "ct", "device %u: peer device %u %s; %u operation(s) to it failed with %s",
			 e->attr.gid, gid, why, n, gice_status_name(status));
	return n;
}

uint32_t ct_link_fail_all(ct_engine_t *e, int status)
{
	uint32_t n = 0;

	for (uint32_t g = 0; g < e->max_peers; g++)
		if (e->peers[g].present)
			n += fail_peer_msgs(e, g, status);
	return n;
}

/* The oldest operation to peer p still waiting (for the diagnostic), or NULL. */
static const ct_msg_t *oldest_to(ct_engine_t *e, ct_peer_t *p)
{
	for (uint32_t id = p->done_upto; id != p->next_msg_id; id++) {
		uint32_t slot = p->by_id[id & (CT_PEER_WIN - 1)];
		if (slot)
			return &e->msgs[slot - 1];
	}
	return p->wait_head != CT_NIL ? &e->msgs[p->wait_head] : NULL;
}

static const char *kind_name(uint8_t k)
{
	static const char *const names[] = {"put", "get", "atomic", "fence", "get response", "atomic response",
					    "put done", "nack"};
	return k < GICE_ARRAY_SIZE(names) ? names[k] : "?";
}

/* Is a silent peer's process still there? 1 yes (hung), 0 no (exited or a zombie), -1 unknown
 * (its pid means nothing here: another machine or pid namespace). */
static int peer_alive(int32_t pid)
{
	char path[64], st[256];
	FILE *f;

	if (pid <= 0)
		return -1;
	if (kill(pid, 0) && errno == ESRCH)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	size_t n = fread(st, 1, sizeof(st) - 1, f);
	fclose(f);
	st[n] = 0;
	const char *paren = strrchr(st, ')'); /* "pid (comm) S ...": comm may hold spaces */
	return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

/* How long ago t was, 0 if it is later than now (stamped by another thread after now was read). */
static uint64_t since(uint64_t now, uint64_t t) { return now > t ? now - t : 0; }

int ct_link_watch(ct_engine_t *e, uint64_t now, ct_event_cb cb, void *arg)
{
	int events = 0;

	if (!ct_link_trylock(e))
		return 0; /* the holder is busy: it is not stalled on the link */
	/* the time now, under the lock: the peers' stamps (written under it) are not later; a now
	 * read before a preemption would make a fresh stamp look 2^64 ns old */
	now = GICE_MAX(now, gice_now_ns());
	if (since(now, atomic_load_explicit(&e->t_poll, memory_order_relaxed)) > e->timeout_ns / 2) {
		/* our own link is not being polled (CT 0 stalled): we cannot judge peers */
		ct_link_unlock(e);
		return 0;
	}
	for (uint32_t g = 0; g < e->max_peers; g++) {
		ct_peer_t *p = &e->peers[g];
		if (!p->present || p->dead || g == e->attr.gid)
			continue;
		if (!p->t_rx)
			p->t_rx = now; /* the clock starts when we first look */
		uint64_t silent = since(now, p->t_rx);
		int waiting = p->acked_psn != p->next_psn || p->done_upto != p->next_msg_id;
		uint64_t stuck = p->acked_psn != p->next_psn ? since(now, p->t_progress) : 0;
		if (silent <= e->timeout_ns && stuck <= e->timeout_ns) {
			if (since(now, p->t_tx) >= e->hb_ns && ct_send_ctrl(e, g, CT_PKT_HEARTBEAT, 0, 0, 0) == GICE_OK)
				p->t_tx = now;
			continue;
		}
		if (silent <= e->timeout_ns && !waiting)
			continue;
		if (p->tm && tm_region_status(p->tm) == GICE_ERR_CANCELED) {
			/* it closed its device (no BYE over shm): not a failure */
			ct_peer_fail(e, g, GICE_ERR_PEER_DEAD, "closed its device");
			continue;
		}
		/* silent: a peer whose process is still there is hung (it holds its connection),
		 * one whose process is gone is dead; from another machine we cannot tell */
		int gone = silent > e->timeout_ns, alive = gone ? peer_alive(p->pid) : 1;
		ct_event_t ev = {.status = !gone ? GICE_ERR_TIMED_OUT : alive > 0 ? GICE_ERR_PEER_HUNG : GICE_ERR_PEER_DEAD,
				 .reason = !gone ? "acknowledging nothing"
					 : alive > 0 ? "process alive, not responding (hung)"
					 : alive == 0 ? "process exited"
						      : "silent (its process is on another machine)",
				 .device_gid = e->attr.gid, .peer_gid = g, .ct = UINT32_MAX, .trigger = UINT32_MAX,
				 .counter = UINT32_MAX, .waited_ns = gone ? silent : stuck,
				 .psn_acked = p->acked_psn, .psn_next = p->next_psn, .retransmits = p->retx};
		const ct_msg_t *m = oldest_to(e, p);
		int len = snprintf(ev.text, sizeof(ev.text), "device %u: peer device %u %s %llu ms (timeout %llu ms): %s",
				   e->attr.gid, g, gone ? "silent for" : "acknowledged nothing for",
				   (unsigned long long)(ev.waited_ns / 1000000),
				   (unsigned long long)(e->timeout_ns / 1000000), ev.reason);
		len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
				"; psn acked %u of %u sent, %llu retransmits", p->acked_psn, p->next_psn,
				(unsigned long long)p->retx);
		if (m) {
			ev.op_name = kind_name(m->kind);
			ev.bytes = m->len;
			ev.msg_id = m->msg_id;
			ev.trigger = m->trig;
			ev.threshold = m->thresh;
			ev.counter = m->counter;
			if (m->counter != TM_NONE)
				ev.counter_value = tm_counter_read(e->attr.tm, m->counter);
			len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
					"; oldest: %s of %llu B, msg %u, psn %u..%u", ev.op_name,
					(unsigned long long)m->len, m->msg_id, m->first_psn, m->last_psn);
			if (m->trig != TM_NONE)
				len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
						", fired by trigger %u at %llu", m->trig, (unsigned long long)m->thresh);
			if (m->counter != TM_NONE)
				len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
						", completion counter %u expected %llu found %llu", m->counter,
						(unsigned long long)ev.counter_value + 1,
						(unsigned long long)ev.counter_value);
		}
		/* counted, and told, before the operations fail: a waiter they release sees both */
		ct_stat_add(&e->st.peers_dead, gone);
		if (gone && e->attr.on_peer_lost)
			e->attr.on_peer_lost(e->attr.on_peer_lost_arg, &ev);
		ev.n_ops = ct_peer_fail(e, g, ev.status, NULL);
		/* and what this device waits on from it: the counters its signals set */
		for (uint32_t i = 0; gone && e->attr.fail_signals && i < CT_SIG_RECENT; i++)
			if (p->sig_recent[i])
				tm_counter_fail(e->attr.tm, p->sig_recent[i] - 1, ev.status);
		/* the device aborted for it (on_peer_lost): now that the failures are recorded, wake
		 * every other wait */
		if (gone && tm_region_status(e->attr.tm) != GICE_OK)
			tm_region_abort(e->attr.tm, ev.status);
		if (len < (int)sizeof(ev.text))
			snprintf(ev.text + len, sizeof(ev.text) - (size_t)len, "; %u operation(s) failed with %s", ev.n_ops,
				 gice_status_name(ev.status));
		gice_log(ev.n_ops ? GICE_LOG_ERROR : GICE_LOG_WARN, "watchdog", "%s", ev.text);
		if (cb)
			cb(&ev, arg);
		events++;
	}
	ct_link_unlock(e);
	return events;
}

/* Device closing: tell every peer, so they stop waiting for us (best effort). Not where
 * sending to a peer that has closed may crash (shm): a concurrent close cannot be ruled out;
 * those peers learn it from the silence. */
void ct_link_bye(ct_engine_t *e)
{
	if (e->attr.ep->closed_peer_unsafe)
		return;
	ct_link_lock(e);
	for (uint32_t g = 0; g < e->max_peers; g++)
		if (e->peers[g].present && !e->peers[g].dead && g != e->attr.gid)
			(void)ct_send_ctrl(e, g, CT_PKT_BYE, 0, 0, 0);
	ct_link_unlock(e);
}

/* Engine teardown (threads stopped): every live message completes with GICE_ERR_CANCELED. */
void ct_link_cancel_all(ct_engine_t *e)
{
	uint32_t n = e->attr.n_cts * CT_MSGS_PER_CT + CT_RESP_MSGS;

	for (uint32_t i = 0; i < n; i++) {
		ct_msg_t *m = &e->msgs[i];
		if (!m->live)
			continue;
		m->live = 0;
		if (m->kind <= MK_FENCE) {
			ct_complete_counter(e, m->counter, GICE_ERR_CANCELED);
			ct_retire(e, m->owner, m->ticket);
		}
	}
}
