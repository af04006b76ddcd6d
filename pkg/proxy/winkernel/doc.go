// Package winkernel is the Windows kernelspace proxier: it programs Services
// as load balancers of the Windows Host Networking Service (HNS), with
// upstream Kubernetes v1.37's exported API and HNS objects (same flags,
// endpoints and error paths), on the shared sync shell.
//
// Layout:
//   - generator.go decides, for one service port of the node-local model
//     (localnode, with the traffic policy the shell resolved), which HNS
//     load balancers (cluster IP, node port, external IPs, load balancer
//     ingress IPs, health check forwards) and endpoints must exist, with
//     upstream's flags (DSR, IPv6, VIP-external-IP, local routed VIP,
//     preserve DIP / MUX, source-IP distribution) and source VIP.
//   - backend.go is the syncshell.Backend: an authoritative view of the IDs
//     it created per service port, applying only the difference for the
//     Services that changed; full syncs re-read HNS, adopt identical
//     objects, notice a recreated network and sweep leftovers.
//   - hcnapi (subpackage) is the platform-neutral model of the HNS objects
//     and the Interface over them; testing (subpackage) is a fake of it.
//   - Only platform_windows.go calls github.com/Microsoft/hnslib (HcnService
//     and the adapter onto hcnapi); everything else builds and is tested on
//     every platform.
//
// It may import the brain, the library's localnode and syncshell,
// metaproxier, and (Windows files only) github.com/Microsoft/hnslib.
package winkernel
