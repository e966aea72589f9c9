/* fab_fault.c: the fault-injecting endpoint decorator (see fab_fault.h).
 *
 * Threads. One thread at a time sends and polls through the wrapper (the fabric rule); all the
 * per-packet state below is that thread's. fab_fault_set may run on another thread: it writes
 * the configuration as relaxed atomics inside a sequence lock (gen odd while writing, even
 * when stable); the sender compares gen with the generation it adopted and, when it changed,
 * copies the configuration and checks gen again (a torn copy is dropped and retried at the
 * next call). Counters are written by the sender only (relaxed load + store) and read by
 * fab_fault_stats from anywhere.
 *
 * Fast path. fast_gen is the adopted generation while no network fault is on and nothing is
 * held, else FF_NOT_FAST (odd, so never equal to gen's stable values): send and poll test
 * gen == fast_gen and call the inner endpoint.
 *
 * Decisions. Packet k accepted by the wrapper gets the k-th group of FF_DRAWS numbers of a
 * splitmix64 sequence seeded by (seed, stream), drawn whatever the configuration uses, so the
 * decision of packet k depends on nothing else. A decision is drawn when a packet first comes
 * to send and kept until send returns GICE_OK: a send that fails (GICE_ERR_AGAIN from the inner
 * endpoint, or any other error) leaves it for the next packet the caller sends, normally the
 * same packet retried. Fault order per packet: drop (nothing else happens), corrupt (one bit of
 * a copy), duplicate (two identical copies), then reorder / delay hold the copies, or they go
 * out now.
 *
 * Holds. A held copy waits in a slot of the pool (allocated once, when network faults are
 * first on) and goes out from a later send or poll when it is ready: delay elapsed
 * (not_before), and for a reordered one, the next packet accepted (k >= after_k) or 1 ms more
 * (deadline). Ready copies go out in the order they were held; an inner GICE_ERR_AGAIN stops
 * the flush until the next call. A hold that finds no free slot is not made: the packet goes
 * out now and is not counted as reordered or delayed.
 */
#include "fabric/fab_fault.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FF_SLOTS_MAX 64
#define FF_SLOTS_MIN 8
#define FF_POOL_BYTES (8u << 20) /* fewer slots for large packets, down to FF_SLOTS_MIN */
#define FF_REORDER_NS 1000000ull /* a reordered packet waits at most this for the next one */
#define FF_DRAWS 6               /* random numbers per packet, whatever is on */
#define FF_NOT_FAST UINT64_MAX
#define FF_ONE (9007199254740992.0) /* 2^53: probabilities become 53-bit thresholds */

enum { FF_DROP, FF_DUP, FF_REORDER, FF_CORRUPT, FF_NPROB };

extern const fab_ops_t fab_fault_ops;

typedef struct {
	uint64_t thr[FF_NPROB]; /* P * 2^53: event when (random >> 11) < thr */
	uint64_t delay_ns;
	uint64_t seed;
} ff_cfg_t;

typedef struct {
	uint8_t drop, dup, reorder, corrupt;
	uint64_t pick;     /* corrupt: byte (low 32 bits, scaled) and bit (bits 32..34) */
	uint64_t delay_ns; /* drawn hold in [0, delay_ns] */
} ff_dec_t;

typedef struct {
	uint64_t not_before, deadline, after_k;
	fab_addr_t dest;
	size_t len;
	unsigned char *data;
} ff_slot_t;

typedef struct {
	fab_ep_t base; /* first: fab_ep_t * and ff_ep_t * convert */
	fab_ep_t *inner;
	uint64_t stream;

	/* configuration, written by fab_fault_set under set_lock, read by the sender (seqlock) */
	pthread_mutex_t set_lock;
	_Atomic uint64_t gen;
	_Atomic uint64_t c_thr[FF_NPROB], c_delay_ns, c_seed;

	/* the sender's */
	uint64_t fast_gen; /* gen while nothing is on and nothing held, else FF_NOT_FAST */
	uint64_t seen_gen; /* generation of cfg */
	ff_cfg_t cfg;
	int active;   /* cfg has a network fault */
	uint64_t rng; /* splitmix64 state */
	uint64_t k;   /* packets accepted by the slow path */
	ff_dec_t dec; /* decision of the packet being sent, while dec_valid */
	int dec_valid;
	unsigned char *pool; /* nslots slots + one scratch buffer, max_packet each */
	ff_slot_t *slots;
	uint32_t nslots, nheld, nfree;
	uint32_t *held; /* slot indices in the order they were held */
	uint32_t *free_slots;
	unsigned char *scratch; /* corrupted copy */
	int pool_failed;
	uint64_t nerr; /* for rate-limited logging */

	/* counters: the sender writes, anyone reads */
	_Atomic uint64_t n_sent, n_dropped, n_duplicated, n_reordered, n_delayed, n_corrupted;
} ff_ep_t;

