/* smt_stream.c: streams (see sm_threads.h). A stream is an in-order ring of commands (launch,
 * wait_value, write_value) run by its own thread: stream create, destroy, sync and drain, the
 * stream thread and the device abort; smt_enqueue.c puts the commands in. A launch publishes
 * the kernel record of the stream's slot and wakes SMs (its enqueuer does, when the stream is
 * idle); the record's protocol, the sleeping and the spin budget are described in
 * sm_threads.c, which runs the blocks. */
#include "emu/sm_threads/smt_internal.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A launch wakes at most as many SMs as there are CPUs; if blocks are still not handed out
 * this long after, it wakes SMs for them (blocks that wait on each other each need an SM). */
#define SMT_TOPUP_NS 200000ull

static const char *const smt_cmd_names[] = {
#define SMT_CMD_NAME_(name, str) str,
	SMT_CMD_LIST(SMT_CMD_NAME_)
#undef SMT_CMD_NAME_
};

const char *smt_cmd_name(uint32_t op) { return op < GICE_ARRAY_SIZE(smt_cmd_names) ? smt_cmd_names[op] : "?"; }

static const char *const smt_cmp_names[] = {"==", "!=", ">", ">=", "<", "<="};

/* ---- stream thread ---- */

/* Sleep on *word while it equals `seen`, announcing it in *sleeping (see sm_threads.c's file comment). */
static void sleep_on(_Atomic uint32_t *word, _Atomic uint32_t *sleeping, uint32_t seen)
{
	atomic_store_explicit(sleeping, 1, memory_order_seq_cst);
	/* seq_cst store then seq_cst load: pairs with the waker's bump-then-read-sleeping */
	if (atomic_load_explicit(word, memory_order_seq_cst) == seen)
		gice_futex_wait(word, seen, UINT64_MAX);
	atomic_store_explicit(sleeping, 0, memory_order_relaxed);
}

/* After a publish (work_seq bumped): wake up to n sleeping SMs, less the SMs spinning, which
 * take blocks without a wake (an SM that stops spinning registers as a sleeper after the bump
 * and so scans again before it sleeps). seq_cst reads: pair with sm_main's registration. */
static void sm_wake(smt_dev_t *d, uint32_t n)
{
	if (!atomic_load_explicit(&d->sleepers, memory_order_seq_cst))
		return;
	uint32_t spinning = atomic_load_explicit(&d->sm_spinning, memory_order_seq_cst);
	if (n > spinning)
		gice_futex_wake(&d->work_seq, (int)(n - spinning));
}

/* Fill the stream's kernel record for launch c, command number tail; it is RUNNING from here
 * on, but no SM can take a block before smt_kernel_start. Returns the launch generation. */
uint32_t smt_kernel_fill(smt_stream_t *s, const struct smt_cmd *c, uint64_t tail)
{
	struct smt_kernel *k = s->k;
	uint32_t gen = atomic_load_explicit(&k->gen, memory_order_relaxed) + 1;

	/* seqlock write side: gen first, then each field with release (new gen before any new
	 * field; release stores rather than a fence, which ThreadSanitizer does not model) */
	atomic_store_explicit(&k->gen, gen, memory_order_relaxed);
	atomic_store_explicit(&k->fn, c->fn, memory_order_release);
	atomic_store_explicit(&k->arg, c->arg, memory_order_release);
	atomic_store_explicit(&k->nblocks, c->nblocks, memory_order_release);
	atomic_store_explicit(&k->on_done, c->on_done, memory_order_release);
	atomic_store_explicit(&k->s, s, memory_order_release);
	atomic_store_explicit(&k->tail, tail + 1, memory_order_release);
	atomic_store_explicit(&k->done, 0, memory_order_relaxed);
	atomic_store_explicit(&k->state, SMT_K_RUNNING, memory_order_release);
	return gen;
}

/* Hand out the blocks of the filled record and wake SMs for them. Its last block completes the
 * command (smt_stream_complete). */
