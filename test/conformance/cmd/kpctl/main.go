// Command kpctl prepares the one-node conformance cluster of hack/conformance.sh:
//
//	kpctl pki -dir DIR -node NAME -node-ip IP -service-ip IP -server URL
//	kpctl image -o OUT.tar -tag REF [-tag REF] [-file SRC:DST] [-bin HOSTPATH] [-busybox PATH]
//	            [-text DST=CONTENT] [-dir DST] [-link DST=TARGET] [-entrypoint A,B] [-cmd A,B]
//	kpctl report [-focus REGEXP] [-skips FILE] RESULTDIR...
//	kpctl dns -kubeconfig FILE -listen IP:53 [-domain cluster.local]
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/kube-proxy/test/conformance/clusterdns"
	"k8s.io/kube-proxy/test/conformance/ociimage"
	"k8s.io/kube-proxy/test/conformance/pki"
	"k8s.io/kube-proxy/test/conformance/report"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kpctl pki|image [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "pki":
		err = runPKI(os.Args[2:])
	case "image":
		err = runImage(os.Args[2:])
	case "report":
		err = runReport(os.Args[2:])
	case "dns":
		err = runDNS(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kpctl:", err)
		os.Exit(1)
	}
}

func runPKI(args []string) error {
	fs := flag.NewFlagSet("pki", flag.ExitOnError)
	dir := fs.String("dir", "", "output directory")
	node := fs.String("node", "", "node name")
	nodeIP := fs.String("node-ip", "", "node IP")
	svcIP := fs.String("service-ip", "", "first service IP")
	server := fs.String("server", "", "API server URL")
	var more list
	fs.Var(&more, "more-node", "NAME=IP of another node: kubelet-NAME.{crt,key,conf} (repeatable)")
	_ = fs.Parse(args)
	c := pki.Cluster{Dir: *dir, NodeName: *node, NodeIP: net.ParseIP(*nodeIP), ServiceIP: net.ParseIP(*svcIP), ServerURL: *server}
	for _, m := range more {
		name, ip, ok := strings.Cut(m, "=")
		if !ok || net.ParseIP(ip) == nil {
			return fmt.Errorf("pki: -more-node %q: want NAME=IP", m)
		}
		c.MoreNodes = append(c.MoreNodes, pki.Node{Name: name, IP: net.ParseIP(ip)})
	}
	if c.Dir == "" || c.NodeName == "" || c.NodeIP == nil || c.ServiceIP == nil || c.ServerURL == "" {
		return fmt.Errorf("pki: -dir, -node, -node-ip, -service-ip and -server are required (node-ip %q, service-ip %q)", *nodeIP, *svcIP)
	}
	return pki.Generate(c)
}

func runImage(args []string) error {
	fs := flag.NewFlagSet("image", flag.ExitOnError)
	var tags, files, bins, texts, dirs, links list
	out := fs.String("o", "", "output docker-archive tarball")
	busybox := fs.String("busybox", "", "static busybox to install with its applet links in /bin")
	entrypoint := fs.String("entrypoint", "", "comma-separated entrypoint")
	cmd := fs.String("cmd", "", "comma-separated command")
	fs.Var(&tags, "tag", "image reference (repeatable)")
	fs.Var(&files, "file", "SRC:DST host file copied into the image (repeatable)")
	fs.Var(&bins, "bin", "host binary copied at its path with its shared libraries (repeatable)")
	fs.Var(&texts, "text", "DST=CONTENT file written into the image (repeatable)")
	fs.Var(&dirs, "dir", "directory created in the image, mode 1777 (repeatable)")
	fs.Var(&links, "link", "DST=TARGET symlink (repeatable)")
	_ = fs.Parse(args)
	if *out == "" {
		return fmt.Errorf("image: -o is required")
	}

	var entries []ociimage.File
	keep := map[string]bool{}
	for _, f := range files {
		src, dst, ok := strings.Cut(f, ":")
		if !ok {
			return fmt.Errorf("image: -file %q is not SRC:DST", f)
		}
		st, err := os.Stat(src)
		if err != nil {
			return fmt.Errorf("image: -file %q: %w", f, err)
		}
		entries = append(entries, ociimage.File{Path: dst, Source: src, Mode: st.Mode().Perm()})
		keep[dst] = true
	}
	for _, b := range bins {
		e, err := ociimage.HostBinary(b)
		if err != nil {
			return err
		}
		entries = append(entries, e...)
		for _, x := range e {
			keep[x.Path] = true
		}
	}
	for _, t := range texts {
		dst, content, _ := strings.Cut(t, "=")
		entries = append(entries, ociimage.File{Path: dst, Data: []byte(content), Mode: 0o644})
		keep[dst] = true
	}
	for _, l := range links {
		dst, target, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("image: -link %q is not DST=TARGET", l)
		}
		entries = append(entries, ociimage.File{Path: dst, Linkname: target})
		keep[dst] = true
	}
	for _, d := range dirs {
		entries = append(entries, ociimage.File{Path: d, Dir: true, Mode: 0o777 | os.ModeSticky})
	}
	if *busybox != "" {
		e, err := ociimage.Busybox(*busybox, keep)
		if err != nil {
			return err
		}
		entries = append(e, entries...)
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	f, err := os.Create(*out)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	cfg := ociimage.Config{Entrypoint: split(*entrypoint), Cmd: split(*cmd)}
	if err := ociimage.Write(f, entries, cfg, tags); err != nil {
		f.Close()
		return fmt.Errorf("image %s: %w", *out, err)
	}
	return f.Close()
}

func runReport(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	focus := fs.String("focus", "", "ginkgo focus of the runs: specs it matches and a skip matches are listed as skipped")
	skipsFile := fs.String("skips", "", "file of REGEXP|REASON lines")
	_ = fs.Parse(args)
	var runs []report.Run
	for _, d := range fs.Args() {
		r, err := report.Load(d)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	var re *regexp.Regexp
	if *focus != "" {
		var err error
		if re, err = regexp.Compile(*focus); err != nil {
			return fmt.Errorf("report: -focus %q: %w", *focus, err)
		}
	}
	var skips []report.Skip
	if *skipsFile != "" {
		data, err := os.ReadFile(*skipsFile)
		if err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if skips, err = report.ParseSkips(strings.Split(string(data), "\n")); err != nil {
			return err
		}
	}
	report.Write(os.Stdout, runs, re, skips)
	return nil
}

func runDNS(args []string) error {
	fs := flag.NewFlagSet("dns", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of a client that may list Services and EndpointSlices")
	listen := fs.String("listen", "", "UDP address to serve on")
	domain := fs.String("domain", "cluster.local", "cluster domain")
	_ = fs.Parse(args)
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("dns: kubeconfig %q: %w", *kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dns: %w", err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	return clusterdns.Serve(klog.NewContext(ctx, klog.Background()), client, *listen, *domain)
}