static ff_ep_t *ff_ep(fab_ep_t *e) { return (ff_ep_t *)e; }

/* Log the 1st, 2nd, 4th, 8th... occurrence. */
static int ff_ratelimit(uint64_t *n)
{
	uint64_t c = ++*n;
	return !(c & (c - 1));
}

/* single writer: no read-modify-write instruction needed */
static void ff_count(_Atomic uint64_t *c, uint64_t n)
{
	if (n)
		atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n, memory_order_relaxed);
}

static uint64_t ff_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* splitmix64: state advances by the golden gamma, output is its mix */
static uint64_t ff_next(uint64_t *s)
{
	uint64_t z = *s += 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int ff_prob_ok(double p) { return p >= 0 && p <= 1; } /* false for NaN */

static int ff_check(const gice_faults_t *f, const char *what)
{
	if (!f || (ff_prob_ok(f->drop) && ff_prob_ok(f->dup) && ff_prob_ok(f->reorder) && ff_prob_ok(f->corrupt) &&
		   f->delay_us <= UINT64_MAX / 1000))
		return GICE_OK;
	gice_error("fab", "%s: drop %g, dup %g, reorder %g, corrupt %g must be in [0, 1], delay_us %llu at most %llu",
		   what, f->drop, f->dup, f->reorder, f->corrupt, (unsigned long long)f->delay_us,
		   (unsigned long long)(UINT64_MAX / 1000));
	return GICE_ERR_INVALID;
}

static ff_cfg_t ff_cfg_of(const gice_faults_t *f)
{
	ff_cfg_t c = {.seed = 1};

	if (!f)
		return c;
	c.thr[FF_DROP] = (uint64_t)(f->drop * FF_ONE);
	c.thr[FF_DUP] = (uint64_t)(f->dup * FF_ONE);
	c.thr[FF_REORDER] = (uint64_t)(f->reorder * FF_ONE);
	c.thr[FF_CORRUPT] = (uint64_t)(f->corrupt * FF_ONE);
	c.delay_ns = f->delay_us * 1000;
	c.seed = f->seed;
	return c;
}

static int ff_cfg_active(const ff_cfg_t *c)
{
	return c->thr[FF_DROP] || c->thr[FF_DUP] || c->thr[FF_REORDER] || c->thr[FF_CORRUPT] || c->delay_ns;
}

static void ff_update_fast(ff_ep_t *w)
{
	w->fast_gen = (!w->active && !w->nheld) ? w->seen_gen : FF_NOT_FAST;
}

/* The held-packet pool: allocated once, by the sender, when faults are first on. */
static int ff_pool_alloc(ff_ep_t *w)
{
	size_t mp = w->base.max_packet;
	uint32_t n = (uint32_t)GICE_MAX(FF_SLOTS_MIN, GICE_MIN(FF_SLOTS_MAX, FF_POOL_BYTES / mp));

	if (w->pool || w->pool_failed)
		return w->pool ? GICE_OK : GICE_ERR_NO_MEMORY;
	w->pool = malloc((size_t)(n + 1) * mp);
	w->slots = calloc(n, sizeof(*w->slots));
	w->held = calloc(n, sizeof(*w->held));
	w->free_slots = calloc(n, sizeof(*w->free_slots));
	if (!w->pool || !w->slots || !w->held || !w->free_slots) {
		gice_error("fab", "no memory for %u held packets of %zu bytes: faults without holds or corruption",
			   n, mp);
		free(w->free_slots);
		free(w->held);
		free(w->slots);
		free(w->pool);
		w->pool = NULL;
		w->slots = NULL;
		w->held = w->free_slots = NULL;
		w->pool_failed = 1;
		return GICE_ERR_NO_MEMORY;
	}
	for (uint32_t i = 0; i < n; i++) {
		w->slots[i].data = w->pool + (size_t)i * mp;
		w->free_slots[i] = n - 1 - i;
	}
	w->scratch = w->pool + (size_t)n * mp;
	w->nslots = w->nfree = n;
	return GICE_OK;
}

/* Take configuration c (generation g) as the sender's: reseed, forget a pending decision. */
static void ff_take(ff_ep_t *w, const ff_cfg_t *c, uint64_t g)
{
	w->cfg = *c;
	w->seen_gen = g;
	w->active = ff_cfg_active(c);
	w->rng = ff_mix(c->seed ^ ff_mix(w->stream));
	w->dec_valid = 0;
	if (w->active)
		ff_pool_alloc(w);
	ff_update_fast(w);
}

/* Adopt what fab_fault_set wrote, if it changed and is not being written right now. */
static void ff_adopt(ff_ep_t *w)
{
	uint64_t g = atomic_load_explicit(&w->gen, memory_order_acquire);
	ff_cfg_t c;

	if (g == w->seen_gen || (g & 1))
		return; /* unchanged, or a writer is in the middle: look again at the next call */
	for (int i = 0; i < FF_NPROB; i++)
		c.thr[i] = atomic_load_explicit(&w->c_thr[i], memory_order_relaxed);
	c.delay_ns = atomic_load_explicit(&w->c_delay_ns, memory_order_relaxed);
	c.seed = atomic_load_explicit(&w->c_seed, memory_order_relaxed);
	/* orders the loads above before the check below: a writer that started meanwhile
	 * changed gen, and the copy is dropped */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&w->gen, memory_order_relaxed) != g)
		return;
	ff_take(w, &c, g);
}

