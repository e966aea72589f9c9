/* gice.h: the gice host API — set-up of emulated GPUs ("devices"), their memory, connections,
 * counters (trigger words and completion records), armed descriptors and streams — and the
 * device API that kernels call (gice_device.h, included here).
 *
 * Two phases, as on the hardware: set up once on the host (may take milliseconds), then only
 * trigger and complete: kernels write triggers or issue requests, Communication Tiles (CT engine
 * threads) carry them out over libfabric, completions land in counters that the next kernel or
 * stream waits on. The host does nothing per message.
 *
 * Every call returns a gice_status_t: GICE_OK (0) or a negative GICE_ERR_*; outputs are set only
 * on success. Errors are also logged once, with the values involved (GICE_LOG_LEVEL).
 */
#ifndef GICE_H
#define GICE_H

#include <stddef.h>
#include <stdint.h>

#include "gice_stats.h"
#include "gice_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gice_device gice_device_t;
typedef struct gice_stream gice_stream_t;

/* A counter is one cache line of trigger memory: a 64-bit success count (the trigger word),
 * a failure count, the last status and a timestamp. Trigger words and completion records are
 * both counters, so any completion can trigger further work. Ids are per device. */
typedef uint32_t gice_counter_t;
typedef gice_counter_t gice_trigger_t;
typedef gice_counter_t gice_completion_t;
#define GICE_NO_COUNTER UINT32_MAX

typedef uint32_t gice_conn_t;  /* connection id, per device */
typedef uint32_t gice_desc_t;  /* armed descriptor id, per device */

typedef enum { GICE_CMP_EQ, GICE_CMP_NE, GICE_CMP_GT, GICE_CMP_GE, GICE_CMP_LT, GICE_CMP_LE } gice_cmp_t;

typedef struct {
	uint64_t value;  /* success count */
	uint64_t fail;   /* failure count */
	int32_t status;  /* last failure status, GICE_OK if none */
	uint64_t ts_ns;  /* CLOCK_MONOTONIC time of the last change */
} gice_counter_state_t;

/* ---------------------------------------------------------------- library and devices */

/* Read configuration (GICE_* variables; gice-info -c lists them). Reference counted; every
 * successful gice_init needs one gice_finalize. GICE_ERR_CONFIG on a bad value. */
int gice_init(void);
int gice_finalize(void);

/* ---------------------------------------------------------------- the job
 * A job is one or more ranks (processes). gice_init joins it: GICE_RANK, GICE_WORLD_SIZE and
 * GICE_BOOTSTRAP (set by gicerun) name this rank and the rendezvous; without them the job is
 * this process alone. In a job of several ranks gice_device_open is collective: the k-th open
 * on every rank opens device gice_device_id_of(rank, k) and wires it to every device of every
 * rank. gice_init fails with GICE_ERR_TIMED_OUT (naming the ranks that never arrived) after
 * GICE_BOOTSTRAP_TIMEOUT_MS. */
uint32_t gice_rank(void);
uint32_t gice_world_size(void);
/* GICE_DEVICES_PER_RANK (gicerun --devices-per-rank): how many devices each rank is meant to
 * open; 1 unless set. */
uint32_t gice_devices_per_rank(void);
/* Global id of the index-th device opened by rank. */
uint32_t gice_device_id_of(uint32_t rank, uint32_t index);
/* Host-side helpers over the bootstrap (set-up only): a barrier of all ranks, and an allgather
 * of len bytes per rank into all (world size * len bytes, rank order). GICE_ERR_TIMED_OUT or
 * GICE_ERR_PEER_DEAD naming the rank that failed; GICE_ERR_INVALID before gice_init. */
int gice_barrier(void);
int gice_allgather(const void *mine, size_t len, void *all);

typedef struct {
	uint32_t n_sms;     /* SM worker threads; 0: GICE_SMS */
	uint32_t n_cts;     /* CT engine threads; 0: GICE_CTS */
	uint64_t hbm_bytes; /* device memory; 0: GICE_HBM_BYTES */
	const char *provider; /* libfabric provider; NULL: GICE_FI_PROVIDER or auto */
} gice_device_attr_t;

/* Open an emulated GPU: HBM arena, trigger memory, SM threads, CT threads and a fabric endpoint.
 * Every device already open in this process becomes its peer (addresses exchanged both ways).
 * attr may be NULL. Errors: GICE_ERR_CONFIG, GICE_ERR_NO_MEMORY, GICE_ERR_FABRIC (no provider
 * opens; message names the provider). */
int gice_device_open(const gice_device_attr_t *attr, gice_device_t **out);
/* Stop the device's threads after queued stream work has run; pending operations complete with
 * GICE_ERR_CANCELED. GICE_ERR_INVALID on NULL. GICE_ERR_CT_STALLED when the watchdog found the
 * device's link held by a call into the fabric provider that does not return (libfabric's shm
 * spinning on a lock a dead process held): the device is closed to the job, its queued work
 * dropped, and the stuck thread, with what it may touch, left to the process's exit (logged). */
int gice_device_close(gice_device_t *dev);
/* Global id of the device (what peers name in gice_conn_open). */
uint32_t gice_device_id(const gice_device_t *dev);
/* The fabric provider in use, e.g. "shm" or "tcp;ofi_rxm". */
const char *gice_device_provider(const gice_device_t *dev);
/* The device's SMs (worker threads that run kernel blocks: gice_device_attr_t.n_sms or
 * GICE_SMS) in *n_sms: the largest grid gice_launch_cooperative takes. GICE_OK;
 * GICE_ERR_INVALID on NULL (*n_sms untouched). */
