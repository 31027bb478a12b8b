"""Run a command on a fresh pseudo-terminal, as a user's terminal would.

Usage: pty_driver.py SCRIPT_JSON
  SCRIPT_JSON: {"argv": [...], "answers": [[EXPECT, SEND], ...], "timeout": SECS}
The command gets the pty's slave as its controlling terminal and stdin,
stdout and stderr (pty.fork), so oajail runs interactively. Each answer is
sent once EXPECT has appeared in the output after the previous answer.
Writes every byte the terminal received to stdout, raw; the exit status
(or -signal) as the last line of stderr.
"""
import json
import os
import pty
import select
import signal
import sys
import time

script = json.loads(sys.argv[1])
pid, fd = pty.fork()
if pid == 0:
    os.execvp(script["argv"][0], script["argv"])

out = b""
answers = [(e.encode(), s.encode()) for e, s in script.get("answers", [])]
at = 0
deadline = time.time() + script.get("timeout", 60)
exited = None
while True:
    ready, _, _ = select.select([fd], [], [], 0.05)
    if ready:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            break
        out += data
    while answers and answers[0][0] in out[at:]:
        at = out.index(answers[0][0], at) + len(answers[0][0])
        os.write(fd, answers[0][1])
        answers.pop(0)
    if time.time() > deadline:
        os.kill(pid, signal.SIGKILL)
        sys.stderr.write("pty_driver: timeout\n")
        break
_, status = os.waitpid(pid, 0)
sys.stdout.buffer.write(out)
sys.stdout.flush()
code = os.waitstatus_to_exitcode(status)
sys.stderr.write(f"{code}\n")
