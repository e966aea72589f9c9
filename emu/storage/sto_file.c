/* sto_file.c: the files of a storage engine — open (a page-cache descriptor and, where the file
 * system has it, an O_DIRECT one, both registered with the backend), ids reserved for opens at
 * run time (STO_OPEN, sto_ctl.c), close, the last error of each — and errno to status. */
#include "emu/storage/sto_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __NR_cachestat
#define STO_NR_CACHESTAT __NR_cachestat
#else
#define STO_NR_CACHESTAT 451 /* the same on every architecture (Linux 6.5) */
#endif

/* errno of a failed transfer or open -> status */
int sto_errno_status(int err)
{
	switch (err) {
	case ENOENT: return GICE_ERR_NOT_FOUND;
	case ENOSPC:
	case EDQUOT:
	case EFBIG: return GICE_ERR_NO_SPACE;
	case EACCES:
	case EPERM:
	case EROFS:
	case EBADF: return GICE_ERR_ACCESS;
	case EINVAL: return GICE_ERR_INVALID;
	default: return GICE_ERR_IO;
	}
}

int sto_open_oflags(unsigned flags, int direct)
{
	int acc = (flags & STO_F_WRITE) ? ((flags & STO_F_READ) ? O_RDWR : O_WRONLY) : O_RDONLY;

	if (direct)
		return acc | O_CLOEXEC | O_DIRECT;
	return acc | O_CLOEXEC | ((flags & STO_F_CREATE) ? O_CREAT : 0) | ((flags & STO_F_TRUNC) ? O_TRUNC : 0);
}

const char *sto_open_mode(unsigned flags)
{
	return (flags & STO_F_WRITE) ? ((flags & STO_F_READ) ? "reading and writing" : "writing") : "reading";
}

int sto_file_install(sto_engine_t *e, uint32_t id, int fd, int dfd)
{
	sto_file_t *f = &e->files[id];
	int rc;

	if ((rc = e->ops->files_set(e, id, fd, dfd)))
		return rc;
	f->dfd = dfd;
	f->no_direct = 0;
	/* release: a submitter that sees fd sees the file filled in */
	atomic_store_explicit(&f->fd, fd, memory_order_release);
	return GICE_OK;
}

/* A free id, taken (files_lock held); GICE_ERR_OVERFLOW when none. */
static int file_take(sto_engine_t *e, const char *what, uint32_t *id)
{
	uint32_t i;

	for (i = 0; i < e->max_files && atomic_load_explicit(&e->files[i].taken, memory_order_relaxed); i++)
		;
	if (i == e->max_files) {
		gice_error("storage", "device %u: %s: all %u files (GICE_IO_MAX_FILES) are taken", e->attr.gid, what,
			   e->max_files);
		return GICE_ERR_OVERFLOW;
	}
	sto_file_t *f = &e->files[i];
	f->path[0] = 0;
	f->flags = 0;
	f->no_direct = 0;
	f->opening = 0;
	pthread_mutex_lock(&f->err_lock);
	f->err_status = GICE_OK;
	f->err_text[0] = 0;
	pthread_mutex_unlock(&f->err_lock);
	/* seq_cst: pairs with sto_submit's pending then taken (a request for the id's last owner
	 * fails, or is counted in pending) */
	atomic_store_explicit(&f->taken, 1, memory_order_seq_cst);
	*id = i;
	return GICE_OK;
}

int sto_file_reserve(sto_engine_t *e, uint32_t *id)
{
	int rc;

	pthread_mutex_lock(&e->files_lock);
	rc = file_take(e, "file reserve", id);
	pthread_mutex_unlock(&e->files_lock);
	return rc;
}

