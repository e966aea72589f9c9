/* ct_link.c: the device's link — one progress pass (send, poll the fabric, take in what
 * arrived, timers) and message completion. Its parts: ct_link_tx.c (MPG scheduling of messages
 * into MTU packets: QoS weighted round robin, per-peer credits), ct_link_rx.c (the receive path:
 * validate, write, ack, signal), ct_link_rel.c (acks, retransmission, congestion window),
 * ct_link_rndv.c (rendezvous puts) and ct_link_watch.c (failed peers, the link's watchdog).
 * Every function of the link runs under the engine's link lock, taken by whichever CT thread gets
 * it first (ct_link_progress); nothing in it allocates or blocks.
 *
 * Initiator states of a message (enum ct_msg_state, ct_internal.h): QUEUED (in its CT's ring)
 * → READY (on a class list) → SENDING (numbered, cut into packets) → WAITING (all packets out;
 * awaiting the cumulative ack and, for get, atomics and rendezvous, the response) → FREE
 * (counter written, ticket retired, entry freed).
 */
#include "emu/ct_engine/ct_internal.h"

int ct_link_busy(ct_engine_t *e)
{
	/* a delayed ack, a bundle the fabric refused for now, a kick to nudge (ct_kick) or a peer's
	 * read of our memory (ct_serve_start) is link work too: CT 0 keeps polling until it has
	 * gone out */
	return ct_msgs_live(e) != 0 ||
	       atomic_load_explicit(&e->acks_delayed, memory_order_relaxed) != 0 ||
	       atomic_load_explicit(&e->bundle_held, memory_order_relaxed) != 0 ||
	       atomic_load_explicit(&e->n_kick_due, memory_order_relaxed) != 0 ||
	       atomic_load_explicit(&e->serving, memory_order_relaxed) != 0;
}

int ct_link_needs_timer(ct_engine_t *e, int issuing)
{
	/* None for messages in flight to same-host peers, nor the acks we owe them: their answers
	 * ring CT 0 when no one polls (tm_doorbell_kick), and so do their pokes for an overdue ack
	 * (ct_poke_silent). Everything else does: sends and reads of the endpoint's own that the
	 * provider completes only while we poll, a bundle it refused, a kick to nudge at the end of
	 * a peer's lease (ct_kick), a peer's read of our memory, a held endpoint, and the timers of
	 * the reliable mode or the traffic of peers elsewhere (no one counts or pokes there).
	 * issuing: a kernel of the device issues requests (its lease): the passes of its requests
	 * send the bundle it corks, and the ACKs whose arrival would send it ring CT 0 once its
	 * lease ends without it (tm_doorbell_kick) */
	uint8_t busy = atomic_load_explicit(&e->ep_busy, memory_order_relaxed);
	return (issuing ? busy & CT_BUSY_FLIGHT : busy) ||
	       atomic_load_explicit(&e->bundle_held, memory_order_relaxed) ||
	       atomic_load_explicit(&e->n_kick_due, memory_order_relaxed) ||
	       atomic_load_explicit(&e->serving, memory_order_relaxed) ||
	       atomic_load_explicit(&e->attr.ep->held, memory_order_relaxed) ||
	       ((atomic_load_explicit(&e->reliable, memory_order_relaxed) ||
		 atomic_load_explicit(&e->n_remote, memory_order_relaxed)) &&
		(ct_msgs_live(e) ||
		 atomic_load_explicit(&e->acks_delayed, memory_order_relaxed)));
}

int ct_link_nothing_announced(ct_engine_t *e)
{
	return !atomic_load_explicit(&e->n_remote, memory_order_relaxed) &&
	       tm_doorbell_sent(e->attr.tm, 0) == atomic_load_explicit(&e->rx_local, memory_order_acquire) &&
	       tm_doorbell_pokes(e->attr.tm, 0) == atomic_load_explicit(&e->pokes_seen, memory_order_relaxed);
}

/* A pass may leave the provider alone when nothing was announced and the endpoint has nothing
 * of its own in flight (fab_quiet): its poll would find nothing, and it costs locks that the
 * peer's send needs (shm) or a syscall (tcp). A peer read of our memory (tcp needs our
 * progress) and reads waiting for a slot poll regardless. The counts are exact for what they
 * count; every GICE_CT_POLL_EVERY-th pass polls whatever they say, for anything they do not
 * (the provider's own traffic: connection set-up on tcp). */
