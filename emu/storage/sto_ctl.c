/* sto_ctl.c: the control requests of the storage engine, on its thread — an open by path at run
 * time (STO_OPEN: the page-cache descriptor, then the O_DIRECT one, each an openat through the
 * backend), a close (STO_CLOSE: done on the thread) and an fsync (STO_SYNC) — and the watchdog
 * that fails requests making no progress. A failure of any of them is a failed request like a
 * read's: its status to done, its message (file, offset, length or path, errno) kept as the
 * file's last error. */
#include "emu/storage/sto_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void sto_op_what(const sto_engine_t *e, const sto_op_t *o, char *buf, size_t len)
{
	const sto_file_t *f = &e->files[o->r.file];

	switch (o->r.dir) {
	case STO_READ:
	case STO_WRITE:
		snprintf(buf, len, "%s of %llu bytes at offset %llu of %s (device offset %llu)",
			 o->r.dir == STO_READ ? "read" : "write", (unsigned long long)o->r.len,
			 (unsigned long long)o->r.file_off, f->path, (unsigned long long)o->r.dev_off);
		break;
	case STO_OPEN:
		snprintf(buf, len, "open of %s for %s", f->path, sto_open_mode(o->r.flags));
		break;
	case STO_CLOSE: snprintf(buf, len, "close of %s (file %u)", f->path, o->r.file); break;
	default:
		snprintf(buf, len, "%s of %s", (o->r.flags & STO_SYNC_DATA) ? "fdatasync" : "fsync", f->path);
		break;
	}
}

static void ctl_fail_errno(sto_engine_t *e, sto_op_t *o, int err)
{
	char what[400], text[700];

	sto_op_what(e, o, what, sizeof(what));
	snprintf(text, sizeof(text), "device %u: %s failed: %s (errno %d)", e->attr.gid, what, strerror(err), err);
	sto_op_fail(e, o, sto_errno_status(err), text);
}

/* STO_OPEN: check the id and the flags, take the path out of device memory (the kernel may
 * reuse its buffer once the open is queued... it is not told when: the path is copied now). */
static int open_start(sto_engine_t *e, sto_op_t *o)
{
	sto_file_t *f = &e->files[o->r.file];
	const char *src = (const char *)e->attr.base + o->r.dev_off;
	size_t max = (size_t)GICE_MIN(o->r.len, (uint64_t)sizeof(f->path));
	const char *nul = max ? memchr(src, 0, max) : NULL;
	char text[512];

	if (atomic_load_explicit(&f->fd, memory_order_acquire) >= 0 || f->opening) {
		snprintf(text, sizeof(text), "device %u: open of file %u: it is %s (%s); close it first", e->attr.gid,
			 o->r.file, f->opening ? "being opened" : "open", f->path);
		sto_op_fail(e, o, GICE_ERR_BUSY, text);
		return 0;
	}
	if (!nul || nul == src || !(o->r.flags & (STO_F_READ | STO_F_WRITE)) ||
	    (o->r.flags & ~(unsigned)(STO_F_READ | STO_F_WRITE | STO_F_CREATE | STO_F_TRUNC | STO_F_NO_DIRECT))) {
		snprintf(text, sizeof(text), "device %u: open of file %u with flags 0x%x: need a NUL-terminated path of "
			 "1 to %zu bytes in the %llu bytes at device offset %llu, and read and/or write", e->attr.gid,
			 o->r.file, o->r.flags, sizeof(f->path) - 1, (unsigned long long)o->r.len,
			 (unsigned long long)o->r.dev_off);
		sto_op_fail(e, o, GICE_ERR_INVALID, text);
		return 0;
	}
	memcpy(f->path, src, (size_t)(nul - src) + 1);
	f->flags = o->r.flags;
	f->opening = 1;
	pthread_mutex_lock(&f->err_lock); /* a new file: its failures start again */
	f->err_status = GICE_OK;
	f->err_text[0] = 0;
	pthread_mutex_unlock(&f->err_lock);
	return 1;
}