int gice_device_sms(const gice_device_t *dev, uint32_t *n_sms);

/* ---------------------------------------------------------------- memory */

/* Allocate device memory (256-byte aligned) from the device's HBM arena. The pointer is valid
 * in this process for kernels and the host. GICE_ERR_NO_MEMORY names the request and the free
 * bytes; GICE_ERR_INVALID for size 0. */
int gice_mem_alloc(gice_device_t *dev, size_t size, void **ptr);
/* GICE_ERR_BUSY while any part is registered; GICE_ERR_INVALID if ptr is not an allocation. */
int gice_mem_free(gice_device_t *dev, void *ptr);
/* Register [ptr, ptr+len) of one allocation for remote access and as a local source/target of
 * operations; returns a random 64-bit key that peers use to address it (offsets count from ptr).
 * When the provider offers remote reads, the region is also its own provider registration that
 * peers' rendezvous reads are bounded by (docs/protocol.md, "Read grants").
 * GICE_ERR_INVALID outside an allocation, GICE_ERR_OVERFLOW when the table is full; the
 * provider's refusal of the registration (GICE_ERR_FABRIC, GICE_ERR_NO_MEMORY) registers nothing. */
int gice_mem_register(gice_device_t *dev, void *ptr, size_t len, uint64_t *key);
/* GICE_ERR_BAD_KEY when key is not registered on dev. Peers' reads of the region fail from then on. */
int gice_mem_deregister(gice_device_t *dev, uint64_t key);
/* Device offset of ptr (what a peer passes to gice_peer_ptr). GICE_ERR_INVALID outside dev's
 * memory. */
int gice_mem_offset(gice_device_t *dev, const void *ptr, uint64_t *offset);
/* NVLink plane (GICE_PLANE auto or nvlink): a load/store pointer, valid in this process, to
 * [offset, offset+len) of the memory of device peer_id when it is on the same host (any device
 * of this process, or of another rank on this machine and network namespace), like
 * nvshmem_ptr or an NCCL LSA window. NULL when the peer is not reachable that way or the range
 * leaves its memory. Accesses through it are plain memory accesses: order them with signals. */
void *gice_peer_ptr(gice_device_t *dev, uint32_t peer_id, uint64_t offset, size_t len);

/* ---------------------------------------------------------------- connections */

typedef struct {
	uint8_t qos;  /* QoS class 0 (most urgent) .. 3 */
	uint32_t mtu; /* largest packet, 96-byte header included; 0: GICE_MTU */
} gice_conn_attr_t;

/* Open a connection context from dev to device peer_id (gice_device_id of the peer). Plain
 * data, written once; operations name it by id. attr may be NULL. GICE_ERR_NOT_FOUND if the
 * peer is unknown, GICE_ERR_INVALID on bad qos/mtu. */
int gice_conn_open(gice_device_t *dev, uint32_t peer_id, const gice_conn_attr_t *attr, gice_conn_t *conn);
int gice_conn_close(gice_device_t *dev, gice_conn_t conn);

/* ---------------------------------------------------------------- counters */

/* GICE_ERR_NO_MEMORY when all GICE_COUNTERS are in use. A new counter reads 0. */
int gice_counter_alloc(gice_device_t *dev, gice_counter_t *ctr);
int gice_counter_free(gice_device_t *dev, gice_counter_t ctr);
#define gice_trigger_alloc gice_counter_alloc
#define gice_completion_alloc gice_counter_alloc
uint64_t gice_counter_read(gice_device_t *dev, gice_counter_t ctr);
int gice_counter_get(gice_device_t *dev, gice_counter_t ctr, gice_counter_state_t *st);
/* Host writes (set-up, tests). Writes wake waiters and may fire armed descriptors. */
int gice_counter_set(gice_device_t *dev, gice_counter_t ctr, uint64_t value);
int gice_counter_add(gice_device_t *dev, gice_counter_t ctr, uint64_t value);
/* Zero value, failure count and status. Descriptors armed on the counter keep their absolute
 * thresholds (a persistent one the next threshold its period took it to) and nothing fires:
 * see gice_signal_reset in gice_device.h and docs/api.md. */
int gice_counter_reset(gice_device_t *dev, gice_counter_t ctr);
/* Host wait until cmp(value, target) holds (wraparound-safe). GICE_ERR_TIMED_OUT after
 * timeout_ms (a poll: logged at debug), or with timeout_ms 0 after GICE_TIMEOUT_MS without
 * progress (a stall: logged as an error); the counter's failure status if it records a failure;
 * the device's abort status once it is aborted. *found (may be NULL) gets the last value seen. */
int gice_counter_wait(gice_device_t *dev, gice_counter_t ctr, gice_cmp_t cmp, uint64_t target,
		      uint64_t timeout_ms, uint64_t *found);

/* ---------------------------------------------------------------- operations and arming */