static int poll_needed(ct_engine_t *e)
{
	if ((e->poll_every && ++e->poll_turn >= e->poll_every) || e->reads_waiting ||
	    atomic_load_explicit(&e->serving, memory_order_relaxed))
		return 1;
	return !ct_link_nothing_announced(e) || !fab_quiet(e->attr.ep);
}

/* ---------------------------------------------------------------- completion */

static void trace_add(ct_engine_t *e, const ct_msg_t *m, uint64_t now)
{
	ct_trace_t *tr = &e->trace[e->trace_n++ % CT_TRACE_RING];

	tr->op = m->kind;
	tr->peer_gid = m->peer;
	tr->bytes = m->req.len;
	tr->t_issue = m->req.t_issue;
	tr->t_pickup = m->t_pickup;
	tr->t_first_tx = m->t_first_tx;
	/* a held clock (common.h) may predate stamps other threads took meanwhile: the stages
	 * stay in order */
	tr->t_complete = GICE_MAX(now, GICE_MAX(m->t_first_tx, m->t_pickup));
	tr->status = m->status;
	tr->msg_id = m->msg_id;
}

void ct_complete_msg(ct_engine_t *e, uint32_t idx)
{
	ct_msg_t *m = &e->msgs[idx];

	if (m->kind <= MK_AMO) {
		ct_peer_t *p = &e->peers[m->peer];
		if (m->state >= MS_SENDING) { /* it had a msg_id */
			p->by_id[m->msg_id & (CT_PEER_WIN - 1)] = 0;
			while (p->done_upto != p->next_msg_id && !p->by_id[p->done_upto & (CT_PEER_WIN - 1)])
				p->done_upto++;
		}
		p->inflight--;
		trace_add(e, m, gice_now_ns());
	}
	if (m->kind <= MK_FENCE) {
		ct_op_counted(e, m->status);
		ct_complete_counter(e, m->req.counter, m->status);
		ct_retire(e, m->owner, m->ticket);
	}
	m->state = MS_FREE;
	ct_live_drop(e);
	ct_msg_release(e, idx);
}

/* ---------------------------------------------------------------- kicks */

/* What a kick or nudge of p's CT 0 left: due, the end of the lease that took it (nudge then). */
static void kicked(ct_engine_t *e, ct_peer_t *p, uint64_t due, int woke)
{
	if (gice_likely(!due)) {
		if (woke)
			ct_stat_add(e, CT_STAT_kicks_woke, 1);
		return;
	}
	ct_stat_add(e, CT_STAT_kicks_leased, 1);
	if (!p->kick_due)
		atomic_fetch_add_explicit(&e->n_kick_due, 1, memory_order_relaxed);
	else if (p->kick_due <= due)
		return; /* an earlier nudge covers this one */
	p->kick_due = due;
	if (!e->kick_next_ns || due < e->kick_next_ns)
		e->kick_next_ns = due;
}

void ct_kick(ct_engine_t *e, ct_peer_t *p, uint32_t n)
{
	int woke;
	uint64_t due = tm_doorbell_kick(p->tm, 0, n, &woke);

	kicked(e, p, due, woke);
}

void ct_nudge(ct_engine_t *e, ct_peer_t *p)
{
	int woke;
	uint64_t due = tm_doorbell_nudge(p->tm, 0, &woke);

	kicked(e, p, due, woke);
}

/* The kicks leases took, at their end: ring the peers whose kernel has not come back since (no
 * one awake there), nudge again those whose lease was renewed. A peer that closed meanwhile needs
 * none. force: every one now, and those a lease still takes are rung (ct_link_settle). */
