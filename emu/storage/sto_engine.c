/* sto_engine.c: the storage engine of one device — its thread (take requests from the
 * submission ring, cut them into chunks, keep up to GICE_IO_QD in flight on the backend, reap,
 * call done; sleep on an eventfd when idle), the errors of failed requests, set-up and stats.
 * The files are in sto_file.c.
 * The backends are sto_uring.c (io_uring) and sto_psync.c (pread/pwrite). */
#include "emu/storage/sto_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

const gice_param_t sto_params[] = {
	{"GICE_IO_BACKEND", "auto", "storage path backend: uring (io_uring), psync (pread/pwrite on the storage "
	 "thread) or auto (uring, else psync)", GICE_PARAM_STR, 0, 0},
	{"GICE_IO_QD", "32", "storage path: chunks in flight per device (io_uring queue depth)", GICE_PARAM_U64, 1,
	 4096},
	{"GICE_IO_CACHE_QD", "4", "storage path: of those, chunks through the page cache in flight at most (deep "
	 "queues of buffered reads defeat readahead: io_uring hands them to worker threads)", GICE_PARAM_U64, 1, 4096},
	{"GICE_IO_CHUNK", "1m", "storage path: largest single read or write a request is cut into", GICE_PARAM_SIZE,
	 4096, 1ull << 30},
	{"GICE_IO_CACHE_ASYNC", "1", "storage path (io_uring): page-cache reads go straight to io_uring's worker "
	 "threads, so that up to GICE_IO_CACHE_QD of them copy a warm file into device memory at once, on several "
	 "cores (0: the storage thread copies cached data itself, on one core)", GICE_PARAM_BOOL, 0, 1},
	{"GICE_IO_DIRECT", "1", "storage path: use O_DIRECT for the parts of a request whose file offset, length "
	 "and device address are 4 KiB aligned (0: always the page cache)", GICE_PARAM_BOOL, 0, 1},
	{"GICE_IO_MAX_FILES", "64", "storage path: files open per device (registered with io_uring)",
	 GICE_PARAM_U64, 1, 32768},
	{"GICE_IO_REGISTER_BUFFERS", "1", "storage path: register (pin) device memory with io_uring for fixed "
	 "reads and writes (falls back to plain ones when the kernel refuses)", GICE_PARAM_BOOL, 0, 1},
	{NULL, NULL, NULL, 0, 0, 0},
};

static const char *const dir_name[STO_DIRS] = {"read", "write", "open", "close", "fsync"};
static const uint8_t dir_stat[STO_DIRS] = {STO_ST_READS, STO_ST_WRITES, STO_ST_OPENS, STO_ST_CLOSES, STO_ST_SYNCS};

static const char *dir_str(uint8_t dir) { return dir < STO_DIRS ? dir_name[dir] : "unknown operation"; }

/* ---------------------------------------------------------------- submission ring */

int sto_submit(sto_engine_t *e, const sto_req_t *r)
{
	int rc = GICE_OK;

	atomic_fetch_add_explicit(&e->submitters, 1, memory_order_seq_cst);
	/* seq_cst with sto_shutdown: it sets closing, then waits for submitters to drain */
	if (atomic_load_explicit(&e->closing, memory_order_seq_cst)) {
		rc = GICE_ERR_CANCELED;
		goto out;
	}
	sto_file_t *f = r->file < e->max_files ? &e->files[r->file] : NULL;
	/* pending first, then the file: seq_cst with sto_file_close, which takes the file, then
	 * reads pending: either it sees this request or this request sees the file gone */
	if (f)
		atomic_fetch_add_explicit(&f->pending, 1, memory_order_seq_cst);
	/* open and close need the id taken (reserved or open), the rest need the file open */
	int by_id = r->dir == STO_OPEN || r->dir == STO_CLOSE;
	if (!f || (by_id ? !atomic_load_explicit(&f->taken, memory_order_seq_cst)
			 : atomic_load_explicit(&f->fd, memory_order_seq_cst) < 0)) {
		gice_error("storage", "device %u: %s of %llu bytes names file %u, which is not %s", e->attr.gid,
			   dir_str(r->dir), (unsigned long long)r->len, r->file,
			   by_id ? "open or reserved" : "open");
		rc = GICE_ERR_INVALID;
		goto out_file;
	}
	if (r->dev_off > e->attr.size || r->len > e->attr.size - r->dev_off || r->dir >= STO_DIRS) {
		gice_error("storage", "device %u: %s of %llu bytes at device offset %llu of file %u: outside device "
			   "memory (%llu bytes)", e->attr.gid, dir_str(r->dir), (unsigned long long)r->len,
			   (unsigned long long)r->dev_off, r->file, (unsigned long long)e->attr.size);
		rc = GICE_ERR_INVALID;
		goto out_file;
	}
	atomic_fetch_add_explicit(&e->accepted, 1, memory_order_relaxed);
	/* claim a slot: it is free when its seq equals the position (the consumer released it) */
	uint64_t pos = atomic_fetch_add_explicit(&e->ring_tail, 1, memory_order_relaxed);
	sto_slot_t *s = &e->ring[pos & e->ring_mask];
	while (atomic_load_explicit(&s->seq, memory_order_acquire) != pos)
		gice_cpu_relax(); /* not reached: the ring holds every request the submitters may have */
	s->r = *r;
	/* release: the consumer that sees seq pos + 1 sees the request */
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
	/* seq_cst: pairs with the thread's sleeping = 1 then ring check */
	if (atomic_load_explicit(&e->sleeping, memory_order_seq_cst)) {
		uint64_t one = 1;
		if (write(e->efd, &one, sizeof(one)) < 0)
			gice_error("storage", "device %u: eventfd write: %m", e->attr.gid);
	}
	goto out;
out_file:
	if (f)
		atomic_fetch_sub_explicit(&f->pending, 1, memory_order_relaxed);
out:
	atomic_fetch_sub_explicit(&e->submitters, 1, memory_order_release);
	return rc;
}

