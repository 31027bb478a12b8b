// The floor of the guard's design (docs/benchmarks.md, "Per guarded call"):
// run a command under a seccomp filter that notifies exactly the calls the
// guard's filter notifies in a workspace without denyWrite entries (openat
// and open with a write flag; creat, mkdir*, mknod*, link*, symlink*,
// rename*, truncate and the xattr calls always; chmod, fchmodat and fchmod
// with a risky mode; chown, lchown and fchownat unless to the caller's own
// ids), each answered CONTINUE at once by the parent with no decision.
// SYNC=1 sets the listener's synchronous wake-up, as the guard does;
// PERFORM=1 makes the parent perform the opens itself (below). Prints the
// number of notified calls on stderr at exit.
// Usage: notify-floor COMMAND [ARGS...]
// Written by hand: a measuring stub, not part of oajail.
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <poll.h>
#include <linux/audit.h>
#include <errno.h>
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif

static int always[] = {SYS_creat, SYS_mkdirat, SYS_mkdir, SYS_mknodat, SYS_mknod, SYS_symlinkat,
  SYS_symlink, SYS_linkat, SYS_link, SYS_renameat, SYS_renameat2, SYS_rename, SYS_truncate,
  SYS_setxattr, SYS_lsetxattr, SYS_removexattr, SYS_lremovexattr};

#define ARG(i) offsetof(struct seccomp_data, args[i])
#define LD(off) (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, off)
#define JEQ(k, t, f) (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, t, f)
#define JSET(k, t, f) (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, k, t, f)
#define RET(k) (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, k)

static struct sock_filter f[256];
static int n;
static int allow_at, notify_at;
struct fix { int at; int to_notify_t, to_notify_f, to_allow_t, to_allow_f; };
static struct fix fixes[256];
static int nfix;

// Emit a jump whose targets may be the final ALLOW (-1) or NOTIFY (-2).
static void jmp(struct sock_filter ins, int t, int fl) {
  fixes[nfix++] = (struct fix){n, t == -2, fl == -2, t == -1, fl == -1};
  if (t < 0) ins.jt = 0; else ins.jt = t;
  if (fl < 0) ins.jf = 0; else ins.jf = fl;
  f[n++] = ins;
}

// A call notified when its argument `arg` has a bit of `bits`.
static void when_bits(int nr, int arg, unsigned bits) {
  jmp(JEQ(nr, 0, 2), 0, 2);
  f[n++] = LD(ARG(arg));
  jmp(JSET(bits, 0, 0), -2, -1);
  f[n++] = LD(offsetof(struct seccomp_data, nr));
}

// A call notified unless its uid and gid arguments are -1 or the caller's.
static void unless_owner(int nr, int arg) {
  jmp(JEQ(nr, 0, 7), 0, 7);
  f[n++] = LD(ARG(arg));
  jmp(JEQ(getuid(), 1, 0), 1, 0);
  jmp(JEQ(0xffffffff, 0, 0), 0, -2);
  f[n++] = LD(ARG(arg + 1));
  jmp(JEQ(getgid(), 0, 0), -1, 0);
  jmp(JEQ(0xffffffff, 0, 0), -1, -2);
  f[n++] = LD(offsetof(struct seccomp_data, nr));
}

