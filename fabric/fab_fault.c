/* fab_fault.c: the fault-injecting endpoint decorator (see fab_fault.h): configuration, the
 * send path and the ops. What happens to a message is decided in fab_fault_decide.c; rate caps
 * are paced in fab_fault_pace.c; held copies live in fab_fault_hold.c.
 *
 * Threads. One thread at a time sends and polls through the wrapper (the fabric rule); all the
 * per-packet state is that thread's. fab_fault_set/add/start may run on another thread: they
 * change the configuration under set_lock and bump gen (release); the sender, at its next send
 * or poll, sees gen changed and copies the configuration under set_lock (a lock taken only when
 * the faults changed, never per packet). Counters are written by the sender only (relaxed load
 * + store) and read by fab_fault_stats from anywhere.
 *
 * Fast path. fast_gen is the adopted generation while no network fault is on and nothing is
 * held, else FF_NOT_FAST (odd, so never equal to gen's values, which are even): send and poll
 * test gen == fast_gen and call the inner endpoint.
 *
 * Send. A message is planned (ff_plan), then: a rate cap whose bucket is empty refuses it
 * (GICE_ERR_AGAIN); every packet dropped: nothing goes; some dropped or corrupted: the rest go as
 * a copy with the bits flipped; a duplicate goes twice; latency, delay and reorder hold it. The
 * plan is committed (ff_commit) when the inner endpoint took the message: a refused send is
 * planned again, identically.
 *
 * Holds. A held copy waits in a slot of the pool (allocated once, when network faults are
 * first on) and goes out from a later send or poll when it is ready: delay or latency elapsed
 * (not_before), and for a reordered one, the next message accepted (k >= after_k) or 1 ms more
 * (deadline). Ready copies go out in the order they were held, but never before an earlier copy
 * to the same destination on an ordered endpoint; an inner GICE_ERR_AGAIN stops the flush until
 * the next call. On an ordered endpoint a message to a destination with copies held waits
 * behind them, and when no slot is free a message to hold is refused (GICE_ERR_AGAIN); on an
 * unordered one a reorder or delay that finds no free slot is not made (the message goes now).
 */
#include "fabric/fab_fault_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const fab_ops_t fab_fault_ops;

static ff_ep_t *ff_ep(fab_ep_t *e) { return (ff_ep_t *)e; }

static int ff_prob_ok(double p) { return p >= 0 && p <= 1; } /* false for NaN */

static int ff_check(const gice_faults_t *f, const char *what)
{
	for (uint32_t i = 0; f && i < f->n_rules; i++) {
		const gice_fault_rule_t *r = &f->rule[i];
		int ok = r->kind < GICE_FK_N && ff_prob_ok(r->p);

		if (r->kind == GICE_FK_RATE || r->kind == GICE_FK_NTH_PUT || r->kind == GICE_FK_CORRUPT_MSG)
			ok = ok && r->n > 0;
		if (!ok || f->n_rules > GICE_FAULTS_MAX_RULES) {
			gice_error("fab", "%s: rule %u (%s): probability %g must be in [0, 1], count or rate %llu above 0",
				   what, i, gice_fault_kind_name(r->kind), r->p, (unsigned long long)r->n);
			return GICE_ERR_INVALID;
		}
	}
	return GICE_OK;
}

/* Rules of f into c from index c->n_rules on, their times counting from origin (0: later) and
 * their collectives from colls. */
static void ff_cfg_add(ff_cfg_t *c, const gice_faults_t *f, uint64_t origin, uint64_t colls)
{
	for (uint32_t i = 0; f && i < f->n_rules && c->n_rules < GICE_FAULTS_MAX_RULES; i++) {
		ff_rule_t *r = &c->rule[c->n_rules++];

		r->r = f->rule[i];
		r->thr = (uint64_t)(f->rule[i].p * FF_ONE);
		r->origin = origin;
		r->coll_origin = colls;
	}
}

static void ff_update_fast(ff_ep_t *w)
{
	w->fast_gen = (!w->active && !w->nheld) ? w->seen_gen : FF_NOT_FAST;
}

