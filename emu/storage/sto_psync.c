/* sto_psync.c: the pread/pwrite backend of the storage engine (GICE_IO_BACKEND=psync, or auto
 * where io_uring cannot start, e.g. under a seccomp filter that forbids it). Each chunk (or
 * open, or fsync) runs to its end on the storage thread as it is queued; reap hands the results
 * back in order. It cannot cancel: a transfer that never ends holds the thread (and the
 * watchdog, which runs on it). */
#include "emu/storage/sto_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
	uint32_t *done;  /* finished chunks, a ring of GICE_IO_QD */
	int64_t *res;
	uint32_t head, n;
	int (*fds)[2];   /* per file: page cache, O_DIRECT */
} sto_psync_t;

static int psync_init(sto_engine_t *e)
{
	sto_psync_t *p = calloc(1, sizeof(*p));

	if (!p)
		return GICE_ERR_NO_MEMORY;
	p->done = calloc(e->qd, sizeof(*p->done));
	p->res = calloc(e->qd, sizeof(*p->res));
	p->fds = calloc(e->max_files, sizeof(*p->fds));
	if (!p->done || !p->res || !p->fds) {
		free(p->done);
		free(p->res);
		free(p->fds);
		free(p);
		return GICE_ERR_NO_MEMORY;
	}
	e->be = p;
	return GICE_OK;
}

static void psync_fini(sto_engine_t *e)
{
	sto_psync_t *p = e->be;

	if (!p)
		return;
	free(p->done);
	free(p->res);
	free(p->fds);
	free(p);
	e->be = NULL;
}

static int psync_files_set(sto_engine_t *e, uint32_t id, int fd, int dfd)
{
	sto_psync_t *p = e->be;

	p->fds[id][0] = fd;
	p->fds[id][1] = dfd;
	return GICE_OK;
}

static int psync_queue(sto_engine_t *e, uint32_t c)
{
	sto_psync_t *p = e->be;
	const sto_chunk_t *ch = &e->chunks[c];
	const sto_req_t *r = &e->ops_tab[ch->req].r;
	int fd = p->fds[r->file][ch->direct];
	void *addr = e->attr.base + r->dev_off + ch->off;
	ssize_t n;

	if (p->n == e->qd)
		return GICE_ERR_AGAIN;
	do
		if (r->dir == STO_OPEN)
			n = open(e->files[r->file].path, sto_open_oflags(r->flags, ch->direct), 0644);
		else if (r->dir == STO_SYNC)
			n = (r->flags & STO_SYNC_DATA) ? fdatasync(p->fds[r->file][0]) : fsync(p->fds[r->file][0]);
		else
			n = r->dir == STO_READ ? pread(fd, addr, ch->len, (off_t)(r->file_off + ch->off))
					       : pwrite(fd, addr, ch->len, (off_t)(r->file_off + ch->off));
	while (n < 0 && errno == EINTR);
	uint32_t at = (p->head + p->n++) % e->qd;
	p->done[at] = c;
	p->res[at] = n < 0 ? -errno : n;
	return GICE_OK;
}

static void psync_submit(sto_engine_t *e) { (void)e; }

static int psync_reap(sto_engine_t *e, uint32_t *c, int64_t *res)
{
	sto_psync_t *p = e->be;

	if (!p->n)
		return 0;
	*c = p->done[p->head];
	*res = p->res[p->head];
	p->head = (p->head + 1) % e->qd;
	p->n--;
	return 1;
}

const sto_backend_ops_t sto_psync_ops = {
	.name = "psync",
	.init = psync_init,
	.fini = psync_fini,
	.files_set = psync_files_set,
	.queue = psync_queue,
	.submit = psync_submit,
	.reap = psync_reap,
};
