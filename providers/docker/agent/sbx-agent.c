/*
 * sbx-agent: the long-lived channel between the host and one sandbox container.
 *
 *   sbx-agent          speak the frame protocol (protocol.h) on stdin/stdout until stdin ends
 *   sbx-agent --direct ... on the host's Unix socket named on the first stdin line (direct.c)
 *   sbx-agent --init   container main process: reap orphans, exit on SIGTERM/SIGINT
 *   sbx-agent --proc-* background processes of the sandbox (procs.c)
 *   sbx-agent --proc-fs-* file metadata and directory watches for the E2B endpoint (fsops.c)
 *   sbx-agent --init --egress-forward PORT SOCKET
 *                      ... and forward 127.0.0.1:PORT to the Unix socket SOCKET (forward.c)
 *   sbx-agent --init --idle-exit-ms N
 *                      ... and exit (code SBX_IDLE_EXIT_CODE, taking the container down) once no
 *                      process has been attached from outside the container (a `docker exec`: an
 *                      agent channel, whose commands are its children, or an operator's shell) for
 *                      N ms. The host passes N = the profile's idle TTL plus a slack, so a sandbox
 *                      whose fleet is gone ends itself; without the option nothing changes.
 *
 * One single-threaded poll() loop. Each command runs as `bash -c` (or `sh -c`) in its own
 * session / process group; timeouts, cancels and the end of the host connection kill that whole
 * group. FR_SHELL commands instead run in one long-lived bash per agent (see "the persistent shell"
below): state stays, a timeout kills what the command started, not the shell. Output is capped per stream: past the cap the pipe is still drained (the process never
 * blocks on a full pipe); the host gets the head live, the last bytes (a tail ring) in FR_TAIL
 * before FR_EXIT, and what lies between is dropped (see "output past the cap"). Memory is bounded: one inbound frame of at
 * most SBX_MAX_FRAME, and pipes/files are only read while the outbound queue is below OUT_HIGH.
 *
 * Build: gcc -static -O2 -o sbx-agent sbx-agent.c ports.c   (ports.c: streams to ports and terminals)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "ports.h"
#include "protocol.h"

#include "fsops.c"

#define CHUNK 65536
#define MAX_CMDS 512
#define TERM_GRACE_MS 200 /* SIGTERM at the deadline, SIGKILL this much later */
#define LINGER_MS 100     /* after the leader exits, wait this long for pipe EOF */
#define REKILL_MS 20 /* after a kill, what the shell still starts is killed this often */
#define SHELL_KILL_MS 2000 /* a shell whose command ignores the kill (a builtin loop) dies this much later; long
                             enough that a shell on a loaded machine or under gVisor gets back in time */
/* Names the shell that ran the container's last FR_SHELL command, across channels. */
#define SHELL_OWNER_FILE "/tmp/.sbx-shell-owner"
/* Past the cap a stream keeps its last min(cap / 2, TAIL_MAX) bytes (src/sandbox/output-cap.ts). */
#define TAIL_MAX (256 * 1024)
#define SBX_IDLE_EXIT_CODE 75 /* --init ended the container after --idle-exit-ms with nothing attached */

extern char **environ;

typedef struct {
  uint8_t *data;
  size_t off, len, cap;
} buf_t;

/* The last bytes of a stream past its head (allocated once the stream gets there). */
typedef struct {
  uint8_t *data;
  size_t size, start, len;
} ring_t;

typedef struct cmd {
  struct cmd *next;
  uint32_t id;
  pid_t pid;
  int fd_out, fd_err, fd_in;
  uint8_t *in_data;
  size_t in_len, in_off;
  uint64_t cap, n_out, n_err;
  int trunc_out, trunc_err, timed_out, reaped, status;
  ring_t tail[2]; /* stdout, stderr */
  int64_t start, deadline, kill_at, linger_until;
  /* FR_SHELL commands only (is_shell): they run in `shell` below, in_data is their control line. */
  int is_shell, cancelled, got_mark[2], rc, shell_flags;
  int64_t shell_kill_at, rekill_at;
  char mark[2][48];
  uint8_t hold[2][128];
  size_t hold_len[2];
  char *stdin_path;
  char *cwd;
} cmd_t;

typedef struct reader {
  struct reader *next;
  uint32_t id;
  int fd;
  uint64_t total;
} reader_t;

/* A file write running in a child process, so that a write that blocks cannot stall the loop. */
typedef struct writer {
  struct writer *next;
  uint32_t id;
  pid_t pid;
  int fd; /* read end of the child's report pipe */
  int cancelled;
  char *path;
  char *part; /* the part file of an upload (removed if the child dies before its report) */
} writer_t;

static buf_t inq, outq;
static cmd_t *cmds;
static reader_t *readers;
static writer_t *writers;
static int ncmds;
static int sfd = -1;
static uint8_t chunk[CHUNK];

/* ---------- utilities ---------- */

int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The channel's persistent bash (FR_SHELL): one per agent, started on first use. */
static struct {
  pid_t pid; /* 0: none */
  int alive;
  int fd_ctl, fd_out, fd_err;
  int started_before; /* a shell ran on this channel before */
  uint64_t seq;
  cmd_t *cur;
  char token[64]; /* what this shell last wrote to SHELL_OWNER_FILE */
} shell = {0, 0, -1, -1, -1, 0, 0, NULL, ""};

static void kill_all_and_exit(int code) {
  if (shell.pid > 0) kill(-shell.pid, SIGKILL);
  for (cmd_t *c = cmds; c; c = c->next) kill(-c->pid, SIGKILL);
  for (writer_t *w = writers; w; w = w->next) kill(w->pid, SIGKILL);
  streams_kill_all();
  _exit(code);
}

static void fatal(const char *what) {
  fprintf(stderr, "sbx-agent: %s: %s\n", what, strerror(errno));
  kill_all_and_exit(2);
}

void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) fatal("out of memory");
  return q;
}

void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) fatal("fcntl");
}

static size_t pending(const buf_t *b) { return b->len - b->off; }

size_t out_pending(void) { return pending(&outq); }

