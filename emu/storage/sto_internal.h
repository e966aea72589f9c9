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

/* A chunk in flight: part of a request, one read or write of the backend. */
typedef struct {
	uint32_t req;     /* request slot */
	uint32_t next;    /* free list */
	uint64_t off;     /* from the request's start */
	uint64_t len;
	uint8_t direct;   /* through the file's O_DIRECT descriptor */
} sto_chunk_t;

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
} sto_op_t;

typedef struct {
	_Atomic int fd;   /* buffered (page cache); -1: slot free (release: the file is filled in) */
	int dfd;          /* O_DIRECT, or -1 */
	unsigned flags;   /* STO_F_* */
	uint8_t no_direct; /* the file system refused O_DIRECT once (storage thread) */
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
	/* queue chunk c; GICE_ERR_AGAIN when the submission queue is full */
	int (*queue)(struct sto_engine *e, uint32_t c);
	void (*submit)(struct sto_engine *e);
	/* one finished chunk: 1 with its index and result (bytes or -errno), 0 if none */
	int (*reap)(struct sto_engine *e, uint32_t *c, int64_t *res);
} sto_backend_ops_t;

/* sto_file.c: errno of a failed transfer or open -> status */
int sto_errno_status(int err);

extern const sto_backend_ops_t sto_uring_ops;
extern const sto_backend_ops_t sto_psync_ops;

struct sto_engine {
	sto_attr_t attr;
	const sto_backend_ops_t *ops;
	void *be;              /* the backend's state */
	uint32_t qd;           /* chunks in flight at most (GICE_IO_QD) */
	uint64_t chunk;        /* GICE_IO_CHUNK */
	int direct;            /* GICE_IO_DIRECT */
	int reg_bufs;          /* GICE_IO_REGISTER_BUFFERS */
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

	_Atomic uint64_t st[7]; /* sto_stats_t, in its field order */
};

enum { STO_ST_READS, STO_ST_WRITES, STO_ST_READ_BYTES, STO_ST_WRITE_BYTES, STO_ST_DIRECT_BYTES, STO_ST_FAILED,
       STO_ST_SHORT };

static inline void sto_stat_add(struct sto_engine *e, int id, uint64_t v)
{
	atomic_fetch_add_explicit(&e->st[id], v, memory_order_relaxed);
}

#endif
