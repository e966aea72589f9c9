/* sto_uring.c: the io_uring backend of the storage engine (liburing). One ring per device,
 * GICE_IO_QD entries; its completions write the engine's eventfd (io_uring_register_eventfd),
 * which the storage thread sleeps on. Files are registered (a sparse table: two slots per
 * file, the page-cache descriptor and the O_DIRECT one); device memory is registered as fixed
 * buffers of 1 GiB each (GICE_IO_REGISTER_BUFFERS), so reads and writes land in it with no
 * bounce and no page pinning per request. When the kernel refuses the buffers (RLIMIT_MEMLOCK),
 * plain reads and writes of the same memory are used. */
#include "emu/storage/sto_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

typedef struct {
	struct io_uring ring;
	int fixed_bufs; /* device memory registered as buffers */
} sto_uring_t;

static int uring_init(sto_engine_t *e)
{
	sto_uring_t *u = calloc(1, sizeof(*u));
	struct iovec *iov = NULL;
	int rc;

	if (!u)
		return GICE_ERR_NO_MEMORY;
	if ((rc = io_uring_queue_init(e->qd, &u->ring, 0)) < 0) {
		gice_info("storage", "device %u: io_uring_queue_init(%u): %s", e->attr.gid, e->qd, strerror(-rc));
		free(u);
		return GICE_ERR_UNSUPPORTED;
	}
	if ((rc = io_uring_register_files_sparse(&u->ring, 2 * e->max_files)) < 0) {
		gice_error("storage", "device %u: io_uring registering %u file slots: %s", e->attr.gid,
			   2 * e->max_files, strerror(-rc));
		goto err_ring;
	}
	if ((rc = io_uring_register_eventfd(&u->ring, e->efd)) < 0) {
		gice_error("storage", "device %u: io_uring_register_eventfd: %s", e->attr.gid, strerror(-rc));
		goto err_ring;
	}
	if (e->reg_bufs) {
		uint32_t n = (uint32_t)((e->attr.size + STO_FIXED_BUF - 1) / STO_FIXED_BUF);
		iov = calloc(n, sizeof(*iov));
		for (uint32_t i = 0; iov && i < n; i++) {
			iov[i].iov_base = e->attr.base + (uint64_t)i * STO_FIXED_BUF;
			iov[i].iov_len = GICE_MIN(STO_FIXED_BUF, e->attr.size - (uint64_t)i * STO_FIXED_BUF);
		}
		rc = iov ? io_uring_register_buffers(&u->ring, iov, n) : -ENOMEM;
		free(iov);
		if (rc < 0)
			gice_info("storage", "device %u: device memory (%llu bytes) not registered with io_uring (%s): "
				  "plain reads and writes", e->attr.gid, (unsigned long long)e->attr.size, strerror(-rc));
		u->fixed_bufs = rc >= 0;
	}
	e->be = u;
	return GICE_OK;

err_ring:
	io_uring_queue_exit(&u->ring);
	free(u);
	return GICE_ERR_IO;
}

static void uring_fini(sto_engine_t *e)
{
	sto_uring_t *u = e->be;

	if (!u)
		return;
	io_uring_queue_exit(&u->ring);
	free(u);
	e->be = NULL;
}

static int uring_files_set(sto_engine_t *e, uint32_t id, int fd, int dfd)
{
	sto_uring_t *u = e->be;
	int fds[2] = {fd, dfd};
	int rc = io_uring_register_files_update(&u->ring, 2 * id, fds, 2);

	if (rc < 0) {
		gice_error("storage", "device %u: io_uring file slots %u..%u: %s", e->attr.gid, 2 * id, 2 * id + 1,
			   strerror(-rc));
		return GICE_ERR_IO;
	}
	return GICE_OK;
}

