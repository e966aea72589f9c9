/* sto_internal.h: state shared by the storage engine's files (not for other modules): the
 * engine, its files, requests and chunks, and the backend ops table (sto_uring.c, sto_psync.c).
 */
#ifndef GICE_STO_INTERNAL_H
#define GICE_STO_INTERNAL_H

#include <pthread.h>

#include "emu/storage/storage.h"

#define STO_DIRECT_ALIGN 4096u  /* O_DIRECT: offset, length and address multiples of this */
#define STO_FIXED_BUF (1ull << 30) /* registered buffers: the arena in pieces of 1 GiB */
#define STO_NONE UINT32_MAX
#define STO_CANCEL_TAG UINT64_MAX /* user data of the backend's cancel requests (reap skips them) */

/* A chunk in flight: part of a request, one read or write of the backend. */
typedef struct {
	uint32_t req;     /* request slot */
	uint32_t next;    /* free list */
	uint64_t off;     /* from the request's start */
	uint64_t len;
	uint8_t direct;   /* through the file's O_DIRECT descriptor (STO_OPEN: the O_DIRECT open) */
	uint8_t busy;     /* in flight on the backend (the watchdog looks at these) */
	int32_t fd;       /* STO_OPEN's second step: the page-cache descriptor the first one opened */
} sto_chunk_t;

/* Control requests (STO_OPEN, STO_CLOSE, STO_SYNC) are one backend operation each, not cut. */
enum sto_ctl {
	STO_CTL_NONE = 0,   /* a read or write (or a control request that has finished) */
	STO_CTL_TODO = 1,   /* to check (sto_ctl_start) */
	STO_CTL_READY = 2,  /* checked, to queue */
	STO_CTL_QUEUED = 3, /* its operation is in flight */
};

/* A request being carried out (the storage thread's own). Its life: taken from the submission
 * ring -> chunks handed out until `next` reaches len (or it fails) -> its last chunk ends ->
 * done called, slot free. */
typedef struct {
	sto_req_t r;
	uint64_t next;     /* bytes handed to chunks so far */
	uint32_t inflight; /* chunks in flight */
	int32_t status;
	uint32_t link;     /* active FIFO / free list */
	uint8_t active;    /* on the active FIFO (chunks still to hand out) */
	uint8_t ctl;       /* enum sto_ctl */
	uint8_t timed_out; /* the watchdog failed it (its chunks are being canceled) */
	uint8_t cached;    /* a read whose range is mostly in the page cache: no O_DIRECT */
	uint64_t t_last;   /* gice_now_ns() when a chunk of it was queued with none in flight, or last ended */
} sto_op_t;

typedef struct {
	_Atomic int taken; /* the id is someone's: open, or reserved for STO_OPEN (sto_file_reserve) */
	_Atomic int fd;   /* buffered (page cache); -1: not open (release: the file is filled in) */
	int dfd;          /* O_DIRECT, or -1 */
	unsigned flags;   /* STO_F_* */
	uint8_t no_direct; /* the file system refused O_DIRECT once (storage thread) */
	uint8_t opening;   /* a STO_OPEN of it is under way (storage thread) */
	char path[256];
	_Atomic uint32_t pending; /* requests accepted and not yet done */
	pthread_mutex_t err_lock; /* the last failure, written by the storage thread */
	int32_t err_status;
	char err_text[512];
} sto_file_t;

/* One slot of the submission ring (bounded multi-producer single-consumer, sequence per slot). */
typedef struct {
	_Atomic uint64_t seq;
	sto_req_t r;
} sto_slot_t;

struct sto_engine;

/* A backend: io_uring (sto_uring.c) or pread/pwrite (sto_psync.c), chosen by GICE_IO_BACKEND.
 * Only the storage thread calls queue, submit and reap; files_set is a set-up call. */
typedef struct {
	const char *name;
	int (*init)(struct sto_engine *e);   /* GICE_ERR_UNSUPPORTED: not here */
	void (*fini)(struct sto_engine *e);
	/* file id's descriptors changed (opened: fd, dfd; closed: -1) */
	int (*files_set)(struct sto_engine *e, uint32_t id, int fd, int dfd);
	/* queue chunk c (a read or write, or the one operation of a control request);
	 * GICE_ERR_AGAIN when the submission queue is full */
	int (*queue)(struct sto_engine *e, uint32_t c);
	/* ask for chunk c to end early (the watchdog); it still completes through reap. NULL: the
	 * backend cannot (psync runs each chunk to its end as it is queued) */
	void (*cancel)(struct sto_engine *e, uint32_t c);
	void (*submit)(struct sto_engine *e);
	/* one finished chunk: 1 with its index and result (bytes or -errno), 0 if none */
	int (*reap)(struct sto_engine *e, uint32_t *c, int64_t *res);
} sto_backend_ops_t;

