/* api_obs.c: what GICE_STATS prints beside the counters — per-stage latency percentiles of
 * the operations in the CT engines' trace rings (the most recent CT_TRACE_RING per device) and
 * of the waits and collective chunks in the devices' stage rings (api_ev.h, whose records it
 * also writes: api_ev_wait), and each CT thread's busy and CPU shares — and the GICE_STATS=json form
 * of all of it. The samples also feed GICE_TRACE (api_trace.c).
 *
 * Devices are sampled when they close and, for those still open, at gice_finalize; both under
 * api_g.lock (the watchdog's order: api_g.lock, then the engine's link lock). Nothing here runs
 * on the per-message path: the engine keeps its trace ring and busy time as it always does. */
#include "api/api_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OBS_TRACES 4096u /* operations kept across devices (the most recent per device) */
#define OBS_CTS 256u
#define OBS_KERNELS 8192u
#define OBS_EVS 8192u /* stage records (api_ev.h) kept across devices */

/* The stages: of the network operations (the CT engines' rings), then of the api_ev.h records:
 * a waiter (host, kernel or stream wait that had to wait) woke after the completion it awaited
 * was written; a collective's chunk arrived, woke its block, was reduced, was sent on. */
enum {
	OBS_PICKUP, OBS_WIRE, OBS_DONE, OBS_TOTAL,
	OBS_WOKE, OBS_CHUNK_WOKE, OBS_CHUNK_REDUCE, OBS_CHUNK_SEND,
	OBS_STAGES
};
static const char *const obs_stage_name[OBS_STAGES] = {
	"issue_to_pickup",  "pickup_to_first_tx",    "first_tx_to_complete",  "issue_to_complete",
	"complete_to_woke", "chunk_arrived_to_woke", "chunk_woke_to_reduced", "chunk_reduced_to_sent"};
#define OBS_SAMPLES (OBS_TRACES > OBS_EVS ? OBS_TRACES : OBS_EVS)

static struct {
	ct_trace_t tr[OBS_TRACES];
	uint32_t gid[OBS_TRACES]; /* the device of tr[i] */
	uint32_t n_tr;
	ct_rx_trace_t rx[OBS_TRACES]; /* requests that landed on the devices sampled */
	uint32_t rx_gid[OBS_TRACES];
	uint32_t n_rx;
	struct obs_ct {
		uint32_t gid, ct;
		uint64_t busy_ns, alive_ns, cpu_ns;
	} ct[OBS_CTS];
	uint32_t n_ct;
	api_kslice_t k[OBS_KERNELS]; /* GICE_TRACE: kernels of the streams destroyed so far */
	uint32_t k_gid[OBS_KERNELS], k_sid[OBS_KERNELS];
	uint32_t n_k;
	api_ev_t ev[OBS_EVS]; /* the devices' stage records (api_ev.h) */
	uint32_t ev_gid[OBS_EVS];
	uint32_t n_ev;
} obs;

const char *api_ev_name(uint32_t kind)
{
	static const char *const names[] = {
#define API_EV_NAME_(name, str) str,
		API_EV_LIST(API_EV_NAME_)
#undef API_EV_NAME_
	};
	return kind < API_EV_KINDS ? names[kind] : "?";
}

void api_ev_wait(gice_device_t *d, uint32_t kind, uint32_t c, uint64_t value, uint64_t t0, uint64_t t_woke,
		 uint32_t sid, int status)
{
	api_ev_t *e = api_ev_take(d);
	tm_counter_state_t cs;

	if (!e)
		return;
	tm_counter_get(d->tm, c, &cs);
	/* written after the waiter woke: a later write than the one it saw, which is unknown (0) */
	*e = (api_ev_t){.kind = kind, .counter = c, .a = sid, .value = value,
			.t = {t0, cs.ts_ns <= t_woke ? cs.ts_ns : 0, t_woke}, .status = status};
}