/* Makes room for `extra` more bytes at the end, compacting before growing. */
static void reserve(buf_t *b, size_t extra) {
  if (b->off == b->len) b->off = b->len = 0;
  if (b->len + extra <= b->cap) return;
  if (b->off > 0) {
    memmove(b->data, b->data + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
    if (b->len + extra <= b->cap) return;
  }
  size_t ncap = b->cap ? b->cap : CHUNK;
  while (ncap < b->len + extra) ncap *= 2;
  b->data = xrealloc(b->data, ncap);
  b->cap = ncap;
}

/* Gives back memory after a large frame once the buffer is empty. */
static void shrink(buf_t *b) {
  if (pending(b) == 0 && b->cap > 4 * CHUNK) {
    free(b->data);
    b->data = NULL;
    b->off = b->len = b->cap = 0;
  }
}

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

void out_bytes(const void *p, size_t n) {
  reserve(&outq, n);
  memcpy(outq.data + outq.len, p, n);
  outq.len += n;
}

void out_u32(uint32_t v) {
  uint8_t b[4];
  put_u32(b, v);
  out_bytes(b, 4);
}

static void out_str(const char *s) {
  out_u32((uint32_t)strlen(s));
  out_bytes(s, strlen(s));
}

/*
 * Output of running commands may wait this long in the outbound queue (µs), and no more than
 * OUT_HOLD_BYTES of it, for what follows: a short command ends within it, and its output and EXIT then
 * leave in one write, arriving at the host as one read (docs/providers.md). Any other frame is written
 * at once, with what waits before it.
 */
#define OUT_HOLD_US 1000
#define OUT_HOLD_BYTES (64u << 10)
/* Until when the queued output may wait (0: nothing waits), and whether a frame that may not wait is queued. */
static int64_t hold_until_us;
static int flush_now;
/* Whether the queue waits this turn of the loop (then the poll asks no POLLOUT). */
static int holding;

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void frame_head(uint8_t type, uint32_t id, size_t payload) {
  if (type != FR_STDOUT && type != FR_STDERR) flush_now = 1;
  else if (!hold_until_us) hold_until_us = now_us() + OUT_HOLD_US;
  uint8_t h[9];
  put_u32(h, (uint32_t)(payload + 5));
  h[4] = type;
  put_u32(h + 5, id);
  out_bytes(h, 9);
}

void send_err(uint32_t id, int err, const char *op, const char *detail) {
  frame_head(FR_ERR, id, 4 + 4 + strlen(op) + 4 + strlen(detail));
  out_u32((uint32_t)err);
  out_str(op);
  out_str(detail);
}

static void send_u64(uint8_t type, uint32_t id, uint64_t v) {
  frame_head(type, id, 8);
  out_u32((uint32_t)(v >> 32));
  out_u32((uint32_t)v);
}

/* Writes as much of the outbound queue as the pipe takes; the host being gone ends everything. */
static void flush_out(void) {
  while (pending(&outq) > 0) {
    ssize_t n = write(STDOUT_FILENO, outq.data + outq.off, pending(&outq));
    if (n > 0) {
      outq.off += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    } else {
      kill_all_and_exit(0); /* EPIPE: the host connection is gone */
    }
  }
  shrink(&outq);
}

/*
 * Writes the outbound queue, unless all it holds is command output younger than OUT_HOLD_US (see
 * there): then it waits, and the returned poll timeout (from `timeout`, -1 for none) ends with the hold.
 */
static int flush_or_hold(int timeout) {
  holding = 0;
  if (pending(&outq) == 0) {
    hold_until_us = 0, flush_now = 0;
    return timeout;
  }
  int64_t now = now_us();
  if (!flush_now && pending(&outq) < OUT_HOLD_BYTES && now < hold_until_us) {
    holding = 1;
    int left = (int)((hold_until_us - now + 999) / 1000);
    return timeout < 0 || left < timeout ? left : timeout;
  }
  flush_out();
  if (pending(&outq) == 0) hold_until_us = 0, flush_now = 0;
  return timeout;
}

/* ---------- payload reader ---------- */

uint32_t rd_u32(rd_t *r) {
  if (r->n - r->off < 4) return r->bad = 1, 0;
  const uint8_t *p = r->p + r->off;
  r->off += 4;
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

const uint8_t *rd_bytes(rd_t *r, uint32_t *len) {
  *len = rd_u32(r);
  if (r->bad || r->n - r->off < *len) return r->bad = 1, NULL;
  const uint8_t *p = r->p + r->off;
  r->off += *len;
  return p;
}

/* A NUL-terminated copy of a string field; NULL on malformed input or embedded NUL. */
char *rd_cstr(rd_t *r) {
  uint32_t len;
  const uint8_t *p = rd_bytes(r, &len);
  if (!p || memchr(p, 0, len)) return r->bad = 1, NULL;
  char *s = xrealloc(NULL, (size_t)len + 1);
  memcpy(s, p, len);
  s[len] = 0;
  return s;
}

/* ---------- commands ---------- */

static cmd_t *find_cmd(uint32_t id) {
  for (cmd_t *c = cmds; c; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* Child side of a spawn: never returns. Failures before exec travel back on `errfd`. */
/*
 * Child side of a fork or vfork, before its exec: a session of its own, the three pipes as stdin / stdout /
 * stderr, default signal dispositions and mask, the working directory. A chdir failure is reported on
 * `errfd` (kind 1) and ends the child; -1 when the pipes could not be set up.
 */
static int child_setup(int in_r, int out_w, int err_w, int errfd, const char *cwd) {
  setsid();
  if (dup2(in_r, 0) < 0 || dup2(out_w, 1) < 0 || dup2(err_w, 2) < 0) return -1;
  for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (cwd[0] && chdir(cwd) < 0) {
    uint32_t msg[2] = {1, (uint32_t)errno};
    (void)!write(errfd, msg, sizeof msg);
    _exit(127);
  }
  return 0;
}

static void child(int in_r, int out_w, int err_w, int errfd, const char *cwd, const char *command,
                  char **envp) {
  if (child_setup(in_r, out_w, err_w, errfd, cwd) < 0) goto fail_exec;
  char *argv_bash[] = {"bash", "-c", (char *)command, NULL};
  execve("/bin/bash", argv_bash, envp);
  char *argv_sh[] = {"sh", "-c", (char *)command, NULL};
  execve("/bin/sh", argv_sh, envp);
fail_exec:;
  uint32_t msg[2] = {2, (uint32_t)errno};
  (void)!write(errfd, msg, sizeof msg);
  _exit(127);
}

/*
 * Starts `command` in a child (see child): its pid, -1 when it could not be made. vfork, not fork: the
 * child only sets up its descriptors and session and execs, so copying the agent's page tables (what a
 * fork costs; in a VM, a good part of a command's spawn) would be wasted. The agent waits until the
 * exec, or the child's end. Every signal is blocked across the vfork so that no handler of the agent
 * runs in the child, which shares the agent's memory until its exec; the child resets the dispositions
 * and then unblocks them (child_setup). A function of its own, so that no local of the caller lives
 * across the vfork.
 */
static __attribute__((noinline)) pid_t spawn_command(int in_r, int out_w, int err_w, int errfd, const char *cwd,
                                                     const char *command, char **envp) {
  sigset_t all, before;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &before);
  pid_t pid = vfork();
  if (pid == 0) child(in_r, out_w, err_w, errfd, cwd, command, envp);
  int saved = errno;
  sigprocmask(SIG_SETMASK, &before, NULL);
  errno = saved;
  return pid;
}

/* The agent's environment with `pairs` ("K=V") overriding same-named entries. */
char **merge_env(char **pairs, uint32_t npairs) {
  size_t base = 0;
  while (environ[base]) base++;
  char **envp = xrealloc(NULL, (base + npairs + 1) * sizeof *envp);
  size_t k = 0;
  for (size_t i = 0; i < base; i++) {
    const char *eq = strchr(environ[i], '=');
    size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
    int overridden = 0;
    for (uint32_t j = 0; j < npairs && !overridden; j++)
      overridden = strncmp(pairs[j], environ[i], klen) == 0 && pairs[j][klen] == '=';
    if (!overridden) envp[k++] = environ[i];
  }
  for (uint32_t j = 0; j < npairs; j++) envp[k++] = pairs[j];
  envp[k] = NULL;
  return envp;
}

/* ---------- output past the cap ---------- */

/* A stream capped at `cap` sends its head (the first cap - tail bytes) live; past the head its last
 * `tail` bytes are kept in a ring and sent in FR_TAIL at the end, with the count of the bytes
 * between (the host joins head, a marker when some were dropped, and tail). So at most `cap`
 * bytes per stream cross the channel. */
static size_t tail_size(uint64_t cap) {
  uint64_t t = cap / 2;
  return t > TAIL_MAX ? TAIL_MAX : (size_t)t;
}

static void ring_put(ring_t *r, size_t size, const uint8_t *p, size_t n) {
  if (size == 0 || n == 0) return;
  if (!r->data) r->data = xrealloc(NULL, size), r->size = size;
  if (n > size) p += n - size, n = size;
  size_t end = (r->start + r->len) % size, filled = r->len + n;
  for (size_t k; n > 0; p += k, n -= k, end = (end + k) % size) {
    k = size - end < n ? size - end : n;
    memcpy(r->data + end, p, k);
  }
  if (filled > size) r->start = end, r->len = size;
  else r->len = filled;
}

/* Sends `n` bytes of stream `s` (0 stdout, 1 stderr) live up to the head; bytes past it go to the
 * stream's tail ring. */
static void emit_capped(cmd_t *c, int s, const uint8_t *p, size_t n) {
  uint64_t *count = s ? &c->n_err : &c->n_out;
  size_t tsz = tail_size(c->cap);
  uint64_t head = c->cap - tsz;
  uint64_t keep = *count >= head ? 0 : head - *count;
  if (*count + (uint64_t)n > c->cap) *(s ? &c->trunc_err : &c->trunc_out) = 1;
  if ((uint64_t)n < keep) keep = (uint64_t)n;
  if (keep < (uint64_t)n) ring_put(&c->tail[s], tsz, p + keep, n - (size_t)keep);
  *count += (uint64_t)n;
  if (keep > 0) {
    frame_head(s ? FR_STDERR : FR_STDOUT, c->id, (size_t)keep);
    out_bytes(p, (size_t)keep);
  }
}

/* Before FR_EXIT: an FR_TAIL for each stream that passed its head; frees the rings. */
static void send_tails(cmd_t *c) {
  for (int s = 0; s < 2; s++) {
    ring_t *r = &c->tail[s];
    uint64_t total = s ? c->n_err : c->n_out, head = c->cap - tail_size(c->cap);
    if (total > head) {
      uint64_t dropped = total - head - r->len;
      frame_head(FR_TAIL, c->id, 1 + 8 + r->len);
      uint8_t sb = (uint8_t)s;
      out_bytes(&sb, 1);
      out_u32((uint32_t)(dropped >> 32));
      out_u32((uint32_t)dropped);
      size_t first = r->size - r->start < r->len ? r->size - r->start : r->len;
      if (first > 0) out_bytes(r->data + r->start, first);
      if (r->len > first) out_bytes(r->data, r->len - first);
    }
    free(r->data);
    memset(r, 0, sizeof *r);
  }
}

/* ---------- the persistent shell (FR_SHELL) ---------- */

/*
 * One long-lived `bash` per agent. Each command goes to its stdin as one line:
 *   trap - DEBUG; [export K='V';] if builtin cd -- 'CWD'; then for __sbx_once in 1; do
 *   { builtin eval 'CMD'; } <SRC; done; __sbx_rc=$?; (a timeout or cancel: SIGUSR1 aborts the rest)
 *   else __sbx_rc=-1; fi; builtin printf ... MARK_OUT rc; builtin printf ... MARK_ERR >&2
 * so `cd`, variables, functions and aliases stay in the shell. The end markers are random per
 * command (and printed in two halves, so an `set -x` trace of the line never matches them); stdout
 * and stderr are the shell's own long-lived pipes, scanned for them. Between commands, output of
 * background jobs is drained and dropped.
 */

/* `s` in single quotes for bash: ' becomes '\''. */
static char *sq(const char *s) {
  size_t n = 3;
  for (const char *p = s; *p; p++) n += *p == '\'' ? 4 : 1;
  char *out = xrealloc(NULL, n), *o = out;
  *o++ = '\'';
  for (const char *p = s; *p; p++) {
    if (*p == '\'') memcpy(o, "'\\''", 4), o += 4;
    else *o++ = *p;
  }
  *o++ = '\'', *o = 0;
  return out;
}

static void shell_teardown(void) {
  if (shell.pid > 0) kill(-shell.pid, SIGKILL);
  close_fd(&shell.fd_ctl), close_fd(&shell.fd_out), close_fd(&shell.fd_err);
  shell.pid = 0, shell.alive = 0;
}

/* The parent pid in /proc/<pid>/stat (the field after the `)` that ends the command name), or -1. */
static pid_t parent_of(const char *pid) {
  char path[300], buf[512];
  snprintf(path, sizeof path, "/proc/%s/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *end = strrchr(buf, ')');
  int ppid;
  return end && sscanf(end + 1, " %*c %d", &ppid) == 1 ? (pid_t)ppid : -1;
}

/* Kills the descendants of `pid` (children first, so none re-parents out of reach), and `pid` too when `self`. */
static void kill_tree(pid_t pid, int sig, int self) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  FILE *f = fopen(path, "re");
  if (f) {
    int child;
    while (fscanf(f, "%d", &child) == 1) kill_tree(child, sig, 1);
    fclose(f);
  } else {
    /* No `children` file (gVisor's /proc has none): find them by their parent pid. */
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
      if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && parent_of(e->d_name) == pid)
        kill_tree((pid_t)atoi(e->d_name), sig, 1);
    if (d) closedir(d);
  }
  if (self) kill(pid, sig);
}

/* Whether the container's last shell command ran in this shell; then claims the next one. */
static int shell_continuous(void) {
  char seen[64] = "";
  int fd = open(SHELL_OWNER_FILE, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t k = read(fd, seen, sizeof seen - 1);
    seen[k > 0 ? k : 0] = 0;
    close(fd);
  }
  int same = shell.token[0] && strcmp(seen, shell.token) == 0;
  int existed = fd >= 0;
  snprintf(shell.token, sizeof shell.token, "%d:%d:%llu", (int)getpid(), (int)shell.pid,
           (unsigned long long)++shell.seq);
  fd = open(SHELL_OWNER_FILE ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    (void)!write(fd, shell.token, strlen(shell.token));
    close(fd);
    (void)!rename(SHELL_OWNER_FILE ".tmp", SHELL_OWNER_FILE);
  }
  return same || (!existed && !shell.started_before);
}

/* Starts the shell in `cwd` with `envp`; 0, or -1 with failed op / errno set. */
static int shell_start(const char *cwd, char **envp, const char **failed_op) {
  int ctl[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, ex[2] = {-1, -1};
  if (pipe2(ctl, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
      pipe2(ex, O_CLOEXEC) < 0) {
    int e = errno;
    int fds[] = {ctl[0], ctl[1], out[0], out[1], err[0], err[1], ex[0], ex[1]};
    for (size_t i = 0; i < 8; i++)
      if (fds[i] >= 0) close(fds[i]);
    return *failed_op = "pipe", errno = e, -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    if (child_setup(ctl[0], out[1], err[1], ex[1], cwd) == 0) {
      char *argv_bash[] = {"bash", "--noprofile", "--norc", NULL};
      execve("/bin/bash", argv_bash, envp);
    }
    uint32_t msg[2] = {2, (uint32_t)errno};
    (void)!write(ex[1], msg, sizeof msg);
    _exit(127);
  }
  int e = errno;
  close(ctl[0]), close(out[1]), close(err[1]), close(ex[1]);
  if (pid < 0) {
    close(ctl[1]), close(out[0]), close(err[0]), close(ex[0]);
    return *failed_op = "fork", errno = e, -1;
  }
  uint32_t msg[2];
  ssize_t k;
  do k = read(ex[0], msg, sizeof msg);
  while (k < 0 && errno == EINTR);
  close(ex[0]);
  if (k == (ssize_t)sizeof msg) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    close(ctl[1]), close(out[0]), close(err[0]);
    return *failed_op = msg[0] == 1 ? "chdir" : "exec", errno = (int)msg[1], -1;
  }
  shell.pid = pid, shell.alive = 1;
  shell.fd_ctl = ctl[1], shell.fd_out = out[0], shell.fd_err = err[0];
  set_nonblock(shell.fd_ctl), set_nonblock(shell.fd_out), set_nonblock(shell.fd_err);
  shell.token[0] = 0;
  /* SIGUSR1 (sent at a timeout or a cancel) aborts the rest of the running command: `break` leaves
   * the one-pass loop around it, `return` a function it is in, and a DEBUG trap (extdebug: a failing
   * trap skips the command) skips what is left of the line up to our own tail. */
  const char *init =
      "shopt -s expand_aliases; __sbx_rc=0\n"
      "__sbx_skip() { case $BASH_COMMAND in __sbx_*|'builtin printf'*|'builtin trap - DEBUG'*|"
      "'builtin shopt -u extdebug'*|'builtin eval \"$__sbx_line\"') return 0;; esac; return 1; }\n"
      "__sbx_abort() { builtin shopt -s extdebug; builtin trap '__sbx_skip' DEBUG; }\n"
      "builtin trap '__sbx_abort; break 1000 2>/dev/null; return 143 2>/dev/null' USR1\n";
  (void)!write(shell.fd_ctl, init, strlen(init)); /* fits the empty pipe */
  return 0;
}

/* Text appended to a growing control line. */
static void cat_str(char **line, size_t *len, const char *s) {
  size_t n = strlen(s);
  *line = xrealloc(*line, *len + n + 1);
  memcpy(*line + *len, s, n + 1);
  *len += n;
}

/* Starts an FR_SHELL command; on failure returns the failed op (errno set) and runs nothing. */
static const char *shell_exec(cmd_t *c, uint32_t flags, const char *cwd, const char *command, char **pairs,
                              uint32_t npairs, const uint8_t *in, uint32_t in_len) {
  int restarted = 0;
  int st;
  /* A shell that died just now, its SIGCHLD not read yet: never hand a command to it. */
  if (shell.alive && waitpid(shell.pid, &st, WNOHANG) == shell.pid) shell.alive = 0;
  if (!shell.alive && shell.pid > 0) shell_teardown();
  if (!shell.alive) {
    const char *failed = NULL;
    char **envp = merge_env(pairs, npairs);
    int rc = shell_start(cwd, envp, &failed);
    free(envp);
    if (rc < 0) return failed;
    pairs = NULL, npairs = 0; /* they are the new shell's environment already */
  }
  if (in_len > 0) {
    char path[96];
    snprintf(path, sizeof path, "/tmp/.sbx-stdin-%d-%u", (int)getpid(), c->id);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t off = 0;
    while (fd >= 0 && off < in_len) {
      ssize_t k = write(fd, in + off, in_len - off);
      if (k > 0) off += (size_t)k;
      else if (!(k < 0 && errno == EINTR)) break;
    }
    int e = errno;
    if (fd >= 0) close(fd);
    if (fd < 0 || off < in_len) {
      unlink(path);
      return errno = e ? e : EIO, "stdin";
    }
    c->stdin_path = strdup(path);
  }
  restarted = !shell_continuous();
  uint8_t rnd[16] = {0};
  int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (rfd >= 0) {
    (void)!read(rfd, rnd, sizeof rnd);
    close(rfd);
  }
  char hex[33];
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", rnd[i] ^ (uint8_t)(c->id >> (i % 4 * 8)));
  /* The markers are "__sbx_end_<hex>o" / "...e"; the line prints them in two halves. */
  snprintf(c->mark[0], sizeof c->mark[0], "__sbx_end_%so", hex);
  snprintf(c->mark[1], sizeof c->mark[1], "__sbx_end_%se", hex);
  char *line = NULL;
  size_t len = 0;
  cat_str(&line, &len, "builtin trap - DEBUG; builtin shopt -u extdebug; ");
  for (uint32_t j = 0; j < npairs; j++) {
    char *eq = strchr(pairs[j], '=');
    *eq = 0;
    char *v = sq(eq + 1);
    cat_str(&line, &len, "export ");
    cat_str(&line, &len, pairs[j]);
    cat_str(&line, &len, "=");
    cat_str(&line, &len, v);
    cat_str(&line, &len, "; ");
    *eq = '=';
    free(v);
  }
  if (flags & 1) {
    char *q = sq(cwd);
    cat_str(&line, &len, "if builtin cd -- ");
    cat_str(&line, &len, q);
    cat_str(&line, &len, " 2>/dev/null; then ");
    free(q);
  } else {
    cat_str(&line, &len, "if builtin true; then ");
  }
  char *qc = sq(command);
  char *qs = sq(c->stdin_path ? c->stdin_path : "/dev/null");
  cat_str(&line, &len, "for __sbx_once in 1; do { builtin eval ");
  cat_str(&line, &len, qc);
  cat_str(&line, &len, "\n} <");
  cat_str(&line, &len, qs);
  cat_str(&line, &len, "; done");
  free(qc), free(qs);
  char tail[512];
  snprintf(tail, sizeof tail,
           "; __sbx_rc=$?; else __sbx_rc=-1; fi; builtin trap - DEBUG; builtin shopt -u extdebug; builtin printf '%%s%%s%%d\\n' __sbx_end_ %so \"$__sbx_rc\"; "
           "builtin printf '%%s%%s\\n' __sbx_end_ %se >&2\n",
           hex, hex);
  cat_str(&line, &len, tail);
  /* bash reads a script from a pipe one byte per read(2), so that it never takes input past the
   * line it runs; a few hundred bytes of line cost it more than the command (about half of its CPU
   * per `echo hi`). So a line that fits in one atomic pipe write goes as a body behind a short
   * header that reads it in bulk (`read -N` takes up to 4 KiB per read(2); LC_ALL=C makes it count
   * bytes) and evals it. The body is the same line: if the header's read cannot run (say LC_ALL is
   * readonly), bash runs the body as input, as it did before. A longer line goes as input at once. */
  char head[160];
  int hn = snprintf(head, sizeof head,
                    "builtin trap - DEBUG; builtin shopt -u extdebug; LC_ALL=C builtin read -r -N %zu "
                    "__sbx_line && builtin eval \"$__sbx_line\"\n",
                    len);
  if (hn > 0 && (size_t)hn + len <= PIPE_BUF) {
    char *framed = xrealloc(NULL, (size_t)hn + len + 1);
    memcpy(framed, head, (size_t)hn);
    memcpy(framed + hn, line, len + 1);
    free(line);
    line = framed, len += (size_t)hn;
  }
  c->in_data = (uint8_t *)line, c->in_len = len;
  c->is_shell = 1, c->pid = shell.pid;
  c->shell_flags = restarted ? SHELL_RESTARTED : 0;
  c->cwd = strdup(cwd);
  shell.started_before = 1;
  shell.cur = c;
  return NULL;
}

/* Feeds the control line into the shell. */
static void shell_feed(cmd_t *c) {
  while (c->in_off < c->in_len) {
    ssize_t n = write(shell.fd_ctl, c->in_data + c->in_off, c->in_len - c->in_off);
    if (n > 0) c->in_off += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else if (n < 0 && errno == EAGAIN) return;
    else break; /* EPIPE: the shell is gone; its reaping ends the command */
  }
  c->in_off = c->in_len;
}

/* Sends `n` bytes of a shell command's stream `s` (0 stdout, 1 stderr) to the host, capped. */
static void shell_emit(cmd_t *c, int s, const uint8_t *p, size_t n) {
  emit_capped(c, s, p, n);
}

static uint8_t scan_buf[CHUNK + 128];

/* Scans a chunk of the shell's stream `s` for the current command's end marker. */
static void shell_scan(cmd_t *c, int s, const uint8_t *p, size_t n) {
  size_t wl = c->hold_len[s] + n;
  memcpy(scan_buf, c->hold[s], c->hold_len[s]);
  memcpy(scan_buf + c->hold_len[s], p, n);
  c->hold_len[s] = 0;
  const char *mark = c->mark[s];
  size_t ml = strlen(mark);
  uint8_t *at = memmem(scan_buf, wl, mark, ml);
  if (at) {
    size_t pos = (size_t)(at - scan_buf);
    uint8_t *nl = memchr(at + ml, '\n', wl - pos - ml);
    if (!nl && wl - pos < sizeof c->hold[s]) {
      shell_emit(c, s, scan_buf, pos);
      memcpy(c->hold[s], at, wl - pos);
      c->hold_len[s] = wl - pos;
      return;
    }
    shell_emit(c, s, scan_buf, pos);
    if (s == 0) {
      char digits[24] = "";
      size_t dl = nl ? (size_t)(nl - at) - ml : 0;
      if (dl < sizeof digits) memcpy(digits, at + ml, dl), digits[dl] = 0;
      c->rc = (int)strtol(digits, NULL, 10);
    }
    c->got_mark[s] = 1; /* what follows the marker is a background job's, dropped */
    return;
  }
  /* Hold back only a tail that may be the start of the marker: the rest is live output now. */
  size_t keep = ml - 1 < wl ? ml - 1 : wl;
  while (keep > 0 && memcmp(scan_buf + wl - keep, mark, keep) != 0) keep--;
  shell_emit(c, s, scan_buf, wl - keep);
  memcpy(c->hold[s], scan_buf + wl - keep, keep);
  c->hold_len[s] = keep;
}

static void shell_drain(int s) {
  int *fd = s ? &shell.fd_err : &shell.fd_out;
  ssize_t n = read(*fd, chunk, CHUNK);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close_fd(fd);
    return;
  }
  cmd_t *c = shell.cur;
  if (c && !c->got_mark[s]) shell_scan(c, s, chunk, (size_t)n);
}

/* Ends a shell command: its EXIT (or, for a cwd that is not there, ERR) frame. */
static void shell_finish(cmd_t *c) {
  if (c->stdin_path) unlink(c->stdin_path), free(c->stdin_path);
  free(c->in_data);
  shell.cur = NULL;
  if (!c->reaped && c->rc == -1) {
    for (int s = 0; s < 2; s++) free(c->tail[s].data);
    send_err(c->id, ENOENT, "chdir", c->cwd);
    free(c->cwd);
    return;
  }
  free(c->cwd);
  int ended = c->reaped;
  int sig, value;
  if (ended) {
    for (int s = 0; s < 2; s++)
      if (c->hold_len[s] && !c->got_mark[s]) shell_emit(c, s, c->hold[s], c->hold_len[s]);
    sig = WIFSIGNALED(c->status);
    value = sig ? WTERMSIG(c->status) : WEXITSTATUS(c->status);
  } else {
    sig = (c->timed_out || c->cancelled) && c->rc > 128;
    value = sig ? c->rc - 128 : c->rc;
  }
  send_tails(c);
  frame_head(FR_EXIT, c->id, 1 + 4 + 1 + 1 + 4 + 1);
  uint8_t kind = (uint8_t)sig;
  out_bytes(&kind, 1);
  out_u32((uint32_t)value);
  uint8_t flags[2] = {(uint8_t)c->timed_out, (uint8_t)(c->trunc_out | c->trunc_err << 1)};
  out_bytes(flags, 2);
  out_u32((uint32_t)(now_ms() - c->start));
  uint8_t sf = (uint8_t)(c->shell_flags | (ended ? SHELL_ENDED : 0));
  out_bytes(&sf, 1);
  if (ended || !shell.alive) shell_teardown();
}

/* Deadlines of the running shell command: SIGTERM then SIGKILL to what it started, then the shell. */
static void shell_tick(cmd_t *c, int64_t now) {
  if (!c->reaped && !c->timed_out && !c->cancelled && now >= c->deadline) {
    c->timed_out = 1;
    kill(shell.pid, SIGUSR1); /* the rest of the command is skipped once its child is gone */
    kill_tree(shell.pid, SIGTERM, 0);
    c->kill_at = now + TERM_GRACE_MS;
  }
  if (c->kill_at && now >= c->kill_at) {
    kill_tree(shell.pid, SIGKILL, 0);
    c->kill_at = 0;
    c->shell_kill_at = now + SHELL_KILL_MS;
  }
  /* After the kill, whatever the shell still starts dies too: a cancel that came just before the
   * shell forked its next child (whose SIGUSR1 trap waits for that child) would miss it. */
  if (c->shell_kill_at && !c->kill_at && !c->reaped && now >= c->rekill_at) {
    kill_tree(shell.pid, SIGKILL, 0);
    c->rekill_at = now + REKILL_MS;
  }
  if (c->shell_kill_at && now >= c->shell_kill_at && !c->reaped) {
    kill(-shell.pid, SIGKILL); /* the command is the shell itself (a builtin loop, exec): it goes */
    c->shell_kill_at = 0;
  }
}

/* FR_EXEC (a fresh `bash -c`) or, with `in_shell`, FR_SHELL (the persistent shell). */
static void op_exec(uint32_t id, const uint8_t *p, size_t n, int in_shell) {
  rd_t r = {p, n, 0, 0};
  uint32_t timeout_ms = rd_u32(&r);
  uint64_t cap = (uint64_t)rd_u32(&r) << 32;
  cap |= rd_u32(&r);
  uint32_t flags = rd_u32(&r); /* FR_EXEC: reserved; FR_SHELL: bit0 cwd is explicit */
  char *cwd = rd_cstr(&r), *command = rd_cstr(&r);
  uint32_t npairs = rd_u32(&r);
  if (npairs > 4096) r.bad = 1;
  char **pairs = xrealloc(NULL, (r.bad ? 1 : npairs + 1) * sizeof *pairs);
  uint32_t got = 0;
  for (; !r.bad && got < npairs; got++) {
    char *k = rd_cstr(&r), *v = rd_cstr(&r);
    if (r.bad || !k[0] || strchr(k, '=')) {
      r.bad = 1, free(k), free(v);
      break;
    }
    pairs[got] = xrealloc(NULL, strlen(k) + strlen(v) + 2);
    sprintf(pairs[got], "%s=%s", k, v);
    free(k), free(v);
  }
  uint32_t in_len = 0;
  const uint8_t *in = rd_bytes(&r, &in_len);

  int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, ex_p[2] = {-1, -1};
  const char *failed_op = NULL;
  int failed_errno = 0;
  cmd_t *c = NULL;
  char **envp = NULL;
  if (r.bad) {
    failed_op = "protocol", failed_errno = EINVAL;
  } else if (find_cmd(id) || ncmds >= MAX_CMDS) {
    failed_op = "limit", failed_errno = EBUSY;
  } else if (in_shell && shell.cur) {
    failed_op = "shell-busy", failed_errno = EBUSY;
  } else if (in_shell) {
    c = xrealloc(NULL, sizeof *c);
    memset(c, 0, sizeof *c);
    c->id = id, c->cap = cap, c->fd_out = c->fd_err = c->fd_in = -1;
    c->start = now_ms();
    c->deadline = c->start + timeout_ms;
    failed_op = shell_exec(c, flags, cwd, command, pairs, got, in, in_len);
    if (failed_op) {
      failed_errno = errno;
      free(c);
      c = NULL;
    } else {
      c->next = cmds, cmds = c, ncmds++;
    }
  } else if (pipe2(in_p, O_CLOEXEC) < 0 || pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0 ||
             pipe2(ex_p, O_CLOEXEC) < 0) {
    failed_op = "pipe", failed_errno = errno;
  }
  if (!failed_op && !in_shell) {
    envp = merge_env(pairs, got);
    pid_t pid = spawn_command(in_p[0], out_p[1], err_p[1], ex_p[1], cwd, command, envp);
    if (pid < 0) {
      failed_op = "fork", failed_errno = errno;
    } else {
      close_fd(&ex_p[1]);
      uint32_t msg[2];
      ssize_t k;
      do k = read(ex_p[0], msg, sizeof msg);
      while (k < 0 && errno == EINTR);
      if (k == (ssize_t)sizeof msg) {
        failed_op = msg[0] == 1 ? "chdir" : "exec", failed_errno = (int)msg[1];
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
      } else {
        c = xrealloc(NULL, sizeof *c);
        memset(c, 0, sizeof *c);
        c->id = id, c->pid = pid, c->cap = cap;
        c->fd_out = out_p[0], out_p[0] = -1;
        c->fd_err = err_p[0], err_p[0] = -1;
        c->fd_in = in_p[1], in_p[1] = -1;
        c->start = now_ms();
        c->deadline = c->start + timeout_ms;
        set_nonblock(c->fd_out);
        set_nonblock(c->fd_err);
        set_nonblock(c->fd_in);
        if (in_len > 0) {
          c->in_data = xrealloc(NULL, in_len);
          memcpy(c->in_data, in, in_len);
          c->in_len = in_len;
        } else {
          close_fd(&c->fd_in);
        }
        c->next = cmds, cmds = c, ncmds++;
      }
    }
  }
  int fds[] = {in_p[0], in_p[1], out_p[0], out_p[1], err_p[0], err_p[1], ex_p[0], ex_p[1]};
  for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
    if (fds[i] >= 0) close(fds[i]);
  if (failed_op) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s",
             strcmp(failed_op, "chdir") == 0 && cwd     ? cwd
             : strcmp(failed_op, "shell-busy") == 0     ? "another command runs in the persistent shell"
             : strcmp(failed_op, "exec") == 0 && in_shell ? "the persistent shell needs /bin/bash"
                                                         : strerror(failed_errno));
    send_err(id, failed_errno, failed_op, detail);
  }
  for (uint32_t j = 0; j < got; j++) free(pairs[j]);
  free(pairs), free(envp), free(cwd), free(command);
}

