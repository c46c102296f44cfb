/*
 * Streams over the agent channel (ports.c): TCP connections to ports inside the sandbox and
 * terminals (a pty running bash), multiplexed by request id with flow control (protocol.h).
 */
#ifndef SBX_PORTS_H
#define SBX_PORTS_H

#include <poll.h>
#include <stddef.h>
#include <sys/types.h>

/* Handles FR_PORT_OPEN, FR_PTY_OPEN, FR_STREAM_DATA and FR_STREAM_CTL; 0 for any other type. */
int streams_frame(uint8_t type, uint32_t id, const uint8_t *p, size_t n);
/* How many poll entries streams_poll may add. */
size_t streams_count(void);
/* Adds the streams' fds to `pfds` from index `np`; returns the new count. */
size_t streams_poll(struct pollfd *pfds, size_t np);
/* Serves the entries streams_poll added (`pfds` points at the first of them). */
void streams_serve(const struct pollfd *pfds, size_t n);
/* A child process ended: a terminal's process is done once its output is read. */
void streams_reaped(pid_t pid, int status);
/* Kills every terminal's process group (the agent is exiting). */
void streams_kill_all(void);

#endif
