/* api_ops.c: counters, operations (host-posted, armed, and the device API that kernels call),
 * waits and quiet. */
#include "api/api_internal.h"

#include <sched.h>
#include <string.h>

int api_ctr_ok(const gice_device_t *d, gice_counter_t c)
{
	uint32_t ct;

	if (c >= d->n_cts && c < tm_region_layout(d->tm)->n_counters) {
		if (!ct_counter_engine_owned(d->ct, c, &ct))
			return 1;
		/* a reset of it would leave gice_quiet waiting for ever */
		gice_error("api", "counter %u of device %u belongs to CT %u (it counts the operations armed "
				  "descriptors fired)", c, d->gid, ct);
		return 0;
	}
	gice_error("api", "counter %u is not a counter of device %u (valid %u..%u)", c, d->gid, d->n_cts,
		   tm_region_layout(d->tm)->n_counters - 1);
	return 0;
}

int gice_counter_alloc(gice_device_t *d, gice_counter_t *c)
{
	gice_counter_t id;
	int rc = tm_counter_alloc(d->tm, &id);

	if (rc)
		return rc;
	tm_counter_reset(d->tm, id); /* a recycled counter starts from zero */
	*c = id;
	return GICE_OK;
}
int gice_counter_free(gice_device_t *d, gice_counter_t c) { return tm_counter_free(d->tm, c); }

uint64_t gice_counter_read(gice_device_t *d, gice_counter_t c)
{
	return api_ctr_ok(d, c) ? tm_counter_read(d->tm, c) : 0;
}

int gice_counter_get(gice_device_t *d, gice_counter_t c, gice_counter_state_t *st)
{
	tm_counter_state_t s;

	if (!api_ctr_ok(d, c))
		return GICE_ERR_INVALID;
	tm_counter_get(d->tm, c, &s);
	st->value = s.value;
	st->fail = s.fail;
	st->status = s.status;
	st->ts_ns = s.ts_ns;
	return GICE_OK;
}

int gice_counter_set(gice_device_t *d, gice_counter_t c, uint64_t v)
{
	if (!api_ctr_ok(d, c))
		return GICE_ERR_INVALID;
	tm_counter_set(d->tm, c, v);
	return GICE_OK;
}

int gice_counter_add(gice_device_t *d, gice_counter_t c, uint64_t v)
{
	if (!api_ctr_ok(d, c))
		return GICE_ERR_INVALID;
	tm_counter_add(d->tm, c, v);
	return GICE_OK;
}

int gice_counter_reset(gice_device_t *d, gice_counter_t c)
{
	if (!api_ctr_ok(d, c))
		return GICE_ERR_INVALID;
	tm_counter_reset(d->tm, c);
	return GICE_OK;
}

static const char *const cmp_names[] = {"==", "!=", ">", ">=", "<", "<="};

/* ---------------------------------------------------------------- waits */

/* A kernel's wait steps its device's CTs while it spins (ct_step.c); host waits never do. */
struct stepper {
	gice_device_t *d;
	int on;
};

static int step_poll(void *arg)
{
	struct stepper *st = arg;

	if (!st->on) { /* first poll: the condition did not hold at once */
		st->on = 1;
		ct_engine_stepping(st->d->ct, 1);
	}
	return ct_engine_step(st->d->ct);
}

static void step_done(void *arg)
{
	struct stepper *st = arg;

	if (st->on) {
		st->on = 0;
		ct_engine_stepping(st->d->ct, 0);
	}
}

/* Wait on counter c of d (idle: timeout_ns measures a stall, tm_counter_wait_idle); steps: the
 * caller is a kernel of d that may step its CTs. */
