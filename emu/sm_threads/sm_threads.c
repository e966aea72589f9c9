/* sm_threads.c: SM worker threads, the block scheduler and the spin budget (see sm_threads.h);
 * the streams that launch kernels are in smt_stream.c, the structures both use in smt_internal.h.
 *
 * Block scheduler. Each stream uses one kernel record (a stream runs its commands in order, so
 * it has at most one kernel in flight): kernels[slot] of the device, where slot is the stream's
 * index. The records belong to the device, not to the streams, so an SM may look at a record
 * whatever happens to the stream, until smt_destroy joins the SMs. Launching fills the record
 * and sets the slot's bit in active_mask; SMs scan the set bits and take blocks with a
 * fetch_add on the record's `next` word. A launch onto an idle stream is published by the
 * enqueuing host thread itself (a GPU front end taking the kernel from its pushbuffer); one
 * queued behind other commands, by the stream thread when its turn comes. The last block to
 * finish clears the bit and completes the launch command itself: on_done, the stream's tail,
 * the syncing host's wake-up; then it marks the record DONE, and wakes the stream thread only
 * if that waits for it (a command queued behind the kernel). So launch + sync on an idle stream
 * takes no thread hand-off but host -> SM and last block -> host. No allocation per kernel or
 * block.
 *
 * A record is reused by the stream's next launch (or a later stream in the same slot), possibly
 * while a slow SM is still looking at it, so `next` carries the launch generation in its high
 * 32 bits and the block index in the low 32, and the record's other fields follow a seqlock
 * discipline: the launcher stores gen, then the fields (release), then `next`; an SM takes a
 * block (fetch_add), reads the fields (acquire), re-reads gen, and drops the block unless gen
 * matches the one in `next` and the index is below nblocks. A block index below nblocks of a
 * matching generation cannot be stale: the kernel cannot end (and the record cannot be reused)
 * until that block has run.
 *
 * The stream (smt_stream_t) outlives the SM's use of it: the stream thread waits for DONE, which
 * the SM stores after its last access to the stream, and smt_stream_destroy joins that thread
 * before freeing the stream. After DONE the SM touches only the record (device memory).
 *
 * Sleeping. Idle SMs spin GICE_SMT_SPIN_US, then register in `sleepers`, read `work_seq`,
 * scan once more and futex-wait on that seq; a launch publishes, bumps work_seq and wakes if
 * sleepers > 0 (seq_cst pair: either the launcher sees the sleeper or the sleeper's scan sees
 * the kernel). It wakes as many SMs as the grid has blocks, less the SMs spinning. Stream
 * threads use the same pattern on cmd_seq (enqueue) and on the kernel record's state (kernel
 * end); smt_stream_sync on done_seq (command end).
 *
 * Spinning is budgeted: idle SMs spin only while fewer than GICE_SMT_SPINNERS threads of the
 * device spin (by default one fewer than the CPUs the process may use, leaving one to the host
 * thread), the others sleep at once. An idle stream thread spins for commands whatever the
 * budget, and a spinning SM that finds the budget exceeded goes to sleep: the stream thread is
 * the first hop of a launch, an SM the second, reached with one wake-up. On 2 cores, a host
 * thread syncing plus 4 spinning SMs and a spinning stream thread left the thread that had
 * work waiting for a time slice: launch + sync took ~50 us. A stream thread never spins on its
 * kernel's end (the last block completes the launch; a spinning stream thread would take the
 * core that block needs).
 */
#include "emu/sm_threads/smt_internal.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SMT_MAX_SMS 256