/* Adopt what fab_fault_set/add/start wrote, if it changed. */
static void ff_adopt(ff_ep_t *w)
{
	uint64_t g = atomic_load_explicit(&w->gen, memory_order_acquire);
	uint64_t epoch = w->cfg.epoch;
	int first = w->seen_gen == 0;

	if (g == w->seen_gen)
		return;
	pthread_mutex_lock(&w->set_lock);
	w->cfg = w->c_cfg;
	w->seen_gen = atomic_load_explicit(&w->gen, memory_order_relaxed);
	pthread_mutex_unlock(&w->set_lock);
	if (w->cfg.epoch != epoch || first)
		for (uint32_t j = 0; j < GICE_FAULTS_MAX_RULES; j++)
			w->rs[j] = (ff_rstate_t){.victim_gid = UINT32_MAX};
	w->active = w->cfg.n_rules > 0;
	if (w->active)
		ff_pool_alloc(w);
	ff_update_fast(w);
}

/* A message was accepted: the plan is committed; reordered copies waiting for it may go. */
static void ff_accept(ff_ep_t *w, int dups, int held_reorder, int held_delay)
{
	ff_commit(w, dups, held_reorder, held_delay);
	if (w->nheld)
		ff_flush(w, gice_now_ns());
	ff_update_fast(w);
}

/* The message as it goes out, into scratch, without its dropped packets and with its corrupted
 * bits flipped; returns its length. */
static size_t ff_rewrite(ff_ep_t *w, const void *hdr, size_t hlen, const void *payload, size_t plen)
{
	const ff_plan_t *pl = &w->plan;
	size_t out = 0;

	for (uint32_t i = 0; i < pl->n_pkts; i++) {
		const ff_pkt_t *p = &pl->pkt[i];
		unsigned char *dst = w->scratch + out;

		if (p->drop)
			continue;
		if (payload) { /* one packet: header, then payload */
			memcpy(dst, hdr, hlen);
			if (plen)
				memcpy(dst + hlen, payload, plen);
		} else {
			memcpy(dst, (const unsigned char *)hdr + p->off, p->len);
		}
		if (p->corrupt && p->len) {
			/* corrupt_msg (2): in the payload when there is one; corrupt (1): anywhere */
			size_t from = (p->corrupt == 2 && p->hdr_len < p->len) ? p->hdr_len : 0;
			size_t byte = from + (size_t)(((p->pick & 0xffffffffu) * (p->len - from)) >> 32);

			dst[byte] ^= (unsigned char)(1u << ((p->pick >> 32) & 7));
		}
		out += p->len;
	}
	return out;
}

