#!/usr/bin/python3
"""Watches a kube-proxy LocalNode server (kube-proxy --localnode-serve) with grpcio and
the messages protoc generates from localnode.proto: no Go, no kube-proxy code.

It prints one line per service port, "FAMILY namespace/name:port/PROTOCOL clusterIP:port
endpoint,...", with the endpoints kube-proxy chose for traffic to the cluster IP (IPv6
addresses in brackets, "[fd00::1]:80"), then "revision N". With --once it prints the
whole state once and exits; otherwise it prints the state, then after every change the
lines of the service ports that changed ("deleted ..." for removed ones) and the new
revision, until interrupted. When the stream breaks (kube-proxy restarted, the socket
went away) it reconnects and resumes from the last revision it applied: the server sends
only what changed since, or the whole state again if it is a different process.

usage: watch.py [--once] [--generated DIR] ADDRESS
  ADDRESS    unix:///run/kube-proxy/localnode.sock, unix:/path, or host:port (plain TCP)
  DIR        where protoc wrote localnode_pb2.py (default: gen/ next to this file)
"""
import argparse
import os
import sys
import time


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description="Watch kube-proxy's node-local state.")
    p.add_argument("address", help="unix:///path.sock, unix:/path or host:port")
    p.add_argument("--generated", default=os.path.join(here, "gen"),
                   help="directory holding the protoc-generated localnode_pb2.py")
    p.add_argument("--once", action="store_true", help="print the state once and exit")
    p.add_argument("--timeout", type=float, default=30,
                   help="with --once: give up after this many seconds")
    return p.parse_args()


args = parse_args()
sys.path.insert(0, args.generated)

import grpc  # noqa: E402
import localnode_pb2 as pb  # noqa: E402


def host_port(ip, port):
    """ip:port, with an IPv6 address in brackets as in a URL."""
    if ":" in ip:
        return "[%s]:%d" % (ip, port)
    return "%s:%d" % (ip, port)


def key_of(family, name):
    return (family, name.namespace, name.name, name.port, name.protocol)


def line(s):
    name = "%s/%s" % (s.name.namespace, s.name.name)
    if s.name.port:
        name += ":" + s.name.port
    name += "/" + pb.Protocol.Name(s.name.protocol)
    eps = ",".join(host_port(e.ip, e.port) for e in s.endpoints if e.for_cluster)
    return "%s %s %s %s" % (pb.Family.Name(s.family), name, host_port(s.cluster_ip, s.port), eps)


def deleted_line(key):
    family, namespace, name, port, protocol = key
    n = "%s/%s" % (namespace, name)
    if port:
        n += ":" + port
    return "deleted %s %s/%s" % (pb.Family.Name(family), n, pb.Protocol.Name(protocol))


class Watcher:
    """Holds the last synced state and what is needed to resume the stream."""

    def __init__(self, address):
        if address.startswith("unix://"):
            address = "unix:" + address[len("unix://"):]
        self.channel = grpc.insecure_channel(address)
        self.watch = self.channel.unary_stream(
            "/kubeproxy.localnode.v1.LocalNode/Watch",
            request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.WatchEvent.FromString,
        )
        self.services = {}   # the state as of (instance_id, revision)
        self.instance_id = ""
        self.revision = 0

    def batches(self, timeout=None):
        """Yields (changed keys, reset) once per synced batch, applied to self.services.

        A batch is applied only once its synced event arrives, so a stream that breaks
        in the middle of one leaves the last consistent state, which the next request
        resumes from."""
        req = pb.WatchRequest(node_local=True, instance_id=self.instance_id, revision=self.revision)
        pending, changed, reset = None, set(), False
        for ev in self.watch(req, timeout=timeout):
            if pending is None:
                pending = dict(self.services)
            if ev.reset:
                pending, changed, reset = {}, set(), True
            for op in ev.ops:
                kind = op.WhichOneof("op")
                if kind == "set_service":
                    s = op.set_service
                    k = key_of(s.family, s.name)
                    pending[k] = s
                    changed.add(k)
                elif kind == "delete_service":
                    d = op.delete_service
                    k = key_of(d.family, d.name)
                    pending.pop(k, None)
                    changed.add(k)
            if ev.synced:
                self.services, self.instance_id, self.revision = pending, ev.instance_id, ev.revision
                yield changed, reset
                pending, changed, reset = None, set(), False

    def print_all(self):
        for k in sorted(self.services):
            print(line(self.services[k]))
        print("revision %d" % self.revision, flush=True)

    def print_changes(self, changed):
        for k in sorted(changed):
            print(line(self.services[k]) if k in self.services else deleted_line(k))
        print("revision %d" % self.revision, flush=True)


def main():
    w = Watcher(args.address)
    if args.once:
        for _ in w.batches(timeout=args.timeout):
            w.print_all()
            return
        sys.exit("the stream ended before the state was synced")
    backoff = 0.5
    while True:
        try:
            for changed, reset in w.batches():
                if reset:
                    print("whole state from server instance %s" % w.instance_id, file=sys.stderr)
                    w.print_all()
                elif changed:
                    w.print_changes(changed)
                backoff = 0.5
            print("stream ended; reconnecting", file=sys.stderr)
        except grpc.RpcError as e:
            print("stream broken (%s); resuming from revision %d in %.1fs"
                  % (e.code().name, w.revision, backoff), file=sys.stderr)
        time.sleep(backoff)
        backoff = min(backoff * 2, 10)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
