/* ct_link_rel.c: the link's reliability on the sending side — ACK processing (cumulative and
 * selective), retransmission timeouts (RFC 6298 estimate, backoff), fast retransmit and the
 * congestion window. Retransmission is on in reliable mode (GICE_RELIABLE); ACKs always
 * complete messages. Runs under the link lock. */
#include "emu/ct_engine/ct_internal.h"

#include <string.h>

/* Send packet psn to peer again, from its record. */
static int retransmit(ct_engine_t *e, ct_peer_t *p, uint32_t psn, uint64_t now)
{
	ct_txrec_t *tr = &p->tx[psn & p->tx_mask];
	uint8_t buf[CT_HDR_BYTES];
	int rc;

	const void *payload = !tr->plen ? NULL : tr->poff == CT_POFF_GRANT ? tr->grant : e->base + tr->poff;

	if (tr->plen && tr->poff == CT_POFF_PUTS && !(payload = ct_puts_rebuild(e, p, tr->hdr, tr->plen))) {
		gice_error("ct", "device %u: the puts of packet %u to device %u are gone before its ACK: not sent "
			   "again", e->attr.gid, psn, (uint32_t)(p - e->peers));
		return GICE_ERR_NOT_FOUND;
	}
	memcpy(buf, tr->hdr, sizeof(buf));
	rc = ct_xmit(e, p, buf, payload, tr->plen);
	if (rc == GICE_OK) {
		tr->tries++;
		tr->t_tx = now;
		p->retx++;
		ct_stat_add_peer(e, p, CT_STAT_retransmits, 1);
	} else if (rc == GICE_ERR_AGAIN) {
		ct_stat_add(e, CT_STAT_tx_again, 1);
	}
	return rc;
}

static void rto_update(ct_engine_t *e, ct_peer_t *p, uint64_t rtt)
{
	/* RFC 6298 with alpha 1/8, beta 1/4 */
	if (!p->srtt) {
		p->srtt = rtt;
		p->rttvar = rtt / 2;
	} else {
		uint64_t d = rtt > p->srtt ? rtt - p->srtt : p->srtt - rtt;
		p->rttvar = (3 * p->rttvar + d) / 4;
		p->srtt = (7 * p->srtt + rtt) / 8;
	}
	p->rto = GICE_MAX(e->rto_min_ns, GICE_MIN(e->rto_max_ns, p->srtt + 4 * p->rttvar));
	ct_rtt_sample(e, p, rtt, p->srtt);
}

static uint64_t peer_rto(const ct_engine_t *e, const ct_peer_t *p)
{
	uint64_t rto = p->rto ? p->rto : e->rto_min_ns * 4;

	return GICE_MIN(e->rto_max_ns, rto << GICE_MIN(p->backoff, 10u));
}

/* Congestion control (reliable mode only; a reliable provider does its own): additive increase,
 * multiplicative decrease of the window of packets in flight, as TCP Reno. A datagram socket
 * overflows silently when too much is in flight; the window finds what the path holds. */
static void cwnd_grow(ct_engine_t *e, ct_peer_t *p, uint32_t acked)
{
	if (p->cwnd < p->ssthresh) {
		p->cwnd += acked; /* slow start */
	} else {
		p->cwnd_frac += acked;
		while (p->cwnd_frac >= p->cwnd) {
			p->cwnd_frac -= p->cwnd;
			p->cwnd++;
		}
	}
	if (p->cwnd > e->credits)
		p->cwnd = e->credits;
}

static void cwnd_cut(ct_engine_t *e, ct_peer_t *p, int timeout)
{
	/* never below the receiver's ack interval, or a full window would wait for a timeout */
	uint32_t floor = GICE_MIN(GICE_MAX(e->ack_every, 4u), e->credits);

	if (!timeout && ct_psn_before(p->acked_psn, p->recover))
		return; /* one cut per window of loss */
	uint32_t flight = p->next_psn - p->acked_psn;
	p->ssthresh = GICE_MAX(flight / 2, floor);
	p->cwnd = timeout ? floor : p->ssthresh;
	p->cwnd_frac = 0;
	p->recover = p->next_psn;
}

/* Complete the waiting messages whose every packet is below cum. One clock read stamps them all
 * (their traces' ends), as in a pass that took packets in: an ACK left for the next pass
 * (ct_ack_in_drain) comes to it with no clock held, and a window's ACK completes dozens. */
