/*
 * Streams over the agent channel: a TCP connection to a port inside the sandbox (FR_PORT_OPEN:
 * the agent connects to 127.0.0.1:port in the container's own network namespace, so a sandbox
 * with `network: none` serves through the channel), or a terminal (FR_PTY_OPEN: bash on a pty).
 *
 * Each stream is named by the request id that opened it. Bytes travel as FR_STREAM_DATA (host ->
 * sandbox) and FR_STREAM_OUT (sandbox -> host), each side sending at most STREAM_WINDOW bytes its
 * peer has not acknowledged. The agent reads a stream only while its window is open and the
 * outbound queue is below OUT_HIGH, so a slow reader of one stream holds up neither the other
 * streams nor command output, and no buffer grows past its window.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "ports.h"
#include "protocol.h"

#define MAX_STREAMS 256
#define STREAM_CHUNK 65536
/* What a stream may hold of the host's bytes: the window, and slack for a host that overshoots. */
#define STREAM_WBUF_MAX (4u * STREAM_WINDOW)
/* Output read from a terminal after its process ended (its last words), at most. */
#define PTY_LAST_READ (1024u * 1024u)

typedef struct stream {
  struct stream *next;
  uint32_t id;
  int fd; /* the socket, or the terminal's master side */
  int is_pty;
  pid_t pid;      /* terminal: its process (leader of its own session) */
  uint32_t port;  /* port: the port connected to */
  int connecting; /* port: a non-blocking connect in progress */
  int dead;       /* ended; freed by the next streams_poll */
  uint8_t *wbuf;  /* the host's bytes not yet written into the sandbox side */
  size_t woff, wlen, wcap;
  int host_eof, shut, read_eof;
  uint64_t unacked; /* bytes sent to the host it has not acknowledged */
  int reaped, status;
} stream_t;

static stream_t *streams;
static size_t nstreams;
static stream_t **polled;
static size_t npolled, polled_cap;
static uint8_t sbuf[STREAM_CHUNK];

static stream_t *find_stream(uint32_t id) {
  for (stream_t *s = streams; s; s = s->next)
    if (s->id == id && !s->dead) return s;
  return NULL;
}

static stream_t *add_stream(uint32_t id, int fd) {
  stream_t *s = xrealloc(NULL, sizeof *s);
  memset(s, 0, sizeof *s);
  s->id = id, s->fd = fd;
  s->next = streams, streams = s, nstreams++;
  return s;
}

static void send_opened(uint32_t id, uint32_t pid) {
  frame_head(FR_STREAM_OPENED, id, 4);
  out_u32(pid);
}

static void send_ack(stream_t *s, size_t n) {
  frame_head(FR_STREAM_ACK, s->id, 4);
  out_u32((uint32_t)n);
}

/* Kills every process of session `sid` (a terminal's shell and its jobs, each in a group of its own). */
static void kill_session(pid_t sid) {
  kill(-sid, SIGKILL);
  DIR *d = opendir("/proc");
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    /* pid (comm) state ppid pgrp session ...: parse after the last ')' */
    char *rp = strrchr(buf, ')');
    char state;
    long ppid, pgrp, session;
    if (rp && sscanf(rp + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &session) == 4 && session == sid)
      kill((pid_t)pid, SIGKILL);
  }
  closedir(d);
}

/* Ends a stream: closes it (a terminal: kills its session) and tells the host how it ended. */
static void stream_end(stream_t *s, uint8_t kind, uint32_t code) {
  if (s->dead) return;
  if (s->is_pty && s->pid > 0) kill_session(s->pid);
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  free(s->wbuf);
  s->wbuf = NULL, s->woff = s->wlen = s->wcap = 0;
  frame_head(FR_STREAM_CLOSED, s->id, 5);
  out_bytes(&kind, 1);
  out_u32(code);
  s->dead = 1;
}

/* A terminal ends with its process; a port once both directions have ended. */
static void maybe_finish(stream_t *s) {
  if (s->dead) return;
  if (s->is_pty) {
    if (s->reaped && s->read_eof) {
      int sig = WIFSIGNALED(s->status);
      stream_end(s, (uint8_t)sig, (uint32_t)(sig ? WTERMSIG(s->status) : WEXITSTATUS(s->status)));
    }
  } else if (s->read_eof && s->host_eof && s->woff == s->wlen) {
    stream_end(s, 2, 0);
  }
}

