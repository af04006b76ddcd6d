//go:build linux

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"
)

// echoPort is where every pod's TCP and UDP echo server listens.
const echoPort = 8080

// pod is a namespace behind a node's bridge with echo servers that answer
// "<pod name> <client address>".
type pod struct {
	name     string
	node     *nodeNet
	ns       string
	ip4, ip6 string
	mu       sync.Mutex
	tcp      net.Listener
	udp      net.PacketConn
	wg       sync.WaitGroup
	stopped  bool
}

// addPod creates pod name on node index ni with address suffix host (pod4+host,
// pod6+host) and starts its echo servers.
func (w *world) addPod(name string, ni, host int) *pod {
	w.t.Helper()
	n := w.nodes[ni]
	p := &pod{name: name, node: n, ip4: fmt.Sprintf("%s%d", n.pod4, host), ip6: fmt.Sprintf("%s%x", n.pod6, host)}
	p.ns = w.addNS("p-" + name)
	hostIf := fmt.Sprintf("v%d-%d", ni+1, host)
	ipBatch(w.t, n.ns,
		fmt.Sprintf("link add %s type veth peer name eth0 netns %s", hostIf, p.ns),
		fmt.Sprintf("link set %s master br0 up", hostIf),
		// As kubelet's hairpin-veth mode: with br_netfilter loaded (the usual
		// node setup), a pod's packet DNATed back to itself is bridged out of the
		// port it came in on, which a bridge only does with hairpin on.
		fmt.Sprintf("link set %s type bridge_slave hairpin on", hostIf))
	sysctls(w.t, p.ns, "net.ipv4.conf.all.accept_redirects=0", "net.ipv6.conf.all.accept_redirects=0")
	// Host routes, not the bridge's /24: everything, also traffic to pods on the same
	// bridge, goes through the node, as with most CNI plugins. Otherwise replies from
	// a same-node backend would skip the node's conntrack and never be un-DNATed.
	ipBatch(w.t, p.ns,
		"addr add "+p.ip4+"/32 dev eth0",
		"addr add "+p.ip6+"/128 dev eth0 nodad",
		"link set eth0 up",
		"route add default via "+n.gw4+" dev eth0 onlink",
		"route add ::/0 via "+n.gw6+" dev eth0 onlink",
	)
	if err := p.start(); err != nil {
		w.t.Fatalf("pod %s: %v", name, err)
	}
	w.mu.Lock()
	w.pods[name] = p
	w.mu.Unlock()
	return p
}

func (p *pod) start() error {
	return inNetns(p.ns, func() error {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", echoPort))
		if err != nil {
			return fmt.Errorf("tcp echo: %w", err)
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf(":%d", echoPort))
		if err != nil {
			_ = l.Close()
			return fmt.Errorf("udp echo: %w", err)
		}
		p.tcp, p.udp = l, u
		p.wg.Add(2)
		go p.serveTCP()
		go p.serveUDP()
		return nil
	})
}

func (p *pod) serveTCP() {
	defer p.wg.Done()
	for {
		c, err := p.tcp.Accept()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = fmt.Fprintf(c, "%s %s\n", p.name, c.RemoteAddr())
		}()
	}
}

func (p *pod) serveUDP() {
	defer p.wg.Done()
	buf := make([]byte, 1500)
	for {
		_, from, err := p.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = p.udp.WriteTo([]byte(fmt.Sprintf("%s %s\n", p.name, from)), from)
	}
}

// stop closes the echo servers: connections to the pod are refused afterwards, as
// when its process has exited.
func (p *pod) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.tcp.Close()
	_ = p.udp.Close()
	p.wg.Wait()
}

// reply is what an echo server said.
type reply struct {
	pod    string
	client string // host part of the client address the pod saw
}

func parseReply(s string) (reply, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return reply{}, fmt.Errorf("unexpected echo reply %q", s)
	}
	host, _, err := net.SplitHostPort(f[1])
	if err != nil {
		return reply{}, fmt.Errorf("echo reply %q: %w", s, err)
	}
	return reply{pod: f[0], client: host}, nil
}

// dialOpts tune a client connection.
type dialOpts struct {
	src     string // local address to bind, "" for the kernel's choice
	timeout time.Duration
}

// askTCP connects from namespace ns to addr ("ip:port") and returns the echo.
func askTCP(ns, addr string, o dialOpts) (reply, error) {
	if o.timeout == 0 {
		o.timeout = 2 * time.Second
	}
	var c net.Conn
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	d := net.Dialer{}
	if o.src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(o.src)}
	}
	err := inNetns(ns, func() error {
		var err error
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return reply{}, err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(o.timeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return reply{}, fmt.Errorf("reading echo from %s: %w", addr, err)
	}
	return parseReply(line)
}

// udpClient is one UDP socket in a namespace, so repeated questions share a source
// port and therefore a conntrack entry.
type udpClient struct {
	c net.Conn
}

func newUDPClient(ns, addr string) (*udpClient, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		var err error
		c, err = net.Dial("udp", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &udpClient{c: c}, nil
}

func (u *udpClient) ask(timeout time.Duration) (reply, error) {
	if _, err := u.c.Write([]byte("?")); err != nil {
		return reply{}, err
	}
	_ = u.c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 1500)
	for {
		n, err := u.c.Read(buf)
		if err != nil {
			return reply{}, err
		}
		return parseReply(string(buf[:n]))
	}
}

func (u *udpClient) close() { _ = u.c.Close() }

// askUDP sends one datagram from a fresh socket.
func askUDP(ns, addr string, timeout time.Duration) (reply, error) {
	u, err := newUDPClient(ns, addr)
	if err != nil {
		return reply{}, err
	}
	defer u.close()
	return u.ask(timeout)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
}
