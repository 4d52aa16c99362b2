/*
 * berth-sandboxd: the agent inside every container sandbox. It is the container's PID 1 (it reaps
 * every child, orphans too), runs commands, moves files and bridges the sandbox's only way out.
 * Engine exec costs ~230 ms per command; a Unix socket to this agent costs a few ms.
 *
 *   berth-sandboxd [--socket PATH] [--proxy-listen IP:PORT --proxy-socket PATH]
 *
 * Protocol (src/agent/protocol.ts says the same): frames `[u32 BE length][u8 type][payload]`,
 * length = 1 + payload bytes, payload <= MAX_PAYLOAD. One operation per connection, chosen by
 * the client's first frame:
 *   PING                        -> PONG "berth-sandboxd 1"
 *   SPAWN fields                -> STARTED u32 pid | ERROR; then STDOUT/STDERR chunks and EXIT.
 *                                  Client may send DATA (stdin), EOF (close stdin), KILL (SIGKILL
 *                                  to the process group); dropping the connection kills it too.
 *   WRITE_FILE path, DATA*, EOF -> OK | ERROR (temp file + rename, parents created)
 *   READ_FILE path              -> FILE_DATA* FILE_END | ERROR
 * SPAWN fields: [u8 tag][u32 BE length][bytes], tags 'a' argv element, 'e' KEY=VALUE env override,
 * 'c' cwd, 'f' fallback argv[0] (used when argv[0] does not exist). EXIT: [i32 code (-1 when
 * signalled)][i32 signal][u8 oom killed]. ERROR: [u8 kind][message]. Every output chunk of a
 * command is sent before its EXIT. A malformed frame closes that connection only.
 *
 * The bridge: TCP connections to --proxy-listen (loopback inside the sandbox, which has no other
 * network) are spliced to the auth proxy's Unix socket, both ways, with half-close. The host
 * listens on that socket, in a folder mounted read-only: the agent connects out to it.
 *
 * The sandbox's commands run as the agent's user and can replace its socket file; the host then
 * refuses to talk to what is there (it dials only the socket this agent made when it started).
 *
 * One poll() loop, no threads. Static glibc without NSS (no user or host name lookups).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define VERSION_LINE "berth-sandboxd 1"
#define MAX_PAYLOAD (256 * 1024)
#define CHUNK (64 * 1024)
/* Above this many unsent bytes for a client, stop reading what produces more (backpressure). */
#define HIGH_WATER (256 * 1024)

enum { T_PING = 1, T_SPAWN, T_DATA, T_EOF, T_KILL, T_WRITE_FILE, T_READ_FILE };
enum { T_PONG = 0x81, T_STARTED, T_STDOUT, T_STDERR, T_EXIT, T_ERROR, T_OK, T_FILE_DATA, T_FILE_END };
enum { E_OTHER, E_NOT_FOUND, E_IS_DIRECTORY, E_PERMISSION, E_NO_SPACE, E_BAD_REQUEST };
enum op { OP_NONE, OP_SPAWN, OP_WRITE, OP_READ, OP_DONE };

struct buf { char *p; size_t off, len, cap; };

struct conn {
	int fd, dead, closing;
	enum op op;
	struct buf in, out;
	/* spawn */
	pid_t pid;
	int running, killed, out_fd[2], in_fd, stdin_eof;
	long oom_before;
	struct buf stdin_buf;
	/* files */
	int file_fd;
	char *path, *tmp;
	struct conn *next;
};

/* b[i] holds bytes read from fd[i] that are still to be written to fd[1 - i]. */
struct bridge {
	int fd[2], eof[2], shut[2], dead;
	struct buf b[2];
	struct bridge *next;
};

static struct conn *conns;
static struct bridge *bridges;
static const char *socket_path = "/.berth/run/agent.sock";
static const char *proxy_listen, *proxy_socket;
/* --ca-bundle OUT --ca-extra FILE: OUT becomes the image's CA bundle plus FILE (the proxy's CA). */
static const char *ca_bundle, *ca_extra;

static void die(const char *what)
{
	fprintf(stderr, "berth-sandboxd: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p) {
		errno = ENOMEM;
		die("out of memory");
	}
	return p;
}