void ct_complete_upto(ct_engine_t *e, ct_peer_t *p, uint32_t cum)
{
	ct_adds_t adds;
	int hold = 0;

	ct_adds_begin(e, &adds);
	while (p->wait_head != CT_NIL && ct_psn_before(e->msgs[p->wait_head].last_psn, cum)) {
		uint32_t idx = ct_fifo_pop(e, &p->wait_head, &p->wait_tail);
		ct_msg_t *m = &e->msgs[idx];
		m->need &= (uint8_t)~NEED_ACK;
		if (m->need)
			continue;
		if (!hold && !gice_clock_held) {
			hold = 1;
			gice_clock_hold();
		}
		ct_complete_msg(e, idx);
	}
	ct_adds_end(&adds);
	if (hold)
		gice_clock_release();
}

/* An ACK: cum (every psn below it arrived), fence (the acker's next psn towards us) and sack
 * (bit i: psn cum + 1 + i arrived). Credits and retransmission state move at once; messages
 * complete only once we have received everything the acker sent before the ACK, so a NACK (or
 * response) sent before it is always seen first, whatever the fabric reorders or drops. */
void ct_rx_ack(ct_engine_t *e, ct_peer_t *p, uint32_t cum, uint32_t fence, uint64_t sack, uint64_t t_rx)
{
	uint64_t now = t_rx; /* its round trip ends at its arrival, however late it is processed */

	if (ct_psn_before(p->next_psn, cum)) {
		uint64_t n = ct_stat_add(e, CT_STAT_rx_bad, 1);
		if (CT_LOG_DUE(n)) /* per packet: rate-limited */
			gice_error("ct", "device %u: ack for psn %u from device %u, which we sent only %u packets: ignored "
				   "(%llu packets dropped so far)", e->attr.gid, cum, (uint32_t)(p - e->peers), p->next_psn,
				   (unsigned long long)n + 1);
		return;
	}
	if (ct_psn_before(p->acked_psn, cum)) {
		ct_txrec_t *last = &p->tx[(cum - 1) & p->tx_mask];
		if (last->tries == 1 && now > last->t_tx) /* Karn: no samples from retransmissions */
			rto_update(e, p, now - last->t_tx);
		else if (last->tries > 1)
			ct_stat_add_peer(e, p, CT_STAT_rtt_karn_skips, 1);
		cwnd_grow(e, p, cum - p->acked_psn);
		p->acked_psn = cum;
		p->backoff = 0;
		p->t_progress = now;
		tm_progress(e->attr.tm); /* waits on this device measure stalls, not durations */
	}
	/* an ACK older than one seen (the fabric may reorder them) says nothing new about the
	 * window: its selective part could name slots reused by newer packets */
	if (sack && !ct_psn_before(cum, p->acked_psn) && atomic_load_explicit(&e->reliable, memory_order_relaxed)) {
		uint32_t n = 0;
		for (uint32_t i = 0; i < 64; i++) {
			uint32_t psn = cum + 1 + i;
			if (!ct_psn_before(psn, p->next_psn))
				break;
			if ((sack >> i) & 1)
				p->tx[psn & p->tx_mask].sacked = 1;
			n++;
		}
		/* fast retransmit: a packet is lost once three packets sent after it have arrived
		 * (dupthresh); send it again at most once per retransmission timeout */
		uint32_t above = 0, cut = 0;
		uint64_t rto = peer_rto(e, p);
		for (uint32_t i = n + 1; i-- > 0;) {
			uint32_t psn = cum + i;
			ct_txrec_t *tr = &p->tx[psn & p->tx_mask];
			if (tr->sacked && psn != cum) {
				above++;
				continue;
			}
			if (above < 3 || (tr->tries > 1 && now - tr->t_tx < rto))
				continue;
			if (!cut++)
				cwnd_cut(e, p, 0);
			if (retransmit(e, p, psn, now) != GICE_OK)
				break;
			ct_stat_add(e, CT_STAT_fast_retransmits, 1);
		}
	}
	if (!ct_psn_before(p->rx_next_psn, fence)) {
		ct_complete_upto(e, p, cum);
	} else if (!p->ack_held || ct_psn_before(p->held_cum, cum)) {
		p->ack_held = 1;
		p->held_cum = cum;
		p->held_fence = fence;
	}
}