static void op_cancel(uint32_t id) {
  cmd_t *c = find_cmd(id);
  if (c && c->is_shell) {
    /* What the command started dies; the shell stays unless the command is the shell itself. */
    if (!c->cancelled && !c->reaped) {
      c->cancelled = 1;
      kill(shell.pid, SIGUSR1);
      kill_tree(shell.pid, SIGKILL, 0);
      c->kill_at = 0;
      c->shell_kill_at = now_ms() + SHELL_KILL_MS;
    }
  } else if (c) {
    kill(-c->pid, SIGKILL);
  }
  for (writer_t *w = writers; w; w = w->next)
    if (w->id == id) w->cancelled = 1, kill(w->pid, SIGKILL);
}

/*
 * Reads one chunk of a command's stdout (s 0) or stderr (s 1); past the cap only the tail stays. When
 * the pipe's writers are gone (`hup`) it reads on to the end: what is left is bounded by the pipe's
 * buffer, and seeing the end now lets the command finish in this turn of the loop (its output and EXIT
 * then travel in one write) rather than after another poll.
 */
static void drain(cmd_t *c, int *fd, int s, int hup) {
  do {
    ssize_t n = read(*fd, chunk, CHUNK);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      close_fd(fd);
      return;
    }
    emit_capped(c, s, chunk, (size_t)n);
  } while (hup);
}