/* sto_file.c: errno of a failed transfer or open -> status */
int sto_errno_status(int err);
/* sto_file.c: open(2) flags for STO_F_* flags, the page-cache descriptor or the O_DIRECT one
 * (which neither creates nor truncates: the first open did) */
int sto_open_oflags(unsigned flags, int direct);
/* sto_file.c: "reading", "writing" or "reading and writing" */
const char *sto_open_mode(unsigned flags);
/* sto_file.c: file id's open descriptors in place (storage thread or set-up, files_lock not
 * needed for a taken id): registered with the backend, then published. GICE_ERR_IO (closed) */
int sto_file_install(struct sto_engine *e, uint32_t id, int fd, int dfd);

/* sto_file.c: is read r's file range mostly (half or more) in the page cache? (cachestat(2);
 * 0 where the kernel has none) */
int sto_file_range_cached(struct sto_engine *e, const sto_file_t *f, const sto_req_t *r);

/* sto_engine.c: fail request o (its first failure wins) with status and text (logged, kept as
 * its file's last error); nothing more of it is handed out */
void sto_op_fail(struct sto_engine *e, sto_op_t *o, int status, const char *text);

/* sto_ctl.c: control requests on the storage thread. sto_ctl_start: before its operation is
 * queued (check it; STO_CLOSE is done here); 1: queue it, 0: finished (o->status says how).
 * sto_ctl_done: its operation ended with res (a descriptor, 0, or -errno); 1: chunk c was
 * queued again (the O_DIRECT open after the page-cache one), 0: finished. */
int sto_ctl_start(struct sto_engine *e, sto_op_t *o);
int sto_ctl_done(struct sto_engine *e, uint32_t c, int64_t res);
/* sto_ctl.c: the watchdog: fail (GICE_ERR_TIMED_OUT) and cancel requests with chunks in flight
 * and no progress for the timeout; returns how many it failed */
int sto_watch(struct sto_engine *e, uint64_t now);
/* sto_ctl.c: "open of PATH", "fsync of PATH", ... (read and write: bytes and offsets) */
void sto_op_what(const struct sto_engine *e, const sto_op_t *o, char *buf, size_t len);

extern const sto_backend_ops_t sto_uring_ops;
extern const sto_backend_ops_t sto_psync_ops;

/* the engine's counters, in sto_stats_t's field order */
enum { STO_ST_READS, STO_ST_WRITES, STO_ST_OPENS, STO_ST_CLOSES, STO_ST_SYNCS, STO_ST_READ_BYTES, STO_ST_WRITE_BYTES,
       STO_ST_DIRECT_BYTES, STO_ST_FAILED, STO_ST_SHORT, STO_ST_TIMEOUTS, STO_ST_N };
_Static_assert(STO_ST_N == sizeof(sto_stats_t) / sizeof(uint64_t), "one counter per sto_stats_t field");

struct sto_engine {
	sto_attr_t attr;
	const sto_backend_ops_t *ops;
	void *be;              /* the backend's state */
	uint32_t qd;           /* chunks in flight at most (GICE_IO_QD) */
	uint64_t chunk;        /* GICE_IO_CHUNK */
	int direct;            /* GICE_IO_DIRECT */
	int reg_bufs;          /* GICE_IO_REGISTER_BUFFERS */
	int cache_async;       /* GICE_IO_CACHE_ASYNC */
	int no_cachestat;      /* the kernel has no cachestat(2): reads are not probed */
	int efd;               /* eventfd: producers and completions wake the thread */

	/* submission ring */
	sto_slot_t *ring;
	uint32_t ring_mask;
	_Atomic uint64_t ring_tail; /* producers */
	uint64_t ring_head;         /* the storage thread */
	_Atomic uint32_t submitters; /* producers inside sto_submit (shutdown waits them out) */
	_Atomic int closing;         /* refuse new requests */
	_Atomic uint32_t sleeping;   /* the thread sleeps on efd: producers write it */

	/* the storage thread's own */
	sto_op_t *ops_tab;
	uint32_t n_ops, op_free, act_head, act_tail;
	sto_chunk_t *chunks;
	uint32_t chunk_free, inflight;
	uint32_t inflight_cached, cache_qd; /* chunks through the page cache (GICE_IO_CACHE_QD) */
	_Atomic uint64_t accepted, completed; /* requests: shutdown waits for completed == accepted */

	sto_file_t *files;
	uint32_t max_files;
	pthread_mutex_t files_lock;

	pthread_t thread;
	int started;
	_Atomic int stop;

	uint64_t watch_ns;  /* the watchdog's last look */

	_Atomic uint64_t st[STO_ST_N]; /* sto_stats_t, in its field order */
};


static inline void sto_stat_add(struct sto_engine *e, int id, uint64_t v)
{
	atomic_fetch_add_explicit(&e->st[id], v, memory_order_relaxed);
}

#endif
