/* ct_proto.h: the gice wire protocol (docs/protocol.md). Every packet is one 96-byte header,
 * little-endian fixed-width fields, magic and version first, reserved fields zero, followed by
 * payload_len bytes. The op enum is never renumbered. fabric/ carries packets as opaque bytes;
 * ct_proto_parse is a pure function over bytes (the fuzzer's entry point).
 */
#ifndef GICE_CT_PROTO_H
#define GICE_CT_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define CT_PROTO_MAGIC 0x45434947u /* "GICE" little-endian */
#define CT_PROTO_VERSION 6 /* 2: piggybacked acks, bundles, rendezvous gets (GET_RNDV, GET_GO);
			     * 3: the job's MAC (mac), csum and ack moved to make room;
			     * 4: PUT_RTS and GET_GO carry a read grant (CT_GRANT_BYTES payload),
			     *    mac is SipHash-1-3;
			     * 5: ... or no payload: the bytes are on the NVLink plane;
			     * 6: PUTS, small puts sharing one packet */
#define CT_HDR_BYTES 96
#define CT_MAX_PAYLOAD (1u << 20) /* largest MTU accepted */
#define CT_MTU_MIN 256 /* smallest packet size a device uses (GICE_MTU, connections) */

/* X-macro keeps the packet-type enum and its name table in step. */
#define CT_PKT_LIST(X)                                                             \
	X(CT_PKT_PUT, 1, "PUT")                 /* payload to (rkey, roff+moff) */ \
	X(CT_PKT_GET_REQ, 2, "GET_REQ")         /* ask for value bytes at (rkey, roff) */ \
	X(CT_PKT_GET_RESP, 3, "GET_RESP")       /* payload of a get; aux = request msg id */ \
	X(CT_PKT_ATOMIC_REQ, 4, "ATOMIC_REQ")   /* fetch-add or compare-swap 8 bytes */ \
	X(CT_PKT_ATOMIC_RESP, 5, "ATOMIC_RESP") /* value = old word; aux = request msg id */ \
	X(CT_PKT_ACK, 6, "ACK")                 /* psn = every psn below it received */ \
	X(CT_PKT_NACK, 7, "NACK")               /* msg_id failed with status */ \
	X(CT_PKT_PUT_RTS, 8, "PUT_RTS")         /* put of msg_len bytes: read them (grant; plane: aux) */ \
	X(CT_PKT_PUT_DONE, 9, "PUT_DONE")       /* the read of PUT_RTS aux ended with status */ \
	X(CT_PKT_HEARTBEAT, 10, "HEARTBEAT")    /* unsequenced: "still here" when idle */ \
	X(CT_PKT_BYE, 11, "BYE")                /* unsequenced: the sender's device is closing */ \
	X(CT_PKT_GET_RNDV, 12, "GET_RNDV")      /* get the requester reads itself once GET_GO says so */ \
	X(CT_PKT_GET_GO, 13, "GET_GO")          /* GET_RNDV validated: read msg_len bytes (grant; plane: value) */ \
	X(CT_PKT_FAULT, 14, "FAULT")            /* unsequenced: the receiver's rank kills or hangs itself */ \
	X(CT_PKT_GET_DONE, 15, "GET_DONE")      /* unsequenced: the read of GET_GO aux (msg id) ended */ \
	X(CT_PKT_PUTS, 16, "PUTS")              /* value one-packet puts, msg_id up: entries (below) */

enum ct_pkt_op {
#define CT_PKT_ENUM_(n, v, s) n = v,
	CT_PKT_LIST(CT_PKT_ENUM_)
#undef CT_PKT_ENUM_
	CT_PKT_MAX_
};

/* FAULT: what the receiver's rank does to itself (value), aux ns after the packet arrives. Sent by
 * gice_faults_set's kill_rank / hang_rank of a rank on another machine; obeyed only when it
 * carries the job's MAC (GICE_CT_AUTH on at both ends). */
