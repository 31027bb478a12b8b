//! The attack catalogue the suite covers: one entry per test, with the
//! family, what the attack does and which layers the design says defend it
//! (`docs/threat-model.md`, `../shared/reference/sandboxes-and-attacks.md`).
//!
//! Layers: NS namespaces/mounts · LL Landlock · SC seccomp · GD the guard
//! (seccomp user notification served by pid 1) · PX proxy · ENV environment
//! builder · RL limits · SUP supervisor/init design.

/// One attack of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attack {
    /// Stable id: `<catalogue item>-<vector>`, e.g. `A1-ssh-key`.
    pub id: &'static str,
    /// Family letter A–I.
    pub family: char,
    /// What the attack tries.
    pub title: &'static str,
    /// Layers the design claims defend it.
    pub layers: &'static str,
}

/// Family names for the report.
pub const FAMILIES: &[(char, &str)] = &[
    ('A', "reading secrets"),
    ('B', "persistence and integrity"),
    ('C', "process, IPC and terminal"),
    ('D', "syscall surface and privilege"),
    ('E', "direct network and DNS"),
    ('F', "proxy tricks"),
    ('G', "environment and the result channel"),
    ('H', "resources and lifecycle"),
    ('I', "fail-closed behaviour"),
];

const fn a(id: &'static str, family: char, title: &'static str, layers: &'static str) -> Attack {
    Attack {
        id,
        family,
        title,
        layers,
    }
}