static void feed_stdin(cmd_t *c) {
  while (c->in_off < c->in_len) {
    ssize_t n = write(c->fd_in, c->in_data + c->in_off, c->in_len - c->in_off);
    if (n > 0) c->in_off += (size_t)n;
    else if (n < 0 && errno == EINTR) continue;
    else if (n < 0 && errno == EAGAIN) return;
    else break; /* EPIPE: the command closed its stdin; the rest is dropped */
  }
  close_fd(&c->fd_in);
  free(c->in_data);
  c->in_data = NULL;
}

static void reap(void) {
  struct signalfd_siginfo si;
  while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
    if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP) kill_all_and_exit(0);
  }
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    streams_reaped(pid, status);
    if (shell.pid > 0 && pid == shell.pid) {
      shell.alive = 0;
      if (!shell.cur) shell_teardown();
    }
    for (cmd_t *c = cmds; c; c = c->next) {
      if (c->pid == pid && !c->reaped) {
        c->reaped = 1, c->status = status;
        c->linger_until = now_ms() + LINGER_MS;
      }
    }
  }
}

static void finish(cmd_t *c) {
  /* Background processes still holding the pipes go with the command. */
  if (c->fd_out >= 0 || c->fd_err >= 0) kill(-c->pid, SIGKILL);
  close_fd(&c->fd_out), close_fd(&c->fd_err), close_fd(&c->fd_in);
  free(c->in_data);
  send_tails(c);
  int sig = WIFSIGNALED(c->status);
  frame_head(FR_EXIT, c->id, 1 + 4 + 1 + 1 + 4);
  uint8_t kind = (uint8_t)sig;
  out_bytes(&kind, 1);
  out_u32((uint32_t)(sig ? WTERMSIG(c->status) : WEXITSTATUS(c->status)));
  uint8_t flags[2] = {(uint8_t)c->timed_out, (uint8_t)(c->trunc_out | c->trunc_err << 1)};
  out_bytes(flags, 2);
  out_u32((uint32_t)(now_ms() - c->start));
}

