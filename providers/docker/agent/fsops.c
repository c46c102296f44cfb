/*
 * Filesystem helpers of the E2B endpoint (included by sbx-agent.c; everything here is `fs_`-prefixed).
 * Short-lived runs of the agent binary, started as background processes of the sandbox, as the
 * `--proc-*` modes are (the endpoint finds the binary as its supervisor's /proc/$PPID/exe):
 *
 *   sbx-agent --proc-fs-info <path>...
 *       one JSON line per path: {"path":<as given>,"target":<absolute target, symlinks only>,
 *       "metadata":{<key>:<value>...}}: the file's user metadata, the extended attributes under
 *       FS_META_PREFIX with the prefix stripped (what envd calls EntryInfo.metadata)
 *   sbx-agent --proc-fs-meta-set <n> <path>{n} [<key> <value>]...
 *       replaces the user metadata of each of the n files with the given pairs
 *   sbx-agent --proc-fs-watch <path> <recursive 0|1>
 *       watches a directory (inotify): {"start":true}, then one line per event,
 *       {"name":<path relative to the watched one>,"type":"create|write|remove|rename|chmod"},
 *       until killed or its output is closed. An upload's part file is not shown: its rename into
 *       place is the destination's create and write. Recursive: every directory below, and those that
 *       appear later (watched before their create event is printed).
 *
 * A failure prints {"error":"<CODE>","message":"..."} and exits 1, as the --proc-* modes do; an older
 * agent answers these modes with BAD_REQUEST "unknown or malformed", which the endpoint turns into
 * "unimplemented: the sandbox's agent predates this".
 *
 * Also: a truncating WRITE frame drops the file's user metadata (fs_clear_meta_fd), as an upload
 * through envd replaces it: an upload without metadata leaves none.
 */
#include <limits.h>
#include <stdarg.h>
#include <sys/inotify.h>
#include <sys/xattr.h>

#define FS_META_PREFIX "user.e2b."
#define FS_XATTR_LIST_MAX 65536

static void fs_json_str(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\') printf("\\%c", ch);
    else if (ch == '\n') fputs("\\n", stdout);
    else if (ch == '\t') fputs("\\t", stdout);
    else if (ch < 0x20 || ch >= 0x7f) printf("\\u%04x", ch);
    else putchar(ch);
  }
  putchar('"');
}

static void fs_fail(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fs_fail(const char *code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("{\"error\":\"%s\",\"message\":", code);
  fs_json_str(msg, strlen(msg));
  printf("}\n");
  fflush(stdout);
  _exit(1);
}

/* Removes every FS_META_PREFIX attribute of an open file (a truncating write replaces the content). */
static void fs_clear_meta_fd(int fd) {
  char names[FS_XATTR_LIST_MAX];
  ssize_t n = flistxattr(fd, names, sizeof names);
  for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1)
    if (strncmp(names + i, FS_META_PREFIX, strlen(FS_META_PREFIX)) == 0) (void)fremovexattr(fd, names + i);
}

/* Prints the metadata object of `path` (its FS_META_PREFIX attributes; a symlink's own). */
static void fs_print_meta(const char *path) {
  char names[FS_XATTR_LIST_MAX];
  ssize_t n = llistxattr(path, names, sizeof names);
  int first = 1;
  putchar('{');
  for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
    const char *name = names + i;
    size_t plen = strlen(FS_META_PREFIX);
    if (strncmp(name, FS_META_PREFIX, plen) != 0) continue;
    char value[4096];
    ssize_t v = lgetxattr(path, name, value, sizeof value);
    if (v < 0) continue;
    if (!first) putchar(',');
    first = 0;
    fs_json_str(name + plen, strlen(name + plen));
    putchar(':');
    fs_json_str(value, (size_t)v);
  }
  putchar('}');
}

static int fs_info(int argc, char **argv) {
  for (int i = 2; i < argc; i++) {
    const char *path = argv[i];
    struct stat st;
    if (lstat(path, &st) < 0) continue;
    printf("{\"path\":");
    fs_json_str(path, strlen(path));
    if (S_ISLNK(st.st_mode)) {
      /* The target as envd reports it: absolute, symlinks resolved; a dangling one as written. */
      char *real = realpath(path, NULL);
      char raw[PATH_MAX];
      ssize_t k = readlink(path, raw, sizeof raw - 1);
      printf(",\"target\":");
      if (real) fs_json_str(real, strlen(real));
      else if (k >= 0) fs_json_str(raw, (size_t)k);
      else fs_json_str("", 0);
      free(real);
    }
    printf(",\"metadata\":");
    fs_print_meta(path);
    printf("}\n");
  }
  return 0;
}

