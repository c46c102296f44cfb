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
#define FR_EXEC 1u   /* u32 timeoutMs, u64 capBytes, u32 flags, str cwd, str command,
                       u32 envCount, envCount x (str key, str value), str stdin */
#define FR_CANCEL 2u /* (empty) kill the process group of command `id` */
#define FR_WRITE 3u  /* u32 flags (bit0: create+truncate, else append), u32 mode, str path, str data */
#define FR_READ 4u   /* str path -> FR_DATA* then FR_OK (u64 size) | FR_ERR */
#define FR_PING 5u   /* (empty) -> FR_PONG */

/* agent -> host */
#define FR_HELLO 16u  /* id 0: u32 version, u32 pid, u32 uid, u32 maxFrame */
#define FR_STDOUT 17u /* raw bytes (already capped) */
#define FR_STDERR 18u /* raw bytes (already capped) */
#define FR_EXIT 19u   /* u8 kind (0 exited, 1 signalled), u32 code|signal, u8 timedOut,
                        u8 truncated (bit0 stdout, bit1 stderr), u32 durationMs */
#define FR_OK 20u     /* write: empty; read: u64 size */
#define FR_ERR 21u    /* u32 errno, str operation (chdir, exec, fork, open, ...), str detail */
#define FR_DATA 22u   /* file bytes of an FR_READ */
#define FR_PONG 23u

#endif