static void ff_draw(ff_ep_t *w, ff_dec_t *d)
{
	uint64_t r[FF_DRAWS];

	for (int i = 0; i < FF_DRAWS; i++)
		r[i] = ff_next(&w->rng);
	d->drop = (r[0] >> 11) < w->cfg.thr[FF_DROP];
	d->dup = (r[1] >> 11) < w->cfg.thr[FF_DUP];
	d->reorder = (r[2] >> 11) < w->cfg.thr[FF_REORDER];
	d->corrupt = (r[3] >> 11) < w->cfg.thr[FF_CORRUPT];
	d->pick = r[4];
	d->delay_ns = w->cfg.delay_ns ? (uint64_t)((double)(r[5] >> 11) / FF_ONE * ((double)w->cfg.delay_ns + 1)) : 0;
	if (d->delay_ns > w->cfg.delay_ns)
		d->delay_ns = w->cfg.delay_ns;
}

static int ff_ready(const ff_slot_t *s, uint64_t now, uint64_t k)
{
	return now >= s->not_before && (k >= s->after_k || now >= s->deadline);
}

/* Send the held copies that are ready, in the order they were held; stop at GICE_ERR_AGAIN. */
static void ff_flush(ff_ep_t *w, uint64_t now)
{
	uint32_t j = 0;
	int blocked = 0;

	for (uint32_t i = 0; i < w->nheld; i++) {
		uint32_t idx = w->held[i];
		ff_slot_t *s = &w->slots[idx];

		if (!blocked && ff_ready(s, now, w->k)) {
			int rc = fab_send(w->inner, s->dest, s->data, s->len, NULL, 0);

			if (rc == GICE_ERR_AGAIN) {
				blocked = 1;
			} else {
				if (rc != GICE_OK && ff_ratelimit(&w->nerr))
					gice_error("fab", "send of a held %zu-byte packet to peer %llu failed: %s (lost)",
						   s->len, (unsigned long long)s->dest, gice_status_name(rc));
				w->free_slots[w->nfree++] = idx;
				continue;
			}
		}
		w->held[j++] = idx;
	}
	w->nheld = j;
	atomic_store_explicit(&w->base.held, j, memory_order_relaxed);
}

/* Hold one copy. The caller checked that a slot is free. */
static void ff_hold(ff_ep_t *w, fab_addr_t dest, const void *hdr, size_t hlen, const void *payload, size_t plen,
		    uint64_t not_before, uint64_t after_k, uint64_t deadline)
{
	uint32_t idx = w->free_slots[--w->nfree];
	ff_slot_t *s = &w->slots[idx];

	memcpy(s->data, hdr, hlen);
	if (plen)
		memcpy(s->data + hlen, payload, plen);
	s->len = hlen + plen;
	s->dest = dest;
	s->not_before = not_before;
	s->after_k = after_k;
	s->deadline = deadline;
	w->held[w->nheld++] = idx;
	atomic_store_explicit(&w->base.held, w->nheld, memory_order_relaxed);
}

