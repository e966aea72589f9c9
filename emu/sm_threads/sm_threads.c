/* sm_threads.c: SM worker threads, the block scheduler and streams (see sm_threads.h).
 *
 * Block scheduler. Each stream uses one kernel record (a stream runs its commands in order, so
 * it has at most one kernel in flight): kernels[slot] of the device, where slot is the stream's
 * index. The records belong to the device, not to the streams, so an SM may look at a record
 * whatever happens to the stream, until smt_destroy joins the SMs. Launching fills the record
 * and sets the slot's bit in active_mask; SMs scan the set bits and take blocks with a
 * fetch_add on the record's `next` word. The last block to finish clears the bit and completes
 * the launch command itself: on_done, the stream's tail, the syncing host's wake-up; then it
 * marks the record DONE and wakes the stream thread. So a sync waits on one hand-off (last block
 * -> host), not two (last block -> stream thread -> host). No allocation per kernel or block.
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
#include "emu/sm_threads/sm_threads.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMT_MAX_SMS 256
#define SMT_MAX_STREAMS 64
#define SMT_MAX_BLOCKS INT32_MAX
/* A launch wakes at most as many SMs as there are CPUs; if blocks are still not handed out
 * this long after, it wakes SMs for them (blocks that wait on each other each need an SM). */
#define SMT_TOPUP_NS 200000ull

const gice_param_t smt_params[] = {
	{"GICE_SMS", "4", "SM worker threads per emulated device", GICE_PARAM_U64, 1, SMT_MAX_SMS},
	{"GICE_SMT_SPIN_US", "20", "microseconds an idle SM or stream thread spins before sleeping",
	 GICE_PARAM_U64, 0, 1000000},
	{"GICE_SMT_STREAM_DEPTH", "1024", "commands a stream can hold (launches, waits, writes)",
	 GICE_PARAM_U64, 1, 1u << 20},
	{"GICE_SMT_SPINNERS", "0",
	 "idle SM and stream threads of a device that may spin at once, the others sleep at once "
	 "(0: the CPUs this process may use, minus one, at least 1)",
	 GICE_PARAM_U64, 0, 1024},
	{NULL, NULL, NULL, 0, 0, 0},
};

/* ---- commands ---- */

#define SMT_CMD_LIST(X) \
	X(SMT_CMD_LAUNCH, "launch") \
	X(SMT_CMD_WAIT_VALUE, "wait_value") \
	X(SMT_CMD_WRITE_VALUE, "write_value")

enum smt_cmd_op {
#define SMT_CMD_ENUM_(name, str) name,
	SMT_CMD_LIST(SMT_CMD_ENUM_)
#undef SMT_CMD_ENUM_
};

static const char *const smt_cmd_names[] = {
#define SMT_CMD_NAME_(name, str) str,
	SMT_CMD_LIST(SMT_CMD_NAME_)
#undef SMT_CMD_NAME_
};

static const char *const smt_cmp_names[] = {"==", "!=", ">", ">=", "<", "<="};

/* A ring slot: written by an enqueuer under the stream lock before head is released; read by
 * the stream thread after acquiring head; free again once tail passes it. */
struct smt_cmd {
	uint32_t op;         /* enum smt_cmd_op */
	uint32_t counter;    /* WAIT/WRITE: counter id */
	uint32_t nblocks;    /* LAUNCH */
	tm_cmp_t cmp;        /* WAIT */
	int add;             /* WRITE: add (1) or set (0) */
	uint64_t value;      /* WAIT/WRITE */
	uint64_t timeout_ns; /* WAIT */
	int idle;            /* WAIT: timeout_ns measures a stall (tm_counter_wait_idle) */
	int coop;            /* LAUNCH: cooperative, wake an SM per block at once */
	smt_block_fn fn;     /* LAUNCH */
	void *arg;
	void (*on_done)(void *arg);
};

/* ---- kernel record ---- */

enum { SMT_K_RUNNING, SMT_K_DONE, SMT_K_WAITING }; /* smt_kernel.state: the stream's futex */

typedef void (*smt_done_fn)(void *arg);

struct smt_kernel {
	_Alignas(GICE_CACHELINE) _Atomic uint64_t next;         /* gen << 32 | next block to hand out */
	_Atomic uint32_t gen;          /* launch generation (seqlock word for the fields below) */
	_Atomic uint32_t nblocks;
	_Atomic(smt_block_fn) fn;
	_Atomic(void *) arg;
	_Atomic(smt_done_fn) on_done;  /* run by the last block (may be NULL) */
	_Atomic(smt_stream_t *) s;     /* the stream whose command the last block completes */
	_Atomic uint64_t tail;         /* the stream's tail once this launch is finished */
	_Atomic uint32_t done;         /* blocks finished */
	_Atomic uint32_t state;        /* SMT_K_*: the last block sets DONE, the stream may WAIT */
};

