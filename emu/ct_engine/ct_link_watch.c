/* ct_link_watch.c: when a peer fails — every operation to it fails with a status saying why
 * (dead, hung, timed out, closed); the link's watchdog pass (heartbeats, silence and ack stalls
 * measured against GICE_TIMEOUT_MS, the diagnostic event); BYE to the peers when the device closes;
 * cancellation of what is left at teardown. Runs under the link lock. */
#include "emu/ct_engine/ct_internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

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

	if (m->state == MS_FREE)
		return;
	if (!m->status)
		m->status = status;
	m->need = 0;
	ct_nack_done(e, m);
	if (m->kind <= MK_AMO)
		ct_stat_add(e, CT_STAT_ops_timed_out, status == GICE_ERR_TIMED_OUT);
	ct_complete_msg(e, idx);
}

/* Fail every operation of the link to peer gid (sent, being sent, or awaiting a response). */
static uint32_t fail_peer_msgs(ct_engine_t *e, uint32_t gid, int status)
{
	ct_peer_t *p = &e->peers[gid];
	uint32_t n = 0, idx;

	ct_ack_in_drain(e); /* what it acknowledged completed (ct_ack_in_defer) */
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
	ct_reads_cancel(e, gid);
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

/* Is a silent peer's process still there? 1 yes (hung), 2 yes and stopped (SIGSTOP), 0 no
 * (exited or a zombie), -1 unknown (its pid means nothing here: another machine or pid
 * namespace). */
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
	if (paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'))
		return 0;
	return paren && paren[1] == ' ' && paren[2] == 'T' ? 2 : 1; /* not 't': LeakSanitizer's exit check ptraces */
}

/* How long ago t was, 0 if it is later than now (stamped by another thread after now was read). */
static uint64_t since(uint64_t now, uint64_t t) { return now > t ? now - t : 0; }

/* The watchdog could not take the link, and no pass has ended for over the timeout: the holder
 * does not come back. It is stuck in a call into the provider: libfabric 1.17's shm takes a
 * spinlock in the shared memory of the peer it sends to (and in its own, to receive), and spins
 * forever once a process died or stopped holding one. Nothing of the link can be read or failed
 * now (the holder has it); what can still be judged without it is whether a same-host peer's
 * process is gone (present, pid and tm are set before the peer's first pass). A peer that exited
 * (dead) or stopped (hung) is named, as a silent one would be, and the device's waits end with
 * its status; with none, the stuck link is told once. Returns the events. */
static int link_stuck(ct_engine_t *e, uint64_t now, ct_event_cb cb, void *arg)
{
	uint64_t held = since(now, atomic_load_explicit(&e->t_poll, memory_order_relaxed)), heard = UINT64_MAX;
	int told = atomic_load_explicit(&e->stuck_told, memory_order_relaxed), alive = 1;
	uint32_t gid = UINT32_MAX;

	if (held <= e->timeout_ns || told == 2)
		return 0;
	/* of the peers whose process exited or stopped, the first to go. A peer whose device was
	 * aborted for a lost peer (its own watchdog named one: the status is in its trigger
	 * memory, written before it exited) went after that one, whatever its silence says (stuck
	 * as we are, it may have fallen silent before the one it named died): it is named only
	 * when no other is lost. Among the rest, the one silent longest. */
	int judged = 1;
	for (uint32_t g = 0; g < e->max_peers; g++) {
		const ct_peer_t *p = &e->peers[g];
		int st = p->tm ? tm_region_status(p->tm) : GICE_OK;
		if (!p->present || g == e->attr.gid || st == GICE_ERR_CANCELED)
			continue; /* a peer that closed its device is not lost */
		uint64_t t = atomic_load_explicit(&p->t_rx, memory_order_relaxed);
		int j = st == GICE_ERR_PEER_DEAD || st == GICE_ERR_PEER_HUNG;
		if (j > judged || (j == judged && t >= heard))
			continue;
		int a = peer_alive(p->pid);
		if (a == 0 || a == 2) {
			gid = g;
			alive = a;
			heard = t;
			judged = j;
		}
	}
	if (gid == UINT32_MAX && told)
		return 0;
	atomic_store_explicit(&e->stuck_told, gid == UINT32_MAX ? 1 : 2, memory_order_relaxed);
	ct_event_t ev = {.status = gid == UINT32_MAX ? GICE_ERR_CT_STALLED : alive ? GICE_ERR_PEER_HUNG : GICE_ERR_PEER_DEAD,
			 .reason = gid == UINT32_MAX ? NULL : alive ? "process stopped, not responding (hung)" : "process exited",
			 .device_gid = e->attr.gid, .peer_gid = gid, .ct = 0, .trigger = UINT32_MAX,
			 .counter = UINT32_MAX, .waited_ns = held};
	int len = snprintf(ev.text, sizeof(ev.text), "device %u: ", e->attr.gid);
	if (gid != UINT32_MAX)
		len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len, "peer device %u: %s; ", gid, ev.reason);
	snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
		 "the link has been held for %llu ms (timeout %llu ms) by a call into the fabric provider that does "
		 "not return (libfabric's shm spins forever on a lock in the shared memory of a process that died or "
		 "stopped holding it): nothing more is sent or received%s",
		 (unsigned long long)(held / 1000000), (unsigned long long)(e->timeout_ns / 1000000),
		 gid == UINT32_MAX ? "; no peer's process has exited or stopped" : ", every wait of the device ends");
	if (gid != UINT32_MAX) {
		ct_stat_add(e, CT_STAT_peers_dead, 1);
		if (e->attr.on_peer_lost)
			e->attr.on_peer_lost(e->attr.on_peer_lost_arg, &ev);
		/* the operations cannot be failed one by one (the holder has them): the device
		 * aborted for the peer (on_peer_lost), so every wait ends with its status */
		if (tm_region_status(e->attr.tm) != GICE_OK)
			tm_region_abort(e->attr.tm, ev.status);
	}
	gice_error("watchdog", "%s", ev.text);
	if (cb)
		cb(&ev, arg);
	return 1;
}

