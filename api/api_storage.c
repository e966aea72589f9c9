/* api_storage.c: the storage path of the API — files of a device (its storage engine, started by
 * the first gice_file_open), file operations as requests (the CT hands them to the storage
 * engine through the hook below; the engine ends them through ct_engine_op_done), and the
 * device-side calls gice_file_read / gice_file_write. */
#include "api/api_internal.h"

#include <string.h>

/* The CT's storage hook: request r, taken by CT ct with ticket, to the storage engine. The
 * cookie brings CT, completion counter and ticket back to sto_done. */
static int sto_hook(void *arg, const ct_req_t *r, uint32_t ct, uint64_t ticket)
{
	gice_device_t *d = arg;
	sto_engine_t *sto = atomic_load_explicit(&d->sto, memory_order_acquire);
	/* CT_OP_FILE_READ.. in the order of enum sto_dir */
	_Static_assert(CT_OP_FILE_WRITE - CT_OP_FILE_READ == STO_WRITE && CT_OP_FILE_OPEN - CT_OP_FILE_READ == STO_OPEN &&
			       CT_OP_FILE_CLOSE - CT_OP_FILE_READ == STO_CLOSE &&
			       CT_OP_FILE_SYNC - CT_OP_FILE_READ == STO_SYNC,
		       "file ops in step");
	sto_req_t s = {.dir = (uint8_t)(r->op - CT_OP_FILE_READ), .flags = (uint32_t)r->value,
		       .file = (uint32_t)r->rkey, .dev_off = r->src_off, .len = r->len, .file_off = r->roff,
		       .cookie = {((uint64_t)ct << 32) | r->counter, ticket}};

	if (r->rkey > UINT32_MAX) {
		gice_error("api", "device %u: file operation on file %llu, which is not open", d->gid,
			   (unsigned long long)r->rkey);
		return GICE_ERR_INVALID;
	}
	return sto_submit(sto, &s);
}

static void sto_done(void *arg, const sto_req_t *r, int status)
{
	gice_device_t *d = arg;

	ct_engine_op_done(d->ct, (uint32_t)(r->cookie[0] >> 32), r->cookie[1], (uint32_t)r->cookie[0], status);
}

/* A chunk moved: the device's waits see progress (a long load is not a stall). */
static void sto_progress(void *arg)
{
	gice_device_t *d = arg;

	tm_progress(d->tm);
}

int api_file_req(gice_device_t *d, const gice_op_t *op, ct_req_t *r)
{
	static const char *const names[] = {"read", "write", "open", "close", "sync"};
	uint64_t off = 0;

	_Static_assert(GICE_OP_FILE_WRITE - GICE_OP_FILE_READ == CT_OP_FILE_WRITE - CT_OP_FILE_READ &&
			       GICE_OP_FILE_SYNC - GICE_OP_FILE_READ == CT_OP_FILE_SYNC - CT_OP_FILE_READ,
		       "file ops in step");
	r->op = (uint8_t)(CT_OP_FILE_READ + (op->type - GICE_OP_FILE_READ));
	if (op->type == GICE_OP_FILE_CLOSE || op->type == GICE_OP_FILE_SYNC)
		r->len = 0; /* no device memory */
	else if (op->type == GICE_OP_FILE_OPEN && (!op->bytes || !op->local)) {
		gice_error("api", "file open of file %llu: no path (buffer %p, %zu bytes)", (unsigned long long)op->rkey,
			   op->local, op->bytes);
		return GICE_ERR_INVALID;
	}
	if (r->len && api_dev_off(d, op->local, &off)) {
		gice_error("api", "file %s of %zu bytes: buffer %p is not device %u memory",
			   names[op->type - GICE_OP_FILE_READ], op->bytes, op->local, d->gid);
		return GICE_ERR_UNREGISTERED;
	}
	r->src_off = off;
	r->conn = (uint16_t)op->rkey; /* its CT: operations on one file go to one CT */
	r->sig_id = TM_NONE;
	return GICE_OK;
}

