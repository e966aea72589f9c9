/* api_trace.c: GICE_TRACE=path — the samples of api_obs.c (each device's most recent network
 * operations from its CT engine's trace ring) written at gice_finalize as a Chrome/Perfetto
 * trace (Trace Event JSON, ui.perfetto.dev or chrome://tracing opens it).
 *
 * A process per rank (pid = rank), a track per device (tid = its global id) and one per stream
 * (tid (gid + 1) * 1000 + stream id) with its kernels as slices. Each operation is an async slice from its issue (the kernel's request or the trigger that fired it) to its
 * completion, named "put 8 B -> d1", holding nested slices for its stages: queued (issue ->
 * CT pickup), ct (pickup -> first packet handed to the fabric), wire+ack (first packet ->
 * completion written). A flow arrow leads from each operation's issue (a 1 ns slice on the
 * initiator's "issued" track) to the moment its request landed at the target (a 1 ns slice on
 * the target's "landed" track, in the target rank's file: merged, the arrows cross ranks).
 * The stage ring's records (api_ev.h) add a "waits" track per device (host and kernel waits,
 * each holding "written -> woke"), stream waits and writes on their stream's track, and a
 * "collective chunks" track per device (arrived -> woke, reduce, send per chunk).
 * Times are CLOCK_MONOTONIC in us, moved onto rank 0's clock by the offset the bootstrap
 * estimated (boot_clock: ~0 on one machine, whose ranks share that clock; otherData says the
 * offset and its bound), so gicerun --trace and scripts/gice-trace-merge can put several
 * ranks' files side by side as they are.
 * Nothing of this runs on the per-message path: the engine keeps its trace ring anyway, and
 * the stage ring costs a record where a stage happens (api_ev.h). */
#include "api/api_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define API_TRACE_ISSUED 900000u /* + gid: a device's issue points (flow tails) */
#define API_TRACE_LANDED 800000u /* + gid: requests that landed on it (flow heads) */
#define API_TRACE_WAITS  700000u /* + gid: host and kernel waits on its counters */
#define API_TRACE_CHUNKS 600000u /* + gid: its collectives' chunks */
#define API_TRACE_NAMED  1024u   /* tracks named so far, remembered to name each once */

static struct {
	uint32_t tid[API_TRACE_NAMED];
	uint32_t n;
} named;

/* Name track tid of this rank once (a thread_name metadata event); name is a format. */
__attribute__((format(printf, 3, 4))) static void track_name(FILE *f, uint32_t tid, const char *fmt, ...)
{
	char name[96];
	va_list ap;

	for (uint32_t i = 0; i < named.n; i++)
		if (named.tid[i] == tid)
			return;
	if (named.n < API_TRACE_NAMED)
		named.tid[named.n++] = tid;
	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":\"%s\"}}",
		api_g.rank, tid, name);
}

/* A time of this rank's clock on rank 0's (the offset boot_clock estimated; 0 stays 0). */
static uint64_t on0(uint64_t t) { return t ? t + (uint64_t)api_g.clock_offset_ns : 0; }

static const char *op_name(uint32_t op)
{
	static const char *const names[] = {"put", "get", "atomic"};
	return op < sizeof(names) / sizeof(names[0]) ? names[op] : "op";
}

/* One async begin or end event. */
static void ev(FILE *f, const char *ph, const char *name, uint64_t id, uint32_t tid, uint64_t t_ns, int *first)
{
	t_ns = on0(t_ns);
	fprintf(f, "%s\n{\"ph\":\"%s\",\"cat\":\"gice\",\"name\":\"%s\",\"id\":\"0x%llx\",\"pid\":%u,\"tid\":%u,"
		   "\"ts\":%llu.%03llu}",
		*first ? "" : ",", ph, name, (unsigned long long)id, api_g.rank, tid,
		(unsigned long long)(t_ns / 1000), (unsigned long long)(t_ns % 1000));
	*first = 0;
}