void smt_kernel_start(smt_stream_t *s, const struct smt_cmd *c, uint32_t gen)
{
	smt_dev_t *d = s->d;
	struct smt_kernel *k = s->k;

	/* release: fields (and everything the stream saw, e.g. the previous kernel's writes)
	 * before an SM can take block 0 */
	atomic_store_explicit(&k->next, (uint64_t)gen << 32, memory_order_release);
	/* seq_cst (an RMW, the same instruction): sm_unspin's reasoning needs it in the order */
	atomic_fetch_or_explicit(&d->active_mask, 1ull << s->slot, memory_order_seq_cst);
	/* seq_cst bump then sleepers read (sm_wake): pairs with sm_main's registration */
	atomic_fetch_add_explicit(&d->work_seq, 1, memory_order_seq_cst);
	uint32_t want = GICE_MIN(c->nblocks, d->n_sms);
	if (!c->coop) /* as many as can run at once; the rest if the grid stalls (kernel_topup) */
		want = GICE_MIN(want, d->max_spinners + 1);
	sm_wake(d, want);
}

/* Blocks that wait on each other need an SM each: if some of the running kernel's are still not
 * handed out after a while (the SMs woken wait inside theirs), wake SMs for all of them. */
static void kernel_topup(smt_stream_t *s)
{
	struct smt_kernel *k = s->k;
	uint32_t gen = atomic_load_explicit(&k->gen, memory_order_relaxed);
	uint32_t nb = atomic_load_explicit(&k->nblocks, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&k->next, memory_order_relaxed);

	if (atomic_load_explicit(&k->state, memory_order_relaxed) != SMT_K_DONE && (uint32_t)(t >> 32) == gen &&
	    (uint32_t)t < nb)
		sm_wake(s->d, GICE_MIN(nb - (uint32_t)t, s->d->n_sms));
}

/* The stream thread, before its next command (or before it exits: the last block touches the
 * stream until DONE): wait for the stream's kernel to end, asleep at once (RUNNING -> WAITING;
 * the last block wakes it). No spin: on a small machine a spinning stream thread takes the
 * core the blocks need. */
static void kernel_wait(smt_stream_t *s)
{
	struct smt_kernel *k = s->k;
	uint32_t expect = SMT_K_RUNNING;
	uint64_t nap = SMT_TOPUP_NS;

	/* acquire: pairs with kernel_finish's exchange, so the blocks' writes are visible */
	if (atomic_load_explicit(&k->state, memory_order_acquire) == SMT_K_DONE)
		return;
	atomic_compare_exchange_strong_explicit(&k->state, &expect, SMT_K_WAITING, memory_order_acquire,
						memory_order_acquire);
	while (atomic_load_explicit(&k->state, memory_order_acquire) != SMT_K_DONE) {
		if (gice_futex_wait(&k->state, SMT_K_WAITING, nap) != GICE_ERR_TIMED_OUT || nap == UINT64_MAX)
			continue;
		nap = UINT64_MAX; /* once */
		kernel_topup(s);
	}
}

/* Run the launch command c, the stream's command number tail. The stream thread goes on at
 * once: the command after it waits for the kernel's end (kernel_wait). */
static void stream_launch(smt_stream_t *s, const struct smt_cmd *c, uint64_t tail)
{
	smt_kernel_start(s, c, smt_kernel_fill(s, c, tail));
}

static int stream_wait(smt_stream_t *s, const struct smt_cmd *c)
{
	uint64_t found = 0;
	int rc = c->idle ? tm_counter_wait_idle(s->d->tm, c->counter, c->cmp, c->value, c->timeout_ns,
						s->d->spin_ns, &found)
			 : tm_counter_wait(s->d->tm, c->counter, c->cmp, c->value, c->timeout_ns, s->d->spin_ns,
					   &found);

	if (rc && rc == tm_region_status(s->d->tm))
		gice_debug("smt", "device %u stream %u: wait on counter %u ended: device aborted (%s)", s->d->dev_id,
			   s->slot, c->counter, gice_status_name(rc));
	else if (rc)
		gice_error("smt",
			   "device %u stream %u: wait on counter %u for value %s %llu (timeout %llu ns) "
			   "failed: %s, found %llu",
			   s->d->dev_id, s->slot, c->counter, smt_cmp_names[c->cmp],
			   (unsigned long long)c->value, (unsigned long long)c->timeout_ns,
			   gice_status_name(rc), (unsigned long long)found);
	return rc;
}