/* Next request from the ring, or 0 if none. */
static int ring_take(sto_engine_t *e, sto_req_t *r)
{
	sto_slot_t *s = &e->ring[e->ring_head & e->ring_mask];

	if (atomic_load_explicit(&s->seq, memory_order_acquire) != e->ring_head + 1)
		return 0;
	*r = s->r;
	/* release: the slot may be reused one lap later */
	atomic_store_explicit(&s->seq, e->ring_head + e->ring_mask + 1, memory_order_release);
	e->ring_head++;
	return 1;
}

static int ring_ready(sto_engine_t *e)
{
	sto_slot_t *s = &e->ring[e->ring_head & e->ring_mask];

	return atomic_load_explicit(&s->seq, memory_order_acquire) == e->ring_head + 1;
}

/* ---------------------------------------------------------------- requests and chunks */

void sto_op_fail(sto_engine_t *e, sto_op_t *o, int status, const char *text)
{
	sto_file_t *f = &e->files[o->r.file];

	if (o->status != GICE_OK)
		return; /* the first failure is the request's */
	o->status = status;
	gice_error("storage", "%s", text);
	pthread_mutex_lock(&f->err_lock);
	f->err_status = status;
	snprintf(f->err_text, sizeof(f->err_text), "%s", text);
	pthread_mutex_unlock(&f->err_lock);
	o->next = o->r.len; /* hand out nothing more */
}

static void req_fail(sto_engine_t *e, sto_op_t *o, int err, const char *what, uint64_t off, uint64_t len)
{
	sto_file_t *f = &e->files[o->r.file];
	char text[512];

	if (o->status != GICE_OK)
		return; /* the first failure is the request's */
	if (err > 0)
		snprintf(text, sizeof(text), "device %u: %s of %llu bytes at offset %llu of %s (device offset %llu) "
			 "failed: %s at offset %llu, length %llu: %s (errno %d)", e->attr.gid, dir_name[o->r.dir],
			 (unsigned long long)o->r.len, (unsigned long long)o->r.file_off, f->path,
			 (unsigned long long)o->r.dev_off, what, (unsigned long long)(o->r.file_off + off),
			 (unsigned long long)len, strerror(err), err);
	else
		snprintf(text, sizeof(text), "device %u: %s of %llu bytes at offset %llu of %s (device offset %llu) "
			 "failed: end of file at offset %llu (%llu bytes short, errno 0)", e->attr.gid,
			 dir_name[o->r.dir], (unsigned long long)o->r.len, (unsigned long long)o->r.file_off, f->path,
			 (unsigned long long)o->r.dev_off, (unsigned long long)(o->r.file_off + off),
			 (unsigned long long)len);
	sto_op_fail(e, o, err > 0 ? sto_errno_status(err) : GICE_ERR_OUT_OF_BOUNDS, text);
}