/* A stage slice from a to b, when both happened in that order. */
static void stage(FILE *f, const char *name, uint64_t id, uint32_t tid, uint64_t a, uint64_t b, int *first)
{
	if (!a || b < a)
		return;
	ev(f, "b", name, id, tid, a, first);
	ev(f, "e", name, id, tid, b, first);
}

/* The kernels of the streams destroyed so far: a track per stream (tid (gid + 1) * 1000 + its
 * id), each kernel a complete slice from its first block's start to its end as its stream saw
 * it. */
static void write_kernels(FILE *f)
{
	const api_kslice_t *k;
	const uint32_t *gid, *sid;
	uint32_t n = api_obs_kernels(&k, &gid, &sid);

	for (uint32_t i = 0; i < n; i++) {
		uint32_t tid = (gid[i] + 1) * 1000 + sid[i];
		track_name(f, tid, "device %u stream %u: kernels", gid[i], sid[i]);
		uint64_t dur = k[i].t_end > k[i].t_start ? k[i].t_end - k[i].t_start : 0, t0 = on0(k[i].t_start);
		fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"gice\",\"name\":\"kernel %u block%s%s\",\"pid\":%u,\"tid\":%u,"
			   "\"ts\":%llu.%03llu,\"dur\":%llu.%03llu,\"args\":{\"fn\":\"0x%llx\",\"status\":%d}}",
			k[i].nblocks, k[i].nblocks == 1 ? "" : "s", k[i].status ? " (failed)" : "", api_g.rank, tid,
			(unsigned long long)(t0 / 1000), (unsigned long long)(t0 % 1000),
			(unsigned long long)(dur / 1000), (unsigned long long)(dur % 1000), (unsigned long long)k[i].fn,
			k[i].status);
	}
}

/* A slice [a, b] in us: ts and dur fields. */
static void x_event(FILE *f, const char *name, uint32_t tid, uint64_t a, uint64_t b, const char *args)
{
	uint64_t d = b > a ? b - a : 0;

	a = on0(a);
	fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"gice-stage\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,"
		   "\"ts\":%llu.%03llu,\"dur\":%llu.%03llu%s%s%s}",
		name, api_g.rank, tid, (unsigned long long)(a / 1000), (unsigned long long)(a % 1000),
		(unsigned long long)(d / 1000), (unsigned long long)(d % 1000), args ? ",\"args\":{" : "",
		args ? args : "", args ? "}" : "");
}

/* An async begin/end pair of id on tid, [a, b], when both are known and in order. */
static void async_slice(FILE *f, const char *name, uint64_t id, uint32_t tid, uint64_t a, uint64_t b)
{
	if (!a || b < a)
		return;
	a = on0(a);
	b = on0(b);
	fprintf(f, ",\n{\"ph\":\"b\",\"cat\":\"gice-stage\",\"name\":\"%s\",\"id\":\"0x%llx\",\"pid\":%u,"
		   "\"tid\":%u,\"ts\":%llu.%03llu}",
		name, (unsigned long long)id, api_g.rank, tid, (unsigned long long)(a / 1000),
		(unsigned long long)(a % 1000));
	fprintf(f, ",\n{\"ph\":\"e\",\"cat\":\"gice-stage\",\"name\":\"%s\",\"id\":\"0x%llx\",\"pid\":%u,"
		   "\"tid\":%u,\"ts\":%llu.%03llu}",
		name, (unsigned long long)id, api_g.rank, tid, (unsigned long long)(b / 1000),
		(unsigned long long)(b % 1000));
}

/* The stage records (api_ev.h): host and kernel waits on each device's "waits" track (the wait,
 * and nested in it "written -> woke" when it had to wait: from the completion's write to the
 * waiter seeing it); stream waits and writes on their stream's track beside its kernels;
 * collective chunks on each device's "chunks" track ("arrived -> woke", "reduce", "send"
 * nested in the chunk). */
