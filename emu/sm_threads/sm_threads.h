/* sm_threads.h: the SMs of one device — S worker threads that run kernel blocks — and streams,
 * in-order queues of kernels, waits on counters and counter writes, each driven by its own
 * command-processor thread (so a kernel behind a stream wait starts when the counter arrives,
 * with no host thread polling).
 *
 * A kernel is a C function run once per block of its grid on some SM thread. Blocks of one
 * kernel may run concurrently on different SMs; a block that waits (on a signal) holds its SM,
 * as on a GPU: a grid whose blocks wait on each other needs at most S blocks.
 * Idle SM and stream threads sleep on futexes (spin GICE_SMT_SPIN_US first, as many at once as
 * GICE_SMT_SPINNERS allows). A launch wakes SMs for its blocks, at most as many as can run at
 * once; blocks still unclaimed a while later get SMs too (smt_launch_flags: cooperative grids get
 * them at once).
 */
#ifndef GICE_SM_THREADS_H
#define GICE_SM_THREADS_H

#include <stdint.h>

#include "emu/common/common.h"
#include "emu/common/config.h"
#include "emu/triggermem/triggermem.h"

typedef struct smt_dev smt_dev_t;
typedef struct smt_stream smt_stream_t;

/* fn(arg, block, nblocks, sm): run one block. */
typedef void (*smt_block_fn)(void *arg, uint32_t block, uint32_t nblocks, uint32_t sm);

/* Start n_sms SM threads (named "gice-d<dev_id>-sm<i>"; dev_id names the device in messages:
 * its global id). tm: the device's trigger memory, used by stream waits and writes, and whose
 * abort (tm_region_abort) stops every stream: syncs return the abort status at once (after
 * smt_abort wakes them), later commands are skipped. */
int smt_create(uint32_t n_sms, uint32_t dev_id, tm_region_t *tm, smt_dev_t **out);
/* The device's engines, run by a stream thread right after it writes a counter (a trigger its
 * CTs may watch), as a GPU's front end hands work to its engines with no host in between:
 * the write rings no doorbell (tm_counter_write_quiet), and step(arg, ring) runs on that stream
 * thread, ringing the CTs of mask ring it could not step (it must never block). A write to a
 * counter no CT watches (ring 0) starts nothing and runs no step. Set before streams get work. */
void smt_set_engine_step(smt_dev_t *d, int (*step)(void *arg, uint32_t ring), void *arg);
/* Stops the threads after the work queued on every stream has run. */
void smt_destroy(smt_dev_t *d);
/* For a device that cannot be destroyed (a kernel's thread is stuck in a call that does not
 * return): its streams and SMs are told to stop without running what is queued; those that end
 * by deadline_ns (gice_now_ns time) are joined, the rest left to run on (detached). Frees
 * nothing: what is left may use it. Returns the threads left. */
uint32_t smt_abandon(smt_dev_t *d, uint64_t deadline_ns);
uint32_t smt_num_sms(const smt_dev_t *d);

int smt_stream_create(smt_dev_t *d, smt_stream_t **out);
/* Waits for the stream's queued work (at most timeout_ns, then GICE_ERR_TIMED_OUT and the
 * stream is left alive); GICE_OK when it was idle. */
int smt_stream_destroy(smt_stream_t *s, uint64_t timeout_ns);

/* Enqueue (asynchronous; returns at once). launch: run fn on nblocks blocks (>=1); arg is
 * passed as is and must stay valid until the kernel ends; on_done(arg) (may be NULL) runs after
 * the last block, before the launch counts as finished (a sync returns), on the SM thread that
 * ran that block (it lets the caller free or reuse arg, and must not wait on the stream); when
 * the launch is skipped because of the stream's sticky error, it runs on the stream thread.
 * wait_value: the stream stalls until cmp(counter, value) holds; past timeout_ns the wait fails
 * with GICE_ERR_TIMED_OUT (logged with counter, value expected and found) and the stream's sticky
 * error is set; later work on that stream is skipped. write_value: set or add to a counter
 * (add != 0) when the stream reaches it.
 * GICE_ERR_NO_MEMORY if the stream's command queue (GICE_SMT_STREAM_DEPTH) is full. */