/* A request with nothing in flight and nothing left to hand out is done. */
static int req_maybe_done(sto_engine_t *e, uint32_t i)
{
	sto_op_t *o = &e->ops_tab[i];

	if (o->inflight || o->next < o->r.len)
		return 0;
	sto_stat_add(e, dir_stat[o->r.dir], 1);
	if (o->status)
		sto_stat_add(e, STO_ST_FAILED, 1);
	sto_req_t r = o->r;
	int status = o->status;
	o->link = e->op_free;
	e->op_free = i;
	/* release: sto_file_close reads pending before letting the file go */
	atomic_fetch_sub_explicit(&e->files[r.file].pending, 1, memory_order_release);
	e->attr.done(e->attr.done_arg, &r, status);
	atomic_fetch_add_explicit(&e->completed, 1, memory_order_release);
	return 1;
}

/* Is [dev_off, +len) at file_off of request o fit for O_DIRECT? */
static int direct_ok(const sto_engine_t *e, const sto_op_t *o, const sto_file_t *f, uint64_t dev_off,
		     uint64_t file_off)
{
	uintptr_t addr = (uintptr_t)e->attr.base + dev_off;

	return e->direct && f->dfd >= 0 && !f->no_direct && !o->cached && !(addr % STO_DIRECT_ALIGN) &&
	       !(file_off % STO_DIRECT_ALIGN);
}

/* Hand out chunks of the active requests, oldest first, while chunks and queue slots last. A
 * request leaves the active list once all of it is handed out (or it failed). */
static int feed(sto_engine_t *e)
{
	int n = 0;

	while (e->act_head != STO_NONE) {
		uint32_t i = e->act_head;
		sto_op_t *o = &e->ops_tab[i];
		if (o->ctl == STO_CTL_TODO) {
			if (!sto_ctl_start(e, o)) {
				o->ctl = STO_CTL_NONE;
				o->next = o->r.len; /* finished: done below */
				continue;
			}
			o->ctl = STO_CTL_READY;
		}
		if (o->ctl == STO_CTL_READY) {
			if (e->chunk_free == STO_NONE)
				break;
			uint32_t c = e->chunk_free;
			e->chunks[c] = (sto_chunk_t){.req = i, .next = e->chunks[c].next, .fd = -1};
			if (e->ops->queue(e, c) == GICE_ERR_AGAIN)
				break; /* queued on a later pass */
			e->chunk_free = e->chunks[c].next;
			e->chunks[c].next = STO_NONE;
			e->chunks[c].busy = 1;
			o->t_last = gice_now_ns(); /* the watchdog counts from here */
			o->ctl = STO_CTL_QUEUED;
			o->next = o->r.len;
			o->inflight++;
			e->inflight++;
			n++;
			continue;
		}
		if (o->next >= o->r.len) {
			e->act_head = o->link;
			if (e->act_head == STO_NONE)
				e->act_tail = STO_NONE;
			o->active = 0;
			req_maybe_done(e, i); /* zero-length, or failed with nothing in flight */
			continue;
		}
		if (e->chunk_free == STO_NONE)
			break;
		sto_file_t *f = &e->files[o->r.file];
		uint64_t dev_off = o->r.dev_off + o->next, left = o->r.len - o->next;
		uint64_t len = GICE_MIN(left, e->chunk);
		/* a chunk stays inside one registered buffer */
		len = GICE_MIN(len, STO_FIXED_BUF - dev_off % STO_FIXED_BUF);
		uint8_t direct = (uint8_t)direct_ok(e, o, f, dev_off, o->r.file_off + o->next);
		if (direct && len % STO_DIRECT_ALIGN) {
			if (len > STO_DIRECT_ALIGN)
				len = GICE_ALIGN_DOWN(len, STO_DIRECT_ALIGN); /* the tail goes through the page cache */
			else
				direct = 0;
		}
		if (!direct && e->inflight_cached >= e->cache_qd)
			break; /* the page cache's share of the queue is full */
		uint32_t c = e->chunk_free;
		sto_chunk_t *ch = &e->chunks[c];
		e->chunk_free = ch->next;
		*ch = (sto_chunk_t){.req = i, .next = STO_NONE, .off = o->next, .len = len, .direct = direct, .fd = -1};
		if (e->ops->queue(e, c) == GICE_ERR_AGAIN) {
			ch->next = e->chunk_free;
			e->chunk_free = c;
			break;
		}
		ch->busy = 1;
		if (!o->inflight) /* the watchdog counts from its first chunk in flight, not from a wait for room */
			o->t_last = gice_now_ns();
		o->next += len;
		o->inflight++;
		e->inflight++;
		e->inflight_cached += !direct;
		n++;
	}
	if (n)
		e->ops->submit(e);
	return n;
}

