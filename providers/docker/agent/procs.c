/*
 * Background processes of a sandbox (included by sbx-agent.c; everything here is `proc_`-prefixed).
 *
 * A process belongs to the container, not to one agent channel: its state lives in files under
 * <root>/<id>/ (root is /tmp/.sbx-proc), so any channel of any worker can list, read, write or
 * signal it. Each mode is a short-lived run of the agent binary, started as an ordinary command:
 *
 *   sbx-agent --proc-start <root> <id> <ring-bytes> <max-running> [<backpressure-idle-ms>]
 *                      (the command line on stdin)
 *   sbx-agent --proc-list <root>
 *   sbx-agent --proc-read <root> <id> <stdout-offset> <stderr-offset> <max-bytes> <wait-ms>
 *                      (waits up to wait-ms, woken by inotify, for a byte past an offset or the end)
 *   sbx-agent --proc-stdin <root> <id> <close 0|1>                  (the bytes on stdin)
 *   sbx-agent --proc-signal <root> <id> <signo> <wait-ms>
 *   sbx-agent --proc-remove <root> <id>
 *
 * Each prints one JSON line; a failure prints {"error":"<CODE>","message":"..."} and exits 1.
 *
 * --proc-start forks a supervisor (its own session, stdio on /dev/null, a subreaper) that runs
 * `bash -c <command>` (or sh) as the leader of a new session / process group, so a signal reaches
 * the whole group. The supervisor pumps stdout and stderr into two ring files (16-byte header:
 * u64 bytes written ever, u64 ring size; then the ring), each write under flock, so readers see a
 * consistent ring: byte a of the stream sits at 16 + a % size while a >= written - size. Stdin is a
 * FIFO the child reads; the supervisor holds a write end open (so writers may come and go) until
 * SIGUSR1, which closes stdin for good. At the leader's exit the supervisor writes `exit`; it ends
 * once both pipes reach EOF (background children of the command may hold them longer).
 *
 * Backpressure (--proc-start's fifth argument, an idle time in ms; 0 or absent: none): each ring also
 * has a 32-byte trailer after the ring, at 16 + size (the file is sparse up to it, and readers of
 * the ring ignore it): u64 magic, u64 acknowledged offset, u64 blocked flag, u64 time of the last
 * read (wall-clock ms). A read acknowledges every byte below the offset it asks for (the
 * acknowledgement only grows; under an exclusive flock of the ring) and stamps the time, and the
 * supervisor reads a pipe only while the ring holds fewer than `size` unacknowledged bytes, at most
 * the room left: a writer faster than its reader fills its pipe and blocks, and no byte a reader has
 * not acknowledged is overwritten. Only while someone reads, though: once no read came for the idle
 * time (the reader went away), the ring drops the oldest bytes as without backpressure, until a
 * read comes again (as envd holds a writer back for its subscribers only). A blocked supervisor
 * sets the blocked flag; a read that acknowledges more wakes it with SIGUSR2 (and it looks again
 * every PROC_BLOCKED_POLL_MS anyway). A ring without the trailer (no backpressure, or written by an
 * older agent) is read exactly as before.
 *
 * Exit: at the leader's exit the supervisor records how far each stream will reach once the bytes
 * still in the pipe at that moment are pumped (ring total + FIONREAD), so a reader that sees the
 * exit reads on to those ends (`stdoutBytes` / `stderrBytes` report them) instead of stopping
 * short; with backpressure those bytes may wait for reads. A blocked supervisor whose files were
 * removed ends. The exit (and so a kill) is recorded whether or not anyone reads.
 *
 * Files of <root>/<id>/: cmd, meta ("pid supervisor-pid started-ms"), out, err, in (FIFO),
 * in.closed, exit ("kind value ended-ms out-end err-end", kind 0 = exit code, 1 = signal; an older
 * agent writes the first three only).
 */
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>

#define PROC_HDR 16
/* The trailer of a ring with backpressure: "SBXBPRE1". */
#define PROC_BP_MAGIC 0x3145525042584253ull
/* How often a blocked supervisor looks at its rings without a wake-up. */
#define PROC_BLOCKED_POLL_MS 200
#define PROC_MAX_CMD (1024 * 1024)