/* A packet was accepted: the next decision is the next packet's; reordered copies waiting for
 * this packet may go. */
static void ff_accept(ff_ep_t *w)
{
	w->k++;
	w->dec_valid = 0;
	if (w->nheld)
		ff_flush(w, gice_now_ns());
	ff_update_fast(w);
}

/* out of line: keeps ff_send's fast path a test and a tail call */
__attribute__((noinline)) static int ff_send_slow(ff_ep_t *w, fab_addr_t dest, const void *hdr, size_t hlen,
						  const void *payload, size_t plen)
{
	size_t total = hlen + plen;
	int corrupted = 0, dups = 0, hold, rc;
	ff_dec_t *d = &w->dec;

	ff_adopt(w);
	if (w->nheld)
		ff_flush(w, gice_now_ns());
	if (!w->active || hlen > w->base.max_packet || plen > w->base.max_packet - hlen) {
		/* nothing to inject (only held packets to push), or a bad size: the inner endpoint
		 * sends, or rejects and logs */
		rc = fab_send(w->inner, dest, hdr, hlen, payload, plen);
		if (rc == GICE_OK && !w->active)
			ff_accept(w);
		return rc;
	}
	if (!w->dec_valid) {
		ff_draw(w, d);
		w->dec_valid = 1;
	}
	if (d->drop) {
		ff_count(&w->n_sent, 1);
		ff_count(&w->n_dropped, 1);
		ff_accept(w);
		return GICE_OK;
	}
	if (d->corrupt && total && w->scratch) {
		size_t byte = (size_t)(((d->pick & 0xffffffffu) * total) >> 32);

		memcpy(w->scratch, hdr, hlen);
		if (plen)
			memcpy(w->scratch + hlen, payload, plen);
		w->scratch[byte] ^= (unsigned char)(1u << ((d->pick >> 32) & 7));
		hdr = w->scratch;
		hlen = total;
		payload = NULL;
		plen = 0;
		corrupted = 1;
	}
	hold = (d->reorder || d->delay_ns) && w->nfree >= (d->dup ? 2u : 1u);
	if (hold) {
		uint64_t nb = gice_now_ns() + d->delay_ns;
		uint64_t after = d->reorder ? w->k + 2 : 0; /* w->k + 1 is this packet's count */
		uint64_t deadline = d->reorder ? nb + FF_REORDER_NS : nb;

		for (int c = 0; c < (d->dup ? 2 : 1); c++)
			ff_hold(w, dest, hdr, hlen, payload, plen, nb, after, deadline);
		dups = d->dup;
	} else {
		rc = fab_send(w->inner, dest, hdr, hlen, payload, plen);
		if (rc != GICE_OK)
			return rc; /* the decision stays for the retry */
		if (d->dup) {
			rc = fab_send(w->inner, dest, hdr, hlen, payload, plen);
			if (rc == GICE_OK) {
				dups = 1;
			} else if (rc == GICE_ERR_AGAIN && w->nfree) {
				ff_hold(w, dest, hdr, hlen, payload, plen, 0, 0, 0); /* goes at the next call */
				dups = 1;
			} else if (ff_ratelimit(&w->nerr)) {
				gice_warn("fab", "duplicate of a %zu-byte packet to peer %llu not sent: %s", total,
					  (unsigned long long)dest, gice_status_name(rc));
			}
		}
	}
	ff_count(&w->n_sent, 1);
	ff_count(&w->n_duplicated, (uint64_t)dups);
	ff_count(&w->n_corrupted, (uint64_t)corrupted);
	ff_count(&w->n_reordered, (uint64_t)(hold && d->reorder));
	ff_count(&w->n_delayed, (uint64_t)(hold && d->delay_ns));
	ff_accept(w);
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

static int ff_mr_reg(fab_ep_t *ep, void *base, size_t len, fab_mr_info_t *out)
{
	return fab_mr_reg(ff_ep(ep)->inner, base, len, out);
}

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
	.wait_fd = ff_wait_fd,
	.trywait = ff_trywait,
	.mr_reg = ff_mr_reg,
	.read = ff_read,
	.forget = ff_forget,
};

/* ---- public ---- */

