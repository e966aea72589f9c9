/* storage.h: the storage path of one device (GPUDirect Storage emulation): file reads into and
 * writes out of device memory, carried out by a storage engine thread over a backend chosen at
 * run time (GICE_IO_BACKEND: io_uring with registered files and buffers, or plain
 * pread/pwrite). Depends on the common layer only: it sees device memory as a base and a size.
 *
 * Who calls what: the host opens and closes files (set-up); engines (the CTs, when a kernel's
 * request or an armed descriptor names a file operation) hand requests over with sto_submit,
 * which only writes memory (and an eventfd when the engine sleeps); the storage thread cuts them
 * into chunks of GICE_IO_CHUNK bytes, keeps up to GICE_IO_QD chunks in flight, and calls done
 * once per request with its status. Requests are not ordered among themselves.
 */
#ifndef GICE_STORAGE_H
#define GICE_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "emu/common/common.h"
#include "emu/common/config.h"

typedef struct sto_engine sto_engine_t;

/* What a request does. Never renumbered (requests are plain data). */
enum sto_dir {
	STO_READ = 0,  /* file -> device memory */
	STO_WRITE = 1, /* device memory -> file */
	/* open the reserved file id (sto_file_reserve) by the NUL-terminated path at [dev_off,
	 * +len) of device memory, with flags STO_F_*: openat through the backend */
	STO_OPEN = 2,
	STO_CLOSE = 3, /* close file id; it stays reserved (open it again with STO_OPEN) */
	STO_SYNC = 4,  /* fsync the file (flags STO_SYNC_DATA: fdatasync) */
};
#define STO_DIRS 5

/* One request: plain data. */
typedef struct {
	uint8_t dir;       /* enum sto_dir */
	uint32_t flags;    /* STO_OPEN: STO_F_*; STO_SYNC: STO_SYNC_*; else 0 */
	uint32_t file;     /* file id (sto_file_open, sto_file_reserve) */
	uint64_t dev_off;  /* device memory offset (STO_OPEN: of the path) */
	uint64_t len;      /* bytes (STO_OPEN: the path's buffer, NUL included) */
	uint64_t file_off; /* file offset */
	uint64_t cookie[2]; /* the submitter's, handed back to done */
} sto_req_t;

enum { STO_SYNC_DATA = 1u << 0 }; /* fdatasync: data and the metadata needed to read it */

/* Called on the storage thread once per request: status GICE_OK or the failure (the message,
 * naming file, offset, length and errno, is logged and kept: sto_file_error). */
typedef void (*sto_done_cb)(void *arg, const sto_req_t *r, int status);

typedef struct {
	uint32_t gid;       /* device id (messages) */
	uint32_t index;     /* device index in this process (thread name) */
	uint8_t *base;      /* device memory in this process */
	uint64_t size;
	uint32_t max_reqs;  /* requests outstanding at most (the submitters' bound) */
	sto_done_cb done;
	void *done_arg;     /* also progress's */
	/* called on the storage thread whenever a chunk has moved (may be NULL): a long request
	 * is progress, not a stall, to the device's waits */
	void (*progress)(void *arg);
	/* GICE_TIMEOUT_MS: a request with operations in flight and no progress this long is
	 * reported and fails with GICE_ERR_TIMED_OUT (its operations are canceled); 0: never */
	uint64_t timeout_ns;
} sto_attr_t;

/* Open flags */
enum {
	STO_F_READ = 1u << 0,
	STO_F_WRITE = 1u << 1,
	STO_F_CREATE = 1u << 2,    /* create if missing (mode 0644) */
	STO_F_TRUNC = 1u << 3,     /* truncate to 0 at open */
	STO_F_NO_DIRECT = 1u << 4, /* never O_DIRECT (page cache only) */
};

/* Start the engine (its thread and backend). GICE_ERR_CONFIG for a bad GICE_IO_* value,
 * GICE_ERR_UNSUPPORTED when GICE_IO_BACKEND=uring and io_uring cannot start here. */
int sto_create(const sto_attr_t *attr, sto_engine_t **out);
/* Refuse new requests (sto_submit: GICE_ERR_CANCELED) and wait until every accepted one has
 * completed (done called). Idempotent. */
void sto_shutdown(sto_engine_t *e);
/* sto_shutdown, then stop the thread and close the files. */
void sto_destroy(sto_engine_t *e);
/* The backend in use: "uring" or "psync". */
const char *sto_backend_name(const sto_engine_t *e);

/* Open path (flags STO_F_*); *id names it in requests. GICE_ERR_NOT_FOUND (missing file),
 * GICE_ERR_ACCESS (permission, read-only file system), GICE_ERR_OVERFLOW (GICE_IO_MAX_FILES
 * open), GICE_ERR_IO; the message names the path and errno. */
int sto_file_open(sto_engine_t *e, const char *path, unsigned flags, uint32_t *id);
/* Reserve a file id that STO_OPEN requests open later (at run time, asynchronously); it is
 * released by sto_file_close. GICE_ERR_OVERFLOW (GICE_IO_MAX_FILES taken). */
int sto_file_reserve(sto_engine_t *e, uint32_t *id);
/* Close file id (open or only reserved) and release the id. GICE_ERR_BUSY while requests on it
 * are outstanding, GICE_ERR_INVALID for an id not taken. */
int sto_file_close(sto_engine_t *e, uint32_t id);
/* The last failure of a request on file id (GICE_OK if none) and its message in buf (may be
 * NULL). */
int sto_file_error(sto_engine_t *e, uint32_t id, char *buf, size_t len);

/* Hand a request over (any thread; no lock, no allocation; a syscall only to wake the sleeping
 * storage thread). GICE_OK: done will be called. GICE_ERR_INVALID (bad file: read, write and
 * sync need it open, open and close need it taken; range outside device memory; unknown dir),
 * GICE_ERR_CANCELED (shut down): done will not be called. */
int sto_submit(sto_engine_t *e, const sto_req_t *r);

/* STORAGE entries of GICE_STATS_LIST (api/gice_stats.h): the field of each. */
typedef struct {
	uint64_t io_reads, io_writes;         /* requests completed (either outcome) */
	uint64_t io_opens, io_closes, io_syncs; /* ... of STO_OPEN, STO_CLOSE, STO_SYNC */
	uint64_t io_read_bytes, io_write_bytes; /* bytes moved */
	uint64_t io_direct_bytes;             /* ... of which with O_DIRECT */
	uint64_t io_failed;                   /* requests that failed */
	uint64_t io_short;                    /* short transfers continued */
	uint64_t io_timeouts;                 /* requests failed by the storage watchdog */
} sto_stats_t;
void sto_stats(const sto_engine_t *e, sto_stats_t *st);

/* GICE_IO_BACKEND, GICE_IO_QD, GICE_IO_CHUNK, GICE_IO_DIRECT, GICE_IO_MAX_FILES,
 * GICE_IO_REGISTER_BUFFERS */
extern const gice_param_t sto_params[];

#endif
