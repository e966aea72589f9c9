/* ct_link_tx.c: the link's sending side — the MPG takes new messages from the CTs' rings
 * (fences wait for their peer), schedules them by QoS weighted round robin, one MTU packet at a
 * time round robin over a class's messages within the peer's credits and congestion window, and
 * keeps each packet for retransmission; control packets (ACK, heartbeat, BYE) and sequenced
 * responses (get data, atomic results, PUT_DONE, NACK) go out here too. Packets reach the fabric
 * through ct_link_xmit.c; small puts share packets through ct_link_puts.c. Runs under the link
 * lock. */
#include "emu/ct_engine/ct_internal.h"

#include <string.h>

/* p owes no ACK any more (one went out, or the peer is gone). */
void ct_ack_owed_clear(ct_engine_t *e, ct_peer_t *p)
{
	p->ack_soon = 0;
	if (p->ack_unsent) {
		p->ack_unsent = 0;
		/* out of the list: the last one takes its place */
		uint32_t n = atomic_load_explicit(&e->acks_delayed, memory_order_relaxed) - 1, last = e->dack_peers[n];
		e->dack_peers[p->dack_pos - 1] = last;
		e->peers[last].dack_pos = p->dack_pos;
		p->dack_pos = 0;
		atomic_store_explicit(&e->acks_delayed, n, memory_order_relaxed);
	}
}

/* An ACK went out to p, alone or riding on a packet: nothing owed, nothing to retry. */
void ct_ack_sent(ct_engine_t *e, ct_peer_t *p)
{
	ct_ack_owed_clear(e, p);
	if (p->ack_due) {
		p->ack_due = 0;
		e->acks_pending--;
	}
}

int ct_send_ctrl(ct_engine_t *e, uint32_t gid, uint8_t op, uint32_t psn, uint64_t value, uint64_t aux)
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

int ct_ack_rides(const ct_peer_t *p)
{
	return p->ack_unsent && !p->nack_unsent && !sack_bits(p);
}

void ct_send_ack(ct_engine_t *e, uint32_t gid)
{
	ct_peer_t *p = &e->peers[gid];

	/* An ACK covering a failed message must not overtake its NACK: hold it while NACKs to this
	 * peer wait for a psn. It carries our next psn towards the peer, so the peer completes the
	 * messages it covers only after it has everything we sent before it (NACKs included). */
	if (p->nack_unsent == 0 &&
	    ct_send_ctrl(e, gid, CT_PKT_ACK, p->rx_next_psn, p->next_psn, sack_bits(p)) == GICE_OK) {
		ct_stat_link(&e->st[CT_STAT_acks_sent], 1);
		ct_ack_sent(e, p);
	} else if (!p->ack_due) {
		p->ack_due = 1;
		e->acks_pending++;
	}
}

/* A NACK is a sequenced response (retransmitted like data until acked). */
void ct_send_nack(ct_engine_t *e, uint32_t gid, uint32_t msg_id, int status)
{
	ct_msg_t *m = ct_queue_response(e, MK_NACK, gid, 0, msg_id, 0, status);

	if (!m) {
		/* its peer holds its share of the pool (it does not acknowledge): rate-limited */
		uint64_t n = e->n_refused++;
		if (CT_LOG_DUE(n))
			gice_error("ct", "device %u: no response entry for the NACK of message %u to device %u (%s): "
				   "not sent; device %u holds %u of its %u (%llu refused so far)", e->attr.gid, msg_id,
				   gid, gice_status_name(status), gid, e->peers[gid].resp_held, e->resp_share,
				   (unsigned long long)n + 1);
		return;
	}
	ct_stat_add(e, CT_STAT_nacks_sent, 1);
	m->nack_unsent = 1;
	e->peers[gid].nack_unsent++;
}

/* A NACK got its psn (or will never be sent): ACKs to its peer may go again. */
void ct_nack_done(ct_engine_t *e, ct_msg_t *m)
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