/* Run command c, number tail of the stream. Returns 1 when it completed the command itself
 * (the caller advances the tail), 0 when a kernel's last block did. */
static int stream_exec(smt_stream_t *s, const struct smt_cmd *c, uint64_t tail)
{
	int rc = tm_region_status(s->d->tm);

	if (c->op == SMT_CMD_NOP)
		return 1;
	if (rc) /* the device was aborted: nothing more runs, the status is the stream's error */
		smt_stream_fail(s, rc);
	if (atomic_load_explicit(&s->err, memory_order_relaxed)) {
		/* Sticky error: skip, but still let the owner of a launch's arg release it. */
		gice_debug("smt", "device %u stream %u: skipping %s after an earlier error",
			   s->d->dev_id, s->slot, smt_cmd_name(c->op));
		if (c->op == SMT_CMD_LAUNCH && c->on_done)
			c->on_done(c->arg);
		return 1;
	}
	uint64_t t0 = s->trace_fn ? gice_now_ns() : 0;
	switch (c->op) {
	case SMT_CMD_LAUNCH:
		stream_launch(s, c, tail);
		return 0;
	case SMT_CMD_WAIT_VALUE:
		rc = stream_wait(s, c);
		break;
	case SMT_CMD_WRITE_VALUE:
		if (s->d->engine_step) { /* what the write triggers starts now, on this thread */
			uint32_t watching = tm_counter_write_quiet(s->d->tm, c->counter, c->value, c->add);
			if (watching) /* no CT watches it: nothing to start, no pass to pay */
				s->d->engine_step(s->d->engine_arg, watching);
		} else if (c->add)
			tm_counter_add(s->d->tm, c->counter, c->value);
		else
			tm_counter_set(s->d->tm, c->counter, c->value);
		break;
	}
	if (s->trace_fn) {
		smt_cmd_trace_t t = {.write = c->op == SMT_CMD_WRITE_VALUE, .counter = c->counter, .value = c->value,
				     .t_start = t0, .t_end = gice_now_ns(), .status = rc};
		s->trace_fn(s->trace_arg, &t);
	}
	if (rc)
		smt_stream_fail(s, rc);
	return 1;
}

void smt_stream_set_trace(smt_stream_t *s, smt_trace_fn fn, void *arg)
{
	s->trace_fn = fn;
	s->trace_arg = arg;
}

/* Command tail - 1 finished: publish the new tail and wake a syncing host. */
void smt_stream_complete(smt_stream_t *s, uint64_t tail)
{
	/* release: the command's effects (kernel writes, counter writes, err) before a syncing
	 * host sees the new tail; seq_cst bump pairs with sync's registration */
	atomic_store_explicit(&s->tail, tail, memory_order_release);
	atomic_fetch_add_explicit(&s->done_seq, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&s->sync_waiters, memory_order_seq_cst))
		return;
	/* wake a sync only when what it waits for is done, not at every command (a host blocked
	 * in a sync costs no CPU, as on a GPU); woken syncs not done yet register again */
	uint64_t want = atomic_load_explicit(&s->sync_target, memory_order_seq_cst);
	if (tail >= want && atomic_compare_exchange_strong_explicit(&s->sync_target, &want, UINT64_MAX,
								     memory_order_seq_cst, memory_order_seq_cst))
		gice_futex_wake(&s->done_seq, INT_MAX);
}