int sto_file_open(sto_engine_t *e, const char *path, unsigned flags, uint32_t *id)
{
	int oflags = sto_open_oflags(flags, 0);
	uint32_t i;
	int fd, dfd = -1, rc;

	if (!path || !*path || strlen(path) >= sizeof(e->files[0].path) || !(flags & (STO_F_READ | STO_F_WRITE))) {
		gice_error("storage", "device %u: file open of \"%s\" with flags 0x%x: need a path shorter than %zu "
			   "bytes and read and/or write", e->attr.gid, path ? path : "(null)", flags,
			   sizeof(e->files[0].path));
		return GICE_ERR_INVALID;
	}
	pthread_mutex_lock(&e->files_lock);
	if ((rc = file_take(e, path, &i)))
		goto out_unlock;
	fd = open(path, oflags, 0644);
	if (fd < 0) {
		int err = errno;
		gice_error("storage", "device %u: open of %s for %s failed: %s (errno %d)", e->attr.gid, path,
			   sto_open_mode(flags), strerror(err), err);
		rc = sto_errno_status(err);
		goto out_release;
	}
	if (e->direct && !(flags & STO_F_NO_DIRECT)) {
		dfd = open(path, sto_open_oflags(flags, 1));
		if (dfd < 0)
			gice_debug("storage", "device %u: %s has no O_DIRECT (%m): page cache only", e->attr.gid, path);
	}
	sto_file_t *f = &e->files[i];
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->flags = flags;
	if ((rc = sto_file_install(e, i, fd, dfd))) {
		close(fd);
		if (dfd >= 0)
			close(dfd);
		goto out_release;
	}
	pthread_mutex_unlock(&e->files_lock);
	*id = i;
	return GICE_OK;

out_release:
	atomic_store_explicit(&e->files[i].taken, 0, memory_order_release);
out_unlock:
	pthread_mutex_unlock(&e->files_lock);
	return rc;
}

int sto_file_close(sto_engine_t *e, uint32_t id)
{
	int rc = GICE_OK;

	pthread_mutex_lock(&e->files_lock);
	if (id >= e->max_files || !atomic_load_explicit(&e->files[id].taken, memory_order_relaxed)) {
		gice_error("storage", "device %u: close of file %u, which is not open", e->attr.gid, id);
		rc = GICE_ERR_INVALID;
	} else {
		sto_file_t *f = &e->files[id];
		/* take the file and the id from new submitters, then look for outstanding requests
		 * (seq_cst, with sto_submit's pending then file) */
		int fd = atomic_exchange_explicit(&f->fd, -1, memory_order_seq_cst);
		atomic_store_explicit(&f->taken, 0, memory_order_seq_cst);
		uint32_t pending = atomic_load_explicit(&f->pending, memory_order_seq_cst);
		if (pending) {
			atomic_store_explicit(&f->taken, 1, memory_order_relaxed);
			if (fd >= 0)
				atomic_store_explicit(&f->fd, fd, memory_order_release);
			gice_error("storage", "device %u: close of %s with %u request(s) outstanding", e->attr.gid,
				   f->path[0] ? f->path : "a reserved file", pending);
			rc = GICE_ERR_BUSY;
		} else if (fd >= 0) {
			e->ops->files_set(e, id, -1, -1);
			close(fd);
			if (f->dfd >= 0)
				close(f->dfd);
			f->dfd = -1;
		}
	}
	pthread_mutex_unlock(&e->files_lock);
	return rc;
}

int sto_file_error(sto_engine_t *e, uint32_t id, char *buf, size_t len)
{
	int rc;

	if (id >= e->max_files)
		return GICE_ERR_INVALID;
	pthread_mutex_lock(&e->files[id].err_lock);
	rc = e->files[id].err_status;
	if (buf && len)
		snprintf(buf, len, "%s", e->files[id].err_text);
	pthread_mutex_unlock(&e->files[id].err_lock);
	return rc;
}

/* A read of a range mostly in the page cache (a checkpoint just written, a file read before)
 * copies it from there, ~10x faster than reading the disk again with O_DIRECT: one cachestat(2)
 * per request, on this thread. */
int sto_file_range_cached(sto_engine_t *e, const sto_file_t *f, const sto_req_t *r)
{
	struct {
		uint64_t off, len;
	} range = {r->file_off, r->len};
	struct {
		uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
	} cs;
	long page = sysconf(_SC_PAGESIZE);

	if (e->no_cachestat || r->len < (uint64_t)page)
		return 0;
	if (syscall(STO_NR_CACHESTAT, atomic_load_explicit(&f->fd, memory_order_relaxed), &range, &cs, 0) < 0) {
		if (errno == ENOSYS) {
			e->no_cachestat = 1;
			gice_info("storage", "device %u: no cachestat(2) here: aligned reads use O_DIRECT even when the "
				  "file is in the page cache", e->attr.gid);
		}
		return 0;
	}
	return cs.nr_cache * 2 >= (r->len + (uint64_t)page - 1) / (uint64_t)page;
}