static void proc_fail(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

static void proc_json_str(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch == '\n') fputs("\\n", f);
    else if (ch == '\t') fputs("\\t", f);
    else if (ch == '\r') fputs("\\r", f);
    else if (ch < 0x20 || ch == 0x7f) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

#include <stdarg.h>
static void proc_fail(const char *code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("{\"error\":\"%s\",\"message\":", code);
  proc_json_str(stdout, msg, strlen(msg));
  printf("}\n");
  fflush(stdout);
  _exit(1);
}

static int64_t proc_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void proc_sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

static void proc_check_id(const char *id) {
  size_t n = strlen(id);
  if (n == 0 || n > 64) proc_fail("BAD_REQUEST", "process id must be 1-64 characters");
  for (size_t i = 0; i < n; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      proc_fail("BAD_REQUEST", "process id may hold only letters, digits, '-' and '_'");
  }
}

/* Reads a whole small file into buf (NUL-terminated); -1 when absent. */
static ssize_t proc_read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  ssize_t n;
  while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)n;
  close(fd);
  buf[len] = 0;
  return (ssize_t)len;
}

/* Writes path atomically (a temporary file renamed over it). */
static int proc_write_atomic(const char *path, const char *data, size_t n) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  ssize_t w = write(fd, data, n);
  close(fd);
  if (w != (ssize_t)n) return -1;
  return rename(tmp, path);
}

typedef struct {
  char id[65];
  pid_t pid, sup;
  int64_t started, ended;
  int exited, kind, value; /* kind 0: exit code, 1: signal */
  int lost, stdin_closed;
  uint64_t out_total, err_total;
  /* Where each stream ends once the bytes in the pipe at the leader's exit are pumped (exited only). */
  uint64_t out_end, err_end;
} proc_info_t;

static uint64_t proc_ring_total(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint64_t hdr[2] = {0, 0};
  flock(fd, LOCK_SH);
  (void)!pread(fd, hdr, sizeof hdr, 0);
  flock(fd, LOCK_UN);
  close(fd);
  return hdr[0];
}

/* Loads <root>/<id>; 0 when it is not a process directory. */
static int proc_load(const char *root, const char *id, proc_info_t *p) {
  char path[4096], buf[256];
  memset(p, 0, sizeof *p);
  snprintf(p->id, sizeof p->id, "%s", id);
  snprintf(path, sizeof path, "%s/%s/meta", root, id);
  if (proc_read_small(path, buf, sizeof buf) < 0) return 0;
  long long pid = 0, sup = 0, started = 0;
  if (sscanf(buf, "%lld %lld %lld", &pid, &sup, &started) != 3) return 0;
  p->pid = (pid_t)pid, p->sup = (pid_t)sup, p->started = started;
  snprintf(path, sizeof path, "%s/%s/exit", root, id);
  unsigned long long out_end = 0, err_end = 0;
  if (proc_read_small(path, buf, sizeof buf) >= 0) {
    long long ended = 0;
    if (sscanf(buf, "%d %d %lld %llu %llu", &p->kind, &p->value, &ended, &out_end, &err_end) >= 3)
      p->exited = 1, p->ended = ended;
  }
  int sup_gone = kill(p->sup, 0) < 0 && errno == ESRCH;
  /* No exit status and no supervisor: it was killed from inside the sandbox (kill -9 -1). */
  if (!p->exited && sup_gone) p->lost = 1;
  snprintf(path, sizeof path, "%s/%s/in.closed", root, id);
  p->stdin_closed = access(path, F_OK) == 0;
  snprintf(path, sizeof path, "%s/%s/out", root, id);
  p->out_total = proc_ring_total(path);
  snprintf(path, sizeof path, "%s/%s/err", root, id);
  p->err_total = proc_ring_total(path);
  /* Ends past the rings only while a supervisor is there to pump the rest (else it is lost). */
  p->out_end = sup_gone || out_end < p->out_total ? p->out_total : out_end;
  p->err_end = sup_gone || err_end < p->err_total ? p->err_total : err_end;
  return 1;
}

