/* ct_complete.c: what an operation's end writes — its completion counter (or failure), the
 * device's ops_done/ops_failed, the in-order retirement of its ticket (quiet), and its message
 * entry given back to its CT. An ACK completes many puts at once (ct_complete_upto): within a
 * batch (ct_adds_begin .. ct_adds_end) each of these is written once for all of them — a counter
 * add per counter, one advance of each retirement cursor, one push of the messages onto their
 * CT's return stack — instead of a locked write or two per put. */
#include "emu/ct_engine/ct_internal.h"

/* The batch this thread has open (ct_adds_begin), or NULL. */
static __thread ct_adds_t *adds_open;

static ct_adds_t *batch(const ct_engine_t *e)
{
	ct_adds_t *b = adds_open;

	return b && b->e == e ? b : NULL;
}

/* Push the chain first..last (linked by index + 1 in next, last's link set here) onto the return
 * stack of tile t (release: its owner sees our last writes to them). */
static void give_back(ct_engine_t *e, ct_tile_t *t, uint32_t first, uint32_t last)
{
	uint32_t old = atomic_load_explicit(&t->ret_head, memory_order_relaxed);

	do
		e->msgs[last].next = old; /* return-stack links are index + 1, 0 ends the list */
	while (!atomic_compare_exchange_weak_explicit(&t->ret_head, &old, first + 1, memory_order_release,
						      memory_order_relaxed));
}

/* Give a finished message back to its owner. CT-owned messages freed by the link holder go on
 * the owner's return stack (in a batch: all of one owner at once); the link pool is private. */
void ct_msg_release(ct_engine_t *e, uint32_t idx)
{
	ct_msg_t *m = &e->msgs[idx];
	ct_adds_t *b = batch(e);

	if (m->owner == CT_NIL) {
		e->peers[m->peer].resp_held--;
		m->next = e->resp_free;
		e->resp_free = idx;
		return;
	}
	if (!b) {
		give_back(e, &e->tiles[m->owner], idx, idx);
		return;
	}
	if (b->rel_first != CT_NIL && b->rel_owner != m->owner) {
		give_back(e, &e->tiles[b->rel_owner], b->rel_first, b->rel_last);
		b->rel_first = CT_NIL;
	}
	if (b->rel_first == CT_NIL) {
		b->rel_owner = m->owner;
		b->rel_last = idx;
	} else {
		m->next = b->rel_first + 1;
	}
	b->rel_first = idx;
}

/* Write what batch b holds, and empty it (its retirement sequences stay noted): the counts and
 * the messages before the counters, whose writes release waiters — one woken reads ops_done, or
 * issues again at once. */
static void flush(ct_adds_t *b)
{
	ct_engine_t *e = b->e;

	if (b->done)
		ct_stat_add(e, CT_STAT_ops_done, b->done);
	if (b->failed)
		ct_stat_add(e, CT_STAT_ops_failed, b->failed);
	if (b->live)
		atomic_fetch_sub_explicit(&e->msgs_adj, b->live, memory_order_release); /* ct_msgs_live */
	if (b->rel_first != CT_NIL)
		give_back(e, &e->tiles[b->rel_owner], b->rel_first, b->rel_last);
	if (b->progress)
		tm_progress(e->attr.tm);
	for (uint32_t i = 0; i < b->n_ids; i++)
		tm_counter_add(e->attr.tm, b->id[i], b->n[i]);
	b->done = b->failed = b->live = 0;
	b->progress = 0;
	b->rel_first = CT_NIL;
	b->n_ids = 0;
}

static void counter_addn(ct_engine_t *e, uint32_t id, uint64_t n)
{
	ct_adds_t *b = batch(e);
	uint32_t i = 0;

	if (!b) {
		tm_counter_add(e->attr.tm, id, n);
		return;
	}
	while (i < b->n_ids && b->id[i] != id)
		i++;
	if (i == GICE_ARRAY_SIZE(b->id)) { /* full: write what it holds first */
		flush(b);
		i = 0;
	}
	if (i == b->n_ids) {
		b->id[b->n_ids] = id;
		b->n[b->n_ids++] = 0;
	}
	b->n[i] += n;
}