typedef enum {
	GICE_OP_PUT = 1,          /* bytes from local src to (rkey, roff) at the peer */
	GICE_OP_GET = 2,          /* bytes from (rkey, roff) at the peer to local dst */
	GICE_OP_ATOMIC_ADD = 3,   /* 64-bit fetch-add at (rkey, roff); old value to result */
	GICE_OP_ATOMIC_CSWAP = 4, /* 64-bit compare-and-swap; old value to result */
	GICE_OP_COUNTER_ADD = 5,  /* local counter += value (chaining) */
	GICE_OP_COUNTER_SET = 6,  /* local counter = value */
	/* storage path (gice_file_open): bytes of device memory at local <-> file rkey (a gice_file_t)
	 * at file offset roff; completion gains one when all bytes have moved */
	GICE_OP_FILE_READ = 7,    /* file -> device memory */
	GICE_OP_FILE_WRITE = 8,   /* device memory -> file */
	/* open the file rkey (reserved: gice_file_reserve) by the NUL-terminated path in device
	 * memory at local (bytes: its buffer, NUL included), with value the GICE_FILE_* flags */
	GICE_OP_FILE_OPEN = 9,
	GICE_OP_FILE_CLOSE = 10,  /* close the file rkey; the id stays reserved for the next open */
	GICE_OP_FILE_SYNC = 11,   /* fsync the file rkey (value GICE_FILE_SYNC_DATA: fdatasync) */
} gice_op_type_t;

/* Signal flags: SET (default) or ADD, weak (default: applied when this put has landed) or
 * STRONG (applied only after every earlier put to that peer has landed, as NCCL GIN). */
enum { GICE_SIGNAL_SET = 0, GICE_SIGNAL_ADD = 1, GICE_SIGNAL_STRONG = 2 };

typedef struct {
	gice_op_type_t type;
	gice_conn_t conn;          /* remote ops */
	void *local;               /* put source, get destination, atomic result (NULL: discard) */
	size_t bytes;              /* put/get */
	uint64_t rkey, roff;       /* remote region key and offset */
	uint64_t value;            /* signal value, atomic operand, counter value */
	uint64_t compare;          /* compare-swap */
	gice_counter_t signal;     /* put: remote signal counter, GICE_NO_COUNTER for none;
				      counter ops: the local counter */
	int signal_flags;          /* GICE_SIGNAL_* */
	gice_completion_t completion; /* local completion counter or GICE_NO_COUNTER */
} gice_op_t;

/* Arm op to fire when trigger reaches threshold (wraparound-safe >=); equal thresholds fire in
 * arming order; an already reached threshold fires at once. period > 0 re-arms at threshold +
 * period after each firing (a persistent descriptor), 0 fires once.
 * GICE_ERR_INVALID (bad counter, op or pointer), GICE_ERR_UNREGISTERED (local buffer outside
 * device memory), GICE_ERR_OVERFLOW (GICE_CT_MAX_DESCS armed). */
int gice_arm(gice_device_t *dev, gice_trigger_t trigger, uint64_t threshold, uint64_t period, const gice_op_t *op,
	     gice_desc_t *desc);
/* GICE_ERR_NOT_FOUND if the descriptor already fired (one-shot) or is unknown. */
int gice_disarm(gice_device_t *dev, gice_desc_t desc);

/* Host-issued operation (same path as a kernel's: through the CT's request queue). An error
 * found before it is queued (bad buffer or counter, queue full past GICE_TIMEOUT_MS, aborted
 * device) is returned and also recorded in its completion counter. */
int gice_post(gice_device_t *dev, const gice_op_t *op);
/* Wait until every operation issued on dev so far (by kernels, the host, or fired by armed
 * descriptors) has completed. GICE_OK; the status of the first operation that failed since the
 * last quiet; GICE_ERR_TIMED_OUT after timeout_ms (0: GICE_TIMEOUT_MS without progress); the
 * abort status of an aborted device. */
int gice_device_quiet(gice_device_t *dev, uint64_t timeout_ms);

/* ---------------------------------------------------------------- streams and kernels */

typedef struct gice_kctx gice_kctx_t;
typedef void (*gice_kernel_t)(gice_kctx_t *ctx, void *args);

int gice_stream_create(gice_device_t *dev, gice_stream_t **out);
/* Waits (GICE_TIMEOUT_MS) for queued work; GICE_ERR_TIMED_OUT leaves it alive. */
int gice_stream_destroy(gice_stream_t *s);
/* Run kernel once per block of a grid of nblocks on the device's SMs, after the stream's
 * earlier work. args_size bytes at args are copied (no allocation per launch; arguments over
 * 128 bytes into a buffer kept for the next launches). Asynchronous. A block that waits holds
 * its SM: a grid whose blocks wait on each other needs gice_launch_cooperative.
 * GICE_ERR_INVALID for nblocks 0, no kernel, or args NULL with args_size > 0;
 * GICE_ERR_NO_MEMORY when the stream queue (GICE_SMT_STREAM_DEPTH) is full. */
int gice_launch(gice_stream_t *s, gice_kernel_t kernel, uint32_t nblocks, const void *args, size_t args_size);
/* gice_launch for a grid whose blocks wait on each other (a grid barrier, a producer block and
 * its consumers): every block gets an SM at once, so nblocks must not exceed the device's SMs
 * (gice_device_sms), and they all run concurrently when no other kernel holds SMs.
 * GICE_ERR_INVALID, with nothing enqueued and a message naming nblocks and the SM count, when
 * nblocks > the SMs (such a grid would hang); otherwise as gice_launch. */
int gice_launch_cooperative(gice_stream_t *s, gice_kernel_t kernel, uint32_t nblocks, const void *args,
			    size_t args_size);
/* The stream stalls until cmp(counter, value) holds — no host thread polls. Past timeout_ms
 * (0: GICE_TIMEOUT_MS) the wait fails: gice_stream_sync returns GICE_ERR_TIMED_OUT. */