static void proc_print(FILE *f, const char *root, const proc_info_t *p) {
  char path[4096];
  static char cmd[PROC_MAX_CMD + 1];
  snprintf(path, sizeof path, "%s/%s/cmd", root, p->id);
  ssize_t n = proc_read_small(path, cmd, sizeof cmd);
  fprintf(f, "{\"id\":\"%s\",\"command\":", p->id);
  proc_json_str(f, cmd, n < 0 ? 0 : (size_t)n);
  fprintf(f, ",\"pid\":%d,\"state\":\"%s\",\"exitCode\":", (int)p->pid,
          p->exited ? "exited" : p->lost ? "lost" : "running");
  if (p->exited && p->kind == 0) fprintf(f, "%d", p->value);
  else fputs("null", f);
  fputs(",\"signal\":", f);
  if (p->exited && p->kind == 1) fprintf(f, "%d", p->value);
  else fputs("null", f);
  fprintf(f, ",\"startedAt\":%lld,\"endedAt\":", (long long)p->started);
  if (p->exited) fprintf(f, "%lld", (long long)p->ended);
  else fputs("null", f);
  fprintf(f, ",\"stdinClosed\":%s,\"stdoutBytes\":%llu,\"stderrBytes\":%llu}", p->stdin_closed ? "true" : "false",
          (unsigned long long)p->out_end, (unsigned long long)p->err_end);
}

static void proc_need(const char *root, const char *id, proc_info_t *p) {
  proc_check_id(id);
  if (!proc_load(root, id, p)) proc_fail("NOT_FOUND", "no process %s", id);
}

/* ---------- the ring ---------- */