int ct_send_seq(ct_engine_t *e, ct_peer_t *p, ct_hdr_t *h, int may_piggy, const void *payload, uint32_t plen,
		uint64_t poff)
{
	uint8_t buf[CT_HDR_BYTES];
	/* An ACK we owe this peer rides along when it needs no selective part and no NACK waits
	 * for a psn: a reply carries the ack of the request. */
	int piggy = may_piggy && ct_ack_rides(p), rc;

	if (piggy) {
		h->flags |= CT_HF_ACK;
		h->ack = p->rx_next_psn;
	}
	/* keep the packet until it is acked: a retransmission rebuilds it from here */
	ct_txrec_t *tr = &p->tx[h->psn & p->tx_mask];
	ct_proto_build(h, tr->hdr);
	memcpy(buf, tr->hdr, sizeof(buf));
	if ((rc = ct_xmit(e, p, buf, payload, plen)))
		return rc;
	if (piggy) {
		ct_stat_link(&e->st[CT_STAT_acks_piggybacked], 1);
		ct_ack_sent(e, p);
	}
	tr->poff = poff;
	if (poff == CT_POFF_GRANT) /* kept with the header: a retransmission sends it again */
		memcpy(tr->grant, payload, CT_GRANT_BYTES);
	tr->plen = plen;
	tr->tries = 1;
	tr->sacked = 0;
	tr->t_tx = p->t_tx;
	if (p->next_psn == p->acked_psn)
		p->t_progress = p->t_tx; /* the ack clock starts with the first packet outstanding */
	p->next_psn++;
	ct_stat_add_peer(e, p, CT_STAT_tx_pkts, 1);
	ct_stat_add_peer(e, p, CT_STAT_tx_bytes, poff == CT_POFF_GRANT ? 0 : plen);
	return GICE_OK;
}