/* Requeue chunk c (a short transfer's rest, or a direct one retried buffered). */
static void requeue(sto_engine_t *e, uint32_t c)
{
	e->inflight_cached += !e->chunks[c].direct;
	while (e->ops->queue(e, c) == GICE_ERR_AGAIN) {
		e->ops->submit(e); /* room comes as the kernel takes entries */
		sched_yield();
	}
	e->ops->submit(e);
}

static void chunk_done(sto_engine_t *e, uint32_t c, int64_t res)
{
	sto_chunk_t *ch = &e->chunks[c];
	sto_op_t *o = &e->ops_tab[ch->req];
	sto_file_t *f = &e->files[o->r.file];

	o->t_last = gice_now_ns();
	if (o->ctl == STO_CTL_QUEUED) {
		if (!sto_ctl_done(e, c, res))
			goto free_chunk;
		/* its second step (the O_DIRECT open) on the same chunk */
		while (e->ops->queue(e, c) == GICE_ERR_AGAIN) {
			e->ops->submit(e); /* room comes as the kernel takes entries */
			sched_yield();
		}
		e->ops->submit(e);
		return;
	}
	e->inflight_cached -= !ch->direct; /* back below if requeued */
	if (res < 0 && ch->direct && res == -EINVAL && o->status == GICE_OK) {
		/* the file system refuses this O_DIRECT transfer: the page cache from now on */
		gice_info("storage", "device %u: O_DIRECT %s on %s refused (EINVAL): page cache from now on",
			  e->attr.gid, dir_name[o->r.dir], f->path);
		f->no_direct = 1;
		ch->direct = 0;
		requeue(e, c);
		return;
	}
	if (res > 0 && (uint64_t)res < ch->len && o->status == GICE_OK) {
		/* short: go on from where it stopped (EOF shows as a 0 next) */
		uint64_t done = (uint64_t)res;
		sto_stat_add(e, o->r.dir == STO_READ ? STO_ST_READ_BYTES : STO_ST_WRITE_BYTES, done);
		if (ch->direct)
			sto_stat_add(e, STO_ST_DIRECT_BYTES, done);
		sto_stat_add(e, STO_ST_SHORT, 1);
		if (e->attr.progress)
			e->attr.progress(e->attr.done_arg);
		ch->off += done;
		ch->len -= done;
		if (ch->direct && ((ch->len % STO_DIRECT_ALIGN) ||
				   !direct_ok(e, o, f, o->r.dev_off + ch->off, o->r.file_off + ch->off)))
			ch->direct = 0;
		requeue(e, c);
		return;
	}
	if (res < 0)
		req_fail(e, o, (int)-res, ch->direct ? "O_DIRECT chunk" : "chunk", ch->off, ch->len);
	else if (res == 0 && ch->len && o->r.dir == STO_READ)
		req_fail(e, o, 0, "end of file", ch->off, ch->len);
	else if (res == 0 && ch->len)
		req_fail(e, o, ENOSPC, "nothing written", ch->off, ch->len);
	else {
		if (e->attr.progress)
			e->attr.progress(e->attr.done_arg);
		sto_stat_add(e, o->r.dir == STO_READ ? STO_ST_READ_BYTES : STO_ST_WRITE_BYTES, (uint64_t)res);
		if (ch->direct)
			sto_stat_add(e, STO_ST_DIRECT_BYTES, (uint64_t)res);
	}
free_chunk:;
	uint32_t ri = ch->req;
	ch->busy = 0;
	ch->next = e->chunk_free;
	e->chunk_free = c;
	e->inflight--;
	o->inflight--;
	if (!o->active) /* else feed() finishes it when it leaves the active list */
		req_maybe_done(e, ri);
}

/* Move requests from the ring onto the active list. */
static int take(sto_engine_t *e)
{
	sto_req_t r;
	int n = 0;

	while (e->op_free != STO_NONE && ring_take(e, &r)) {
		uint32_t i = e->op_free;
		sto_op_t *o = &e->ops_tab[i];
		e->op_free = o->link;
		*o = (sto_op_t){.r = r, .link = STO_NONE, .active = 1, .t_last = gice_now_ns(),
				.ctl = r.dir >= STO_OPEN ? STO_CTL_TODO : STO_CTL_NONE};
		sto_file_t *f = &e->files[r.file];
		if (r.dir == STO_READ && e->direct && f->dfd >= 0 && !f->no_direct)
			o->cached = (uint8_t)sto_file_range_cached(e, f, &r);
		if (e->act_tail == STO_NONE)
			e->act_head = i;
		else
			e->ops_tab[e->act_tail].link = i;
		e->act_tail = i;
		n++;
	}
	return n;
}

