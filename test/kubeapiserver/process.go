//go:build linux

package kubeapiserver

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// process is a child the harness started, with its output appended to a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid once done is closed
}

// startProcess runs bin with its output appended to logPath.
//
// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process,
// and Go ends threads whose goroutine exits while locked to them (as network-namespace
// helpers do). So the child is started from a goroutine locked to its thread for as long
// as the child lives: the thread cannot go away under it, and a test binary that dies
// (panic, timeout, SIGKILL) takes its servers with it.
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "\n=== %s started %s: %s %s\n", name, time.Now().UTC().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	p := &process{name: name, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logFile.Close()
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("starting %s (%s): %w", name, bin, err)
			return
		}
		p.cmd = cmd
		started <- nil
		p.err = cmd.Wait()
		fmt.Fprintf(logFile, "=== %s exited %s: %v\n", name, time.Now().UTC().Format(time.RFC3339Nano), p.err)
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, fmt.Errorf("%s exited: %v", p.name, p.err)
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to grace, then kills. A zero grace kills at once.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	if grace > 0 {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// freePort asks the kernel for an unused loopback TCP port. Another process can take it
// before the caller binds it; callers retry with a new port when their server exits.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last n lines of a log file, for failure messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// waitFor polls ready every interval until it returns nil, the process exits, or the
// timeout passes.
func waitFor(p *process, timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if gone, err := p.exited(); gone {
			return err
		}
		if last = ready(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w", p.name, timeout, last)
		}
		select {
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}
