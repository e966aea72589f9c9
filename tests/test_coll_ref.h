/* test_coll_ref.h: the host reference of tests/test_coll.c — the values every rank puts in its
 * buffers (by type, rank and element index), element access by type (float16 through _Float16,
 * bfloat16 by hand: independent of the library's conversions), and the checks of a result
 * against a host loop over the ranks. */
#ifndef GICE_TEST_COLL_REF_H
#define GICE_TEST_COLL_REF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/gice.h"

#define MAXC 5003 /* the largest count */

static const char *const dt_name[] = {"int8", "uint8", "int32", "uint32", "int64",
				      "uint64", "float16", "bfloat16", "float32", "float64"};
static const char *const op_name[] = {"sum", "prod", "min", "max", "avg"};

static int is_float(gice_dtype_t t) { return t >= GICE_FLOAT16; }
static int is_signed(gice_dtype_t t) { return t == GICE_INT8 || t == GICE_INT32 || t == GICE_INT64; }

static uint64_t hash(uint32_t r, size_t i)
{
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull + (uint64_t)r * 0xbf58476d1ce4e5b9ull + 1;
	x ^= x >> 29;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 32);
}

/* The value of element i on rank r, as a double (floats) or 64 bits (integers). */
static double fval(uint32_t r, size_t i, gice_redop_t op)
{
	static const double prod_vals[] = {0.5, 1, 2, -1, -2, 1, -0.5, -1}; /* exact to 2^8 */
	uint64_t h = hash(r, i);
	return op == GICE_RED_PROD ? prod_vals[h % 8] : ((double)(h % 65) - 32) * 0.25;
}

static uint16_t to_bf16(double v)
{
	float f = (float)v;
	uint32_t b;
	memcpy(&b, &f, 4);
	return (uint16_t)(b >> 16); /* exact for the test values */
}