static void write_events(FILE *f)
{
	const api_ev_t *ev;
	const uint32_t *gid;
	uint32_t n = api_obs_events(&ev, &gid);
	char name[96], args[96];

	for (uint32_t i = 0; i < n; i++) {
		const api_ev_t *e = &ev[i];
		uint64_t id = 1ull << 62 | (uint64_t)api_g.rank << 32 | i;
		uint32_t tid;
		switch (e->kind) {
		case API_EV_WAIT_HOST:
		case API_EV_WAIT_KERNEL:
			tid = API_TRACE_WAITS + gid[i];
			track_name(f, tid, "device %u: waits", gid[i]);
			snprintf(name, sizeof(name), "%s c%u >= %llu", api_ev_name(e->kind), e->counter,
				 (unsigned long long)e->value);
			async_slice(f, name, id, tid, e->t[0], e->t[2]);
			if (e->t[1] >= e->t[0])
				async_slice(f, "written -> woke", id, tid, e->t[1], e->t[2]);
			break;
		case API_EV_WAIT_STREAM:
		case API_EV_STREAM_WRITE:
			tid = (gid[i] + 1) * 1000 + e->a;
			track_name(f, tid, "device %u stream %u: kernels", gid[i], e->a);
			snprintf(name, sizeof(name), "%s c%u (%llu)%s", api_ev_name(e->kind), e->counter,
				 (unsigned long long)e->value, e->status ? " (failed)" : "");
			snprintf(args, sizeof(args), "\"written_us\":%llu.%03llu", (unsigned long long)(on0(e->t[1]) / 1000),
				 (unsigned long long)(on0(e->t[1]) % 1000));
			x_event(f, name, tid, e->t[0], e->t[2], args);
			if (e->kind == API_EV_WAIT_STREAM && e->t[1] >= e->t[0] && e->t[1] <= e->t[2])
				x_event(f, "written -> woke", tid, e->t[1], e->t[2], NULL);
			break;
		case API_EV_CHUNK_RS:
		case API_EV_CHUNK_AG:
			tid = API_TRACE_CHUNKS + gid[i];
			track_name(f, tid, "device %u: collective chunks", gid[i]);
			snprintf(name, sizeof(name), "%s step %u #%u", api_ev_name(e->kind), e->a, e->b);
			async_slice(f, name, id, tid, e->t[0], e->t[3]);
			async_slice(f, "arrived -> woke", id, tid, e->t[0], e->t[1]);
			if (e->kind == API_EV_CHUNK_RS)
				async_slice(f, "reduce", id, tid, e->t[1], e->t[2]);
			async_slice(f, "send", id, tid, e->t[2], e->t[3]);
			break;
		}
	}
}

/* A flow's id: the message, by its source device and its id towards the target. */
static uint64_t flow_id(uint32_t src_gid, uint32_t msg_id)
{
	return 1ull << 63 | (uint64_t)src_gid << 32 | msg_id; /* apart from the slices' ids */
}

/* A 1 ns slice on track tid at t (flows bind to slices of a thread track), with a flow event
 * ph ("s" leaving it, "f" arriving at it) of id. */
static void flow_point(FILE *f, const char *name, uint32_t tid, uint64_t t, const char *ph, uint64_t id)
{
	t = on0(t);
	fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"gice\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":%llu.%03llu,"
		   "\"dur\":0.001}",
		name, api_g.rank, tid, (unsigned long long)(t / 1000), (unsigned long long)(t % 1000));
	fprintf(f, ",\n{\"ph\":\"%s\",%s\"cat\":\"gice-flow\",\"name\":\"message\",\"id\":\"0x%llx\",\"pid\":%u,"
		   "\"tid\":%u,\"ts\":%llu.%03llu}",
		ph, ph[0] == 'f' ? "\"bp\":\"e\"," : "", (unsigned long long)id, api_g.rank, tid,
		(unsigned long long)(t / 1000), (unsigned long long)(t % 1000));
}

