package loader

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
)

// kinds maps each known apiVersion to the Go type of its KubeProxyConfiguration.
var kinds = map[schema.GroupVersion]reflect.Type{
	configv1alpha1.SchemeGroupVersion: reflect.TypeFor[configv1alpha1.KubeProxyConfiguration](),
	configv1alpha2.SchemeGroupVersion: reflect.TypeFor[configv1alpha2.KubeProxyConfiguration](),
}

const kind = "KubeProxyConfiguration"

// inspect parses data as YAML (JSON is YAML too), checks apiVersion and kind, and
// walks the document against the Go type of that version, listing unknown and
// duplicate fields with their lines. The apimachinery decoder finds the same
// problems but cannot say where they are.
func inspect(data []byte) (schema.GroupVersionKind, *walker, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return schema.GroupVersionKind{}, nil, errors.New("the configuration is empty")
		}
		return schema.GroupVersionKind{}, nil, fmt.Errorf("parsing the configuration: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return schema.GroupVersionKind{}, nil, errors.New("the configuration is empty")
	}
	if err := onlyDocument(dec); err != nil {
		return schema.GroupVersionKind{}, nil, err
	}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return schema.GroupVersionKind{}, nil, fmt.Errorf("line %d: the configuration must be a mapping (a YAML or JSON object), not %s", root.Line, nodeKind(root))
	}

	var apiVersion, gotKind *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch root.Content[i].Value {
		case "apiVersion":
			apiVersion = resolve(root.Content[i+1])
		case "kind":
			gotKind = resolve(root.Content[i+1])
		}
	}
	if apiVersion == nil || apiVersion.Kind != yaml.ScalarNode || apiVersion.Value == "" {
		return schema.GroupVersionKind{}, nil, fmt.Errorf("apiVersion is missing: want %s or %s",
			configv1alpha1.SchemeGroupVersion, configv1alpha2.SchemeGroupVersion)
	}
	gv, err := schema.ParseGroupVersion(apiVersion.Value)
	if err != nil {
		return schema.GroupVersionKind{}, nil, fmt.Errorf("line %d: apiVersion %q: %w", apiVersion.Line, apiVersion.Value, err)
	}
	typ, ok := kinds[gv]
	if !ok {
		return schema.GroupVersionKind{}, nil, fmt.Errorf("line %d: apiVersion %q is not supported: want %s or %s",
			apiVersion.Line, apiVersion.Value, configv1alpha1.SchemeGroupVersion, configv1alpha2.SchemeGroupVersion)
	}
	if gotKind == nil || gotKind.Kind != yaml.ScalarNode || gotKind.Value != kind {
		where, what := 0, "missing"
		if gotKind != nil {
			where, what = gotKind.Line, strconv.Quote(gotKind.Value)
		}
		return schema.GroupVersionKind{}, nil, fmt.Errorf("line %d: kind is %s, want %s", where, what, kind)
	}

	w := &walker{}
	if gv == configv1alpha1.SchemeGroupVersion {
		w.newer = kinds[configv1alpha2.SchemeGroupVersion]
	}
	w.walk(root, typ, "", 0)
	return gv.WithKind(kind), w, nil
}

// walker collects what walk finds.
type walker struct {
	problems []Problem
	// newer, when set, is the type of the newer version of the file's kind: an
	// unknown field that exists there goes to newerFields rather than problems,
	// so that the caller can say what the field would have done and what is
	// used instead.
	newer       reflect.Type
	newerFields []newerField
}

// newerField is a field of a v1alpha1 file that only v1alpha2 has.
type newerField struct {
	path       string
	key, value *yaml.Node
	typ        reflect.Type // its type in the newer version
}

// fieldType returns the type of the field at the dotted JSON path in struct type
// t, or nil when there is no such field.
func fieldType(t reflect.Type, path string) reflect.Type {
	for _, name := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || customDecoding(t) {
			return nil
		}
		ft, ok := jsonFields(t)[name]
		if !ok {
			return nil
		}
		t = ft
	}
	return t
}