/* ---- device and stream ---- */

struct smt_sm {
	smt_dev_t *d;
	uint32_t index;
	pthread_t thread;
};

struct smt_dev {
	uint32_t n_sms;
	uint32_t dev_id;
	tm_region_t *tm;
	uint64_t spin_ns;
	struct smt_sm *sms;

	_Atomic uint32_t work_seq; /* futex: bumped on launch and stop */
	_Atomic uint32_t sleepers; /* SMs registered to sleep on work_seq */
	_Atomic uint32_t sm_spinning; /* SMs spinning for work: a launch wakes fewer sleepers */
	_Atomic uint32_t spinning; /* idle SM and stream threads spinning (at most max_spinners) */
	uint32_t max_spinners;     /* GICE_SMT_SPINNERS, resolved */
	int spin_yield;            /* more threads than CPUs: spinners yield (spin_pause) */
	_Atomic uint32_t stop;
	_Atomic uint64_t active_mask; /* bit i: kernels[i] has blocks to hand out or running */

	pthread_mutex_t lock;      /* streams[] */
	smt_stream_t *streams[SMT_MAX_STREAMS];
	struct smt_kernel kernels[SMT_MAX_STREAMS]; /* kernels[i]: the kernel of streams[i] */
};
_Static_assert(SMT_MAX_STREAMS <= 64, "active_mask has one bit per stream");

struct smt_stream {
	smt_dev_t *d;
	uint32_t slot;             /* index in d->streams and d->active */
	uint32_t depth;
	struct smt_cmd *ring;
	pthread_t thread;

	pthread_mutex_t enq_lock;  /* enqueuers (host threads) */
	_Atomic uint64_t head;     /* commands enqueued (written under enq_lock) */
	_Atomic uint64_t tail;     /* commands finished (stream thread) */
	_Atomic uint32_t cmd_seq;  /* futex: bumped on enqueue and stop */
	_Atomic uint32_t sleeping; /* stream thread is (about to be) asleep on cmd_seq */
	_Atomic uint32_t done_seq; /* futex: bumped when a command finishes */
	_Atomic uint32_t sync_waiters;
	_Atomic int err;           /* sticky error: first failure, cleared by smt_stream_sync */
	_Atomic uint32_t stop;

	struct smt_kernel *k;      /* &d->kernels[slot] */
};

/* ---- SM side ---- */

static void stream_complete(smt_stream_t *s, uint64_t tail);

/* An SM takes a spinning slot of the device's budget: 1 if it may spin (it must call spin_put
 * after, and stop when spin_over), 0 if it should sleep at once. */
static int spin_get(smt_dev_t *d)
{
	if (atomic_fetch_add_explicit(&d->spinning, 1, memory_order_relaxed) < d->max_spinners)
		return 1;
	atomic_fetch_sub_explicit(&d->spinning, 1, memory_order_relaxed);
	return 0;
}

/* One turn of a spin loop (i counts them). When the device's threads outnumber the CPUs, a
 * spinner also yields the CPU now and then: a thread just woken onto its CPU (the SM that has
 * the block, the host that the last block released) runs at once rather than waiting for the
 * spin to time out, which measured as steps of GICE_SMT_SPIN_US in launch + sync on 2 cores. */
static inline void spin_pause(const smt_dev_t *d, uint32_t i)
{
	gice_cpu_relax();
	if (d->spin_yield && (i & 15) == 15)
		sched_yield();
}

/* More threads spin than the budget (a stream thread started): a spinning SM yields. */
static int spin_over(smt_dev_t *d)
{
	return atomic_load_explicit(&d->spinning, memory_order_relaxed) > d->max_spinners;
}

static void spin_put(smt_dev_t *d) { atomic_fetch_sub_explicit(&d->spinning, 1, memory_order_relaxed); }

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
	stream_complete(s, atomic_load_explicit(&k->tail, memory_order_relaxed));
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

/* The CPUs this process may use. */
static uint32_t smt_cpus(void)
{
	cpu_set_t set;

	return sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0 ? (uint32_t)CPU_COUNT(&set) : 1;
}

/* GICE_SMT_SPINNERS, 0 resolved to the CPUs minus one (at least 1). */
static uint32_t smt_spin_budget(uint32_t cpus)
{
	const gice_param_t *p = gice_param_find(smt_params, "GICE_SMT_SPINNERS");
	uint64_t n = 0;

	if (gice_param_u64(p, &n) == GICE_OK && n)
		return (uint32_t)n;
	return cpus > 2 ? cpus - 1 : 1;
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
	rc = gice_param_u64(p, &spin_us);
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
	uint32_t cpus = smt_cpus();
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
	/* stop before the seq bump (seq_cst): an SM that reads the new seq sees stop */
	atomic_store_explicit(&d->stop, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&d->work_seq, 1, memory_order_seq_cst);
	gice_futex_wake(&d->work_seq, INT_MAX);
	for (uint32_t i = 0; i < d->n_sms; i++)
		pthread_join(d->sms[i].thread, NULL);
	pthread_mutex_destroy(&d->lock);
	free(d->sms);
	free(d);
}