const gice_param_t smt_params[] = {
	{"GICE_SMS", "4", "SM worker threads per emulated device", GICE_PARAM_U64, 1, SMT_MAX_SMS},
	{"GICE_SMT_SPIN_US", "20", "microseconds an idle SM or stream thread spins before sleeping",
	 GICE_PARAM_U64, 0, 1000000},
	{"GICE_SMT_STREAM_DEPTH", "1024", "commands a stream can hold (launches, waits, writes)",
	 GICE_PARAM_U64, 1, 1u << 20},
	{"GICE_SM_NICE", "10",
	 "SM threads run this much nicer than the process (0-19): they are compute, and the CT and stream "
	 "threads, which stand for hardware engines, must get a core at once when a trigger or packet "
	 "needs them",
	 GICE_PARAM_U64, 0, 19},
	{"GICE_SMT_SPINNERS", "0",
	 "idle SM and stream threads of a device that may spin at once, the others sleep at once "
	 "(0: the CPUs this process may use, minus one, at least 1)",
	 GICE_PARAM_U64, 0, 1024},
	{NULL, NULL, NULL, 0, 0, 0},
};

/* ---- SM side ---- */

/* An SM takes a spinning slot of the device's budget: 1 if it may spin (it must call spin_put
 * after, and stop when spin_over), 0 if it should sleep at once. */
static int spin_get(smt_dev_t *d) { return gice_spin_get(&d->spinning, d->max_spinners); }

/* More threads spin than the budget (a stream thread started): a spinning SM yields. */
static int spin_over(smt_dev_t *d)
{
	return atomic_load_explicit(&d->spinning, memory_order_relaxed) > d->max_spinners;
}

/* Last block of k ended (the done fetch_add chain brought every block's writes here): unpublish
 * it, complete the launch command of its stream (on_done, tail, the syncing host's wake-up),
 * then mark the record DONE and wake the stream thread. */
static void kernel_finish(smt_dev_t *d, uint32_t slot, struct smt_kernel *k)
{
	smt_done_fn on_done = atomic_load_explicit(&k->on_done, memory_order_relaxed);
	void *arg = atomic_load_explicit(&k->arg, memory_order_relaxed);
	smt_stream_t *s = atomic_load_explicit(&k->s, memory_order_relaxed);

	atomic_fetch_and_explicit(&d->active_mask, ~(1ull << slot), memory_order_relaxed);
	if (on_done) /* e.g. records the kernel's failure as the stream's error before the tail */
		on_done(arg);
	smt_stream_complete(s, atomic_load_explicit(&k->tail, memory_order_relaxed));
	/* Our last access to the stream is above: from DONE on it may be destroyed (its thread
	 * waits for DONE). acq_rel: release the blocks' writes to the stream thread (and through
	 * it to the next command). The word is device memory, so the wake after it is harmless. */
	uint32_t old = atomic_exchange_explicit(&k->state, SMT_K_DONE, memory_order_acq_rel);
	if (old == SMT_K_WAITING)
		gice_futex_wake(&k->state, 1);
}

/* Does a kernel other than kernels[slot] have blocks not handed out? seq_cst: see sm_unspin. */
static int sm_other_unclaimed(smt_dev_t *d, uint32_t slot)
{
	uint64_t m = atomic_load_explicit(&d->active_mask, memory_order_seq_cst) & ~(1ull << slot);

	for (; m; m &= m - 1) {
		struct smt_kernel *k = &d->kernels[__builtin_ctzll(m)];
		if ((uint32_t)atomic_load_explicit(&k->next, memory_order_relaxed) <
		    atomic_load_explicit(&k->nblocks, memory_order_relaxed))
			return 1;
	}
	return 0;
}

/* A spinning SM took a block of kernels[slot]: it stops spinning before running it. A launch
 * that counted it as a spinner woke one SM fewer; if another kernel is still waiting for blocks
 * to be taken, that launch may have been the one, so wake an SM in our place. (seq_cst: the
 * launcher bumps work_seq then reads sm_spinning; we decrement it then read active_mask: either
 * it saw us gone and woke someone, or we see its kernel.) */
