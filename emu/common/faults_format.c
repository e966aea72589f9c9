/* faults_format.c: the GICE_FAULTS spec as text again, and questions about a parsed spec. See
 * faults.h for the syntax. */
#include "emu/common/faults.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/common/common.h"

static const char *const kind_names[GICE_FK_N] = {
#define GICE_FK_NAME_(k, s) s,
	GICE_FAULT_KIND_LIST(GICE_FK_NAME_)
#undef GICE_FK_NAME_
};

const char *gice_fault_kind_name(unsigned kind) { return kind < GICE_FK_N ? kind_names[kind] : "?"; }

int gice_faults_any_net(const gice_faults_t *f) { return f && f->n_rules > 0; }

static int has_kind(const gice_faults_t *f, unsigned a, unsigned b)
{
	for (uint32_t i = 0; f && i < f->n_rules; i++)
		if (f->rule[i].kind == a || f->rule[i].kind == b)
			return 1;
	return 0;
}

int gice_faults_corrupts(const gice_faults_t *f) { return has_kind(f, GICE_FK_CORRUPT, GICE_FK_CORRUPT_MSG); }
int gice_faults_reorders(const gice_faults_t *f) { return has_kind(f, GICE_FK_REORDER, GICE_FK_DELAY); }

/* ---- format ---- */

/* The scope a group of the output has: rules and stalls with equal scopes share a group. */
typedef struct {
	uint64_t from, to, after_ops;
	int ctl;
	int own; /* a group of its own (a partition) */
} scope_t;

typedef struct {
	char *buf;
	size_t len, pos; /* pos: bytes written, at most len - 1 */
	int started;     /* an item is in the current group */
	scope_t cur;
} fmt_t;

static const scope_t scope_none = {GICE_FAULTS_ANY, GICE_FAULTS_ANY, 0, 0, 0};

static void fmt_raw(fmt_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fmt_raw(fmt_t *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->pos, o->len - o->pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos = GICE_MIN(o->len - 1, o->pos + (size_t)n);
}

static void fmt_ranks(fmt_t *o, const char *key, uint64_t m)
{
	int first = 1;

	fmt_raw(o, ",%s=", key);
	for (int r = 0; r <= GICE_FAULTS_MAX_RANK; r++)
		if (m & (1ull << r)) {
			fmt_raw(o, "%s%d", first ? "" : ",", r);
			first = 0;
		}
}

/* End the current group: its scope items. */
static void fmt_close(fmt_t *o)
{
	if (!o->started || o->cur.own)
		return;
	if (o->cur.from != GICE_FAULTS_ANY)
		fmt_ranks(o, "rank", o->cur.from);
	if (o->cur.to != GICE_FAULTS_ANY)
		fmt_ranks(o, "peer", o->cur.to);
	if (o->cur.after_ops)
		fmt_raw(o, ",after_ops=%llu", (unsigned long long)o->cur.after_ops);
	if (o->cur.ctl)
		fmt_raw(o, ",ctl=1");
}

/* Start an item of scope s: after a comma in the current group, or in a new group. */
static void fmt_item(fmt_t *o, const scope_t *s)
{
	if (o->started && !o->cur.own && !s->own && !memcmp(&o->cur, s, sizeof(*s))) {
		fmt_raw(o, ",");
		return;
	}
	fmt_close(o);
	if (o->started)
		fmt_raw(o, ";");
	o->cur = *s;
	o->started = 1;
}

/* Shortest %g form that reads back as v. */
static void fmt_prob(char *num, size_t len, double v)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(num, len, "%.*g", prec, v);
		if (strtod(num, NULL) == v)
			break;
	}
}

/* A duration in the largest unit that divides it. */
static void fmt_dur(char *num, size_t len, uint64_t ns)
{
	if (ns == UINT64_MAX)
		snprintf(num, len, "inf");
	else if (ns && ns % 1000000000 == 0)
		snprintf(num, len, "%llus", (unsigned long long)(ns / 1000000000));
	else if (ns % 1000000 == 0)
		snprintf(num, len, "%llums", (unsigned long long)(ns / 1000000));
	else if (ns % 1000 == 0)
		snprintf(num, len, "%lluus", (unsigned long long)(ns / 1000));
	else
		snprintf(num, len, "%lluns", (unsigned long long)ns);
}

