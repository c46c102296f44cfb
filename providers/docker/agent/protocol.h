/*
 * sbx-agent wire protocol (mirrored by providers/docker/protocol.ts; keep both in step).
 *
 * Every frame, in both directions:  u32 len | u8 type | u32 id | payload[len - 5]
 * All integers are big-endian. Strings are u32 length + bytes (no NUL). `id` names the request a
 * frame belongs to; the host picks ids, the agent echoes them.
 */
#ifndef SBX_PROTOCOL_H
#define SBX_PROTOCOL_H

#define SBX_PROTOCOL_VERSION 1u
/* Largest frame the agent accepts from the host (stdin of one command, one file chunk). */
#define SBX_MAX_FRAME (64u * 1024u * 1024u)

/* host -> agent */
#define F_EXEC 1u   /* u32 timeoutMs, u64 capBytes, u32 flags, str cwd, str command,
                       u32 envCount, envCount x (str key, str value), str stdin */
#define F_CANCEL 2u /* (empty) kill the process group of command `id` */
#define F_WRITE 3u  /* u32 flags (bit0: create+truncate, else append), u32 mode, str path, str data */
#define F_READ 4u   /* str path -> F_DATA* then F_OK (u64 size) | F_ERR */
#define F_PING 5u   /* (empty) -> F_PONG */

/* agent -> host */
#define F_HELLO 16u  /* id 0: u32 version, u32 pid, u32 uid, u32 maxFrame */
#define F_STDOUT 17u /* raw bytes (already capped) */
#define F_STDERR 18u /* raw bytes (already capped) */
#define F_EXIT 19u   /* u8 kind (0 exited, 1 signalled), u32 code|signal, u8 timedOut,
                        u8 truncated (bit0 stdout, bit1 stderr), u32 durationMs */
#define F_OK 20u     /* write: empty; read: u64 size */
#define F_ERR 21u    /* u32 errno, str operation (chdir, exec, fork, open, ...), str detail */
#define F_DATA 22u   /* file bytes of an F_READ */
#define F_PONG 23u

#endif