int ct_engine_link_stuck(ct_engine_t *e, uint64_t *held_ns)
{
	uint64_t held = since(gice_now_ns(), atomic_load_explicit(&e->t_poll, memory_order_relaxed));

	if (!atomic_load_explicit(&e->stuck_told, memory_order_relaxed) ||
	    !atomic_load_explicit(&e->link_lock, memory_order_relaxed) || held <= e->timeout_ns)
		return 0;
	*held_ns = held;
	return 1;
}

int ct_link_watch(ct_engine_t *e, uint64_t now, ct_event_cb cb, void *arg)
{
	int events = 0;

	/* the link is held for a pass at a time, by whoever steps, often: ask the steppers to
	 * let go (ct_link_wait_turn) and only then take a busy holder for proof that it moves */
	if (!ct_link_wait_turn(e, 10000000))
		return link_stuck(e, now, cb, arg);
	atomic_store_explicit(&e->stuck_told, 0, memory_order_relaxed); /* it moves: a next stuck spell is told */
	ct_ack_in_drain(e); /* the peers as their ACKs say (ct_ack_in_defer) */
	/* the time now, under the lock: the peers' stamps (written under it) are not later; a now
	 * read before a preemption would make a fresh stamp look 2^64 ns old */
	now = GICE_MAX(now, gice_now_ns());
	if (since(now, atomic_load_explicit(&e->t_poll, memory_order_relaxed)) > e->timeout_ns / 2) {
		/* our own link is not being polled (CT 0 stalled): we cannot judge peers */
		ct_link_unlock_watch(e);
		return 0;
	}
	for (uint32_t g = 0; g < e->max_peers; g++) {
		ct_peer_t *p = &e->peers[g];
		if (!p->present || p->dead || g == e->attr.gid)
			continue;
		if (!atomic_load_explicit(&p->t_rx, memory_order_relaxed))
			atomic_store_explicit(&p->t_rx, now, memory_order_relaxed); /* the clock starts when we first look */
		uint64_t silent = since(now, atomic_load_explicit(&p->t_rx, memory_order_relaxed));
		int waiting = p->acked_psn != p->next_psn || p->done_upto != p->next_msg_id;
		uint64_t stuck = p->acked_psn != p->next_psn ? since(now, p->t_progress) : 0;
		if (silent <= e->timeout_ns && stuck <= e->timeout_ns) {
			/* sent by the next pass (ct_link_heartbeats), not here: see ct_link_unlock_watch */
			if (since(now, p->t_tx) >= e->hb_ns)
				p->hb_due = e->hb_due = 1;
			continue;
		}
		if (silent <= e->timeout_ns && !waiting)
			continue;
		/* stuck, and the peer quiet for over half the timeout (a live one sends a heartbeat every
		 * quarter): it is likely going silent, its last packet having been taken after ours went
		 * out (a hung peer's heartbeat read late); judge it once silence decides, dead or hung,
		 * rather than blame it for acknowledging nothing */
		if (silent <= e->timeout_ns && silent > e->timeout_ns / 2)
			continue;
		if (p->tm && tm_region_status(p->tm) == GICE_ERR_CANCELED) {
			/* it closed its device (no BYE over shm): not a failure */
			ct_peer_fail(e, g, GICE_ERR_PEER_DEAD, "closed its device");
			continue;
		}
		/* silent: a peer whose process is still there is hung (it holds its connection),
		 * one whose process is gone is dead; from another machine we cannot tell */
		int long_silent = silent > e->timeout_ns, alive = peer_alive(p->pid);
		/* a stopped process is hung even when what it sent before it stopped came in late (a
		 * loaded machine): the silence is the verdict's clock, not its only evidence */
		int gone = long_silent || alive == 2;
		ct_event_t ev = {.status = !gone ? GICE_ERR_TIMED_OUT : alive > 0 ? GICE_ERR_PEER_HUNG : GICE_ERR_PEER_DEAD,
				 .reason = !gone ? "acknowledging nothing"
					 : alive == 2 ? "process stopped, not responding (hung)"
					 : alive > 0 ? "process alive, not responding (hung)"
					 : alive == 0 ? "process exited"
						      : "silent (its process is on another machine)",
				 .device_gid = e->attr.gid, .peer_gid = g, .ct = UINT32_MAX, .trigger = UINT32_MAX,
				 .counter = UINT32_MAX, .waited_ns = long_silent ? silent : stuck,
				 .psn_acked = p->acked_psn, .psn_next = p->next_psn, .retransmits = p->retx};
		const ct_msg_t *m = oldest_to(e, p);
		int len = snprintf(ev.text, sizeof(ev.text), "device %u: peer device %u %s %llu ms (timeout %llu ms): %s",
				   e->attr.gid, g, long_silent ? "silent for" : "acknowledged nothing for",
				   (unsigned long long)(ev.waited_ns / 1000000),
				   (unsigned long long)(e->timeout_ns / 1000000), ev.reason);
		len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
				"; psn acked %u of %u sent, %llu retransmits", p->acked_psn, p->next_psn,
				(unsigned long long)p->retx);
		if (m) {
			ev.op_name = kind_name(m->kind);
			ev.bytes = m->req.len;
			ev.msg_id = m->msg_id;
			ev.trigger = m->trig;
			ev.threshold = m->thresh;
			ev.counter = m->req.counter;
			if (m->req.counter != TM_NONE)
				ev.counter_value = tm_counter_read(e->attr.tm, m->req.counter);
			len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
					"; oldest: %s of %llu B, msg %u, psn %u..%u", ev.op_name,
					(unsigned long long)m->req.len, m->msg_id, m->first_psn, m->last_psn);
			if (m->trig != TM_NONE)
				len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
						", fired by trigger %u at %llu", m->trig, (unsigned long long)m->thresh);
			if (m->req.counter != TM_NONE)
				len += snprintf(ev.text + len, sizeof(ev.text) - (size_t)len,
						", completion counter %u expected %llu found %llu", m->req.counter,
						(unsigned long long)ev.counter_value + 1,
						(unsigned long long)ev.counter_value);
		}
		/* counted, and told, before the operations fail: a waiter they release sees both */
		ct_stat_add(e, CT_STAT_peers_dead, gone);
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
	ct_link_unlock_watch(e);
	return events;
}

/* Send the heartbeats the watchdog found due (ct_link_watch): a link pass, under the lock. */
int ct_link_heartbeats(ct_engine_t *e)
{
	int sent = 0, left = 0;

	for (uint32_t g = 0; g < e->max_peers; g++) {
		ct_peer_t *p = &e->peers[g];
		if (!p->hb_due)
			continue;
		if (p->dead || !p->present || ct_send_ctrl(e, g, CT_PKT_HEARTBEAT, 0, 0, 0) == GICE_OK) {
			p->hb_due = 0;
			sent++;
		} else {
			left = 1; /* the fabric refused it for now: the next pass tries again */
		}
	}
	e->hb_due = (uint8_t)left;
	return sent;
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

	ct_ack_in_drain(e); /* what it acknowledged completed (ct_ack_in_defer) */
	for (uint32_t i = 0; i < n; i++) {
		ct_msg_t *m = &e->msgs[i];
		if (m->state == MS_FREE)
			continue;
		m->state = MS_FREE;
		if (m->kind <= MK_FENCE) {
			ct_complete_counter(e, m->req.counter, GICE_ERR_CANCELED);
			ct_retire(e, m->owner, m->ticket);
		}
	}
}