/* out of line: keeps ff_send's fast path a test and a tail call */
__attribute__((noinline)) static int ff_send_slow(ff_ep_t *w, fab_addr_t dest, const void *hdr, size_t hlen,
						  const void *payload, size_t plen)
{
	ff_plan_t *pl = &w->plan;
	ff_peer_t *pp;
	uint64_t now;
	uint64_t delay;
	int dups = 0, hold, queue, reorder, rc;

	ff_adopt(w);
	now = gice_now_ns();
	if (w->nheld)
		ff_flush(w, now);
	if (!w->active || hlen > w->base.max_packet || plen > w->base.max_packet - hlen) {
		/* nothing to inject (only held packets to push), or a bad size: the inner endpoint
		 * sends, or rejects and logs; an ordered endpoint keeps a message behind held ones */
		if (w->active || !w->nheld || !w->base.ordered || !ff_held_to(w, dest))
			return fab_send(w->inner, dest, hdr, hlen, payload, plen);
		if (!w->nfree)
			return GICE_ERR_AGAIN;
		ff_hold(w, dest, hdr, hlen, payload, plen, 0, 0, 0);
		return GICE_OK;
	}
	ff_plan(w, hdr, hlen, payload, plen, now);
	pp = ff_peer(w, pl->dst);
	if (pl->rate && !ff_pace_ready(w, pp, pl->rate, now)) {
		ff_count(&w->n[FF_ST_paced], 1);
		ff_count(&pp->n[FF_ST_paced], pp != &w->unknown);
		return GICE_ERR_AGAIN;
	}
	if (pl->n_drop == pl->n_pkts) {
		ff_accept(w, 0, 0, 0);
		return GICE_OK;
	}
	if ((pl->n_drop || pl->n_corrupt) && w->scratch) {
		size_t len = ff_rewrite(w, hdr, hlen, payload, plen);

		hdr = w->scratch;
		hlen = len;
		payload = NULL;
		plen = 0;
	}
	/* latency holds, and on an ordered endpoint so does a message behind held ones; reorder
	 * and delay only where order was not promised */
	queue = pl->latency_ns || (w->base.ordered && ff_held_to(w, dest));
	reorder = !w->base.ordered && pl->reorder;
	delay = w->base.ordered ? 0 : pl->delay_ns;
	hold = queue || reorder || delay;
	if (hold && w->nfree < (pl->dup ? 2u : 1u)) {
		if (queue)
			return GICE_ERR_AGAIN; /* no slot: wait rather than overtake or skip the latency */
		hold = 0;
	}
	if (hold) {
		uint64_t nb = now + delay + pl->latency_ns;
		uint64_t after = reorder ? w->k + 2 : 0; /* w->k + 1: this message */
		uint64_t deadline = reorder ? nb + FF_REORDER_NS : nb;

		for (int c = 0; c < (pl->dup ? 2 : 1); c++)
			ff_hold(w, dest, hdr, hlen, payload, plen, nb, after, deadline);
		dups = pl->dup;
	} else {
		rc = fab_send(w->inner, dest, hdr, hlen, payload, plen);
		if (rc != GICE_OK)
			return rc; /* nothing committed: the retry plans the same */
		if (pl->dup) {
			rc = fab_send(w->inner, dest, hdr, hlen, payload, plen);
			if (rc == GICE_OK) {
				dups = 1;
			} else if (rc == GICE_ERR_AGAIN && w->nfree) {
				ff_hold(w, dest, hdr, hlen, payload, plen, 0, 0, 0); /* goes at the next call */
				dups = 1;
			} else if (ff_ratelimit(&w->nerr)) {
				gice_warn("fab", "duplicate of a %zu-byte packet to peer %llu not sent: %s", hlen + plen,
					  (unsigned long long)dest, gice_status_name(rc));
			}
		}
	}
	if (pl->rate)
		ff_pace_spend(pp, hlen + plen);
	ff_accept(w, dups, hold && reorder, hold && (delay || pl->latency_ns));
	return GICE_OK;
}

/* ---- ops ---- */

static int ff_send(fab_ep_t *ep, fab_addr_t dest, const void *hdr, size_t hlen, const void *payload, size_t plen)
{
	ff_ep_t *w = ff_ep(ep);

	if (gice_likely(atomic_load_explicit(&w->gen, memory_order_relaxed) == w->fast_gen))
		return fab_send(w->inner, dest, hdr, hlen, payload, plen);
	return ff_send_slow(w, dest, hdr, hlen, payload, plen);
}

__attribute__((noinline)) static int ff_poll_slow(ff_ep_t *w, fab_event_t *ev, int max)
{
	int n;

	ff_adopt(w);
	n = fab_poll(w->inner, ev, max); /* first: it may free tx buffers for the held packets */
	if (w->nheld)
		ff_flush(w, gice_now_ns());
	ff_update_fast(w);
	return n;
}

static int ff_poll(fab_ep_t *ep, fab_event_t *ev, int max)
{
	ff_ep_t *w = ff_ep(ep);

	if (gice_likely(atomic_load_explicit(&w->gen, memory_order_relaxed) == w->fast_gen))
		return fab_poll(w->inner, ev, max);
	return ff_poll_slow(w, ev, max);
}

/* Quiet as the inner endpoint is, on the fast path only: held copies go out from a poll, and
 * a configuration not yet adopted is adopted by one. */