static size_t pending(const struct buf *b) { return b->len - b->off; }

/* Makes room for n more bytes at p + len. */
static void reserve(struct buf *b, size_t n)
{
	if (b->off > 0 && b->len + n > b->cap) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	if (b->len + n > b->cap) {
		b->cap = b->cap * 2 > b->len + n ? b->cap * 2 : b->len + n;
		b->p = xrealloc(b->p, b->cap);
	}
}

static void append(struct buf *b, const void *data, size_t n)
{
	reserve(b, n);
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void consume(struct buf *b, size_t n)
{
	b->off += n;
	if (b->off == b->len) b->off = b->len = 0;
}

static void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

static void put_u32(unsigned char *p, uint32_t v)
{
	p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static uint32_t get_u32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void send_frame(struct conn *c, int type, const void *data, size_t n)
{
	unsigned char h[5];
	put_u32(h, n + 1);
	h[4] = type;
	append(&c->out, h, 5);
	append(&c->out, data, n);
}

static int error_kind(int err)
{
	switch (err) {
	case ENOENT: case ENOTDIR: return E_NOT_FOUND;
	case EISDIR: return E_IS_DIRECTORY;
	case EACCES: case EPERM: case EROFS: return E_PERMISSION;
	case ENOSPC: case EDQUOT: return E_NO_SPACE;
	default: return E_OTHER;
	}
}

__attribute__((format(printf, 3, 4))) static void send_error(struct conn *c, int kind, const char *fmt, ...)
{
	char msg[4200];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg + 1, sizeof msg - 1, fmt, ap);
	va_end(ap);
	msg[0] = kind;
	send_frame(c, T_ERROR, msg, 1 + (n < 0 ? 0 : (size_t)n >= sizeof msg - 1 ? sizeof msg - 2 : (size_t)n));
}

static void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static void close_fd(int *fd)
{
	if (*fd >= 0) close(*fd);
	*fd = -1;
}

/* The memory cgroup's count of OOM kills (v2, then v1), -1 when there is none to read. */
static long oom_kills(void)
{
	static const char *files[] = { "/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control" };
	for (size_t i = 0; i < 2; i++) {
		char text[1024];
		int fd = open(files[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) continue;
		ssize_t n = read(fd, text, sizeof text - 1);
		close(fd);
		if (n <= 0) continue;
		text[n] = 0;
		for (char *line = text; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
			if (strncmp(line, "oom_kill ", 9) == 0) return strtol(line + 9, NULL, 10);
	}
	return -1;
}

/* ---- spawn ---- */

struct spawn_failure { int stage, err; };

static void kill_group(struct conn *c)
{
	if (c->op == OP_SPAWN && c->running) kill(-c->pid, SIGKILL);
}

/* In the forked child: never returns. Failures go to the parent through `report` (close-on-exec). */
static void child(int in, int out, int err, int report, char **argv, char **env, size_t nenv,
		  const char *cwd, const char *fallback)
{
	struct spawn_failure f = { 0, 0 };
	sigset_t none;
	setsid();
	for (int s = 1; s < NSIG; s++) signal(s, SIG_DFL); /* SIGPIPE was ignored; exec keeps that */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	dup2(in, 0);
	dup2(out, 1);
	dup2(err, 2);
	/* The agent's own low OOM score protects it; the command should be the one the OOM killer picks. */
	int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (adj >= 0) {
		if (write(adj, "0", 1) < 0) { /* not allowed to raise it: keep what we have */ }
		close(adj);
	}
	for (size_t i = 0; i < nenv; i++) {
		char *eq = strchr(env[i], '=');
		*eq = 0;
		setenv(env[i], eq + 1, 1);
	}
	if (cwd && chdir(cwd) < 0) {
		f.stage = 1;
	} else {
		execvp(argv[0], argv);
		if (errno == ENOENT && fallback) {
			argv[0] = (char *)fallback;
			execvp(fallback, argv);
		}
		f.stage = 2;
	}
	f.err = errno;
	if (write(report, &f, sizeof f) < 0) { /* the parent then sees a plain exit 127 */ }
	_exit(127);
}

/* Decodes SPAWN fields; 0 when the frame is malformed. Strings are NUL-free and copied. */
static int parse_spawn(const unsigned char *p, size_t n, char ***argv, size_t *argc, char ***env,
		       size_t *nenv, char **cwd, char **fallback)
{
	while (n > 0) {
		if (n < 5) return 0;
		int tag = p[0];
		uint32_t len = get_u32(p + 1);
		if (len > n - 5 || memchr(p + 5, 0, len)) return 0;
		char *s = strndup((const char *)p + 5, len);
		if (!s) die("out of memory");
		if (tag == 'a') {
			*argv = xrealloc(*argv, (*argc + 2) * sizeof **argv);
			(*argv)[(*argc)++] = s;
			(*argv)[*argc] = NULL;
		} else if (tag == 'e' && strchr(s, '=') && s[0] != '=') {
			*env = xrealloc(*env, (*nenv + 1) * sizeof **env);
			(*env)[(*nenv)++] = s;
		} else if (tag == 'c' && !*cwd) {
			*cwd = s;
		} else if (tag == 'f' && !*fallback) {
			*fallback = s;
		} else {
			free(s);
			return 0;
		}
		p += 5 + len;
		n -= 5 + len;
	}
	return *argc > 0;
}

static void do_spawn(struct conn *c, const unsigned char *p, size_t n)
{
	char **argv = NULL, **env = NULL, *cwd = NULL, *fallback = NULL;
	size_t argc = 0, nenv = 0;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, err[2] = { -1, -1 }, rep[2] = { -1, -1 };
	c->op = OP_DONE;
	c->closing = 1;
	if (!parse_spawn(p, n, &argv, &argc, &env, &nenv, &cwd, &fallback)) {
		send_error(c, E_BAD_REQUEST, "malformed spawn request");
		goto out;
	}
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
	    pipe2(rep, O_CLOEXEC) < 0) {
		send_error(c, error_kind(errno), "pipe: %s", strerror(errno));
		goto fail;
	}
	long oom_before = oom_kills();
	pid_t pid = fork();
	if (pid < 0) {
		send_error(c, E_OTHER, "fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) child(in[0], out[1], err[1], rep[1], argv, env, nenv, cwd, fallback);
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&err[1]);
	close_fd(&rep[1]);
	struct spawn_failure f;
	ssize_t got;
	do got = read(rep[0], &f, sizeof f); while (got < 0 && errno == EINTR);
	if (got == sizeof f) {
		waitpid(pid, NULL, 0);
		if (f.stage == 1)
			send_error(c, error_kind(f.err), "working directory %s: %s", cwd, strerror(f.err));
		else
			send_error(c, error_kind(f.err), "cannot run %s: %s", argv[0], strerror(f.err));
		goto fail;
	}
	c->op = OP_SPAWN;
	c->closing = 0;
	c->pid = pid;
	c->running = 1;
	c->oom_before = oom_before;
	c->in_fd = in[1];
	c->out_fd[0] = out[0];
	c->out_fd[1] = err[0];
	in[1] = out[0] = err[0] = -1;
	set_nonblock(c->in_fd);
	set_nonblock(c->out_fd[0]);
	set_nonblock(c->out_fd[1]);
	unsigned char pidb[4];
	put_u32(pidb, pid);
	send_frame(c, T_STARTED, pidb, 4);
fail:
	for (int i = 0; i < 2; i++) {
		close_fd(&in[i]);
		close_fd(&out[i]);
		close_fd(&err[i]);
		close_fd(&rep[i]);
	}
out:
	for (size_t i = 0; i < argc; i++) free(argv[i]);
	for (size_t i = 0; i < nenv; i++) free(env[i]);
	free(argv);
	free(env);
	free(cwd);
	free(fallback);
}

/* Reads one chunk of a command's stdout (i = 0) or stderr (i = 1); closes it at EOF. */
static ssize_t read_output(struct conn *c, int i)
{
	char chunk[CHUNK];
	ssize_t n = read(c->out_fd[i], chunk, sizeof chunk);
	if (n > 0) send_frame(c, i == 0 ? T_STDOUT : T_STDERR, chunk, n);
	else if (n == 0 || errno != EAGAIN) close_fd(&c->out_fd[i]);
	return n;
}

static void command_exited(struct conn *c, int status)
{
	c->running = 0;
	/* What the command wrote is all in the pipes now (a pipe holds at most its size); a background
	 * child still writing must not keep us here. */
	for (int i = 0; i < 2; i++) {
		int size = c->out_fd[i] >= 0 ? fcntl(c->out_fd[i], F_GETPIPE_SZ) : 0;
		for (long left = size > 0 ? size : CHUNK; c->out_fd[i] >= 0 && left > 0;) {
			ssize_t n = read_output(c, i);
			if (n <= 0) break;
			left -= n;
		}
		close_fd(&c->out_fd[i]);
	}
	close_fd(&c->in_fd);
	buf_free(&c->stdin_buf);
	unsigned char e[9];
	int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	put_u32(e, WIFEXITED(status) ? (uint32_t)WEXITSTATUS(status) : (uint32_t)-1);
	put_u32(e + 4, sig);
	e[8] = sig == SIGKILL && !c->killed && c->oom_before >= 0 && oom_kills() > c->oom_before;
	send_frame(c, T_EXIT, e, 9);
	c->op = OP_DONE;
	c->closing = 1;
}

static void reap(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		for (struct conn *c = conns; c; c = c->next)
			if (c->op == OP_SPAWN && c->running && c->pid == pid) command_exited(c, status);
}

static void write_stdin(struct conn *c)
{
	while (c->in_fd >= 0 && pending(&c->stdin_buf) > 0) {
		ssize_t n = write(c->in_fd, c->stdin_buf.p + c->stdin_buf.off, pending(&c->stdin_buf));
		if (n > 0) {
			consume(&c->stdin_buf, n);
		} else if (errno == EAGAIN) {
			return;
		} else { /* the command closed its stdin: what it did not read is dropped */
			close_fd(&c->in_fd);
			buf_free(&c->stdin_buf);
		}
	}
	if (c->stdin_eof) close_fd(&c->in_fd);
}

/* ---- files ---- */

static int mkdir_parents(char *path)
{
	for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = 0;
		int r = mkdir(path, 0755);
		*s = '/';
		if (r < 0 && errno != EEXIST) return -1;
	}
	return 0;
}

static void begin_write(struct conn *c, const char *path)
{
	struct stat st;
	size_t len = strlen(path);
	c->op = OP_DONE; /* until it works; then further frames are ignored */
	if (len == 0 || path[len - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
		send_error(c, E_IS_DIRECTORY, "%s", strerror(EISDIR));
		return;
	}
	c->path = strdup(path);
	c->tmp = xrealloc(NULL, len + 20);
	const char *slash = strrchr(path, '/');
	int dirlen = slash ? (int)(slash - path) + 1 : 0;
	snprintf(c->tmp, len + 20, "%.*s.berth-write-XXXXXX", dirlen, path);
	if (mkdir_parents(c->tmp) < 0 || (c->file_fd = mkostemp(c->tmp, O_CLOEXEC)) < 0) {
		send_error(c, error_kind(errno), "%s", strerror(errno));
		free(c->tmp);
		c->tmp = NULL;
		return;
	}
	fchmod(c->file_fd, stat(path, &st) == 0 ? st.st_mode & 07777 : 0644);
	c->op = OP_WRITE;
}

static void write_failed(struct conn *c, int err)
{
	send_error(c, error_kind(err), "%s", strerror(err));
	close_fd(&c->file_fd);
	unlink(c->tmp);
	c->op = OP_DONE; /* keep reading (and ignoring) until the client, who has the error, hangs up */
}

static void write_data(struct conn *c, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(c->file_fd, p, n);
		if (w < 0 && errno == EINTR) continue;
		if (w < 0) return write_failed(c, errno);
		p += w;
		n -= w;
	}
}

static void finish_write(struct conn *c)
{
	int fd = c->file_fd;
	c->file_fd = -1;
	if (close(fd) < 0) return write_failed(c, errno);
	if (rename(c->tmp, c->path) < 0) return write_failed(c, errno);
	send_frame(c, T_OK, NULL, 0);
	c->op = OP_DONE;
	c->closing = 1;
}

static void begin_read(struct conn *c, const char *path)
{
	struct stat st;
	c->op = OP_DONE;
	c->closing = 1;
	/* O_NONBLOCK: a FIFO without a writer must not hang the whole agent. */
	c->file_fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (c->file_fd < 0 || fstat(c->file_fd, &st) < 0) {
		send_error(c, error_kind(errno), "%s", strerror(errno));
		close_fd(&c->file_fd);
	} else if (S_ISDIR(st.st_mode)) {
		send_error(c, E_IS_DIRECTORY, "%s", strerror(EISDIR));
		close_fd(&c->file_fd);
	} else if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
		send_error(c, E_OTHER, "not a regular file");
		close_fd(&c->file_fd);
	} else {
		c->op = OP_READ;
		c->closing = 0;
	}
}

/* One chunk per loop turn per reader, so a huge file does not starve everyone else. */
static void read_chunk(struct conn *c)
{
	char chunk[CHUNK];
	ssize_t n = read(c->file_fd, chunk, sizeof chunk);
	if (n > 0) {
		send_frame(c, T_FILE_DATA, chunk, n);
		return;
	}
	if (n < 0 && errno == EAGAIN) return;
	if (n < 0) send_error(c, error_kind(errno), "%s", strerror(errno));
	else send_frame(c, T_FILE_END, NULL, 0);
	close_fd(&c->file_fd);
	c->op = OP_DONE;
	c->closing = 1;
}

/* ---- connections ---- */

static void bad_request(struct conn *c, const char *why)
{
	kill_group(c);
	send_error(c, E_BAD_REQUEST, "%s", why);
	c->op = OP_DONE;
	c->closing = 1;
	c->in.off = c->in.len = 0;
}

static void handle_frame(struct conn *c, int type, const unsigned char *p, size_t n)
{
	char path[4097];
	if (c->op == OP_NONE) {
		if (type == T_PING) {
			send_frame(c, T_PONG, VERSION_LINE, strlen(VERSION_LINE));
			c->op = OP_DONE;
			c->closing = 1;
		} else if (type == T_SPAWN) {
			do_spawn(c, p, n);
		} else if ((type == T_WRITE_FILE || type == T_READ_FILE) && n < sizeof path && !memchr(p, 0, n)) {
			memcpy(path, p, n);
			path[n] = 0;
			if (type == T_WRITE_FILE) begin_write(c, path);
			else begin_read(c, path);
		} else {
			bad_request(c, "unknown or malformed request");
		}
	} else if (c->op == OP_SPAWN) {
		if (type == T_DATA && c->in_fd >= 0 && !c->stdin_eof) append(&c->stdin_buf, p, n);
		else if (type == T_EOF) c->stdin_eof = 1;
		else if (type == T_KILL) {
			c->killed = 1;
			kill_group(c);
		}
		else if (type != T_DATA) bad_request(c, "unexpected frame during a command");
		write_stdin(c);
	} else if (c->op == OP_WRITE) {
		if (type == T_DATA) write_data(c, p, n);
		else if (type == T_EOF) finish_write(c);
		else bad_request(c, "unexpected frame during a file write");
	}
	/* OP_READ and OP_DONE: the client has nothing more to say; ignore it. */
}

static void read_client(struct conn *c)
{
	reserve(&c->in, CHUNK);
	ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		c->dead = 1; /* the client went away: a running command goes with it */
		return;
	}
	if (n < 0) return;
	c->in.len += n;
	while (pending(&c->in) >= 5) {
		if (c->op == OP_DONE) { /* nothing more to hear: a request finished or refused */
			c->in.off = c->in.len = 0;
			return;
		}
		const unsigned char *h = (const unsigned char *)c->in.p + c->in.off;
		uint32_t len = get_u32(h);
		if (len < 1 || len - 1 > MAX_PAYLOAD) return bad_request(c, "frame length out of range");
		if (pending(&c->in) < 4 + (size_t)len) {
			reserve(&c->in, 4 + len - pending(&c->in));
			return;
		}
		consume(&c->in, 4 + len);
		handle_frame(c, h[4], h + 5, len - 1);
	}
}