/* Send the next packet of message idx. */
static int send_pkt(ct_engine_t *e, uint32_t idx)
{
	ct_msg_t *m = &e->msgs[idx];
	ct_peer_t *p = &e->peers[m->peer];
	ct_hdr_t h = {.magic = CT_PROTO_MAGIC, .version = CT_PROTO_VERSION, .qos = m->qos, .src_gid = e->attr.gid,
		      .dst_gid = m->peer, .conn_id = m->req.conn, .rkey = m->req.rkey, .roff = m->req.roff};
	uint8_t gbuf[CT_GRANT_BYTES];
	fab_mr_info_t grant = {0, 0};
	const void *payload = NULL;
	uint32_t plen = 0;
	int rc;

	if (gice_unlikely(p->dead)) {
		/* a dead peer acks nothing: fail the message now */
		if (!m->status)
			m->status = p->dead_status;
		m->need = 0;
		ct_nack_done(e, m);
		return CT_SEND_DONE;
	}
	if (ct_tx_window_full(e, p))
		return CT_SEND_BLOCKED;
	if (m->state == MS_READY) { /* its first packet: number it */
		if (m->kind <= MK_AMO) {
			if (p->next_msg_id - p->done_upto >= CT_PEER_WIN)
				return CT_SEND_BLOCKED;
			m->msg_id = p->next_msg_id++;
			p->by_id[m->msg_id & (CT_PEER_WIN - 1)] = idx + 1;
			/* a large put or get moves by one remote read (or plane copy) once the peer
			 * has validated the range; a put then completes on the target's PUT_DONE, like
			 * a get on its data */
			m->rndv = (uint8_t)ct_rndv_choose(e, p, m);
			if (m->rndv)
				ct_stat_add(e, CT_STAT_rndv_ops, 1);
			m->need = NEED_ACK | (m->kind == MK_PUT && !m->rndv ? 0 : NEED_RESP);
		} else {
			m->need = NEED_ACK;
		}
		m->state = MS_SENDING;
	}
	h.msg_id = m->msg_id;
	if (m->sent == 0)
		h.flags |= CT_HF_FIRST;
#define RNDV_(kind) (0x80 | (kind)) /* the rendezvous form of a kind */
	switch (m->rndv ? RNDV_(m->kind) : m->kind) {
	case RNDV_(MK_PUT): /* rendezvous put: announce it; the target reads the bytes with the
			     * grant (over the provider) or copies them from aux (on the plane: no
			     * grant) */
		h.op = CT_PKT_PUT_RTS;
		h.msg_len = (uint32_t)m->req.len;
		h.aux = m->req.src_off;
		if (!p->map) {
			rc = ct_grant_find(e, m->req.src_off, m->req.len, &grant);
			if (rc) { /* deregistered since it was queued (ct_rndv_choose found it) */
				if (!m->status)
					m->status = rc;
				m->need = 0;
				ct_nack_done(e, m);
				return CT_SEND_DONE;
			}
			ct_proto_grant_build(grant.key, grant.addr, gbuf);
			payload = gbuf;
			plen = CT_GRANT_BYTES;
			h.payload_len = plen;
		}
		if (m->req.flags & CT_RF_SIGNAL) {
			h.flags |= ct_sig_flags(&m->req);
			h.sig_id = m->req.sig_id;
			h.value = m->req.value;
		}
		break;
	case RNDV_(MK_GET): /* rendezvous get: ask; we read the bytes where GET_GO says */
		h.op = CT_PKT_GET_RNDV;
		h.value = m->req.len;
		break;
	case RNDV_(MK_GET_RESP): /* the range of get aux is validated: the data is at value (the
				  * plane: no grant), or where the grant of its region says */
		h.op = CT_PKT_GET_GO;
		h.msg_len = (uint32_t)m->req.len;
		h.value = m->req.value;
		h.aux = m->aux;
		if (!p->map && !m->status && ct_grant_find(e, m->req.value, m->req.len, &grant))
			m->status = GICE_ERR_UNREGISTERED; /* deregistered since it was validated */
		h.status = m->status;
		if (!p->map && !m->status) {
			/* its read needs our progress until its GET_DONE, which a GET_GO with a grant
			 * always gets (ct_rx_get_go) */
			ct_serve_start(e, p);
			ct_proto_grant_build(grant.key, grant.addr, gbuf);
			payload = gbuf;
			plen = CT_GRANT_BYTES;
			h.payload_len = plen;
		}
		break;
	case MK_PUT:
	case MK_GET_RESP:
		h.op = m->kind == MK_PUT ? CT_PKT_PUT : CT_PKT_GET_RESP;
		plen = (uint32_t)GICE_MIN(m->req.len - m->sent, (uint64_t)m->mtu);
		payload = e->base + m->req.src_off + m->sent;
		h.msg_len = (uint32_t)m->req.len;
		h.moff = (uint32_t)m->sent;
		h.payload_len = plen;
		if (m->kind == MK_PUT && (m->req.flags & CT_RF_SIGNAL)) {
			h.flags |= ct_sig_flags(&m->req);
			h.sig_id = m->req.sig_id;
			h.value = m->req.value;
		}
		if (m->kind == MK_GET_RESP) {
			h.aux = m->aux;
			h.status = m->status;
		}
		break;
	case MK_GET:
		h.op = CT_PKT_GET_REQ;
		h.value = m->req.len;
		h.aux = m->mtu + CT_HDR_BYTES; /* largest response packet we take */
		break;
	case MK_AMO:
		h.op = CT_PKT_ATOMIC_REQ;
		h.value = m->req.value;
		if (m->aux == CT_OP_AMO_CSWAP) {
			h.flags |= CT_HF_CSWAP;
			h.aux = m->req.compare;
		}
		break;
	case MK_AMO_RESP:
	case MK_PUT_DONE:
		h.op = m->kind == MK_AMO_RESP ? CT_PKT_ATOMIC_RESP : CT_PKT_PUT_DONE;
		h.value = m->req.value;
		h.aux = m->aux;
		h.status = m->status;
		break;
	case MK_NACK:
		h.op = CT_PKT_NACK;
		h.msg_id = (uint32_t)m->aux;
		h.status = m->status;
		break;
	}
#undef RNDV_
	/* get and atomic requests, rendezvous messages and atomic responses are one packet; data
	 * messages end at len */
	int last = m->rndv || (m->kind != MK_PUT && m->kind != MK_GET_RESP) || m->sent + plen >= m->req.len;
	if (last)
		h.flags |= CT_HF_LAST;
	h.psn = p->next_psn;
	/* an ACK must not overtake a NACK: none rides on one */
	rc = ct_send_seq(e, p, &h, m->kind != MK_NACK, payload, plen,
			 payload == gbuf ? CT_POFF_GRANT : payload ? (uint64_t)((const uint8_t *)payload - e->base) : 0);
	if (rc == GICE_ERR_AGAIN) {
		ct_stat_add(e, CT_STAT_tx_again, 1);
		return CT_SEND_FULL;
	}
	if (rc) {
		gice_error("ct", "send of %s to device %u failed: %s", ct_pkt_name(h.op), m->peer, gice_status_name(rc));
		if (!m->status)
			m->status = rc;
		/* count the packet as sent: the peer will never ack it, so fail the message now */
		m->need = 0;
		ct_nack_done(e, m);
		return CT_SEND_DONE;
	}
	if (payload == gbuf)
		plen = 0; /* a grant carries no message bytes */
	if (m->sent == 0 && !m->t_first_tx) {
		m->t_first_tx = GICE_MAX(p->t_tx, m->t_pickup); /* a held clock: never before pickup */
		m->first_psn = h.psn;
	}
	ct_nack_done(e, m);
	m->sent += plen;
	if (!last)
		return CT_SEND_OK;
	m->last_psn = h.psn;
	return CT_SEND_DONE;
}

