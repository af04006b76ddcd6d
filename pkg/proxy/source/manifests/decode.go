package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Problem is a document, or an object inside one, that was rejected.
type Problem struct {
	File string
	// Line is 1-based; 0 when no line applies (an unreadable file, for example).
	Line int
	// Object names the object ("Service default/web") when decoding got that far.
	Object string
	Reason string
}

func (p Problem) Error() string {
	loc := p.File
	if p.Line > 0 {
		loc = fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	if p.Object != "" {
		return fmt.Sprintf("%s: %s: %s", loc, p.Object, p.Reason)
	}
	return fmt.Sprintf("%s: %s", loc, p.Reason)
}

// Object is one accepted object and where it was read from.
type Object struct {
	// Object is a *v1.Service, *discoveryv1.EndpointSlice, *v1.Node or
	// *networkingv1.ServiceCIDR, defaulted the way the API server would have.
	Object runtime.Object
	File   string
	Line   int
}

// Key identifies an object independently of the file that holds it.
type Key struct {
	Resource  string
	Namespace string
	Name      string
}

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Resource + "/" + k.Name
	}
	return k.Resource + "/" + k.Namespace + "/" + k.Name
}

// kindInfo describes one kind the source accepts.
type kindInfo struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	newObj     func() runtime.Object
}

var supportedKinds = map[schema.GroupVersionKind]kindInfo{
	v1.SchemeGroupVersion.WithKind("Service"): {
		gvr: v1.SchemeGroupVersion.WithResource("services"), namespaced: true,
		newObj: func() runtime.Object { return &v1.Service{} },
	},
	discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"): {
		gvr: discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), namespaced: true,
		newObj: func() runtime.Object { return &discoveryv1.EndpointSlice{} },
	},
	v1.SchemeGroupVersion.WithKind("Node"): {
		gvr:    v1.SchemeGroupVersion.WithResource("nodes"),
		newObj: func() runtime.Object { return &v1.Node{} },
	},
	networkingv1.SchemeGroupVersion.WithKind("ServiceCIDR"): {
		gvr:    networkingv1.SchemeGroupVersion.WithResource("servicecidrs"),
		newObj: func() runtime.Object { return &networkingv1.ServiceCIDR{} },
	},
}

// kindFor returns the GroupVersionKind of a supported object.
func kindFor(obj runtime.Object) (schema.GroupVersionKind, kindInfo, bool) {
	switch obj.(type) {
	case *v1.Service:
		gvk := v1.SchemeGroupVersion.WithKind("Service")
		return gvk, supportedKinds[gvk], true
	case *discoveryv1.EndpointSlice:
		gvk := discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")
		return gvk, supportedKinds[gvk], true
	case *v1.Node:
		gvk := v1.SchemeGroupVersion.WithKind("Node")
		return gvk, supportedKinds[gvk], true
	case *networkingv1.ServiceCIDR:
		gvk := networkingv1.SchemeGroupVersion.WithKind("ServiceCIDR")
		return gvk, supportedKinds[gvk], true
	}
	return schema.GroupVersionKind{}, kindInfo{}, false
}

// KeyOf returns the key of a supported object.
func KeyOf(obj runtime.Object) (Key, bool) {
	_, info, ok := kindFor(obj)
	if !ok {
		return Key{}, false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return Key{}, false
	}
	return Key{Resource: info.gvr.Resource, Namespace: m.GetNamespace(), Name: m.GetName()}, true
}

// Strict decoding turns unknown and duplicate fields into errors, so a typo such as
// "nodeport:" does not silently become a Service without a node port.
var strictDecoder = serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory,
	scheme.Scheme, scheme.Scheme, serializerjson.SerializerOptions{Strict: true})

// rawDoc is one document of a file, as JSON, with the source lines kept to map field
// paths back to line numbers.
type rawDoc struct {
	text    docText
	line    int // where the document's content starts
	json    []byte
	err     error
	errLine int
	// errObject names the object of a document that could not be parsed, as far
	// as its text tells.
	errObject string
}

// MaxDocumentBytes bounds one object's document. It is the API server's default limit
// on a request body (3 MiB), so nothing larger could have come from a cluster; a
// document over it is rejected before it is parsed, which keeps a runaway annotation
// from costing many times its size in memory. A List document may be larger; each of
// its items is held to the limit.
const MaxDocumentBytes = 3 << 20

func tooLarge(size int) string {
	return fmt.Sprintf("document is %d bytes, over the %d-byte limit for one object (the API server's request limit); split it", size, MaxDocumentBytes)
}

