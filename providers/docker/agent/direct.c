/*
 * The direct channel (`sbx-agent --direct`): the frames skip the engine's relay.
 *
 * A channel is a `docker exec`, so every frame would otherwise cross dockerd and containerd-shim
 * both ways (two processes copying each byte). When the host has a Unix socket in a folder that
 * is bind-mounted read-only into the container, it starts the agent with --direct and writes one
 * line on its stdin: "<token> <socket path>\n". The agent connects to that socket, sends the
 * token back (so only the agent the host started, which alone read the token from its stdin, is
 * taken as the channel) and from then on speaks the frame protocol on the socket: stdin and
 * stdout become the socket, so the rest of the agent does not change. The exec stays attached
 * (it carries stderr, and its end still means the agent ended).
 *
 * Where the socket cannot be reached (the host's folder is another machine's, or a runtime without
 * host sockets), the agent stays on stdin/stdout: the host sees the HELLO arrive there instead.
 */
#include <sys/socket.h>
#include <sys/un.h>

#define DIRECT_LINE_MAX 512

/* Writes all of `len` bytes to a blocking fd; 0 on success. */
static int write_all(int fd, const char *data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    data += n, len -= (size_t)n;
  }
  return 0;
}

/* Reads the host's line and moves the channel onto its socket when it can be reached. */
static void direct_connect(void) {
  char line[DIRECT_LINE_MAX];
  size_t len = 0;
  /* One byte at a time: nothing past the line is taken from the frames that may follow it. */
  for (;;) {
    if (len == sizeof line - 1) return;
    ssize_t n = read(STDIN_FILENO, line + len, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) exit(0); /* the host went away before the channel began */
    if (line[len] == '\n') break;
    len++;
  }
  line[len] = 0;
  char *space = strchr(line, ' ');
  if (!space) return;
  *space = 0;
  const char *path = space + 1;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) return;
  memcpy(addr.sun_path, path, strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  size_t token_len = (size_t)(space - line);
  line[token_len] = '\n';
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || write_all(fd, line, token_len + 1) < 0) {
    close(fd);
    return;
  }
  if (dup2(fd, STDIN_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0) fatal("dup2");
  close(fd);
}