static void nudge_due(ct_engine_t *e, int force)
{
	uint64_t now = gice_now_ns(), next = 0;
	uint32_t left = 0;

	if (now < e->kick_next_ns && !force)
		return;
	for (uint32_t g = 0; g < e->max_peers; g++) {
		ct_peer_t *p = &e->peers[g];
		int woke = 0;
		if (!p->kick_due)
			continue;
		if (!p->tm || p->dead)
			p->kick_due = 0;
		else if (p->kick_due <= now || force)
			p->kick_due = tm_doorbell_nudge(p->tm, 0, &woke);
		if (p->kick_due && force) {
			woke = tm_doorbell_ring(p->tm, 0);
			p->kick_due = 0;
		}
		if (woke)
			ct_stat_add(e, CT_STAT_kicks_woke, 1);
		if (p->kick_due) {
			left++;
			if (!next || p->kick_due < next)
				next = p->kick_due;
		}
	}
	e->kick_next_ns = next;
	atomic_store_explicit(&e->n_kick_due, left, memory_order_relaxed);
}

/* ---------------------------------------------------------------- progress */

/* Same-host peers we sent to whose link no one polls now (their CT 0 sleeps): ring it, as a NIC
 * raises an interrupt, counting the packets it will find (tm_doorbell_kick). Once per peer per
 * pass, and only once its packets are out: a peer whose packets still wait in the bundle (a
 * kernel's corked burst) is kicked by the pass that sends them. A kick queued outside a pass (a
 * control packet the watchdog sent) waits for the next one, by which time the peer may have
 * closed (its tm cleared: ct_peer_closed). Returns 1 if it kept the peer for later. */
static int kick_one(ct_engine_t *e, uint32_t gid)
{
	ct_peer_t *p = &e->peers[gid];

	if (e->bundle_len && e->bundle_gid == gid)
		return 1;
	p->kick = 0;
	if (p->tm && p->kick_pkts) /* none: its bundle's flush told the peer (ct_bundle_flush) */
		ct_kick(e, p, p->kick_pkts);
	p->kick_pkts = 0;
	return 0;
}

static void kick_peers(ct_engine_t *e)
{
	uint32_t keep = 0;

	if (gice_unlikely(e->kick_overflow)) { /* more peers than the list holds: every one */
		e->kick_overflow = 0;
		for (uint32_t g = 0; g < e->max_peers; g++)
			if (e->peers[g].kick && kick_one(e, g))
				e->kick[keep++] = g; /* the bundle's peer only: one */
		e->n_kick = keep;
		return;
	}
	for (uint32_t i = 0; i < e->n_kick; i++)
		if (kick_one(e, e->kick[i]))
			e->kick[keep++] = e->kick[i];
	e->n_kick = keep;
}

/* For the sleep policy, at the end of a pass: whether what the link sent still needs passes of
 * its own (a corked bundle, kept or not; sends or reads the provider completes only while
 * polled). */
static void note_busy(ct_engine_t *e, int corked)
{
	uint8_t busy = (corked || e->bundle_len ? CT_BUSY_BUNDLE : 0) | (fab_in_flight(e->attr.ep) ? CT_BUSY_FLIGHT : 0);

	if (busy != atomic_load_explicit(&e->ep_busy, memory_order_relaxed))
		atomic_store_explicit(&e->ep_busy, busy, memory_order_relaxed);
}

/* At the end of a pass, for ct_engine_submitted: the bundle left corked, and its room. keep: a
 * push sent the corked bundle of this peer (CT_NIL: none); the cork stays while the peer has
 * packets unacknowledged, empty, so that the rest of the burst joins it too. */
static void note_cork(ct_engine_t *e, uint32_t keep)
{
	uint32_t gid = e->bundle_len && e->bundle_cork ? e->bundle_gid : CT_NIL;

	if (keep != CT_NIL && !e->bundle_len && !e->peers[keep].dead &&
	    e->peers[keep].next_psn != ct_acked_psn(e, &e->peers[keep]))
		gid = keep;

	if (atomic_load_explicit(&e->cork_gid, memory_order_relaxed) != gid)
		atomic_store_explicit(&e->cork_gid, gid, memory_order_relaxed);
	/* the puts that joined the last one are counted as it is replaced (only the link holder
	 * writes bundle_joins) */
	uint64_t room = gid == CT_NIL ? 0 : e->bundle_max - e->bundle_len;
	if (atomic_load_explicit(&e->cork, memory_order_relaxed) == room)
		return; /* a pass of a waiting kernel, mostly: no locked write */
	uint64_t old = atomic_exchange_explicit(&e->cork, room, memory_order_relaxed);
	if (old >> 32)
		ct_stat_link(&e->st[CT_STAT_bundle_joins], old >> 32);
}

