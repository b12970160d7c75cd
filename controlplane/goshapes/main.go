// Command goshapes prints how kube-apiserver's Go types encode to JSON: for every struct type
// reachable from the built-in kinds (k8s.io/api's groups, CustomResourceDefinition and
// APIService, at the versions go.mod pins), each field's JSON name, whether it is a pointer,
// a struct, a list or a map, and its omitempty and omitzero tags. An object the apiserver
// decodes into these types and encodes again (every write) loses what they cannot hold and
// what omitempty drops, and gains the zero values of what they always encode; fieldguard
// replays that round trip from this table (src/defaulting/data/go-shapes.json).
//
//	go run ./goshapes > ../src/defaulting/data/go-shapes.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"
)

// A field: [json name, flags, element type, Go field path]. Flags: p pointer, s struct, l list, m map,
// c custom JSON (a type with its own MarshalJSON: its value is opaque here), a scalar's kind
// (S string, I integer, F floating point, B boolean), e omitempty, z omitzero. The element
// type is the struct type (canonical name) the field, its items or its values hold, or "".
// The Go field path names the field as Go does, through the embedded structs it is promoted
// from ("ProbeHandler.Exec"): an internal type's field is found in its versioned type by it.
// An internal type's fields are named by their JSON tag where they have one (metav1's types),
// else by their Go name, as encoding/json prints them (internal types have no tags).
type field [4]string

var (
	marshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	types     = map[string][]field{}
	seen      = map[reflect.Type]bool{}
)

// canonical is kube-openapi's name for a Go type: the package path with its domain reversed.
func canonical(t reflect.Type) string {
	path := t.PkgPath()
	parts := strings.SplitN(path, "/", 2)
	domain := strings.Split(parts[0], ".")
	for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
		domain[i], domain[j] = domain[j], domain[i]
	}
	name := strings.Join(domain, ".")
	if len(parts) > 1 {
		name += "." + strings.ReplaceAll(parts[1], "/", ".")
	}
	return name + "." + t.Name()
}

func custom(t reflect.Type) bool {
	return t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler)
}

// walk records struct type t (and every struct type below it); returns its canonical name.
func walk(t reflect.Type) string {
	name := canonical(t)
	if seen[t] {
		return name
	}
	seen[t] = true
	var fields []field
	collect(t, "", &fields)
	types[name] = fields
	return name
}

// collect adds t's fields to out, inlining embedded structs as encoding/json does.
func collect(t reflect.Type, prefix string, out *[]field) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		opts := strings.Split(tag, ",")
		name := opts[0]
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct && !custom(f.Type) {
			collect(f.Type, prefix+f.Name+".", out)
			continue
		}
		if name == "" {
			name = f.Name
		}
		flags, elem := "", ""
		for _, o := range opts[1:] {
			switch o {
			case "omitempty":
				flags += "e"
			case "omitzero":
				flags += "z"
			case "inline":
				if f.Type.Kind() == reflect.Struct && !custom(f.Type) {
					collect(f.Type, prefix+f.Name+".", out)
					name = ""
				}
			}
		}
		if name == "" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			flags += "p"
			ft = ft.Elem()
		}
		kind, el := shape(ft)
		flags += kind
		elem = el
		*out = append(*out, field{name, flags, elem, prefix + f.Name})
	}
}

// shape is a type's flag (s, l, m, c or "") and the struct type it holds.
func shape(t reflect.Type) (string, string) {
	if custom(t) {
		return "c", ""
	}
	switch t.Kind() {
	case reflect.Struct:
		return "s", walk(t)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "S", "" // []byte: a base64 string
		}
		return "l", held(t.Elem())
	case reflect.Map:
		return "m", held(t.Elem())
	case reflect.Interface:
		return "c", ""
	case reflect.String:
		return "S", ""
	case reflect.Bool:
		return "B", ""
	case reflect.Float32, reflect.Float64:
		return "F", ""
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "I", ""
	}
	return "c", ""
}

// held is the struct type a list or map holds ("" for scalars, lists of lists and custom).
func held(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && !custom(t) {
		return walk(t)
	}
	return ""
}

func main() {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{scheme.AddToScheme, apiextensionsv1.AddToScheme, apiregistrationv1.AddToScheme} {
		if err := add(s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	kinds := map[string]string{}
	for gvk, t := range s.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		name := walk(t)
		gv := gvk.Version
		if gvk.Group != "" {
			gv = gvk.Group + "/" + gvk.Version
		}
		kinds[gv+"/"+gvk.Kind] = name
	}
	// The internal types the apiserver validates (their values print in refusals' messages):
	// those of the groups whose rules fieldguard predicts.
	internal := map[string]string{}
	for gvk, t := range legacyscheme.Scheme.AllKnownTypes() {
		if gvk.Version != runtime.APIVersionInternal || strings.HasSuffix(gvk.Kind, "List") || strings.HasSuffix(gvk.Kind, "Options") {
			continue
		}
		if !strings.HasPrefix(t.PkgPath(), "k8s.io/kubernetes/pkg/apis/") {
			continue
		}
		gk := gvk.Kind
		if gvk.Group != "" {
			gk = gvk.Group + "/" + gvk.Kind
		}
		internal[gk] = walk(t)
	}
	names := make([]string, 0, len(types))
	for n := range types {
		names = append(names, n)
	}
	sort.Strings(names)
	// One type a line, for diffs that read.
	fmt.Println("{\"source\": \"controlplane/goshapes: the Go types of k8s.io/api, apiextensions v1 and apiregistration v1 at controlplane/go.mod's versions\",")
	kb, _ := json.Marshal(kinds)
	ib, _ := json.Marshal(internal)
	fmt.Printf("\"kinds\": %s,\n\"internal\": %s,\n\"types\": {\n", kb, ib)
	for i, n := range names {
		b, _ := json.Marshal(types[n])
		sep := ","
		if i == len(names)-1 {
			sep = ""
		}
		fmt.Printf("%q: %s%s\n", n, b, sep)
	}
	fmt.Println("}}")
}
