/* api_ev.h: the stages that happen outside the CT engine — a waiter waking, a stream's waits and
 * writes, a collective's chunks — recorded where they happen into a ring per device, for
 * GICE_STATS (percentiles, api_obs.c) and GICE_TRACE (slices, api_trace.c).
 *
 * The ring exists only when GICE_STATS or GICE_TRACE is on (d->evs, else NULL: recording is then
 * one untaken branch). Writers are the device's SM threads, its stream threads and host threads:
 * each takes a slot with one relaxed fetch_add on the device's index and fills it — no lock, no
 * syscall. The ring keeps the last API_EVS records; it is read when the device closes (its SM
 * and stream threads joined) or at gice_finalize, after the writers. */
#ifndef GICE_API_EV_H
#define GICE_API_EV_H

#include <stdatomic.h>
#include <stdint.h>

#define API_EVS 4096u

/* kind, its name in the trace; t[0..3] per kind:
 *   WAIT_*: t0 the wait began, t1 the counter's last write seen when it woke (the completion it
 *           waited on; before t0 when the value was there already), t2 the waiter woke.
 *   STREAM_WRITE: t0 the stream reached it, t2 the counter written (t1 = t2).
 *   CHUNK_*: t0 the chunk's signal counter last changed when its block woke (its arrival; a later
 *           chunk's when several had landed), t1 the block woke, t2 it had reduced the chunk
 *           (t1 for an allgather chunk: no reduction), t3 it had sent the result on. */
#define API_EV_LIST(X)                                  \
	X(API_EV_WAIT_HOST, "host wait")                \
	X(API_EV_WAIT_KERNEL, "kernel wait")            \
	X(API_EV_WAIT_STREAM, "stream wait")            \
	X(API_EV_STREAM_WRITE, "stream write")          \
	X(API_EV_CHUNK_RS, "reduce-scatter chunk")      \
	X(API_EV_CHUNK_AG, "allgather chunk")

enum api_ev_kind {
#define API_EV_ENUM_(name, str) name,
	API_EV_LIST(API_EV_ENUM_)
#undef API_EV_ENUM_
	API_EV_KINDS
};

typedef struct {
	uint32_t kind;    /* enum api_ev_kind */
	uint32_t counter; /* WAIT_*, STREAM_WRITE: the counter; CHUNK_*: the signal counter */
	uint32_t a, b;    /* WAIT_STREAM, STREAM_WRITE: stream id, -; CHUNK_*: ring step, chunk */
	uint64_t value;   /* WAIT_*: the value awaited; STREAM_WRITE: the value written */
	uint64_t t[4];
	int32_t status; /* WAIT_STREAM: how the wait ended */
	uint32_t pad;
} api_ev_t;

/* The name of kind, "?" out of range. */
const char *api_ev_name(uint32_t kind);

#endif
