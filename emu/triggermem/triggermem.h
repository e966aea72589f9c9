/* triggermem.h: trigger memory of one device — counters, CT doorbells and CT request queues in
 * one memfd-backed shared region that other processes may map.
 *
 * A *counter* is one cache line holding a 64-bit success count (the trigger word), a failure
 * count, the last status and a timestamp. A trigger word and a completion record are both
 * counters, so a completion can trigger another operation (chaining). Every write bumps the
 * counter's futex word and wakes sleepers; if a CT watches the counter, the write also sets the
 * counter's bit in that CT's dirty bitmap and rings the CT's doorbell.
 *
 * Layout (offsets, never pointers; see tm_layout_t): header | state | counters | doorbells |
 * dirty bitmaps | request queues. Futexes are shared (not FUTEX_PRIVATE): waits work across processes.
 * Thread safety: every tm_counter_* and tm_queue_push call is safe from any thread or process;
 * tm_queue_pop and tm_dirty_take are for the single CT that owns the queue / bitmap.
 */
#ifndef GICE_TRIGGERMEM_H
#define GICE_TRIGGERMEM_H

#include <stdint.h>

#include "emu/common/common.h"
#include "emu/common/config.h"

#define TM_MAX_CTS 32          /* watch mask is 32 bits */
#define TM_SLOT_BYTES 128      /* one request queue slot */
#define TM_REQ_MAX_BYTES 120   /* payload of a slot; the last 8 bytes are the slot sequence */
#define TM_NONE UINT32_MAX     /* "no counter" */

typedef struct tm_region tm_region_t; /* process-local handle */

typedef struct {
	uint32_t n_counters;  /* counters, multiple of 64, >= 64 */
	uint32_t n_cts;       /* doorbells, dirty bitmaps and request queues, 1..TM_MAX_CTS */
	uint32_t queue_depth; /* slots per request queue, power of two */
} tm_layout_t;

typedef enum { TM_CMP_EQ, TM_CMP_NE, TM_CMP_GT, TM_CMP_GE, TM_CMP_LT, TM_CMP_LE } tm_cmp_t;

typedef struct {
	uint64_t value;  /* success count */
	uint64_t fail;   /* failure count */
	int32_t status;  /* last status recorded (GICE_OK if none failed) */
	uint64_t ts_ns;  /* CLOCK_MONOTONIC time of the last change */
} tm_counter_state_t;

/* Region life cycle. create: new memfd of the given layout, zeroed, header written; name shows
 * in /proc/PID/fd. attach: map a region created elsewhere (fd from another process), checking
 * magic, version and size: GICE_ERR_INVALID with the values found otherwise. attach keeps its
 * own duplicate of fd (the caller may close fd); create's fd is close-on-exec. */
int tm_region_create(const tm_layout_t *layout, const char *name, tm_region_t **out);
int tm_region_attach(int fd, tm_region_t **out);
void tm_region_destroy(tm_region_t *r);
int tm_region_fd(const tm_region_t *r);
const tm_layout_t *tm_region_layout(const tm_region_t *r);

/* Counter ids are allocated by the process that created the region. Ids 0..n_cts-1 are reserved:
 * counter c is "retired tickets of queue c" (see tm_queue_push). alloc: GICE_ERR_NO_MEMORY when
 * all are in use (message names n_counters). free: GICE_ERR_INVALID on a free or reserved id.
 * Both return GICE_ERR_UNSUPPORTED in a process that attached the region. */
int tm_counter_alloc(tm_region_t *r, uint32_t *id);
int tm_counter_free(tm_region_t *r, uint32_t id);
/* Allocate counter id itself (symmetric counters: the same id on every device). GICE_ERR_BUSY
 * when it is in use, GICE_ERR_INVALID when reserved or out of range. */
int tm_counter_alloc_at(tm_region_t *r, uint32_t id);
/* Whether counter id is in use: 1 if allocated (reserved ids included), 0 if free or out of
 * range; GICE_ERR_UNSUPPORTED in a process that attached the region (it cannot tell). Lock-free,
 * safe from any thread while host threads allocate and free: for the CT that validates an
 * arriving signal. */
int tm_counter_allocated(const tm_region_t *r, uint32_t id);

/* Writes. add/set change the success count; fail adds one failure and records status. All
 * bump the futex word, wake waiters, and notify watching CTs. id must be valid (not checked on
 * this path beyond an assert). */
void tm_counter_add(tm_region_t *r, uint32_t id, uint64_t v);
void tm_counter_set(tm_region_t *r, uint32_t id, uint64_t v);
void tm_counter_fail(tm_region_t *r, uint32_t id, int status);
/* add (add != 0) or set, for a writer that then runs the watching CTs' step itself: their dirty
 * bits are set but their doorbells not rung. Returns the mask of the CTs watching the counter:
 * the caller must ring each of them it does not step (tm_doorbell_ring). */