int gice_stream_wait_value(gice_stream_t *s, gice_counter_t ctr, gice_cmp_t cmp, uint64_t value,
			   uint64_t timeout_ms);
/* Set (add = 0) or add to a counter when the stream reaches this point. */
int gice_stream_write_value(gice_stream_t *s, gice_counter_t ctr, uint64_t value, int add);
/* Wait for everything queued so far. GICE_OK, the first error of the stream's work since the
 * last sync (a failed stream wait, a kernel's failure: gice_kernel_fail), the abort status of
 * an aborted device, or GICE_ERR_TIMED_OUT after timeout_ms, or with timeout_ms 0 after
 * GICE_TIMEOUT_MS without progress (a kernel that runs long while its device moves never times
 * out). */
int gice_stream_sync(gice_stream_t *s, uint64_t timeout_ms);

/* ================================================================ symmetric memory and teams
 * (issue 10; docs/api.md has the porting guide from NVSHMEM and NCCL.)
 *
 * Symmetric heap: gice_sym_init gives every device of the job (every device open on every rank
 * when it is called) a heap of the same size in its device memory, registered once; the keys
 * are exchanged there, once. gice_sym_alloc then hands out the same offset on every device, so
 * a kernel names a buffer of a peer by (team, team rank, offset) and never sees a key
 * (gice_sym_put & co. in gice_device.h). Symmetric counters are ids allocated on every device
 * at once, so the same id names "the same" counter everywhere.
 *
 * Collectives on the host (gice_sym_init, gice_sym_fini, gice_sym_alloc, gice_sym_free,
 * gice_sym_counter_alloc, gice_team_split*, gice_team_destroy) are called by every rank of the
 * job, in the same order with the same arguments (like nvshmem_malloc, MPI_Comm_split); each
 * call acts for every device of this process. They are set-up calls: not thread-safe with
 * each other. Devices must stay open until gice_sym_fini.
 *
 * A team is an ordered set of devices; its ranks are 0..size-1. The world team holds every
 * device of the job in increasing device id order, so with one device per rank, team rank ==
 * gice_rank(). A process holds one team handle for all its devices in the team. */
typedef struct gice_team gice_team_t;

/* Create the symmetric heap (heap_bytes, 0: GICE_SYM_HEAP_BYTES; rounded up to 64 KiB) on every
 * device open now, exchange keys, open a connection from every device to every other, and
 * create the world team. GICE_ERR_INVALID (before gice_init, no device open, already done, or
 * ranks disagree on the size: the message names them), GICE_ERR_NO_MEMORY (device memory),
 * GICE_ERR_UNSUPPORTED (more than 16 devices in a process). */
int gice_sym_init(size_t heap_bytes);
/* Undo gice_sym_init, collectively: every device here is quieted and the ranks meet (so no
 * signal is still in flight to a device about to close); then every team (their handles are
 * invalid from now on), the heaps and the symmetric state go (symmetric counters stay
 * allocated: free them first if the devices live on). GICE_ERR_INVALID when not initialised.
 * gice_finalize frees what the program did not, without the quiet and the meeting (ranks may
 * be gone by then). */
int gice_sym_fini(void);
/* Allocate bytes (256-byte aligned) at the same offset *off of every device's heap, first fit.
 * GICE_ERR_INVALID for 0 bytes, before gice_sym_init, or when ranks asked for different sizes
 * (nothing allocated; the message names the ranks); GICE_ERR_NO_MEMORY when no hole fits (names
 * the request and the largest hole). */
int gice_sym_alloc(size_t bytes, uint64_t *off);
/* GICE_ERR_INVALID when off is not an allocation. */
int gice_sym_free(uint64_t off);
/* Where offset off of dev's heap is in this process (host or kernel), NULL when dev has no heap
 * or off is outside it. */
void *gice_sym_ptr(gice_device_t *dev, uint64_t off);
/* Size of the heap (0 before gice_sym_init). */
uint64_t gice_sym_heap_bytes(void);
/* One counter id allocated on every device of the job (reads 0 everywhere). GICE_ERR_INVALID
 * before gice_sym_init, GICE_ERR_NO_MEMORY when no id is free on every device. */
int gice_sym_counter_alloc(gice_counter_t *ctr);
int gice_sym_counter_free(gice_counter_t ctr);

/* The world team (NULL before gice_sym_init). */
gice_team_t *gice_team_world(void);
uint32_t gice_team_size(const gice_team_t *team);
/* dev's rank in team, -1 when it is not a member (or team is NULL). */
int32_t gice_team_rank(const gice_team_t *team, const gice_device_t *dev);
/* Device id of team rank rank, UINT32_MAX when out of range. */
uint32_t gice_team_device_id(const gice_team_t *team, uint32_t rank);
/* Rank in dst of rank rank of src (nvshmem_team_translate_pe), -1 when it is not in dst. */
int32_t gice_team_translate_rank(const gice_team_t *src, uint32_t rank, const gice_team_t *dst);
/* Devices of this process in team, in team rank order: how many, and the i-th (NULL past them). */
uint32_t gice_team_n_local(const gice_team_t *team);
gice_device_t *gice_team_local(const gice_team_t *team, uint32_t i);
/* New team of parent's ranks start, start + stride, ... (size of them), as
 * nvshmem_team_split_strided. Collective over every rank of the job, same arguments
 * everywhere. *out is NULL on ranks with no device in it. GICE_ERR_INVALID (stride 0, size 0,
 * a rank past the parent's end: the message names it). */
