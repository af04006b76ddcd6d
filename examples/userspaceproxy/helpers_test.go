//go:build linux

package main

import (
	"bufio"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// tcpServer answers every connection with id and a newline, then closes it.
func tcpServer(t *testing.T, addr string, id string) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("endpoint %s: %v", id, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(id + "\n"))
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// udpServer answers every datagram with id.
func udpServer(t *testing.T, addr string, id string) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("endpoint %s: %v", id, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(id), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// tcpGet connects to addr through the proxy and returns the endpoint's id.
func tcpGet(addr netip.AddrPort) (string, error) {
	c, err := net.DialTimeout("tcp", addr.String(), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// udpGet sends one datagram from a fresh socket (a new flow) and returns the reply.
func udpGet(addr netip.AddrPort) (string, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return "", err
	}
	defer c.Close()
	buf := make([]byte, 1500)
	// The first datagram may race the listener's start; retry a few times.
	for range 5 {
		if _, err := c.Write([]byte("ping")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Read(buf)
		if err == nil {
			return string(buf[:n]), nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return "", err
		}
	}
	return "", errors.New("no UDP reply")
}

// ids calls get n times and counts the answers; errors count under "error".
func ids(n int, get func() (string, error)) map[string]int {
	out := map[string]int{}
	for range n {
		id, err := get()
		if err != nil {
			id = "error"
		}
		out[id]++
	}
	return out
}

// eventually retries check until it returns "" or the deadline passes, and returns the
// last complaint.
func eventually(d time.Duration, check func() string) string {
	deadline := time.Now().Add(d)
	for {
		msg := check()
		if msg == "" || time.Now().After(deadline) {
			return msg
		}
		time.Sleep(20 * time.Millisecond)
	}
}