/* An ACK riding on a packet completes our messages; the packet's own data, landed in the same
 * pass, is what a waiting kernel wants first (the pass is its wait's: PASS_WAIT, ct_link.c; CT
 * 0's and the stream threads' process it at once). Its completions (the messages' ends, their counters
 * and entries) would come between that kernel's signal and its reply, on the
 * round trip of a ping-pong; left for the next pass, they come after the reply's send instead
 * (ct_link.c). That pass is the kernel's next request's or wait's, its block's end
 * (ct_engine_block_end), or CT 0's: within GICE_CT_POLL_US when no kernel comes back to the
 * link. What depends on the ACK meanwhile sees it: the cork counts it (ct_acked_psn); a send
 * that lacks its credits, a timer, the watchdog and a peer's failure process it first. */
void ct_ack_in_defer(ct_engine_t *e, uint32_t gid, uint32_t cum, uint32_t fence, uint64_t t_rx)
{
	ct_ack_in_drain(e);
	e->ackin_cum = cum;
	e->ackin_fence = fence;
	e->ackin_t = t_rx;
	atomic_store_explicit(&e->ackin_gid, gid, memory_order_relaxed);
}

int ct_ack_in_drain(ct_engine_t *e)
{
	uint32_t gid = atomic_load_explicit(&e->ackin_gid, memory_order_relaxed);

	if (gid == CT_NIL)
		return 0;
	atomic_store_explicit(&e->ackin_gid, CT_NIL, memory_order_relaxed);
	ct_rx_ack(e, &e->peers[gid], e->ackin_cum, e->ackin_fence, 0, e->ackin_t);
	return 1;
}

/* Without retransmission (a reliable provider), a same-host peer whose ACK of our oldest packet
 * is overdue: it is owed there, and its kernel may have stopped waiting right after the packet
 * landed, its CT 0 asleep until its next poll (ct_tile.c). Poke it (tm_doorbell_kick): a poke
 * rings its CT 0 when no thread there is awake, and makes its next pass poll. Once per peer per
 * ack delay; the caller comes every quarter of GICE_RTO_MIN_US. */
int ct_poke_silent(ct_engine_t *e, uint64_t now)
{
	uint64_t delay = e->rto_min_ns / 4;
	int n = 0;

	for (uint32_t g = 0; g < e->max_peers; g++) {
		ct_peer_t *p = &e->peers[g];
		if (!p->present || p->dead || !p->tm || p->acked_psn == p->next_psn)
			continue;
		if (now - p->tx[p->acked_psn & p->tx_mask].t_tx < 2 * delay || now - p->t_poke < delay)
			continue;
		p->t_poke = now;
		ct_kick(e, p, 0);
		n++;
	}
	return n;
}

/* Retransmission timeouts: the oldest unacked packet of a peer waited past its RTO: send every
 * packet the receiver has not selectively acked again, and back off. */
int ct_check_rto(ct_engine_t *e, uint64_t now)
{
	int n = 0;

	for (uint32_t g = 0; g < e->max_peers; g++) {
		ct_peer_t *p = &e->peers[g];
		if (!p->present || p->dead || p->acked_psn == p->next_psn)
			continue;
		ct_txrec_t *oldest = &p->tx[p->acked_psn & p->tx_mask];
		uint64_t rto = peer_rto(e, p);
		if (now - oldest->t_tx < rto)
			continue;
		ct_stat_add(e, CT_STAT_rto_expired, 1);
		p->backoff++;
		cwnd_cut(e, p, 1);
		/* send again the oldest packets the receiver lacks, a window's worth (slow start
		 * restarts from there; selective acks recover the rest) */
		uint32_t budget = p->cwnd;
		for (uint32_t psn = p->acked_psn; psn != p->next_psn && budget; psn++) {
			ct_txrec_t *tr = &p->tx[psn & p->tx_mask];
			/* the cumulative point itself is missing by definition, whatever a sack said */
			if ((tr->sacked && psn != p->acked_psn) || now - tr->t_tx < rto)
				continue;
			if (retransmit(e, p, psn, now) != GICE_OK)
				break;
			budget--;
			n++;
		}
	}
	return n;
}
