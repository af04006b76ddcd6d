#!/usr/bin/python3
"""Reads a LocalNode server's node-local state with grpcio and the protoc-generated
messages only (no Go), to prove the schema is self-sufficient. Prints one line per
service: "FAMILY namespace/name:port/PROTOCOL clusterIP:port endpoint,..." with the
endpoints the brain chose for Cluster traffic, then "revision N".

usage: watch.py SOCKET_PATH GENERATED_DIR
"""
import sys

sys.path.insert(0, sys.argv[2])

import grpc  # noqa: E402
import localnode_pb2 as pb  # noqa: E402


def main():
    channel = grpc.insecure_channel("unix:" + sys.argv[1])
    watch = channel.unary_stream(
        "/kubeproxy.localnode.v1.LocalNode/Watch",
        request_serializer=pb.WatchRequest.SerializeToString,
        response_deserializer=pb.WatchEvent.FromString,
    )
    services = {}
    for ev in watch(pb.WatchRequest(node_local=True), timeout=30):
        if ev.reset:
            services = {}
        for op in ev.ops:
            kind = op.WhichOneof("op")
            if kind == "set_service":
                s = op.set_service
                services[(s.family, s.name.namespace, s.name.name, s.name.port, s.name.protocol)] = s
            elif kind == "delete_service":
                k = op.delete_service
                services.pop((k.family, k.name.namespace, k.name.name, k.name.port, k.name.protocol), None)
        if ev.synced:
            break
    for key in sorted(services):
        s = services[key]
        name = "%s/%s" % (s.name.namespace, s.name.name)
        if s.name.port:
            name += ":" + s.name.port
        name += "/" + pb.Protocol.Name(s.name.protocol)
        eps = ",".join("%s:%d" % (e.ip, e.port) for e in s.endpoints if e.for_cluster)
        print("%s %s %s:%d %s" % (pb.Family.Name(s.family), name, s.cluster_ip, s.port, eps))
    print("revision %d" % ev.revision)


if __name__ == "__main__":
    main()