/* Applies deadlines and finishes commands; returns the poll timeout in ms (-1: none). */
static int tick(int64_t now) {
  int64_t next = -1;
  int room = pending(&outq) < OUT_HIGH;
#define WAKE(t) (next = (next < 0 || (t) < next) ? (t) : next)
  for (cmd_t **pc = &cmds; *pc;) {
    cmd_t *c = *pc;
    if (c->is_shell) {
      shell_tick(c, now);
      int open = shell.fd_out >= 0 || shell.fd_err >= 0;
      int marked = c->got_mark[0] && c->got_mark[1];
      if (marked || (c->reaped && (!open || (room && now >= c->linger_until)))) {
        shell_finish(c);
        *pc = c->next, ncmds--;
        free(c);
        continue;
      }
      if (!c->reaped && !c->timed_out && !c->cancelled) WAKE(c->deadline);
      if (c->kill_at) WAKE(c->kill_at);
      if (c->shell_kill_at) WAKE(c->shell_kill_at);
      if (c->shell_kill_at && !c->kill_at && !c->reaped) WAKE(c->rekill_at);
      if (c->reaped && room) WAKE(c->linger_until);
      pc = &c->next;
      continue;
    }
    if (!c->reaped && !c->timed_out && now >= c->deadline) {
      c->timed_out = 1;
      kill(-c->pid, SIGTERM);
      c->kill_at = now + TERM_GRACE_MS;
    }
    if (c->kill_at && now >= c->kill_at) {
      kill(-c->pid, SIGKILL);
      c->kill_at = 0;
    }
    int open = c->fd_out >= 0 || c->fd_err >= 0;
    if (c->reaped && (!open || (room && now >= c->linger_until))) {
      finish(c);
      *pc = c->next, ncmds--;
      free(c);
      continue;
    }
    if (!c->reaped && !c->timed_out) WAKE(c->deadline);
    if (c->kill_at) WAKE(c->kill_at);
    if (c->reaped && room) WAKE(c->linger_until);
    pc = &c->next;
  }
#undef WAKE
  if (next < 0) return -1;
  return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}