static int ff_quiet(fab_ep_t *ep)
{
	ff_ep_t *w = ff_ep(ep);

	return atomic_load_explicit(&w->gen, memory_order_relaxed) == w->fast_gen && fab_quiet(w->inner);
}

/* In flight as the inner endpoint is, on the fast path; off it a poll may have held copies to
 * send, or a configuration to adopt. */
static int ff_in_flight(fab_ep_t *ep)
{
	ff_ep_t *w = ff_ep(ep);

	return atomic_load_explicit(&w->gen, memory_order_relaxed) != w->fast_gen || fab_in_flight(w->inner);
}

static int ff_trywait(fab_ep_t *ep)
{
	ff_ep_t *w = ff_ep(ep);

	if (w->nheld)
		return GICE_ERR_AGAIN;
	return fab_trywait(w->inner);
}

static void ff_close(fab_ep_t *ep)
{
	ff_ep_t *w = ff_ep(ep);

	if (!w)
		return;
	if (w->nheld)
		gice_debug("fab", "close: %u held packets discarded", w->nheld);
	fab_close(w->inner);
	free(w->free_slots);
	free(w->held);
	free(w->slots);
	free(w->pool);
	free(w->plan.pkt);
	free(w->att);
	free(w->peers);
	pthread_mutex_destroy(&w->set_lock);
	free(w);
}

static int ff_getname(fab_ep_t *ep, void *addr, size_t *len) { return fab_getname(ff_ep(ep)->inner, addr, len); }

static int ff_insert(fab_ep_t *ep, const void *addr, size_t len, fab_addr_t *out)
{
	return fab_insert(ff_ep(ep)->inner, addr, len, out);
}

static void ff_release(fab_ep_t *ep, void *buf) { fab_release(ff_ep(ep)->inner, buf); }

static int ff_wait_fd(fab_ep_t *ep) { return fab_wait_fd(ff_ep(ep)->inner); }

static int ff_mr_reg(fab_ep_t *ep, void *base, size_t len) { return fab_mr_reg(ff_ep(ep)->inner, base, len); }

static int ff_mr_expose(fab_ep_t *ep, uint64_t off, size_t len, fab_mr_t **mr, fab_mr_info_t *info)
{
	return fab_mr_expose(ff_ep(ep)->inner, off, len, mr, info);
}

static void ff_mr_revoke(fab_ep_t *ep, fab_mr_t *mr) { fab_mr_revoke(ff_ep(ep)->inner, mr); }

static int ff_read(fab_ep_t *ep, fab_addr_t src, uint64_t local_off, size_t len, const fab_mr_info_t *remote,
		   uint64_t remote_off, void *ctx)
{
	return fab_read(ff_ep(ep)->inner, src, local_off, len, remote, remote_off, ctx);
}

/* Wrappers are made by fab_fault_wrap, not opened by name. */
/* dest has closed: drop the packets held for it (delay/reorder) without sending them. */
static void ff_forget(fab_ep_t *ep, fab_addr_t dest)
{
	ff_ep_t *w = ff_ep(ep);
	uint32_t j = 0;

	fab_forget(w->inner, dest);
	for (uint32_t i = 0; i < w->nheld; i++) {
		uint32_t idx = w->held[i];
		if (w->slots[idx].dest == dest)
			w->free_slots[w->nfree++] = idx;
		else
			w->held[j++] = idx;
	}
	w->nheld = j;
	atomic_store_explicit(&w->base.held, j, memory_order_relaxed);
	ff_update_fast(w);
}

static int ff_open(const fab_attr_t *attr, fab_ep_t **out) { return GICE_ERR_UNSUPPORTED; }

const fab_ops_t fab_fault_ops = {
	.name = "fault",
	.open = ff_open,
	.close = ff_close,
	.getname = ff_getname,
	.insert = ff_insert,
	.send = ff_send,
	.poll = ff_poll,
	.release = ff_release,
	.quiet = ff_quiet,
	.in_flight = ff_in_flight,
	.wait_fd = ff_wait_fd,
	.trywait = ff_trywait,
	.mr_reg = ff_mr_reg,
	.mr_expose = ff_mr_expose,
	.mr_revoke = ff_mr_revoke,
	.read = ff_read,
	.forget = ff_forget,
};

