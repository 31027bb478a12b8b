// The floor of the guard's design (docs/benchmarks.md, "The floor"): run a
// command under a seccomp filter that notifies the calls the guard notifies
// (openat with a write flag, and every call that creates, removes, renames or
// changes metadata by path), each answered CONTINUE at once by the parent with
// no decision. SYNC=1 sets the listener's synchronous wake-up, as the guard
// does. Usage: notify-floor COMMAND [ARGS...]
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
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif

static int nrs[] = {SYS_open, SYS_creat, SYS_mkdirat, SYS_mkdir, SYS_mknodat, SYS_symlinkat, SYS_symlink,
  SYS_linkat, SYS_link, SYS_renameat, SYS_renameat2, SYS_rename, SYS_unlinkat, SYS_unlink, SYS_rmdir,
  SYS_truncate, SYS_fchmodat, SYS_fchmod, SYS_fchownat, SYS_fchown, SYS_chown, SYS_lchown, SYS_chmod,
  SYS_utimensat, SYS_utime, SYS_utimes, SYS_futimesat, SYS_setxattr, SYS_lsetxattr, SYS_removexattr,
  SYS_lremovexattr, SYS_fremovexattr};

static int install(void) {
  struct sock_filter f[128]; int n = 0, k = sizeof nrs / sizeof nrs[0];
  f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  // openat with a write flag in args[2]
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 3);
  f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2]));
  f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC, k + 1, k + 2);
  f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  for (int i = 0; i < k; i++) f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nrs[i], k - i, 0);
  f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF);
  f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  struct sock_fprog prog = {n, f};
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
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
  for (;;) {
    struct pollfd p = {lfd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0) break;
    if (p.revents & POLLHUP) break;
    memset(&req, 0, sizeof req);
    if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) continue;
    memset(&resp, 0, sizeof resp); resp.id = req.id; resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp); calls++;
  }
  int st; waitpid(pid, &st, 0); fprintf(stderr, "notified calls: %ld\n", calls);
  return WEXITSTATUS(st);
}