static void sm_unspin(smt_dev_t *d, uint32_t slot, int *spinning)
{
	*spinning = 0;
	atomic_fetch_sub_explicit(&d->sm_spinning, 1, memory_order_seq_cst);
	spin_put(d);
	if (atomic_load_explicit(&d->sleepers, memory_order_seq_cst) && sm_other_unclaimed(d, slot))
		gice_futex_wake(&d->work_seq, 1);
}

/* Try to take and run one block of kernels[slot]. 1 if one ran. *spinning: the caller is a
 * spinning SM (cleared before the block runs). */
static int sm_try_kernel(smt_dev_t *d, uint32_t sm, uint32_t slot, int *spinning)
{
	struct smt_kernel *k = &d->kernels[slot];

	/* Cheap pre-check (may be stale): skip a kernel whose blocks are all handed out,
	 * so SMs spinning while its last blocks run do not keep bumping `next`. */
	uint64_t t = atomic_load_explicit(&k->next, memory_order_relaxed);
	if ((uint32_t)t >= atomic_load_explicit(&k->nblocks, memory_order_relaxed))
		return 0;
	/* acquire: pairs with the launch's release store of next (fields of that gen) */
	t = atomic_fetch_add_explicit(&k->next, 1, memory_order_acquire);
	uint32_t gen = (uint32_t)(t >> 32), b = (uint32_t)t;
	/* seqlock read side: fields with acquire (pairs with the launch's release stores),
	 * so the gen re-check below sees the gen of any launch whose field we read */
	smt_block_fn fn = atomic_load_explicit(&k->fn, memory_order_acquire);
	void *arg = atomic_load_explicit(&k->arg, memory_order_acquire);
	uint32_t nb = atomic_load_explicit(&k->nblocks, memory_order_acquire);
	if (atomic_load_explicit(&k->gen, memory_order_relaxed) != gen || b >= nb)
		return 0;
	if (*spinning)
		sm_unspin(d, slot, spinning);
	fn(arg, b, nb, sm);
	/* acq_rel: this block's writes join those of the blocks before; the last one has all */
	if (atomic_fetch_add_explicit(&k->done, 1, memory_order_acq_rel) + 1 == nb)
		kernel_finish(d, slot, k);
	return 1;
}

/* Take and run one block of any active kernel, round robin from *start. 1 if one ran. */
static int sm_run_one(smt_dev_t *d, uint32_t sm, uint32_t *start, int *spinning)
{
	/* acquire: pairs with the launch's release fetch_or, so the record is filled */
	uint64_t m = atomic_load_explicit(&d->active_mask, memory_order_acquire);
	uint64_t from = ~0ull << (*start & 63);
	uint64_t part[2] = {m & from, m & ~from};

	for (int h = 0; h < 2; h++)
		for (uint64_t bits = part[h]; bits; bits &= bits - 1) {
			uint32_t slot = (uint32_t)__builtin_ctzll(bits);
			if (sm_try_kernel(d, sm, slot, spinning)) {
				*start = slot + 1; /* round robin between kernels of different streams */
				return 1;
			}
		}
	return 0;
}