/* ---- public ---- */

int fab_fault_wrap(fab_ep_t *inner, const gice_faults_t *f, uint64_t stream, const fab_fault_attr_t *attr,
		   fab_ep_t **out)
{
	ff_ep_t *w;
	int rc;

	if (!inner || !out || !inner->max_packet) {
		gice_error("fab", "fab_fault_wrap: inner %p (max_packet %zu) and out %p are required", (void *)inner,
			   inner ? inner->max_packet : 0, (void *)out);
		return GICE_ERR_INVALID;
	}
	if ((rc = ff_check(f, "fab_fault_wrap")))
		return rc;
	w = calloc(1, sizeof(*w));
	if (!w)
		return GICE_ERR_NO_MEMORY;
	if (attr)
		w->attr = *attr;
	w->plan.pkt = calloc(FF_BUNDLE_MAX, sizeof(*w->plan.pkt));
	if (w->attr.max_gids) {
		w->peers = calloc(w->attr.max_gids, sizeof(*w->peers));
		w->att = calloc((size_t)w->attr.max_gids * FF_ATT_RING, sizeof(*w->att));
	}
	if (!w->plan.pkt || (w->attr.max_gids && (!w->peers || !w->att)) || pthread_mutex_init(&w->set_lock, NULL)) {
		free(w->att);
		free(w->peers);
		free(w->plan.pkt);
		free(w);
		return GICE_ERR_NO_MEMORY;
	}
	w->base.ops = &fab_fault_ops;
	snprintf(w->base.provider, sizeof(w->base.provider), "%s", inner->provider);
	w->base.rma = inner->rma;
	w->base.reliable = inner->reliable;
	w->base.source = inner->source;
	w->base.closed_peer_unsafe = inner->closed_peer_unsafe;
	w->base.max_packet = inner->max_packet;
	w->base.ordered = inner->ordered && !gice_faults_reorders(f);
	w->inner = inner;
	w->stream = stream;
	w->c_cfg.seed = 1;
	ff_cfg_add(&w->c_cfg, f, w->attr.start_later ? 0 : gice_now_ns(), 0);
	if (f)
		w->c_cfg.seed = f->seed;
	atomic_init(&w->gen, 2); /* the sender (seen_gen 0) adopts it at its first call */
	ff_adopt(w);
	if (w->active && !w->pool) { /* ff_pool_alloc logged it and freed its part */
		pthread_mutex_destroy(&w->set_lock);
		free(w->att);
		free(w->peers);
		free(w->plan.pkt);
		free(w);
		return GICE_ERR_NO_MEMORY;
	}
	if (w->active) {
		char spec[512];

		gice_faults_format(f, spec, sizeof(spec));
		gice_info("fab", "faults on %s endpoint (stream %llu)%s: %s", inner->provider, (unsigned long long)stream,
			  w->attr.start_later ? " from the device's open on" : "", spec);
	}
	*out = &w->base;
	return GICE_OK;
}

static int ff_is(fab_ep_t *ep, const char *what)
{
	if (ep && ep->ops == &fab_fault_ops)
		return 1;
	gice_error("fab", "%s: endpoint %p is not a fault wrapper", what, (void *)ep);
	return 0;
}

