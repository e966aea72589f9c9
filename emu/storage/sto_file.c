/* sto_file.c: the files of a storage engine — open (a page-cache descriptor and, where the file
 * system has it, an O_DIRECT one, both registered with the backend), close, the last error of
 * each — and errno to status. */
#include "emu/storage/sto_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

int sto_file_open(sto_engine_t *e, const char *path, unsigned flags, uint32_t *id)
{
	int acc = (flags & STO_F_WRITE) ? ((flags & STO_F_READ) ? O_RDWR : O_WRONLY) : O_RDONLY;
	int oflags = acc | O_CLOEXEC | ((flags & STO_F_CREATE) ? O_CREAT : 0) | ((flags & STO_F_TRUNC) ? O_TRUNC : 0);
	uint32_t i;
	int fd, dfd = -1, rc;

	if (!path || !*path || strlen(path) >= sizeof(e->files[0].path) || !(flags & (STO_F_READ | STO_F_WRITE))) {
		gice_error("storage", "device %u: file open of \"%s\" with flags 0x%x: need a path shorter than %zu "
			   "bytes and read and/or write", e->attr.gid, path ? path : "(null)", flags,
			   sizeof(e->files[0].path));
		return GICE_ERR_INVALID;
	}
	pthread_mutex_lock(&e->files_lock);
	for (i = 0; i < e->max_files && e->files[i].fd >= 0; i++)
		;
	if (i == e->max_files) {
		pthread_mutex_unlock(&e->files_lock);
		gice_error("storage", "device %u: open of %s: all %u files (GICE_IO_MAX_FILES) are open", e->attr.gid,
			   path, e->max_files);
		return GICE_ERR_OVERFLOW;
	}
	fd = open(path, oflags, 0644);
	if (fd < 0) {
		int err = errno;
		pthread_mutex_unlock(&e->files_lock);
		gice_error("storage", "device %u: open of %s for %s failed: %s (errno %d)", e->attr.gid, path,
			   acc == O_RDONLY ? "reading" : acc == O_WRONLY ? "writing" : "reading and writing",
			   strerror(err), err);
		return sto_errno_status(err);
	}
	if (e->direct && !(flags & STO_F_NO_DIRECT)) {
		dfd = open(path, acc | O_CLOEXEC | O_DIRECT);
		if (dfd < 0)
			gice_debug("storage", "device %u: %s has no O_DIRECT (%m): page cache only", e->attr.gid, path);
	}
	sto_file_t *f = &e->files[i];
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->flags = flags;
	f->no_direct = 0;
	f->err_status = GICE_OK;
	f->err_text[0] = 0;
	if ((rc = e->ops->files_set(e, i, fd, dfd))) {
		pthread_mutex_unlock(&e->files_lock);
		close(fd);
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	f->dfd = dfd;
	/* release: a submitter that sees fd sees the file filled in */
	atomic_store_explicit(&f->fd, fd, memory_order_release);
	pthread_mutex_unlock(&e->files_lock);
	*id = i;
	return GICE_OK;
}

int sto_file_close(sto_engine_t *e, uint32_t id)
{
	int rc = GICE_OK;

	pthread_mutex_lock(&e->files_lock);
	if (id >= e->max_files || e->files[id].fd < 0) {
		gice_error("storage", "device %u: close of file %u, which is not open", e->attr.gid, id);
		rc = GICE_ERR_INVALID;
	} else {
		sto_file_t *f = &e->files[id];
		/* take the file from new submitters, then look for outstanding requests (seq_cst, with
		 * sto_submit's pending then file) */
		int fd = atomic_exchange_explicit(&f->fd, -1, memory_order_seq_cst);
		uint32_t pending = atomic_load_explicit(&f->pending, memory_order_seq_cst);
		if (pending) {
			atomic_store_explicit(&f->fd, fd, memory_order_release);
			gice_error("storage", "device %u: close of %s with %u request(s) outstanding", e->attr.gid,
				   f->path, pending);
			rc = GICE_ERR_BUSY;
		} else {
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
