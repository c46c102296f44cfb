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

/* Streams (ports.c): byte streams multiplexed on the channel, each named by its request id: a TCP
 * connection to a port inside the sandbox, or a terminal. Flow control both ways: a side sends at
 * most STREAM_WINDOW bytes of FR_STREAM_DATA its peer has not acknowledged (FR_STREAM_CTL ACK /
 * FR_STREAM_ACK), so no stream grows a buffer past that and command frames are never held up. */
#define FR_PORT_OPEN 11u   /* u32 port: connect to 127.0.0.1:port -> FR_STREAM_OPENED | FR_ERR (connect) */
#define FR_PTY_OPEN 12u    /* u32 cols, u32 rows, str cwd, str command (empty: an interactive bash),
                              u32 envCount, envCount x (str key, str value) -> FR_STREAM_OPENED | FR_ERR */
#define FR_STREAM_DATA 13u /* bytes for the stream (socket / terminal input) */
#define FR_STREAM_CTL 14u  /* u8 op (STREAM_*), then per op: ACK u32 bytes; RESIZE u32 cols, u32 rows */

/* agent -> host */
#define FR_HELLO 16u  /* id 0: u32 version, u32 pid, u32 uid, u32 maxFrame, u32 flags */
#define SBX_HELLO_HAS_BASH 1u /* HELLO flag: /bin/bash is executable (persistent shells work) */
#define SBX_HELLO_PART_WRITES 2u /* HELLO flag: WRITE takes part files (flags 2 and 4, below) */
#define FR_STDOUT 17u /* raw bytes: at most the head of the cap (see FR_TAIL) */
#define FR_STDERR 18u /* raw bytes: at most the head of the cap (see FR_TAIL) */
#define FR_EXIT 19u   /* u8 kind (0 exited, 1 signalled), u32 code|signal, u8 timedOut,
                        u8 truncated (bit0 stdout, bit1 stderr), u32 durationMs
                        [FR_SHELL only: u8 shell flags, SHELL_* below] */
#define FR_OK 20u     /* write: empty; read: u64 size */
#define FR_ERR 21u    /* u32 errno, str operation (chdir, exec, fork, open, ...), str detail */
#define FR_DATA 22u   /* file bytes of an FR_READ */
#define FR_PONG 23u
#define FR_TAIL 24u   /* before FR_EXIT, for each stream longer than its head (the first capBytes - T bytes,
                        T = min(capBytes / 2, 256 KiB)): u8 stream (0 stdout, 1 stderr), u64 droppedBytes,
                        then the stream's last bytes (at most T). The stream is the head (its STDOUT /
                        STDERR frames), a marker when droppedBytes > 0, then these bytes. */
#define FR_STREAM_OPENED 30u /* u32 pid of the terminal's process (0 for a port) */
#define FR_STREAM_OUT 31u    /* bytes from the stream (socket / terminal output) */
#define FR_STREAM_EOF 32u    /* (empty) the sandbox side sends no more bytes */
#define FR_STREAM_CLOSED 33u /* u8 kind (0 exited, 1 signalled, 2 closed), u32 code|signal|errno: the
                                stream is gone (a terminal: its process ended, with its status) */
#define FR_STREAM_ACK 34u    /* u32 bytes of FR_STREAM_DATA written into the sandbox side */

/* FR_STREAM_CTL ops. */
#define STREAM_EOF 0u    /* the host sends no more bytes (a port: shutdown(SHUT_WR) once drained) */
#define STREAM_CLOSE 1u  /* close now; a terminal's process group is killed -> FR_STREAM_CLOSED */
#define STREAM_RESIZE 2u /* terminal window size (TIOCSWINSZ; the foreground job gets SIGWINCH) */
#define STREAM_ACK 3u    /* the host took u32 more bytes of FR_STREAM_OUT */
#define STREAM_WINDOW (256u * 1024u) /* unacknowledged bytes a side may send on one stream */

/* FR_EXIT shell flags of an FR_SHELL command. */
#define SHELL_RESTARTED 1u /* the command ran in a shell that does not hold the state of the previous
                              shell call in this container: that shell died (exit, exec, OOM, kill) or
                              was another channel's */
#define SHELL_ENDED 2u     /* the shell itself ended during this command (its exit status is the result) */

#endif