/* ---------- files ---------- */

static int mkdir_parents(char *path) {
  for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
    *s = 0;
    struct stat st;
    int rc = mkdir(path, 0755);
    int err = errno;
    int ok = rc == 0 || (err == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    *s = '/';
    if (!ok) return errno = (rc < 0 && err != EEXIST) ? err : ENOTDIR, -1;
  }
  return 0;
}

/* What a write came to: errno 0 on success, else the failing step and a detail for the host. */
typedef struct {
  int32_t err;
  char op[8];
  char detail[32];
} write_report_t;

/* How a non-regular file is named in error details (the host shows it to the caller). */
static const char *file_kind(mode_t m) {
  if (S_ISDIR(m)) return "directory";
  if (S_ISFIFO(m)) return "fifo";
  if (S_ISSOCK(m)) return "socket";
  if (S_ISCHR(m)) return "character device";
  if (S_ISBLK(m)) return "block device";
  return "special file";
}

static write_report_t write_failed(int err, const char *op, const char *kind) {
  write_report_t rep = {.err = err};
  snprintf(rep.op, sizeof rep.op, "%s", op);
  if (kind) snprintf(rep.detail, sizeof rep.detail, "%s", kind);
  return rep;
}

static write_report_t not_regular(mode_t m) {
  return write_failed(S_ISDIR(m) ? EISDIR : EINVAL, "open", file_kind(m));
}

/*
 * One WRITE: creates the parents, then writes only to a regular file (or a new path). The open is
 * non-blocking, because opening a FIFO for writing blocks until a reader comes, possibly forever.
 */
static write_report_t write_plain(char *path, uint32_t flags, uint32_t mode, const uint8_t *data, size_t len) {
  if (mkdir_parents(path) < 0) return write_failed(errno, "mkdir", NULL);
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  int oflags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | ((flags & 1) ? O_TRUNC : O_APPEND);
  int fd;
  do fd = open(path, oflags, mode & 07777);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    /* ENXIO: a FIFO or socket appeared between the stat and the open. */
    if (err == ENXIO && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return not_regular(st.st_mode);
    return write_failed(err, "open", NULL);
  }
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    write_report_t rep = not_regular(st.st_mode);
    close(fd);
    return rep;
  }
  /* Replacing the content replaces the E2B metadata too (none, unless the upload sets it after). */
  if (flags & 1) fs_clear_meta_fd(fd);
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  size_t off = 0;
  while (off < len) {
    ssize_t k = write(fd, data + off, len - off);
    if (k > 0) off += (size_t)k;
    else if (k < 0 && errno == EINTR) continue;
    else break;
  }
  int err = errno;
  if (close(fd) < 0 && off == len && errno != EINTR) off = 0, err = errno;
  if (off < len) return write_failed(err ? err : EIO, "write", NULL);
  return write_failed(0, "", NULL);
}

/*
 * The last frame of an upload through a part file: the part takes the destination's place in one
 * rename, keeping an existing file's mode (and writing through a symlink to its target, as a plain
 * write does). Until then the destination is untouched, whole.
 */
static write_report_t commit_part(const char *part, const char *final) {
  char *target = realpath(final, NULL);
  const char *to = target ? target : final;
  struct stat st;
  if (stat(to, &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      free(target);
      return not_regular(st.st_mode);
    }
    (void)chmod(part, st.st_mode & 07777);
  }
  int rc = rename(part, to), err = errno;
  free(target);
  return rc < 0 ? write_failed(err, "rename", NULL) : write_failed(0, "", NULL);
}

/*
 * A WRITE, to `path` itself or (`final` set: flags 2) to the part file `path` of an upload to
 * `final`, which the frame with flags 4 renames into place. A part whose write fails is removed, so a
 * failed upload (a full disk, a cancel) leaves the destination as it was and no partial file.
 */
