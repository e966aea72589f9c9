/* crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of iSCSI, ext4
 * and SCTP. The SSE4.2 crc32 instruction computes it when the CPU has one (checked once, at the
 * first call); otherwise a slicing-by-8 table does. */
#ifndef GICE_CRC32C_H
#define GICE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of buf[0, len) continuing from crc (0 to start). The initial and final inversion
 * happen inside, so calls chain: gice_crc32c(gice_crc32c(0, a, n), b, m) equals the CRC of a
 * followed by b. gice_crc32c(0, "123456789", 9) == 0xE3069283. buf may be unaligned, and NULL
 * when len is 0. Never fails. */
uint32_t gice_crc32c(uint32_t crc, const void *buf, size_t len);

/* The two implementations behind gice_crc32c, for tests and benchmarks: the table one works
 * everywhere; the hardware one only when gice_crc32c_hw_available() is 1 (x86-64 with SSE4.2),
 * and otherwise falls back to the table. */
uint32_t gice_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t gice_crc32c_hw(uint32_t crc, const void *buf, size_t len);
int gice_crc32c_hw_available(void);

#endif