static void stream_write(stream_t *s) {
  size_t done = 0;
  while (s->woff < s->wlen) {
    ssize_t k = write(s->fd, s->wbuf + s->woff, s->wlen - s->woff);
    if (k > 0) {
      s->woff += (size_t)k, done += (size_t)k;
    } else if (k < 0 && errno == EINTR) {
      continue;
    } else if (k < 0 && errno == EAGAIN) {
      break;
    } else if (s->is_pty) {
      /* Nobody reads the terminal any more: its input is dropped; the process's end closes it. */
      done += s->wlen - s->woff;
      s->woff = s->wlen;
    } else {
      int err = k < 0 ? errno : EIO;
      if (done) send_ack(s, done);
      stream_end(s, 2, (uint32_t)err); /* the peer reset the connection */
      return;
    }
  }
  if (done) send_ack(s, done);
  if (s->woff < s->wlen) return;
  s->woff = s->wlen = 0;
  if (s->wcap > 4 * STREAM_CHUNK) free(s->wbuf), s->wbuf = NULL, s->wcap = 0;
  if (s->host_eof && !s->is_pty && !s->shut) shutdown(s->fd, SHUT_WR), s->shut = 1;
  maybe_finish(s);
}

static void stream_read(stream_t *s) {
  size_t room = STREAM_WINDOW - s->unacked;
  if (room > STREAM_CHUNK) room = STREAM_CHUNK;
  ssize_t k = read(s->fd, sbuf, room);
  if (k > 0) {
    frame_head(FR_STREAM_OUT, s->id, (size_t)k);
    out_bytes(sbuf, (size_t)k);
    s->unacked += (uint64_t)k;
    return;
  }
  if (k < 0 && (errno == EINTR || errno == EAGAIN)) return;
  /* A terminal's master reads EIO once no process holds the terminal open. */
  if (k < 0 && !s->is_pty) {
    stream_end(s, 2, (uint32_t)errno);
    return;
  }
  s->read_eof = 1;
  frame_head(FR_STREAM_EOF, s->id, 0);
  maybe_finish(s);
}

static void stream_data(stream_t *s, const uint8_t *p, size_t n) {
  if (s->host_eof || n == 0) return;
  if (s->wlen - s->woff + n > STREAM_WBUF_MAX) {
    stream_end(s, 2, ENOBUFS); /* the host ignored the window */
    return;
  }
  if (s->woff > 0 && s->wlen + n > s->wcap) {
    memmove(s->wbuf, s->wbuf + s->woff, s->wlen - s->woff);
    s->wlen -= s->woff, s->woff = 0;
  }
  if (s->wlen + n > s->wcap) {
    size_t cap = s->wcap ? s->wcap : STREAM_CHUNK;
    while (cap < s->wlen + n) cap *= 2;
    s->wbuf = xrealloc(s->wbuf, cap), s->wcap = cap;
  }
  memcpy(s->wbuf + s->wlen, p, n);
  s->wlen += n;
  if (!s->connecting) stream_write(s);
}

static void connect_failed(uint32_t id, int err, uint32_t port) {
  char detail[128];
  if (err == ECONNREFUSED)
    snprintf(detail, sizeof detail, "nothing listens on 127.0.0.1:%u in the sandbox", port);
  else
    snprintf(detail, sizeof detail, "127.0.0.1:%u: %s", port, strerror(err));
  send_err(id, err, "connect", detail);
}

static void op_port_open(uint32_t id, const uint8_t *p, size_t n) {
  rd_t r = {p, n, 0, 0};
  uint32_t port = rd_u32(&r);
  if (r.bad || port == 0 || port > 65535) {
    send_err(id, EINVAL, "protocol", "a port is 1-65535");
    return;
  }
  if (find_stream(id) || nstreams >= MAX_STREAMS) {
    send_err(id, EBUSY, "limit", "too many open streams in this sandbox");
    return;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    send_err(id, errno, "socket", strerror(errno));
    return;
  }
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int rc;
  do rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  while (rc < 0 && errno == EINTR);
  if (rc < 0 && errno != EINPROGRESS) {
    int err = errno;
    close(fd);
    connect_failed(id, err, port);
    return;
  }
  stream_t *s = add_stream(id, fd);
  s->port = port;
  s->connecting = rc < 0;
  if (!s->connecting) send_opened(id, 0);
}