/* Change the configuration under set_lock: replace (set) or add; publish it with gen. */
static int ff_change(fab_ep_t *ep, const gice_faults_t *f, int add, const char *what)
{
	ff_ep_t *w = ff_ep(ep);
	uint64_t now = gice_now_ns();
	int rc;

	if (!ff_is(ep, what))
		return GICE_ERR_INVALID;
	if ((rc = ff_check(f, what)))
		return rc;
	if (ep->ordered && gice_faults_reorders(f)) {
		gice_error("fab", "%s: reorder / delay_us on an endpoint that promised order (wrap it with reorder or "
				  "delay_us on to allow them; latency= keeps the order)", what);
		return GICE_ERR_UNSUPPORTED;
	}
	pthread_mutex_lock(&w->set_lock);
	if (add && f && w->c_cfg.n_rules + f->n_rules > GICE_FAULTS_MAX_RULES) {
		pthread_mutex_unlock(&w->set_lock);
		gice_error("fab", "%s: %u network faults in force and %u more: at most %d", what, w->c_cfg.n_rules,
			   f->n_rules, GICE_FAULTS_MAX_RULES);
		return GICE_ERR_OVERFLOW;
	}
	if (!add) {
		w->c_cfg.n_rules = 0;
		w->c_cfg.seed = 1;
		w->c_cfg.epoch++;
	}
	ff_cfg_add(&w->c_cfg, f, now, atomic_load_explicit(&w->colls, memory_order_relaxed));
	if (f && (!add || f->seed != 1)) /* an addition keeps the seed unless it names one */
		w->c_cfg.seed = f->seed;
	atomic_fetch_add_explicit(&w->gen, 2, memory_order_release);
	pthread_mutex_unlock(&w->set_lock);
	if (gice_log_enabled(GICE_LOG_INFO, "fab")) {
		char spec[512];

		gice_faults_format(f, spec, sizeof(spec));
		gice_info("fab", "faults on %s endpoint (stream %llu) %s: %s", ep->provider, (unsigned long long)w->stream,
			  add ? "added" : "now", *spec ? spec : "none");
	}
	return GICE_OK;
}

int fab_fault_set(fab_ep_t *ep, const gice_faults_t *f) { return ff_change(ep, f, 0, "fab_fault_set"); }
int fab_fault_add(fab_ep_t *ep, const gice_faults_t *f) { return ff_change(ep, f, 1, "fab_fault_add"); }

int fab_fault_start(fab_ep_t *ep)
{
	ff_ep_t *w = ff_ep(ep);
	uint64_t now = gice_now_ns();

	if (!ff_is(ep, "fab_fault_start"))
		return GICE_ERR_INVALID;
	pthread_mutex_lock(&w->set_lock);
	for (uint32_t i = 0; i < w->c_cfg.n_rules; i++)
		if (!w->c_cfg.rule[i].origin) {
			w->c_cfg.rule[i].origin = now;
			w->c_cfg.rule[i].coll_origin = atomic_load_explicit(&w->colls, memory_order_relaxed);
		}
	atomic_fetch_add_explicit(&w->gen, 2, memory_order_release);
	pthread_mutex_unlock(&w->set_lock);
	return GICE_OK;
}

int fab_fault_coll(fab_ep_t *ep, uint64_t n)
{
	if (!ep || ep->ops != &fab_fault_ops)
		return GICE_ERR_INVALID;
	atomic_store_explicit(&ff_ep(ep)->colls, n, memory_order_relaxed);
	return GICE_OK;
}

static void ff_stats_read(_Atomic uint64_t *n, fab_fault_stats_t *st)
{
#define FF_STAT_READ_(x) st->x = atomic_load_explicit(&n[FF_ST_##x], memory_order_relaxed);
	FF_STATS_LIST(FF_STAT_READ_)
#undef FF_STAT_READ_
}

int fab_fault_stats(fab_ep_t *ep, fab_fault_stats_t *st)
{
	if (!ff_is(ep, "fab_fault_stats") || !st)
		return GICE_ERR_INVALID;
	ff_stats_read(ff_ep(ep)->n, st);
	return GICE_OK;
}

int fab_fault_peer_stats(fab_ep_t *ep, uint32_t gid, fab_fault_stats_t *st)
{
	ff_ep_t *w = ff_ep(ep);

	if (!ff_is(ep, "fab_fault_peer_stats") || !st)
		return GICE_ERR_INVALID;
	if (!w->peers || gid >= w->attr.max_gids) {
		gice_error("fab", "fab_fault_peer_stats: device %u is not below %u", gid, w->attr.max_gids);
		return GICE_ERR_OUT_OF_BOUNDS;
	}
	ff_stats_read(w->peers[gid].n, st);
	return GICE_OK;
}
