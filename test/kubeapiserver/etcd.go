//go:build linux

package kubeapiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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

// Compact compacts etcd's history up to its current revision and returns that revision.
// A watch that resumes from an older resourceVersion then cannot be served from etcd
// ("required revision has been compacted"), and the API server answers it with 410 Gone
// ("too old resource version"), which makes the client list again: the path a proxy
// takes after a long partition. It uses etcd's JSON gateway, so the harness needs no etcd
// client library.
func (e *Etcd) Compact() (int64, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(path, body string, into any) error {
		resp, err := client.Post(e.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			return fmt.Errorf("etcd %s: %w", path, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd %s: %d %s", path, resp.StatusCode, raw)
		}
		if into != nil {
			if err := json.Unmarshal(raw, into); err != nil {
				return fmt.Errorf("etcd %s: decoding %q: %w", path, raw, err)
			}
		}
		return nil
	}
	// Any read returns the store's current revision in its header; the gateway encodes
	// int64 fields as strings. The key is base64 ("/").
	var status struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := post("/v3/kv/range", `{"key":"Lw==","count_only":true}`, &status); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(status.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd revision %q: %w", status.Header.Revision, err)
	}
	// physical: return only once the compaction is applied, so a watch started right
	// after cannot still be served from the old history.
	if err := post("/v3/kv/compaction", fmt.Sprintf(`{"revision":"%d","physical":true}`, rev), nil); err != nil {
		return 0, err
	}
	return rev, nil
}
