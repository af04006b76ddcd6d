//go:build linux

package main

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// startTCP accepts connections and splices each to an endpoint.
func (l *listener) startTCP() error {
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(l.key.addr))
	if err != nil {
		return err
	}
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	track := func(c net.Conn, add bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if !add {
			delete(conns, c)
			return true
		}
		select {
		case <-l.closing:
			return false
		default:
		}
		conns[c] = struct{}{}
		return true
	}
	l.closeFn = func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				// Temporary failures (out of descriptors) must not end the service.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.serveTCP(c, track)
			}()
		}
	}()
	return nil
}

func (l *listener) serveTCP(client *net.TCPConn, track func(net.Conn, bool) bool) {
	if !track(client, true) {
		client.Close()
		return
	}
	defer track(client, false)
	defer client.Close()
	t := l.targets.Load()
	src := client.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	tried := map[netip.AddrPort]bool{}
	var upstream *net.TCPConn
	for upstream == nil {
		ep, ok := l.pick(t, src, tried)
		if !ok {
			// No endpoint (or none answered): reset, so the client fails at once rather
			// than waiting for data that never comes.
			_ = client.SetLinger(0)
			return
		}
		tried[ep] = true
		c, err := net.DialTimeout("tcp", ep.String(), l.opts.DialTimeout)
		if err != nil {
			continue
		}
		upstream = c.(*net.TCPConn)
	}
	if !track(upstream, true) {
		upstream.Close()
		return
	}
	defer track(upstream, false)
	defer upstream.Close()

	done := make(chan struct{}, 2)
	pipe := func(dst, src *net.TCPConn) {
		_, _ = io.Copy(dst, src)
		// Pass the half-close on so request/response protocols see end of input.
		_ = dst.CloseWrite()
		done <- struct{}{}
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	<-done
	<-done
}

// startUDP relays datagrams: each client address gets its own socket to an endpoint, and
// replies on that socket go back to the client from the service address.
func (l *listener) startUDP() error {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(l.key.addr))
	if err != nil {
		return err
	}
	var mu sync.Mutex
	flows := map[netip.AddrPort]*flow{}
	l.closeFn = func() {
		conn.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, f := range flows {
			f.up.Close()
		}
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		buf := make([]byte, 64*1024)
		for {
			n, client, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
			mu.Lock()
			f := flows[client]
			mu.Unlock()
			if f != nil && !contains(l.targets.Load().eps, f.ep) {
				// The endpoint left the service: move the flow to a current one.
				f.up.Close()
				f = nil
			}
			if f == nil {
				f = l.newFlow(conn, client, &mu, flows)
				if f == nil {
					continue // no endpoint: drop, as UDP has nobody to tell
				}
			}
			_, _ = f.up.Write(buf[:n])
		}
	}()
	return nil
}

// flow is one client's UDP conversation with an endpoint.
type flow struct {
	up *net.UDPConn
	ep netip.AddrPort
}

// newFlow connects a socket to an endpoint for client and relays its replies until the
// endpoint has sent nothing for UDPIdleTimeout, or the flow or listener is closed.
func (l *listener) newFlow(conn *net.UDPConn, client netip.AddrPort, mu *sync.Mutex, flows map[netip.AddrPort]*flow) *flow {
	ep, ok := l.pick(l.targets.Load(), client.Addr(), nil)
	if !ok {
		return nil
	}
	up, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(ep))
	if err != nil {
		return nil
	}
	mu.Lock()
	select {
	case <-l.closing:
		mu.Unlock()
		up.Close()
		return nil
	default:
	}
	f := &flow{up: up, ep: ep}
	flows[client] = f
	mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			mu.Lock()
			if flows[client] == f {
				delete(flows, client)
			}
			mu.Unlock()
			up.Close()
		}()
		buf := make([]byte, 64*1024)
		for {
			_ = up.SetReadDeadline(time.Now().Add(l.opts.UDPIdleTimeout))
			n, err := up.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return
				}
				if errors.Is(err, net.ErrClosed) {
					return
				}
				// ICMP unreachable from the endpoint: keep the flow, the client retries.
				continue
			}
			if _, err := conn.WriteToUDPAddrPort(buf[:n], client); errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}()
	return f
}