static void flush_client(struct conn *c)
{
	while (pending(&c->out) > 0) {
		ssize_t n = send(c->fd, c->out.p + c->out.off, pending(&c->out), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			consume(&c->out, n);
		} else {
			if (errno != EAGAIN && errno != EINTR) c->dead = 1;
			break;
		}
	}
	/* Half-close, then wait for the client to close: a frame it sent meanwhile (close-stdin, kill)
	 * must not meet a closed socket, whose EPIPE would make it drop our unread last frame (EXIT). */
	if (c->closing == 1 && pending(&c->out) == 0) {
		shutdown(c->fd, SHUT_WR);
		c->closing = 2;
	}
}

static void free_conn(struct conn *c)
{
	kill_group(c); /* still running: nobody is left to hear about it */
	close_fd(&c->fd);
	close_fd(&c->out_fd[0]);
	close_fd(&c->out_fd[1]);
	close_fd(&c->in_fd);
	if (c->file_fd >= 0 && c->tmp) unlink(c->tmp);
	close_fd(&c->file_fd);
	buf_free(&c->in);
	buf_free(&c->out);
	buf_free(&c->stdin_buf);
	free(c->path);
	free(c->tmp);
	free(c);
}

/* ---- the proxy bridge ---- */

static void bridge_accept(int fd)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int unix_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	strncpy(addr.sun_path, proxy_socket, sizeof addr.sun_path - 1);
	if (unix_fd < 0 || connect(unix_fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
		fprintf(stderr, "berth-sandboxd: proxy %s: %s\n", proxy_socket, strerror(errno));
		close(fd);
		if (unix_fd >= 0) close(unix_fd);
		return;
	}
	struct bridge *b = xrealloc(NULL, sizeof *b);
	memset(b, 0, sizeof *b);
	b->fd[0] = fd;
	b->fd[1] = unix_fd;
	b->next = bridges;
	bridges = b;
}