static int fs_meta_set(int argc, char **argv) {
  int n = argc > 2 ? atoi(argv[2]) : -1;
  if (n < 1 || 3 + n > argc || (argc - 3 - n) % 2 != 0) fs_fail("BAD_REQUEST", "malformed --proc-fs-meta-set");
  for (int f = 0; f < n; f++) {
    const char *path = argv[3 + f];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* through a symlink, as the upload wrote */
    if (fd < 0) fs_fail(errno == ENOENT ? "NOT_FOUND" : "BAD_REQUEST", "cannot open %s: %s", path, strerror(errno));
    fs_clear_meta_fd(fd);
    for (int i = 3 + n; i + 1 < argc; i += 2) {
      char name[512];
      snprintf(name, sizeof name, "%s%s", FS_META_PREFIX, argv[i]);
      if (fsetxattr(fd, name, argv[i + 1], strlen(argv[i + 1]), 0) < 0)
        fs_fail(errno == ENOTSUP ? "UNSUPPORTED" : errno == ENOSPC || errno == E2BIG ? "BAD_REQUEST" : "INTERNAL",
                "cannot store metadata %s on %s: %s", argv[i], path, strerror(errno));
    }
    close(fd);
  }
  printf("{\"ok\":true}\n");
  return 0;
}

/* ---- watch ---------------------------------------------------------------------------------- */

typedef struct {
  int wd;
  char *rel; /* directory relative to the watched root ("" for the root) */
} fs_watch_t;

static fs_watch_t *fs_watches;
static size_t fs_nwatches, fs_capwatches;
static int fs_inotify = -1;

#define FS_WATCH_MASK \
  (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

static const char *fs_rel_of(int wd) {
  for (size_t i = 0; i < fs_nwatches; i++)
    if (fs_watches[i].wd == wd) return fs_watches[i].rel;
  return NULL;
}

static void fs_forget(int wd) {
  for (size_t i = 0; i < fs_nwatches; i++)
    if (fs_watches[i].wd == wd) {
      free(fs_watches[i].rel);
      fs_watches[i] = fs_watches[--fs_nwatches];
      return;
    }
}

/* Watches root/rel, and with `recursive` every directory below it. */
static void fs_add_tree(const char *root, const char *rel, int recursive) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s%s%s", root, *rel ? "/" : "", rel);
  int wd = inotify_add_watch(fs_inotify, path, FS_WATCH_MASK | IN_ONLYDIR);
  if (wd < 0) return;
  if (!fs_rel_of(wd)) {
    if (fs_nwatches == fs_capwatches) {
      fs_capwatches = fs_capwatches ? fs_capwatches * 2 : 16;
      fs_watches = realloc(fs_watches, fs_capwatches * sizeof *fs_watches);
      if (!fs_watches) fs_fail("INTERNAL", "out of memory");
    }
    fs_watches[fs_nwatches++] = (fs_watch_t){.wd = wd, .rel = strdup(rel)};
  }
  if (!recursive) return;
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char child[PATH_MAX];
    snprintf(child, sizeof child, "%s%s%s", rel, *rel ? "/" : "", e->d_name);
    char full[PATH_MAX * 2];
    snprintf(full, sizeof full, "%s/%s", root, child);
    struct stat st;
    if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode)) fs_add_tree(root, child, 1);
  }
  closedir(d);
}

static void fs_emit(const char *name, const char *type) {
  printf("{\"name\":");
  fs_json_str(name, strlen(name));
  printf(",\"type\":\"%s\"}\n", type);
}

/*
 * Whether `name` is the hidden part file of an upload (providers/docker/files.ts partPath:
 * `.<name>.sbx-part-<8 hex>`), written beside the destination and renamed over it at the end.
 */