uint32_t tm_counter_write_quiet(tm_region_t *r, uint32_t id, uint64_t v, int add);
/* Set value, failure count and status back to zero/GICE_OK (host set-up only). */
void tm_counter_reset(tm_region_t *r, uint32_t id);

/* Reads. */
uint64_t tm_counter_read(const tm_region_t *r, uint32_t id);
void tm_counter_get(const tm_region_t *r, uint32_t id, tm_counter_state_t *st);
/* Wraparound-safe comparison of a counter value with v (GE/GT/LE/LT use the sign of the
 * 64-bit difference, as NCCL GIN and Portals do). */
int tm_cmp_ok(uint64_t value, tm_cmp_t cmp, uint64_t v);

/* Wait until cmp(value, v) holds: spin spin_ns, then sleep on the counter's futex.
 * Returns GICE_OK, or the counter's last status if its failure count is non-zero
 * (a failure ends every wait, as PtlCTWait does), or the region's abort status once it is
 * aborted (tm_region_abort) and the condition does not hold, or GICE_ERR_TIMED_OUT after
 * timeout_ns (UINT64_MAX: no timeout). *found (may be NULL) gets the last value seen in every
 * case. */
int tm_counter_wait(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t timeout_ns,
		    uint64_t spin_ns, uint64_t *found);

/* The same, but GICE_ERR_TIMED_OUT only after idle_ns with no progress: the clock restarts
 * whenever the counter changes or the device notes progress (tm_progress), so a wait behind a
 * long transfer that is moving does not time out; a stall still ends it. */
int tm_counter_wait_idle(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t idle_ns,
			 uint64_t spin_ns, uint64_t *found);

/* Either wait (idle: as tm_counter_wait_idle) with a helper run while it spins: poll->fn(arg)
 * returns > 0 when it moved something (the spin phase restarts: the answer may be near), 0
 * otherwise; poll->done(arg) (may be NULL) runs when the wait stops polling (before it sleeps,
 * or at the end). Asleep, the wait wakes every nap_ns (0: never) to poll once more (fn, then
 * done). A kernel's wait steps its device's CTs this way. */
typedef struct {
	int (*fn)(void *arg);
	void (*done)(void *arg);
	void *arg;
	uint64_t nap_ns;
} tm_poll_t;
int tm_counter_wait_poll(tm_region_t *r, uint32_t id, tm_cmp_t cmp, uint64_t v, uint64_t timeout_ns, int idle,
			 uint64_t spin_ns, const tm_poll_t *poll, uint64_t *found);

/* The device's health, shared by every process that maps the region.
 * abort: the first call records status (< 0; GICE_ERR_CANCELED if not) and returns GICE_OK;
 * later calls keep the status in force and return it. Every call wakes every wait in progress,
 * and every wait, then and later, ends with the status (a wait whose condition already holds
 * still succeeds). set_status: the same without the wake-up, for a caller that fails operations
 * first (their waiters wake with their own status recorded) and wakes the rest with abort.
 * status: GICE_OK until then (a closed device's reads GICE_ERR_CANCELED).
 * progress: the device moved (a packet arrived, an operation completed); cheap, rate-limited to
 * one store per millisecond. progress_ns: when it last did. waiting: waits asleep on its
 * counters now (each is bounded by its own timeout). */
int tm_region_abort(tm_region_t *r, int status);
int tm_region_set_status(tm_region_t *r, int status);
int tm_region_status(const tm_region_t *r);
void tm_progress(tm_region_t *r);
uint64_t tm_progress_ns(const tm_region_t *r);
uint32_t tm_waiting(const tm_region_t *r);

/* Watching: CT ct wants to hear about writes to counter id (it has armed work on it). */
void tm_counter_watch(tm_region_t *r, uint32_t id, uint32_t ct, int on);

/* CT side: take up to max dirty counter ids of CT ct (clearing their bits). Returns the count. */
uint32_t tm_dirty_take(tm_region_t *r, uint32_t ct, uint32_t *ids, uint32_t max);
/* Mark a counter dirty for ct and ring its doorbell (used when arming an already-due counter). */
void tm_dirty_mark(tm_region_t *r, uint32_t ct, uint32_t id);

/* Doorbells, one per CT. ring: bump the sequence and wake the CT if it sleeps. The CT reads the
 * sequence, looks for work, and if there is none sleeps while the sequence is unchanged:
 * tm_doorbell_sleep returns at a ring, at timeout_ns (GICE_ERR_TIMED_OUT) or spuriously. */