static void *sm_main(void *p)
{
	struct smt_sm *sm = p;
	smt_dev_t *d = sm->d;
	uint32_t start = 0;
	int no = 0;
	char name[16];

	snprintf(name, sizeof(name), "gice-d%u-sm%u", d->dev_id, sm->index);
	pthread_setname_np(pthread_self(), name);
	if (d->nice) {
		/* per thread on Linux: the SMs yield the cores to the engines when those wake */
		pid_t tid = (pid_t)syscall(SYS_gettid);
		errno = 0;
		int cur = getpriority(PRIO_PROCESS, (id_t)tid);
		if ((cur != -1 || !errno) && setpriority(PRIO_PROCESS, (id_t)tid, GICE_MIN(cur + d->nice, 19)))
			gice_debug("smt", "device %u SM %u: setpriority: %s", d->dev_id, sm->index, strerror(errno));
	}

	for (;;) {
		if (sm_run_one(d, sm->index, &start, &no))
			continue;

		/* spin (within the device's budget): a kernel launched right after the last one
		 * starts without a wake-up */
		int ran = 0;
		if (d->spin_ns && spin_get(d)) {
			uint64_t spin_end = gice_now_ns() + d->spin_ns;
			/* seq_cst: a launcher that reads sm_spinning after its work_seq bump and
			 * counts us either finds us spinning or finds our sleep registration later */
			int spinning = 1;
			atomic_fetch_add_explicit(&d->sm_spinning, 1, memory_order_seq_cst);
			for (uint32_t i = 0;; i++) {
				if ((ran = sm_run_one(d, sm->index, &start, &spinning)) ||
				    atomic_load_explicit(&d->stop, memory_order_acquire))
					break;
				if ((i & 15) == 15 && (gice_now_ns() >= spin_end || spin_over(d)))
					break;
				spin_pause(d, i);
			}
			if (spinning) { /* else the block we ran ended it */
				atomic_fetch_sub_explicit(&d->sm_spinning, 1, memory_order_seq_cst);
				spin_put(d);
			}
		}
		if (ran)
			continue;

		/* sleep: register, read the seq, look once more, then wait while seq is unchanged */
		atomic_fetch_add_explicit(&d->sleepers, 1, memory_order_seq_cst);
		uint32_t seen = atomic_load_explicit(&d->work_seq, memory_order_seq_cst);
		if (atomic_load_explicit(&d->stop, memory_order_acquire)) {
			atomic_fetch_sub_explicit(&d->sleepers, 1, memory_order_relaxed);
			break;
		}
		if (!sm_run_one(d, sm->index, &start, &no))
			gice_futex_wait(&d->work_seq, seen, UINT64_MAX);
		atomic_fetch_sub_explicit(&d->sleepers, 1, memory_order_relaxed);
	}
	return NULL;
}

/* ---- device ---- */


/* GICE_SMT_SPINNERS, 0 resolved to the CPUs minus one (at least 1). */
static uint32_t smt_spin_budget(uint32_t cpus)
{
	const gice_param_t *p = gice_param_find(smt_params, "GICE_SMT_SPINNERS");
	uint64_t n = 0;

	if (gice_param_u64(p, &n) == GICE_OK && n)
		return (uint32_t)n;
	return cpus > 2 ? cpus - 1 : 1;
}

void smt_set_engine_step(smt_dev_t *d, int (*step)(void *arg, uint32_t ring), void *arg)
{
	d->engine_arg = arg;
	d->engine_step = step;
}

