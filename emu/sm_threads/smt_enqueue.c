/* smt_enqueue.c: the enqueue side of streams (see sm_threads.h): launch, wait_value and
 * write_value put a command into the stream's ring without a lock; a launch onto an idle stream
 * is started here, without the stream thread (smt_stream.c runs the rest). */
#include "emu/sm_threads/smt_internal.h"

#include <sched.h>
#include <stdint.h>

#define SMT_MAX_BLOCKS INT32_MAX

/* Enqueue c; for a launch with prep, prep fills its arg for the queue position first. No lock:
 * an enqueuer claims the next position (a CAS on claimed, only while the queue has room), fills
 * it, then publishes it (head) once every earlier claim is published. A lone enqueuer never
 * waits; concurrent ones wait only for an earlier one's few stores (yielding, in case it was
 * preempted between its claim and its publication). */
static int stream_push_prep(smt_stream_t *s, struct smt_cmd *c, smt_prep_fn prep, void *ctx)
{
	uint64_t pos = atomic_load_explicit(&s->claimed, memory_order_relaxed), tail;
	int rc = GICE_OK;

	do {
		/* acquire: the stream thread is done reading the slot we are about to overwrite */
		tail = atomic_load_explicit(&s->tail, memory_order_acquire);
		if (pos - tail >= s->depth) {
			gice_error("smt", "device %u stream %u: command queue full (%u commands, "
					  "GICE_SMT_STREAM_DEPTH), cannot enqueue %s",
				   s->d->dev_id, s->slot, s->depth, smt_cmd_name(c->op));
			return GICE_ERR_NO_MEMORY;
		}
	} while (!atomic_compare_exchange_weak_explicit(&s->claimed, &pos, pos + 1, memory_order_relaxed,
							memory_order_relaxed));
	if (prep && (rc = prep(ctx, (uint32_t)(pos % s->depth), &c->arg)))
		*c = (struct smt_cmd){.op = SMT_CMD_NOP}; /* the position is ours: it must be filled */
	/* acquire: what the earlier claims' enqueuers did before publishing (a direct launch's
	 * record) */
	for (uint32_t i = 1; atomic_load_explicit(&s->head, memory_order_acquire) != pos; i++) {
		if (i % 64 == 0)
			sched_yield();
		else
			gice_cpu_relax();
	}
	tail = atomic_load_explicit(&s->tail, memory_order_acquire);
	/* A launch onto an idle stream (every command done, its kernel ended, no error to skip
	 * it for) is started here: the blocks go to the SMs through memory, as a GPU's front end
	 * takes a kernel from the pushbuffer, with no hop through the stream thread, which only
	 * steps past it (the record's tail covers its position; its slot is not written). The
	 * record is RUNNING before head shows the command, so a command enqueued after it waits
	 * for its end (kernel_wait); no SM takes a block before smt_kernel_start, so its completion
	 * (tail) cannot pass head. */
	if (c->op == SMT_CMD_LAUNCH && !c->coop && tail == pos &&
	    atomic_load_explicit(&s->k->state, memory_order_acquire) == SMT_K_DONE &&
	    !atomic_load_explicit(&s->err, memory_order_relaxed) && !tm_region_status(s->d->tm)) {
		uint32_t gen = smt_kernel_fill(s, c, pos);
		/* release: the record before the stream thread (or the next enqueuer) sees the
		 * position */
		atomic_store_explicit(&s->head, pos + 1, memory_order_release);
		smt_kernel_start(s, c, gen);
		return GICE_OK; /* the stream thread need not wake for it */
	}
	s->ring[pos % s->depth] = *c;
	/* release: the slot before the stream thread can see it */
	atomic_store_explicit(&s->head, pos + 1, memory_order_release);
	/* seq_cst bump then sleeping read: pairs with sleep_on */
	atomic_fetch_add_explicit(&s->cmd_seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&s->sleeping, memory_order_seq_cst))
		gice_futex_wake(&s->cmd_seq, 1);
	return rc;
}

static int stream_push(smt_stream_t *s, struct smt_cmd *c) { return stream_push_prep(s, c, NULL, NULL); }

uint32_t smt_stream_depth(const smt_stream_t *s) { return s->depth; }

static int counter_check(smt_stream_t *s, uint32_t counter, const char *what)
{
	uint32_t n = tm_region_layout(s->d->tm)->n_counters;

	if (counter >= n) {
		gice_error("smt", "device %u stream %u: %s on counter %u, device has %u counters",
			   s->d->dev_id, s->slot, what, counter, n);
		return GICE_ERR_INVALID;
	}
	return GICE_OK;
}

int smt_launch(smt_stream_t *s, smt_block_fn fn, void *arg, uint32_t nblocks,
	       void (*on_done)(void *arg))
{
	return smt_launch_flags(s, fn, arg, nblocks, 0, on_done);
}

int smt_launch_flags(smt_stream_t *s, smt_block_fn fn, void *arg, uint32_t nblocks, uint32_t flags,
		     void (*on_done)(void *arg))
{
	return smt_launch_prep(s, fn, nblocks, flags, on_done, NULL, arg);
}

/* prep NULL: ctx is the arg itself */
int smt_launch_prep(smt_stream_t *s, smt_block_fn fn, uint32_t nblocks, uint32_t flags,
		    void (*on_done)(void *arg), smt_prep_fn prep, void *ctx)
{
	struct smt_cmd c = {.op = SMT_CMD_LAUNCH, .fn = fn, .arg = prep ? NULL : ctx, .nblocks = nblocks,
			    .on_done = on_done, .coop = !!(flags & SMT_LAUNCH_COOP)};

	if (!fn || nblocks < 1 || nblocks > SMT_MAX_BLOCKS) {
		gice_error("smt", "launch of %u blocks (must be in [1, %u])%s", nblocks, SMT_MAX_BLOCKS,
			   fn ? "" : " with no kernel function");
		return GICE_ERR_INVALID;
	}
	return stream_push_prep(s, &c, prep, ctx);
}

static int wait_value(smt_stream_t *s, uint32_t counter, tm_cmp_t cmp, uint64_t value, uint64_t timeout_ns,
		      int idle)
{
	struct smt_cmd c = {.op = SMT_CMD_WAIT_VALUE, .counter = counter, .cmp = cmp, .value = value,
			    .timeout_ns = timeout_ns, .idle = idle};

	if ((unsigned)cmp > TM_CMP_LE) {
		gice_error("smt", "wait_value on counter %u: bad comparison %d", counter, (int)cmp);
		return GICE_ERR_INVALID;
	}
	if (counter_check(s, counter, "wait_value"))
		return GICE_ERR_INVALID;
	return stream_push(s, &c);
}

int smt_wait_value(smt_stream_t *s, uint32_t counter, tm_cmp_t cmp, uint64_t value, uint64_t timeout_ns)
{
	return wait_value(s, counter, cmp, value, timeout_ns, 0);
}

int smt_wait_value_idle(smt_stream_t *s, uint32_t counter, tm_cmp_t cmp, uint64_t value, uint64_t idle_ns)
{
	return wait_value(s, counter, cmp, value, idle_ns, 1);
}

int smt_write_value(smt_stream_t *s, uint32_t counter, uint64_t value, int add)
{
	struct smt_cmd c = {.op = SMT_CMD_WRITE_VALUE, .counter = counter, .value = value, .add = !!add};

	if (counter_check(s, counter, "write_value"))
		return GICE_ERR_INVALID;
	return stream_push(s, &c);
}