/* STO_CLOSE, on the thread: as sto_file_close, but the id stays taken */
static void close_now(sto_engine_t *e, sto_op_t *o)
{
	sto_file_t *f = &e->files[o->r.file];
	char text[512];
	int fd = f->opening ? -1 : atomic_exchange_explicit(&f->fd, -1, memory_order_seq_cst);
	/* seq_cst with sto_submit's pending then fd: this request is one of them */
	uint32_t pending = atomic_load_explicit(&f->pending, memory_order_seq_cst);

	if (fd < 0 || pending > 1) {
		if (fd >= 0)
			atomic_store_explicit(&f->fd, fd, memory_order_release);
		if (fd < 0)
			snprintf(text, sizeof(text), "device %u: close of file %u (%s): it is %s", e->attr.gid, o->r.file,
				 f->path, f->opening ? "being opened" : "not open");
		else
			snprintf(text, sizeof(text), "device %u: close of %s with %u other request(s) outstanding",
				 e->attr.gid, f->path, pending - 1);
		sto_op_fail(e, o, fd < 0 ? GICE_ERR_INVALID : GICE_ERR_BUSY, text);
		return;
	}
	e->ops->files_set(e, o->r.file, -1, -1);
	close(fd);
	if (f->dfd >= 0)
		close(f->dfd);
	f->dfd = -1;
}

int sto_ctl_start(sto_engine_t *e, sto_op_t *o)
{
	switch (o->r.dir) {
	case STO_OPEN: return open_start(e, o);
	case STO_CLOSE: close_now(e, o); return 0;
	default: return 1; /* STO_SYNC: the file was open at submission */
	}
}

int sto_ctl_done(sto_engine_t *e, uint32_t c, int64_t res)
{
	sto_chunk_t *ch = &e->chunks[c];
	sto_op_t *o = &e->ops_tab[ch->req];
	sto_file_t *f = &e->files[o->r.file];
	int rc = GICE_OK;

	if (o->r.dir == STO_SYNC) {
		if (res < 0)
			ctl_fail_errno(e, o, (int)-res);
		return 0;
	}
	/* STO_OPEN: first the page-cache descriptor (ch->direct 0), then the O_DIRECT one */
	if (!ch->direct) {
		if (res < 0 || o->status) {
			if (res >= 0)
				close((int)res); /* the watchdog gave up on it */
			else
				ctl_fail_errno(e, o, (int)-res);
			f->opening = 0;
			return 0;
		}
		ch->fd = (int32_t)res;
		if (e->direct && !(o->r.flags & STO_F_NO_DIRECT)) {
			ch->direct = 1;
			return 1;
		}
		res = -1;
	}
	int dfd = res >= 0 ? (int)res : -1;
	if (res < 0 && res != -1)
		gice_debug("storage", "device %u: %s has no O_DIRECT (%s): page cache only", e->attr.gid, f->path,
			   strerror((int)-res));
	f->opening = 0;
	if (o->status || (rc = sto_file_install(e, o->r.file, ch->fd, dfd))) {
		close(ch->fd);
		if (dfd >= 0)
			close(dfd);
		if (!o->status) {
			char what[400], text[700];
			sto_op_what(e, o, what, sizeof(what));
			snprintf(text, sizeof(text), "device %u: %s failed: the backend refused the descriptors",
				 e->attr.gid, what);
			sto_op_fail(e, o, rc, text);
		}
	}
	return 0;
}

int sto_watch(sto_engine_t *e, uint64_t now)
{
	int n = 0;

	for (uint32_t c = 0; c < e->qd; c++) {
		sto_chunk_t *ch = &e->chunks[c];
		sto_op_t *o = &e->ops_tab[ch->req];
		if (!ch->busy || o->timed_out || now - o->t_last < e->attr.timeout_ns)
			continue;
		char what[400], text[700];
		sto_op_what(e, o, what, sizeof(what));
		if (o->r.dir == STO_READ || o->r.dir == STO_WRITE)
			snprintf(text, sizeof(text), "device %u: %s stuck: its chunk at offset %llu, length %llu made no "
				 "progress for %llu ms (GICE_TIMEOUT_MS %llu): canceled", e->attr.gid, what,
				 (unsigned long long)(o->r.file_off + ch->off), (unsigned long long)ch->len,
				 (unsigned long long)((now - o->t_last) / 1000000),
				 (unsigned long long)(e->attr.timeout_ns / 1000000));
		else
			snprintf(text, sizeof(text), "device %u: %s stuck: no progress for %llu ms (GICE_TIMEOUT_MS "
				 "%llu): canceled", e->attr.gid, what, (unsigned long long)((now - o->t_last) / 1000000),
				 (unsigned long long)(e->attr.timeout_ns / 1000000));
		o->timed_out = 1;
		sto_op_fail(e, o, GICE_ERR_TIMED_OUT, text);
		sto_stat_add(e, STO_ST_TIMEOUTS, 1);
		n++;
		if (!e->ops->cancel)
			continue;
		for (uint32_t k = 0; k < e->qd; k++) /* every chunk of it */
			if (e->chunks[k].busy && e->chunks[k].req == ch->req)
				e->ops->cancel(e, k);
	}
	return n;
}