uint32_t smt_num_sms(const smt_dev_t *d)
{
	return d->n_sms;
}

/* ---- stream thread ---- */

/* Sleep on *word while it equals `seen`, announcing it in *sleeping (see the file comment). */
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

/* Run the launch command c, the stream's command number tail: publish the kernel, wake SMs,
 * wait for its end. Its last block completes the command (stream_complete). */
static void stream_launch(smt_stream_t *s, const struct smt_cmd *c, uint64_t tail)
{
	smt_dev_t *d = s->d;
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
	atomic_store_explicit(&k->state, SMT_K_RUNNING, memory_order_relaxed);
	/* release: fields (and everything the stream saw, e.g. the previous kernel's writes)
	 * before an SM can take block 0 */
	atomic_store_explicit(&k->next, (uint64_t)gen << 32, memory_order_release);
	/* seq_cst (an RMW, the same instruction): sm_unspin's reasoning needs it in the order */
	atomic_fetch_or_explicit(&d->active_mask, 1ull << s->slot, memory_order_seq_cst);
	/* seq_cst bump then sleepers read (sm_wake): pairs with sm_main's registration */
	atomic_fetch_add_explicit(&d->work_seq, 1, memory_order_seq_cst);
	uint32_t want = GICE_MIN(c->nblocks, d->n_sms);
	if (!c->coop) /* as many as can run at once; the rest if the grid stalls (below) */
		want = GICE_MIN(want, d->max_spinners + 1);
	sm_wake(d, want);

	/* Wait for the last block: sleep on state at once (RUNNING -> WAITING). No spin: the
	 * last block completes the command without us, and on a small machine a spinning
	 * stream thread takes the core the blocks need. */
	uint32_t expect = SMT_K_RUNNING;
	atomic_compare_exchange_strong_explicit(&k->state, &expect, SMT_K_WAITING,
						memory_order_acquire, memory_order_acquire);
	/* Blocks that wait on each other need an SM each: if some are still not handed out
	 * after a while (the SMs woken wait inside theirs), wake SMs for all of them, once. */
	uint64_t nap = want < GICE_MIN(c->nblocks, d->n_sms) ? SMT_TOPUP_NS : UINT64_MAX;
	/* acquire: pairs with kernel_finish's exchange, so the blocks' writes are visible */
	while (atomic_load_explicit(&k->state, memory_order_acquire) != SMT_K_DONE) {
		if (gice_futex_wait(&k->state, SMT_K_WAITING, nap) != GICE_ERR_TIMED_OUT || nap == UINT64_MAX)
			continue;
		nap = UINT64_MAX;
		uint64_t t = atomic_load_explicit(&k->next, memory_order_relaxed);
		if ((uint32_t)(t >> 32) == gen && (uint32_t)t < c->nblocks)
			sm_wake(d, GICE_MIN(c->nblocks - (uint32_t)t, d->n_sms));
	}
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

	if (rc) /* the device was aborted: nothing more runs, the status is the stream's error */
		smt_stream_fail(s, rc);
	if (atomic_load_explicit(&s->err, memory_order_relaxed)) {
		/* Sticky error: skip, but still let the owner of a launch's arg release it. */
		gice_debug("smt", "device %u stream %u: skipping %s after an earlier error",
			   s->d->dev_id, s->slot, smt_cmd_names[c->op]);
		if (c->op == SMT_CMD_LAUNCH && c->on_done)
			c->on_done(c->arg);
		return 1;
	}
	switch (c->op) {
	case SMT_CMD_LAUNCH:
		stream_launch(s, c, tail);
		return 0;
	case SMT_CMD_WAIT_VALUE:
		rc = stream_wait(s, c);
		break;
	case SMT_CMD_WRITE_VALUE:
		if (c->add)
			tm_counter_add(s->d->tm, c->counter, c->value);
		else
			tm_counter_set(s->d->tm, c->counter, c->value);
		break;
	}
	if (rc)
		smt_stream_fail(s, rc);
	return 1;
}

