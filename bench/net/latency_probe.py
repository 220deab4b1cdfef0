#!/usr/bin/env python3
"""Round trip of 1-byte messages over one TCP connection, through whatever the path holds.

    latency_probe.py FROM_NS TO_NS IP PORT   # echo server in TO_NS on IP:PORT, client in FROM_NS
prints the median round trip in milliseconds (200 messages after 20 to warm up).
"""
import socket
import statistics
import subprocess
import sys
import time


def serve(ip, port):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((ip, port))
    srv.listen(1)
    print("ready", flush=True)
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        b = conn.recv(1)
        if not b:
            return
        conn.sendall(b)


def client(ip, port):
    s = socket.create_connection((ip, port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for i in range(220):
        t = time.perf_counter()
        s.sendall(b"x")
        if s.recv(1) != b"x":
            raise SystemExit("latency probe: echo lost")
        if i >= 20:
            rtts.append((time.perf_counter() - t) * 1e3)
    s.close()
    print(f"{statistics.median(rtts):.3f}")


def main():
    if sys.argv[1] == "--serve":
        serve(sys.argv[2], int(sys.argv[3]))
        return
    if sys.argv[1] == "--client":
        client(sys.argv[2], int(sys.argv[3]))
        return
    from_ns, to_ns, ip, port = sys.argv[1:5]
    srv = subprocess.Popen(["ip", "netns", "exec", to_ns, sys.executable, __file__, "--serve", ip, port],
                           stdout=subprocess.PIPE, text=True)
    try:
        if srv.stdout.readline().strip() != "ready":
            raise SystemExit("latency probe: the echo server did not start")
        out = subprocess.run(["ip", "netns", "exec", from_ns, sys.executable, __file__, "--client", ip, port],
                             check=True, capture_output=True, text=True, timeout=120)
        print(out.stdout.strip())
    finally:
        srv.kill()
        srv.wait()


if __name__ == "__main__":
    main()