/* A pass: full (polls, timers), a look (the same, as the last before a sleep), a waiting
 * kernel's full pass (PASS_WAIT: the ACKs riding on what it takes in are left for the next pass,
 * ct_ack_in_defer), one that only sends, one that also sends the corked bundle. */
enum { PASS_FULL, PASS_LOOK, PASS_WAIT, PASS_SEND, PASS_PUSH };

static int link_pass(ct_engine_t *e, int mode)
{
	fab_event_t ev[16];
	int work, n;

	if (mode != PASS_LOOK && !++e->pass)
		e->pass = 1;
	e->ack_defer = mode == PASS_WAIT;
	/* send first: a new request goes out before this pass pays for polling (a syscall on
	 * socket providers) */
	work = ct_send_pending(e);
	if (gice_unlikely(e->hb_due))
		work += ct_link_heartbeats(e);
	if (mode == PASS_SEND || mode == PASS_PUSH) {
		/* Nagle: a kernel's puts to a peer with earlier packets unacknowledged wait in the
		 * bundle for the next one, up to a full bundle; the first to an idle peer goes at
		 * once. The next full pass sends them (a wait's, or CT 0's: the link is busy), or
		 * a push (ct_link_push), which keeps the cork */
		uint32_t keep = mode == PASS_PUSH && e->bundle_len && e->bundle_cork ? e->bundle_gid : CT_NIL;
		if (keep != CT_NIL)
			ct_stat_link(&e->st[CT_STAT_bundle_pushes], 1);
		if (!e->bundle_cork || mode == PASS_PUSH)
			ct_bundle_flush(e);
		if (e->n_kick || e->kick_overflow)
			kick_peers(e);
		/* the request is out: now what an earlier pass left (ct_ack_in_defer) */
		work += ct_ack_in_drain(e);
		if (gice_unlikely(atomic_load_explicit(&e->n_kick_due, memory_order_relaxed)))
			nudge_due(e, 0);
		if (work || keep != CT_NIL)
			note_busy(e, keep != CT_NIL);
		note_cork(e, keep);
		return work;
	}
	ct_bundle_flush(e); /* before the poll: the peer gets them sooner */
	n = 0;
	int polled = 0;
	/* An earlier pass's ACK (ct_ack_in_defer). In a waiting kernel's pass it may complete what
	 * the kernel waits for (gice-bench rate: a window's puts): the pass ends here, so the
	 * kernel looks at once; the poll, the ACKs it owes and the timers are the next pass's (its
	 * next request's carries them, as ct_engine_stepping says). */
	if (ct_ack_in_drain(e)) {
		work++;
		if (mode == PASS_WAIT)
			goto end;
	}
	polled = poll_needed(e);
	if (polled) {
		/* before the poll: a poke after this load is seen by the next pass */
		atomic_store_explicit(&e->pokes_seen, tm_doorbell_pokes(e->attr.tm, 0), memory_order_relaxed);
		e->poll_turn = 0;
		n = fab_poll(e->attr.ep, ev, GICE_ARRAY_SIZE(ev));
	}
	if (n > 0)
		gice_clock_hold(); /* one clock read stamps all that arrived (common.h) */
	uint64_t coarse = gice_coarse_ns();
	atomic_store_explicit(&e->t_poll, coarse, memory_order_relaxed); /* for the watchdog */
	for (int i = 0; i < n; i++) {
		if (ev[i].type == FAB_EV_RX) {
			ct_rx_message(e, ev[i].buf, ev[i].len, ev[i].peer);
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
			ct_ack_in_drain(e); /* an ACK just taken in: not a timeout */
			work += ct_check_rto(e, now);
			e->next_timer_ns = now + e->rto_min_ns / 4;
		}
	} else if (ct_msgs_live(e) && coarse >= e->next_timer_ns) {
		/* without retransmission, pokes for overdue ACKs (not work: nothing moved); the
		 * coarse clock paces them, a pass pays for no clock read */
		ct_ack_in_drain(e);
		ct_poke_silent(e, gice_now_ns());
		e->next_timer_ns = coarse + e->rto_min_ns / 4;
	}
	gice_clock_release();
	ct_bundle_flush(e);
end:
	if (e->n_kick || e->kick_overflow)
		kick_peers(e);
	if (gice_unlikely(atomic_load_explicit(&e->n_kick_due, memory_order_relaxed)))
		nudge_due(e, 0);
	if (work || polled) /* nothing sent or polled: the endpoint is as the last pass left it */
		note_busy(e, 0);
	note_cork(e, CT_NIL);
	return work;
}