int tm_doorbell_ring(tm_region_t *r, uint32_t ct); /* 1: it woke the CT's sleeping thread */
uint32_t tm_doorbell_seq(const tm_region_t *r, uint32_t ct);
int tm_doorbell_sleep(tm_region_t *r, uint32_t ct, uint32_t seen_seq, uint64_t timeout_ns);
/* The same, asleep in poll() on fd (a fabric's wait fd: a packet arriving wakes it) and on an
 * eventfd that rings from this process write; a ring from another process reaches it only at
 * the timeout (millisecond resolution). For the CT that sleeps for its device's link. */
int tm_doorbell_sleep_fd(tm_region_t *r, uint32_t ct, uint32_t seen_seq, int fd, uint64_t timeout_ns);
/* Work that needs no ring while someone is awake to find it (packets arriving for a device: its
 * link is polled by whoever is awake). awake: delta (+1/-1) threads of this process or another
 * that look for the CT's work without being rung; one that goes to sleep subtracts itself, then
 * looks once more, then sleeps. kick: count n more pieces of work published (packets sent to the
 * device), then ring only when no one is awake (seq_cst pairs the kick's count and load with the
 * leaver's subtraction and last look). The work may be published just after the kick, if the
 * kicker then nudges (tm_doorbell_nudge, after a seq_cst fence): a leaver whose last look came
 * too early is then found gone, and rung; meanwhile a thread that looks finds a piece counted
 * and not there yet, and looks on. A kick of 0
 * pieces is a poke (the sender needs the CT to make progress: look even if nothing is counted)
 * and is counted in pokes. sent, pokes: the counts so far (wrapping): a thread that has taken
 * in exactly sent pieces and seen every poke need not look (a leaver needs no last look: a
 * piece or poke counted after its subtraction finds no one awake and rings). */
void tm_doorbell_awake(tm_region_t *r, uint32_t ct, int delta);
uint32_t tm_doorbell_awake_n(const tm_region_t *r, uint32_t ct); /* threads awake now */
/* A lease is the promise of a thread that is neither awake nor asleep but busy nearby (a kernel
 * issuing requests) to look for the CT's work of its own before the lease ends (gice_now_ns
 * time). lease: extend it to now_ns + len_ns (a store only when that moves it by more than
 * len_ns / 2). kick: with no one awake and a lease running, it rings nothing and returns the
 * lease's end; the kicker calls tm_doorbell_nudge then (or later), which rings unless someone is
 * awake or a lease runs (again: it returns the new end, to nudge at). Both return 0 when nothing
 * is left to do, and set *woke (may be NULL) to tm_doorbell_ring's result. A lease that lapses
 * unkept delays a kick by its length, but loses none: the kicker nudges until one rings or
 * someone is awake. */
void tm_doorbell_lease(tm_region_t *r, uint32_t ct, uint64_t now_ns, uint64_t len_ns);
uint64_t tm_doorbell_lease_end(const tm_region_t *r, uint32_t ct); /* 0: never leased */
uint64_t tm_doorbell_kick(tm_region_t *r, uint32_t ct, uint32_t n, int *woke);
/* Take back n pieces a kick counted whose publication failed (a sender counts its packets just
 * before the provider takes them: ct_bundle_flush). */
void tm_doorbell_unsent(tm_region_t *r, uint32_t ct, uint32_t n);
uint64_t tm_doorbell_nudge(tm_region_t *r, uint32_t ct, int *woke);
uint32_t tm_doorbell_sent(const tm_region_t *r, uint32_t ct);
uint32_t tm_doorbell_pokes(const tm_region_t *r, uint32_t ct);

/* Request queue of CT ct: bounded multi-producer, single-consumer ring of TM_SLOT_BYTES slots.
 * push copies len (<= TM_REQ_MAX_BYTES) bytes, sets *ticket to the slot's ticket (queue order,
 * starting at 0) and rings the doorbell. It never blocks: GICE_ERR_AGAIN when the queue is full.
 * pop copies the head request into buf (TM_REQ_MAX_BYTES) and sets *ticket; returns 1, or 0 when
 * empty. prod: tickets handed out so far (for quiet: wait until counter ct reaches it). */
int tm_queue_push(tm_region_t *r, uint32_t ct, const void *req, uint32_t len, uint64_t *ticket);
/* push without the ring: for a producer that runs the CT's step itself right after (a kernel
 * stepping its device) and rings only if it could not. */
int tm_queue_put(tm_region_t *r, uint32_t ct, const void *req, uint32_t len, uint64_t *ticket);
int tm_queue_pop(tm_region_t *r, uint32_t ct, void *buf, uint64_t *ticket);
uint64_t tm_queue_prod(const tm_region_t *r, uint32_t ct);

/* GICE_TM_* parameters. */
extern const gice_param_t tm_params[];

#endif