/* Move new messages from the CTs' rings (and responses) onto the class lists. A fence holds its
 * ring until every message to its peer is complete. The rings are read only when a tile has
 * published since the last look (mpg_new: taking the flag, acquire, makes every tail stored
 * before it visible); a fence left waiting keeps the flag up for the next pass. */
static int pull_rings(ct_engine_t *e)
{
	int n = 0, rings = atomic_load_explicit(&e->mpg_new, memory_order_relaxed) &&
			   atomic_exchange_explicit(&e->mpg_new, 0, memory_order_acquire);

	for (uint32_t q = 0; q < CT_QOS_CLASSES; q++) {
		for (uint32_t c = 0; rings && c < e->attr.n_cts; c++) {
			ct_ring_t *r = &e->tiles[c].mpg[q];
			uint32_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
			/* acquire: the message entries the CT filled before publishing tail */
			uint32_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
			for (; head != tail; head++) {
				uint32_t idx = r->slot[head & (CT_MSGS_PER_CT - 1)];
				ct_msg_t *m = &e->msgs[idx];
				if (m->kind == MK_FENCE) {
					if (e->peers[m->peer].inflight) {
						atomic_store_explicit(&e->mpg_new, 1, memory_order_relaxed);
						break;
					}
					ct_complete_msg(e, idx);
				} else {
					e->peers[m->peer].inflight++;
					m->state = MS_READY;
					ct_fifo_push(e, &e->act_head[q], &e->act_tail[q], idx);
					e->act_len[q]++;
				}
				n++;
			}
			atomic_store_explicit(&r->head, head, memory_order_release);
		}
		while (e->resp_head[q] != CT_NIL) {
			uint32_t idx = ct_fifo_pop(e, &e->resp_head[q], &e->resp_tail[q]);
			e->msgs[idx].state = MS_READY;
			ct_fifo_push(e, &e->act_head[q], &e->act_tail[q], idx);
			e->act_len[q]++;
			n++;
		}
	}
	return n;
}

/* MPG: weighted round robin over QoS classes, each sending up to its weight in packets per
 * turn, round robin over its messages, one packet at a time; messages whose peer has no credit
 * wait their turn (blocked: a round of the class's messages in a row that sent nothing ends its
 * turn). A class with one message sends its weight of it too: one packet per message per turn
 * made one bulk put of class 0 and one of class 3 share the link 1:1 whatever the weights
 * (tests/test_qos.c). One turn; *full: the fabric took no more. */
static int send_some(ct_engine_t *e, int *full)
{
	int sent = 0;

	for (uint32_t turn = 0; turn < CT_QOS_CLASSES; turn++) {
		uint32_t q = (e->wrr_class + turn) % CT_QOS_CLASSES;
		uint32_t budget = e->weights[q], blocked = 0;
		while (budget && blocked < e->act_len[q]) {
			uint32_t idx = ct_fifo_pop(e, &e->act_head[q], &e->act_tail[q]);
			ct_msg_t *m = &e->msgs[idx];
			int rc = ct_puts_start(e, q, idx) ? ct_puts_send(e, q, idx) : send_pkt(e, idx);
			if (rc == CT_SEND_FULL) {
				/* back at the head: keep its place */
				m->next = e->act_head[q];
				e->act_head[q] = idx;
				if (e->act_tail[q] == CT_NIL)
					e->act_tail[q] = idx;
				e->wrr_class = q;
				*full = 1;
				return sent;
			}
			if (rc == CT_SEND_DONE) {
				ct_peer_t *p = &e->peers[m->peer];
				e->act_len[q]--;
				if (m->need == 0) { /* failed at send */
					ct_complete_msg(e, idx);
				} else {
					m->state = MS_WAITING;
					ct_fifo_push(e, &p->wait_head, &p->wait_tail, idx);
				}
			} else if (rc != CT_SEND_TAKEN) {
				ct_fifo_push(e, &e->act_head[q], &e->act_tail[q], idx);
			}
			if (rc == CT_SEND_BLOCKED) {
				blocked++;
			} else {
				blocked = 0;
				budget--;
				sent++;
			}
		}
	}
	e->wrr_class = (e->wrr_class + 1) % CT_QOS_CLASSES;
	return sent;
}

