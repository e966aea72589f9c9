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

void ct_send_ack(ct_engine_t *e, uint32_t gid)
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
void ct_send_nack(ct_engine_t *e, uint32_t gid, uint32_t msg_id, int status)
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