static int progress(ct_engine_t *e, int mode)
{
	int work = 0;

	for (;;) {
		if (gice_unlikely(atomic_load_explicit(&e->link_turn, memory_order_relaxed))) {
			/* a set-up call or the watchdog waits for it: it makes the pass (rings CT 0) */
			atomic_store_explicit(&e->link_pending, 1, memory_order_seq_cst);
			return work;
		}
		/* Try; if held, ask, then try again (seq_cst): a holder that releases after our
		 * request sees it and makes the pass we could not (a poller) or rings CT 0
		 * (ct_link_unlock); one that released before it lets our second try in. */
		if (!ct_link_trylock(e)) {
			atomic_store_explicit(&e->link_pending, 1, memory_order_seq_cst);
			if (!ct_link_trylock(e))
				return work;
		}
		atomic_store_explicit(&e->link_pending, 0, memory_order_relaxed);
		work += link_pass(e, mode);
		/* release, then look (seq_cst, pairs with the hand-over: ct_exec_req) */
		atomic_store_explicit(&e->link_lock, 0, memory_order_seq_cst);
		if (!atomic_load_explicit(&e->link_pending, memory_order_seq_cst))
			return work;
	}
}

int ct_link_progress(ct_engine_t *e) { return progress(e, PASS_FULL); }

int ct_link_progress_waiting(ct_engine_t *e) { return progress(e, PASS_WAIT); }

int ct_link_look(ct_engine_t *e) { return progress(e, PASS_LOOK); }
int ct_link_send(ct_engine_t *e) { return progress(e, PASS_SEND); }

int ct_link_push(ct_engine_t *e) { return progress(e, PASS_PUSH); }

void ct_link_settle(ct_engine_t *e)
{
	if (!atomic_load_explicit(&e->n_kick_due, memory_order_relaxed) ||
	    atomic_load_explicit(&e->link_turn, memory_order_relaxed) || !ct_link_trylock(e))
		return; /* none, or the link's holder nudges them (or CT 0 does, on its timer) */
	nudge_due(e, 1);
	atomic_store_explicit(&e->link_lock, 0, memory_order_seq_cst);
	if (atomic_load_explicit(&e->link_pending, memory_order_seq_cst))
		ct_link_progress(e);
}

void ct_link_sleep(ct_engine_t *e, uint32_t seq, uint64_t timeout_ns)
{
	int fd = fab_wait_fd(e->attr.ep);

	/* with nothing in flight, sleep on the fabric's wait fd too (tcp): a packet wakes us at
	 * once; fi_trywait first (under the lock: one thread in the provider at a time) */
	if (fd < 0 || ct_link_busy(e)) {
		tm_doorbell_sleep(e->attr.tm, 0, seq, timeout_ns);
		return;
	}
	atomic_store_explicit(&e->link_pending, 1, memory_order_seq_cst);
	if (!ct_link_trylock(e)) { /* its holder makes a pass, or rings us (ct_link_unlock) */
		tm_doorbell_sleep(e->attr.tm, 0, seq, timeout_ns);
		return;
	}
	atomic_store_explicit(&e->link_pending, 0, memory_order_relaxed);
	int rc = fab_trywait(e->attr.ep);
	atomic_store_explicit(&e->link_lock, 0, memory_order_seq_cst);
	if (rc != GICE_OK || atomic_load_explicit(&e->link_pending, memory_order_seq_cst))
		return; /* something to read, or handed over: look again */
	tm_doorbell_sleep_fd(e->attr.tm, 0, seq, fd, timeout_ns);
}