static double from_bf16(uint16_t h)
{
	uint32_t b = (uint32_t)h << 16;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static void put_elem(void *p, gice_dtype_t t, size_t i, uint64_t u, double f)
{
	switch (t) {
	case GICE_INT8: case GICE_UINT8: ((uint8_t *)p)[i] = (uint8_t)u; break;
	case GICE_INT32: case GICE_UINT32: ((uint32_t *)p)[i] = (uint32_t)u; break;
	case GICE_INT64: case GICE_UINT64: ((uint64_t *)p)[i] = u; break;
	case GICE_FLOAT16: ((_Float16 *)p)[i] = (_Float16)f; break;
	case GICE_BFLOAT16: ((uint16_t *)p)[i] = to_bf16(f); break;
	case GICE_FLOAT32: ((float *)p)[i] = (float)f; break;
	case GICE_FLOAT64: ((double *)p)[i] = f; break;
	default: break;
	}
}

/* Integers: the element as signed or unsigned 64 bits; floats: as a double. */
static int64_t get_s(const void *p, gice_dtype_t t, size_t i)
{
	switch (t) {
	case GICE_INT8: return ((const int8_t *)p)[i];
	case GICE_UINT8: return ((const uint8_t *)p)[i];
	case GICE_INT32: return ((const int32_t *)p)[i];
	case GICE_UINT32: return ((const uint32_t *)p)[i];
	default: return ((const int64_t *)p)[i];
	}
}

static double get_f(const void *p, gice_dtype_t t, size_t i)
{
	switch (t) {
	case GICE_FLOAT16: return ((const _Float16 *)p)[i];
	case GICE_BFLOAT16: return from_bf16(((const uint16_t *)p)[i]);
	case GICE_FLOAT32: return ((const float *)p)[i];
	default: return ((const double *)p)[i];
	}
}

static size_t esize(gice_dtype_t t) { return gice_dtype_size(t); }

static void fill(void *p, gice_dtype_t t, gice_redop_t op, uint32_t r, size_t count)
{
	for (size_t i = 0; i < count; i++)
		put_elem(p, t, i, hash(r, i), fval(r, i, op));
}

/* Compare got (the result on a device) with the host reference over ranks 0..n-1. Returns 0 or
 * prints the first wrong element and returns 1. */
static int check_at(const void *got, gice_dtype_t t, gice_redop_t op, uint32_t n, size_t count, size_t base,
		    const char *who)
{
	static const double eps[] = {[GICE_FLOAT16] = 0x1p-11, [GICE_BFLOAT16] = 0x1p-8, [GICE_FLOAT32] = 0x1p-24,
				     [GICE_FLOAT64] = 0x1p-53};
	unsigned bits = (unsigned)esize(t) * 8;
	uint64_t mask = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;

	for (size_t k = 0; k < count; k++) {
		size_t i = base + k;
		if (is_float(t)) {
			double acc = fval(0, i, op), g = get_f(got, t, k);
			for (uint32_t r = 1; r < n; r++) {
				double v = fval(r, i, op);
				acc = op == GICE_RED_PROD ? acc * v : op == GICE_RED_MIN ? fmin(acc, v)
								  : op == GICE_RED_MAX ? fmax(acc, v) : acc + v;
			}
			if (op == GICE_RED_AVG)
				acc /= n;
			double tol = op == GICE_RED_AVG ? (n + 1) * eps[t] * fmax(fabs(acc), 1) : 0;
			if (fabs(g - acc) > tol) {
				fprintf(stderr, "%s: %s %s n=%u count=%zu element %zu: %.9g, expected %.9g (tolerance %g)\n",
					who, dt_name[t], op_name[op], n, count, i, g, acc, tol);
				return 1;
			}
			continue;
		}
		uint64_t acc = hash(0, i) & mask;
		for (uint32_t r = 1; r < n; r++) {
			uint64_t v = hash(r, i) & mask;
			int64_t sa = (int64_t)(acc << (64 - bits)) >> (64 - bits), sv = (int64_t)(v << (64 - bits)) >> (64 - bits);
			switch (op) {
			case GICE_RED_SUM: acc = (acc + v) & mask; break;
			case GICE_RED_PROD: acc = (acc * v) & mask; break;
			case GICE_RED_MIN: acc = is_signed(t) ? (sv < sa ? v : acc) : (v < acc ? v : acc); break;
			default: acc = is_signed(t) ? (sv > sa ? v : acc) : (v > acc ? v : acc); break;
			}
		}
		if (((uint64_t)get_s(got, t, k) & mask) != acc) {
			fprintf(stderr, "%s: %s %s n=%u count=%zu element %zu: %llx, expected %llx\n", who, dt_name[t],
				op_name[op], n, count, i, (unsigned long long)((uint64_t)get_s(got, t, k) & mask),
				(unsigned long long)acc);
			return 1;
		}
	}
	return 0;
}

static int check(const void *got, gice_dtype_t t, gice_redop_t op, uint32_t n, size_t count, const char *who)
{
	return check_at(got, t, op, n, count, 0, who);
}

/* got (count elements) holds rank r's values base .. base + count - 1 (as fill with op sum). */
static int expect_block(const void *got, gice_dtype_t t, uint32_t r, size_t base, size_t count, const char *who)
{
	static uint8_t want[MAXC * 8];

	for (size_t k = 0; k < count; k++)
		put_elem(want, t, k, hash(r, base + k), fval(r, base + k, GICE_RED_SUM));
	for (size_t k = 0; k < count * esize(t); k++)
		if (((const uint8_t *)got)[k] != want[k]) {
			fprintf(stderr, "%s: %s count=%zu: byte %zu of rank %u's block at %zu differs\n", who, dt_name[t],
				count, k, r, base);
			return 1;
		}
	return 0;
}

/* alltoallv: elements rank r sends to rank j (0 for some pairs) */
static size_t v_cnt(uint32_t r, uint32_t j, size_t ci, size_t count)
{
	return (size_t)((r + 2 * j + ci) % 4) * (count / 8 + 1);
}

#endif