void smt_stream_fail(smt_stream_t *s, int status)
{
	int zero = 0;

	atomic_compare_exchange_strong_explicit(&s->err, &zero, status, memory_order_relaxed, memory_order_relaxed);
}

uint32_t smt_stream_id(const smt_stream_t *s) { return s->slot; }

void smt_abort(smt_dev_t *d)
{
	pthread_mutex_lock(&d->lock);
	for (uint32_t i = 0; i < SMT_MAX_STREAMS; i++) {
		smt_stream_t *s = d->streams[i];
		if (!s)
			continue;
		/* syncs re-check and see the abort (tm_region_status); the stream thread skips */
		atomic_fetch_add_explicit(&s->done_seq, 1, memory_order_seq_cst);
		gice_futex_wake(&s->done_seq, INT_MAX);
		atomic_fetch_add_explicit(&s->cmd_seq, 1, memory_order_seq_cst);
		gice_futex_wake(&s->cmd_seq, 1);
	}
	pthread_mutex_unlock(&d->lock);
}

static void *stream_main(void *p)
{
	smt_stream_t *s = p;
	uint64_t spin_ns = s->d->spin_ns;
	uint64_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
	char name[16];

	snprintf(name, sizeof(name), "gice-d%u-st%u", s->d->dev_id, s->slot);
	pthread_setname_np(pthread_self(), name);

	for (;;) {
		/* seq before head (acquire both): an enqueue we miss below bumps seq after this */
		uint32_t seen = atomic_load_explicit(&s->cmd_seq, memory_order_acquire);
		/* commands done without us (launches their enqueuer started: smt_launch_prep) */
		uint64_t done = atomic_load_explicit(&s->tail, memory_order_acquire);
		if (tail < done)
			tail = done;
		if (atomic_load_explicit(&s->head, memory_order_acquire) != tail) {
			/* acquire: a launch started by its enqueuer filled the record (its tail) before
			 * head showed it; its slot was not written, and may hold an older command */
			if (atomic_load_explicit(&s->k->tail, memory_order_acquire) > tail) {
				tail++; /* its kernel runs: what follows waits for it (kernel_wait) */
				continue;
			}
			struct smt_cmd c = s->ring[tail % s->depth];
			kernel_wait(s); /* commands run in order: a launch before this one ends first */
			if (stream_exec(s, &c, tail))
				smt_stream_complete(s, tail + 1);
			tail++;
			continue;
		}
		if (atomic_load_explicit(&s->stop, memory_order_acquire)) {
			kernel_wait(s);
			break;
		}
		/* empty: spin a little (counted in the device's budget, which spinning SMs yield),
		 * then sleep until an enqueue (or stop) bumps cmd_seq */
		if (!spin_ns) {
			sleep_on(&s->cmd_seq, &s->sleeping, seen);
			continue;
		}
		atomic_fetch_add_explicit(&s->d->spinning, 1, memory_order_relaxed);
		uint64_t spin_end = gice_now_ns() + spin_ns;
		for (uint32_t i = 0;; i++) {
			if (atomic_load_explicit(&s->cmd_seq, memory_order_relaxed) != seen) {
				spin_put(s->d);
				break;
			}
			if ((i & 15) == 15 && gice_now_ns() >= spin_end) {
				spin_put(s->d);
				sleep_on(&s->cmd_seq, &s->sleeping, seen);
				break;
			}
			spin_pause(s->d, i);
		}
	}
	return NULL;
}

/* ---- streams ---- */

