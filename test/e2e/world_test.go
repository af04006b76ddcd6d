//go:build linux

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netns"
)

// Addressing of a world. Everything comes from 198.18.0.0/15 and fd00::/8. Pod
// ranges are kept apart from the LAN so that --cluster-cidr tells pods from external
// clients (which must be masqueraded when sent to another node).
const (
	lanPrefix4   = "198.18.0"                     // .1 node-1, .2 node-2, .100/.101 external client
	lanPrefix6   = "fd00:ee::"                    // ::1 node-1, ::2 node-2, ::100 external client
	clusterCIDRs = "198.18.128.0/17,fd00:18::/32" // holds every node's pod ranges, fd00:18:N::/64
	svcCIDR4     = "198.19.0.0/16"
	svcCIDR6     = "fd00:96::/112"
	extRange4    = "198.18.100.0/24" // externalIPs and load-balancer IPs, routed to node-1
)

// nodeNet describes one node's addresses.
type nodeNet struct {
	name       string // Node object name
	ns         string // namespace name
	lan4, lan6 string
	gw4, gw6   string // the pod bridge's addresses, the pods' gateway
	pod4, pod6 string // pod address prefixes: pod4+"N", pod6+"N"
	podCIDR4   string
	podCIDR6   string
}

type world struct {
	t      *testing.T
	prefix string
	lan    string
	ext    string
	nodes  [2]*nodeNet

	mu   sync.Mutex
	pods map[string]*pod
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sh runs a command and fails the test with its output if it fails.
func sh(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ipBatch feeds several `ip` commands to one process: far fewer forks when a world
// is built.
func ipBatch(t testing.TB, ns string, cmds ...string) {
	t.Helper()
	args := []string{"-batch", "-"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	c := exec.Command("ip", args...)
	c.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s -batch: %v\n%s\ncommands:\n%s", ns, err, out, strings.Join(cmds, "\n"))
	}
}

func sysctls(t testing.TB, ns string, kv ...string) {
	t.Helper()
	args := []string{"netns", "exec", ns, "sysctl", "-q", "-w"}
	sh(t, "ip", append(args, kv...)...)
}

func requireRoot(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds network namespaces and runs kube-proxy in them")
	}
	for _, tool := range append([]string{"ip", "sysctl"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	if testing.Short() {
		t.Skip("datapath e2e builds namespaces and runs the binary; skipped with -short")
	}
}

func (w *world) addNS(name string) string {
	ns := w.prefix + name
	sh(w.t, "ip", "netns", "add", ns)
	w.t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	ipBatch(w.t, ns, "link set lo up")
	return ns
}

// newWorld builds the LAN, two nodes and the external client. Pods are added later.
func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, prefix: "kpe2e-" + randomHex(3) + "-", pods: map[string]*pod{}}
	w.lan = w.addNS("lan")
	ipBatch(t, w.lan, "link add lan type bridge", "link set lan up")
	for i := range w.nodes {
		n := &nodeNet{
			name:     fmt.Sprintf("node-%d", i+1),
			lan4:     fmt.Sprintf("%s.%d", lanPrefix4, i+1),
			lan6:     fmt.Sprintf("%s%d", lanPrefix6, i+1),
			gw4:      fmt.Sprintf("198.18.%d.1", 129+i),
			gw6:      fmt.Sprintf("fd00:18:%d::1", i+1),
			pod4:     fmt.Sprintf("198.18.%d.", 129+i),
			pod6:     fmt.Sprintf("fd00:18:%d::", i+1),
			podCIDR4: fmt.Sprintf("198.18.%d.0/24", 129+i),
			podCIDR6: fmt.Sprintf("fd00:18:%d::/64", i+1),
		}
		n.ns = w.addNS(fmt.Sprintf("n%d", i+1))
		w.nodes[i] = n
		port := fmt.Sprintf("n%d", i+1)
		ipBatch(t, w.lan,
			fmt.Sprintf("link add %s type veth peer name eth0 netns %s", port, n.ns),
			fmt.Sprintf("link set %s master lan up", port))
		// Routing through the node on one interface (pod to pod on the same bridge
		// via the gateway) must not produce ICMP redirects, or pods would start to
		// bypass the node's conntrack.
		sysctls(t, n.ns, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
			"net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0")
		ipBatch(t, n.ns,
			"addr add "+n.lan4+"/24 dev eth0",
			"addr add "+n.lan6+"/64 dev eth0 nodad",
			"link set eth0 up",
			"link add br0 type bridge",
			"addr add "+n.gw4+"/24 dev br0",
			"addr add "+n.gw6+"/64 dev br0 nodad",
			"link set br0 up",
		)
	}
	n1, n2 := w.nodes[0], w.nodes[1]
	ipBatch(t, n1.ns,
		"route add "+n2.podCIDR4+" via "+n2.lan4,
		"route add "+n2.podCIDR6+" via "+n2.lan6,
		// A node has a default route; here it leads to the external client, which
		// does not forward, so nothing can leave the world.
		"route add default via "+lanPrefix4+".100",
		"route add ::/0 via "+lanPrefix6+"100",
	)
	ipBatch(t, n2.ns,
		"route add "+n1.podCIDR4+" via "+n1.lan4,
		"route add "+n1.podCIDR6+" via "+n1.lan6,
		"route add default via "+n1.lan4,
		"route add ::/0 via "+n1.lan6,
	)
	w.ext = w.addNS("ext")
	ipBatch(t, w.lan, "link add ext type veth peer name eth0 netns "+w.ext, "link set ext master lan up")
	ipBatch(t, w.ext,
		"addr add "+lanPrefix4+".100/24 dev eth0",
		"addr add "+lanPrefix4+".101/24 dev eth0",
		"addr add "+lanPrefix6+"100/64 dev eth0 nodad",
		"link set eth0 up",
		"route add "+extRange4+" via "+n1.lan4,
	)
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, p := range w.pods {
			p.stop()
		}
	})
	return w
}

// inNetns runs fn on a thread switched into namespace ns; sockets fn creates stay in
// ns after the thread switches back. A thread that cannot switch back is left locked
// so the runtime discards it instead of reusing it in the wrong namespace.
func inNetns(ns string, fn func() error) error {
	h, err := netns.GetFromName(ns)
	if err != nil {
		return fmt.Errorf("opening namespace %s: %w", ns, err)
	}
	defer func() { _ = h.Close() }()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("current namespace: %w", err)
			return
		}
		defer func() { _ = orig.Close() }()
		if err := netns.Set(h); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering namespace %s: %w", ns, err)
			return
		}
		ferr := fn()
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		done <- ferr
	}()
	return <-done
}

// nsExec runs a command inside ns and returns its combined output.
func nsExec(ns string, name string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...).CombinedOutput()
	return string(out), err
}