enum ct_fault_action {
	CT_FAULT_KILL = 1, /* SIGKILL the process */
	CT_FAULT_HANG = 2, /* every device of the process stops: no progress, no heartbeats */
};

enum ct_pkt_flags {
	CT_HF_FIRST = 1u << 0,   /* first packet of its message */
	CT_HF_LAST = 1u << 1,    /* last packet of its message */
	CT_HF_SIGNAL = 1u << 2,  /* apply (sig_id, value) when the message has landed */
	CT_HF_SIG_ADD = 1u << 3, /* signal adds value (else sets it) */
	CT_HF_STRONG = 1u << 4,  /* signal waits until every earlier message from this peer landed */
	CT_HF_CSWAP = 1u << 5,   /* ATOMIC_REQ: compare (aux) and swap (value); else fetch-add */
	CT_HF_CSUM = 1u << 6,    /* csum holds the CRC32C of header (csum zero) and payload */
	CT_HF_ACK = 1u << 7,     /* sequenced packet: ack holds a cumulative ack (piggybacked) */
};

/* Host-order view of the header. On the wire every field is little-endian at the offset in
 * its comment; ct_proto_build/parse convert. */
typedef struct {
	uint32_t magic;       /*  0 CT_PROTO_MAGIC */
	uint8_t version;      /*  4 CT_PROTO_VERSION */
	uint8_t op;           /*  5 enum ct_pkt_op */
	uint8_t flags;        /*  6 enum ct_pkt_flags */
	uint8_t qos;          /*  7 QoS class of the connection */
	uint32_t src_gid;     /*  8 sending device (global id) */
	uint32_t dst_gid;     /* 12 receiving device */
	uint32_t conn_id;     /* 16 sender's connection id */
	uint32_t msg_id;      /* 20 per (src, dst) message sequence */
	uint32_t psn;         /* 24 per (src, dst) packet sequence; ACK: cumulative (every psn
			       *    below it received) */
	uint32_t payload_len; /* 28 bytes after the header */
	uint64_t rkey;        /* 32 target region key */
	uint64_t roff;        /* 40 offset of the message start in the region */
	uint32_t msg_len;     /* 48 payload bytes of the whole message */
	uint32_t moff;        /* 52 offset of this payload in the message */
	uint32_t sig_id;      /* 56 target signal counter (CT_HF_SIGNAL) */
	int32_t status;       /* 60 NACK / responses: gice_status_t */
	uint64_t value;       /* 64 signal value, atomic operand or old value, get length;
			       *    GET_GO: offset of the data in the sender's device memory;
			       *    ACK: the acker's next psn towards us (completion fence) */
	uint64_t aux;         /* 72 atomic compare; responses: request msg id; ACK: selective
			       *    ack, bit i = psn (cumulative + 1 + i) received */
	uint32_t csum;        /* 80 CRC32C of header and payload when enabled; else zero */
	uint32_t ack;         /* 84 with CT_HF_ACK: every psn below it received from the
			       *    receiver (a cumulative ACK riding on this packet); else zero */
	uint64_t mac;         /* 88 SipHash-1-3 under the job's key of bytes [0, 88) with csum
			       *    taken as zero (ct_proto_mac); zero when GICE_CT_AUTH=0 */
} ct_hdr_t;

/* The payload of PUT_RTS and GET_GO: a read grant, where the reader reads the message's bytes
 * over the provider — the provider key of the sender's registered region that holds them and
 * the remote address of their first byte (u64 key, u64 addr, little-endian). None (payload_len
 * 0) when the sender maps the reader on the NVLink plane: the reader copies from aux (PUT_RTS)
 * or value (GET_GO), the device offset, which either form carries. */
#define CT_GRANT_BYTES 16
void ct_proto_grant_build(uint64_t key, uint64_t addr, void *buf);
void ct_proto_grant_parse(const void *buf, uint64_t *key, uint64_t *addr);