static void fmt_list(char *out, size_t len, uint64_t m)
{
	size_t pos = 0;

	out[0] = 0;
	for (int r = 0; r <= GICE_FAULTS_MAX_RANK && pos < len; r++)
		if (m & (1ull << r))
			pos += (size_t)snprintf(out + pos, len - pos, "%s%d", pos ? "," : "", r);
}

static void fmt_rule(fmt_t *o, const gice_fault_rule_t *r)
{
	scope_t s = {r->from, r->to, r->after_ops, r->ctl, r->kind == GICE_FK_PARTITION};
	char v[160], a[80], b[80];

	switch (r->kind) {
	case GICE_FK_DROP:
	case GICE_FK_DUP:
	case GICE_FK_REORDER:
	case GICE_FK_CORRUPT: fmt_prob(v, sizeof(v), r->p); break;
	case GICE_FK_DELAY: snprintf(v, sizeof(v), "%llu", (unsigned long long)(r->n / 1000)); break;
	case GICE_FK_LATENCY: fmt_dur(v, sizeof(v), r->n); break;
	case GICE_FK_RATE: snprintf(v, sizeof(v), "%lluBps", (unsigned long long)r->n); break;
	case GICE_FK_PARTITION:
		fmt_list(a, sizeof(a), r->from);
		fmt_list(b, sizeof(b), r->to);
		snprintf(v, sizeof(v), "%s|%s", a, b);
		break;
	default: snprintf(v, sizeof(v), "%llu", (unsigned long long)r->n);
	}
	fmt_item(o, &s);
	fmt_raw(o, "%s=%s", gice_fault_kind_name(r->kind), v);
	if (r->coll_at) {
		fmt_raw(o, "@coll%llu", (unsigned long long)r->coll_at);
		if (r->coll_n != UINT64_MAX)
			fmt_raw(o, "+%llu", (unsigned long long)r->coll_n);
	} else if (r->at_ns || r->dur_ns != UINT64_MAX) {
		fmt_dur(a, sizeof(a), r->at_ns);
		fmt_raw(o, "@%s", a);
		if (r->dur_ns != UINT64_MAX) {
			fmt_dur(b, sizeof(b), r->dur_ns);
			fmt_raw(o, "+%s", b);
		}
	}
}

void gice_faults_format(const gice_faults_t *f, char *buf, size_t len)
{
	fmt_t o = {buf, len, 0, 0, scope_none};
	char t[32], d[32];

	if (!buf || !len)
		return;
	buf[0] = 0;
	if (!f)
		return;
	for (uint32_t i = 0; i < f->n_rules && i < GICE_FAULTS_MAX_RULES; i++)
		fmt_rule(&o, &f->rule[i]);
	if (f->seed != 1 || gice_faults_any_net(f)) {
		fmt_item(&o, &scope_none);
		fmt_raw(&o, "seed=%llu", (unsigned long long)f->seed);
	}
	for (uint32_t i = 0; i < f->n_stall && i < GICE_FAULTS_MAX_STALLS; i++) {
		scope_t s = scope_none;

		s.from = f->stall[i].ranks;
		fmt_dur(t, sizeof(t), f->stall[i].at_ns);
		fmt_dur(d, sizeof(d), f->stall[i].dur_ns);
		fmt_item(&o, &s);
		fmt_raw(&o, "stall_ct=%u@%s+%s", f->stall[i].ct, t, d);
	}
	for (int k = 0; k < 2; k++) {
		int32_t r = k ? f->kill_rank : f->hang_rank;
		uint64_t coll = k ? f->kill_coll : f->hang_coll;
		if (r < 0)
			continue;
		if (coll)
			snprintf(t, sizeof(t), "coll%llu", (unsigned long long)coll);
		else
			fmt_dur(t, sizeof(t), k ? f->kill_at_ns : f->hang_at_ns);
		fmt_item(&o, &scope_none);
		fmt_raw(&o, "%s_rank=%d@%s", k ? "kill" : "hang", r, t);
	}
	fmt_close(&o);
}