int smt_launch(smt_stream_t *s, smt_block_fn fn, void *arg, uint32_t nblocks, void (*on_done)(void *arg));
/* smt_launch with flags: SMT_LAUNCH_COOP, the grid's blocks wait on each other: wake an SM for
 * every block at once (rather than as many as the CPUs, then the rest if blocks stay unclaimed
 * for a while); the caller checks nblocks <= smt_num_sms. */
#define SMT_LAUNCH_COOP 1u
int smt_launch_flags(smt_stream_t *s, smt_block_fn fn, void *arg, uint32_t nblocks, uint32_t flags,
		     void (*on_done)(void *arg));
/* smt_launch_flags whose arg the caller fills for the command's queue position: once the
 * enqueuer has claimed a position (the queue has room), prep(ctx, index, &arg) is called with
 * index in [0, smt_stream_depth(s)); the position is free again once on_done(arg) of the
 * launch it held has returned, so a caller may keep one record per index, reused without
 * allocation. A status prep returns (< 0) is returned, and no kernel runs: the position holds a
 * command that does nothing. Enqueuers of one stream may run concurrently (no lock). */
typedef int (*smt_prep_fn)(void *ctx, uint32_t index, void **arg);
int smt_launch_prep(smt_stream_t *s, smt_block_fn fn, uint32_t nblocks, uint32_t flags,
		    void (*on_done)(void *arg), smt_prep_fn prep, void *ctx);
/* The commands s can hold (GICE_SMT_STREAM_DEPTH when it was created). */
uint32_t smt_stream_depth(const smt_stream_t *s);
int smt_wait_value(smt_stream_t *s, uint32_t counter, tm_cmp_t cmp, uint64_t value, uint64_t timeout_ns);
/* The same, failing only after idle_ns with no progress (tm_counter_wait_idle). */
int smt_wait_value_idle(smt_stream_t *s, uint32_t counter, tm_cmp_t cmp, uint64_t value, uint64_t idle_ns);
int smt_write_value(smt_stream_t *s, uint32_t counter, uint64_t value, int add);

/* A wait_value or write_value the stream thread ran: from t_start (it reached the command) to
 * t_end (the wait saw its value, or failed; the write was done). */
typedef struct {
	uint32_t write; /* 0: wait_value, 1: write_value */
	uint32_t counter;
	uint64_t value;
	uint64_t t_start, t_end;
	int status; /* the wait's: GICE_OK, or why it failed */
} smt_cmd_trace_t;
typedef void (*smt_trace_fn)(void *arg, const smt_cmd_trace_t *t);
/* Observation: after every wait_value and write_value it runs, s's thread calls fn(arg, &t)
 * (it must not block). Set before anything is enqueued on s; NULL: none (the default). */
void smt_stream_set_trace(smt_stream_t *s, smt_trace_fn fn, void *arg);

/* Host: wait until everything enqueued so far on s has run. Returns GICE_OK, the stream's sticky
 * error (first failure; cleared by this call), or GICE_ERR_TIMED_OUT after timeout_ns. */
int smt_stream_sync(smt_stream_t *s, uint64_t timeout_ns);
/* The same, but GICE_ERR_TIMED_OUT only after idle_ns with no progress: no command finished,
 * no block of its kernel finished, the device noted no progress (tm_progress) and no wait on
 * its counters was asleep (those are bounded by their own timeouts). A long kernel that keeps
 * moving never times out; a stalled one does. */
int smt_stream_sync_idle(smt_stream_t *s, uint64_t idle_ns);
/* Record status as the stream's error unless it has one (a kernel's failure: call it from
 * on_done, before the launch counts as finished). */
void smt_stream_fail(smt_stream_t *s, int status);
uint32_t smt_stream_id(const smt_stream_t *s);
/* The device was aborted (tm_region_abort): wake every sync and stream thread to see it. */
void smt_abort(smt_dev_t *d);

/* GICE_SMS, GICE_SMT_SPIN_US, GICE_SMT_STREAM_DEPTH. */
extern const gice_param_t smt_params[];

#endif
