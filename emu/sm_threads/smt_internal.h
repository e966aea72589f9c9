/* smt_internal.h: what sm_threads.c (SM threads, block scheduler), smt_stream.c (streams) and
 * smt_enqueue.c (their enqueue side) share: the device, stream, command and kernel record
 * structures, the spin budget helpers, the start of a launch, and the completion of a stream
 * command by a kernel's last block. Not for other modules. */
#ifndef GICE_SMT_INTERNAL_H
#define GICE_SMT_INTERNAL_H

#include <pthread.h>
#include <sched.h>

#include "emu/sm_threads/sm_threads.h"

#define SMT_MAX_STREAMS 64

/* ---- stream commands ---- */

#define SMT_CMD_LIST(X) \
	X(SMT_CMD_LAUNCH, "launch") \
	X(SMT_CMD_WAIT_VALUE, "wait_value") \
	X(SMT_CMD_WRITE_VALUE, "write_value") \
	X(SMT_CMD_NOP, "nop") /* a position whose launch failed to prepare */

enum smt_cmd_op {
#define SMT_CMD_ENUM_(name, str) name,
	SMT_CMD_LIST(SMT_CMD_ENUM_)
#undef SMT_CMD_ENUM_
};

/* A ring slot: written by the enqueuer that claimed its position before head is released; read
 * by the stream thread after acquiring head; free again once tail passes it. */
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

const char *smt_cmd_name(uint32_t op); /* "launch", ... */

/* ---- kernel record ---- */

/* smt_kernel.state, the stream's futex: DONE (0, also before the first launch), RUNNING, or
 * WAITING (RUNNING with the stream thread asleep until the last block sets DONE) */
enum { SMT_K_DONE, SMT_K_RUNNING, SMT_K_WAITING };

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
	int nice;                  /* GICE_SM_NICE: added to the SM threads' nice value */
	int (*engine_step)(void *arg, uint32_t ring); /* smt_set_engine_step, or NULL */
	void *engine_arg;
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

	_Atomic uint64_t claimed;  /* positions enqueuers (host threads) have taken (CAS) */
	_Atomic uint64_t head;     /* commands enqueued: published in the order of their claims */
	_Atomic uint64_t tail;     /* commands finished (stream thread) */
	_Atomic uint32_t cmd_seq;  /* futex: bumped on enqueue and stop */
	_Atomic uint32_t sleeping; /* stream thread is (about to be) asleep on cmd_seq */
	_Atomic uint32_t done_seq; /* futex: bumped when a command finishes */
	_Atomic uint32_t sync_waiters;
	_Atomic uint64_t sync_target; /* smallest tail a sleeping sync waits for (UINT64_MAX: none):
					 the stream thread wakes syncs only when it is reached */
	_Atomic int err;           /* sticky error: first failure, cleared by smt_stream_sync */
	_Atomic uint32_t stop;

	struct smt_kernel *k;      /* &d->kernels[slot] */
	smt_trace_fn trace_fn;     /* smt_stream_set_trace, or NULL */
	void *trace_arg;
};

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

static inline void spin_put(smt_dev_t *d) { gice_spin_put(&d->spinning); }

/* smt_stream.c: fill the stream's kernel record for launch c, command number tail (RUNNING from
 * here on, but no SM can take a block before smt_kernel_start); returns the launch generation. */
uint32_t smt_kernel_fill(smt_stream_t *s, const struct smt_cmd *c, uint64_t tail);
/* Hand out the blocks of the filled record (generation gen) and wake SMs for them. */
void smt_kernel_start(smt_stream_t *s, const struct smt_cmd *c, uint32_t gen);
/* smt_stream.c; kernel_finish completes a launch command with it. */
void smt_stream_complete(smt_stream_t *s, uint64_t tail);
/* Tell the stream's thread to stop (smt_stream_destroy once its work ran, smt_abandon). */
void smt_stream_stop(smt_stream_t *s);

#endif