/* The payload of PUTS: value (1..CT_PUTS_MAX) whole one-packet puts to the receiver, each a
 * request message of its own, msg_ids msg_id, msg_id + 1, ... in order, back to back. Each is a
 * CT_PUT_ENTRY_BYTES entry header (u64 rkey, u64 roff, u64 value, u32 sig_id, u16 len, u8
 * flags: CT_HF_SIGNAL, CT_HF_SIG_ADD, CT_HF_STRONG, u8 zero; little-endian) followed by its len
 * bytes, written at (rkey, roff). The packet's msg_len is its payload_len, moff 0. */
#define CT_PUT_ENTRY_BYTES 32
#define CT_PUTS_MAX 64u
#define CT_PUT_ENTRY_FLAGS (CT_HF_SIGNAL | CT_HF_SIG_ADD | CT_HF_STRONG)
typedef struct {
	uint64_t rkey, roff, value;
	uint32_t sig_id;
	uint16_t len;
	uint8_t flags;
	const uint8_t *data; /* parse: its len bytes in the packet */
} ct_put_entry_t;
/* Encode entry pe with its len bytes from data at buf; returns the bytes written. */
size_t ct_proto_entry_build(const ct_put_entry_t *pe, const void *data, void *buf);
/* Decode the entry at buf of a PUTS payload that ct_proto_parse accepted; returns its length. */
size_t ct_proto_entry_parse(const void *buf, ct_put_entry_t *pe);

/* Encode h into CT_HDR_BYTES bytes at buf. */
void ct_proto_build(const ct_hdr_t *h, void *buf);
/* Decode and validate len bytes at buf: length, magic, version, op, known flags, ack only with its flag,
 * payload_len == len - CT_HDR_BYTES <= CT_MAX_PAYLOAD, moff + payload_len <= msg_len for data
 * packets, a grant or nothing on PUT_RTS and GET_GO, well-formed entries on PUTS, no payload on
 * other control packets. GICE_OK and *h filled, or GICE_ERR_BAD_PACKET with
 * *why (may be NULL) naming the failed check. Touches nothing but *h and *why. */
int ct_proto_parse(const void *buf, size_t len, ct_hdr_t *h, const char **why);
/* A fabric message carries one or more packets back to back (a bundle). The length of the
 * first packet of the len bytes at buf (96 + its payload_len), or 0 when they do not hold a
 * whole packet. Reads nothing but the length field. */
size_t ct_proto_next(const void *buf, size_t len);
const char *ct_pkt_name(unsigned op);
/* CRC32C of a packet (header with the csum field taken as zero, then payload), as carried in
 * csum under CT_HF_CSUM. hdr is the encoded header. */
uint32_t ct_proto_csum(const void *hdr, const void *payload, size_t plen);
/* Check the csum of an encoded packet of len bytes that carries CT_HF_CSUM: 1 if it matches. */
int ct_proto_csum_ok(const void *buf, size_t len);
/* The MAC of an encoded header under key: SipHash-1-3 of its first CT_HDR_MAC_OFF bytes, the
 * csum field taken as zero (so a checksum can be added after the MAC, and checked first). */
uint64_t ct_proto_mac(const void *hdr, const uint64_t key[2]);
/* The MAC key of a job from its secret (the bootstrap's): two SipHash outputs under the secret, so
 * what signs packets is never the secret itself. Every device of the job derives the same key. */
void ct_proto_job_key(uint64_t secret, uint64_t key[2]);
/* Write the MAC under key into encoded header hdr (before its csum is computed). */
void ct_proto_sign(void *hdr, const uint64_t key[2]);
/* 1 if encoded header hdr carries the MAC under key. Constant time in the tag. */
int ct_proto_mac_ok(const void *hdr, const uint64_t key[2]);
/* Byte offset of the flags, csum and mac fields in an encoded header. */
#define CT_HDR_FLAGS_OFF 6
#define CT_HDR_CSUM_OFF 80
#define CT_HDR_MAC_OFF 88

#endif