static void bridge_pump(struct bridge *b)
{
	for (int i = 0; i < 2; i++) {
		struct buf *buf = &b->b[i];
		if (!b->eof[i] && buf->len < CHUNK) {
			reserve(buf, CHUNK - buf->len);
			ssize_t n = recv(b->fd[i], buf->p + buf->len, CHUNK - buf->len, MSG_DONTWAIT);
			if (n > 0) buf->len += n;
			else if (n == 0) b->eof[i] = 1;
			else if (errno != EAGAIN && errno != EINTR) b->dead = 1;
		}
		if (pending(buf) > 0) {
			ssize_t n = send(b->fd[1 - i], buf->p + buf->off, pending(buf), MSG_NOSIGNAL | MSG_DONTWAIT);
			if (n > 0) consume(buf, n);
			else if (errno != EAGAIN && errno != EINTR) b->dead = 1;
		}
		if (b->eof[i] && pending(buf) == 0 && !b->shut[1 - i]) {
			shutdown(b->fd[1 - i], SHUT_WR);
			b->shut[1 - i] = 1;
		}
	}
	if (b->shut[0] && b->shut[1]) b->dead = 1;
}

/* ---- setup and the loop ---- */

static int listen_unix(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct stat st;
	if (strlen(path) >= sizeof addr.sun_path) {
		errno = ENAMETOOLONG;
		die(path);
	}
	strcpy(addr.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) die("socket");
	/* Whatever a previous run left here goes (a socket, or a symlink planted by the sandbox's own
	 * commands): the folder is this sandbox's, and the host only ever dials the socket made below. */
	if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode)) unlink(path);
	mode_t old = umask(077); /* 0600 from the start: no window where others may connect */
	if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die(path);
	umask(old);
	if (listen(fd, SOMAXCONN) < 0) die("listen");
	return fd;
}