static void proc_ring_append(int fd, const uint8_t *data, size_t n) {
  uint64_t hdr[2];
  flock(fd, LOCK_EX);
  if (pread(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr && hdr[1] > 0) {
    uint64_t cap = hdr[1], total = hdr[0] + n;
    if (n > cap) data += n - cap, n = (size_t)cap;
    uint64_t at = (total - n) % cap;
    size_t first = (size_t)(cap - at < n ? cap - at : n);
    (void)!pwrite(fd, data, first, (off_t)(PROC_HDR + at));
    if (first < n) (void)!pwrite(fd, data + first, n - first, PROC_HDR);
    hdr[0] = total;
    (void)!pwrite(fd, hdr, sizeof hdr, 0);
  }
  flock(fd, LOCK_UN);
}

/* The trailer of a ring of `cap` bytes: {magic, acknowledged offset, blocked}. */
static off_t proc_trailer_at(uint64_t cap) { return (off_t)(PROC_HDR + cap); }

/*
 * The room a supervisor may fill without overwriting unacknowledged bytes: UINT64_MAX without
 * backpressure. Sets the trailer's blocked flag when there is none (clears it otherwise).
 */
static uint64_t proc_ring_room(int fd, int64_t idle_ms) {
  uint64_t hdr[2], tr[4], room = UINT64_MAX;
  flock(fd, LOCK_EX);
  if (pread(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr && hdr[1] > 0 &&
      pread(fd, tr, sizeof tr, proc_trailer_at(hdr[1])) == (ssize_t)sizeof tr && tr[0] == PROC_BP_MAGIC) {
    uint64_t acked = tr[1] < hdr[0] ? tr[1] : hdr[0];
    uint64_t unread = hdr[0] - acked;
    /* Nobody read for the idle time: nobody holds the writer back. */
    int idle = proc_wall_ms() - (int64_t)tr[3] > idle_ms;
    room = idle ? UINT64_MAX : unread >= hdr[1] ? 0 : hdr[1] - unread;
    uint64_t blocked = room == 0;
    if (tr[2] != blocked) (void)!pwrite(fd, &blocked, sizeof blocked, proc_trailer_at(hdr[1]) + 16);
  }
  flock(fd, LOCK_UN);
  return room;
}

/*
 * Whether `pid` is the supervisor of process `id` (its command line is the --proc-start that forked
 * it): a supervisor killed from inside the sandbox leaves its pid to be reused, and SIGUSR2 would end
 * whatever took it.
 */
static int proc_is_supervisor(pid_t pid, const char *id) {
  char path[64], argv[4096];
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
  ssize_t n = proc_read_small(path, argv, sizeof argv);
  int start = 0;
  for (ssize_t at = 0; at < n; at += (ssize_t)strlen(argv + at) + 1) {
    if (!strcmp(argv + at, "--proc-start")) start = 1;
    else if (start && !strcmp(argv + at, id)) return 1;
  }
  return 0;
}

/*
 * Acknowledges the bytes of a ring below `offset` (at most what it holds); wakes the supervisor
 * `sup` of process `id` when it was blocked and the acknowledgement grew. Nothing for a ring
 * without backpressure.
 */
static void proc_ring_ack(const char *path, uint64_t offset, pid_t sup, const char *id) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return; /* absent, or not ours to write: the read still works, acknowledging nothing */
  uint64_t hdr[2], tr[4];
  int wake = 0;
  flock(fd, LOCK_EX);
  if (pread(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr && hdr[1] > 0 &&
      pread(fd, tr, sizeof tr, proc_trailer_at(hdr[1])) == (ssize_t)sizeof tr && tr[0] == PROC_BP_MAGIC) {
    uint64_t acked = offset < hdr[0] ? offset : hdr[0];
    if (acked > tr[1]) tr[1] = acked, wake = tr[2] != 0;
    tr[3] = (uint64_t)proc_wall_ms(); /* someone reads: the writer is held back for them */
    (void)!pwrite(fd, tr + 1, sizeof tr[1], proc_trailer_at(hdr[1]) + 8);
    (void)!pwrite(fd, tr + 3, sizeof tr[3], proc_trailer_at(hdr[1]) + 24);
  }
  flock(fd, LOCK_UN);
  close(fd);
  if (wake && sup > 0 && proc_is_supervisor(sup, id)) kill(sup, SIGUSR2);
}

static const char proc_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void proc_print_b64(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    putchar(proc_b64[v >> 18 & 63]);
    putchar(proc_b64[v >> 12 & 63]);
    putchar(i + 1 < n ? proc_b64[v >> 6 & 63] : '=');
    putchar(i + 2 < n ? proc_b64[v & 63] : '=');
  }
}

/* Prints {"offset":first byte returned,"next":..,"dropped":..,"data":"<base64>"} of one stream. */
static void proc_print_slice(const char *path, uint64_t offset, uint64_t max) {
  uint64_t hdr[2] = {0, 0};
  uint8_t *buf = NULL;
  uint64_t start = offset, len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    flock(fd, LOCK_SH);
    if (pread(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr && hdr[1] > 0) {
      uint64_t total = hdr[0], cap = hdr[1];
      uint64_t oldest = total > cap ? total - cap : 0;
      if (start > total) start = total;
      if (start < oldest) start = oldest;
      len = total - start;
      if (len > max) len = max;
      buf = malloc(len ? len : 1);
      uint64_t at = start % cap;
      size_t first = (size_t)(cap - at < len ? cap - at : len);
      (void)!pread(fd, buf, first, (off_t)(PROC_HDR + at));
      if (first < len) (void)!pread(fd, buf + first, len - first, PROC_HDR);
    }
    flock(fd, LOCK_UN);
    close(fd);
  }
  printf("{\"offset\":%llu,\"next\":%llu,\"dropped\":%llu,\"data\":\"", (unsigned long long)start,
         (unsigned long long)(start + len), (unsigned long long)(start > offset ? start - offset : 0));
  if (buf) proc_print_b64(buf, (size_t)len);
  printf("\"}");
  free(buf);
}

/* ---------- start and the supervisor ---------- */

static int proc_make_ring(const char *path, uint64_t cap, int backpressure) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  uint64_t hdr[2] = {0, cap}, tr[4] = {PROC_BP_MAGIC, 0, 0, (uint64_t)proc_wall_ms()};
  if (write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr ||
      (backpressure && pwrite(fd, tr, sizeof tr, proc_trailer_at(cap)) != (ssize_t)sizeof tr)) {
    close(fd);
    return -1;
  }
  return fd;
}

#define PROC_KEEP_ENDED 32 /* ended processes kept (their output readable); older ones are forgotten */

/* Deletes the files of <root>/<id> (the process must have ended or be killed). */
static int proc_forget(const char *root, const char *id) {
  static const char *files[] = {"cmd", "meta", "out", "err", "in", "in.closed", "exit", "exit.tmp", "meta.tmp", "cmd.tmp"};
  char path[4096];
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    snprintf(path, sizeof path, "%s/%s/%s", root, id, files[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/%s", root, id);
  return rmdir(path);
}

/* Counts running processes; forgets the oldest ended ones past PROC_KEEP_ENDED - 1 (room for one more). */
static int proc_count_running(const char *root) {
  DIR *d = opendir(root);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  proc_info_t p;
  struct ended {
    char id[65];
    int64_t at;
  } *ended = NULL;
  size_t nended = 0, cap = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || !proc_load(root, e->d_name, &p)) continue;
    if (!p.exited && !p.lost) {
      n++;
      continue;
    }
    if (nended == cap) ended = realloc(ended, (cap = cap ? cap * 2 : 64) * sizeof *ended);
    if (!ended) break;
    snprintf(ended[nended].id, sizeof ended[nended].id, "%s", p.id);
    ended[nended++].at = p.exited ? p.ended : p.started;
  }
  closedir(d);
  while (ended && nended >= PROC_KEEP_ENDED) {
    size_t oldest = 0;
    for (size_t i = 1; i < nended; i++)
      if (ended[i].at < ended[oldest].at) oldest = i;
    proc_forget(root, ended[oldest].id);
    ended[oldest] = ended[--nended];
  }
  free(ended);
  return n;
}