static write_report_t do_write(char *path, uint32_t flags, uint32_t mode, const uint8_t *data, size_t len,
                               const char *final) {
  struct stat st;
  if (final && stat(final, &st) == 0 && !S_ISREG(st.st_mode)) {
    unlink(path);
    return not_regular(st.st_mode);
  }
  /* Flags 8: the upload was given up between two frames (a cancel); its part file goes. */
  if (final && (flags & 8)) {
    write_report_t gone = {0};
    if (unlink(path) < 0 && errno != ENOENT) gone = write_failed(errno, "unlink", NULL);
    return gone;
  }
  write_report_t rep = write_plain(path, flags, mode, data, len);
  if (!final) return rep;
  if (rep.err == 0 && (flags & 4)) rep = commit_part(path, final);
  if (rep.err != 0) unlink(path);
  return rep;
}

static void send_write_report(uint32_t id, const char *path, const write_report_t *rep) {
  if (rep->err == 0) frame_head(FR_OK, id, 0);
  else send_err(id, rep->err, rep->op, rep->detail[0] ? rep->detail : path);
}

#define MAX_WRITERS 64

/*
 * Writes run in a child process: whatever a write blocks on (a full or frozen filesystem, a path
 * that changed under it), the loop keeps serving the channel's other requests, and a CANCEL of the
 * request kills the child. Without a process to spare (pids limit) the write runs inline.
 */
static void op_write(uint32_t id, const uint8_t *p, size_t n) {
  rd_t r = {p, n, 0, 0};
  uint32_t flags = rd_u32(&r), mode = rd_u32(&r);
  char *path = rd_cstr(&r);
  uint32_t len = 0;
  const uint8_t *data = rd_bytes(&r, &len);
  char *final = (flags & 2) ? rd_cstr(&r) : NULL;
  if (r.bad || !path || path[0] != '/' || ((flags & 2) && (!final || final[0] != '/'))) {
    send_err(id, EINVAL, "protocol", "write needs an absolute path");
    free(path);
    free(final);
    return;
  }
  int nwriters = 0;
  for (writer_t *w = writers; w; w = w->next) nwriters++;
  int rp[2] = {-1, -1};
  pid_t pid = -1;
  if (nwriters < MAX_WRITERS && pipe2(rp, O_CLOEXEC) == 0) {
    pid = fork();
    if (pid == 0) {
      /* Not holding the channel's pipes keeps the exec session from outliving the agent. */
      close(STDIN_FILENO), close(STDOUT_FILENO);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      write_report_t rep = do_write(path, flags, mode, data, len, final);
      (void)!write(rp[1], &rep, sizeof rep);
      _exit(0);
    }
    close(rp[1]);
    if (pid < 0) close(rp[0]);
  }
  if (pid < 0) {
    write_report_t rep = do_write(path, flags, mode, data, len, final);
    send_write_report(id, final ? final : path, &rep);
    free(path);
    free(final);
    return;
  }
  set_nonblock(rp[0]);
  writer_t *w = xrealloc(NULL, sizeof *w);
  *w = (writer_t){.next = writers, .id = id, .pid = pid, .fd = rp[0], .path = final ? final : path,
                  .part = final ? path : NULL};
  writers = w;
}

/* The report of a finished (or killed) write child. */
static void finish_write(writer_t *w) {
  write_report_t rep;
  ssize_t k;
  do k = read(w->fd, &rep, sizeof rep);
  while (k < 0 && errno == EINTR);
  if (k < 0 && errno == EAGAIN) return;
  /* No report: the child was killed, by a CANCEL or from outside (the OOM killer, say). */
  if (k != (ssize_t)sizeof rep) {
    rep = write_failed(w->cancelled ? ECANCELED : EIO, "write", NULL);
    if (w->part) unlink(w->part);
  }
  send_write_report(w->id, w->path, &rep);
  close(w->fd);
  for (writer_t **pw = &writers; *pw; pw = &(*pw)->next) {
    if (*pw == w) {
      *pw = w->next;
      break;
    }
  }
  free(w->path);
  free(w->part);
  free(w);
}

static void op_read(uint32_t id, const uint8_t *p, size_t n) {
  rd_t r = {p, n, 0, 0};
  char *path = rd_cstr(&r);
  if (r.bad || !path || path[0] != '/') {
    send_err(id, EINVAL, "protocol", "read needs an absolute path");
    free(path);
    return;
  }
  int fd;
  do fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  while (fd < 0 && errno == EINTR);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    int err = fd < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    if (fd >= 0) close(fd);
    send_err(id, err, "open", fd >= 0 ? file_kind(st.st_mode) : path);
    free(path);
    return;
  }
  free(path);
  reader_t *rd = xrealloc(NULL, sizeof *rd);
  *rd = (reader_t){.next = readers, .id = id, .fd = fd, .total = 0};
  readers = rd;
}

/* One chunk per open file per loop turn, only while the outbound queue has room. */
static void read_files(void) {
  for (reader_t **pr = &readers; *pr;) {
    reader_t *rd = *pr;
    if (pending(&outq) >= OUT_HIGH) return;
    ssize_t k = read(rd->fd, chunk, CHUNK);
    if (k < 0 && errno == EINTR) continue;
    if (k > 0) {
      frame_head(FR_DATA, rd->id, (size_t)k);
      out_bytes(chunk, (size_t)k);
      rd->total += (uint64_t)k;
      pr = &rd->next;
      continue;
    }
    if (k == 0) send_u64(FR_OK, rd->id, rd->total);
    else send_err(rd->id, errno, "read", "");
    close(rd->fd);
    *pr = rd->next;
    free(rd);
  }
}

/* ---------- main loop ---------- */

static void handle_frame(uint8_t type, uint32_t id, const uint8_t *p, size_t n) {
  switch (type) {
    case FR_EXEC: op_exec(id, p, n, 0); break;
    case FR_SHELL: op_exec(id, p, n, 1); break;
    case FR_CANCEL: op_cancel(id); break;
    case FR_WRITE: op_write(id, p, n); break;
    case FR_READ: op_read(id, p, n); break;
    case FR_PING: frame_head(FR_PONG, id, 0); break;
    default:
      if (!streams_frame(type, id, p, n)) send_err(id, EINVAL, "protocol", "unknown frame type");
      break;
  }
}

static void read_stdin(void) {
  for (;;) {
    reserve(&inq, 4 * CHUNK);
    ssize_t n = read(STDIN_FILENO, inq.data + inq.len, inq.cap - inq.len);
    if (n > 0) {
      inq.len += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      break;
    } else {
      kill_all_and_exit(0); /* EOF: the host connection is gone */
    }
  }
  while (pending(&inq) >= 4) {
    const uint8_t *h = inq.data + inq.off;
    uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 | (uint32_t)h[2] << 8 | h[3];
    if (len < 5 || len > SBX_MAX_FRAME) {
      errno = EPROTO;
      fatal("bad frame length");
    }
    if (pending(&inq) < 4 + (size_t)len) break;
    uint32_t id = (uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8];
    handle_frame(h[4], id, h + 9, len - 5);
    inq.off += 4 + (size_t)len;
  }
  shrink(&inq);
}

/*
 * Whether a process came in from outside the container: in our pid namespace a `docker exec` has
 * parent 0 (its parent lives outside). Every agent channel is one, and every command runs below a
 * channel, so "none" means no host is connected and no command runs. When /proc cannot be read
 * the answer is yes: the sandbox never ends itself on a doubt.
 */
static int attached_from_outside(void) {
  DIR *d = opendir("/proc");
  if (!d) return 1;
  int found = 0;
  pid_t self = getpid();
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == self) continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    /* pid (comm) state ppid ...; comm may hold spaces and parentheses, so parse after the last ')' */
    char *rp = strrchr(buf, ')');
    char state;
    long ppid;
    if (rp && sscanf(rp + 1, " %c %ld", &state, &ppid) == 2 && ppid == 0 && state != 'Z') found = 1;
  }
  closedir(d);
  return found;
}

/* The container's main process: reaps orphans; with idle_exit_ms > 0, ends when idle that long. */
/* The egress forwarder (forward.c): only with --egress-forward PORT SOCKET. */
#include "forward.c"

