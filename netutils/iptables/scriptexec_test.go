package iptables

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"

	utilexec "k8s.io/utils/exec"
	testingexec "k8s.io/utils/exec/testing"
)

// result is what a scripted command prints and how it exits.
type result struct {
	out    string
	status int // 0 for success
}

// scriptExec is a utilexec.Interface whose commands are answered by handle, and which
// records every command line it ran.
type scriptExec struct {
	mu     sync.Mutex
	calls  []string
	handle func(cmd string, args []string, stdin []byte) result
}

func (e *scriptExec) Command(cmd string, args ...string) utilexec.Cmd {
	return &scriptCmd{exec: e, cmd: cmd, args: args}
}

func (e *scriptExec) CommandContext(_ context.Context, cmd string, args ...string) utilexec.Cmd {
	return e.Command(cmd, args...)
}

func (e *scriptExec) LookPath(file string) (string, error) { return "/usr/sbin/" + file, nil }

func (e *scriptExec) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.calls...)
}

type scriptCmd struct {
	exec   *scriptExec
	cmd    string
	args   []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

func (c *scriptCmd) do() ([]byte, error) {
	var in []byte
	if c.stdin != nil {
		in, _ = io.ReadAll(c.stdin)
	}
	c.exec.mu.Lock()
	c.exec.calls = append(c.exec.calls, strings.Join(append([]string{c.cmd}, c.args...), " "))
	c.exec.mu.Unlock()
	r := c.exec.handle(c.cmd, c.args, in)
	if r.status != 0 {
		return []byte(r.out), testingexec.FakeExitError{Status: r.status}
	}
	return []byte(r.out), nil
}

func (c *scriptCmd) Run() error {
	out, err := c.do()
	w := c.stdout
	if err != nil {
		w = c.stderr
	}
	if w != nil {
		_, _ = w.Write(out)
	}
	return err
}

func (c *scriptCmd) CombinedOutput() ([]byte, error) { return c.do() }
func (c *scriptCmd) Output() ([]byte, error)         { return c.do() }
func (c *scriptCmd) SetDir(string)                   {}
func (c *scriptCmd) SetStdin(in io.Reader)           { c.stdin = in }
func (c *scriptCmd) SetStdout(out io.Writer)         { c.stdout = out }
func (c *scriptCmd) SetStderr(out io.Writer)         { c.stderr = out }
func (c *scriptCmd) SetEnv([]string)                 {}
func (c *scriptCmd) StdoutPipe() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(nil)), nil
}
func (c *scriptCmd) StderrPipe() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(nil)), nil
}
func (c *scriptCmd) Start() error { return nil }
func (c *scriptCmd) Wait() error  { return nil }
func (c *scriptCmd) Stop()        {}