/* Where a stream ends once its pipe's bytes are pumped: the ring's total plus what the pipe holds. */
static uint64_t proc_stream_end(int ring, int pipe_fd) {
  uint64_t hdr[2] = {0, 0};
  (void)!pread(ring, hdr, sizeof hdr, 0);
  int queued = 0;
  if (pipe_fd >= 0 && ioctl(pipe_fd, FIONREAD, &queued) < 0) queued = 0;
  return hdr[0] + (uint64_t)(queued > 0 ? queued : 0);
}

/*
 * The supervisor's loop: pumps the pipes into the rings (with backpressure, only into room readers
 * acknowledged), records the exit, closes stdin on SIGUSR1; SIGUSR2 only wakes it.
 */
static void proc_supervise(const char *dir, pid_t child, int fd_out, int fd_err, int keeper, int ring_out,
                           int ring_err, int64_t idle_ms) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  int sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  int exited = 0;
  char path[4096];
  uint8_t buf[65536];
  while (fd_out >= 0 || fd_err >= 0 || !exited) {
    struct pollfd pf[3] = {{.fd = fd_out, .events = POLLIN}, {.fd = fd_err, .events = POLLIN},
                           {.fd = sig_fd, .events = POLLIN}};
    uint64_t room[2] = {sizeof buf, sizeof buf};
    int blocked = 0;
    for (int s = 0; idle_ms > 0 && s < 2; s++) {
      if (pf[s].fd < 0) continue;
      uint64_t r = proc_ring_room(s ? ring_err : ring_out, idle_ms);
      if (r < room[s]) room[s] = r;
      if (!room[s]) pf[s].fd = -1, blocked = 1; /* poll ignores it: the pipe fills, the writer waits */
    }
    if (blocked) {
      /* Its files were removed (the process was deleted or forgotten): nobody will read on. */
      struct stat st;
      if (fstat(ring_out, &st) == 0 && st.st_nlink == 0) break;
    }
    if (poll(pf, 3, blocked ? PROC_BLOCKED_POLL_MS : exited ? -1 : 1000) < 0 && errno != EINTR) break;
    for (int s = 0; s < 2; s++) {
      int *fd = s ? &fd_err : &fd_out;
      if (*fd < 0 || pf[s].fd < 0 || !pf[s].revents) continue;
      ssize_t n = read(*fd, buf, (size_t)room[s]);
      if (n > 0) proc_ring_append(s ? ring_err : ring_out, buf, (size_t)n);
      else if (n == 0 || (errno != EINTR && errno != EAGAIN)) close(*fd), *fd = -1;
    }
    struct signalfd_siginfo si;
    while (sig_fd >= 0 && read(sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
      if (si.ssi_signo == SIGUSR1 && keeper >= 0) {
        close(keeper), keeper = -1;
        snprintf(path, sizeof path, "%s/in.closed", dir);
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) close(fd);
      }
    }
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      if (pid != child || exited) continue;
      exited = 1;
      char line[160];
      int sig = WIFSIGNALED(status);
      int n = snprintf(line, sizeof line, "%d %d %lld %llu %llu\n", sig, sig ? WTERMSIG(status) : WEXITSTATUS(status),
                       (long long)proc_wall_ms(), (unsigned long long)proc_stream_end(ring_out, fd_out),
                       (unsigned long long)proc_stream_end(ring_err, fd_err));
      snprintf(path, sizeof path, "%s/exit", dir);
      proc_write_atomic(path, line, (size_t)n);
    }
  }
  _exit(0);
}