static int ctr_wait(gice_device_t *d, uint32_t c, tm_cmp_t cmp, uint64_t v, uint64_t timeout_ns, int idle,
		    int steps, uint64_t *seen)
{
	struct stepper st = {d, 0};
	/* A stepping waiter spins as long as a CT would (it does the CT's work meanwhile: the CT
	 * threads leave it the cores), and asleep still steps every millisecond, so that its own
	 * requests move even when every CT thread is stalled. */
	tm_poll_t poll = {step_poll, step_done, &st, 1000000};
	uint64_t spin = steps ? GICE_MAX(api_g.spin_ns, ct_engine_spin_ns(d->ct)) : api_g.spin_ns;

	int rc = tm_counter_wait_poll(d->tm, c, cmp, v, timeout_ns, idle, spin, steps ? &poll : NULL, seen);
	/* a stall: the watchdog's verdict first, which may fail what this waits on (a lost peer);
	 * a wait's own timeout: the same when the watchdog thread is late, and then one more look */
	if (rc == GICE_ERR_TIMED_OUT && (idle ? api_watch_now(d) : api_watch_if_late(d)))
		rc = tm_counter_wait_poll(d->tm, c, cmp, v, idle ? timeout_ns : 1, idle, spin, steps ? &poll : NULL,
					  seen);
	return rc;
}

/* A wait. timeout_ns 0: GICE_TIMEOUT_MS without progress (a stall: an error, logged as one);
 * else at most timeout_ns (the caller's choice: a timed-out poll is logged at debug). A wait
 * ended by the device's abort names why once, at the abort. */
static int wait_counter(gice_device_t *d, gice_counter_t c, gice_cmp_t cmp, uint64_t target, uint64_t timeout_ns,
			int steps, uint64_t *found, uint32_t kind, const char *who)
{
	uint64_t seen = 0, t = timeout_ns ? timeout_ns : api_g.idle_ns;
	uint64_t t0 = d->evs ? gice_now_ns() : 0; /* GICE_STATS, GICE_TRACE: the waiter's stage */
	int rc;

	if (!api_ctr_ok(d, c) || (unsigned)cmp > GICE_CMP_LE)
		return GICE_ERR_INVALID;
	rc = ctr_wait(d, c, (tm_cmp_t)cmp, target, t, !timeout_ns, steps, &seen);
	if (t0 && rc == GICE_OK)
		api_ev_wait(d, kind, c, target, t0, gice_now_ns(), 0, rc);
	tm_counter_state_t cs;
	if (rc == GICE_ERR_TIMED_OUT && (tm_counter_get(d->tm, c, &cs), cs.fail))
		gice_debug("api", "%s on device %u counter %u: it records a failure (%s; the watchdog said why)", who,
			   d->gid, c, gice_status_name(cs.status));
	else if (rc == GICE_ERR_TIMED_OUT)
		gice_log(timeout_ns ? GICE_LOG_DEBUG : GICE_LOG_ERROR, "api",
			 "%s on device %u counter %u timed out: %s %llu ms: expected value %s %llu, found %llu", who,
			 d->gid, c, timeout_ns ? "waited" : "no progress for", (unsigned long long)(t / 1000000),
			 cmp_names[cmp], (unsigned long long)target, (unsigned long long)seen);
	else if (rc && rc == tm_region_status(d->tm))
		gice_debug("api", "%s on device %u counter %u: device aborted (%s): %s", who, d->gid, c,
			   gice_status_name(rc), api_error_text(d));
	if (found)
		*found = seen;
	return rc;
}

int gice_counter_wait(gice_device_t *d, gice_counter_t c, gice_cmp_t cmp, uint64_t target, uint64_t timeout_ms,
		      uint64_t *found)
{
	return wait_counter(d, c, cmp, target, timeout_ms * 1000000ull, 0, found, API_EV_WAIT_HOST,
			    "gice_counter_wait");
}

/* ---------------------------------------------------------------- operations */

/* An operation that fails before it reaches a CT fails its completion counter too, with the
 * status the call returns: a kernel (or host thread) waiting on the completion sees the failure
 * instead of timing out. Not when the completion counter is itself the bad id (or none). Returns
 * status. */
int api_op_fail_now(gice_device_t *d, uint32_t completion, int status)
{
	if (status < 0 && completion >= d->n_cts && completion < tm_region_layout(d->tm)->n_counters)
		tm_counter_fail(d->tm, completion, status);
	return status;
}