static int fs_is_part(const char *name) {
  const char *slash = strrchr(name, '/');
  const char *base = slash ? slash + 1 : name;
  size_t n = strlen(base), tag = strlen(".sbx-part-");
  if (base[0] != '.' || n < 1 + tag + 8) return 0;
  if (strncmp(base + n - 8 - tag, ".sbx-part-", tag) != 0) return 0;
  for (size_t i = n - 8; i < n; i++)
    if (!strchr("0123456789abcdef", base[i])) return 0;
  return 1;
}

static int fs_watch(const char *path, int recursive) {
  signal(SIGPIPE, SIG_DFL); /* the reader went away: end */
  struct stat st;
  if (stat(path, &st) < 0) {
    if (errno == ENOENT || errno == ENOTDIR) fs_fail("NOT_FOUND", "path '%s' does not exist", path);
    fs_fail("BAD_REQUEST", "cannot watch '%s': %s", path, strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) fs_fail("BAD_REQUEST", "path '%s' is not a directory", path);
  char *root = realpath(path, NULL);
  if (!root) fs_fail("BAD_REQUEST", "cannot resolve '%s': %s", path, strerror(errno));
  fs_inotify = inotify_init1(IN_CLOEXEC);
  if (fs_inotify < 0) fs_fail("INTERNAL", "inotify: %s", strerror(errno));
  fs_add_tree(root, "", recursive);
  if (fs_nwatches == 0) fs_fail("BAD_REQUEST", "cannot watch '%s': %s", path, strerror(errno));
  printf("{\"start\":true}\n");
  fflush(stdout);
  uint32_t part_cookie = 0; /* the rename of a part file under way */
  char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t len = read(fs_inotify, buf, sizeof buf);
    if (len < 0 && errno == EINTR) continue;
    if (len <= 0) return 1;
    for (char *p = buf; p < buf + len;) {
      struct inotify_event *ev = (struct inotify_event *)p;
      p += sizeof *ev + ev->len;
      const char *rel = fs_rel_of(ev->wd);
      if (!rel) continue;
      if (ev->mask & IN_IGNORED) {
        int was_root = !*rel;
        fs_forget(ev->wd);
        if (was_root) return 0; /* the watched directory is gone */
        continue;
      }
      char name[PATH_MAX];
      if (ev->len)
        snprintf(name, sizeof name, "%s%s%s", rel, *rel ? "/" : "", ev->name);
      else
        snprintf(name, sizeof name, "%s", rel);
      /* A directory that appears is watched before its event goes out: what the reader does next in
         it is seen. Events for its own parent's subtree come from the parent's watch. */
      if (recursive && (ev->mask & IN_ISDIR) && (ev->mask & (IN_CREATE | IN_MOVED_TO))) fs_add_tree(root, name, 1);
      /* The entry's own events of a subdirectory are reported by its parent's watch. */
      if (!ev->len && (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF))) continue;
      /* An upload (a part file renamed into place) is the file's create and write, as an in-place
         write shows under envd; the part file's own events are not the watcher's business. */
      if (fs_is_part(name)) {
        if (ev->mask & IN_MOVED_FROM) part_cookie = ev->cookie;
        continue;
      }
      if ((ev->mask & IN_MOVED_TO) && part_cookie && ev->cookie == part_cookie) {
        part_cookie = 0;
        fs_emit(name, "create");
        fs_emit(name, "write");
        continue;
      }
      if (ev->mask & (IN_CREATE | IN_MOVED_TO)) fs_emit(name, "create");
      if (ev->mask & IN_MODIFY) fs_emit(name, "write");
      if (ev->mask & IN_DELETE) fs_emit(name, "remove");
      if (ev->mask & IN_MOVED_FROM) fs_emit(name, "rename");
      if (ev->mask & IN_ATTRIB) fs_emit(name, "chmod");
    }
    if (fflush(stdout) != 0) return 1;
  }
}

/* Dispatches an `--proc-fs-*` mode; -1 when `argv[1]` is none of them. */
static int fs_main(int argc, char **argv) {
  const char *mode = argv[1];
  if (!strcmp(mode, "--proc-fs-info")) return fs_info(argc, argv);
  if (!strcmp(mode, "--proc-fs-meta-set")) return fs_meta_set(argc, argv);
  if (!strcmp(mode, "--proc-fs-watch") && argc == 4) return fs_watch(argv[2], atoi(argv[3]) != 0);
  return -1;
}