/* The terminal's child: a session of its own with the pty as controlling terminal, then bash. */
static void pty_child(const char *slave, int errfd, const char *cwd, const char *command, char **envp) {
  uint32_t msg[2] = {2, 0};
  setsid();
  int fd = open(slave, O_RDWR);
  if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) < 0) goto fail;
  if (dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) goto fail;
  if (fd > 2) close(fd);
  for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (cwd[0] && chdir(cwd) < 0) {
    msg[0] = 1;
    goto fail;
  }
  if (command[0]) {
    char *argv[] = {"bash", "-c", (char *)command, NULL};
    execve("/bin/bash", argv, envp);
  } else {
    char *argv[] = {"bash", "-i", NULL};
    execve("/bin/bash", argv, envp);
    char *argv_sh[] = {"sh", "-i", NULL};
    execve("/bin/sh", argv_sh, envp);
  }
fail:
  msg[1] = (uint32_t)errno;
  (void)!write(errfd, msg, sizeof msg);
  _exit(127);
}

static void op_pty_open(uint32_t id, const uint8_t *p, size_t n) {
  rd_t r = {p, n, 0, 0};
  uint32_t cols = rd_u32(&r), rows = rd_u32(&r);
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
  int m = -1, ex[2] = {-1, -1};
  if (r.bad || cols == 0 || rows == 0 || cols > 65535 || rows > 65535) {
    send_err(id, EINVAL, "protocol", "a terminal needs cols and rows of 1-65535");
    goto out;
  }
  if (find_stream(id) || nstreams >= MAX_STREAMS) {
    send_err(id, EBUSY, "limit", "too many open streams in this sandbox");
    goto out;
  }
  m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
    send_err(id, errno, "openpt", "the sandbox has no pseudo-terminals (/dev/pts)");
    goto out;
  }
  char slave[128];
  if (ptsname_r(m, slave, sizeof slave) != 0) {
    send_err(id, errno, "openpt", "ptsname");
    goto out;
  }
  struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
  ioctl(m, TIOCSWINSZ, &ws);
  if (pipe2(ex, O_CLOEXEC) < 0) {
    send_err(id, errno, "pipe", strerror(errno));
    goto out;
  }
  char **envp = merge_env(pairs, got);
  pid_t pid = fork();
  if (pid == 0) pty_child(slave, ex[1], cwd, command, envp);
  int fork_errno = errno;
  free(envp);
  close(ex[1]), ex[1] = -1;
  if (pid < 0) {
    send_err(id, fork_errno, "fork", strerror(fork_errno));
    goto out;
  }
  /* The report pipe closes at the exec: by then the child holds the terminal open, so the master
   * reads EIO only once the child and everything it started let go of it. */
  uint32_t msg[2];
  ssize_t k;
  do k = read(ex[0], msg, sizeof msg);
  while (k < 0 && errno == EINTR);
  if (k == (ssize_t)sizeof msg) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    send_err(id, (int)msg[1], msg[0] == 1 ? "chdir" : "exec",
             msg[0] == 1 ? cwd : "a terminal needs /bin/bash or /bin/sh in the sandbox");
    goto out;
  }
  set_nonblock(m);
  stream_t *s = add_stream(id, m);
  s->is_pty = 1, s->pid = pid;
  m = -1;
  send_opened(id, (uint32_t)pid);
out:
  if (m >= 0) close(m);
  if (ex[0] >= 0) close(ex[0]);
  if (ex[1] >= 0) close(ex[1]);
  for (uint32_t j = 0; j < got; j++) free(pairs[j]);
  free(pairs), free(cwd), free(command);
}

static void op_stream_ctl(uint32_t id, const uint8_t *p, size_t n) {
  stream_t *s = find_stream(id);
  if (!s || n < 1) return; /* it ended already: the host has (or will get) its FR_STREAM_CLOSED */
  rd_t r = {p, n, 1, 0};
  switch (p[0]) {
    case STREAM_EOF:
      s->host_eof = 1;
      if (!s->connecting) stream_write(s); /* shuts the write side down once drained */
      break;
    case STREAM_CLOSE: stream_end(s, 2, 0); break;
    case STREAM_RESIZE: {
      uint32_t cols = rd_u32(&r), rows = rd_u32(&r);
      if (r.bad || !s->is_pty || cols == 0 || rows == 0 || cols > 65535 || rows > 65535) break;
      struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
      ioctl(s->fd, TIOCSWINSZ, &ws);
      break;
    }
    case STREAM_ACK: {
      uint32_t k = rd_u32(&r);
      if (!r.bad) s->unacked = k >= s->unacked ? 0 : s->unacked - k;
      break;
    }
    default: break;
  }
}