int gice_team_split_strided(gice_team_t *parent, uint32_t start, uint32_t stride, uint32_t size,
			    gice_team_t **out);
#define GICE_TEAM_NO_COLOR (-1)
/* Split parent as MPI_Comm_split: colors[i] and keys[i] are those of gice_team_local(parent, i);
 * devices of one color form a team, ordered by (key, parent rank); GICE_TEAM_NO_COLOR: none.
 * out[i] gets the team of local device i (one handle per team in the process) or NULL.
 * Collective over every rank of the job (a rank with no device in parent passes NULLs). */
int gice_team_split(gice_team_t *parent, const int *colors, const int *keys, gice_team_t **out);
/* Free a team of this process and its barrier counters (call it on every rank that holds the
 * team, once no member can still be in a barrier of it, e.g. after gice_barrier; ranks without
 * a handle have nothing to free). GICE_ERR_INVALID for NULL and the world
 * team, which goes with gice_sym_fini (as does every team not destroyed). */
int gice_team_destroy(gice_team_t *team);

/* ================================================================ end of symmetric memory and teams */

/* ================================================================ collectives (issue 10; docs/api.md)
 * Collectives over a team on buffers of the symmetric heap (offsets from gice_sym_alloc: the same
 * on every device, like NVSHMEM's collectives). Host-enqueued on a stream (as ncclAllReduce: the
 * call returns at once, a one-block kernel does the work after the stream's earlier work; the
 * stream's device must be in the team) or called from a kernel (gice_coll_*_k, one block per
 * device; it returns when this device's part is done). Every member calls the same collectives on
 * a team in the same order with the same count, type, op and root; one collective at a time per
 * device and team. send == recv is in place (allreduce, reduce, broadcast). allgather, broadcast
 * and alltoall start with a team sync. count 0 does nothing; a team of one copies. Errors: GICE_ERR_INVALID (no gice_coll_init on the
 * team, device not a member, avg on an integer type, bad type or op: the message names them),
 * GICE_ERR_OUT_OF_BOUNDS (a buffer past the heap); from a kernel, failures also fail it. */
typedef enum {
	GICE_INT8, GICE_UINT8, GICE_INT32, GICE_UINT32, GICE_INT64, GICE_UINT64,
	GICE_FLOAT16, GICE_BFLOAT16, GICE_FLOAT32, GICE_FLOAT64, GICE_DTYPE_COUNT
} gice_dtype_t;
typedef enum { GICE_RED_SUM, GICE_RED_PROD, GICE_RED_MIN, GICE_RED_MAX, GICE_RED_AVG, GICE_REDOP_COUNT } gice_redop_t;

/* Collective set-up of team: GICE_COLL_SCRATCH_BYTES of heap (landing zones) and its signal
 * counters. Called by every rank of the job (ranks with no device in team pass NULL: the heap
 * allocators stay in step); once per team. The scratch stays in the heap until gice_sym_fini.
 * GICE_ERR_INVALID (before gice_sym_init, twice), GICE_ERR_NO_MEMORY (heap or counters). */
int gice_coll_init(gice_team_t *team);
/* Size in bytes of one element (0 for a bad type). */
size_t gice_dtype_size(gice_dtype_t type);
/* recv[i] = op over the team's ranks of send[i], i < count (elements of type). Algorithm by
 * size: one-shot (every rank puts its buffer to every other, each reduces in rank order) up to
 * GICE_COLL_SMALL_BYTES, else a pipelined ring (reduce-scatter + allgather) in chunks of
 * GICE_CHUNK_BYTES; GICE_ALGO forces one. */
int gice_coll_allreduce(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			gice_dtype_t type, gice_redop_t op);
int gice_coll_allreduce_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			  gice_dtype_t type, gice_redop_t op);
/* send holds n x count elements (n: team size), recv count: team rank r gets block r of the
 * reduction (ring reduce-scatter). In place: recv = send + r x count x element size. */
int gice_coll_reduce_scatter(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			     gice_dtype_t type, gice_redop_t op);
int gice_coll_reduce_scatter_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			       gice_dtype_t type, gice_redop_t op);
/* send holds count elements, recv n x count: block r of every recv gets rank r's send (ring).
 * In place: send = recv + r x count x element size. */
int gice_coll_allgather(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			gice_dtype_t type);
int gice_coll_allgather_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			  gice_dtype_t type);
/* recv of team rank root gets the reduction of every send (ring reduce-scatter, then every
 * block to the root); recv is not written elsewhere. GICE_ERR_INVALID for root >= team size. */
int gice_coll_reduce(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
		     gice_dtype_t type, gice_redop_t op, uint32_t root);
int gice_coll_reduce_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
		       gice_dtype_t type, gice_redop_t op, uint32_t root);
/* Every recv gets root's send (a chain from the root, pipelined by GICE_CHUNK_BYTES); send is
 * read on the root only. */
int gice_coll_broadcast(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			gice_dtype_t type, uint32_t root);
int gice_coll_broadcast_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			  gice_dtype_t type, uint32_t root);
/* send and recv hold n x count elements: block j of rank r's send goes to block r of rank j's
 * recv. Not in place (GICE_ERR_INVALID). */
int gice_coll_alltoall(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
		       gice_dtype_t type);
int gice_coll_alltoall_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
			 gice_dtype_t type);