static int listen_tcp(const char *spec)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(spec, ':');
	int one = 1;
	if (!colon || colon - spec >= (long)sizeof host) {
		fprintf(stderr, "berth-sandboxd: --proxy-listen wants IP:PORT, not %s\n", spec);
		exit(2);
	}
	memcpy(host, spec, colon - spec);
	host[colon - spec] = 0;
	addr.sin_port = htons(atoi(colon + 1));
	if (inet_pton(AF_INET, host, &addr.sin_addr) != 1 || addr.sin_port == 0) {
		fprintf(stderr, "berth-sandboxd: --proxy-listen wants IP:PORT, not %s\n", spec);
		exit(2);
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die(spec);
	if (listen(fd, SOMAXCONN) < 0) die("listen");
	return fd;
}

static void terminate(void)
{
	if (getpid() == 1) kill(-1, SIGKILL); /* everything in the sandbox; the kernel would anyway */
	for (struct conn *c = conns; c; c = c->next) kill_group(c);
	unlink(socket_path);
	exit(0);
}

static void parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char **target = !strcmp(argv[i], "--socket") ? &socket_path
				    : !strcmp(argv[i], "--proxy-listen") ? &proxy_listen
				    : !strcmp(argv[i], "--proxy-socket") ? &proxy_socket
				    : !strcmp(argv[i], "--ca-bundle") ? &ca_bundle
				    : !strcmp(argv[i], "--ca-extra") ? &ca_extra : NULL;
		if (!target || i + 1 >= argc) {
			fprintf(stderr, "usage: berth-sandboxd [--socket PATH] [--proxy-listen IP:PORT --proxy-socket PATH] [--ca-bundle OUT --ca-extra FILE]\n");
			exit(2);
		}
		*target = argv[++i];
	}
	if (!proxy_listen != !proxy_socket) {
		fprintf(stderr, "berth-sandboxd: --proxy-listen and --proxy-socket go together\n");
		exit(2);
	}
	if (!ca_bundle != !ca_extra) {
		fprintf(stderr, "berth-sandboxd: --ca-bundle and --ca-extra go together\n");
		exit(2);
	}
}