/* Track names of a device's issue and landing points, once per device. */
static void flow_tracks(FILE *f, uint32_t gid)
{
	fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":"
		   "\"device %u: issued\"}}",
		api_g.rank, API_TRACE_ISSUED + gid, gid);
	fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":"
		   "\"device %u: landed\"}}",
		api_g.rank, API_TRACE_LANDED + gid, gid);
}

/* The requests that landed on this rank's devices: the arrow heads of the flows that the
 * initiators (in this file or another rank's) start at their issue. */
static void write_landed(FILE *f)
{
	const ct_rx_trace_t *rx;
	const uint32_t *gid;
	uint32_t n = api_obs_landed(&rx, &gid);

	for (uint32_t i = 0; i < n; i++)
		flow_point(f, "landed", API_TRACE_LANDED + gid[i], rx[i].t_landed, "f", flow_id(rx[i].src_gid, rx[i].msg_id));
}

void api_trace_write(const char *path)
{
	const ct_trace_t *tr;
	const uint32_t *gid;
	uint32_t n = api_obs_traces(&tr, &gid);
	char file[600], name[96];
	const char *dot = strrchr(path, '.');
	FILE *f;
	int first = 1;

	if (api_g.size > 1) /* one file per rank: PATH.json -> PATH.R.json */
		snprintf(file, sizeof(file), "%.*s.%u%s", (int)(dot && !strcmp(dot, ".json") ? dot - path : (long)strlen(path)),
			 path, api_g.rank, dot && !strcmp(dot, ".json") ? ".json" : "");
	else
		snprintf(file, sizeof(file), "%s", path);
	if (!(f = fopen(file, "w"))) {
		gice_error("api", "GICE_TRACE: cannot write %s: %m", file);
		return;
	}
	fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"clock\":\"CLOCK_MONOTONIC\",\"rank\":%u,"
		   "\"ranks\":%u,\"clock_aligned_to_rank0\":%s,\"clock_offset_ns\":%lld,\"clock_offset_bound_ns\":%llu},"
		   "\"traceEvents\":[",
		api_g.rank, api_g.size, api_g.clock_aligned ? "true" : "false", (long long)api_g.clock_offset_ns,
		(unsigned long long)api_g.clock_bound_ns);
	fprintf(f, "\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":\"rank %u\"}}", api_g.rank,
		api_g.rank);
	first = 0;
	for (uint32_t i = 0; i < n; i++) { /* a track name per device, once */
		uint32_t j = 0;
		while (j < i && gid[j] != gid[i])
			j++;
		if (j == i) {
			fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":"
				   "\"device %u: operations\"}}",
				api_g.rank, gid[i], gid[i]);
			flow_tracks(f, gid[i]);
		}
	}
	named.n = 0;
	write_kernels(f);
	write_events(f);
	write_landed(f);
	for (uint32_t i = 0; i < n; i++) {
		const ct_trace_t *t = &tr[i];
		uint64_t id = ((uint64_t)api_g.rank << 32) | i;
		if (!t->t_issue || t->t_complete < t->t_issue)
			continue;
		snprintf(name, sizeof(name), "%s %llu B -> d%u%s", op_name(t->op), (unsigned long long)t->bytes,
			 t->peer_gid, t->status ? " (failed)" : "");
		ev(f, "b", name, id, gid[i], t->t_issue, &first);
		stage(f, "queued", id, gid[i], t->t_issue, t->t_pickup, &first);
		stage(f, "ct", id, gid[i], t->t_pickup, t->t_first_tx, &first);
		stage(f, "wire+ack", id, gid[i], t->t_first_tx, t->t_complete, &first);
		ev(f, "e", name, id, gid[i], t->t_complete, &first);
		if (!t->status)
			flow_point(f, "issued", API_TRACE_ISSUED + gid[i], t->t_issue, "s", flow_id(gid[i], t->msg_id));
	}
	fprintf(f, "\n]}\n");
	if (fclose(f))
		gice_error("api", "GICE_TRACE: writing %s failed: %m", file);
}