int smt_stream_create(smt_dev_t *d, smt_stream_t **out)
{
	const gice_param_t *p = gice_param_find(smt_params, "GICE_SMT_STREAM_DEPTH");
	smt_stream_t *s;
	uint64_t depth;
	int rc;

	if (!d || !out)
		return GICE_ERR_INVALID;
	rc = gice_param_u64(p, &depth);
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s) {
		gice_error("smt", "device %u: no memory for a stream", d->dev_id);
		return GICE_ERR_NO_MEMORY;
	}
	s->d = d;
	s->depth = (uint32_t)depth;
	atomic_init(&s->sync_target, UINT64_MAX);
	s->ring = calloc(depth, sizeof(*s->ring));
	if (!s->ring) {
		gice_error("smt", "device %u: no memory for a stream ring of %u commands", d->dev_id,
			   s->depth);
		rc = GICE_ERR_NO_MEMORY;
		goto err_free_stream;
	}
	pthread_mutex_lock(&d->lock);
	for (s->slot = 0; s->slot < SMT_MAX_STREAMS && d->streams[s->slot]; s->slot++)
		;
	if (s->slot == SMT_MAX_STREAMS) {
		pthread_mutex_unlock(&d->lock);
		gice_error("smt", "device %u: all %u streams are in use", d->dev_id, SMT_MAX_STREAMS);
		rc = GICE_ERR_NO_MEMORY;
		goto err_free_ring;
	}
	d->streams[s->slot] = s;
	s->k = &d->kernels[s->slot];
	pthread_mutex_unlock(&d->lock);

	rc = pthread_create(&s->thread, NULL, stream_main, s);
	if (rc) {
		gice_error("smt", "device %u: starting stream thread %u: %s", d->dev_id, s->slot,
			   strerror(rc));
		rc = GICE_ERR_NO_MEMORY;
		goto err_release_slot;
	}
	*out = s;
	return GICE_OK;

err_release_slot:
	pthread_mutex_lock(&d->lock);
	d->streams[s->slot] = NULL;
	pthread_mutex_unlock(&d->lock);
err_free_ring:
	free(s->ring);
err_free_stream:
	free(s);
	return rc;
}

/* What moves a stream: commands finishing, its kernel's blocks finishing. */
static uint64_t stream_moves(smt_stream_t *s)
{
	return atomic_load_explicit(&s->tail, memory_order_relaxed) * 0x9e3779b97f4a7c15ull ^
	       atomic_load_explicit(&s->k->next, memory_order_relaxed) ^
	       atomic_load_explicit(&s->k->done, memory_order_relaxed);
}

/* Idle drain: did the stream or its device move since *seen / since? A wait asleep on the
 * device's counters counts too: it is bounded by its own timeout and ends in progress or an
 * error that the stream reports. */
static int stream_progressed(smt_stream_t *s, uint64_t *seen, uint64_t since)
{
	uint64_t m = stream_moves(s);
	int moved = m != *seen;

	*seen = m;
	return moved || tm_progress_ns(s->d->tm) > since || tm_waiting(s->d->tm) > 0;
}

#define SYNC_NAP_NS 100000000ull

/* Wait until tail reaches target, at most timeout_ns (idle: timeout_ns without progress).
 * The device's abort ends it with the abort status. */
static int stream_drain(smt_stream_t *s, uint64_t target, uint64_t timeout_ns, int idle)
{
	uint64_t start = gice_now_ns(), moves = stream_moves(s);
	uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
	uint64_t spin_end = GICE_MIN(deadline, start + s->d->spin_ns);
	uint64_t topup = start + SMT_TOPUP_NS;
	int rc = GICE_OK;

	/* acquire on tail: the finished commands' effects are visible to the caller */
	for (uint32_t i = 0; atomic_load_explicit(&s->tail, memory_order_acquire) < target; i++) {
		if ((i & 15) == 15 && gice_now_ns() >= spin_end)
			goto sleep;
		spin_pause(s->d, i);
	}
	return GICE_OK;

sleep:
	/* register, then read seq, then check tail (pairs with stream_main's bump + read) */
	atomic_fetch_add_explicit(&s->sync_waiters, 1, memory_order_seq_cst);
	for (;;) {
		uint32_t seen = atomic_load_explicit(&s->done_seq, memory_order_seq_cst);
		if (atomic_load_explicit(&s->tail, memory_order_acquire) >= target)
			break;
		if ((rc = tm_region_status(s->d->tm)))
			break;
		uint64_t now = gice_now_ns();
		if (now >= deadline) {
			if (idle && stream_progressed(s, &moves, deadline - timeout_ns)) {
				deadline = now + timeout_ns;
				continue;
			}
			rc = GICE_ERR_TIMED_OUT;
			break;
		}
		/* register the target (the smallest of the syncs asleep); a sync whose registration a
		 * concurrent one's wake-up took looks again within SYNC_NAP_NS */
		uint64_t want = atomic_load_explicit(&s->sync_target, memory_order_seq_cst);
		while (target < want && !atomic_compare_exchange_weak_explicit(&s->sync_target, &want, target,
									       memory_order_seq_cst, memory_order_seq_cst))
			;
		if (topup && now >= topup) { /* a launch the stream thread does not watch (direct) */
			topup = 0;
			kernel_topup(s);
		}
		gice_futex_wait(&s->done_seq, seen,
				GICE_MIN(deadline - now, topup ? GICE_MIN(topup - now, SYNC_NAP_NS) : SYNC_NAP_NS));
	}
	atomic_fetch_sub_explicit(&s->sync_waiters, 1, memory_order_relaxed);
	return rc;
}