/// Every attack that has a test in tests/security/tests/.
pub const ATTACKS: &[Attack] = &[
    a(
        "A1-ssh-key",
        'A',
        "read ~/.ssh/id_ed25519 (denyRead ~)",
        "NS, LL",
    ),
    a(
        "A1-aws-credentials",
        'A',
        "read ~/.aws/credentials",
        "NS, LL",
    ),
    a(
        "A1-other-project-env",
        'A',
        "read another project's .env",
        "NS, LL",
    ),
    a(
        "A1-sendfile",
        'A',
        "sendfile(2) a secret into a pipe",
        "NS, LL",
    ),
    a(
        "A1-copy-to-workspace",
        'A',
        "copy a secret into the workspace",
        "NS, LL",
    ),
    a(
        "A2-grep-home",
        'A',
        "recursive read of the whole fake home",
        "NS, LL",
    ),
    a(
        "A2-default-policy",
        'A',
        "recursive read of home under the built-in default policy",
        "NS, LL",
    ),
    a(
        "A2-default-policy-agent-credentials",
        'A',
        "read ~/.codex/auth.json and ~/.claude/.credentials.json under the built-in default",
        "NS, LL",
    ),
    a(
        "A3-symlink-in-workspace",
        'A',
        "symlink in the workspace to a secret, read through it",
        "NS, LL",
    ),
    a(
        "A4-symlinked-write-root",
        'A',
        "write through a writable root planted as a symlink to $HOME",
        "SUP, NS",
    ),
    a(
        "A5-setup-race",
        'A',
        "writable root swapped dir <-> symlink to $HOME during setup (40 runs)",
        "SUP, NS",
    ),
    a(
        "A6-hardlink-into-workspace",
        'A',
        "hardlink a secret into the workspace",
        "NS, LL",
    ),
    a(
        "A7-proc-cwd-host-process",
        'A',
        "read a host process's cwd through /proc/PID/cwd",
        "NS, LL",
    ),
    a(
        "A7-proc-root-host-process",
        'A',
        "read a secret through /proc/PID/root of a host process",
        "NS, LL",
    ),
    a("A8-mountinfo", 'A', "canary content in mount tables", "NS"),
    a("B1-bashrc-append", 'B', "append to ~/.bashrc", "NS, LL"),
    a("B1-profile-truncate", 'B', "truncate ~/.profile", "NS, LL"),
    a(
        "B1-authorized-keys",
        'B',
        "create ~/.ssh/authorized_keys2",
        "NS, LL",
    ),
    a(
        "B1-systemd-user-unit",
        'B',
        "create a systemd user unit",
        "NS, LL",
    ),
    a(
        "B1-autostart",
        'B',
        "create an autostart .desktop entry",
        "NS, LL",
    ),
    a("B1-path-shim", 'B', "plant ~/.local/bin/git", "NS, LL"),
    a(
        "B1-rename-over-bashrc",
        'B',
        "rename a workspace file over ~/.bashrc",
        "NS, LL",
    ),
    a("B1-gitconfig", 'B', "append to ~/.gitconfig", "NS, LL"),
    a(
        "B2-git-hook",
        'B',
        "create .git/hooks/pre-commit",
        "GD (mandatory deny)",
    ),
    a(
        "B2-git-config",
        'B',
        "append to .git/config",
        "GD (mandatory deny)",
    ),
    a(
        "B2-nested-repo-hook",
        'B',
        "create a hook in a nested repository",
        "GD (mandatory deny)",
    ),
    a(
        "B2-new-repo-hook-depth6",
        'B',
        "create .git/hooks in a repository made during the run, depth 6",
        "GD (mandatory deny)",
    ),
    a(
        "B2-vscode-settings",
        'B',
        "truncate .vscode/settings.json",
        "GD (mandatory deny)",
    ),
    a(
        "B2-vscode-tasks-new",
        'B',
        "create .vscode/tasks.json",
        "GD (mandatory deny)",
    ),
    a(
        "B2-idea-new",
        'B',
        "create .idea/workspace.xml",
        "GD (mandatory deny)",
    ),
    a(
        "B2-mcp-json",
        'B',
        "create .mcp.json",
        "GD (mandatory deny)",
    ),
    a(
        "B2-claude-commands",
        'B',
        "create .claude/commands/x.md",
        "GD (mandatory deny)",
    ),
    a(
        "B2-claude-agents-nested",
        'B',
        "create sub/.claude/agents/x.md",
        "GD (mandatory deny)",
    ),
    a(
        "B2-gitmodules",
        'B',
        "create .gitmodules",
        "GD (mandatory deny)",
    ),
    a(
        "B2-bashrc-in-workspace",
        'B',
        "create .bashrc inside the workspace",
        "GD (mandatory deny)",
    ),
    a(
        "B2-git-file-new",
        'B',
        "create a `.git` file (gitdir: redirect) in a new directory",
        "GD (mandatory deny)",
    ),
    a(
        "B2-git-symlink",
        'B',
        "create a `.git` symlink to an unguarded directory",
        "GD (mandatory deny)",
    ),
    a(
        "B2-git-commondir",
        'B',
        "create .git/commondir in a repository made during the run",
        "GD (mandatory deny)",
    ),
    a(
        "B2-rename-dir-onto-git",
        'B',
        "rename a prepared directory onto a new `.git`",
        "GD (mandatory deny)",
    ),
    a("B3-rename-git-dir", 'B', "rename .git away", "GD"),
    a("B3-rename-vscode", 'B', "rename .vscode away", "GD"),
    a(
        "B3-symlink-parent",
        'B',
        "replace .vscode by a symlink, write through it",
        "GD",
    ),
    a(
        "B3-unlink-recreate-hook",
        'B',
        "delete and recreate the user's own hook .git/hooks/post-merge",
        "GD",
    ),
    a(
        "B4-policy-file",
        'B',
        "open the policy file for writing",
        "NS, SUP",
    ),
    a(
        "B4-proc1-exe",
        'B',
        "open /proc/1/exe for writing",
        "SUP, NS",
    ),
    a(
        "B4-oajail-binary",
        'B',
        "open the oajail binary for writing",
        "NS, LL",
    ),
    a(
        "B6-chmod",
        'B',
        "chmod a file outside the writable roots",
        "NS",
    ),
    a("B6-utime", 'B', "change the times of ~/.bashrc", "NS"),
    a("B6-truncate", 'B', "truncate ~/.bashrc", "NS, LL"),
    a(
        "B7-daemonize",
        'B',
        "a setsid daemon outlives the jail",
        "NS (pid ns), SUP",
    ),
    a(
        "C1-proc-environ",
        'C',
        "secrets in other processes' environ/cmdline",
        "NS, SUP",
    ),
    a(
        "C2-ptrace-visible",
        'C',
        "PTRACE_ATTACH every visible process",
        "SC, SUP, LL",
    ),
    a(
        "C2-ptrace-host-canary",
        'C',
        "PTRACE_ATTACH a host process",
        "NS, SC",
    ),
    a(
        "C2-proc-mem",
        'C',
        "open /proc/N/mem read-write",
        "SUP, LL, NS",
    ),
    a(
        "C2-process-vm-readv",
        'C',
        "process_vm_readv another process",
        "SC, NS",
    ),
    a(
        "C2-pidfd-getfd",
        'C',
        "pidfd_getfd another process's fd",
        "SC, NS",
    ),
    a("C2-kcmp", 'C', "kcmp", "SC"),
    a(
        "C3-kill-host-canary",
        'C',
        "SIGKILL a host process by pid",
        "NS, LL",
    ),
    a("C3-kill-all", 'C', "kill(-1, SIGKILL)", "NS, LL"),
    a(
        "C4-ssh-agent",
        'C',
        "connect to $SSH_AUTH_SOCK",
        "SC, NS, ENV",
    ),
    a(
        "C4-dbus",
        'C',
        "connect to the session bus socket",
        "SC, NS, ENV",
    ),
    a("C4-docker", 'C', "connect to a docker socket", "SC, NS"),
    a("C4-x11", 'C', "connect to an X11 socket", "SC, NS"),
    a(
        "C4-syslog-dgram",
        'C',
        "sendto a /dev/log-style datagram socket",
        "SC, NS",
    ),
    a("C4-unix-socket-create", 'C', "socket(AF_UNIX)", "SC"),
    a(
        "C5-abstract",
        'C',
        "connect to a host abstract unix socket",
        "NS, LL",
    ),
    a(
        "C6-inherited-fds",
        'C',
        "descriptors leaked by the caller",
        "SUP",
    ),
    a(
        "C7-tiocsti",
        'C',
        "TIOCSTI into the controlling terminal",
        "SUP, SC",
    ),
    a(
        "C7-tiocsti-high-bits",
        'C',
        "TIOCSTI with bit 32 set (CVE-2019-10063)",
        "SUP, SC",
    ),
    a("C8-tioclinux", 'C', "TIOCLINUX (try-syscall, bad fd)", "SC"),
    a("D1-io-uring-setup", 'D', "io_uring_setup", "SC"),
    a("D1-io-uring-enter", 'D', "io_uring_enter", "SC"),
    a("D1-io-uring-register", 'D', "io_uring_register", "SC"),
    a("D2-x32-socket", 'D', "socket() through the x32 table", "SC"),
    a("D2-x32-getpid", 'D', "getpid() through the x32 table", "SC"),
    a("D3-int80-getpid", 'D', "i386 getpid via int 0x80", "SC"),
    a(
        "D3-int80-socketcall",
        'D',
        "i386 socketcall(SOCKET) via int 0x80",
        "SC",
    ),
    a("D4-unshare-user", 'D', "nested user namespace", "SC"),
    a("D4-unshare-mount", 'D', "new mount namespace", "SC, caps"),
    a("D4-clone3", 'D', "clone3 (must be ENOSYS)", "SC"),
    a("D4-setns", 'D', "setns", "SC"),
    a("D5-umount-mask", 'D', "umount2 a mask", "caps, SC"),
    a("D5-mount-bind", 'D', "bind-mount / elsewhere", "caps, SC"),
    a(
        "D5-open-tree",
        'D',
        "open_tree(OPEN_TREE_CLONE)",
        "SC, caps",
    ),
    a("D5-fsopen", 'D', "fsopen(tmpfs)", "SC, caps"),
    a("D6-bpf", 'D', "bpf", "SC"),
    a("D6-perf-event-open", 'D', "perf_event_open", "SC"),
    a(
        "D6-userfaultfd",
        'D',
        "userfaultfd(UFFD_USER_MODE_ONLY)",
        "SC",
    ),
    a(
        "D7-keyring-canary",
        'D',
        "read a host session-keyring key",
        "SC, SUP",
    ),
    a("D7-keyctl", 'D', "keyctl (try-syscall)", "SC"),
    a("D8-no-new-privs", 'D', "NoNewPrivs is set", "SUP"),
    a(
        "D9-capabilities",
        'D',
        "every capability set is empty",
        "SUP (caps)",
    ),
    a(
        "E1-tcp-public-v4",
        'E',
        "direct TCP to a public address",
        "NS, LL",
    ),
    a(
        "E1-tcp-allowed-host-direct",
        'E',
        "direct TCP to the allowed host's address",
        "NS, LL",
    ),
    a(
        "E1-tcp-public-v6",
        'E',
        "direct TCP to a public IPv6 address",
        "NS, LL",
    ),
    a(
        "E1-tcp-metadata",
        'E',
        "direct TCP to 169.254.169.254:80",
        "NS, LL",
    ),
    a("E2-udp-public", 'E', "UDP to a public address", "NS"),
    a("E2-udp-ntp", 'E', "UDP to 8.8.8.8:123", "NS"),
    a(
        "E2-udp-public-v6",
        'E',
        "UDP to a public IPv6 address",
        "NS",
    ),
    a(
        "E3-dns-public-resolver",
        'E',
        "DNS query with an exfil name to 8.8.8.8",
        "NS",
    ),
    a(
        "E3-dns-lab-resolver",
        'E',
        "DNS query to the host's resolver address",
        "NS",
    ),
    a(
        "E3-system-resolver",
        'E',
        "getaddrinfo of an exfil name",
        "NS, SUP",
    ),
    a("E4-icmp", 'E', "ICMP echo from a ping socket", "NS"),
    a("E5-vsock", 'E', "socket(AF_VSOCK)", "SC"),
    a(
        "E6-exotic-families",
        'E',
        "socket() in every family but inet/inet6/netlink",
        "SC",
    ),
    a("E6-packet", 'E', "socket(AF_PACKET)", "SC, caps"),
    a(
        "E7-host-loopback",
        'E',
        "TCP to 127.0.0.1 services of the host",
        "NS, LL",
    ),
    a(
        "F1-sni-mismatch",
        'F',
        "CONNECT allowed.test, TLS SNI evil.test",
        "PX",
    ),
    a(
        "F1-sni-other-allowed",
        'F',
        "CONNECT www.allowed.test, SNI api.allowed.test",
        "PX",
    ),
    a(
        "F1-no-sni",
        'F',
        "CONNECT allowed.test:443, ClientHello without SNI",
        "PX",
    ),
    a(
        "F1-not-tls",
        'F',
        "CONNECT allowed.test:443, then plain bytes",
        "PX",
    ),
    a(
        "F3-ip-literal",
        'F',
        "CONNECT 93.184.216.34:443 with SNI allowed.test",
        "PX",
    ),
    a(
        "F4-host-mismatch",
        'F',
        "GET http://evil.test/ with Host: allowed.test",
        "PX",
    ),
    a(
        "F4-origin-form",
        'F',
        "origin-form GET / with Host: allowed.test",
        "PX",
    ),
    a("F5-numeric-0", 'F', "CONNECT 2130706433:443", "PX, NS"),
    a("F5-numeric-1", 'F', "CONNECT 0x7f000001:443", "PX, NS"),
    a("F5-numeric-2", 'F', "CONNECT 0177.0.0.1:443", "PX, NS"),
    a("F5-numeric-3", 'F', "CONNECT 127.1:443", "PX, NS"),
    a("F5-numeric-4", 'F', "CONNECT 127.0.0.1.:443", "PX, NS"),
    a("F5-numeric-5", 'F', "CONNECT 017700000001:443", "PX, NS"),
    a("F6-ipv6-0", 'F', "CONNECT [::1]:443", "PX"),
    a("F6-ipv6-1", 'F', "CONNECT [::]:443", "PX"),
    a("F6-ipv6-2", 'F', "CONNECT [::ffff:127.0.0.1]:443", "PX"),
    a("F6-ipv6-3", 'F', "CONNECT [::ffff:7f00:1]:443", "PX"),
    a("F6-ipv6-4", 'F', "CONNECT [64:ff9b::a9fe:a9fe]:443", "PX"),
    a("F6-ipv6-5", 'F', "CONNECT [2002:a9fe:a9fe::]:443", "PX"),
    a("F6-ipv6-6", 'F', "CONNECT [fd00:ec2::254]:443", "PX"),
    a("F6-ipv6-7", 'F', "CONNECT [fe80::1%25lo]:443", "PX"),
    a(
        "F6-ipv6-8",
        'F',
        "CONNECT [::ffff:169.254.169.254]:443",
        "PX",
    ),
    a(
        "F7-metadata-literal",
        'F',
        "GET http://169.254.169.254/latest/meta-data/",
        "PX",
    ),
    a(
        "F7-metadata-by-name",
        'F',
        "allowlisted metadata.allowed.test resolves to 169.254.169.254",
        "PX",
    ),
    a(
        "F7-ecs-by-name",
        'F',
        "allowlisted ecs.allowed.test resolves to 169.254.170.2",
        "PX",
    ),
    a(
        "F7-alibaba-by-name",
        'F',
        "allowlisted alibaba.allowed.test resolves to 100.100.100.200",
        "PX",
    ),
    a(
        "F7-azure-by-name",
        'F',
        "allowlisted azure.allowed.test resolves to 168.63.129.16",
        "PX",
    ),
    a(
        "F8-private",
        'F',
        "allowlisted private.allowed.test resolves to 10.0.0.5",
        "PX",
    ),
    a(
        "F8-private172",
        'F',
        "allowlisted private172.allowed.test resolves to 172.16.0.10",
        "PX",
    ),
    a(
        "F8-private192",
        'F',
        "allowlisted private192.allowed.test resolves to 192.168.1.10",
        "PX",
    ),
    a(
        "F8-cgnat",
        'F',
        "allowlisted cgnat.allowed.test resolves to 100.64.0.1",
        "PX",
    ),
    a(
        "F8-loopback",
        'F',
        "allowlisted loopback.allowed.test resolves to 127.0.0.1",
        "PX",
    ),
    a(
        "F8-zero",
        'F',
        "allowlisted zero.allowed.test resolves to 0.0.0.0",
        "PX",
    ),
    a(
        "F9-rebinding",
        'F',
        "resolver alternates public / 127.0.0.1; loopback never reached",
        "PX",
    ),
    a("F10-url-0", 'F', "GET http://allowed.test@evil.test/", "PX"),
    a(
        "F10-url-1",
        'F',
        "GET http://allowed.test:80@evil.test/",
        "PX",
    ),
    a(
        "F10-url-2",
        'F',
        "GET http://evil.test#@allowed.test/",
        "PX",
    ),
    a(
        "F10-url-3",
        'F',
        "GET http://evil.test\\@allowed.test/",
        "PX",
    ),
    a(
        "F10-url-4",
        'F',
        "GET http://evil.test%2f@allowed.test/",
        "PX",
    ),
    a(
        "F10-url-5",
        'F',
        "GET http://evil.test%00.allowed.test/",
        "PX",
    ),
    a("F11-port-22", 'F', "CONNECT allowed.test:22", "PX"),
    a("F11-port-25", 'F', "CONNECT allowed.test:25", "PX"),
    a("F11-port-6379", 'F', "CONNECT allowed.test:6379", "PX"),
    a(
        "F14-socks-denied",
        'F',
        "SOCKS5 CONNECT evil.test:443",
        "PX",
    ),
    a(
        "F14-socks-ip-literal",
        'F',
        "SOCKS5 CONNECT 93.184.216.34:443",
        "PX",
    ),
    a("F14-socks-bind", 'F', "SOCKS5 BIND", "PX"),
    a("F14-socks-udp", 'F', "SOCKS5 UDP ASSOCIATE", "PX"),
    a(
        "F15-host-uses-proxy",
        'F',
        "a host process connects to the proxy port while a jail runs",
        "NS (listener in the jail netns)",
    ),
    a("F16-scheme-0", 'F', "GET ftp://allowed.test/x", "PX"),
    a("F16-scheme-1", 'F', "GET gopher://allowed.test/", "PX"),
    a("F16-scheme-2", 'F', "GET file:///etc/passwd", "PX"),
    a(
        "E3-proxy-resolves-denied-name",
        'E',
        "CONNECT <token>.exfil.test: the proxy must refuse before any DNS",
        "PX",
    ),
    a(
        "H2-memory",
        'H',
        "allocate 2 GiB under a 1 GiB address-space limit",
        "RL",
    ),
    a(
        "H3-tmp-fill",
        'H',
        "write 64 MiB into the 16 MiB private /tmp",
        "RL, NS",
    ),
    a(
        "H3-file-size",
        'H',
        "write a 64 MiB file under an 8 MiB file-size limit",
        "RL",
    ),
    a(
        "H4-wall-timeout",
        'H',
        "a SIGTERM-blocking busy loop must end at --timeout 1",
        "SUP",
    ),
    a(
        "H5-supervisor-killed",
        'H',
        "oajail SIGKILLed: nothing of the jail survives",
        "SUP (pdeathsig, pid ns)",
    ),
    a(
        "G1-secret-env",
        'G',
        "secret-named variables in the environment",
        "ENV",
    ),
    a(
        "G1-code-mode-api-key",
        'G',
        "code mode: the API key never reaches JavaScript, results, logs or sinks",
        "ENV (worker), SUP",
    ),
    a(
        "G2-code-mode-host-apis",
        'G',
        "code mode: JavaScript finds no std/os/require/fetch/process/import",
        "QuickJS worker",
    ),
    a(
        "G2-code-mode-other-host",
        'G',
        "code mode: API calls with path injection reach no other host",
        "PX, NS",
    ),
    a(
        "H2-code-mode-memory",
        'H',
        "code mode: allocation loop ends with memory_limit",
        "RL (worker)",
    ),
    a(
        "H4-code-mode-cpu",
        'H',
        "code mode: busy loop ends with timeout, the server keeps serving",
        "RL (worker), SUP",
    ),
    a(
        "I1-no-user-namespaces",
        'I',
        "user namespaces unavailable: refuse, never run unconfined",
        "SUP",
    ),
    a(
        "I1-no-landlock",
        'I',
        "Landlock missing (test build pretends): refuse",
        "SUP",
    ),
    a(
        "I1-no-seccomp",
        'I',
        "seccomp missing (test build pretends): refuse",
        "SUP",
    ),
    a(
        "I1-no-guard",
        'I',
        "seccomp user notification missing for the create-guard (test build pretends): refuse",
        "SUP",
    ),
    a(
        "I1-bad-policy",
        'I',
        "invalid settings file: refuse, never fall back",
        "SUP",
    ),
    a(
        "B5-log-json-symlink",
        'B',
        "--log-json at a path the jail planted as a symlink to ~/.bashrc",
        "SUP",
    ),
    a(
        "B5-git-link-hooks",
        'B',
        "a hook through a planted ws/sub/.git -> ws/elsewhere link to a git directory",
        "GD",
    ),
    a(
        "B2-implicit-git-dir-root",
        'B',
        "corrupt .git/HEAD, make the workspace root a git directory (HEAD, objects, refs, config with core.worktree and core.fsmonitor); the user's git status runs on the host after",
        "GD (markers rule)",
    ),
    a(
        "B2-implicit-git-dir-subdir",
        'B',
        "the same git directory in a subdirectory, HEAD created last; the user's git status there runs on the host after",
        "GD (markers rule)",
    ),
    a(
        "B2-hookspath-husky",
        'B',
        "append to .husky/_/pre-commit, the hook directory core.hooksPath names",
        "GD (mandatory deny)",
    ),
    a(
        "B2-hookspath-custom",
        'B',
        "create a hook in tools/githooks, the directory core.hooksPath names",
        "GD (core.hooksPath)",
    ),
    a(
        "B2-separate-gitdir-hook",
        'B',
        "create a hook in the git directory a `.git` file names (git init --separate-git-dir)",
        "GD (git directory by markers)",
    ),
    a(
        "B2-separate-gitdir-config",
        'B',
        "append core.fsmonitor to that git directory's config; the user's git status runs on the host after",
        "GD (git directory by markers)",
    ),
    a(
        "B3-race-link-hook",
        'B',
        "a thread swaps a symlink between a safe directory and .git/hooks while another writes link/pre-commit 3000 times",
        "GD (pid 1 performs the call)",
    ),
    a(
        "B3-claude-symlink-rename",
        'B',
        "`ln -s ../.evil t && mv t pkg/.claude`: a symlink renamed onto .claude",
        "GD (judged by what the source is)",
    ),
    a(
        "B3-claude-link-of-symlink",
        'B',
        "link() of a symlink to ../.evil onto pkg/.claude",
        "GD (judged by what the source is)",
    ),
    a(
        "B3-proc-fd-opath-reopen",
        'B',
        "open .git/config O_PATH, reopen /proc/self/fd/N for writing",
        "GD",
    ),
    a(
        "B3-proc-fd-hook-create",
        'B',
        "open .git/hooks O_PATH, create /proc/self/fd/N/pre-commit",
        "GD",
    ),
    a(
        "B2-deep-nm-append",
        'B',
        "append to a .bashrc at depth 9 in node_modules",
        "GD (mandatory deny)",
    ),
    a(
        "B2-deep-nm-truncate",
        'B',
        "open O_TRUNC a .bashrc at depth 9 in node_modules",
        "GD (mandatory deny)",
    ),
    a(
        "B2-deep-nm-chmod",
        'B',
        "chmod 0777 a .bashrc at depth 9 in node_modules",
        "GD (mandatory deny)",
    ),
    a(
        "B2-deep-nm-rename-over",
        'B',
        "rename a workspace file over a .bashrc at depth 9 in node_modules",
        "GD (mandatory deny)",
    ),
    a(
        "B2-deep-nm-unlink-recreate",
        'B',
        "unlink and recreate a .bashrc at depth 9 in node_modules",
        "GD (mandatory deny)",
    ),
    a(
        "B2-deny-write-bracket",
        'B',
        "append to ./[locked], an existing file named by denyWrite (read literally, as srt does)",
        "GD (denyWrite), NS (read-only bind)",
    ),
    a(
        "B4-proc1-fd-create",
        'B',
        "open /proc/1/fd/0..63 for writing with O_CREAT: pid 1 performing the open on its own descriptors",
        "GD (refuses other processes' /proc), LL",
    ),
    a(
        "B4-proc1-fd-other-spellings",
        'B',
        "the same through /proc/1/task/1/fd, /proc/self/../1/fd, //proc/self/fd, /dev//fd, /proc/thread-self/../../1/fd",
        "GD (refuses other processes' /proc), LL",
    ),
    a(
        "B4-proc-self-symlink-deputy",
        'B',
        "open for writing a workspace symlink to /proc/self/fd/N (pid 1 follows it as its own /proc/self)",
        "GD (refuses other processes' /proc), LL",
    ),
    a(
        "B1-twin-git-xdg-config",
        'B',
        "writable home: create ~/.config/git/config (read by git like ~/.gitconfig)",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-bash-aliases",
        'B',
        "writable home: create ~/.bash_aliases (sourced by Debian's .bashrc)",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-bashrc-d",
        'B',
        "writable home: create ~/.bashrc.d/evil.sh (sourced by Fedora's .bashrc)",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-fish-config",
        'B',
        "writable home: append to ~/.config/fish/config.fish",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-fish-conf-d",
        'B',
        "writable home: create ~/.config/fish/conf.d/evil.fish",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-zshenv",
        'B',
        "writable home: create ~/.zshenv",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-zprofile",
        'B',
        "writable home: create ~/.zprofile",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-zlogin",
        'B',
        "writable home: create ~/.zlogin",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-zdotdir",
        'B',
        "writable home: create .zshrc in $ZDOTDIR (~/.config/zsh)",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-xdg-config-home-git",
        'B',
        "writable home: create git/config under $XDG_CONFIG_HOME (~/xdg)",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-autostart",
        'B',
        "writable home: create ~/.config/autostart/evil.desktop",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-pam-environment",
        'B',
        "writable home: create ~/.pam_environment",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-ssh-rc",
        'B',
        "writable home: create ~/.ssh/rc (run by sshd at every login)",
        "GD (mandatory deny)",
    ),
    a(
        "B1-twin-cargo-build-rs",
        'B',
        "writable home: create a build.rs in an unpacked crate under ~/.cargo/registry/src",
        "GD (mandatory deny)",
    ),
    a(
        "A1-bracket-deny-read",
        'A',
        "read ~/[private]/secret.txt, an existing directory named by denyRead (read literally, as srt does)",
        "NS, LL",
    ),
    a(
        "C9-terminal-escapes",
        'C',
        "OSC 52 clipboard, OSC 0 title and hidden text on stdout (residual: no sanitiser)",
        "residual",
    ),
    a(
        "D10-memfd-exec",
        'D',
        "execute a copy of a binary from a memfd (residual: no exec policy)",
        "residual",
    ),
    a(
        "F13-cl-te",
        'F',
        "request with both Content-Length and Transfer-Encoding (smuggling)",
        "PX",
    ),
    a(
        "F13-h2c-upgrade",
        'F',
        "Upgrade: h2c to an allowed host",
        "PX",
    ),
    a(
        "F13-connect-in-connect",
        'F',
        "a second CONNECT inside a CONNECT tunnel to an allowed host",
        "PX (TLS peek)",
    ),
    a(
        "H1-fork-bomb",
        'H',
        "spawn up to 200 processes under limits.processes 32 (capped, linear)",
        "RL (RLIMIT_NPROC; pids cgroup as root), NS",
    ),
    a(
        "H6-reap-orphans",
        'H',
        "20 orphans exit: pid 1 reaps them, the exit status passes through",
        "SUP (init)",
    ),
    a(
        "H7-inotify-instances",
        'H',
        "take 512 inotify instances (residual: per-uid kernel limit shared with the host)",
        "residual",
    ),
    a(
        "F2-host-fronting-in-tls",
        'F',
        "Host: evil.test inside a tunnel with SNI allowed.test (residual without TLS termination)",
        "residual; PX (SNI check)",
    ),
    a(
        "F12-allowed-domain-upload",
        'F',
        "16 KiB uploaded to an allowed domain (residual; audited: bytes_up in the decision log)",
        "residual; PX (audit log)",
    ),
    a(
        "I1-proxy-fails-to-start",
        'I',
        "the proxy cannot start (decision log unopenable), even with --allow-degraded: refuse",
        "SUP",
    ),
    a(
        "E3e-doh-dot",
        'E',
        "DoH/DoT through public resolvers not on the allowlist (dns.google:443/853, cloudflare-dns.com)",
        "PX (allowlist before DNS)",
    ),
    a(
        "B8-trust-bundle-tamper",
        'B',
        "append a CA to the jail's TLS trust bundle (tlsTerminate on; every CA variable names it)",
        "NS (read-only tmpfs), SC (mount API)",
    ),
];

/// Attacks with a test in `tests/not_yet_covered.rs` only: the jail does
/// not block them yet. They are shown as "not yet covered" in the report
/// and are not expected in a default run's results.
pub const NOT_YET_COVERED: &[&str] = &[];

/// Look an attack up by id.
pub fn attack(id: &str) -> Option<&'static Attack> {
    ATTACKS.iter().find(|a| a.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_families_known() {
        let mut ids: Vec<_> = ATTACKS.iter().map(|a| a.id).collect();
        ids.sort_unstable();
        let before = ids.len();
        ids.dedup();
        assert_eq!(before, ids.len(), "duplicate attack id");
        for a in ATTACKS {
            assert!(FAMILIES.iter().any(|(f, _)| *f == a.family), "{}", a.id);
            assert!(a.id.starts_with(a.family), "{}", a.id);
        }
        for id in NOT_YET_COVERED {
            assert!(attack(id).is_some(), "{id}");
        }
    }
}