int fab_fault_wrap(fab_ep_t *inner, const gice_faults_t *f, uint64_t stream, fab_ep_t **out)
{
	ff_ep_t *w;
	ff_cfg_t c;
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
	if (pthread_mutex_init(&w->set_lock, NULL)) {
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
	w->base.ordered = inner->ordered && !(f && (f->reorder > 0 || f->delay_us > 0));
	w->inner = inner;
	w->stream = stream;
	c = ff_cfg_of(f);
	for (int i = 0; i < FF_NPROB; i++)
		atomic_init(&w->c_thr[i], c.thr[i]);
	atomic_init(&w->c_delay_ns, c.delay_ns);
	atomic_init(&w->c_seed, c.seed);
	atomic_init(&w->gen, 0);
	ff_take(w, &c, 0);
	if (w->active && !w->pool) { /* ff_pool_alloc logged it and freed its part */
		pthread_mutex_destroy(&w->set_lock);
		free(w);
		return GICE_ERR_NO_MEMORY;
	}
	if (w->active) {
		char spec[256];

		gice_faults_format(f, spec, sizeof(spec));
		gice_info("fab", "faults on %s endpoint (stream %llu): %s", inner->provider, (unsigned long long)stream,
			  spec);
	}
	*out = &w->base;
	return GICE_OK;
}

int fab_fault_set(fab_ep_t *ep, const gice_faults_t *f)
{
	ff_ep_t *w = ff_ep(ep);
	ff_cfg_t c;
	uint64_t g;
	int rc;

	if (!ep || ep->ops != &fab_fault_ops) {
		gice_error("fab", "fab_fault_set: endpoint %p is not a fault wrapper", (void *)ep);
		return GICE_ERR_INVALID;
	}
	if ((rc = ff_check(f, "fab_fault_set")))
		return rc;
	if (ep->ordered && f && (f->reorder > 0 || f->delay_us > 0)) {
		gice_error("fab", "fab_fault_set: reorder %g / delay_us %llu on an endpoint that promised order "
				  "(wrap it with reorder or delay on to allow them)", f->reorder,
			   (unsigned long long)f->delay_us);
		return GICE_ERR_UNSUPPORTED;
	}
	c = ff_cfg_of(f);
	pthread_mutex_lock(&w->set_lock);
	g = atomic_load_explicit(&w->gen, memory_order_relaxed);
	atomic_store_explicit(&w->gen, g + 1, memory_order_relaxed); /* odd: being written */
	/* orders the odd gen before the stores below: a reader that sees any of them sees gen
	 * changed at its second look */
	atomic_thread_fence(memory_order_release);
	for (int i = 0; i < FF_NPROB; i++)
		atomic_store_explicit(&w->c_thr[i], c.thr[i], memory_order_relaxed);
	atomic_store_explicit(&w->c_delay_ns, c.delay_ns, memory_order_relaxed);
	atomic_store_explicit(&w->c_seed, c.seed, memory_order_relaxed);
	/* publishes the stores above with the even gen */
	atomic_store_explicit(&w->gen, g + 2, memory_order_release);
	pthread_mutex_unlock(&w->set_lock);
	if (gice_log_enabled(GICE_LOG_INFO, "fab")) {
		char spec[256];

		gice_faults_format(f, spec, sizeof(spec));
		gice_info("fab", "faults on %s endpoint (stream %llu) now: %s", ep->provider,
			  (unsigned long long)w->stream, *spec ? spec : "none");
	}
	return GICE_OK;
}

int fab_fault_stats(fab_ep_t *ep, fab_fault_stats_t *st)
{
	ff_ep_t *w = ff_ep(ep);

	if (!ep || ep->ops != &fab_fault_ops || !st) {
		gice_error("fab", "fab_fault_stats: endpoint %p is not a fault wrapper (or st is NULL)", (void *)ep);
		return GICE_ERR_INVALID;
	}
	st->sent = atomic_load_explicit(&w->n_sent, memory_order_relaxed);
	st->dropped = atomic_load_explicit(&w->n_dropped, memory_order_relaxed);
	st->duplicated = atomic_load_explicit(&w->n_duplicated, memory_order_relaxed);
	st->reordered = atomic_load_explicit(&w->n_reordered, memory_order_relaxed);
	st->delayed = atomic_load_explicit(&w->n_delayed, memory_order_relaxed);
	st->corrupted = atomic_load_explicit(&w->n_corrupted, memory_order_relaxed);
	return GICE_OK;
}
