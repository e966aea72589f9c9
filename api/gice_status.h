/* gice_status.h: status codes shared by every gice call and every completion record. */
#ifndef GICE_STATUS_H
#define GICE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X-macro: the enum and its name table stay in step. Values are never renumbered: they travel
 * in packets (ACK status) and live in completion records. */
#define GICE_STATUS_LIST(X)                                                          \
	X(GICE_OK, 0, "success")                                                     \
	X(GICE_INPROGRESS, 1, "operation in progress")                               \
	X(GICE_ERR_INVALID, -1, "invalid argument")                                  \
	X(GICE_ERR_NO_MEMORY, -2, "out of memory")                                   \
	X(GICE_ERR_BAD_KEY, -3, "unknown or revoked memory key")                     \
	X(GICE_ERR_OUT_OF_BOUNDS, -4, "access outside the registered region")        \
	X(GICE_ERR_UNREGISTERED, -5, "memory is not registered")                     \
	X(GICE_ERR_TIMED_OUT, -6, "timed out")                                       \
	X(GICE_ERR_PEER_DEAD, -7, "peer is dead or unreachable")                     \
	X(GICE_ERR_BUSY, -8, "resource busy")                                        \
	X(GICE_ERR_AGAIN, -9, "resource temporarily unavailable, try again")         \
	X(GICE_ERR_NOT_FOUND, -10, "no such object")                                 \
	X(GICE_ERR_UNSUPPORTED, -11, "operation not supported")                      \
	X(GICE_ERR_BAD_PACKET, -12, "malformed packet")                              \
	X(GICE_ERR_FABRIC, -13, "fabric (libfabric) error")                          \
	X(GICE_ERR_IO, -14, "I/O error")                                             \
	X(GICE_ERR_CANCELED, -15, "operation canceled")                              \
	X(GICE_ERR_CT_STALLED, -16, "communication tile stalled")                    \
	X(GICE_ERR_OVERFLOW, -17, "queue or table full")                             \
	X(GICE_ERR_NO_DEVICE, -18, "no such device")                                 \
	X(GICE_ERR_CONFIG, -19, "bad configuration value")                           \
	X(GICE_ERR_PEER_HUNG, -20, "peer process is alive but not responding")       \
	X(GICE_ERR_ABORTED, -21, "device aborted")                                   \
	X(GICE_ERR_NO_SPACE, -22, "no space left on the storage device")             \
	X(GICE_ERR_ACCESS, -23, "permission denied or file not open for this access")

typedef enum {
#define GICE_STATUS_ENUM_(name, val, str) name = val,
	GICE_STATUS_LIST(GICE_STATUS_ENUM_)
#undef GICE_STATUS_ENUM_
} gice_status_t;

/* Name ("GICE_ERR_BAD_KEY") and one-line meaning of a status; never NULL. */
const char *gice_status_name(int status);
const char *gice_status_str(int status);

#ifdef __cplusplus
}
#endif
#endif
