/* gice_stats.h: the one list of a device's counters. gice_stats_t (gice.h), the CT engine's
 * counter array, gice_device_stats, the GICE_STATS=1 line and `gice-info -s` are all generated
 * from it: a new counter is one line here (appended at the end: gice_stats_t's layout is API)
 * plus its increment, and its help in README.md's Statistics section (test_docs checks).
 *
 * GICE_STATS_LIST(X) calls X(name, from, field, help) once per counter, in gice_stats_t order:
 *   name   the gice_stats_t field (uint64_t), also the name GICE_STATS=1 and gice-info print;
 *   from   where gice_device_stats reads it: ENGINE, the device's CT engine (counted by the
 *          engine, index CT_STAT_<name>), FAULT, the device's fault injector (GICE_FAULTS),
 *          STORAGE, the device's storage engine (sto_stats_t.<name>), or POOL, the device
 *          memory pools (gauges of their state now, not counts: api_pool_stats_t.<name>);
 *   field  for FAULT, the injector's count it is (fab_fault_stats_t); '_' for ENGINE;
 *   help   one line: what is counted.
 * Every counter counts from the device's open; none is ever reset. Self-contained: no include. */
#ifndef GICE_STATS_H
#define GICE_STATS_H

/* clang-format off */
#define GICE_STATS_LIST(X)                                                                                           \
	X(tx_pkts,          ENGINE, _,          "packets sent the first time (acks and retransmits not counted)")    \
	X(rx_pkts,          ENGINE, _,          "packets received the first time (what the senders' tx_pkts count)") \
	X(tx_bytes,         ENGINE, _,          "payload bytes of the packets counted in tx_pkts")                   \
	X(rx_bytes,         ENGINE, _,          "payload bytes of the packets counted in rx_pkts")                   \
	X(ops_done,         ENGINE, _,          "operations issued on this device that succeeded")                   \
	X(ops_failed,       ENGINE, _,          "operations issued on this device that failed")                      \
	X(nacks_sent,       ENGINE, _,          "NACKs sent: requests from peers refused (key, bounds, signal)")     \
	X(acks_sent,        ENGINE, _,          "ACK packets sent")                                                  \
	X(acks_piggybacked, ENGINE, _,          "ACKs that rode on a data or response packet instead of their own")  \
	X(fab_sends,        ENGINE, _,          "fabric messages sent: packets to one peer leave bundled")           \
	X(rx_bad,           ENGINE, _,          "packets dropped as malformed or out of place")                      \
	X(rx_dup,           ENGINE, _,          "packets dropped as duplicates of ones already received")            \
	X(rx_unknown_peer,  ENGINE, _,          "packets dropped: from a device this one is not connected to")       \
	X(fired,            ENGINE, _,          "armed descriptors fired (their trigger reached the threshold)")     \
	X(tx_again,         ENGINE, _,          "sends the fabric refused for now (EAGAIN), to be retried")          \
	X(retransmits,      ENGINE, _,          "packets sent again (after a timeout or a selective ack)")           \
	X(rto_expired,      ENGINE, _,          "retransmission timeouts")                                           \
	X(fast_retransmits, ENGINE, _,          "of the retransmits, those sent early on a selective ack")           \
	X(rx_csum_bad,      ENGINE, _,          "packets dropped for a bad CRC32C")                                  \
	X(fault_drops,      FAULT,  dropped,    "injected faults: packets dropped instead of sent")                  \
	X(fault_dups,       FAULT,  duplicated, "injected faults: packets sent twice")                               \
	X(fault_reorders,   FAULT,  reordered,  "injected faults: packets held back for reordering")                 \
	X(fault_delays,     FAULT,  delayed,    "injected faults: packets held back for a delay")                    \
	X(fault_corrupts,   FAULT,  corrupted,  "injected faults: packets sent with one bit flipped")                \
	X(ops_timed_out,    ENGINE, _,          "operations failed with GICE_ERR_TIMED_OUT by the watchdog")         \
	X(peers_dead,       ENGINE, _,          "peers declared dead or hung by the watchdog")                       \
	X(ct_stalls,        ENGINE, _,          "CT stalls the watchdog saw (work and no progress)")                 \
	X(fallback_ops,     ENGINE, _,          "requests the host proxy issued for a stalled CT (GICE_ON_TIMEOUT)") \
	X(rx_bad_signal,    ENGINE, _,          "puts refused for their signal counter (not allocated, out of range)") \
	X(rndv_ops,         ENGINE, _,          "puts and gets issued here whose data moved by rendezvous (remote read or plane copy)") \
	X(rx_auth_bad,      ENGINE, _,          "packets dropped: MAC not the job's, or sent from another endpoint than the device they claim") \
	X(resp_refused,     ENGINE, _,          "requests refused (AGAIN) or NACKs not sent: their peer holds its share of the response pool") \
	X(io_reads,         STORAGE, _,         "storage path: file reads into device memory completed (either outcome)") \
	X(io_writes,        STORAGE, _,         "storage path: file writes from device memory completed (either outcome)") \
	X(io_read_bytes,    STORAGE, _,         "storage path: bytes read from files into device memory")           \
	X(io_write_bytes,   STORAGE, _,         "storage path: bytes written from device memory to files")          \
	X(io_direct_bytes,  STORAGE, _,         "storage path: of those bytes, the ones moved with O_DIRECT (no page cache)") \
	X(io_failed,        STORAGE, _,         "storage path: file operations that failed")                 \
	X(io_short,         STORAGE, _,         "storage path: short reads or writes continued where they stopped") \
	X(pool_comm_used,   POOL,   _,          "gauge: bytes allocated in the communication pool (GICE_COMM_POOL_BYTES)") \
	X(pool_comm_free,   POOL,   _,          "gauge: bytes free in the communication pool")                      \
	X(pool_comm_largest, POOL, _,      "gauge: largest free block of the communication pool (fragmentation: 1 - largest / free)") \
	X(pool_comp_used, POOL,  _,          "gauge: bytes allocated in the compute pool (gice_mem_alloc)")      \
	X(pool_comp_free, POOL,  _,          "gauge: bytes free in the compute pool")                            \
	X(pool_comp_largest, POOL, _,   "gauge: largest free block of the compute pool") \
	X(fault_paced,      FAULT,  paced,      "injected faults: sends a rate cap (rate=) refused for now") \
	X(io_opens,         STORAGE, _,         "storage path: file opens by operation (GICE_OP_FILE_OPEN) completed (either outcome)") \
	X(io_closes,        STORAGE, _,         "storage path: file closes by operation (GICE_OP_FILE_CLOSE) completed (either outcome)") \
	X(io_syncs,         STORAGE, _,         "storage path: file syncs (GICE_OP_FILE_SYNC) completed (either outcome)") \
	X(io_timeouts,      STORAGE, _,         "storage path: file operations the storage watchdog failed (no progress in GICE_TIMEOUT_MS)") \
	X(rtt_samples,      ENGINE, _,          "round-trip samples taken from ACKs that acknowledged a packet sent once") \
	X(rtt_karn_skips,   ENGINE, _,          "ACKs not sampled for the round trip: their packet had been sent more than once (Karn's rule)") \
	X(kicks_woke,       ENGINE, _,          "kicks that woke a same-host peer's sleeping CT 0 (no thread of it awake or leased to find the packets)") \
	X(kicks_leased,     ENGINE, _,          "kicks a same-host peer's issuing kernel took (its lease: GICE_CT_LEASE_US), rung only if it did not come back") \
	X(bundle_joins,     ENGINE, _,          "small puts of issuing kernels that joined the bundle the link left corked, without a pass of the link (counted as that bundle leaves)") \
	X(bundle_pushes,    ENGINE, _,          "corked bundles an issuing kernel sent on while its burst went on (every 24 puts joined), the cork kept for the rest") \
	X(tx_small_puts,    ENGINE, _,          "puts sent as entries of PUTS packets, small puts sharing one packet (GICE_CT_SMALL_PUTS)")