/* alltoallv (MoE dispatch/combine): send_counts[j] elements at send + send_displs[j] (in
 * elements) go to team rank j, where they land at recv + j's recv_displs[me] (each device names
 * where every rank's block lands in its own recv; the library exchanges these first). Arrays of
 * team-size entries; the host form copies them (teams of at most 64 from the host:
 * GICE_ERR_UNSUPPORTED beyond), the kernel form reads them while it runs. GICE_ERR_OUT_OF_BOUNDS
 * for a block or a landing place past the heap. */
int gice_coll_alltoallv(gice_stream_t *s, gice_team_t *team, uint64_t send, const size_t *send_counts,
			const size_t *send_displs, uint64_t recv, const size_t *recv_displs, gice_dtype_t type);
int gice_coll_alltoallv_k(gice_kctx_t *k, gice_team_t *team, uint64_t send, const size_t *send_counts,
			  const size_t *send_displs, uint64_t recv, const size_t *recv_displs, gice_dtype_t type);
/* Persistent allreduce, with the host idle: one launch on s serves iters iterations. Iteration
 * i (0-based) starts when counter trigger of this device reaches first + i — one trigger write
 * per iteration, by a kernel (gice_trigger_add), a stream (gice_stream_write_value), an armed
 * descriptor or a peer's signal — runs the allreduce of send into recv, then adds 1 to counter
 * done. The kernel holds one SM for the whole run, and a wait for a trigger is a wait like any
 * other: a gap of GICE_TIMEOUT_MS without the trigger fails it (GICE_ERR_TIMED_OUT). Counters
 * only grow: the next run passes first = first + iters (or resets them; see gice_signal_reset).
 * Errors as gice_coll_allreduce; GICE_ERR_INVALID for GICE_NO_COUNTER or 0 iterations. */
int gice_coll_allreduce_persistent(gice_stream_t *s, gice_team_t *team, uint64_t send, uint64_t recv, size_t count,
				   gice_dtype_t type, gice_redop_t op, gice_counter_t trigger, uint64_t first,
				   uint64_t iters, gice_counter_t done);
/* ================================================================ end of collectives */

/* ================================================================ storage path and memory pools
 * (issue 12; kept in one section)
 *
 * Files into and out of device memory (GPUDirect Storage emulation). A file is opened once at
 * set-up; reads and writes are operations like puts: a kernel issues them (gice_file_read,
 * gice_file_write in gice_device.h), an armed descriptor fires them (gice_arm with
 * GICE_OP_FILE_READ / GICE_OP_FILE_WRITE: rkey is the gice_file_t, roff the file offset), or
 * the host posts them (gice_post). A CT hands them to the device's storage engine (a thread over
 * io_uring, GICE_IO_BACKEND), which cuts them into GICE_IO_CHUNK pieces, GICE_IO_QD in flight,
 * with O_DIRECT for the 4 KiB-aligned parts (GICE_IO_DIRECT) and the page cache for the rest.
 * The completion counter gains one when every byte has moved, or records the failure:
 * GICE_ERR_OUT_OF_BOUNDS (a read past the end of the file), GICE_ERR_NO_SPACE (ENOSPC, EDQUOT,
 * EFBIG), GICE_ERR_ACCESS (EBADF: a write to a file opened read-only; EACCES, EROFS),
 * GICE_ERR_IO (EIO and the rest), GICE_ERR_INVALID (file not open, range past the end of device
 * memory), GICE_ERR_UNREGISTERED (a buffer that is not device memory: also returned by the call);
 * gice_file_error gives the message, naming the file, offset, length and errno.
 * File operations are not ordered among themselves or with puts: see docs/storage.md. */
typedef uint32_t gice_file_t;
enum {
	GICE_FILE_READ = 1u << 0,
	GICE_FILE_WRITE = 1u << 1,
	GICE_FILE_CREATE = 1u << 2,    /* create when missing (mode 0644) */
	GICE_FILE_TRUNC = 1u << 3,     /* truncate to 0 at open */
	GICE_FILE_NO_DIRECT = 1u << 4, /* page cache only, never O_DIRECT */
};
/* GICE_OP_FILE_SYNC's value: fdatasync (data, and the metadata needed to read it back) instead
 * of fsync */
enum { GICE_FILE_SYNC_DATA = 1u << 0 };
/* Open path on dev (the first open starts dev's storage engine). GICE_ERR_NOT_FOUND (missing
 * file), GICE_ERR_ACCESS (permissions, read-only file system), GICE_ERR_OVERFLOW
 * (GICE_IO_MAX_FILES open), GICE_ERR_INVALID (no READ/WRITE flag, path too long),
 * GICE_ERR_UNSUPPORTED (GICE_IO_BACKEND=uring where io_uring cannot start); logged with the path
 * and errno. */
int gice_file_open(gice_device_t *dev, const char *path, unsigned flags, gice_file_t *file);
/* Reserve a file id on dev (set-up; the first call starts dev's storage engine) for a file that
 * is opened at run time, by path, by an operation: GICE_OP_FILE_OPEN (armed, posted, or a
 * kernel's gice_file_open_nbi), carried out by the storage engine (io_uring openat; open(2) on
 * the psync backend). Its completion gains one when the file is open, or records the failure
 * as a read's would: GICE_ERR_NOT_FOUND (ENOENT), GICE_ERR_ACCESS (EACCES, EPERM, EROFS),
 * GICE_ERR_BUSY (the id is open: close it first), GICE_ERR_INVALID (no NUL in the path buffer,
 * bad flags), GICE_ERR_IO, GICE_ERR_TIMED_OUT (no answer in GICE_TIMEOUT_MS); gice_file_error
 * names the path and errno. GICE_OP_FILE_CLOSE closes it again, keeping the id, so one id serves
 * a file that appears and disappears at run time; gice_file_close releases the id.
 * GICE_ERR_OVERFLOW (GICE_IO_MAX_FILES taken), GICE_ERR_INVALID (NULL), GICE_ERR_UNSUPPORTED as
 * gice_file_open. */
