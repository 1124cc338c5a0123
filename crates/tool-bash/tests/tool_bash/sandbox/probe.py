# The hostile table's attempts that bash cannot make by itself (crates/tool-bash/tests/sandbox/
# hostile.rs). Each prints `ALLOWED …` when the system let it through and `blocked …` when
# the system refused; the table checks from outside the sandbox that nothing happened either
# way.
import ctypes
import errno
import fcntl
import os
import socket
import struct
import sys
import termios

libc = ctypes.CDLL(None, use_errno=True)
X86_64 = os.uname().machine == "x86_64"
# System call numbers that differ between the two architectures the sandbox runs on.
ADD_KEY, PTRACE = (248, 101) if X86_64 else (217, 117)


def attempt(what, action):
    try:
        action()
    except OSError as error:
        print(f"blocked {what}: {errno.errorcode.get(error.errno, error.errno)}")
        return
    print(f"ALLOWED {what}")


def syscall(number, *args):
    result = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in args])
    if result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return result


def mknod(path, kind, major, minor):
    mode = (0o600 | (0o060000 if kind == "b" else 0o020000))
    attempt(f"mknod {kind}", lambda: os.mknod(path, mode, os.makedev(int(major), int(minor))))


def setxattr(path):
    attempt("setxattr", lambda: os.setxattr(path, "user.dsh", b"x"))


def connect(family, kind, address, payload=b"x"):
    def go():
        s = socket.socket(family, kind)
        s.settimeout(2)
        if kind == socket.SOCK_DGRAM:
            s.sendto(payload, address)
        else:
            s.connect(address)
            s.send(payload)
    return go


def tcp(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    attempt("tcp", connect(family, socket.SOCK_STREAM, (host, int(port))))


def udp(host, port):
    attempt("udp", connect(socket.AF_INET, socket.SOCK_DGRAM, (host, int(port))))


def icmp():
    attempt("raw icmp", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
    attempt("icmp datagram", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))


def packet():
    attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)))


def unix(path):
    attempt("unix stream", connect(socket.AF_UNIX, socket.SOCK_STREAM, path))


def unix_dgram(path):
    attempt("unix datagram", connect(socket.AF_UNIX, socket.SOCK_DGRAM, path))

    def by_pair(kind):
        def go():
            a, _ = socket.socketpair(socket.AF_UNIX, kind)
            a.sendto(b"x", path)
        return go
    attempt("datagram pair sendto", by_pair(socket.SOCK_DGRAM))
    attempt("raw pair sendto", by_pair(socket.SOCK_RAW))


def abstract(name):
    attempt("abstract unix", connect(socket.AF_UNIX, socket.SOCK_STREAM, "\0" + name))


def new_link(name):
    # RTM_NEWLINK of a dummy interface, as `ip link add NAME type dummy` sends it.
    def go():
        s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
        ifname = name.encode() + b"\0"
        attr_name = struct.pack("HH", 4 + len(ifname), 3) + ifname
        attr_name += b"\0" * ((4 - len(attr_name) % 4) % 4)
        kind = b"dummy\0"
        info_kind = struct.pack("HH", 4 + len(kind), 1) + kind
        info_kind += b"\0" * ((4 - len(info_kind) % 4) % 4)
        link_info = struct.pack("HH", 4 + len(info_kind), 18) + info_kind
        ifinfo = struct.pack("BBHiII", 0, 0, 0, 0, 0, 0)
        body = ifinfo + attr_name + link_info
        flags = 0x1 | 0x4 | 0x200 | 0x400  # REQUEST | ACK | EXCL | CREATE
        header = struct.pack("IHHII", 16 + len(body), 16, flags, 1, 0)
        s.sendto(header + body, (0, 0))
        reply = s.recv(4096)
        code = struct.unpack("i", reply[16:20])[0]
        if code != 0:
            raise OSError(-code, os.strerror(-code))
    attempt("netlink new link", go)


def tiocsti(path):
    def go():
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        for byte in b"echo pwned\n":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([byte]))
    attempt("tiocsti", go)


def tiocsti_own(path):
    # A session of its own, the terminal made its controlling one, then the injection.
    def go():
        try:
            os.setsid()
        except OSError:
            pass
        fd = os.open(path, os.O_RDWR)
        fcntl.ioctl(fd, termios.TIOCSCTTY, 0)
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
    attempt("tiocsti as the controlling terminal", go)


def dev_tty():
    def go():
        fd = os.open("/dev/tty", os.O_RDWR)
        fcntl.ioctl(fd, termios.TIOCSTI, b"x")
    attempt("/dev/tty", go)


def io_uring():
    params = ctypes.create_string_buffer(120)
    attempt("io_uring_setup", lambda: syscall(425, 8, ctypes.addressof(params)))


def x32_socket():
    if not X86_64:
        print("blocked x32 socket: no x32 ABI here")
        return
    attempt("x32 socket", lambda: syscall(0x40000000 + 41, socket.AF_INET, socket.SOCK_STREAM, 0))


def keyring():
    attempt("add_key", lambda: syscall(ADD_KEY, ctypes.addressof(ctypes.create_string_buffer(b"user")),
                                       ctypes.addressof(ctypes.create_string_buffer(b"dsh")),
                                       ctypes.addressof(ctypes.create_string_buffer(b"x")), 1,
                                       -3))


def ptrace(pid):
    attempt("ptrace attach", lambda: syscall(PTRACE, 16, int(pid), 0, 0))


def read_mem(pid):
    def go():
        with open(f"/proc/{pid}/maps") as maps:
            start = int(maps.readline().split("-")[0], 16)
        with open(f"/proc/{pid}/mem", "rb") as mem:
            mem.seek(start)
            mem.read(16)
    attempt("read mem", go)


def limit(pid):
    import resource
    attempt("prlimit", lambda: resource.prlimit(int(pid), resource.RLIMIT_CORE, (0, 0)))


def renice(pid):
    attempt("renice a process", lambda: os.setpriority(os.PRIO_PROCESS, int(pid), 19))
    attempt("renice a user", lambda: os.setpriority(os.PRIO_USER, 0, 19))


def read_tty(path):
    attempt("open a terminal", lambda: os.close(os.open(path, os.O_RDONLY | os.O_NOCTTY)))


def hostname(name):
    attempt("sethostname", lambda: socket.sethostname(name))


def pair():
    # What stays allowed: stream and sequenced-packet pairs; a pseudo-terminal of the
    # command's own where the backend has one (bubblewrap's devpts; not under Landlock).
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.send(b"p")
    c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.send(b"q")
    print("pair", b.recv(1).decode(), d.recv(1).decode())
    try:
        master, slave = os.openpty()
        os.write(master, b"t\n")
        print("pty", os.read(slave, 2).decode().strip())
    except OSError as error:
        print("no pty:", errno.errorcode.get(error.errno, error.errno))


CASES = {
    "mknod": mknod, "setxattr": setxattr, "tcp": tcp, "udp": udp, "icmp": icmp,
    "packet": packet, "unix": unix, "unix-dgram": unix_dgram, "abstract": abstract,
    "new-link": new_link, "tiocsti": tiocsti, "tiocsti-own": tiocsti_own, "dev-tty": dev_tty,
    "io-uring": io_uring, "x32-socket": x32_socket, "keyring": keyring, "ptrace": ptrace,
    "read-mem": read_mem, "hostname": hostname, "pair": pair, "limit": limit,
    "renice": renice, "read-tty": read_tty,
}

CASES[sys.argv[1]](*sys.argv[2:])
