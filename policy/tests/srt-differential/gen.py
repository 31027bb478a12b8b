"""Writes settings files for run.sh: per srt key, one valid value and several invalid ones."""
import copy
import json
import sys

OUT = sys.argv[1]
BASE = {
    "network": {"allowedDomains": [], "deniedDomains": []},
    "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []},
}
GUID = "12345678-1234-1234-1234-123456789abc"
# (path, a valid value, invalid values)
FIELDS = [
    (["network", "deniedDomainReasons"], {"a.com": "x"}, [{"a.com": ""}, {"a.com": 1}, []]),
    (["network", "strictAllowlist"], True, ["true", 1]),
    (["network", "deniedResolvedAddresses"], ["10.0.0.0/8"], [["10.0.0.0/33"], ["x"], "10.0.0.0/8", ["[::1]"]]),
    (["network", "allowUnixSockets"], ["/x"], [[1], "x"]),
    (["network", "allowAllUnixSockets"], True, [1]),
    (["network", "allowLocalBinding"], False, [None]),
    (["network", "allowMachLookup"], ["com.x.*", "*"], [["a*b"], ["**"]]),
    (["network", "httpProxyPort"], 1, [0, 65536, 1.5, "80", -1]),
    (["network", "socksProxyPort"], 65535, [0]),
    (["network", "mitmProxy"], {"socketPath": "/s", "domains": ["a.example.com"]},
     [{"socketPath": "", "domains": ["a.com"]}, {"domains": ["a.com"]},
      {"socketPath": "/s", "domains": []}, {"socketPath": "/s"}]),
    (["network", "parentProxy"], {"http": "http://p:1"}, [{"http": 1}, {"noProxy": 1}]),
    (["network", "tlsTerminate"], {"maxTunnels": 1, "handshakeTimeoutMs": 100},
     [{"maxTunnels": 0}, {"maxTunnels": 65537}, {"handshakeTimeoutMs": 99},
      {"handshakeTimeoutMs": 600001}, {"caCertPath": ""}, {"excludeDomains": ["*.com"]},
      {"extraCaCertPaths": [""]}]),
    (["network", "allowPlaintextHeaderSet"], True, ["x"]),
    (["network", "stripResponseHeaders"], ["set-cookie"], [[""], "x"]),
    (["network", "refuseOpaqueTunnels"], False, [0]),
    (["network", "requireHostMatch"], True, [0]),
    (["network", "ambiguousRequestTarget"], "refuse", ["other", 1]),
    (["network", "filterRequest"], None, ["x", {}]),
    (["filesystem", "allowRead"], ["."],
     ["x", [1], [""], [{"path": "x", "literal": False}], [{"path": "x"}],
      [{"path": "x", "literal": True, "y": 1}]]),
    (["filesystem", "allowGitConfig"], True, ["x"]),
    (["filesystem", "disabled"], False, ["x"]),
    (["credentials"], {"files": [{"path": "/k", "mode": "deny"}], "envVars": [{"name": "A", "mode": "deny"}]},
     [{"x": 1}, {"files": [{"path": "", "mode": "deny"}]}, {"files": [{"path": "/k", "mode": "x"}]},
      {"envVars": [{"name": "1A", "mode": "deny"}]}, {"awsPairs": [{"accessKeyIdVar": "A"}]},
      {"sigv4": {"streaming": "x"}}, {"sigv4": {"x": "deny"}}, {"allowPlaintextInject": "x"}]),
    (["ignoreViolations"], {"*": ["/x"]}, [{"*": "x"}, {"*": [1]}, []]),
    (["enableWeakerNestedSandbox"], True, ["x"]),
    (["allowNestedUserNamespaces"], True, ["x"]),
    (["enableWeakerNetworkIsolation"], True, ["x"]),
    (["allowAppleEvents"], True, ["x"]),
    (["ripgrep"], {"command": "rg", "args": ["-x"]}, [{}, {"command": 1}, {"command": "rg", "args": "x"}]),
    (["mandatoryDenySearchDepth"], 10, [0, 11, 2.5, "3"]),
    (["allowPty"], True, ["x"]),
    (["seccomp"], {"applyPath": "/x"}, [{"applyPath": 1}, "x"]),
    (["bwrapPath"], "/usr/bin/bwrap", ["bwrap", "", 1]),
    (["socatPath"], "/usr/bin/socat", ["socat"]),
    (["javaAgentJarPath"], "/x.jar", ["x.jar"]),
    (["windows"],
     {"backend": "mxc", "sandboxUser": "u", "sublayerGuid": GUID, "proxyPortRange": [1000, 1064],
      "srtWin": {"path": "/x"}},
     [{"backend": "x"}, {"sandboxUser": ""}, {"sandboxUser": "x" * 21}, {"sublayerGuid": "x"},
      {"proxyPortRange": [1000, 1065]}, {"proxyPortRange": [2, 1]}, {"proxyPortRange": [1]},
      {"srtWin": {}}, {"srtWin": {"path": ""}}]),
    (["git"], {"safeDirectories": ["/x"]}, [{"safeDirectories": "x"}, {"safeDirectories": [1]}, "x"]),
]
REQUIRED = [
    ["network"], ["filesystem"], ["network", "allowedDomains"], ["network", "deniedDomains"],
    ["filesystem", "denyRead"], ["filesystem", "allowWrite"], ["filesystem", "denyWrite"],
]


def write(n, label, doc):
    with open(f"{OUT}/{n:03d}-{label}.json", "w") as f:
        json.dump(doc, f)


n = 0
for path, good, bads in FIELDS:
    # filterRequest has no valid JSON value.
    values = bads if path[-1] == "filterRequest" else [good] + bads
    for i, value in enumerate(values):
        doc = copy.deepcopy(BASE)
        target = doc
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
        write(n, "_".join(path) + f"-{i}", doc)
        n += 1
for path in REQUIRED:
    doc = copy.deepcopy(BASE)
    target = doc
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    write(n, "missing-" + "_".join(path), doc)
    n += 1