int gice_file_reserve(gice_device_t *dev, gice_file_t *file);
/* Close file (open, or only reserved) and release its id. GICE_ERR_BUSY while operations on it
 * are outstanding; GICE_ERR_INVALID if not taken. */
int gice_file_close(gice_device_t *dev, gice_file_t file);
/* The last failure of an operation on file (GICE_OK if none); its message into buf (len bytes,
 * may be NULL). */
int gice_file_error(gice_device_t *dev, gice_file_t file, char *buf, size_t len);

/* Device memory pools. With GICE_COMM_POOL_BYTES > 0, the top of each device's memory is a
 * communication pool of that many bytes (buffers to register for communication) and the rest is
 * the compute pool that gice_mem_alloc serves, so that neither starves the other; with 0 (the
 * default) there is one pool and GICE_POOL_COMM allocations come from it. Free with
 * gice_mem_free. GICE_ERR_NO_MEMORY past a pool's quota, logged as "<pool> pool exhausted: alloc
 * of N bytes aligned to A, F bytes free in the pool, largest free block L (pool of P bytes)";
 * GICE_ERR_INVALID for size 0 or an unknown pool. */
typedef enum { GICE_POOL_COMPUTE = 0, GICE_POOL_COMM = 1 } gice_pool_t;
int gice_pool_alloc(gice_device_t *dev, gice_pool_t pool, size_t size, void **ptr);
typedef struct {
	uint64_t bytes;        /* the pool's size */
	uint64_t used, free;
	uint64_t largest_free; /* largest free block: 1 - largest_free / free is the fragmentation */
	uint32_t free_blocks;
} gice_pool_usage_t;
int gice_pool_usage(gice_device_t *dev, gice_pool_t pool, gice_pool_usage_t *usage);
/* ================================================================ end of storage and pools */

/* ---------------------------------------------------------------- introspection */

/* A device's counters, one uint64_t per entry of GICE_STATS_LIST (gice_stats.h: the name and
 * help of each, in this order; new counters are appended). */
typedef struct {
#define GICE_STATS_FIELD(name, from, field, help) uint64_t name;
	GICE_STATS_LIST(GICE_STATS_FIELD)
#undef GICE_STATS_FIELD
} gice_stats_t;
/* Copy dev's counters, summed since it was opened, into *st. GICE_OK. */
int gice_device_stats(gice_device_t *dev, gice_stats_t *st);

/* A device's counters for one peer device: the entries of GICE_PEER_STATS_LIST (gice_stats.h),
 * named and meant as in gice_stats_t, counted for packets to (tx, faults) or from (rx,
 * rx_csum_bad) that peer: which link is lossy, who sends corrupt packets; then the gauges of
 * GICE_PEER_GAUGE_LIST: the link's smoothed, smallest and largest round-trip time. */
typedef struct {
#define GICE_PEER_STATS_FIELD(name) uint64_t name;
	GICE_PEER_STATS_LIST(GICE_PEER_STATS_FIELD)
#undef GICE_PEER_STATS_FIELD
#define GICE_PEER_GAUGE_FIELD(name, help) uint64_t name;
	GICE_PEER_GAUGE_LIST(GICE_PEER_GAUGE_FIELD) /* the link's round-trip time (gice_stats.h) */
#undef GICE_PEER_GAUGE_FIELD
} gice_peer_stats_t;
/* Copy dev's counters for peer device peer (a device id, gice_device_id_of) into *st.
 * GICE_OK; GICE_ERR_INVALID: dev or st NULL; GICE_ERR_OUT_OF_BOUNDS: peer is not below
 * GICE_CT_MAX_PEERS. */
int gice_device_peer_stats(gice_device_t *dev, uint32_t peer, gice_peer_stats_t *st);

/* Per-operation stage timestamps (CLOCK_MONOTONIC ns) of the most recent network operations. */
typedef struct {
	uint32_t op, peer;
	uint64_t bytes;
	uint64_t t_issue;    /* kernel wrote the request / trigger fired */
	uint64_t t_pickup;   /* CT picked it up */
	uint64_t t_first_tx; /* first packet handed to the fabric */
	uint64_t t_complete; /* ack (or response) arrived; completion written */
	int32_t status;
} gice_trace_t;
/* Up to max most recent, oldest first; returns the count. */
uint32_t gice_device_trace(gice_device_t *dev, gice_trace_t *out, uint32_t max);