static int install(void) {
  const unsigned write = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC, risky = 07133;
  f[n++] = LD(offsetof(struct seccomp_data, nr));
  for (unsigned i = 0; i < sizeof always / sizeof always[0]; i++) jmp(JEQ(always[i], 0, 0), -2, 0);
  when_bits(SYS_openat, 2, write);
  when_bits(SYS_open, 1, write);
  when_bits(SYS_fchmodat, 2, risky);
  when_bits(SYS_chmod, 1, risky);
  when_bits(SYS_fchmod, 1, risky);
  unless_owner(SYS_fchownat, 2);
  unless_owner(SYS_chown, 1);
  unless_owner(SYS_lchown, 1);
  allow_at = n; f[n++] = RET(SECCOMP_RET_ALLOW);
  notify_at = n; f[n++] = RET(SECCOMP_RET_USER_NOTIF);
  for (int i = 0; i < nfix; i++) {
    struct fix x = fixes[i];
    if (x.to_notify_t) f[x.at].jt = notify_at - x.at - 1;
    if (x.to_notify_f) f[x.at].jf = notify_at - x.at - 1;
    if (x.to_allow_t) f[x.at].jt = allow_at - x.at - 1;
    if (x.to_allow_f) f[x.at].jf = allow_at - x.at - 1;
  }
  struct sock_fprog prog = {n, f};
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

// PERFORM=1: the least a supervisor that never answers CONTINUE for a path
// does for an open: read the path from the caller's memory, open it itself
// from the caller's cwd or descriptor, hand the file over with ADDFD, close
// its copy. No decision, no resolution of its own, no cache.
static int open_for(int lfd, struct seccomp_notif *req) {
  int at = req->data.nr == SYS_openat;
  unsigned long addr = req->data.args[at ? 1 : 0];
  int flags = (int)req->data.args[at ? 2 : 1], mode = (int)req->data.args[at ? 3 : 2];
  int dirfd = at ? (int)req->data.args[0] : AT_FDCWD;
  char mem[64], path[4096], base[64];
  snprintf(mem, sizeof mem, "/proc/%u/mem", req->pid);
  static int memfd = -1; static unsigned memfor;
  if (memfd < 0 || memfor != req->pid) {
    if (memfd >= 0) close(memfd);
    memfd = open(mem, O_RDONLY | O_CLOEXEC); memfor = req->pid;
  }
  ssize_t n = pread(memfd, path, sizeof path - 1, addr);
  if (n <= 0) return -1;
  path[n] = 0;
  if (strnlen(path, sizeof path) == sizeof path - 1) return -1;
  if (dirfd == AT_FDCWD) snprintf(base, sizeof base, "/proc/%u/cwd", req->pid);
  else snprintf(base, sizeof base, "/proc/%u/fd/%d", req->pid, dirfd);
  int bfd = path[0] == '/' ? AT_FDCWD : open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
  int fd = openat(bfd, path, flags | O_CLOEXEC, mode);
  if (bfd >= 0) close(bfd);
  struct seccomp_notif_resp resp = {req->id, 0, 0, 0};
  if (fd < 0) { resp.error = -errno; return ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 ? -1 : 0; }
  struct seccomp_notif_addfd add = {req->id, SECCOMP_ADDFD_FLAG_SEND, fd, 0, (flags & O_CLOEXEC) ? O_CLOEXEC : 0};
  int r = ioctl(lfd, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
  close(fd);
  return r < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
  int sv[2]; socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  pid_t pid = fork();
  if (pid == 0) {
    int lfd = install(); if (lfd < 0) { perror("seccomp"); _exit(1); }
    char c = 0; struct iovec iov = {&c, 1}; char cb[CMSG_SPACE(sizeof(int))];
    struct msghdr m = {0}; m.msg_iov = &iov; m.msg_iovlen = 1; m.msg_control = cb; m.msg_controllen = sizeof cb;
    struct cmsghdr *h = CMSG_FIRSTHDR(&m); h->cmsg_level = SOL_SOCKET; h->cmsg_type = SCM_RIGHTS; h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &lfd, sizeof(int)); sendmsg(sv[1], &m, 0); close(lfd);
    execvp(argv[1], argv + 1); _exit(127);
  }
  char c; struct iovec iov = {&c, 1}; char cb[CMSG_SPACE(sizeof(int))];
  struct msghdr m = {0}; m.msg_iov = &iov; m.msg_iovlen = 1; m.msg_control = cb; m.msg_controllen = sizeof cb;
  recvmsg(sv[0], &m, 0); int lfd; memcpy(&lfd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
  if (getenv("SYNC")) { if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) < 0) perror("sync"); }
  struct seccomp_notif req; struct seccomp_notif_resp resp; long calls = 0;
  int perform = getenv("PERFORM") != NULL;
  for (;;) {
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0) break;
    if (p.revents & POLLHUP) break;
    memset(&req, 0, sizeof req);
    if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) continue;
    calls++;
    if (perform && (req.data.nr == SYS_openat || req.data.nr == SYS_open) && open_for(lfd, &req) == 0) continue;
    memset(&resp, 0, sizeof resp); resp.id = req.id; resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  }
  int st; waitpid(pid, &st, 0); fprintf(stderr, "notified calls: %ld\n", calls);
  return WEXITSTATUS(st);
}