int smt_create(uint32_t n_sms, uint32_t dev_id, tm_region_t *tm, smt_dev_t **out)
{
	const gice_param_t *p = gice_param_find(smt_params, "GICE_SMT_SPIN_US");
	smt_dev_t *d;
	uint64_t spin_us;
	uint32_t started = 0;
	int rc;

	if (!tm || !out || n_sms < 1 || n_sms > SMT_MAX_SMS) {
		gice_error("smt", "device %u: %u SMs requested, must be in [1, %u]%s", dev_id, n_sms,
			   SMT_MAX_SMS, tm ? "" : " (no trigger memory)");
		return GICE_ERR_INVALID;
	}
	uint64_t nice;
	rc = gice_param_u64(p, &spin_us);
	if (!rc)
		rc = gice_param_u64(gice_param_find(smt_params, "GICE_SM_NICE"), &nice);
	if (rc)
		return rc;

	/* aligned: kernel records sit on their own cache lines */
	d = aligned_alloc(_Alignof(smt_dev_t), GICE_ALIGN_UP(sizeof(*d), _Alignof(smt_dev_t)));
	if (d)
		memset(d, 0, sizeof(*d));
	if (!d) {
		gice_error("smt", "device %u: no memory for the device", dev_id);
		return GICE_ERR_NO_MEMORY;
	}
	d->n_sms = n_sms;
	d->dev_id = dev_id;
	d->tm = tm;
	d->spin_ns = spin_us * 1000;
	d->nice = (int)nice;
	uint32_t cpus = gice_cpus_usable();
	d->max_spinners = smt_spin_budget(cpus);
	d->spin_yield = n_sms + 2 > cpus; /* the SMs, a stream thread and the host */
	d->sms = calloc(n_sms, sizeof(*d->sms));
	if (!d->sms) {
		gice_error("smt", "device %u: no memory for %u SMs", dev_id, n_sms);
		rc = GICE_ERR_NO_MEMORY;
		goto err_free_dev;
	}
	rc = pthread_mutex_init(&d->lock, NULL);
	if (rc) {
		gice_error("smt", "pthread_mutex_init: %s", strerror(rc));
		rc = GICE_ERR_NO_MEMORY;
		goto err_free_sms;
	}
	for (started = 0; started < n_sms; started++) {
		struct smt_sm *sm = &d->sms[started];
		sm->d = d;
		sm->index = started;
		rc = pthread_create(&sm->thread, NULL, sm_main, sm);
		if (rc) {
			gice_error("smt", "device %u: starting SM thread %u of %u: %s", dev_id, started,
				   n_sms, strerror(rc));
			rc = GICE_ERR_NO_MEMORY;
			goto err_stop_sms;
		}
	}
	*out = d;
	return GICE_OK;

err_stop_sms:
	atomic_store_explicit(&d->stop, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&d->work_seq, 1, memory_order_seq_cst);
	gice_futex_wake(&d->work_seq, INT_MAX);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(d->sms[i].thread, NULL);
	pthread_mutex_destroy(&d->lock);
err_free_sms:
	free(d->sms);
err_free_dev:
	free(d);
	return rc;
}

/* Tell the SMs to stop: stop before the seq bump (seq_cst), so an SM that reads the new seq
 * sees stop. */
static void sms_stop(smt_dev_t *d)
{
	atomic_store_explicit(&d->stop, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&d->work_seq, 1, memory_order_seq_cst);
	gice_futex_wake(&d->work_seq, INT_MAX);
}

void smt_destroy(smt_dev_t *d)
{
	if (!d)
		return;
	/* Streams first: each finishes its queued work, which needs the SMs. */
	for (uint32_t i = 0; i < SMT_MAX_STREAMS; i++) {
		pthread_mutex_lock(&d->lock);
		smt_stream_t *s = d->streams[i];
		pthread_mutex_unlock(&d->lock);
		if (s)
			smt_stream_destroy(s, UINT64_MAX);
	}
	sms_stop(d);
	for (uint32_t i = 0; i < d->n_sms; i++)
		pthread_join(d->sms[i].thread, NULL);
	pthread_mutex_destroy(&d->lock);
	free(d->sms);
	free(d);
}

uint32_t smt_abandon(smt_dev_t *d, uint64_t deadline_ns)
{
	smt_stream_t *s[SMT_MAX_STREAMS];
	uint32_t left = 0;

	/* every thread told first, then each waited for: the idle ones end meanwhile */
	pthread_mutex_lock(&d->lock);
	memcpy(s, d->streams, sizeof(s));
	pthread_mutex_unlock(&d->lock);
	for (uint32_t i = 0; i < SMT_MAX_STREAMS; i++)
		if (s[i])
			smt_stream_stop(s[i]);
	sms_stop(d);
	for (uint32_t i = 0; i < SMT_MAX_STREAMS; i++)
		if (s[i])
			left += (uint32_t)!gice_join_by(s[i]->thread, deadline_ns);
	for (uint32_t i = 0; i < d->n_sms; i++)
		left += (uint32_t)!gice_join_by(d->sms[i].thread, deadline_ns);
	return left;
}

uint32_t smt_num_sms(const smt_dev_t *d)
{
	return d->n_sms;
}
