# A stdio MCP server that leaves its process tree on start, as a hostile or careless server
# does: one process in a session of its own (`setsid -f`), and one double-forked grandchild in
# a process group of its own, each `sleep 300`. Each writes `<pid>` to a file in DIR
# (`setsid.pid`, `forked.pid`) just before it becomes `sleep`; the server writes `server.pid`
# once both are written. Then it answers `initialize`, `tools/list` (one tool, `ping`) and
# `tools/call` (`pong`) line by line on stdin, and exits at the end of its stdin, or, with
# `--ignore-eof`, ignores both that and SIGTERM and sleeps until it is killed.
#
# Usage: escaper.py DIR [--ignore-eof]
import json
import os
import signal
import subprocess
import sys
import time

directory = sys.argv[1]
ignore_eof = "--ignore-eof" in sys.argv[2:]


def write(name, pid):
    path = os.path.join(directory, name)
    with open(path + ".tmp", "w") as f:
        f.write(str(pid))
    os.rename(path + ".tmp", path)


def wait_for(name):
    while not os.path.exists(os.path.join(directory, name)):
        time.sleep(0.01)


# A session of its own: out of the server's process group and session.
subprocess.run(
    [
        "setsid",
        "-f",
        "sh",
        "-c",
        'echo $$ > "$0/setsid.pid.tmp" && mv "$0/setsid.pid.tmp" "$0/setsid.pid" && exec sleep 300',
        directory,
    ],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    check=True,
)
# A double fork into a group of its own: the grandchild's parent exits at once.
child = os.fork()
if child == 0:
    os.setpgid(0, 0)
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        write("forked.pid", os.getpid())
        os.execvp("sleep", ["sleep", "300"])
    os._exit(0)
os.waitpid(child, 0)
wait_for("setsid.pid")
wait_for("forked.pid")
write("server.pid", os.getpid())

for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "escaper", "version": "1"},
        }
    elif method == "tools/list":
        result = {
            "tools": [
                {
                    "name": "ping",
                    "description": "Answers pong.",
                    "inputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": True},
                }
            ]
        }
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "pong"}]}
    else:
        reply = {"code": -32601, "message": "method not found"}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": reply}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)

if ignore_eof:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)