static int op_to_req(gice_device_t *d, const gice_op_t *op, ct_req_t *r)
{
	uint64_t off = 0;

	memset(r, 0, sizeof(*r));
	r->counter = op->completion;
	r->conn = (uint16_t)op->conn;
	r->rkey = op->rkey;
	r->roff = op->roff;
	r->value = op->value;
	r->compare = op->compare;
	r->len = op->bytes;
	r->sig_id = op->signal;
	if (op->completion != GICE_NO_COUNTER && !api_ctr_ok(d, op->completion))
		return GICE_ERR_INVALID;
	switch (op->type) {
	case GICE_OP_PUT:
	case GICE_OP_GET:
		r->op = op->type == GICE_OP_PUT ? CT_OP_PUT : CT_OP_GET;
		if (op->bytes && api_dev_off(d, op->local, &off)) {
			gice_error("api", "%s of %zu bytes: local buffer %p is not device %u memory",
				   op->type == GICE_OP_PUT ? "put" : "get", op->bytes, op->local, d->gid);
			return GICE_ERR_UNREGISTERED;
		}
		if (op->type == GICE_OP_PUT && op->signal != GICE_NO_COUNTER) {
			r->flags |= CT_RF_SIGNAL;
			if (op->signal_flags & GICE_SIGNAL_ADD)
				r->flags |= CT_RF_SIG_ADD;
			if (op->signal_flags & GICE_SIGNAL_STRONG)
				r->flags |= CT_RF_STRONG;
		}
		break;
	case GICE_OP_ATOMIC_ADD:
	case GICE_OP_ATOMIC_CSWAP:
		r->op = op->type == GICE_OP_ATOMIC_ADD ? CT_OP_AMO_FADD : CT_OP_AMO_CSWAP;
		if (!op->local)
			r->flags |= CT_RF_NO_RESULT;
		else if (api_dev_off(d, op->local, &off)) {
			gice_error("api", "atomic result %p is not device %u memory", op->local, d->gid);
			return GICE_ERR_UNREGISTERED;
		}
		break;
	case GICE_OP_COUNTER_ADD:
	case GICE_OP_COUNTER_SET:
		r->op = op->type == GICE_OP_COUNTER_ADD ? CT_OP_CTR_ADD : CT_OP_CTR_SET;
		if (!api_ctr_ok(d, op->signal))
			return GICE_ERR_INVALID;
		break;
	case GICE_OP_FILE_READ:
	case GICE_OP_FILE_WRITE:
	case GICE_OP_FILE_OPEN:
	case GICE_OP_FILE_CLOSE:
	case GICE_OP_FILE_SYNC:
		return api_file_req(d, op, r); /* api_storage.c */
	default:
		gice_error("api", "unknown operation type %d", (int)op->type);
		return GICE_ERR_INVALID;
	}
	r->src_off = off;
	return GICE_OK;
}

/* Push a request into the connection's CT queue (the SM → CT path: memory and a doorbell). */
int api_push_req(gice_device_t *d, ct_req_t *r, int by_kernel, const char *who)
{
	uint32_t ct = (r->op == CT_OP_CTR_ADD || r->op == CT_OP_CTR_SET || r->op == CT_OP_NOP)
			      ? 0 : ct_for_conn(d->ct, r->conn);
	uint64_t ticket, deadline = 0;
	unsigned spins = 0;
	int rc;

	if ((rc = tm_region_status(d->tm))) /* aborted: nothing new starts */
		return api_op_fail_now(d, r->counter, rc);
	uint64_t now = gice_now_ns();
	if (!r->t_issue) /* host mode: the kernel's call stamped it */
		r->t_issue = now;
	int steps = by_kernel && api_kernel_steps(d);
	while ((rc = tm_queue_put(d->tm, ct, r, sizeof(*r), &ticket)) == GICE_ERR_AGAIN) {
		now = 0; /* the time has moved on */
		/* queue full: the CT is behind; wait for room, not forever */
		if (!deadline)
			deadline = gice_now_ns() + api_g.timeout_ns;
		if (gice_now_ns() > deadline) {
			gice_error("api", "%s on device %u: CT %u request queue full for %llu ms", who, d->gid, ct,
				   (unsigned long long)(api_g.timeout_ns / 1000000));
			return api_op_fail_now(d, r->counter, GICE_ERR_TIMED_OUT);
		}
		if (steps && ct_engine_step(d->ct))
			continue;
		if ((++spins & 15) == 0)
			sched_yield();
		else
			gice_cpu_relax();
	}
	if (rc == GICE_OK) {
		if (steps) {
			/* onto the link now, on this thread. It takes the request up within a few
			 * hundred ns of the stamp above: its pickup and transmission reuse the stamp
			 * (one clock read per put instead of three, common.h). Nothing in the step
			 * waits, so no deadline sees a held clock. */
			int hold = now && !gice_clock_held;
			if (hold)
				gice_clock_held = now;
			ct_engine_submitted(d->ct, ct);
			if (hold)
				gice_clock_release();
		} else
			tm_doorbell_ring(d->tm, ct);
	}
	return api_op_fail_now(d, r->counter, rc);
}

