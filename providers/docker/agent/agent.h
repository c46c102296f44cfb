/*
 * What sbx-agent.c shares with the agent's other files (ports.c): the outbound frame queue, the
 * payload reader and a few utilities. Single-threaded: everything runs in the one poll() loop.
 */
#ifndef SBX_AGENT_H
#define SBX_AGENT_H

#include <stddef.h>
#include <stdint.h>

#define OUT_HIGH (1024 * 1024) /* stop reading sources while this much is queued for the host */

/* A frame payload being read: a bad or short field sets `bad`, later reads return zeros/NULL. */
typedef struct {
  const uint8_t *p;
  size_t n, off;
  int bad;
} rd_t;

uint32_t rd_u32(rd_t *r);
const uint8_t *rd_bytes(rd_t *r, uint32_t *len);
char *rd_cstr(rd_t *r);

int64_t now_ms(void);
void *xrealloc(void *p, size_t n);
void set_nonblock(int fd);
/* Bytes queued for the host and not yet written. */
size_t out_pending(void);
void out_bytes(const void *p, size_t n);
void out_u32(uint32_t v);
void frame_head(uint8_t type, uint32_t id, size_t payload);
void send_err(uint32_t id, int err, const char *op, const char *detail);
/* The agent's environment with `pairs` ("K=V") overriding same-named entries (free the array only). */
char **merge_env(char **pairs, uint32_t npairs);

#endif
