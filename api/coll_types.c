/* coll_types.c: the element types and reduction operators of the collectives: one loop per
 * (type, op), chosen once per chunk; float16 and bfloat16 go through float (round to nearest
 * even on the way back). */
#include "api/coll.h"

#include <math.h>
#include <string.h>

static const size_t dtype_size[GICE_DTYPE_COUNT] = {
	[GICE_INT8] = 1,    [GICE_UINT8] = 1,    [GICE_INT32] = 4,   [GICE_UINT32] = 4,  [GICE_INT64] = 8,
	[GICE_UINT64] = 8,  [GICE_FLOAT16] = 2,  [GICE_BFLOAT16] = 2, [GICE_FLOAT32] = 4, [GICE_FLOAT64] = 8,
};
static const char *const dtype_name[GICE_DTYPE_COUNT] = {
	[GICE_INT8] = "int8",       [GICE_UINT8] = "uint8",       [GICE_INT32] = "int32",
	[GICE_UINT32] = "uint32",   [GICE_INT64] = "int64",       [GICE_UINT64] = "uint64",
	[GICE_FLOAT16] = "float16", [GICE_BFLOAT16] = "bfloat16", [GICE_FLOAT32] = "float32",
	[GICE_FLOAT64] = "float64",
};
static const char *const redop_name[GICE_REDOP_COUNT] = {
	[GICE_RED_SUM] = "sum", [GICE_RED_PROD] = "prod", [GICE_RED_MIN] = "min", [GICE_RED_MAX] = "max",
	[GICE_RED_AVG] = "avg",
};

size_t gice_dtype_size(gice_dtype_t t) { return (unsigned)t < GICE_DTYPE_COUNT ? dtype_size[t] : 0; }
const char *coll_dtype_name(gice_dtype_t t) { return (unsigned)t < GICE_DTYPE_COUNT ? dtype_name[t] : "?"; }
const char *coll_redop_name(gice_redop_t o) { return (unsigned)o < GICE_REDOP_COUNT ? redop_name[o] : "?"; }

/* ---------------------------------------------------------------- half precision */

float coll_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
	float f;

	if (exp == 0x1f) /* inf, nan */
		bits = sign | 0x7f800000u | (man << 13);
	else if (exp) /* normal */
		bits = sign | ((exp + 112u) << 23) | (man << 13);
	else { /* zero, subnormal: man * 2^-24 */
		f = ldexpf((float)man, -24);
		return sign ? -f : f;
	}
	memcpy(&f, &bits, 4);
	return f;
}

uint16_t coll_f32_to_f16(float f)
{
	uint32_t x, sign, man;
	int32_t exp;

	memcpy(&x, &f, 4);
	sign = (x >> 16) & 0x8000u;
	exp = (int32_t)((x >> 23) & 0xffu);
	man = x & 0x7fffffu;
	if (exp == 0xff) /* inf, nan (kept a nan) */
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
	exp -= 112; /* rebias: 127 - 15 */
	if (exp >= 0x1f)
		return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
	if (exp <= 0) { /* subnormal or zero */
		if (exp < -10)
			return (uint16_t)sign;
		man |= 0x800000u;
		uint32_t shift = (uint32_t)(14 - exp), half = 1u << (shift - 1), rest = man & ((1u << shift) - 1);
		uint32_t m = man >> shift;
		if (rest > half || (rest == half && (m & 1)))
			m++;
		return (uint16_t)(sign | m);
	}
	uint32_t m = man >> 13, rest = man & 0x1fffu, h = sign | ((uint32_t)exp << 10) | m;
	if (rest > 0x1000u || (rest == 0x1000u && (m & 1)))
		h++; /* may carry into the exponent: still right (up to inf) */
	return (uint16_t)h;
}

float coll_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, 4);
	return f;
}

