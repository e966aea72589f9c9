/* gice_device.h: the device API — what a kernel calls while it runs on an SM thread.
 * Kernels reach the CTs only through memory: a request is a fixed-size descriptor written into
 * a CT's queue in trigger memory, followed by a doorbell. Operations are non-blocking (nbi):
 * they return once queued; their outcome lands in the completion counter given (or is waited
 * for by gice_quiet). Every wait has a timeout and returns GICE_ERR_TIMED_OUT, logging the call,
 * the counter, the value expected and the value found; without an explicit timeout it measures a
 * stall (GICE_TIMEOUT_MS without progress). A wait fails at once when the device is aborted.
 */
#ifndef GICE_DEVICE_H
#define GICE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gice_kctx {
	uint32_t block;       /* this block's index in the grid */
	uint32_t nblocks;     /* grid size */
	uint32_t sm;          /* SM (worker thread) running it */
	gice_device_t *dev;
	void *launch;         /* internal */
	uint32_t grid_syncs;  /* internal: gice_grid_sync calls of this block so far */
};

static inline uint32_t gice_block_idx(const gice_kctx_t *k) { return k->block; }
static inline uint32_t gice_grid_dim(const gice_kctx_t *k) { return k->nblocks; }

/* Trigger writes: store or add to a counter of this device. Wakes waiters; may fire armed
 * descriptors (the CT sees the write). */
void gice_trigger_store(gice_kctx_t *k, gice_trigger_t t, uint64_t value);
void gice_trigger_add(gice_kctx_t *k, gice_trigger_t t, uint64_t value);

/* put: bytes from local device memory src to (rkey, roff) at the connection's peer.
 * put_signal: the same, then the peer's counter sig is set to / increased by value
 * (signal_flags GICE_SIGNAL_*) once the data has landed. completion (or GICE_NO_COUNTER) gains
 * one when the peer has acknowledged, or records a failure (GICE_ERR_UNREGISTERED for a source
 * outside registered memory, GICE_ERR_BAD_KEY, GICE_ERR_OUT_OF_BOUNDS from the peer).
 * Return: GICE_OK once queued; GICE_ERR_INVALID (bad connection), GICE_ERR_TIMED_OUT (queue full
 * past GICE_TIMEOUT_MS), the abort status of an aborted device. An error returned here is also
 * recorded in completion, so a waiter on it sees the failure. A signal naming a counter the
 * target has not allocated fails with GICE_ERR_NOT_FOUND, nothing written. */
int gice_put(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, const void *src, size_t bytes,
	     gice_completion_t completion);
int gice_put_signal(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, const void *src,
		    size_t bytes, gice_counter_t sig, uint64_t value, int signal_flags, gice_completion_t completion);
/* get: bytes from (rkey, roff) at the peer into local dst; completion when they have arrived. */
int gice_get(gice_kctx_t *k, gice_conn_t conn, void *dst, uint64_t rkey, uint64_t roff, size_t bytes,
	     gice_completion_t completion);
/* Remote 64-bit atomics at (rkey, roff) (8-byte aligned). The old value goes to *result (device
 * memory, registered; NULL to discard) before completion is incremented. */
int gice_atomic_fetch_add(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, uint64_t value,
			  uint64_t *result, gice_completion_t completion);
int gice_atomic_cswap(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, uint64_t compare,
		      uint64_t value, uint64_t *result, gice_completion_t completion);
/* Generic form (any gice_op_t). */
int gice_issue(gice_kctx_t *k, const gice_op_t *op);

/* Wait until cmp(counter, value) holds (wraparound-safe), at most timeout_us (0:
 * GICE_TIMEOUT_MS without progress). GICE_OK; GICE_ERR_TIMED_OUT (logged with counter, expected,
 * found); the counter's failure status when it records one; the device's abort status. A failure
 * (other than a timeout at an explicit timeout_us) also fails the kernel: gice_kernel_fail. *found
 * (may be NULL) gets the value seen. */
int gice_wait_until(gice_kctx_t *k, gice_counter_t ctr, gice_cmp_t cmp, uint64_t value, uint64_t timeout_us,
		    uint64_t *found);
/* NVLink plane: add value to counter t of a same-host peer device by writing its trigger memory
 * directly (no packet), waking its waiters and firing what is armed on it, as a local
 * gice_trigger_add does. GICE_ERR_UNSUPPORTED when peer_id is not on this host's plane,
 * GICE_ERR_INVALID for a bad counter. Order it after data with a fence of your own (the write
 * is immediate; puts in flight are not). Takes no lock (a table set up at wiring). */