static int proc_start(const char *root, const char *id, uint64_t cap, int max_running, int64_t idle_ms) {
  proc_check_id(id);
  if (cap < 1024 || cap > (1ull << 30)) proc_fail("BAD_REQUEST", "ring size must be 1 KiB to 1 GiB");
  if (idle_ms < 0) proc_fail("BAD_REQUEST", "the backpressure idle time must be 0 (none) or more ms");
  static char cmd[PROC_MAX_CMD + 1];
  size_t len = 0;
  ssize_t n;
  while (len < PROC_MAX_CMD && (n = read(0, cmd + len, PROC_MAX_CMD - len)) > 0) len += (size_t)n;
  cmd[len] = 0;
  if (!len) proc_fail("BAD_REQUEST", "empty command");
  if (mkdir(root, 0700) < 0 && errno != EEXIST) proc_fail("INTERNAL", "mkdir %s: %s", root, strerror(errno));
  char path[4096], dir[2048];
  snprintf(path, sizeof path, "%s/.lock", root);
  int lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0 || flock(lock, LOCK_EX) < 0) proc_fail("INTERNAL", "lock %s: %s", path, strerror(errno));
  int running = proc_count_running(root);
  if (running >= max_running) proc_fail("LIMIT", "%d processes are running in this session", running);
  snprintf(dir, sizeof dir, "%s/%s", root, id);
  if (mkdir(dir, 0700) < 0) {
    if (errno == EEXIST) proc_fail("CONFLICT", "process %s exists", id);
    proc_fail(errno == ENOSPC ? "NO_SPACE" : "INTERNAL", "mkdir %s: %s", dir, strerror(errno));
  }
  snprintf(path, sizeof path, "%s/cmd", dir);
  if (proc_write_atomic(path, cmd, len) < 0) proc_fail("NO_SPACE", "writing %s: %s", path, strerror(errno));
  snprintf(path, sizeof path, "%s/out", dir);
  int ring_out = proc_make_ring(path, cap, idle_ms > 0);
  snprintf(path, sizeof path, "%s/err", dir);
  int ring_err = proc_make_ring(path, cap, idle_ms > 0);
  snprintf(path, sizeof path, "%s/in", dir);
  if (ring_out < 0 || ring_err < 0 || mkfifo(path, 0600) < 0)
    proc_fail("INTERNAL", "creating the files of %s: %s", dir, strerror(errno));
  int report[2];
  if (pipe2(report, O_CLOEXEC) < 0) proc_fail("INTERNAL", "pipe: %s", strerror(errno));
  pid_t sup = fork();
  if (sup < 0) proc_fail("INTERNAL", "fork: %s", strerror(errno));
  if (sup == 0) {
    close(report[0]);
    close(lock); /* the lock belongs to the starter only */
    setsid();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) dup2(null, 0), dup2(null, 1), dup2(null, 2), close(null);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    int rfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int keeper = rfd < 0 ? -1 : open(path, O_WRONLY | O_CLOEXEC);
    int po[2], pe[2], execd[2];
    if (keeper < 0 || pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 || pipe2(execd, O_CLOEXEC) < 0)
      _exit(1);
    pid_t child = fork();
    if (child < 0) _exit(1);
    if (child == 0) {
      setsid();
      dup2(rfd, 0), dup2(po[1], 1), dup2(pe[1], 2);
      fcntl(0, F_SETFL, fcntl(0, F_GETFL) & ~O_NONBLOCK);
      for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, NULL);
      char *argv_bash[] = {"bash", "-c", cmd, NULL};
      execve("/bin/bash", argv_bash, environ);
      char *argv_sh[] = {"sh", "-c", cmd, NULL};
      execve("/bin/sh", argv_sh, environ);
      fprintf(stderr, "sbx-agent: cannot run bash or sh: %s\n", strerror(errno));
      _exit(127);
    }
    close(rfd), close(po[1]), close(pe[1]), close(execd[1]);
    /* The child's exec (or its exit) closes its end of `execd` (close-on-exec): only then is it
     * the leader of its own group, so a signal to the group right after start reaches it. Reporting
     * earlier let a fast signal find no group (ESRCH: "has ended") on a loaded machine. */
    char sync;
    while (read(execd[0], &sync, 1) < 0 && errno == EINTR) {
    }
    close(execd[0]);
    char meta[128];
    int m = snprintf(meta, sizeof meta, "%d %d %lld\n", (int)child, (int)getpid(), (long long)proc_wall_ms());
    snprintf(path, sizeof path, "%s/meta", dir);
    proc_write_atomic(path, meta, (size_t)m);
    (void)!write(report[1], &child, sizeof child);
    close(report[1]);
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    proc_supervise(dir, child, po[0], pe[0], keeper, ring_out, ring_err, idle_ms);
  }
  close(report[1]);
  pid_t child = 0;
  if (read(report[0], &child, sizeof child) != (ssize_t)sizeof child) {
    waitpid(sup, NULL, 0);
    proc_fail("INTERNAL", "the supervisor of process %s did not start (out of processes? see pidsLimit)", id);
  }
  flock(lock, LOCK_UN);
  proc_info_t p;
  if (!proc_load(root, id, &p)) proc_fail("INTERNAL", "process %s has no state", id);
  proc_print(stdout, root, &p);
  putchar('\n');
  return 0;
}

