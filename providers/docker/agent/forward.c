/*
 * The egress forwarder (`sbx-agent --init --egress-forward PORT SOCKET`): a sandbox whose profile
 * has an egress allowlist keeps `network: none`; its only way out is 127.0.0.1:PORT, which this
 * process forwards, byte for byte, to SOCKET, a Unix socket the host bind-mounts into the sandbox
 * and on which the service's egress proxy listens. Policy lives in that proxy, outside the
 * sandbox: this code decides nothing. Killing it only closes the way out (it fails closed).
 *
 * One process forked by --init; one forked child per connection (a blocking poll loop over two fds).
 */
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#define FWD_CHUNK 65536

static void forward_pair(int a, int b) {
  static char buf[FWD_CHUNK];
  struct pollfd p[2] = {{.fd = a, .events = POLLIN}, {.fd = b, .events = POLLIN}};
  int open_a = 1, open_b = 1;
  while (open_a || open_b) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < 2; i++) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int from = p[i].fd, to = p[1 - i].fd;
      ssize_t n = read(from, buf, sizeof buf);
      if (n <= 0) {
        /* One side ended: pass the end on (half-close) and stop reading it. */
        shutdown(to, SHUT_WR);
        p[i].fd = -1;
        if (i == 0) open_a = 0;
        else open_b = 0;
        continue;
      }
      for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        off += w;
      }
    }
  }
}

static void forward_one(int client, const char *socket_path) {
  int up = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", socket_path);
  if (up < 0 || connect(up, (struct sockaddr *)&sa, sizeof sa) < 0) {
    static const char msg[] =
        "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
        "sbx egress: the egress proxy is not reachable from this sandbox (its service is gone)\n";
    ssize_t ignored = write(client, msg, sizeof msg - 1);
    (void)ignored;
    return;
  }
  forward_pair(client, up);
}

/* Runs the forwarder; returns only if it cannot listen. */
static int run_forwarder(int port, const char *socket_path) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGCHLD, SIG_IGN); /* connection children reap themselves */
  signal(SIGPIPE, SIG_IGN);
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 128) < 0) {
    fprintf(stderr, "sbx-agent: egress forwarder cannot listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
    return 1;
  }
  for (;;) {
    int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) continue;
      return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(ls);
      forward_one(c, socket_path);
      _exit(0);
    }
    close(c);
  }
}

/* Forks the forwarder (from --init); its pid, or -1. */
static pid_t start_forwarder(int port, const char *socket_path) {
  pid_t pid = fork();
  if (pid == 0) _exit(run_forwarder(port, socket_path));
  return pid;
}