int ct_resp_room(const ct_engine_t *e, uint32_t gid)
{
	return e->resp_free != CT_NIL && e->peers[gid].resp_held < e->resp_share;
}

/* Queue a response (get data, atomic old value, rendezvous done, NACK) to request msg_id of
 * device gid; the caller fills in what else its kind needs. NULL when no response entry is free
 * or the peer holds its share of them (a NACK: its share and CT_RESP_NACK_EXTRA more), counted
 * in resp_refused. */
ct_msg_t *ct_queue_response(ct_engine_t *e, uint8_t kind, uint32_t gid, uint8_t qos, uint32_t msg_id,
			     uint64_t value, int status)
{
	uint32_t ri = e->resp_free;
	ct_peer_t *p = &e->peers[gid];

	if (ri == CT_NIL || p->resp_held >= e->resp_share + (kind == MK_NACK ? CT_RESP_NACK_EXTRA : 0)) {
		ct_stat_add(e, CT_STAT_resp_refused, 1);
		return NULL;
	}
	p->resp_held++;
	e->resp_free = e->msgs[ri].next;
	ct_msg_t *m = &e->msgs[ri];
	memset(m, 0, sizeof(*m));
	m->owner = CT_NIL;
	m->state = MS_QUEUED;
	m->kind = kind;
	m->peer = gid;
	m->qos = qos < CT_QOS_CLASSES ? qos : CT_QOS_CLASSES - 1;
	m->mtu = e->mtu_max - CT_HDR_BYTES;
	m->aux = msg_id;
	m->req.value = value;
	m->status = status;
	m->ticket = UINT64_MAX;
	m->req.counter = TM_NONE;
	atomic_fetch_add_explicit(&e->msgs_adj, 1, memory_order_relaxed);
	ct_fifo_push(e, &e->resp_head[m->qos], &e->resp_tail[m->qos], ri);
	return m;
}

/* Whether the MPG has nothing to look at: no tile published, no response, ACK or message
 * waiting (the pass of a waiting kernel, one per turn of its loop, mostly finds that). */
static int mpg_idle(const ct_engine_t *e)
{
	if (atomic_load_explicit(&e->mpg_new, memory_order_relaxed) || e->acks_pending)
		return 0;
	for (uint32_t q = 0; q < CT_QOS_CLASSES; q++)
		if (e->act_len[q] || e->resp_head[q] != CT_NIL)
			return 0;
	return 1;
}

/* Turns of the round robin a pass may run (GICE_QOS_WEIGHTS packets of each class per turn):
 * what one pass sends, at most. One turn (8 packets of class 0) sent a burst of small puts in
 * bundles of 8, each paying a send, a kick and an ACK back; 4 turns gave gice-bench rate 8 B
 * over shm 2.1-2.4 -> 2.6-2.7 M puts/s (2, 3 turns: 2.5-2.6; 6: 2.1-2.3, the peer then takes
 * the burst in at once instead of while we send), over tcp 0.43 -> 0.52-0.68 M; 4 KiB the same. */
#define MPG_TURNS 4

/* Send what is queued (new messages, responses, held ACK/NACKs) up to the MPG's budget. */
int ct_send_pending(ct_engine_t *e)
{
	if (mpg_idle(e))
		return 0;
	/* credits the ACK left for this pass frees (ct_ack_in_defer): before sending, if its
	 * peer has none without it */
	uint32_t ackin = atomic_load_explicit(&e->ackin_gid, memory_order_relaxed);
	if (ackin != CT_NIL && ct_tx_window_full(e, &e->peers[ackin]))
		ct_ack_in_drain(e);
	int work = pull_rings(e), full = 0, sent = 1;
	/* one clock read stamps the packets of this pass (their t_tx: RTT samples, the trace's
	 * first transmission, heartbeats), as one stamps all that a poll found (link_pass) */
	int hold = !gice_clock_held;

	if (hold)
		gice_clock_hold();
	if (e->acks_pending)
		flush_ctrl(e);
	for (int turn = 0; turn < MPG_TURNS && sent && !full; turn++)
		work += sent = send_some(e, &full);
	if (hold)
		gice_clock_release();
	return work;
}