void api_obs_collect(gice_device_t *d)
{
	ct_trace_t tr[256];
	uint32_t n = ct_trace_read(d->ct, tr, 256);

	for (uint32_t i = 0; i < n && obs.n_tr < OBS_TRACES; i++) {
		obs.gid[obs.n_tr] = d->gid;
		obs.tr[obs.n_tr++] = tr[i];
	}
	ct_rx_trace_t rx[256];
	n = ct_rx_trace_read(d->ct, rx, 256);
	for (uint32_t i = 0; i < n && obs.n_rx < OBS_TRACES; i++) {
		obs.rx_gid[obs.n_rx] = d->gid;
		obs.rx[obs.n_rx++] = rx[i];
	}
	if (d->evs) { /* its SM and stream threads have ended, or (finalize) its writers are done */
		uint64_t end = atomic_load_explicit(&d->evs_n, memory_order_relaxed);
		for (uint64_t i = end - GICE_MIN(end, (uint64_t)API_EVS); i < end && obs.n_ev < OBS_EVS; i++) {
			obs.ev_gid[obs.n_ev] = d->gid;
			obs.ev[obs.n_ev++] = d->evs[i % API_EVS];
		}
	}
	for (uint32_t c = 0; c < d->n_cts && obs.n_ct < OBS_CTS; c++) {
		struct obs_ct *o = &obs.ct[obs.n_ct];
		if (ct_engine_ct_busy(d->ct, c, &o->busy_ns, &o->alive_ns, &o->cpu_ns) == GICE_OK) {
			o->gid = d->gid, o->ct = c;
			obs.n_ct++;
		}
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* part of whole, times unit (0 when whole is). */
static double share(uint64_t part, uint64_t whole, double unit)
{
	return whole ? unit * (double)part / (double)whole : 0.0;
}

/* v sorted, n > 0: the p-quantile in us. */
static double q_us(const uint64_t *v, uint32_t n, double p) { return (double)v[(uint32_t)(p * (n - 1) + 0.5)] / 1e3; }

/* The stage durations of the successful operations collected; n[k] of stage k. */
static void stages(uint64_t *v[OBS_STAGES], uint32_t n[OBS_STAGES])
{
	for (uint32_t i = 0; i < obs.n_tr; i++) {
		const ct_trace_t *t = &obs.tr[i];
		const uint64_t from[OBS_STAGES] = {t->t_issue, t->t_pickup, t->t_first_tx, t->t_issue};
		const uint64_t to[OBS_STAGES] = {t->t_pickup, t->t_first_tx, t->t_complete, t->t_complete};
		if (t->status)
			continue;
		for (int k = 0; k <= OBS_TOTAL; k++)
			if (from[k] && to[k] >= from[k])
				v[k][n[k]++] = to[k] - from[k];
	}
	for (uint32_t i = 0; i < obs.n_ev; i++) {
		const api_ev_t *e = &obs.ev[i];
		if (e->kind <= API_EV_WAIT_STREAM && !e->status && e->t[1] >= e->t[0] && e->t[2] >= e->t[1])
			v[OBS_WOKE][n[OBS_WOKE]++] = e->t[2] - e->t[1]; /* it had to wait: the wake-up */
		else if (e->kind == API_EV_CHUNK_RS || e->kind == API_EV_CHUNK_AG)
			for (int k = 0; k < 3; k++) /* an allgather chunk is not reduced: no sample */
				if (e->t[k] && e->t[k + 1] >= e->t[k] && (k != 1 || e->kind == API_EV_CHUNK_RS))
					v[OBS_CHUNK_WOKE + k][n[OBS_CHUNK_WOKE + k]++] = e->t[k + 1] - e->t[k];
	}
	for (int k = 0; k < OBS_STAGES; k++)
		qsort(v[k], n[k], sizeof(uint64_t), cmp_u64);
}

/* Append to line (size len, n used) and return the new n, never past the end. */
#define OBS_PUT(...)                                                                         \
	do {                                                                                 \
		int w_ = snprintf(line + n, len - n, __VA_ARGS__);                           \
		n = w_ < 0 ? n : GICE_MIN(len - 1, n + (size_t)w_);                         \
	} while (0)

static void print_text(char *line, size_t len, uint64_t *v[OBS_STAGES], const uint32_t cnt[OBS_STAGES])
{
	size_t n = 0;

	OBS_PUT("gice stats: rank %u: stages of its last %u operations and %u waits and chunks (us, p50/p99/max):",
		api_g.rank, obs.n_tr, obs.n_ev);
	for (int k = 0; k < OBS_STAGES; k++)
		if (cnt[k])
			OBS_PUT(" %s %.2f/%.2f/%.2f", obs_stage_name[k], q_us(v[k], cnt[k], 0.5), q_us(v[k], cnt[k], 0.99),
				q_us(v[k], cnt[k], 1));
		else
			OBS_PUT(" %s -", obs_stage_name[k]);
	fprintf(stderr, "%s\n", line);
	n = 0;
	OBS_PUT("gice stats: rank %u: CT busy share (the rest polling or asleep) / CPU share (spinning included):",
		api_g.rank);
	for (uint32_t i = 0; i < obs.n_ct; i++)
		OBS_PUT(" d%u.ct%u %.1f%%/%.1f%%", obs.ct[i].gid, obs.ct[i].ct,
			share(obs.ct[i].busy_ns, obs.ct[i].alive_ns, 100), share(obs.ct[i].cpu_ns, obs.ct[i].alive_ns, 100));
	fprintf(stderr, "%s\n", line);
}

static void print_json(char *line, size_t len, const gice_stats_t *t, uint64_t *v[OBS_STAGES],
		       const uint32_t cnt[OBS_STAGES])
{
	size_t n = 0;

	OBS_PUT("{\"rank\":%u,\"counters\":{", api_g.rank);
	const char *sep = "";
#define OBS_JSON_COUNTER(name, from, field, help)                                      \
	OBS_PUT("%s\"" #name "\":%llu", sep, (unsigned long long)t->name);             \
	sep = ",";
	GICE_STATS_LIST(OBS_JSON_COUNTER)
#undef OBS_JSON_COUNTER
	OBS_PUT("},\"operations\":%u,\"events\":%u,\"stages_us\":{", obs.n_tr, obs.n_ev);
	for (int k = 0; k < OBS_STAGES; k++) {
		OBS_PUT("%s\"%s\":{\"n\":%u", k ? "," : "", obs_stage_name[k], cnt[k]);
		if (cnt[k])
			OBS_PUT(",\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,\"max\":%.3f", q_us(v[k], cnt[k], 0.5),
				q_us(v[k], cnt[k], 0.9), q_us(v[k], cnt[k], 0.99), q_us(v[k], cnt[k], 1));
		OBS_PUT("}");
	}
	OBS_PUT("},\"cts\":[");
	for (uint32_t i = 0; i < obs.n_ct; i++)
		OBS_PUT("%s{\"device\":%u,\"ct\":%u,\"busy_ns\":%llu,\"alive_ns\":%llu,\"cpu_ns\":%llu,\"busy_share\":%.4f,"
			"\"cpu_share\":%.4f}",
			i ? "," : "", obs.ct[i].gid, obs.ct[i].ct, (unsigned long long)obs.ct[i].busy_ns,
			(unsigned long long)obs.ct[i].alive_ns, (unsigned long long)obs.ct[i].cpu_ns,
			share(obs.ct[i].busy_ns, obs.ct[i].alive_ns, 1), share(obs.ct[i].cpu_ns, obs.ct[i].alive_ns, 1));
	OBS_PUT("]}");
	fprintf(stderr, "%s\n", line);
}

void api_obs_collect_open(void)
{
	for (uint64_t i = 0; i < api_g.max_devices; i++)
		if (api_g.devs[i] && api_g.devs[i]->live)
			api_obs_collect(api_g.devs[i]);
}

uint32_t api_obs_traces(const ct_trace_t **tr, const uint32_t **gid)
{
	*tr = obs.tr;
	*gid = obs.gid;
	return obs.n_tr;
}

void api_obs_collect_kernels(const gice_stream_t *s, uint32_t sid)
{
	uint64_t n = GICE_MIN(s->ks_n, (uint64_t)API_KSLICES);

	pthread_mutex_lock(&api_g.lock);
	for (uint64_t i = s->ks_n - n; i < s->ks_n && obs.n_k < OBS_KERNELS; i++) {
		obs.k_gid[obs.n_k] = s->dev->gid;
		obs.k_sid[obs.n_k] = sid;
		obs.k[obs.n_k++] = s->ks[i % API_KSLICES];
	}
	pthread_mutex_unlock(&api_g.lock);
}

uint32_t api_obs_kernels(const api_kslice_t **k, const uint32_t **gid, const uint32_t **sid)
{
	*k = obs.k;
	*gid = obs.k_gid;
	*sid = obs.k_sid;
	return obs.n_k;
}

uint32_t api_obs_landed(const ct_rx_trace_t **rx, const uint32_t **gid)
{
	*rx = obs.rx;
	*gid = obs.rx_gid;
	return obs.n_rx;
}

uint32_t api_obs_events(const api_ev_t **ev, const uint32_t **gid)
{
	*ev = obs.ev;
	*gid = obs.ev_gid;
	return obs.n_ev;
}

void api_obs_reset(void) { obs.n_tr = obs.n_ct = obs.n_k = obs.n_rx = obs.n_ev = 0; }

void api_obs_print(const gice_stats_t *t, int json)
{
	static uint64_t buf[OBS_STAGES][OBS_SAMPLES];
	uint64_t *v[OBS_STAGES];
	uint32_t cnt[OBS_STAGES] = {0};
	size_t len = 8192 + (size_t)obs.n_ct * 96;
	char *line = malloc(len);

	for (int k = 0; k < OBS_STAGES; k++)
		v[k] = buf[k];
	stages(v, cnt);
	if (line && json)
		print_json(line, len, t, v, cnt);
	else if (line)
		print_text(line, len, v, cnt);
	free(line);
}