int gice_post(gice_device_t *d, const gice_op_t *op)
{
	ct_req_t r;
	int rc = op_to_req(d, op, &r);

	/* api_push_req fails the completion itself (it also runs for a host-mode kernel's ops) */
	return rc ? api_op_fail_now(d, op->completion, rc) : api_push_req(d, &r, 0, "gice_post");
}

int gice_arm(gice_device_t *d, gice_trigger_t trig, uint64_t threshold, uint64_t period, const gice_op_t *op,
	     gice_desc_t *desc)
{
	ct_req_t r;
	int rc;

	if (!api_ctr_ok(d, trig))
		return GICE_ERR_INVALID;
	if ((rc = op_to_req(d, op, &r)))
		return rc;
	return ct_arm(d->ct, trig, threshold, period, &r, desc);
}

int gice_disarm(gice_device_t *d, gice_desc_t desc) { return ct_disarm(d->ct, desc); }

/* Wait until every operation issued on d so far (queued and fired by armed descriptors) has
 * completed, then report the first failure since the last quiet. timeout_ns as wait_counter. */
static int quiet(gice_device_t *d, uint64_t timeout_ns, int steps, const char *who)
{
	ct_quiet_point_t pts[CT_QUIET_POINTS(TM_MAX_CTS)];
	uint32_t n = ct_quiet_points(d->ct, pts);
	uint64_t t = timeout_ns ? timeout_ns : api_g.idle_ns;
	int rc = tm_region_status(d->tm);

	if (rc) /* aborted: what is outstanding will not all complete */
		return rc;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t seen = 0;
		rc = ctr_wait(d, pts[i].counter, TM_CMP_GE, pts[i].upto, t, !timeout_ns, steps, &seen);
		if (rc == GICE_ERR_TIMED_OUT) {
			gice_log(timeout_ns ? GICE_LOG_DEBUG : GICE_LOG_ERROR, "api",
				 "%s on device %u: CT %u has completed %llu of %llu %s operations: %s %llu ms", who, d->gid,
				 i / 2, (unsigned long long)seen, (unsigned long long)pts[i].upto,
				 i % 2 ? "fired" : "queued", timeout_ns ? "waited" : "no progress for",
				 (unsigned long long)(t / 1000000));
			return rc;
		}
		if (rc) {
			gice_debug("api", "%s on device %u: device aborted (%s): %s", who, d->gid, gice_status_name(rc),
				   api_error_text(d));
			return rc;
		}
	}
	if ((rc = ct_failure_take(d->ct)))
		gice_debug("api", "%s on device %u: an operation failed since the last quiet: %s", who, d->gid,
			   gice_status_name(rc));
	return rc;
}

int gice_device_quiet(gice_device_t *d, uint64_t timeout_ms)
{
	return quiet(d, timeout_ms * 1000000ull, 0, "gice_device_quiet");
}

/* ---------------------------------------------------------------- device side */

/* A kernel's trigger write. The watching CTs are marked without being rung; a kernel that may
 * step then takes each as it takes the CT of a request it queued (ct_engine_submitted: the
 * step fires what is due, its puts go onto the link without a fabric poll, a CT held elsewhere
 * is rung), else each is rung. A ring that finds a CT thread asleep on its doorbell costs a
 * futex wake-up (~1.4 us on a 2-vCPU VM) before the kernel could even wait: gice-bench
 * trigger's busy-sms row took 1.4 us instead of 0.11 in about 1 run of 10 when the CT thread
 * had gone to sleep beside the computing SMs. */
static void trigger_write(gice_kctx_t *k, gice_trigger_t t, uint64_t v, int add)
{
	gice_device_t *d = k->dev;

	if (!api_ctr_ok(d, t))
		return;
	int steps = api_kernel_steps(d);
	for (uint32_t m = tm_counter_write_quiet(d->tm, t, v, add); m; m &= m - 1) {
		uint32_t ct = (uint32_t)__builtin_ctz(m);
		if (steps)
			ct_engine_submitted(d->ct, ct);
		else
			tm_doorbell_ring(d->tm, ct);
	}
}