static int run_init(long idle_exit_ms, int fwd_port, const char *fwd_socket) {
  pid_t forwarder = fwd_port > 0 ? start_forwarder(fwd_port, fwd_socket) : -1;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, NULL);
  /* Look about ten times per idle period, at most once a second and at least every 100 ms. */
  long step = idle_exit_ms / 10;
  if (step > 1000) step = 1000;
  if (step < 100) step = 100;
  /* Counted from the first look that found nothing attached: the exit comes N to N + step ms after
   * the last detach, never earlier. */
  int64_t idle_since = now_ms(), next_look = idle_since;
  for (;;) {
    int sig;
    if (idle_exit_ms > 0) {
      struct timespec ts = {.tv_sec = step / 1000, .tv_nsec = (step % 1000) * 1000000L};
      sig = sigtimedwait(&set, NULL, &ts);
    } else if (sigwait(&set, &sig) != 0) {
      continue;
    }
    if (sig == SIGTERM || sig == SIGINT) {
      /* The container is being stopped (its engine too, maybe): every process of it hears so first,
       * so a session agent ends its channel (the host sees the sandbox lost) instead of reporting its
       * command killed by the teardown as if it had finished. */
      kill(-1, SIGTERM);
      return 0;
    }
    pid_t reaped;
    while ((reaped = waitpid(-1, NULL, WNOHANG)) > 0) {
      /* A killed forwarder comes back (a sandbox process may kill it; it cannot replace it). */
      if (reaped == forwarder) forwarder = start_forwarder(fwd_port, fwd_socket);
    }
    if (idle_exit_ms <= 0) continue;
    int64_t now = now_ms();
    if (now < next_look) continue; /* a burst of SIGCHLD does not rescan /proc each time */
    next_look = now + step;
    if (attached_from_outside()) {
      idle_since = -1;
    } else if (idle_since < 0) {
      idle_since = now;
    } else if (now - idle_since >= idle_exit_ms) {
      fprintf(stderr, "sbx-agent: nothing attached for %ld ms (--idle-exit-ms); ending the sandbox\n",
              (long)(now - idle_since));
      return SBX_IDLE_EXIT_CODE;
    }
  }
}

/* Background processes (--proc-* modes): their own file, kept apart from the channel. */
#include "procs.c"

/* The direct channel (--direct): frames on a host socket instead of the exec's pipes. */
#include "direct.c"

int main(int argc, char **argv) {
  if (argc > 1 && strncmp(argv[1], "--proc-fs-", 10) == 0) {
    int r = fs_main(argc, argv);
    if (r >= 0) return r;
  }
  if (argc > 1 && strncmp(argv[1], "--proc-", 7) == 0) return proc_main(argc, argv);
  if (argc > 1 && strcmp(argv[1], "--init") == 0) {
    long idle_exit_ms = 0;
    int fwd_port = 0;
    const char *fwd_socket = NULL;
    for (int i = 2; i + 1 < argc; i++) {
      if (strcmp(argv[i], "--idle-exit-ms") == 0) idle_exit_ms = strtol(argv[i + 1], NULL, 10);
      if (strcmp(argv[i], "--egress-forward") == 0 && i + 2 < argc)
        fwd_port = (int)strtol(argv[i + 1], NULL, 10), fwd_socket = argv[i + 2];
    }
    return run_init(idle_exit_ms, fwd_port, fwd_socket);
  }

  signal(SIGPIPE, SIG_IGN);
  /* Commands run as our uid: keep them from ptrace-ing us or writing into our pipes via /proc.
   * (execve resets this for the commands themselves.) */
  prctl(PR_SET_DUMPABLE, 0);
  /* Orphaned background processes re-parent to us, so we reap them instead of leaving zombies. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) fatal("sigprocmask");
  sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sfd < 0) fatal("signalfd");
  if (argc > 1 && strcmp(argv[1], "--direct") == 0) direct_connect();
  set_nonblock(STDIN_FILENO);
  set_nonblock(STDOUT_FILENO);

  /* Flags: which shells the image has (commands fall back to /bin/sh; the persistent shell needs bash). */
  uint32_t flags = 0;
  if (access("/bin/bash", X_OK) == 0) flags |= SBX_HELLO_HAS_BASH;
  flags |= SBX_HELLO_PART_WRITES;
  frame_head(FR_HELLO, 0, 20);
  out_u32(SBX_PROTOCOL_VERSION);
  out_u32((uint32_t)getpid());
  out_u32((uint32_t)getuid());
  out_u32(SBX_MAX_FRAME);
  out_u32(flags);

  struct pollfd *pfds = NULL;
  cmd_t **owners = NULL;
  size_t pcap = 0;
  for (;;) {
    /* Finishing first, writing after: a command's last output and its EXIT leave in one write. */
    int64_t now = now_ms();
    int timeout = flush_or_hold(tick(now));
    size_t nwriters = 0;
    for (writer_t *w = writers; w; w = w->next) nwriters++;
    size_t need = 6 + 3 * (size_t)ncmds + nwriters + streams_count();
    if (need > pcap) {
      pcap = need * 2;
      pfds = xrealloc(pfds, pcap * sizeof *pfds);
      owners = xrealloc(owners, pcap * sizeof *owners);
    }
    size_t np = 0;
    pfds[np++] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
    pfds[np++] = (struct pollfd){.fd = STDOUT_FILENO, .events = pending(&outq) && !holding ? POLLOUT : 0};
    pfds[np++] = (struct pollfd){.fd = sfd, .events = POLLIN};
    int room = pending(&outq) < OUT_HIGH;
    for (cmd_t *c = cmds; c; c = c->next) {
      if (c->fd_out >= 0 && (room || c->n_out >= c->cap))
        owners[np] = c, pfds[np++] = (struct pollfd){.fd = c->fd_out, .events = POLLIN};
      if (c->fd_err >= 0 && (room || c->n_err >= c->cap))
        owners[np] = c, pfds[np++] = (struct pollfd){.fd = c->fd_err, .events = POLLIN};
      if (c->fd_in >= 0)
        owners[np] = c, pfds[np++] = (struct pollfd){.fd = c->fd_in, .events = POLLOUT};
    }
    size_t first_shell = np;
    /* The shell's output is drained even between commands (a background job must not block). */
    if (shell.fd_out >= 0 && (room || !shell.cur))
      owners[np] = NULL, pfds[np++] = (struct pollfd){.fd = shell.fd_out, .events = POLLIN};
    if (shell.fd_err >= 0 && (room || !shell.cur))
      owners[np] = NULL, pfds[np++] = (struct pollfd){.fd = shell.fd_err, .events = POLLIN};
    if (shell.cur && shell.fd_ctl >= 0 && shell.cur->in_off < shell.cur->in_len)
      owners[np] = NULL, pfds[np++] = (struct pollfd){.fd = shell.fd_ctl, .events = POLLOUT};
    size_t first_writer = np;
    for (writer_t *w = writers; w; w = w->next)
      owners[np] = NULL, pfds[np++] = (struct pollfd){.fd = w->fd, .events = POLLIN};
    size_t first_stream = np;
    np = streams_poll(pfds, np);
    if (readers && room) timeout = 0;
    int n = poll(pfds, np, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      fatal("poll");
    }
    if (pfds[0].revents) read_stdin();
    if (pfds[1].revents & (POLLERR | POLLHUP)) kill_all_and_exit(0);
    if (pfds[2].revents) reap();
    for (size_t i = first_shell; i < first_writer; i++) {
      if (!pfds[i].revents) continue;
      if (pfds[i].fd == shell.fd_out) shell_drain(0);
      else if (pfds[i].fd == shell.fd_err) shell_drain(1);
      else if (shell.cur && pfds[i].fd == shell.fd_ctl) shell_feed(shell.cur);
    }
    for (size_t i = first_writer; i < first_stream; i++) {
      if (!pfds[i].revents) continue;
      for (writer_t *w = writers; w; w = w->next) {
        if (w->fd == pfds[i].fd) {
          finish_write(w);
          break;
        }
      }
    }
    for (size_t i = 3; i < first_shell; i++) {
      if (!pfds[i].revents) continue;
      cmd_t *c = owners[i];
      int hup = (pfds[i].revents & POLLHUP) != 0;
      if (pfds[i].fd == c->fd_out) drain(c, &c->fd_out, 0, hup);
      else if (pfds[i].fd == c->fd_err) drain(c, &c->fd_err, 1, hup);
      else if (pfds[i].fd == c->fd_in) feed_stdin(c);
    }
    streams_serve(pfds + first_stream, np - first_stream);
    read_files();
  }
}
