//go:build linux

package kubeapiserver

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Etcd is an etcd member on loopback. Several API servers may share one, each under its
// own key prefix.
type Etcd struct {
	// URL is the client URL, http://127.0.0.1:port.
	URL     string
	LogPath string
	dataDir string
	proc    *process
}

// StartEtcd starts etcd with its data in memory (/dev/shm when present) and without
// fsync: etcd on a slow disk stalls the API server's start-up hooks until it exits
// (measured in about 1 of 40 starts). logDir receives etcd.log. A start that loses its
// ports to another process is retried with new ones.
func StartEtcd(bin, logDir string) (*Etcd, error) {
	base := ""
	if info, err := os.Stat("/dev/shm"); err == nil && info.IsDir() {
		base = "/dev/shm"
	}
	dataDir, err := os.MkdirTemp(base, "kube-proxy-test-etcd-")
	if err != nil {
		return nil, fmt.Errorf("etcd data dir: %w", err)
	}
	e := &Etcd{dataDir: dataDir, LogPath: filepath.Join(logDir, "etcd.log")}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if lastErr = e.start(bin); lastErr == nil {
			return e, nil
		}
	}
	e.Close()
	return nil, fmt.Errorf("%w\n--- etcd log tail ---\n%s", lastErr, tail(e.LogPath, 30))
}

func (e *Etcd) start(bin string) error {
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	peerPort, err := freePort()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(e.dataDir, "member")); err != nil {
		return fmt.Errorf("clearing etcd data dir: %w", err)
	}
	e.URL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	e.proc, err = startProcess("etcd", e.LogPath, bin,
		"--name=kube-proxy-test",
		"--data-dir="+e.dataDir,
		"--listen-client-urls="+e.URL, "--advertise-client-urls="+e.URL,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kube-proxy-test="+peer,
		"--unsafe-no-fsync",
		"--log-level=warn",
		// Compaction only costs CPU in a test that lives for minutes.
		"--auto-compaction-retention=0",
	)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	err = waitFor(e.proc, 30*time.Second, func() error {
		resp, err := client.Get(e.URL + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
			return fmt.Errorf("/health: %d %s", resp.StatusCode, body)
		}
		return nil
	})
	if err != nil {
		e.proc.stop(0)
		e.proc = nil
	}
	return err
}

// Close kills etcd and removes its data.
func (e *Etcd) Close() {
	if e == nil {
		return
	}
	e.proc.stop(0)
	e.proc = nil
	_ = os.RemoveAll(e.dataDir)
}