int gice_peer_trigger_add(gice_kctx_t *k, uint32_t peer_id, gice_trigger_t t, uint64_t value);
/* fence: later operations on conn start only after earlier ones on conn have completed. */
int gice_fence(gice_kctx_t *k, gice_conn_t conn);
/* quiet: wait until every operation this device issued so far — by kernels, the host, or fired
 * by armed descriptors — has completed (puts landed and acknowledged). GICE_OK, or the status of
 * the first operation that failed since the last quiet, or GICE_ERR_TIMED_OUT after
 * GICE_TIMEOUT_MS without progress. */
int gice_quiet(gice_kctx_t *k);

/* ================================================================ symmetric memory, teams, waits
 * (issue 10; docs/api.md maps NVSHMEM and NCCL device calls to these.)
 * Units: sizes and offsets in bytes; timeouts of device calls in microseconds (0: the stall
 * timeout, GICE_TIMEOUT_MS without progress); counter values are counts.
 *
 * Symmetric operations name a peer by (team, rank in team) and memory by offset in the
 * symmetric heap (gice_sym_alloc); the key and the connection are looked up in tables built by
 * gice_sym_init (no lock, no allocation). src/dst on this side are pointers into this device's
 * memory (its heap, or any registered memory). Like gice_put they return once queued, and an
 * error they return is also recorded in completion: GICE_ERR_INVALID (no heap: gice_sym_init
 * not called, device not in the team, rank >= team size: the message names the rank and the
 * size), GICE_ERR_OUT_OF_BOUNDS (offset + bytes past the heap: names them and the heap size),
 * or what gice_put returns. */
int gice_sym_put(gice_kctx_t *k, const gice_team_t *team, uint32_t pe, uint64_t dst_off, const void *src,
		 size_t bytes, gice_completion_t completion);
/* put, then counter sig (a symmetric counter: the same id on every device) of the peer is set
 * to / increased by value (GICE_SIGNAL_* flags) once the data has landed. */
int gice_sym_put_signal(gice_kctx_t *k, const gice_team_t *team, uint32_t pe, uint64_t dst_off, const void *src,
			size_t bytes, gice_counter_t sig, uint64_t value, int signal_flags,
			gice_completion_t completion);
int gice_sym_get(gice_kctx_t *k, const gice_team_t *team, uint32_t pe, void *dst, uint64_t src_off, size_t bytes,
		 gice_completion_t completion);
/* Signal only (no data; nvshmemx_signal_op, GIN signal): sig of the peer is set to / increased
 * by value. GICE_SIGNAL_STRONG: after every earlier put of this device to that peer landed. */
int gice_sym_signal(gice_kctx_t *k, const gice_team_t *team, uint32_t pe, gice_counter_t sig, uint64_t value,
		    int signal_flags, gice_completion_t completion);
/* gice_fence on the connection to team rank pe: later operations to it start after earlier
 * ones completed. GICE_ERR_INVALID as above. */
int gice_sym_fence(gice_kctx_t *k, const gice_team_t *team, uint32_t pe);
/* NVLink plane: load/store pointer to [off, off+len) of the heap of team rank pe (as
 * nvshmem_ptr), NULL when that device is not on this host's plane or the range leaves the heap. */
void *gice_sym_peer_ptr(gice_kctx_t *k, const gice_team_t *team, uint32_t pe, uint64_t off, size_t len);

/* Barrier of every device of team (one block per device calls it): first gice_quiet (this
 * device's operations have completed: puts landed), then a dissemination barrier of ceil(log2 n)
 * rounds, each a signal to rank (me + 2^r) mod n (a direct add to its counter when it is on this
 * host's NVLink plane, else a signal-only operation) and a wait on this round's symmetric
 * counter — triggers and completions only. GICE_OK; GICE_ERR_INVALID (device not in team); a wait's or
 * quiet's failure, which also fails the kernel. */
int gice_team_barrier(gice_kctx_t *k, const gice_team_t *team);
/* The same without the quiet (nvshmem_team_sync): only that every device arrived. */
int gice_team_sync(gice_kctx_t *k, const gice_team_t *team);

/* Grid-wide barrier of one launch: returns when every block of the grid has called it as many
 * times as this block. Needs every block running at once: launch with gice_launch_cooperative.
 * GICE_OK; GICE_ERR_TIMED_OUT after GICE_TIMEOUT_MS without any block arriving (a grid too big
 * for the SMs, a block that returned early), which fails the kernel; the abort status. */
int gice_grid_sync(gice_kctx_t *k);

/* Waits over a set of n counters (NVSHMEM's wait_until_all/any/some): status may be NULL, else
 * entries with status[i] != 0 are left out. The _vector forms compare counter i with values[i].
 * all: until every counter included satisfies cmp; GICE_OK also for an empty set.
 * any: until one does; *idx (may be NULL) gets the smallest such index.
 * some: until at least one does; indices (room for n, may be NULL) get every such index, in
 * order, *count how many.
 * A counter included that records a failure ends the wait with its status (*idx names it);
 * any/some with no counter included return GICE_ERR_NOT_FOUND (*idx = SIZE_MAX, *count = 0).
 * timeout_us as gice_wait_until; failures other than that timeout fail the kernel. any/some
 * sleep on one counter at a time for at most 200 us before looking at the others again. */