uint16_t coll_f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, 4);
	if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) /* nan stays a nan */
		return (uint16_t)((x >> 16) | 0x40u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

/* ---------------------------------------------------------------- reductions */

#define RED_SUM(a, b) ((a) + (b))
#define RED_PROD(a, b) ((a) * (b))
#define RED_MIN(a, b) ((b) < (a) ? (b) : (a))
#define RED_MAX(a, b) ((b) > (a) ? (b) : (a))

/* One loop per (C type, op). Integer sums and products wrap (done unsigned: defined). */
#define RED_LOOP(T, U, F)                                                       \
	do {                                                                    \
		T *d = dst;                                                     \
		const T *x = a, *y = b;                                         \
		for (size_t i = 0; i < n; i++)                                  \
			d[i] = (T)F((U)x[i], (U)y[i]);                          \
	} while (0)

#define RED_TYPE(T, U)                                                          \
	switch (op) {                                                           \
	case GICE_RED_SUM:                                                      \
	case GICE_RED_AVG:                                                      \
		RED_LOOP(T, U, RED_SUM);                                        \
		break;                                                          \
	case GICE_RED_PROD:                                                     \
		RED_LOOP(T, U, RED_PROD);                                       \
		break;                                                          \
	case GICE_RED_MIN:                                                      \
		RED_LOOP(T, T, RED_MIN);                                        \
		break;                                                          \
	case GICE_RED_MAX:                                                      \
		RED_LOOP(T, T, RED_MAX);                                        \
		break;                                                          \
	default:                                                                \
		break;                                                          \
	}

#define RED_HALF(TO, FROM)                                                      \
	do {                                                                    \
		uint16_t *d = dst;                                              \
		const uint16_t *x = a, *y = b;                                  \
		for (size_t i = 0; i < n; i++) {                                \
			float u = FROM(x[i]), v = FROM(y[i]), r;                \
			switch (op) {                                           \
			case GICE_RED_PROD:                                     \
				r = u * v;                                      \
				break;                                          \
			case GICE_RED_MIN:                                      \
				r = RED_MIN(u, v);                              \
				break;                                          \
			case GICE_RED_MAX:                                      \
				r = RED_MAX(u, v);                              \
				break;                                          \
			default:                                                \
				r = u + v;                                      \
				break;                                          \
			}                                                       \
			d[i] = TO(r);                                           \
		}                                                               \
	} while (0)

void coll_reduce(void *dst, const void *a, const void *b, size_t n, gice_dtype_t type, gice_redop_t op)
{
	switch (type) {
	case GICE_INT8:
		RED_TYPE(int8_t, uint8_t);
		break;
	case GICE_UINT8:
		RED_TYPE(uint8_t, uint32_t);
		break;
	case GICE_INT32:
		RED_TYPE(int32_t, uint32_t);
		break;
	case GICE_UINT32:
		RED_TYPE(uint32_t, uint32_t);
		break;
	case GICE_INT64:
		RED_TYPE(int64_t, uint64_t);
		break;
	case GICE_UINT64:
		RED_TYPE(uint64_t, uint64_t);
		break;
	case GICE_FLOAT32:
		RED_TYPE(float, float);
		break;
	case GICE_FLOAT64:
		RED_TYPE(double, double);
		break;
	case GICE_FLOAT16:
		RED_HALF(coll_f32_to_f16, coll_f16_to_f32);
		break;
	case GICE_BFLOAT16:
		RED_HALF(coll_f32_to_bf16, coll_bf16_to_f32);
		break;
	default:
		break;
	}
}

void coll_scale(void *dst, size_t n, gice_dtype_t type, uint32_t div)
{
	switch (type) {
	case GICE_FLOAT32:
		for (size_t i = 0; i < n; i++)
			((float *)dst)[i] /= (float)div;
		break;
	case GICE_FLOAT64:
		for (size_t i = 0; i < n; i++)
			((double *)dst)[i] /= (double)div;
		break;
	case GICE_FLOAT16:
		for (size_t i = 0; i < n; i++)
			((uint16_t *)dst)[i] = coll_f32_to_f16(coll_f16_to_f32(((uint16_t *)dst)[i]) / (float)div);
		break;
	case GICE_BFLOAT16:
		for (size_t i = 0; i < n; i++)
			((uint16_t *)dst)[i] = coll_f32_to_bf16(coll_bf16_to_f32(((uint16_t *)dst)[i]) / (float)div);
		break;
	default:
		break;
	}
}
