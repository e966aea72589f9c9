/* faults.c: the GICE_FAULTS spec: parse, test, format. See faults.h for the syntax. */
#include "emu/common/faults.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu/common/common.h"

/* A piece of the spec: not NUL-terminated. */
typedef struct {
	const char *s;
	size_t n;
} span_t;

static span_t span_trim(span_t t)
{
	while (t.n && isspace((unsigned char)t.s[0]))
		t.s++, t.n--;
	while (t.n && isspace((unsigned char)t.s[t.n - 1]))
		t.n--;
	return t;
}

static int span_eq(span_t t, const char *lit) { return t.n == strlen(lit) && !memcmp(t.s, lit, t.n); }

/* Split t at the first c: head before it, tail after it. 0 when t has no c. */
static int span_split(span_t t, char c, span_t *head, span_t *tail)
{
	const char *p = memchr(t.s, c, t.n);

	if (!p)
		return 0;
	*head = (span_t){t.s, (size_t)(p - t.s)};
	*tail = (span_t){p + 1, t.n - (size_t)(p - t.s) - 1};
	return 1;
}

/* Decimal integer, digits only. */
static int parse_uint(span_t t, uint64_t max, uint64_t *out, char *why, size_t wlen)
{
	uint64_t v = 0;

	if (!t.n) {
		snprintf(why, wlen, "empty number");
		return -1;
	}
	for (size_t i = 0; i < t.n; i++) {
		unsigned d = (unsigned char)t.s[i] - '0';

		if (d > 9) {
			snprintf(why, wlen, "\"%.*s\" is not a decimal integer", (int)t.n, t.s);
			return -1;
		}
		if (v > (UINT64_MAX - d) / 10) {
			snprintf(why, wlen, "\"%.*s\" does not fit in 64 bits", (int)t.n, t.s);
			return -1;
		}
		v = v * 10 + d;
	}
	if (v > max) {
		snprintf(why, wlen, "%llu is above %llu", (unsigned long long)v, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

/* A duration: an integer followed by ns, us, ms or s, or a bare integer of ms; "inf" (when
 * allowed) is UINT64_MAX. */
static int parse_dur(span_t t, int allow_inf, uint64_t *out, char *why, size_t wlen)
{
	static const struct {
		const char *unit;
		uint64_t ns;
	} units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
	span_t num = t;
	uint64_t mult = 1000000, v;
	size_t d = 0;

	if (span_eq(t, "inf")) {
		if (!allow_inf) {
			snprintf(why, wlen, "inf is only allowed for a stall's duration");
			return -1;
		}
		*out = UINT64_MAX;
		return 0;
	}
	while (d < t.n && isdigit((unsigned char)t.s[d]))
		d++;
	if (d < t.n) {
		span_t unit = {t.s + d, t.n - d};
		size_t i;

		for (i = 0; i < GICE_ARRAY_SIZE(units); i++)
			if (span_eq(unit, units[i].unit))
				break;
		if (i == GICE_ARRAY_SIZE(units)) {
			snprintf(why, wlen, "duration \"%.*s\" is not an integer followed by ns, us, ms, s or nothing (ms)%s",
				 (int)t.n, t.s, allow_inf ? ", nor inf" : "");
			return -1;
		}
		mult = units[i].ns;
		num.n = d;
	}
	if (!num.n) {
		snprintf(why, wlen, "duration \"%.*s\" has no number", (int)t.n, t.s);
		return -1;
	}
	if (parse_uint(num, UINT64_MAX, &v, why, wlen))
		return -1;
	if (v > (UINT64_MAX - 1) / mult) {
		snprintf(why, wlen, "duration \"%.*s\" does not fit in 64 bits of nanoseconds", (int)t.n, t.s);
		return -1;
	}
	*out = v * mult;
	return 0;
}

static int parse_prob(span_t t, double *out, char *why, size_t wlen)
{
	char buf[64], *end;
	double v;

	if (!t.n || t.n >= sizeof(buf)) {
		snprintf(why, wlen, "probability \"%.*s\" is not a number in [0, 1]", (int)t.n, t.s);
		return -1;
	}
	memcpy(buf, t.s, t.n);
	buf[t.n] = 0;
	v = strtod(buf, &end);
	if (end == buf || *end || !isfinite(v)) {
		snprintf(why, wlen, "probability \"%s\" is not a number", buf);
		return -1;
	}
	if (v < 0 || v > 1) {
		snprintf(why, wlen, "probability %s is outside [0, 1]", buf);
		return -1;
	}
	*out = v;
	return 0;
}

/* "collN": 1 and *n when t starts with coll (0 when it does not; -1 with why when N is bad). */
static int parse_coll(span_t t, uint64_t *n, char *why, size_t wlen)
{
	if (t.n < 4 || memcmp(t.s, "coll", 4))
		return 0;
	if (parse_uint((span_t){t.s + 4, t.n - 4}, UINT64_MAX - 1, n, why, wlen))
		return -1;
	if (!*n) {
		snprintf(why, wlen, "collectives count from 1 (coll1 is the first)");
		return -1;
	}
	return 1;
}

/* R@T or R@collN */
static int parse_rank_at(span_t t, int32_t *rank, uint64_t *at, uint64_t *coll, char *why, size_t wlen)
{
	span_t r, when;
	uint64_t v;
	int c;

	if (!span_split(t, '@', &r, &when)) {
		snprintf(why, wlen, "missing '@': the form is RANK@TIME or RANK@collN, e.g. 1@2s or 1@coll3");
		return -1;
	}
	if (parse_uint(span_trim(r), INT32_MAX, &v, why, wlen) || (c = parse_coll(span_trim(when), coll, why, wlen)) < 0 ||
	    (!c && parse_dur(span_trim(when), 0, at, why, wlen)))
		return -1;
	if (c)
		*at = 0;
	*rank = (int32_t)v;
	return 0;
}

/* C@T+D */
static int parse_stall(span_t t, gice_fault_stall_t *st, char *why, size_t wlen)
{
	span_t c, rest, when, dur;
	uint64_t v;

	if (!span_split(t, '@', &c, &rest)) {
		snprintf(why, wlen, "missing '@': the form is CT@TIME+DURATION, e.g. 0@2s+500ms");
		return -1;
	}
	if (rest.n >= 4 && !memcmp(span_trim(rest).s, "coll", 4)) {
		snprintf(why, wlen, "a stall takes a time window, not collectives: the form is CT@TIME+DURATION");
		return -1;
	}
	if (!span_split(rest, '+', &when, &dur)) {
		snprintf(why, wlen, "missing '+': the form is CT@TIME+DURATION (DURATION may be inf)");
		return -1;
	}
	if (parse_uint(span_trim(c), UINT32_MAX, &v, why, wlen) ||
	    parse_dur(span_trim(when), 0, &st->at_ns, why, wlen) || parse_dur(span_trim(dur), 1, &st->dur_ns, why, wlen))
		return -1;
	st->ct = (uint32_t)v;
	return 0;
}

/* Ranks separated by commas, e.g. "0,1,3", into a mask. */
static int parse_ranks(span_t t, uint64_t *mask, char *why, size_t wlen)
{
	span_t head, rest = t;
	uint64_t m = 0, v;

	do {
		if (!span_split(rest, ',', &head, &rest)) {
			head = rest;
			rest.n = 0;
			rest.s = NULL;
		}
		if (parse_uint(span_trim(head), UINT32_MAX, &v, why, wlen))
			return -1;
		if (v > GICE_FAULTS_MAX_RANK) {
			snprintf(why, wlen, "rank %llu: a scope names ranks 0..%d", (unsigned long long)v,
				 GICE_FAULTS_MAX_RANK);
			return -1;
		}
		m |= 1ull << v;
	} while (rest.s);
	*mask = m;
	return 0;
}

/* Split an optional window "@T", "@T+D", "@collN" or "@collN+K" off a fault's value. */
static int parse_window(span_t *val, gice_fault_rule_t *r, char *why, size_t wlen)
{
	span_t v, w, when, dur = {NULL, 0};
	int c, plus;

	r->at_ns = 0;
	r->dur_ns = UINT64_MAX;
	r->coll_at = 0;
	r->coll_n = UINT64_MAX;
	if (!span_split(*val, '@', &v, &w))
		return 0;
	*val = span_trim(v);
	if (!(plus = span_split(w, '+', &when, &dur)))
		when = w;
	if ((c = parse_coll(span_trim(when), &r->coll_at, why, wlen)) < 0)
		return -1;
	if (c) { /* K collectives: a count, or inf */
		dur = span_trim(dur);
		if (!plus || span_eq(dur, "inf"))
			return 0;
		if (parse_uint(dur, UINT64_MAX - 1, &r->coll_n, why, wlen))
			return -1;
		if (!r->coll_n) {
			snprintf(why, wlen, "a window of 0 collectives");
			return -1;
		}
		return 0;
	}
	if (plus)
		return parse_dur(span_trim(when), 0, &r->at_ns, why, wlen) ||
		       parse_dur(span_trim(dur), 1, &r->dur_ns, why, wlen);
	return parse_dur(span_trim(w), 0, &r->at_ns, why, wlen);
}

/* N followed by Bps, KBps, MBps or GBps (decimal: 1 MBps = 10^6 bytes/s). */
static int parse_rate(span_t t, uint64_t *out, char *why, size_t wlen)
{
	static const struct {
		const char *unit;
		uint64_t mult;
	} units[] = {{"Bps", 1}, {"KBps", 1000}, {"MBps", 1000000}, {"GBps", 1000000000}};
	size_t d = 0;
	uint64_t v;

	while (d < t.n && isdigit((unsigned char)t.s[d]))
		d++;
	for (size_t i = 0; i < GICE_ARRAY_SIZE(units); i++)
		if (d && span_eq((span_t){t.s + d, t.n - d}, units[i].unit)) {
			if (parse_uint((span_t){t.s, d}, UINT64_MAX / units[i].mult, &v, why, wlen))
				return -1;
			if (!v) {
				snprintf(why, wlen, "rate 0: use drop=1 or a partition to cut a link");
				return -1;
			}
			*out = v * units[i].mult;
			return 0;
		}
	snprintf(why, wlen, "rate \"%.*s\" is not an integer followed by Bps, KBps, MBps or GBps", (int)t.n, t.s);
	return -1;
}

/* A|B, each a rank list. */
static int parse_partition(span_t t, gice_fault_rule_t *r, char *why, size_t wlen)
{
	span_t a, b;

	if (!span_split(t, '|', &a, &b)) {
		snprintf(why, wlen, "missing '|': the form is RANKS|RANKS, e.g. 0,1|2,3");
		return -1;
	}
	if (parse_ranks(a, &r->from, why, wlen) || parse_ranks(b, &r->to, why, wlen))
		return -1;
	if (r->from & r->to) {
		snprintf(why, wlen, "a rank is on both sides");
		return -1;
	}
	return 0;
}

/* Keys. Faults first (in enum gice_fault_kind order), then scope, then global keys. */
enum {
	K_SCOPE_ = GICE_FK_N,
	K_LINK = K_SCOPE_,
	K_PEER,
	K_RANK,
	K_FROM,
	K_AFTER_OPS,
	K_CTL,
	K_AT,
	K_GLOBAL_,
	K_SEED = K_GLOBAL_,
	K_STALL_CT,
	K_HANG_RANK,
	K_KILL_RANK,
	K_N
};
static const char *const fault_keys[K_N] = {
#define GICE_FK_NAME_(k, s) s,
	GICE_FAULT_KIND_LIST(GICE_FK_NAME_)
#undef GICE_FK_NAME_
	"link", "peer", "rank", "from", "after_ops", "ctl", "at", "seed", "stall_ct", "hang_rank", "kill_rank"};
#define KEYS_TEXT                                                                                             \
	"drop dup reorder corrupt delay_us latency rate partition nth_put corrupt_msg link peer rank from "  \
	"after_ops ctl at seed stall_ct hang_rank kill_rank"

/* Keys whose value is a rank list, which continues over commas. */
static int key_has_list(span_t key)
{
	return span_eq(key, "partition") || span_eq(key, "peer") || span_eq(key, "rank") || span_eq(key, "from");
}

/* The scope a group gives its faults. */
typedef struct {
	uint64_t from, to, after_ops;
	uint64_t at_ns, dur_ns; /* at=: the window of its faults that name none */
	uint64_t coll_at, coll_n; /* ... or at=collN+K */
	uint8_t ctl;
	uint64_t seen;      /* keys given in the group (bit k) */
	uint32_t rule0, stall0; /* its first rule and stall */
} group_t;

static int parse_fault(int k, span_t val, gice_faults_t *f, char *why, size_t wlen)
{
	gice_fault_rule_t *r;
	uint64_t v;

	if (f->n_rules == GICE_FAULTS_MAX_RULES) {
		snprintf(why, wlen, "more than %d network faults", GICE_FAULTS_MAX_RULES);
		return -1;
	}
	r = &f->rule[f->n_rules];
	memset(r, 0, sizeof(*r));
	r->kind = (uint8_t)k;
	if (parse_window(&val, r, why, wlen))
		return -1;
	switch (k) {
	case GICE_FK_DROP:
	case GICE_FK_DUP:
	case GICE_FK_REORDER:
	case GICE_FK_CORRUPT:
		if (parse_prob(val, &r->p, why, wlen))
			return -1;
		break;
	case GICE_FK_DELAY:
		if (parse_uint(val, UINT64_MAX / 1000, &v, why, wlen))
			return -1;
		r->n = v * 1000;
		break;
	case GICE_FK_LATENCY:
		if (parse_dur(val, 0, &r->n, why, wlen))
			return -1;
		break;
	case GICE_FK_RATE:
		if (parse_rate(val, &r->n, why, wlen))
			return -1;
		break;
	case GICE_FK_PARTITION:
		if (parse_partition(val, r, why, wlen))
			return -1;
		break;
	default: /* NTH_PUT, CORRUPT_MSG */
		if (parse_uint(val, UINT32_MAX, &r->n, why, wlen))
			return -1;
		if (!r->n) {
			snprintf(why, wlen, "%s counts from 1", fault_keys[k]);
			return -1;
		}
	}
	if (k != GICE_FK_PARTITION)
		r->from = r->to = GICE_FAULTS_ANY;
	f->n_rules++;
	return 0;
}

/* One key=value item into f (and the scope of its group g); 0, or -1 with why filled. */
static int parse_item(span_t tok, gice_faults_t *f, group_t *g, unsigned *global_seen, char *why, size_t wlen)
{
	span_t key, val, a, b;
	uint64_t v;
	int k;

	if (!span_split(tok, '=', &key, &val)) {
		snprintf(why, wlen, "not key=value");
		return -1;
	}
	key = span_trim(key);
	val = span_trim(val);
	for (k = 0; k < K_N; k++)
		if (span_eq(key, fault_keys[k]))
			break;
	if (k == K_N) {
		snprintf(why, wlen, "unknown key \"%.*s\" (keys: " KEYS_TEXT ")", (int)key.n, key.s);
		return -1;
	}
	if (k >= K_GLOBAL_ && k != K_STALL_CT) {
		if (*global_seen & (1u << (k - K_GLOBAL_))) {
			snprintf(why, wlen, "%s given twice", fault_keys[k]);
			return -1;
		}
		*global_seen |= 1u << (k - K_GLOBAL_);
	} else if (k != K_STALL_CT) {
		if (g->seen & (1ull << k)) {
			snprintf(why, wlen, "%s given twice in one group (start another group after ';')", fault_keys[k]);
			return -1;
		}
		if ((k == K_RANK && (g->seen & (1ull << K_FROM))) || (k == K_FROM && (g->seen & (1ull << K_RANK))) ||
		    ((k == K_RANK || k == K_FROM || k == K_PEER) && (g->seen & (1ull << K_LINK))) ||
		    (k == K_LINK && (g->seen & (1ull << K_RANK | 1ull << K_FROM | 1ull << K_PEER)))) {
			snprintf(why, wlen, "%s with another sender or receiver key: link=A->B names both", fault_keys[k]);
			return -1;
		}
	}
	g->seen |= 1ull << k;
	if (k < GICE_FK_N)
		return parse_fault(k, val, f, why, wlen);
	switch (k) {
	case K_LINK:
		if (!span_split(val, '-', &a, &b) || !b.n || b.s[0] != '>') {
			snprintf(why, wlen, "the form is link=SENDER->RECEIVER, e.g. 2->3");
			return -1;
		}
		b.s++, b.n--;
		return parse_ranks(a, &g->from, why, wlen) || parse_ranks(b, &g->to, why, wlen);
	case K_PEER: return parse_ranks(val, &g->to, why, wlen);
	case K_RANK:
	case K_FROM: return parse_ranks(val, &g->from, why, wlen);
	case K_AFTER_OPS: return parse_uint(val, UINT64_MAX, &g->after_ops, why, wlen);
	case K_AT: {
		gice_fault_rule_t w;
		span_t at = val;
		char buf[80];
		int n = snprintf(buf, sizeof(buf), "x@%.*s", (int)val.n, val.s);
		if (n < 0 || (size_t)n >= sizeof(buf)) {
			snprintf(why, wlen, "window \"%.*s\" too long", (int)val.n, val.s);
			return -1;
		}
		at = (span_t){buf, (size_t)n};
		if (parse_window(&at, &w, why, wlen))
			return -1;
		g->at_ns = w.at_ns;
		g->dur_ns = w.dur_ns;
		g->coll_at = w.coll_at;
		g->coll_n = w.coll_n;
		return 0;
	}
	case K_CTL:
		if (parse_uint(val, 1, &v, why, wlen))
			return -1;
		g->ctl = (uint8_t)v;
		return 0;
	case K_SEED: return parse_uint(val, UINT64_MAX, &f->seed, why, wlen);
	case K_STALL_CT:
		if (f->n_stall == GICE_FAULTS_MAX_STALLS) {
			snprintf(why, wlen, "more than %d stall_ct", GICE_FAULTS_MAX_STALLS);
			return -1;
		}
		if (parse_stall(val, &f->stall[f->n_stall], why, wlen))
			return -1;
		f->stall[f->n_stall++].ranks = GICE_FAULTS_ANY;
		return 0;
	case K_HANG_RANK: return parse_rank_at(val, &f->hang_rank, &f->hang_at_ns, &f->hang_coll, why, wlen);
	default: return parse_rank_at(val, &f->kill_rank, &f->kill_at_ns, &f->kill_coll, why, wlen);
	}
}

#define SCOPE_KEYS (1ull << K_LINK | 1ull << K_PEER | 1ull << K_RANK | 1ull << K_FROM | 1ull << K_AFTER_OPS | 1ull << K_CTL)

/* A group ends: its scope goes to its faults and stalls. */
static int group_close(gice_faults_t *f, group_t *g, char *why, size_t wlen)
{
	int partition = 0;

	if (g->seen & (1ull << K_AT)) {
		if (g->rule0 == f->n_rules) {
			snprintf(why, wlen, "at= without a network fault in its group");
			return -1;
		}
		for (uint32_t i = g->rule0; i < f->n_rules; i++)
			if (!f->rule[i].at_ns && f->rule[i].dur_ns == UINT64_MAX && !f->rule[i].coll_at) {
				f->rule[i].at_ns = g->at_ns;
				f->rule[i].dur_ns = g->dur_ns;
				f->rule[i].coll_at = g->coll_at;
				f->rule[i].coll_n = g->coll_n;
			}
	}
	if (!(g->seen & SCOPE_KEYS))
		return 0;
	for (uint32_t i = g->rule0; i < f->n_rules; i++)
		partition |= f->rule[i].kind == GICE_FK_PARTITION;
	if (partition) {
		snprintf(why, wlen, "a partition names its sides itself: no link, peer, rank, from, after_ops or ctl "
				    "in its group");
		return -1;
	}
	if (g->rule0 == f->n_rules && g->stall0 == f->n_stall) {
		snprintf(why, wlen, "a scope (link, peer, rank, from, after_ops, ctl) without a fault in its group");
		return -1;
	}
	if (g->stall0 != f->n_stall && (g->seen & ~(1ull << K_RANK | 1ull << K_FROM) & SCOPE_KEYS)) {
		snprintf(why, wlen, "stall_ct takes only rank= as its scope");
		return -1;
	}
	for (uint32_t i = g->rule0; i < f->n_rules; i++) {
		f->rule[i].from = g->from;
		f->rule[i].to = g->to;
		f->rule[i].ctl = g->ctl;
		f->rule[i].after_ops = g->after_ops;
	}
	for (uint32_t i = g->stall0; i < f->n_stall; i++)
		f->stall[i].ranks = g->from;
	return 0;
}

int gice_faults_parse(const char *spec, gice_faults_t *out)
{
	gice_faults_t f;
	group_t g = {.from = GICE_FAULTS_ANY, .to = GICE_FAULTS_ANY};
	unsigned global_seen = 0;
	const char *p = spec ? spec : "";
	span_t item = {NULL, 0};
	char why[256];

	if (!out) {
		gice_error("config", "gice_faults_parse: out is NULL");
		return GICE_ERR_INVALID;
	}
	memset(&f, 0, sizeof(f));
	f.seed = 1;
	f.hang_rank = f.kill_rank = -1;
	/* items end at ',' or ';' (a group's end) or the end; a piece without '=' after a rank
	 * list continues it */
	for (;;) {
		size_t n = strcspn(p, ",;");
		span_t piece = {p, n}, key, val;
		char end = p[n];

		if (item.s && memchr(piece.s, '=', piece.n) == NULL && span_trim(piece).n &&
		    span_split(item, '=', &key, &val) && key_has_list(span_trim(key))) {
			item.n = (size_t)(piece.s + piece.n - item.s); /* the list goes on */
		} else {
			if (item.s && span_trim(item).n && parse_item(span_trim(item), &f, &g, &global_seen, why, sizeof(why)))
				goto bad;
			item = piece;
		}
		if (end != ',') {
			if (span_trim(item).n && parse_item(span_trim(item), &f, &g, &global_seen, why, sizeof(why)))
				goto bad;
			item.s = NULL;
			if (group_close(&f, &g, why, sizeof(why))) {
				gice_error("config", "GICE_FAULTS=\"%s\": bad group ending at offset %zu: %s", spec,
					   (size_t)(p + n - spec), why);
				return GICE_ERR_CONFIG;
			}
			g = (group_t){.from = GICE_FAULTS_ANY, .to = GICE_FAULTS_ANY, .rule0 = f.n_rules, .stall0 = f.n_stall};
			if (!end)
				break;
		}
		p += n + 1;
	}
	*out = f;
	return GICE_OK;
bad:
	item = span_trim(item);
	gice_error("config", "GICE_FAULTS=\"%s\": bad item \"%.*s\": %s", spec, (int)item.n, item.s, why);
	return GICE_ERR_CONFIG;
}