/* The device's storage engine, started at the first call. */
static int sto_get(gice_device_t *d, sto_engine_t **out)
{
	sto_engine_t *sto;
	int rc = GICE_OK;

	pthread_mutex_lock(&api_g.lock);
	sto = atomic_load_explicit(&d->sto, memory_order_relaxed);
	if (!sto) {
		sto_attr_t a = {.gid = d->gid, .index = d->index, .base = d->base, .size = d->size,
				.max_reqs = ct_engine_max_ops(d->ct), .done = sto_done, .done_arg = d,
				.progress = sto_progress, .timeout_ns = api_g.timeout_ns};
		if ((rc = sto_create(&a, &sto)) == GICE_OK) {
			/* release: the hook and stats readers see the engine set up */
			atomic_store_explicit(&d->sto, sto, memory_order_release);
			ct_engine_set_storage(d->ct, sto_hook, d);
		}
	}
	pthread_mutex_unlock(&api_g.lock);
	if (!rc)
		*out = sto;
	return rc;
}

int gice_file_open(gice_device_t *d, const char *path, unsigned flags, gice_file_t *file)
{
	sto_engine_t *sto;
	uint32_t id;
	int rc;

	if (!d || !file)
		return GICE_ERR_INVALID;
	if ((rc = sto_get(d, &sto)))
		return rc;
	/* the GICE_FILE_* flags are the engine's STO_F_* */
	_Static_assert((int)GICE_FILE_READ == (int)STO_F_READ && (int)GICE_FILE_WRITE == (int)STO_F_WRITE &&
			       (int)GICE_FILE_CREATE == (int)STO_F_CREATE && (int)GICE_FILE_TRUNC == (int)STO_F_TRUNC &&
			       (int)GICE_FILE_NO_DIRECT == (int)STO_F_NO_DIRECT, "file flags match");
	if ((rc = sto_file_open(sto, path, flags, &id)))
		return rc;
	*file = id;
	return GICE_OK;
}

int gice_file_reserve(gice_device_t *d, gice_file_t *file)
{
	sto_engine_t *sto;
	uint32_t id;
	int rc;

	if (!d || !file)
		return GICE_ERR_INVALID;
	if ((rc = sto_get(d, &sto)) || (rc = sto_file_reserve(sto, &id)))
		return rc;
	*file = id;
	return GICE_OK;
}

int gice_file_close(gice_device_t *d, gice_file_t file)
{
	sto_engine_t *sto = d ? atomic_load_explicit(&d->sto, memory_order_acquire) : NULL;

	if (!sto) {
		gice_error("api", "gice_file_close(%u): no file is open on this device", file);
		return GICE_ERR_INVALID;
	}
	return sto_file_close(sto, file);
}

int gice_file_error(gice_device_t *d, gice_file_t file, char *buf, size_t len)
{
	sto_engine_t *sto = d ? atomic_load_explicit(&d->sto, memory_order_acquire) : NULL;

	if (buf && len)
		buf[0] = 0;
	return sto ? sto_file_error(sto, file, buf, len) : GICE_ERR_INVALID;
}

void api_storage_quiesce(gice_device_t *d)
{
	sto_engine_t *sto = atomic_load_explicit(&d->sto, memory_order_acquire);

	if (sto)
		sto_shutdown(sto);
}

void api_storage_destroy(gice_device_t *d)
{
	sto_destroy(atomic_exchange_explicit(&d->sto, NULL, memory_order_acq_rel));
}

void api_storage_stats(gice_device_t *d, sto_stats_t *st)
{
	sto_engine_t *sto = atomic_load_explicit(&d->sto, memory_order_acquire);

	if (sto)
		sto_stats(sto, st);
	else
		memset(st, 0, sizeof(*st));
}

/* ---------------------------------------------------------------- device side */

int gice_file_read(gice_kctx_t *k, gice_file_t file, void *dst, uint64_t file_off, size_t bytes,
		   gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_FILE_READ, .local = dst, .bytes = bytes, .rkey = file, .roff = file_off,
			.signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_file_write(gice_kctx_t *k, gice_file_t file, const void *src, uint64_t file_off, size_t bytes,
		    gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_FILE_WRITE, .local = (void *)src, .bytes = bytes, .rkey = file,
			.roff = file_off, .signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_file_open_nbi(gice_kctx_t *k, gice_file_t file, const char *path, size_t bytes, unsigned flags,
		       gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_FILE_OPEN, .local = (void *)path, .bytes = bytes, .rkey = file,
			.value = flags, .signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_file_close_nbi(gice_kctx_t *k, gice_file_t file, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_FILE_CLOSE, .rkey = file, .signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_file_sync(gice_kctx_t *k, gice_file_t file, unsigned flags, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_FILE_SYNC, .rkey = file, .value = flags, .signal = GICE_NO_COUNTER,
			.completion = completion};
	return gice_issue(k, &op);
}