static int reap(sto_engine_t *e)
{
	uint32_t c;
	int64_t res;
	int n = 0;

	while (e->ops->reap(e, &c, &res)) {
		chunk_done(e, c, res);
		n++;
	}
	return n;
}

static void *sto_thread(void *arg)
{
	sto_engine_t *e = arg;
	char name[16];

	snprintf(name, sizeof(name), "gice-d%u-io", e->attr.index);
	pthread_setname_np(pthread_self(), name);
	for (;;) {
		int work = take(e);
		work += feed(e);
		work += reap(e);
		if (work)
			continue;
		if (atomic_load_explicit(&e->stop, memory_order_acquire) && !e->inflight && e->act_head == STO_NONE &&
		    !ring_ready(e))
			break;
		int wait_ms = 1000;
		if (e->inflight && e->attr.timeout_ns) {
			/* the watchdog looks at least 4 times per timeout while anything is in flight */
			uint64_t now = gice_now_ns(), every = e->attr.timeout_ns / 4;
			if (now - e->watch_ns >= every) {
				e->watch_ns = now;
				if (sto_watch(e, now))
					continue;
			}
			wait_ms = (int)GICE_MAX(GICE_MIN(every / 1000000, 1000ull), 1ull);
		}
		/* Sleep on the eventfd: producers write it when they see sleeping, and io_uring
		 * writes it for every completion. seq_cst: pairs with sto_submit's push then load. */
		atomic_store_explicit(&e->sleeping, 1, memory_order_seq_cst);
		if (!ring_ready(e) && !atomic_load_explicit(&e->stop, memory_order_acquire)) {
			struct pollfd p = {.fd = e->efd, .events = POLLIN};
			uint64_t v;
			/* a psync backend has its completions already: no wait with chunks in flight */
			if (poll(&p, 1, e->inflight && e->ops == &sto_psync_ops ? 0 : wait_ms) > 0 &&
			    read(e->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				gice_error("storage", "device %u: eventfd read: %m", e->attr.gid);
		}
		atomic_store_explicit(&e->sleeping, 0, memory_order_relaxed);
	}
	return NULL;
}

/* ---------------------------------------------------------------- set-up */

const char *sto_backend_name(const sto_engine_t *e) { return e->ops->name; }

static int read_params(sto_engine_t *e, const char **backend)
{
	uint64_t v[7];
	const char *names[] = {"GICE_IO_QD", "GICE_IO_CHUNK", "GICE_IO_DIRECT", "GICE_IO_MAX_FILES",
			       "GICE_IO_REGISTER_BUFFERS", "GICE_IO_CACHE_QD", "GICE_IO_CACHE_ASYNC"};
	int rc;

	for (size_t i = 0; i < GICE_ARRAY_SIZE(names); i++)
		if ((rc = gice_param_u64(gice_param_find(sto_params, names[i]), &v[i])))
			return rc;
	e->qd = (uint32_t)v[0];
	e->chunk = GICE_ALIGN_UP(v[1], STO_DIRECT_ALIGN);
	e->direct = (int)v[2];
	e->max_files = (uint32_t)v[3];
	e->reg_bufs = (int)v[4];
	e->cache_qd = (uint32_t)v[5];
	e->cache_async = (int)v[6];
	*backend = gice_param_str(gice_param_find(sto_params, "GICE_IO_BACKEND"));
	if (strcasecmp(*backend, "auto") && strcasecmp(*backend, "uring") && strcasecmp(*backend, "psync")) {
		gice_error("config", "GICE_IO_BACKEND=\"%s\": expected auto, uring or psync", *backend);
		return GICE_ERR_CONFIG;
	}
	return GICE_OK;
}

int sto_create(const sto_attr_t *attr, sto_engine_t **out)
{
	sto_engine_t *e = calloc(1, sizeof(*e));
	const char *backend;
	uint32_t ring = 1;
	int rc = GICE_ERR_NO_MEMORY;

	if (!e)
		return GICE_ERR_NO_MEMORY;
	e->attr = *attr;
	e->efd = -1;
	if ((rc = read_params(e, &backend)))
		goto err_free;
	rc = GICE_ERR_NO_MEMORY;
	while (ring < GICE_MAX(attr->max_reqs, 2u))
		ring <<= 1;
	e->ring_mask = ring - 1;
	e->n_ops = ring;
	e->ring = calloc(ring, sizeof(*e->ring));
	e->ops_tab = calloc(ring, sizeof(*e->ops_tab));
	e->chunks = calloc(e->qd, sizeof(*e->chunks));
	e->files = calloc(e->max_files, sizeof(*e->files));
	if (!e->ring || !e->ops_tab || !e->chunks || !e->files)
		goto err_free;
	for (uint32_t i = 0; i < ring; i++) {
		atomic_init(&e->ring[i].seq, i);
		e->ops_tab[i].link = i + 1 < ring ? i + 1 : STO_NONE;
	}
	e->op_free = 0;
	e->act_head = e->act_tail = STO_NONE;
	for (uint32_t i = 0; i < e->qd; i++)
		e->chunks[i].next = i + 1 < e->qd ? i + 1 : STO_NONE;
	e->chunk_free = 0;
	for (uint32_t i = 0; i < e->max_files; i++) {
		e->files[i].fd = e->files[i].dfd = -1;
		pthread_mutex_init(&e->files[i].err_lock, NULL);
	}
	pthread_mutex_init(&e->files_lock, NULL);
	e->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->efd < 0) {
		gice_error("storage", "device %u: eventfd: %m", attr->gid);
		rc = GICE_ERR_IO;
		goto err_free;
	}
	e->ops = strcasecmp(backend, "psync") ? &sto_uring_ops : &sto_psync_ops;
	rc = e->ops->init(e);
	if (rc == GICE_ERR_UNSUPPORTED && !strcasecmp(backend, "auto")) {
		gice_warn("storage", "device %u: io_uring unavailable here: GICE_IO_BACKEND=psync (pread/pwrite)",
			  attr->gid);
		e->ops = &sto_psync_ops;
		rc = e->ops->init(e);
	}
	if (rc)
		goto err_free;
	if (pthread_create(&e->thread, NULL, sto_thread, e)) {
		gice_error("storage", "device %u: cannot start the storage thread", attr->gid);
		rc = GICE_ERR_NO_MEMORY;
		goto err_fini;
	}
	e->started = 1;
	gice_info("storage", "device %u: storage engine up: backend %s, queue depth %u, chunks of %llu bytes",
		  attr->gid, e->ops->name, e->qd, (unsigned long long)e->chunk);
	*out = e;
	return GICE_OK;

err_fini:
	e->ops->fini(e);
err_free:
	if (e->efd >= 0)
		close(e->efd);
	free(e->files);
	free(e->chunks);
	free(e->ops_tab);
	free(e->ring);
	free(e);
	return rc;
}

void sto_shutdown(sto_engine_t *e)
{
	atomic_store_explicit(&e->closing, 1, memory_order_seq_cst);
	while (atomic_load_explicit(&e->submitters, memory_order_acquire))
		sched_yield();
	/* every accepted request ends: the thread runs them to completion */
	while (atomic_load_explicit(&e->completed, memory_order_acquire) !=
	       atomic_load_explicit(&e->accepted, memory_order_relaxed)) {
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
}

void sto_destroy(sto_engine_t *e)
{
	uint64_t one = 1;

	if (!e)
		return;
	sto_shutdown(e);
	atomic_store_explicit(&e->stop, 1, memory_order_release);
	if (write(e->efd, &one, sizeof(one)) < 0)
		gice_error("storage", "device %u: eventfd write: %m", e->attr.gid);
	if (e->started)
		pthread_join(e->thread, NULL);
	e->ops->fini(e);
	for (uint32_t i = 0; i < e->max_files; i++) {
		if (e->files[i].fd >= 0)
			close(e->files[i].fd);
		if (e->files[i].dfd >= 0)
			close(e->files[i].dfd);
		pthread_mutex_destroy(&e->files[i].err_lock);
	}
	pthread_mutex_destroy(&e->files_lock);
	close(e->efd);
	free(e->files);
	free(e->chunks);
	free(e->ops_tab);
	free(e->ring);
	free(e);
}

void sto_stats(const sto_engine_t *e, sto_stats_t *st)
{
	uint64_t v[STO_ST_N];

	/* sto_stats_t is STO_ST_N uint64_t in the enum's order (static_assert in sto_internal.h) */
	for (int i = 0; i < STO_ST_N; i++)
		v[i] = atomic_load_explicit((_Atomic uint64_t *)&e->st[i], memory_order_relaxed);
	memcpy(st, v, sizeof(v));
}