static int stream_sync(smt_stream_t *s, uint64_t timeout_ns, int idle)
{
	uint64_t target = atomic_load_explicit(&s->head, memory_order_acquire);
	int rc = stream_drain(s, target, timeout_ns, idle);

	if (rc == GICE_ERR_TIMED_OUT) {
		gice_log(idle ? GICE_LOG_ERROR : GICE_LOG_DEBUG, "smt",
			 "device %u stream %u: sync timed out: %s %llu ms with %llu of %llu commands done",
			 s->d->dev_id, s->slot, idle ? "no progress for" : "waited", (unsigned long long)(timeout_ns / 1000000),
			 (unsigned long long)atomic_load_explicit(&s->tail, memory_order_relaxed),
			 (unsigned long long)target);
		return rc;
	}
	if (rc) /* aborted: the stream stops where it is */
		return rc;
	return atomic_exchange_explicit(&s->err, 0, memory_order_relaxed);
}

int smt_stream_sync(smt_stream_t *s, uint64_t timeout_ns) { return stream_sync(s, timeout_ns, 0); }
int smt_stream_sync_idle(smt_stream_t *s, uint64_t idle_ns) { return stream_sync(s, idle_ns, 1); }

void smt_stream_stop(smt_stream_t *s)
{
	/* stop before the seq bump: the stream thread re-checks head, then stop, after a wake. On
	 * a device that was aborted it skips what is queued, except the kernel that runs, whose
	 * end it waits for (kernel_wait), maybe forever */
	atomic_store_explicit(&s->stop, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&s->cmd_seq, 1, memory_order_seq_cst);
	gice_futex_wake(&s->cmd_seq, 1);
}

int smt_stream_destroy(smt_stream_t *s, uint64_t timeout_ns)
{
	smt_dev_t *d;
	int err;

	if (!s)
		return GICE_OK;
	d = s->d;
	if (stream_drain(s, atomic_load_explicit(&s->head, memory_order_acquire), timeout_ns, 0) ==
	    GICE_ERR_TIMED_OUT) {
		gice_error("smt", "device %u stream %u: destroy timed out after %llu ns, stream left alive",
			   d->dev_id, s->slot, (unsigned long long)timeout_ns);
		return GICE_ERR_TIMED_OUT;
	}
	smt_stream_stop(s);
	pthread_join(s->thread, NULL);

	err = atomic_load_explicit(&s->err, memory_order_relaxed);
	if (err)
		gice_warn("smt", "device %u stream %u: destroyed with an unreported error: %s",
			  d->dev_id, s->slot, gice_status_name(err));

	pthread_mutex_lock(&d->lock);
	d->streams[s->slot] = NULL;
	pthread_mutex_unlock(&d->lock);

	free(s->ring);
	free(s);
	return GICE_OK;
}
