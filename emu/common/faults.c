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

/* R@T */
static int parse_rank_at(span_t t, int32_t *rank, uint64_t *at, char *why, size_t wlen)
{
	span_t r, when;
	uint64_t v;

	if (!span_split(t, '@', &r, &when)) {
		snprintf(why, wlen, "missing '@': the form is RANK@TIME, e.g. 1@2s");
		return -1;
	}
	if (parse_uint(span_trim(r), INT32_MAX, &v, why, wlen) || parse_dur(span_trim(when), 0, at, why, wlen))
		return -1;
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

enum { K_DROP, K_DUP, K_REORDER, K_CORRUPT, K_DELAY_US, K_SEED, K_STALL_CT, K_HANG_RANK, K_KILL_RANK, K_N };
static const char *const fault_keys[K_N] = {"drop",	"dup",	    "reorder",	 "corrupt",  "delay_us",
					    "seed",	"stall_ct", "hang_rank", "kill_rank"};

/* One key=value token into f; 0, or -1 with why filled. */
static int parse_token(span_t tok, gice_faults_t *f, unsigned *seen, char *why, size_t wlen)
{
	span_t key, val;
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
		snprintf(why, wlen, "unknown key \"%.*s\" (keys: drop dup reorder corrupt delay_us seed stall_ct "
				    "hang_rank kill_rank)", (int)key.n, key.s);
		return -1;
	}
	if (k != K_STALL_CT && (*seen & (1u << k))) {
		snprintf(why, wlen, "%s given twice", fault_keys[k]);
		return -1;
	}
	*seen |= 1u << k;
	switch (k) {
	case K_DROP: return parse_prob(val, &f->drop, why, wlen);
	case K_DUP: return parse_prob(val, &f->dup, why, wlen);
	case K_REORDER: return parse_prob(val, &f->reorder, why, wlen);
	case K_CORRUPT: return parse_prob(val, &f->corrupt, why, wlen);
	case K_DELAY_US: return parse_uint(val, UINT64_MAX / 1000, &f->delay_us, why, wlen);
	case K_SEED: return parse_uint(val, UINT64_MAX, &f->seed, why, wlen);
	case K_STALL_CT:
		if (f->n_stall == GICE_FAULTS_MAX_STALLS) {
			snprintf(why, wlen, "more than %d stall_ct", GICE_FAULTS_MAX_STALLS);
			return -1;
		}
		if (parse_stall(val, &f->stall[f->n_stall], why, wlen))
			return -1;
		f->n_stall++;
		return 0;
	case K_HANG_RANK: return parse_rank_at(val, &f->hang_rank, &f->hang_at_ns, why, wlen);
	default: return parse_rank_at(val, &f->kill_rank, &f->kill_at_ns, why, wlen);
	}
}

int gice_faults_parse(const char *spec, gice_faults_t *out)
{
	gice_faults_t f = {.seed = 1, .hang_rank = -1, .kill_rank = -1};
	unsigned seen = 0;
	char why[256];

	if (!out) {
		gice_error("config", "gice_faults_parse: out is NULL");
		return GICE_ERR_INVALID;
	}
	for (const char *p = spec ? spec : ""; *p;) {
		const char *comma = strchr(p, ',');
		span_t tok = span_trim((span_t){p, comma ? (size_t)(comma - p) : strlen(p)});

		if (tok.n && parse_token(tok, &f, &seen, why, sizeof(why))) {
			gice_error("config", "GICE_FAULTS=\"%s\": bad token \"%.*s\": %s", spec, (int)tok.n, tok.s, why);
			return GICE_ERR_CONFIG;
		}
		p = comma ? comma + 1 : p + strlen(p);
	}
	*out = f;
	return GICE_OK;
}

int gice_faults_any_net(const gice_faults_t *f)
{
	return f && (f->drop > 0 || f->dup > 0 || f->reorder > 0 || f->corrupt > 0 || f->delay_us > 0);
}

/* ---- format ---- */

typedef struct {
	char *buf;
	size_t len, pos; /* pos: bytes written, at most len - 1 */
} fmt_t;

static void fmt_add(fmt_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append one key=value, after a comma unless it is the first. */
static void fmt_add(fmt_t *o, const char *fmt, ...)
{
	char item[96];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(item, sizeof(item), fmt, ap);
	va_end(ap);
	n = snprintf(o->buf + o->pos, o->len - o->pos, "%s%s", o->pos ? "," : "", item);
	if (n > 0)
		o->pos = GICE_MIN(o->len - 1, o->pos + (size_t)n);
}

/* Shortest %g form that reads back as v. */
static void fmt_prob(fmt_t *o, const char *key, double v)
{
	char num[40];

	for (int prec = 1; prec <= 17; prec++) {
		snprintf(num, sizeof(num), "%.*g", prec, v);
		if (strtod(num, NULL) == v)
			break;
	}
	fmt_add(o, "%s=%s", key, num);
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

void gice_faults_format(const gice_faults_t *f, char *buf, size_t len)
{
	fmt_t o = {buf, len, 0};
	char t[32], d[32];

	if (!buf || !len)
		return;
	buf[0] = 0;
	if (!f)
		return;
	if (f->drop > 0)
		fmt_prob(&o, "drop", f->drop);
	if (f->dup > 0)
		fmt_prob(&o, "dup", f->dup);
	if (f->reorder > 0)
		fmt_prob(&o, "reorder", f->reorder);
	if (f->corrupt > 0)
		fmt_prob(&o, "corrupt", f->corrupt);
	if (f->delay_us)
		fmt_add(&o, "delay_us=%llu", (unsigned long long)f->delay_us);
	if (f->seed != 1 || gice_faults_any_net(f))
		fmt_add(&o, "seed=%llu", (unsigned long long)f->seed);
	for (uint32_t i = 0; i < f->n_stall && i < GICE_FAULTS_MAX_STALLS; i++) {
		fmt_dur(t, sizeof(t), f->stall[i].at_ns);
		fmt_dur(d, sizeof(d), f->stall[i].dur_ns);
		fmt_add(&o, "stall_ct=%u@%s+%s", f->stall[i].ct, t, d);
	}
	if (f->hang_rank >= 0) {
		fmt_dur(t, sizeof(t), f->hang_at_ns);
		fmt_add(&o, "hang_rank=%d@%s", f->hang_rank, t);
	}
	if (f->kill_rank >= 0) {
		fmt_dur(t, sizeof(t), f->kill_at_ns);
		fmt_add(&o, "kill_rank=%d@%s", f->kill_rank, t);
	}
}
