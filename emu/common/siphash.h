/* siphash.h: SipHash-c-d (Aumasson and Bernstein, 2012), a keyed pseudo-random function over
 * short inputs, with c compression rounds per 8-byte word and d finalization rounds. SipHash-1-3
 * is the message authentication code of the wire protocol (docs/protocol.md, "Authentication");
 * SipHash-2-4 derives keys. 128-bit key, 64-bit tag. */
#ifndef GICE_SIPHASH_H
#define GICE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	uint64_t k0, k1; /* the key's two little-endian halves */
} gice_sipkey_t;

/* SipHash-2-4 of buf[0, len) under key. buf may be unaligned, and NULL when len is 0. The test
 * vectors of the reference implementation hold: key bytes 00..0f, input bytes 00..(len-1). */
uint64_t gice_siphash(const gice_sipkey_t *key, const void *buf, size_t len);
/* SipHash-1-3 of buf[0, len) under key (the rounds of Rust's SipHasher13 and CPython's string
 * hash). Its test vectors (key bytes 00..0f, input bytes 00..(len-1)) are Rust libcore's. */
uint64_t gice_siphash13(const gice_sipkey_t *key, const void *buf, size_t len);

/* One SipRound over the state (v0, v1, v2, v3). */
#define GICE_SIP_ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define GICE_SIPROUND(v0, v1, v2, v3)                                                                 \
	do {                                                                                          \
		v0 += v1; v1 = GICE_SIP_ROTL(v1, 13); v1 ^= v0; v0 = GICE_SIP_ROTL(v0, 32);           \
		v2 += v3; v3 = GICE_SIP_ROTL(v3, 16); v3 ^= v2;                                       \
		v0 += v3; v3 = GICE_SIP_ROTL(v3, 21); v3 ^= v0;                                       \
		v2 += v1; v1 = GICE_SIP_ROTL(v1, 17); v1 ^= v2; v2 = GICE_SIP_ROTL(v2, 32);           \
	} while (0)

/* SipHash-1-3 of n whole little-endian words already loaded into w (the message of 8n bytes
 * they encode): gice_siphash13 of those bytes, for a fixed n the compiler unrolls (the packet
 * MAC: no copy, no tail loop). */
static inline uint64_t gice_siphash13_words(const gice_sipkey_t *key, const uint64_t *w, size_t n)
{
	uint64_t v0 = key->k0 ^ 0x736f6d6570736575ull, v1 = key->k1 ^ 0x646f72616e646f6dull;
	uint64_t v2 = key->k0 ^ 0x6c7967656e657261ull, v3 = key->k1 ^ 0x7465646279746573ull;
	uint64_t b = (uint64_t)(8 * n) << 56;

	for (size_t i = 0; i < n; i++) {
		v3 ^= w[i];
		GICE_SIPROUND(v0, v1, v2, v3);
		v0 ^= w[i];
	}
	v3 ^= b;
	GICE_SIPROUND(v0, v1, v2, v3);
	v0 ^= b;
	v2 ^= 0xff;
	GICE_SIPROUND(v0, v1, v2, v3);
	GICE_SIPROUND(v0, v1, v2, v3);
	GICE_SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

#endif
