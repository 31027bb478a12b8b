// Run a command under a seccomp filter that refuses clone(CLONE_NEWUSER)
// with EPERM, as Docker's default profile does for a container without
// CAP_SYS_ADMIN: oajail then runs its container tier on this host, so its
// start-up can be measured beside the full jail's in the same run
// (bench/container-tier.sh). Usage: nouserns COMMAND [ARGS...]
// Written by hand: a measuring stub, not part of oajail.
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: nouserns COMMAND [ARGS...]\n");
        return 2;
    }
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fprog = {sizeof(prog) / sizeof(prog[0]), prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)) {
        perror("nouserns: seccomp");
        return 125;
    }
    execvp(argv[1], argv + 1);
    perror("nouserns: exec");
    return 127;
}