/* ---------------------------------------------------------------- failures, faults, the watchdog
 * Timeouts measure stalls: a wait given no timeout (0) fails with GICE_ERR_TIMED_OUT only after
 * GICE_TIMEOUT_MS in which what it waits on made no progress (its counter did not change, the
 * device received and completed nothing; for a stream sync, no command or block finished and no
 * wait of the device was pending); an explicit timeout bounds the wait's duration.
 *
 * A watchdog thread per process checks every device every few milliseconds: a peer silent for
 * GICE_TIMEOUT_MS is lost — dead (GICE_ERR_PEER_DEAD: its process is gone, or on another machine
 * and cannot be seen) or hung (GICE_ERR_PEER_HUNG: its process is alive but not responding); a
 * peer that acknowledges nothing for that long fails the operations to it (GICE_ERR_TIMED_OUT); a
 * CT with work and no progress for half of it is stalled (GICE_ERR_CT_STALLED). The operations
 * involved complete with that status (their waiters return it), the diagnostic below is logged,
 * kept as the device's error (gice_device_error) and passed to the error callback, then
 * GICE_ON_TIMEOUT decides: error, fallback (a stalled CT's operations are issued by a host
 * proxy thread) or abort (the process).
 * A lost peer also aborts every device of this process (GICE_ON_PEER_DEAD=abort, the default,
 * like an NCCL communicator abort): every wait on them in progress and later returns that
 * status, nothing new starts, and the counters the peer signals record the failure.
 * GICE_ON_PEER_DEAD=tolerate fails only the operations to that peer. A peer that closed its
 * device is not lost. */
typedef struct {
	int status;            /* GICE_ERR_PEER_DEAD, GICE_ERR_PEER_HUNG, GICE_ERR_TIMED_OUT,
				  GICE_ERR_CT_STALLED or GICE_ERR_ABORTED (gice_device_abort) */
	const char *reason;    /* one phrase: "process exited", "process alive, not responding
				  (hung)", "aborted by the application", ... (NULL for a CT stall) */
	uint32_t device;       /* device id where it was seen */
	uint32_t peer;         /* the peer device, UINT32_MAX for a CT stall */
	uint32_t peer_rank;    /* its rank, UINT32_MAX if none */
	uint32_t ct;           /* the stalled CT, UINT32_MAX otherwise */
	uint32_t n_ops;        /* operations failed, or handed to the host proxy (fallback) */
	uint64_t waited_ns;    /* how long nothing happened */
	uint32_t psn_acked, psn_next; /* packets to the peer: acknowledged, sent */
	uint64_t retransmits;  /* packets to the peer sent again */
	const char *op;        /* the oldest operation involved ("put", "get", ...), NULL if none */
	uint64_t bytes;
	uint32_t msg_id;
	uint32_t trigger;      /* the trigger that fired it, UINT32_MAX if issued directly */
	uint64_t threshold;
	uint32_t counter;      /* its completion counter, UINT32_MAX if none */
	uint64_t counter_value; /* that counter's value now (it expected one more) */
	int fallback;          /* the host proxy took over */
	const char *message;   /* the whole diagnostic, one line */
	uint64_t ts_ns;        /* CLOCK_MONOTONIC when it was seen */
} gice_error_info_t;
typedef void (*gice_error_cb_t)(const gice_error_info_t *info, void *arg);
/* Called on the watchdog thread for every event (NULL: none). The info is valid during the
 * call only. The callback may call gice functions except gice_finalize. */
int gice_set_error_callback(gice_error_cb_t cb, void *arg);
/* Error state without a callback (as ncclCommGetAsyncError): the first error seen on dev, or on
 * any device of this process (gice_job_error); info->status is GICE_OK while there is none.
 * The strings stay valid while the device is open / until gice_finalize. GICE_ERR_INVALID on
 * NULL. */
int gice_device_error(gice_device_t *dev, gice_error_info_t *info);
int gice_job_error(gice_error_info_t *info);
/* Abort dev (as ncclCommAbort): every wait on it — kernels' and host's, stream syncs, quiet —
 * returns GICE_ERR_ABORTED at once, and so does every later wait and operation; its error
 * state says so. The device must still be closed. GICE_ERR_INVALID on NULL. */
int gice_device_abort(gice_device_t *dev);
/* Inject faults from now on (GICE_FAULTS syntax, docs/faults.md; times counted from this call):
 * the network faults are added to those on dev's sends (they never clear others; NULL or ""
 * clears them all); stall_ct=C@T+D stalls CT C of dev (when its group's rank= names this rank,
 * or has none), in place of a stall of C set before (stall_ct=C@0+1ns ends one in force);
 * hang_rank/kill_rank naming this rank hang every device of the process / kill it; naming
 * another rank of this machine (same pid namespace), stop (SIGSTOP) / kill its process at T.
 * Network faults turn gice's own retransmission on for dev and, when they
 * corrupt, a CRC32C on what dev sends, which every receiver checks (dev does not start
 * requiring CRCs from its peers). GICE_ERR_CONFIG on a bad spec; GICE_ERR_INVALID for a CT dev
 * does not have or a rank not in the job; GICE_ERR_UNSUPPORTED for reorder or delay_us on an
 * endpoint opened ordered (name them in GICE_FAULTS), or a kill/hang of a rank on another
 * machine (logged: put it in GICE_FAULTS at start); GICE_ERR_OVERFLOW: more than 16 network
 * faults in force, or 4 kills/hangs of other ranks pending. */
int gice_faults_set(gice_device_t *dev, const char *spec);

/* Every configuration parameter, for gice-info -c. cb is called once per parameter. */
typedef void (*gice_param_cb)(const char *name, const char *value, const char *defval, int is_set,
			      const char *help, void *arg);
void gice_config_list(gice_param_cb cb, void *arg);

#ifdef __cplusplus
}
#endif

#include "gice_device.h"

#endif