/* clang-format on */

/* The counters also kept per peer device (gice_device_peer_stats, GICE_STATS=1): names of
 * GICE_STATS_LIST entries, in gice_peer_stats_t order. Per peer, tx counts packets sent to it and
 * rx packets from it, the same way: the first transmission / first arrival of each sequenced
 * packet; retransmits and rx_csum_bad are the link's, the fault counts what this device's
 * injector did to packets sent to it. */
#define GICE_PEER_STATS_LIST(X)                                                                     \
	X(tx_pkts) X(rx_pkts) X(tx_bytes) X(rx_bytes) X(retransmits) X(rx_csum_bad) X(fault_drops)  \
	X(fault_dups) X(fault_reorders) X(fault_delays) X(fault_corrupts) X(fault_paced)            \
	X(rtt_samples) X(rtt_karn_skips)

/* What is kept per peer only, after those in gice_peer_stats_t: gauges of the link's round-trip
 * time, as the reliability layer measures it (a packet's first transmission to the ACK that
 * acknowledges it, the receiver's ACK delay included; Karn's rule: never from a packet sent more
 * than once). GICE_PEER_GAUGE_LIST(X) calls X(name, help); all 0 before the first sample, and
 * rtt_min_ns <= srtt_ns <= rtt_max_ns once there is one. README.md's Statistics table lists them
 * too (test_docs checks). */
/* clang-format off */
#define GICE_PEER_GAUGE_LIST(X)                                                                               \
	X(srtt_ns,    "gauge: smoothed round-trip time to the peer, ns (RFC 6298: each sample weighs 1/8)")      \
	X(rtt_min_ns, "gauge: smallest round-trip sample to the peer, ns")                                       \
	X(rtt_max_ns, "gauge: largest round-trip sample to the peer, ns")
/* clang-format on */

#endif
