//go:build linux

package nfacct

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/util/retry"

	"k8s.io/kube-proxy/pkg/proxy/util"
)

// transport sends one nfacct request and returns the reply payloads; tests
// replace the netlink socket with a fake.
type transport interface {
	do(cmd int, flags uint16, name string) ([][]byte, error)
}

type netlinkTransport struct {
	sockets map[int]*nl.SocketHandle
}

// recvTimeout keeps a wedged kernel reply from hanging a metrics scrape.
var recvTimeout = unix.Timeval{Sec: 10}

func newNetlinkTransport() (*netlinkTransport, error) {
	// Bind the socket to the namespace we are in now, so later calls from
	// other OS threads still talk to this namespace.
	sock, err := nl.GetNetlinkSocketAt(netns.None(), netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("opening NETLINK_NETFILTER socket: %w", err)
	}
	if err := sock.SetReceiveTimeout(&recvTimeout); err != nil {
		sock.Close()
		return nil, fmt.Errorf("setting netlink receive timeout: %w", err)
	}
	return &netlinkTransport{sockets: map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: {Socket: sock}}}, nil
}

func (t *netlinkTransport) do(cmd int, flags uint16, name string) ([][]byte, error) {
	req := &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{
			Len:   uint32(unix.SizeofNlMsghdr),
			Type:  uint16(cmd | unix.NFNL_SUBSYS_ACCT<<8),
			Flags: flags,
		},
		Sockets: t.sockets,
	}
	req.AddData(&nl.Nfgenmsg{NfgenFamily: uint8(unix.AF_UNSPEC), Version: nl.NFNETLINK_V0})
	if name != "" {
		req.AddData(nl.NewRtAttr(attrName, nl.ZeroTerminated(name)))
	}
	return req.Execute(unix.NETLINK_NETFILTER, 0)
}

type client struct {
	t transport
}

// New returns a client bound to the calling thread's network namespace.
// It returns ErrNotSupported if the kernel has no nfnetlink_acct.
func New() (Interface, error) {
	t, err := newNetlinkTransport()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotSupported, err)
	}
	c := &client{t: t}
	// Without nfnetlink_acct the GET fails with something other than
	// ENOENT (typically EOPNOTSUPP from nfnetlink).
	if _, err := c.Get("kube-proxy-probe"); err != nil && !errors.Is(err, ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %w", ErrNotSupported, err)
	}
	return c, nil
}

func (c *client) Ensure(name string) error {
	_, err := c.Get(name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrObjectNotFound) {
		return err
	}
	err = c.Add(name)
	if errors.Is(err, ErrObjectAlreadyExists) {
		// Someone else created it between our Get and Add.
		return nil
	}
	return err
}

func (c *client) Add(name string) error {
	if err := validateName(name, false); err != nil {
		return err
	}
	_, err := c.t.do(cmdNew, unix.NLM_F_REQUEST|unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK, name)
	return mapError(name, err)
}

func (c *client) Get(name string) (*Counter, error) {
	if err := validateName(name, false); err != nil {
		return nil, err
	}
	msgs, err := c.t.do(cmdGet, unix.NLM_F_REQUEST|unix.NLM_F_ACK, name)
	if err != nil {
		return nil, mapError(name, err)
	}
	for _, m := range msgs {
		ctr, err := decode(m)
		if err != nil {
			return nil, fmt.Errorf("%w: nfacct counter %q: %w", ErrUnexpected, name, err)
		}
		if ctr.Name == name {
			return ctr, nil
		}
	}
	return nil, fmt.Errorf("nfacct counter %q: %w", name, ErrObjectNotFound)
}

func (c *client) List() ([]*Counter, error) {
	var msgs [][]byte
	err := retry.OnError(util.MaxAttemptsEINTR, util.ShouldRetryOnEINTR, func() error {
		var err error
		msgs, err = c.t.do(cmdGet, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, "")
		return err
	})
	if err != nil && !errors.Is(err, unix.EINTR) {
		return nil, mapError("", err)
	}
	out := make([]*Counter, 0, len(msgs))
	for _, m := range msgs {
		ctr, derr := decode(m)
		if derr != nil {
			return nil, fmt.Errorf("%w: listing nfacct counters: %w", ErrUnexpected, derr)
		}
		out = append(out, ctr)
	}
	// err is nil or an interrupted-dump error: callers get what we have.
	return out, err
}

func mapError(name string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("nfacct counter %q: %w", name, ErrObjectNotFound)
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("nfacct counter %q: %w", name, ErrObjectAlreadyExists)
	default:
		return fmt.Errorf("%w: nfacct counter %q: %w", ErrUnexpected, name, err)
	}
}