/* ---------- the other modes ---------- */

static int proc_list(const char *root) {
  DIR *d = opendir(root);
  fputs("{\"processes\":[", stdout);
  if (d) {
    struct dirent *e;
    int first = 1;
    proc_info_t p;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.' || !proc_load(root, e->d_name, &p)) continue;
      if (!first) putchar(',');
      first = 0;
      proc_print(stdout, root, &p);
    }
    closedir(d);
  }
  puts("]}");
  return 0;
}

/* Waits until a stream has a byte past its offset or the process ended, up to wait_ms. */
static void proc_wait_output(const char *root, const char *id, proc_info_t *p, uint64_t out_off, uint64_t err_off,
                             long wait_ms) {
  if (wait_ms <= 0) return;
  char dir[2048];
  snprintf(dir, sizeof dir, "%s/%s", root, id);
  int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (in < 0) return;
  inotify_add_watch(in, dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF);
  int64_t deadline = proc_wall_ms() + wait_ms;
  for (;;) {
    if (!proc_load(root, id, p)) break;
    if (p->out_total > out_off || p->err_total > err_off || p->lost) break;
    /* Ended, and the rings hold all the supervisor will pump (the rest of the pipes comes first). */
    if (p->exited && p->out_total >= p->out_end && p->err_total >= p->err_end) break;
    int64_t left = deadline - proc_wall_ms();
    if (left <= 0) break;
    struct pollfd pf = {.fd = in, .events = POLLIN};
    /* A supervisor killed from inside the sandbox writes nothing: look again at least every second. */
    if (poll(&pf, 1, left < 1000 ? (int)left : 1000) > 0) {
      char ev[4096];
      while (read(in, ev, sizeof ev) > 0) {
      }
    }
  }
  close(in);
}

static int proc_read_out(const char *root, const char *id, uint64_t out_off, uint64_t err_off, uint64_t max,
                         long wait_ms) {
  proc_info_t p;
  proc_need(root, id, &p);
  char path[4096];
  /* Acknowledged before waiting: a supervisor blocked on this reader may then pump what it waits for. */
  snprintf(path, sizeof path, "%s/%s/out", root, id);
  proc_ring_ack(path, out_off, p.sup, id);
  snprintf(path, sizeof path, "%s/%s/err", root, id);
  proc_ring_ack(path, err_off, p.sup, id);
  proc_wait_output(root, id, &p, out_off, err_off, wait_ms);
  proc_need(root, id, &p);
  fputs("{\"process\":", stdout);
  proc_print(stdout, root, &p);
  fputs(",\"stdout\":", stdout);
  snprintf(path, sizeof path, "%s/%s/out", root, id);
  proc_print_slice(path, out_off, max);
  fputs(",\"stderr\":", stdout);
  snprintf(path, sizeof path, "%s/%s/err", root, id);
  proc_print_slice(path, err_off, max);
  puts("}");
  return 0;
}

static void proc_wait_exit(const char *root, const char *id, proc_info_t *p, long wait_ms) {
  for (long waited = 0; waited < wait_ms && !p->exited && !p->lost; waited += 10) {
    proc_sleep_ms(10);
    proc_load(root, id, p);
  }
}

