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

#endif