/* Move the cursor of q over every retired ticket at it, and count them on q's counter. */
static void advance(ct_engine_t *e, ct_retire_seq_t *q)
{
	for (;;) {
		uint64_t cur = atomic_load_explicit(&q->cursor, memory_order_acquire), k = 0;
		while (k <= q->mask && atomic_load_explicit(&q->done[(cur + k) & q->mask], memory_order_acquire) == cur + k + 1)
			k++;
		if (!k)
			return;
		if (atomic_compare_exchange_strong_explicit(&q->cursor, &cur, cur + k, memory_order_acq_rel,
							    memory_order_acquire))
			counter_addn(e, q->counter, k);
	}
}

void ct_adds_begin(ct_engine_t *e, ct_adds_t *b)
{
	*b = (ct_adds_t){.e = e, .rel_first = CT_NIL};
	adds_open = b;
}

void ct_adds_end(ct_adds_t *b)
{
	for (uint32_t i = 0; i < b->n_seq; i++) /* their counter adds join the batch */
		advance(b->e, b->seq[i]);
	adds_open = NULL;
	flush(b);
	b->n_seq = 0;
}

/* Tickets retire in order (quiet waits on the sequence's counter reaching a ticket count):
 * queue tickets on counter ct, fired ones on the tile's fired counter. */
void ct_retire(ct_engine_t *e, uint32_t ct, uint64_t ticket)
{
	ct_tile_t *t = &e->tiles[ct];
	ct_retire_seq_t *q = (ticket & CT_TICKET_FIRED) ? &t->rf : &t->rq;
	ct_adds_t *b = batch(e);
	uint32_t i = 0;

	if (ticket == UINT64_MAX)
		return;
	ticket &= ~CT_TICKET_FIRED;
	atomic_store_explicit(&q->done[ticket & q->mask], ticket + 1, memory_order_release);
	if (!b) {
		advance(e, q);
		return;
	}
	while (i < b->n_seq && b->seq[i] != q)
		i++;
	if (i < b->n_seq)
		return; /* advanced at the batch's end */
	if (i == GICE_ARRAY_SIZE(b->seq))
		advance(e, q); /* no room to note it: now */
	else
		b->seq[b->n_seq++] = q;
}

void ct_op_counted(ct_engine_t *e, int status)
{
	ct_adds_t *b = batch(e);

	if (!b)
		ct_stat_add(e, status ? CT_STAT_ops_failed : CT_STAT_ops_done, 1);
	else if (status)
		b->failed++;
	else
		b->done++;
}

void ct_live_drop(ct_engine_t *e)
{
	ct_adds_t *b = batch(e);

	if (b)
		b->live++;
	else
		atomic_fetch_sub_explicit(&e->msgs_adj, 1, memory_order_release); /* ct_msgs_live */
}

void ct_complete_counter(ct_engine_t *e, uint32_t counter, int status)
{
	int ok = GICE_OK;

	/* before the counter write: a quiet released by it reports the failure */
	if (status != GICE_OK)
		atomic_compare_exchange_strong_explicit(&e->first_fail, &ok, status, memory_order_relaxed,
							memory_order_relaxed);
	ct_adds_t *b = batch(e);

	if (b) /* noted once for all of the batch's (tm_progress: a clock read) */
		b->progress = 1;
	else
		tm_progress(e->attr.tm);
	if (counter == TM_NONE)
		return;

	if (status == GICE_OK) {
		counter_addn(e, counter, 1);
		return;
	}
	if (b) { /* the writes before it first, in their order */
		ct_adds_end(b);
		ct_adds_begin(e, b);
	}
	tm_counter_fail(e->attr.tm, counter, status);
}

/* Fail a request before it became a message. */
void ct_fail_now(ct_engine_t *e, ct_tile_t *t, const ct_req_t *r, uint64_t ticket, int status)
{
	ct_op_counted(e, status);
	ct_complete_counter(e, r->counter, status);
	ct_retire(e, t->idx, ticket);
}

void ct_engine_op_done(ct_engine_t *e, uint32_t ct, uint64_t ticket, uint32_t counter, int status)
{
	ct_op_counted(e, status);
	ct_complete_counter(e, counter, status);
	ct_retire(e, ct, ticket);
}