int streams_frame(uint8_t type, uint32_t id, const uint8_t *p, size_t n) {
  switch (type) {
    case FR_PORT_OPEN: op_port_open(id, p, n); return 1;
    case FR_PTY_OPEN: op_pty_open(id, p, n); return 1;
    case FR_STREAM_DATA: {
      stream_t *s = find_stream(id);
      if (s) stream_data(s, p, n);
      return 1;
    }
    case FR_STREAM_CTL: op_stream_ctl(id, p, n); return 1;
    default: return 0;
  }
}

size_t streams_count(void) { return nstreams; }

size_t streams_poll(struct pollfd *pfds, size_t np) {
  for (stream_t **ps = &streams; *ps;) {
    stream_t *s = *ps;
    if (s->dead) {
      *ps = s->next, nstreams--;
      free(s);
    } else {
      ps = &s->next;
    }
  }
  if (nstreams > polled_cap) {
    polled_cap = nstreams * 2;
    polled = xrealloc(polled, polled_cap * sizeof *polled);
  }
  npolled = 0;
  int room = out_pending() < OUT_HIGH;
  for (stream_t *s = streams; s; s = s->next) {
    if (s->fd < 0) continue;
    short ev = 0;
    if (s->connecting) {
      ev = POLLOUT;
    } else {
      if (!s->read_eof && room && s->unacked < STREAM_WINDOW) ev |= POLLIN;
      if (s->woff < s->wlen) ev |= POLLOUT;
    }
    /* Not polled at all while it has nothing to do: a hang-up is seen once its window opens. */
    if (!ev) continue;
    polled[npolled++] = s;
    pfds[np++] = (struct pollfd){.fd = s->fd, .events = ev};
  }
  return np;
}

void streams_serve(const struct pollfd *pfds, size_t n) {
  for (size_t i = 0; i < n && i < npolled; i++) {
    stream_t *s = polled[i];
    short rev = pfds[i].revents;
    if (!rev || s->dead || s->fd != pfds[i].fd) continue;
    if (s->connecting) {
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
      if (err) {
        connect_failed(s->id, err, s->port);
        close(s->fd), s->fd = -1;
        s->dead = 1; /* its answer was the ERR: no FR_STREAM_CLOSED */
        continue;
      }
      s->connecting = 0;
      send_opened(s->id, 0);
      if (s->woff < s->wlen || s->host_eof) stream_write(s);
      continue;
    }
    if ((rev & POLLOUT) || ((rev & (POLLERR | POLLHUP)) && s->woff < s->wlen)) stream_write(s);
    if (!s->dead && !s->read_eof && (rev & (POLLIN | POLLHUP | POLLERR))) stream_read(s);
  }
}

void streams_reaped(pid_t pid, int status) {
  for (stream_t *s = streams; s; s = s->next) {
    if (!s->is_pty || s->dead || s->pid != pid) continue;
    s->reaped = 1, s->status = status;
    /* Its last output is in the terminal's buffer: pass it on before the end. */
    size_t total = 0;
    while (!s->read_eof && total < PTY_LAST_READ) {
      ssize_t k = read(s->fd, sbuf, sizeof sbuf);
      if (k > 0) {
        frame_head(FR_STREAM_OUT, s->id, (size_t)k);
        out_bytes(sbuf, (size_t)k);
        s->unacked += (uint64_t)k, total += (size_t)k;
      } else if (k < 0 && errno == EINTR) {
        continue;
      } else {
        break;
      }
    }
    if (!s->read_eof) s->read_eof = 1, frame_head(FR_STREAM_EOF, s->id, 0);
    maybe_finish(s);
  }
}

void streams_kill_all(void) {
  for (stream_t *s = streams; s; s = s->next)
    if (s->is_pty && !s->dead && s->pid > 0) kill_session(s->pid);
}