// Decode parses the documents in data, which was read from file. It returns every
// object it accepted and a Problem for every document or object it rejected; one bad
// document never hides the others.
func Decode(file string, data []byte) ([]Object, []Problem) {
	var objs []Object
	var problems []Problem
	for _, doc := range splitDocuments(data) {
		if doc.err != nil {
			problems = append(problems, Problem{File: file, Line: doc.errLine, Object: doc.errObject, Reason: doc.err.Error()})
			continue
		}
		o, p := decodeDocument(file, doc)
		objs = append(objs, o...)
		problems = append(problems, p...)
	}
	return objs, problems
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// splitDocuments splits a JSON stream, a JSON array or a multi-document YAML file.
func splitDocuments(data []byte) []rawDoc {
	lines := strings.Split(string(data), "\n")
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return splitJSON(data, lines)
	}

	var docs []rawDoc
	start := 0
	flush := func(end int) {
		text := docText{first: start + 1, lines: lines[start:end]}
		content := text.contentLine()
		if content == 0 {
			return
		}
		doc := rawDoc{text: text, line: content}
		size := 0
		for _, l := range text.lines {
			size += len(l) + 1
		}
		if size > MaxDocumentBytes && !text.isList() {
			doc.err, doc.errLine, doc.errObject = errors.New(tooLarge(size)), content, text.describe()
			docs = append(docs, doc)
			return
		}
		j, err := yaml.YAMLToJSONStrict([]byte(strings.Join(text.lines, "\n")))
		if err != nil {
			doc.err, doc.errLine = relocateYAMLError(err, text.first, content)
			// The parser may blame the line after the last one (end of input).
			doc.errLine = min(doc.errLine, max(text.first+len(text.lines)-1, 1))
			doc.errObject = text.describe()
		} else {
			doc.json = j
		}
		docs = append(docs, doc)
	}
	for i, l := range lines {
		l = strings.TrimRight(l, "\r")
		if l == "---" || strings.HasPrefix(l, "--- ") || l == "..." {
			flush(i)
			start = i + 1
		}
	}
	flush(len(lines))
	return docs
}

// relocateYAMLError rewrites the document-relative line numbers of a YAML error into
// file line numbers.
func relocateYAMLError(err error, first, fallback int) (error, int) {
	line := fallback
	found := false
	msg := yamlLineRE.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, convErr := strconv.Atoi(strings.TrimPrefix(m, "line "))
		if convErr != nil {
			return m
		}
		abs := first + n - 1
		if !found {
			line, found = abs, true
		}
		return fmt.Sprintf("line %d", abs)
	})
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	return fmt.Errorf("invalid YAML: %s", msg), line
}

func splitJSON(data []byte, lines []string) []rawDoc {
	lineAt := func(off int64) int {
		if off > int64(len(data)) {
			off = int64(len(data))
		}
		for off < int64(len(data)) && strings.ContainsRune(" \t\r\n,", rune(data[off])) {
			off++
		}
		return bytes.Count(data[:off], []byte("\n")) + 1
	}
	whole := docText{first: 1, lines: lines}
	var docs []rawDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	fail := func(err error) {
		// The offset points just past the offending byte.
		off := dec.InputOffset()
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			off = syn.Offset
		}
		off = max(0, min(off-1, int64(len(data))))
		line := bytes.Count(data[:off], []byte("\n")) + 1
		docs = append(docs, rawDoc{err: fmt.Errorf("invalid JSON: %w", err), errLine: line})
	}
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if trimmed[0] == '[' {
		if _, err := dec.Token(); err != nil {
			fail(err)
			return docs
		}
		for dec.More() {
			line := lineAt(dec.InputOffset())
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				fail(err)
				return docs
			}
			docs = append(docs, rawDoc{text: whole, line: line, json: raw})
		}
		return docs
	}
	for {
		line := lineAt(dec.InputOffset())
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			fail(err)
			return docs
		}
		docs = append(docs, rawDoc{text: whole, line: line, json: raw})
	}
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func decodeDocument(file string, doc rawDoc) ([]Object, []Problem) {
	if len(bytes.TrimSpace(doc.json)) == 0 || string(bytes.TrimSpace(doc.json)) == "null" {
		return nil, nil
	}
	var tm typeMeta
	if err := json.Unmarshal(doc.json, &tm); err != nil {
		return nil, []Problem{{File: file, Line: doc.line, Reason: fmt.Sprintf("document is not an object: %v", err)}}
	}
	if tm.Kind == "List" || strings.HasSuffix(tm.Kind, "List") {
		return decodeList(file, doc, tm)
	}
	return decodeObject(file, doc.text, doc.line, doc.json, nil, false)
}

func decodeList(file string, doc rawDoc, tm typeMeta) ([]Object, []Problem) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(doc.json, &list); err != nil {
		return nil, []Problem{{File: file, Line: doc.line, Reason: fmt.Sprintf("%s: cannot read items: %v", tm.Kind, err)}}
	}
	// Items of a typed list (ServiceList) may leave out their own apiVersion and kind.
	var itemDefault *schema.GroupVersionKind
	if tm.Kind != "List" {
		gv, err := schema.ParseGroupVersion(tm.APIVersion)
		if err == nil {
			gvk := gv.WithKind(strings.TrimSuffix(tm.Kind, "List"))
			itemDefault = &gvk
		}
	}
	var objs []Object
	var problems []Problem
	lines := doc.text.itemLines(doc.line, "items")
	for i, item := range list.Items {
		var line int
		if len(lines) == len(list.Items) {
			line = lines[i]
		} else {
			line = doc.text.locate(doc.line, fmt.Sprintf("items[%d]", i))
		}
		o, p := decodeObject(file, doc.text, line, item, itemDefault, true)
		objs = append(objs, o...)
		problems = append(problems, p...)
	}
	return objs, problems
}