void gice_trigger_store(gice_kctx_t *k, gice_trigger_t t, uint64_t v) { trigger_write(k, t, v, 0); }

void gice_trigger_add(gice_kctx_t *k, gice_trigger_t t, uint64_t v) { trigger_write(k, t, v, 1); }

/* A kernel's request: to its CT now (device mode), or to the host proxy at the kernel's end. */
static int kernel_req(gice_kctx_t *k, ct_req_t *r, const char *who)
{
	if (k->dev->host_mode && k->launch)
		return api_op_fail_now(k->dev, r->counter, api_launch_defer(k, r));
	return api_push_req(k->dev, r, 1, who);
}

int gice_issue(gice_kctx_t *k, const gice_op_t *op)
{
	ct_req_t r;
	int rc = op_to_req(k->dev, op, &r);

	return rc ? api_op_fail_now(k->dev, op->completion, rc) : kernel_req(k, &r, "device op");
}

int gice_put(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, const void *src, size_t bytes,
	     gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn, .local = (void *)src, .bytes = bytes, .rkey = rkey,
			.roff = roff, .signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_put_signal(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, const void *src,
		    size_t bytes, gice_counter_t sig, uint64_t value, int signal_flags, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn, .local = (void *)src, .bytes = bytes, .rkey = rkey,
			.roff = roff, .value = value, .signal = sig, .signal_flags = signal_flags,
			.completion = completion};
	return gice_issue(k, &op);
}

int gice_get(gice_kctx_t *k, gice_conn_t conn, void *dst, uint64_t rkey, uint64_t roff, size_t bytes,
	     gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_GET, .conn = conn, .local = dst, .bytes = bytes, .rkey = rkey, .roff = roff,
			.signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_atomic_fetch_add(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, uint64_t value,
			  uint64_t *result, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_ATOMIC_ADD, .conn = conn, .local = result, .rkey = rkey, .roff = roff,
			.value = value, .signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_atomic_cswap(gice_kctx_t *k, gice_conn_t conn, uint64_t rkey, uint64_t roff, uint64_t compare,
		      uint64_t value, uint64_t *result, gice_completion_t completion)
{
	gice_op_t op = {.type = GICE_OP_ATOMIC_CSWAP, .conn = conn, .local = result, .rkey = rkey, .roff = roff,
			.value = value, .compare = compare, .signal = GICE_NO_COUNTER, .completion = completion};
	return gice_issue(k, &op);
}

int gice_wait_until(gice_kctx_t *k, gice_counter_t c, gice_cmp_t cmp, uint64_t value, uint64_t timeout_us,
		    uint64_t *found)
{
	int rc = api_launch_flush(k);

	uint64_t seen = 0;

	if (!rc)
		rc = wait_counter(k->dev, c, cmp, value, timeout_us * 1000ull, api_kernel_steps(k->dev), &seen,
				  API_EV_WAIT_KERNEL, "gice_wait_until");
	/* a failure reaches the host through the kernel's stream, but a poll that timed out at the
	 * caller's own timeout is the caller's business */
	if (rc && !(rc == GICE_ERR_TIMED_OUT && timeout_us))
		api_kernel_failed(k, rc, "gice_wait_until(counter %u %s %llu) found %llu", c,
				  (unsigned)cmp <= GICE_CMP_LE ? cmp_names[cmp] : "?", (unsigned long long)value,
				  (unsigned long long)seen);
	if (found)
		*found = seen;
	return rc;
}

int gice_fence(gice_kctx_t *k, gice_conn_t conn)
{
	ct_req_t r = {.op = CT_OP_FENCE, .conn = (uint16_t)conn, .counter = TM_NONE};

	return kernel_req(k, &r, "gice_fence");
}

int gice_quiet(gice_kctx_t *k)
{
	int rc = api_launch_flush(k);

	if (!rc)
		rc = quiet(k->dev, 0, api_kernel_steps(k->dev), "gice_quiet");
	if (rc)
		api_kernel_failed(k, rc, "gice_quiet");
	return rc;
}

