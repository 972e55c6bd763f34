#!/usr/bin/env python3
"""bench/fixed_load.py — a bounded client for instruction counts: exactly N
requests of one kind, on C keep-alive connections, P pipelined per
connection per turn, every answer read and checked before the next turn.

    fixed_load.py PROTO OP PORT N [--conns C] [--pipeline P] [--keys K] [--value-size V]

PROTO is `http` or `resp`; OP is `get` or `put` (or `set`, the same: RESP SET, HTTP PUT). Keys
are `key:%d` for a seeded pseudo-random index below K, the same sequence
every run (`--sequential`: 0, 1, 2 …, to fill); values are V bytes of `x`. Exits non-zero on an unexpected
answer (a GET of a key never written is an error: fill first with `put`).
Prints one line: the requests made and the answers read.
"""
import argparse
import random
import socket
import sys


def http_request(op, key, value):
    if op == "get":
        return b"GET /v0/entity?id=%s HTTP/1.1\r\nHost: b\r\n\r\n" % key
    return b"PUT /v0/entity?id=%s HTTP/1.1\r\nHost: b\r\nContent-Length: %d\r\n\r\n%s" % (
        key, len(value), value)


def resp_request(op, key, value):
    if op == "get":
        return b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key)
    return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value)


class Reader:
    """Buffered reads from one socket."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            sys.exit("connection closed by the server")
        self.buf += chunk

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def take(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def read_http(r, op):
    status = r.line()
    length = 0
    while True:
        h = r.line()
        if not h:
            break
        name, _, v = h.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(v)
    r.take(length)
    want = b" 200 " if op == "get" else b" 201 "
    if want not in status + b" ":
        sys.exit(f"unexpected answer {status!r}")


def read_resp(r, op):
    line = r.line()
    if op == "get":
        if not line.startswith(b"$") or line == b"$-1":
            sys.exit(f"unexpected answer {line!r}")
        r.take(int(line[1:]) + 2)
    elif line != b"+OK":
        sys.exit(f"unexpected answer {line!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("proto", choices=["http", "resp"])
    ap.add_argument("op", choices=["get", "put", "set"])
    ap.add_argument("port", type=int)
    ap.add_argument("n", type=int)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--pipeline", type=int, default=1)
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--sequential", action="store_true", help="keys 0, 1, 2 … (to fill)")
    a = ap.parse_args()
    a.op = "put" if a.op == "set" else a.op
    make = http_request if a.proto == "http" else resp_request
    read = read_http if a.proto == "http" else read_resp
    rng = random.Random(a.seed)
    value = b"x" * a.value_size
    socks = [socket.create_connection(("127.0.0.1", a.port), timeout=600) for _ in range(a.conns)]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    readers = [Reader(s) for s in socks]
    sent = answered = 0
    while sent < a.n:
        owed = []
        for s in socks:
            batch = min(a.pipeline, a.n - sent)
            if batch == 0:
                break
            if a.sequential:
                keys = [b"key:%d" % ((sent + i) % a.keys) for i in range(batch)]
            else:
                keys = [b"key:%d" % rng.randrange(a.keys) for _ in range(batch)]
            s.sendall(b"".join(make(a.op, k, value) for k in keys))
            sent += batch
            owed.append(batch)
        for r, batch in zip(readers, owed):
            for _ in range(batch):
                read(r, a.op)
                answered += 1
    print(f"{a.proto} {a.op}: {sent} requests, {answered} answers")


if __name__ == "__main__":
    main()