int gice_wait_until_all(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status, gice_cmp_t cmp,
			uint64_t value, uint64_t timeout_us);
int gice_wait_until_any(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status, gice_cmp_t cmp,
			uint64_t value, uint64_t timeout_us, size_t *idx);
int gice_wait_until_some(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status, gice_cmp_t cmp,
			 uint64_t value, uint64_t timeout_us, size_t *indices, size_t *count);
int gice_wait_until_all_vector(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status,
			       gice_cmp_t cmp, const uint64_t *values, uint64_t timeout_us);
int gice_wait_until_any_vector(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status,
			       gice_cmp_t cmp, const uint64_t *values, uint64_t timeout_us, size_t *idx);
int gice_wait_until_some_vector(gice_kctx_t *k, const gice_counter_t *ctrs, size_t n, const int *status,
				gice_cmp_t cmp, const uint64_t *values, uint64_t timeout_us, size_t *indices,
				size_t *count);

/* Counters from a kernel (signals and completions alike): fetch reads the value (0 for a bad
 * id, logged); test returns 1 when cmp(value, v) holds, 0 when not, the counter's failure status
 * when it records one, GICE_ERR_INVALID for a bad id; reset sets value, failure count and status
 * to 0 (as gice_counter_reset): GICE_OK or GICE_ERR_INVALID.
 * Reset and armed descriptors: thresholds are absolute counter values and a reset does not
 * touch them. A one-shot descriptor armed at T fires when the counter reaches T again after the
 * reset; a persistent one keeps the next threshold its period took it to (T + k*period). A
 * reset fires nothing by itself. To restart a persistent chain from zero: disarm, reset, arm
 * again — or never reset and compare with moving targets (every compare is wraparound-safe). */
uint64_t gice_signal_fetch(gice_kctx_t *k, gice_counter_t ctr);
int gice_signal_test(gice_kctx_t *k, gice_counter_t ctr, gice_cmp_t cmp, uint64_t value);
int gice_signal_reset(gice_kctx_t *k, gice_counter_t ctr);

/* ================================================================ end of symmetric memory, teams, waits */

/* ---- storage path (issue 12): a file's bytes into / out of device memory (gice_file_open).
 * file_read: bytes at file offset file_off into device memory dst; file_write: bytes of device
 * memory src to the file at file_off. Non-blocking, as puts: GICE_OK once queued; completion
 * gains one when every byte has moved or records the failure (gice.h lists them). The buffer
 * must not be written (read: read) by anyone until then. */
int gice_file_read(gice_kctx_t *k, gice_file_t file, void *dst, uint64_t file_off, size_t bytes,
		   gice_completion_t completion);
int gice_file_write(gice_kctx_t *k, gice_file_t file, const void *src, uint64_t file_off, size_t bytes,
		    gice_completion_t completion);
/* Open the reserved file (gice_file_reserve) by path: a NUL-terminated string in device memory
 * within its first bytes (copied when the storage engine takes the request), flags GICE_FILE_*.
 * Non-blocking (_nbi: the host's gice_file_open blocks): completion gains one once the file is
 * open, or records the failure (ENOENT: GICE_ERR_NOT_FOUND, ...: gice.h). */
int gice_file_open_nbi(gice_kctx_t *k, gice_file_t file, const char *path, size_t bytes, unsigned flags,
		       gice_completion_t completion);
/* Close file; its id stays reserved for the next gice_file_open_nbi. Non-blocking. */
int gice_file_close_nbi(gice_kctx_t *k, gice_file_t file, gice_completion_t completion);
/* fsync file (flags GICE_FILE_SYNC_DATA: fdatasync): what completed writes put in it is
 * durable when completion gains one. It orders nothing by itself: issue it once the writes have
 * completed (or arm it on their completion counter). */
int gice_file_sync(gice_kctx_t *k, gice_file_t file, unsigned flags, gice_completion_t completion);
/* ---- end of storage path */

/* Errors reach the host. The kernel fails with status (< 0) and what (a short text, copied):
 * the first failure of a kernel — this, a failed gice_wait_until or gice_quiet (but not a wait
 * that timed out at its own explicit timeout) — is logged with its block and becomes its
 * stream's error, which the next gice_stream_sync returns; later work on the stream is skipped
 * until then. The kernel goes on running: return from it. */
void gice_kernel_fail(gice_kctx_t *k, int status, const char *what);

#ifdef __cplusplus
}
#endif
#endif