/* Appends the file at `path` to `out`; 0 when it cannot be read. */
static int append_file(FILE *out, const char *path)
{
	FILE *in = fopen(path, "rb");
	if (!in) return 0;
	char buf[CHUNK];
	size_t got;
	while ((got = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, got, out);
	fclose(in);
	return 1;
}

/*
 * Tools that replace their roots with one file (OpenSSL's SSL_CERT_FILE, curl, Python requests,
 * git) get the image's own roots plus the proxy's CA: the image's bundle is only known in here.
 * Without a bundle in the image the file holds the proxy's CA alone, as nothing else was trusted.
 */
static void write_ca_bundle(void)
{
	static const char *const system_bundles[] = {
		"/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Alpine */
		"/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL */
		"/etc/ssl/ca-bundle.pem",             /* openSUSE */
		"/etc/ssl/cert.pem",                  /* Alpine, macOS-like */
	};
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.tmp", ca_bundle) >= (int)sizeof tmp) return;
	FILE *out = fopen(tmp, "wb");
	if (!out) {
		fprintf(stderr, "berth-sandboxd: cannot write %s: %s\n", tmp, strerror(errno));
		return;
	}
	for (size_t i = 0; i < sizeof system_bundles / sizeof *system_bundles; i++) {
		if (append_file(out, system_bundles[i])) {
			fputc('\n', out);
			break;
		}
	}
	append_file(out, ca_extra);
	if (fclose(out) != 0 || rename(tmp, ca_bundle) != 0) fprintf(stderr, "berth-sandboxd: cannot write %s: %s\n", ca_bundle, strerror(errno));
}

enum { SL_SIGNAL, SL_LISTEN, SL_PROXY, SL_CLIENT, SL_STDOUT, SL_STDERR, SL_STDIN, SL_BRIDGE0, SL_BRIDGE1 };
struct slot { int kind; void *ptr; };

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	/* Pipes must not land on 0-2 if we were started without them. */
	int null_fd;
	while ((null_fd = open("/dev/null", O_RDWR)) >= 0 && null_fd <= 2) {}
	if (null_fd > 2) close(null_fd);
	/* On a host (tests, development) orphans of our commands come to us as they would to PID 1. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	/* Blocked signals reach PID 1 too (the kernel drops only default-action ones sent to it). */
	sigprocmask(SIG_BLOCK, &mask, NULL);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) die("signalfd");
	if (ca_bundle) write_ca_bundle();
	int lfd = listen_unix(socket_path);
	int pfd = proxy_listen ? listen_tcp(proxy_listen) : -1;

	struct pollfd *fds = NULL;
	struct slot *slots = NULL;
	size_t cap = 0;
	for (;;) {
		size_t n = 0, need = 3;
		int busy = 0;
		for (struct conn *c = conns; c; c = c->next) need += 4;
		for (struct bridge *b = bridges; b; b = b->next) need += 2;
		if (need > cap) {
			cap = need * 2;
			fds = xrealloc(fds, cap * sizeof *fds);
			slots = xrealloc(slots, cap * sizeof *slots);
		}
#define WATCH(f, ev, k, p) (fds[n] = (struct pollfd){ .fd = (f), .events = (ev) }, slots[n++] = (struct slot){ (k), (p) })
		WATCH(sfd, POLLIN, SL_SIGNAL, NULL);
		WATCH(lfd, POLLIN, SL_LISTEN, NULL);
		if (pfd >= 0) WATCH(pfd, POLLIN, SL_PROXY, NULL);
		for (struct conn *c = conns; c; c = c->next) {
			int room = pending(&c->out) < HIGH_WATER;
			short ev = (pending(&c->out) ? POLLOUT : 0) | (pending(&c->stdin_buf) < HIGH_WATER ? POLLIN : 0);
			WATCH(c->fd, ev, SL_CLIENT, c);
			if (c->op == OP_SPAWN) {
				if (room && c->out_fd[0] >= 0) WATCH(c->out_fd[0], POLLIN, SL_STDOUT, c);
				if (room && c->out_fd[1] >= 0) WATCH(c->out_fd[1], POLLIN, SL_STDERR, c);
				if (c->in_fd >= 0 && pending(&c->stdin_buf)) WATCH(c->in_fd, POLLOUT, SL_STDIN, c);
			}
			if (c->op == OP_READ && room) busy = 1;
		}
		for (struct bridge *b = bridges; b; b = b->next) {
			for (int i = 0; i < 2; i++)
				WATCH(b->fd[i], (!b->eof[i] && b->b[i].len < CHUNK ? POLLIN : 0) | (pending(&b->b[1 - i]) ? POLLOUT : 0),
				      i ? SL_BRIDGE1 : SL_BRIDGE0, b);
		}
		if (poll(fds, n, busy ? 0 : -1) < 0 && errno != EINTR) die("poll");

		for (size_t i = 0; i < n; i++) {
			if (!fds[i].revents) continue;
			struct conn *c = slots[i].ptr;
			switch (slots[i].kind) {
			case SL_SIGNAL: {
				struct signalfd_siginfo si;
				while (read(sfd, &si, sizeof si) == sizeof si)
					if (si.ssi_signo != SIGCHLD) terminate();
				reap();
				break;
			}
			case SL_LISTEN:
				for (int fd; (fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
					c = xrealloc(NULL, sizeof *c);
					memset(c, 0, sizeof *c);
					c->fd = fd;
					c->in_fd = c->out_fd[0] = c->out_fd[1] = c->file_fd = -1;
					c->next = conns;
					conns = c;
				}
				break;
			case SL_PROXY:
				for (int fd; (fd = accept4(pfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) bridge_accept(fd);
				break;
			case SL_CLIENT:
				if (fds[i].events & POLLIN) {
					if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_client(c);
				} else if (fds[i].revents & (POLLHUP | POLLERR)) c->dead = 1;
				break;
			case SL_STDOUT: case SL_STDERR:
				if (c->op == OP_SPAWN) read_output(c, slots[i].kind == SL_STDERR);
				break;
			case SL_STDIN:
				if (c->op == OP_SPAWN) write_stdin(c);
				break;
			default:
				bridge_pump(slots[i].ptr);
			}
		}

		for (struct conn *c = conns; c; c = c->next) {
			if (c->op == OP_READ && !c->dead && pending(&c->out) < HIGH_WATER) read_chunk(c);
			if (!c->dead) flush_client(c);
		}
		for (struct conn **pc = &conns; *pc;) {
			struct conn *c = *pc;
			if (c->dead) {
				*pc = c->next;
				free_conn(c);
			} else {
				pc = &c->next;
			}
		}
		for (struct bridge **pb = &bridges; *pb;) {
			struct bridge *b = *pb;
			if (b->dead) {
				*pb = b->next;
				close(b->fd[0]);
				close(b->fd[1]);
				buf_free(&b->b[0]);
				buf_free(&b->b[1]);
				free(b);
			} else {
				pb = &b->next;
			}
		}
	}
}