/* Command tail - 1 finished: publish the new tail and wake a syncing host. */
static void stream_complete(smt_stream_t *s, uint64_t tail)
{
	/* release: the command's effects (kernel writes, counter writes, err) before a syncing
	 * host sees the new tail; seq_cst bump pairs with sync's registration */
	atomic_store_explicit(&s->tail, tail, memory_order_release);
	atomic_fetch_add_explicit(&s->done_seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&s->sync_waiters, memory_order_seq_cst))
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
		if (atomic_load_explicit(&s->head, memory_order_acquire) != tail) {
			struct smt_cmd c = s->ring[tail % s->depth];
			if (stream_exec(s, &c, tail))
				stream_complete(s, tail + 1);
			tail++;
			continue;
		}
		if (atomic_load_explicit(&s->stop, memory_order_acquire))
			break;
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
	s->ring = calloc(depth, sizeof(*s->ring));
	if (!s->ring) {
		gice_error("smt", "device %u: no memory for a stream ring of %u commands", d->dev_id,
			   s->depth);
		rc = GICE_ERR_NO_MEMORY;
		goto err_free_stream;
	}
	rc = pthread_mutex_init(&s->enq_lock, NULL);
	if (rc) {
		gice_error("smt", "pthread_mutex_init: %s", strerror(rc));
		rc = GICE_ERR_NO_MEMORY;
		goto err_free_ring;
	}

	pthread_mutex_lock(&d->lock);
	for (s->slot = 0; s->slot < SMT_MAX_STREAMS && d->streams[s->slot]; s->slot++)
		;
	if (s->slot == SMT_MAX_STREAMS) {
		pthread_mutex_unlock(&d->lock);
		gice_error("smt", "device %u: all %u streams are in use", d->dev_id, SMT_MAX_STREAMS);
		rc = GICE_ERR_NO_MEMORY;
		goto err_destroy_lock;
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
err_destroy_lock:
	pthread_mutex_destroy(&s->enq_lock);
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

/* Wait until tail reaches target, at most timeout_ns (idle: timeout_ns without progress).
 * The device's abort ends it with the abort status. */
static int stream_drain(smt_stream_t *s, uint64_t target, uint64_t timeout_ns, int idle)
{
	uint64_t start = gice_now_ns(), moves = stream_moves(s);
	uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
	uint64_t spin_end = GICE_MIN(deadline, start + s->d->spin_ns);
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
		gice_futex_wait(&s->done_seq, seen, deadline == UINT64_MAX ? UINT64_MAX : deadline - now);
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
	/* stop before the seq bump: the stream thread re-checks head, then stop, after a wake */
	atomic_store_explicit(&s->stop, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&s->cmd_seq, 1, memory_order_seq_cst);
	gice_futex_wake(&s->cmd_seq, 1);
	pthread_join(s->thread, NULL);

	err = atomic_load_explicit(&s->err, memory_order_relaxed);
	if (err)
		gice_warn("smt", "device %u stream %u: destroyed with an unreported error: %s",
			  d->dev_id, s->slot, gice_status_name(err));

	pthread_mutex_lock(&d->lock);
	d->streams[s->slot] = NULL;
	pthread_mutex_unlock(&d->lock);

	pthread_mutex_destroy(&s->enq_lock);
	free(s->ring);
	free(s);
	return GICE_OK;
}

/* ---- enqueue ---- */

/* Enqueue c; for a launch with prep, prep fills its arg for the queue position first. */
static int stream_push_prep(smt_stream_t *s, struct smt_cmd *c, smt_prep_fn prep, void *ctx)
{
	pthread_mutex_lock(&s->enq_lock);
	uint64_t head = atomic_load_explicit(&s->head, memory_order_relaxed);
	/* acquire: the stream thread is done reading the slot we are about to overwrite */
	uint64_t tail = atomic_load_explicit(&s->tail, memory_order_acquire);
	if (head - tail >= s->depth) {
		pthread_mutex_unlock(&s->enq_lock);
		gice_error("smt", "device %u stream %u: command queue full (%u commands, "
				  "GICE_SMT_STREAM_DEPTH), cannot enqueue %s",
			   s->d->dev_id, s->slot, s->depth, smt_cmd_names[c->op]);
		return GICE_ERR_NO_MEMORY;
	}
	if (prep) {
		int rc = prep(ctx, (uint32_t)(head % s->depth), &c->arg);
		if (rc) {
			pthread_mutex_unlock(&s->enq_lock);
			return rc;
		}
	}
	s->ring[head % s->depth] = *c;
	/* release: the slot before the stream thread can see it */
	atomic_store_explicit(&s->head, head + 1, memory_order_release);
	pthread_mutex_unlock(&s->enq_lock);
	/* seq_cst bump then sleeping read: pairs with sleep_on */
	atomic_fetch_add_explicit(&s->cmd_seq, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&s->sleeping, memory_order_seq_cst))
		gice_futex_wake(&s->cmd_seq, 1);
	return GICE_OK;
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