// onlyDocument checks that nothing but empty documents follows the first. The
// decoders read the first document only, so anything after it would otherwise be
// dropped without a word, however wrong it is.
func onlyDocument(dec *yaml.Decoder) error {
	for n := 2; ; n++ {
		var doc yaml.Node
		err := dec.Decode(&doc)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("document %d: a configuration file must hold exactly one document, and this one does not even parse: %w", n, err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		// An empty document (a trailing "---", perhaps with comments) decodes as null.
		if body := resolve(doc.Content[0]); body != nil && !(isNull(body) && body.Value == "") {
			return fmt.Errorf("document %d (line %d): a configuration file must hold exactly one KubeProxyConfiguration document; remove the others or split them into separate files",
				n, body.Line)
		}
	}
}

// maxDepth bounds the walk: the configuration types are a few levels deep, and
// hostile input (deeply nested maps under featureGates, say) must not recurse
// without limit.
const maxDepth = 32

// walk checks node against type t; path is the JSON path of node.
func (w *walker) walk(node *yaml.Node, t reflect.Type, path string, depth int) {
	node = resolve(node)
	if node == nil || depth > maxDepth || isNull(node) {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if customDecoding(t) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			return // a type error, which the decoder reports
		}
		fields := jsonFields(t)
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, value := resolve(node.Content[i]), node.Content[i+1]
			name := key.Value
			if name == "<<" && key.Tag == "!!merge" {
				continue // YAML merge keys are expanded by the decoder
			}
			fieldPath := join(path, name)
			if first, dup := seen[name]; dup {
				w.problems = append(w.problems, Problem{
					Field: fieldPath, Line: key.Line, Column: key.Column,
					Message: fmt.Sprintf("duplicate field %q (first set on line %d)", fieldPath, first.Line),
				})
				continue
			}
			seen[name] = key
			ft, ok := fields[name]
			if !ok && w.newer != nil && !strings.Contains(fieldPath, "[") {
				if nt := fieldType(w.newer, fieldPath); nt != nil {
					w.newerFields = append(w.newerFields, newerField{path: fieldPath, key: key, value: value, typ: nt})
					continue
				}
			}
			if !ok {
				w.problems = append(w.problems, Problem{
					Field: fieldPath, Line: key.Line, Column: key.Column,
					Message: fmt.Sprintf("unknown field %q", fieldPath),
				})
				continue
			}
			w.walk(value, ft, fieldPath, depth+1)
		}
	case reflect.Map:
		if node.Kind != yaml.MappingNode {
			return
		}
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key := resolve(node.Content[i])
			entryPath := fmt.Sprintf("%s[%s]", path, key.Value)
			if first, dup := seen[key.Value]; dup {
				w.problems = append(w.problems, Problem{
					Field: entryPath, Line: key.Line, Column: key.Column,
					Message: fmt.Sprintf("duplicate key %q in %q (first set on line %d)", key.Value, path, first.Line),
				})
				continue
			}
			seen[key.Value] = key
			w.walk(node.Content[i+1], t.Elem(), entryPath, depth+1)
		}
	case reflect.Slice, reflect.Array:
		if node.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range node.Content {
			w.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
	}
}

// jsonFields maps the JSON names of t's fields, inlined embedded structs
// included, to their types, as encoding/json sees them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		inline := f.Anonymous && name == "" || strings.Contains(","+opts+",", ",inline,")
		if inline {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, taken := out[k]; !taken {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// customDecoding reports whether t decodes itself (metav1.Duration,
// resource.Quantity, ...): its inside is not made of JSON fields.
func customDecoding(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || pt.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || pt.Implements(textUnmarshaler)
}

// resolve follows aliases, with a bound so that alias cycles cannot loop.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a scalar"
	default:
		return "something else"
	}
}