var unknownFieldRE = regexp.MustCompile(`(?:unknown|duplicate) field "([^"]+)"`)

// decodeObject decodes, defaults and validates one object that starts at line; field
// paths of errors are looked up from there. inList says it is an item of a list.
func decodeObject(file string, text docText, line int, data []byte, defaultGVK *schema.GroupVersionKind, inList bool) ([]Object, []Problem) {
	var tm typeMeta
	if err := json.Unmarshal(data, &tm); err != nil {
		return nil, []Problem{{File: file, Line: line, Object: describeRaw("", data), Reason: fmt.Sprintf("not an object: %v", err)}}
	}
	gvk := schema.FromAPIVersionAndKind(tm.APIVersion, tm.Kind)
	if tm.Kind == "" && defaultGVK != nil {
		gvk = *defaultGVK
	}
	fail := func(reason string) ([]Object, []Problem) {
		return nil, []Problem{{File: file, Line: line, Object: describeRaw(gvk.Kind, data), Reason: reason}}
	}
	if len(data) > MaxDocumentBytes {
		return fail(tooLarge(len(data)))
	}
	if gvk.Kind == "" {
		return fail("missing kind")
	}
	if tm.APIVersion == "" && defaultGVK == nil {
		return fail(fmt.Sprintf("missing apiVersion for kind %q", gvk.Kind))
	}
	if inList && strings.HasSuffix(gvk.Kind, "List") {
		return fail(fmt.Sprintf("a %s inside a list is not supported: move its items into the outer list, or into documents of their own", gvk.Kind))
	}
	info, ok := supportedKinds[gvk]
	if !ok {
		return fail(unsupportedKindReason(gvk))
	}
	obj, _, err := strictDecoder.Decode(data, &gvk, info.newObj())
	name := describe(gvk.Kind, obj)
	if name == gvk.Kind {
		// The decoder gave up before the name; read it on its own.
		name = describeRaw(gvk.Kind, data)
	}
	if err != nil {
		if !runtime.IsStrictDecodingError(err) {
			return nil, []Problem{{File: file, Line: line, Object: name, Reason: fmt.Sprintf("cannot decode: %v", err)}}
		}
		var problems []Problem
		if strictErr, ok := runtime.AsStrictDecodingError(err); ok {
			for _, e := range strictErr.Errors() {
				l := line
				if m := unknownFieldRE.FindStringSubmatch(e.Error()); m != nil {
					l = text.locate(line, m[1])
				}
				problems = append(problems, Problem{File: file, Line: l, Object: name, Reason: e.Error()})
			}
		}
		if len(problems) == 0 {
			problems = append(problems, Problem{File: file, Line: line, Object: name, Reason: err.Error()})
		}
		return nil, problems
	}
	// The decoder keeps apiVersion/kind in the object; typed clients and informers do
	// not expect them, so clear them like a real API response would after conversion.
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})

	errs := defaultAndValidate(obj, info.namespaced)
	if len(errs) > 0 {
		problems := make([]Problem, 0, len(errs))
		for _, e := range errs {
			problems = append(problems, Problem{
				File: file, Line: text.locate(line, e.Field), Object: describe(gvk.Kind, obj),
				Reason: e.Error(),
			})
		}
		return nil, problems
	}
	return []Object{{Object: obj, File: file, Line: line}}, nil
}

func unsupportedKindReason(gvk schema.GroupVersionKind) string {
	apiVersion := gvk.GroupVersion().String()
	if gvk.Kind == "Endpoints" && gvk.Group == "" {
		return "kind Endpoints is not read by kube-proxy, which uses discovery.k8s.io/v1 EndpointSlices"
	}
	for known := range supportedKinds {
		if known.Kind == gvk.Kind {
			return fmt.Sprintf("unsupported apiVersion %q for kind %s (want %q)", apiVersion, gvk.Kind, known.GroupVersion().String())
		}
	}
	return fmt.Sprintf("kind %s (%s) is not read by kube-proxy; only Service, EndpointSlice, Node and ServiceCIDR are", gvk.Kind, apiVersion)
}

// describeRaw names the object in a document's JSON as far as it can be read, for a
// document that could not be decoded: "Service default/web", or just the kind.
func describeRaw(kind string, data []byte) string {
	var m struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	// A type error elsewhere leaves the fields it reached filled in.
	_ = json.Unmarshal(data, &m)
	if kind == "" {
		kind = m.Kind
	}
	return describeName(kind, m.Metadata.Namespace, m.Metadata.Name)
}

func describeName(kind, namespace, name string) string {
	switch {
	case name == "":
		return kind
	case kind == "":
		kind = "object"
	}
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}

func describe(kind string, obj runtime.Object) string {
	if obj == nil {
		return kind
	}
	m, err := meta.Accessor(obj)
	if err != nil || m.GetName() == "" {
		return kind
	}
	if m.GetNamespace() == "" {
		return kind + " " + m.GetName()
	}
	return kind + " " + m.GetNamespace() + "/" + m.GetName()
}