static int uring_queue(sto_engine_t *e, uint32_t c)
{
	sto_uring_t *u = e->be;
	const sto_chunk_t *ch = &e->chunks[c];
	const sto_req_t *r = &e->ops_tab[ch->req].r;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	uint64_t dev_off = r->dev_off + ch->off;
	void *addr = e->attr.base + dev_off;
	int slot = (int)(2 * r->file + ch->direct);
	unsigned len = (unsigned)ch->len; /* <= GICE_IO_CHUNK <= 1 GiB */

	if (!sqe)
		return GICE_ERR_AGAIN;
	if (r->dir == STO_OPEN) {
		/* a plain descriptor (not a direct one): sto_file_install registers it as open does */
		io_uring_prep_openat(sqe, AT_FDCWD, e->files[r->file].path, sto_open_oflags(r->flags, ch->direct), 0644);
		io_uring_sqe_set_data64(sqe, c);
		return GICE_OK;
	}
	if (r->dir == STO_SYNC)
		io_uring_prep_fsync(sqe, (int)(2 * r->file), (r->flags & STO_SYNC_DATA) ? IORING_FSYNC_DATASYNC : 0);
	else if (u->fixed_bufs && r->dir == STO_READ)
		io_uring_prep_read_fixed(sqe, slot, addr, len, r->file_off + ch->off, (int)(dev_off / STO_FIXED_BUF));
	else if (u->fixed_bufs)
		io_uring_prep_write_fixed(sqe, slot, addr, len, r->file_off + ch->off, (int)(dev_off / STO_FIXED_BUF));
	else if (r->dir == STO_READ)
		io_uring_prep_read(sqe, slot, addr, len, r->file_off + ch->off);
	else
		io_uring_prep_write(sqe, slot, addr, len, r->file_off + ch->off);
	sqe->flags |= IOSQE_FIXED_FILE;
	/* a page-cache read straight to a worker: warm data is copied by several at once, not by
	 * this thread inside io_uring_submit (cold data went to the workers anyway) */
	if (!ch->direct && r->dir == STO_READ && e->cache_async)
		sqe->flags |= IOSQE_ASYNC;
	io_uring_sqe_set_data64(sqe, c);
	return GICE_OK;
}

static void uring_cancel(sto_engine_t *e, uint32_t c)
{
	sto_uring_t *u = e->be;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (!sqe) {
		io_uring_submit(&u->ring);
		if (!(sqe = io_uring_get_sqe(&u->ring)))
			return; /* the watchdog's next look */
	}
	io_uring_prep_cancel64(sqe, c, 0);
	io_uring_sqe_set_data64(sqe, STO_CANCEL_TAG);
	io_uring_submit(&u->ring);
}

static void uring_submit(sto_engine_t *e)
{
	sto_uring_t *u = e->be;
	int rc = io_uring_submit(&u->ring);

	if (rc < 0 && rc != -EAGAIN && rc != -EBUSY && rc != -EINTR)
		gice_error("storage", "device %u: io_uring_submit: %s", e->attr.gid, strerror(-rc));
}

static int uring_reap(sto_engine_t *e, uint32_t *c, int64_t *res)
{
	sto_uring_t *u = e->be;
	struct io_uring_cqe *cqe;

	for (;;) {
		if (io_uring_peek_cqe(&u->ring, &cqe) != 0)
			return 0;
		if (io_uring_cqe_get_data64(cqe) != STO_CANCEL_TAG)
			break;
		io_uring_cqe_seen(&u->ring, cqe); /* a cancel's own result: the chunk's comes apart */
	}
	*c = (uint32_t)io_uring_cqe_get_data64(cqe);
	*res = cqe->res;
	io_uring_cqe_seen(&u->ring, cqe);
	return 1;
}

const sto_backend_ops_t sto_uring_ops = {
	.name = "uring",
	.init = uring_init,
	.fini = uring_fini,
	.files_set = uring_files_set,
	.queue = uring_queue,
	.cancel = uring_cancel,
	.submit = uring_submit,
	.reap = uring_reap,
};