static int proc_stdin(const char *root, const char *id, int close_after) {
  proc_info_t p;
  proc_need(root, id, &p);
  if (p.stdin_closed) proc_fail("CONFLICT", "the stdin of process %s is closed", id);
  if (p.exited || p.lost) proc_fail("CONFLICT", "process %s is not running", id);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/in", root, id);
  int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    proc_fail("CONFLICT", "process %s no longer reads its stdin (%s)", id,
              errno == ENXIO ? "nothing holds it open" : strerror(errno));
  static uint8_t data[1 << 16];
  uint64_t written = 0;
  int64_t deadline = proc_wall_ms() + 5000;
  ssize_t n;
  while ((n = read(0, data, sizeof data)) > 0) {
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(fd, data + off, (size_t)(n - off));
      if (w > 0) {
        off += w, written += (uint64_t)w;
        continue;
      }
      if (w < 0 && errno == EPIPE) proc_fail("CONFLICT", "process %s closed its stdin after %llu bytes", id, (unsigned long long)written);
      if (w < 0 && errno != EAGAIN && errno != EINTR) proc_fail("INTERNAL", "writing stdin: %s", strerror(errno));
      int64_t left = deadline - proc_wall_ms();
      struct pollfd pf = {.fd = fd, .events = POLLOUT};
      if (left <= 0 || poll(&pf, 1, (int)left) == 0)
        proc_fail("SANDBOX_TIMEOUT", "process %s does not read its stdin: %llu bytes written in 5 s, the rest was not",
                  id, (unsigned long long)written);
    }
  }
  close(fd);
  if (close_after) {
    /* Recorded here (the supervisor may be past its child's end); SIGUSR1 closes the keeper. */
    snprintf(path, sizeof path, "%s/%s/in.closed", root, id);
    int m = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (m >= 0) close(m);
    kill(p.sup, SIGUSR1);
  }
  proc_load(root, id, &p);
  printf("{\"written\":%llu,\"process\":", (unsigned long long)written);
  proc_print(stdout, root, &p);
  puts("}");
  return 0;
}

static int proc_signal(const char *root, const char *id, int sig, long wait_ms) {
  proc_info_t p;
  proc_need(root, id, &p);
  if (kill(-p.pid, sig) < 0) {
    if (errno == ESRCH) proc_fail("CONFLICT", "process %s has ended, and nothing of its group runs", id);
    proc_fail("BAD_REQUEST", "signal %d: %s", sig, strerror(errno));
  }
  proc_wait_exit(root, id, &p, wait_ms);
  proc_print(stdout, root, &p);
  putchar('\n');
  return 0;
}

static int proc_remove(const char *root, const char *id) {
  proc_info_t p;
  proc_need(root, id, &p);
  if (!p.exited && !p.lost) {
    kill(-p.pid, SIGKILL);
    proc_wait_exit(root, id, &p, 2000);
  }
  proc_print(stdout, root, &p);
  putchar('\n');
  fflush(stdout);
  if (proc_forget(root, id) < 0) {
    fprintf(stderr, "sbx-agent: removing %s/%s: %s\n", root, id, strerror(errno));
    return 1;
  }
  return 0;
}

/* Entry point of every --proc-* mode. */
static int proc_main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  const char *mode = argv[1];
  if (argc > 2 && strlen(argv[2]) > 1024) proc_fail("BAD_REQUEST", "process root over 1024 characters");
  if (!strcmp(mode, "--proc-start") && (argc == 6 || argc == 7))
    return proc_start(argv[2], argv[3], strtoull(argv[4], NULL, 10), atoi(argv[5]),
                      argc == 7 ? strtoll(argv[6], NULL, 10) : 0);
  if (!strcmp(mode, "--proc-list") && argc == 3) return proc_list(argv[2]);
  if (!strcmp(mode, "--proc-read") && argc == 8)
    return proc_read_out(argv[2], argv[3], strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10),
                         strtoull(argv[6], NULL, 10), strtol(argv[7], NULL, 10));
  if (!strcmp(mode, "--proc-stdin") && argc == 5) return proc_stdin(argv[2], argv[3], atoi(argv[4]));
  if (!strcmp(mode, "--proc-signal") && argc == 6)
    return proc_signal(argv[2], argv[3], atoi(argv[4]), strtol(argv[5], NULL, 10));
  if (!strcmp(mode, "--proc-remove") && argc == 4) return proc_remove(argv[2], argv[3]);
  proc_fail("BAD_REQUEST", "unknown or malformed %s invocation (%d arguments)", mode, argc - 1);
}
