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
#define FR_SHELL 6u  /* the payload of FR_EXEC, run in the channel's persistent bash (one per agent, started
                       on first use, restarted after it died). flags bit0: cwd is explicit (cd there first,
                       and it stays); else cwd is only where a new shell starts. env is exported into the
                       shell (and stays). Its FR_EXIT carries one more byte: SHELL_RESTARTED,
                       SHELL_ENDED. A second FR_SHELL while one runs -> FR_ERR (EBUSY, "shell-busy"). */

/* agent -> host */
#define FR_HELLO 16u  /* id 0: u32 version, u32 pid, u32 uid, u32 maxFrame, u32 flags */
#define SBX_HELLO_HAS_BASH 1u /* HELLO flag: /bin/bash is executable (persistent shells work) */
#define FR_STDOUT 17u /* raw bytes (already capped) */
#define FR_STDERR 18u /* raw bytes (already capped) */
#define FR_EXIT 19u   /* u8 kind (0 exited, 1 signalled), u32 code|signal, u8 timedOut,
                        u8 truncated (bit0 stdout, bit1 stderr), u32 durationMs
                        [FR_SHELL only: u8 shell flags, SHELL_* below] */
#define FR_OK 20u     /* write: empty; read: u64 size */
#define FR_ERR 21u    /* u32 errno, str operation (chdir, exec, fork, open, ...), str detail */
#define FR_DATA 22u   /* file bytes of an FR_READ */
#define FR_PONG 23u

/* FR_EXIT shell flags of an FR_SHELL command. */
#define SHELL_RESTARTED 1u /* the command ran in a shell that does not hold the state of the previous
                              shell call in this container: that shell died (exit, exec, OOM, kill) or
                              was another channel's */
#define SHELL_ENDED 2u     /* the shell itself ended during this command (its exit status is the result) */

#endif
