// Command validation-oracle judges custom resource writes with Kubernetes 1.36's own code
// (k8s.io/apiextensions-apiserver v0.36.5): one JSON line in, one JSON line out. See README.md.
package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	encjson "encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"sort"
	"strings"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/klog/v2"

	"github.com/go-logr/logr"
)

//go:embed testdata/cases.jsonl
var checkCases []byte

//go:embed testdata/expected.jsonl
var checkExpected []byte

// input is one request line.
type input struct {
	ID      encjson.RawMessage `json:"id"`
	CRD     encjson.RawMessage `json:"crd"`
	Version string             `json:"version"`
	Old     encjson.RawMessage `json:"old"`
	New     encjson.RawMessage `json:"new"`
}

// output is one answer line.
type output struct {
	ID          encjson.RawMessage     `json:"id"`
	CRDErrors   []string               `json:"crd_errors"`
	CRDMessage  string                 `json:"crd_message,omitempty"`
	CRDWarnings []string               `json:"crd_warnings,omitempty"`
	Code        int                    `json:"code,omitempty"`
	Errors      []outError             `json:"errors"`
	Warnings    []string               `json:"warnings"`
	Message     string                 `json:"message"`
	Object      map[string]interface{} `json:"object"`
}

type outError struct {
	Type     string             `json:"type"`
	Field    string             `json:"field"`
	BadValue encjson.RawMessage `json:"bad_value,omitempty"`
	Detail   string             `json:"detail"`
	Error    string             `json:"error"`
}

type inputErrorLine struct {
	ID         encjson.RawMessage `json:"id"`
	InputError string             `json:"input_error"`
}

// oracle holds the per-process cache of CRDs, keyed by their byte-equal JSON.
type oracle struct {
	crds map[string]*cachedCRD
}

type cachedCRD struct {
	info *crdInfo
	err  error
}

const maxCachedCRDs = 1024

func newOracle() *oracle { return &oracle{crds: map[string]*cachedCRD{}} }

func (o *oracle) crd(raw []byte) (*crdInfo, error) {
	if c, ok := o.crds[string(raw)]; ok {
		return c.info, c.err
	}
	info, err := loadCRD(raw)
	if len(o.crds) >= maxCachedCRDs {
		o.crds = map[string]*cachedCRD{}
	}
	o.crds[string(raw)] = &cachedCRD{info: info, err: err}
	return info, err
}

func isNull(raw encjson.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

func isObject(raw encjson.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

// handle answers one line.
func (o *oracle) handle(line []byte) interface{} {
	var in input
	if err := encjson.Unmarshal(line, &in); err != nil {
		return inputErrorLine{ID: idOf(line), InputError: fmt.Sprintf("not a JSON object line: %v", err)}
	}
	id := in.ID
	if len(id) == 0 {
		id = encjson.RawMessage("null")
	}
	fail := func(format string, args ...interface{}) interface{} {
		return inputErrorLine{ID: id, InputError: fmt.Sprintf(format, args...)}
	}
	if !isObject(in.CRD) {
		return fail("crd: a CustomResourceDefinition object is required")
	}
	if !isObject(in.New) {
		return fail("new: an object is required")
	}
	if !isNull(in.Old) && !isObject(in.Old) {
		return fail("old: must be an object or null")
	}
	info, err := o.crd(in.CRD)
	if err != nil {
		return fail("crd: %v", err)
	}
	out := output{ID: id, CRDErrors: info.crdErrors, CRDMessage: info.crdMessage, CRDWarnings: info.crdWarnings, Errors: []outError{}, Warnings: []string{}}
	if len(info.crdErrors) > 0 {
		return out
	}
	version := in.Version
	if version == "" {
		version = info.storage
	}
	vi := info.versions[version]
	if vi == nil || !vi.served {
		return fail("version %q is not served by the CRD", version)
	}
	var old []byte
	if !isNull(in.Old) {
		old = in.Old
	}
	res, err := vi.run(in.New, old)
	if err != nil {
		return fail("%v", err)
	}
	out.Code = res.code
	out.Message = res.message
	out.Object = res.object
	if res.warnings != nil {
		out.Warnings = res.warnings
	}
	for _, e := range res.errs {
		out.Errors = append(out.Errors, toOutError(e))
	}
	return out
}

func idOf(line []byte) encjson.RawMessage {
	var probe struct {
		ID encjson.RawMessage `json:"id"`
	}
	if encjson.Unmarshal(line, &probe) == nil && len(probe.ID) > 0 {
		return probe.ID
	}
	return encjson.RawMessage("null")
}

func toOutError(e *field.Error) outError {
	out := outError{Type: string(e.Type), Field: e.Field, Detail: e.Detail, Error: e.Error()}
	if _, omit := e.BadValue.(field.OmitValueType); !omit {
		b, err := encjson.Marshal(e.BadValue)
		if err != nil {
			b, _ = encjson.Marshal(fmt.Sprintf("%#v", e.BadValue))
		}
		out.BadValue = b
	}
	return out
}

// headerWriter is the response writer the warning recorder writes Warning headers to.
type headerWriter struct{ h http.Header }

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerWriter) WriteHeader(int)             {}

// withWarnings runs fn under the apiserver's own warning recorder (endpoints/filters
// WithWarningRecorder: de-duplication and truncation as the server does them) and returns the
// warnings a client would read from the response's Warning headers.
func withWarnings(ctx context.Context, fn func(context.Context) error) ([]string, error) {
	var err error
	w := &headerWriter{h: http.Header{}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/", nil)
	filters.WithWarningRecorder(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		err = fn(r.Context())
	})).ServeHTTP(w, req)
	var out []string
	if values := w.h.Values("Warning"); len(values) > 0 {
		parsed, _ := utilnet.ParseWarningHeaders(values)
		for _, p := range parsed {
			out = append(out, p.Text)
		}
	}
	return out, err
}

func addWarning(ctx context.Context, text string) { warning.AddWarning(ctx, "", text) }

// serve reads JSON lines from r and writes one answer line per input line to w, flushing whenever
// no more input is buffered (so that a caller may also talk to it one line at a time).
func (o *oracle) serve(r io.Reader, w io.Writer) error {
	in := bufio.NewReaderSize(r, 1<<20)
	out := bufio.NewWriterSize(w, 1<<20)
	enc := encjson.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if encErr := enc.Encode(o.handle(line)); encErr != nil {
				return encErr
			}
		} else if len(line) > 0 && err == nil {
			if encErr := enc.Encode(inputErrorLine{ID: encjson.RawMessage("null"), InputError: "empty line"}); encErr != nil {
				return encErr
			}
		}
		if err == io.EOF {
			return out.Flush()
		}
		if err != nil {
			return err
		}
		if in.Buffered() == 0 {
			if err := out.Flush(); err != nil {
				return err
			}
		}
	}
}

// check runs the embedded testdata/cases.jsonl and compares with testdata/expected.jsonl.
func check(stderr io.Writer) error {
	var got bytes.Buffer
	if err := newOracle().serve(bytes.NewReader(checkCases), &got); err != nil {
		return err
	}
	gotLines := bytes.Split(bytes.TrimRight(got.Bytes(), "\n"), []byte("\n"))
	wantLines := bytes.Split(bytes.TrimRight(checkExpected, "\n"), []byte("\n"))
	failed := 0
	for i := 0; i < len(gotLines) || i < len(wantLines); i++ {
		var g, w []byte
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if sameAnswer(g, w) {
			continue
		}
		failed++
		fmt.Fprintf(stderr, "line %d differs:\n- expected: %s\n+ got:      %s\n", i+1, w, g)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d cases differ from testdata/expected.jsonl", failed, len(wantLines))
	}
	fmt.Fprintf(stderr, "validation-oracle: %d cases match testdata/expected.jsonl\n", len(wantLines))
	return nil
}

// sameAnswer compares two answer lines. The apiserver's own order of errors and warnings is not
// deterministic (kube-openapi's object validator and the CEL validator walk Go maps of
// properties), so errors and warnings are compared as multisets and the message as the same
// prefix over the same multiset of error texts.
func sameAnswer(a, b []byte) bool {
	var av, bv map[string]interface{}
	if encjson.Unmarshal(a, &av) != nil || encjson.Unmarshal(b, &bv) != nil {
		return false
	}
	return reflect.DeepEqual(canonical(av), canonical(bv))
}

func canonical(m map[string]interface{}) map[string]interface{} {
	sortList := func(key string) []string {
		var out []string
		if list, ok := m[key].([]interface{}); ok {
			for _, item := range list {
				b, _ := encjson.Marshal(item)
				out = append(out, string(b))
			}
		}
		sort.Strings(out)
		return out
	}
	c := map[string]interface{}{}
	for k, v := range m {
		c[k] = v
	}
	c["errors"] = sortList("errors")
	c["warnings"] = sortList("warnings")
	if msg, ok := m["message"].(string); ok {
		if i := strings.Index(msg, " is invalid: "); i >= 0 {
			var texts []string
			if list, ok := m["errors"].([]interface{}); ok {
				for _, item := range list {
					if e, ok := item.(map[string]interface{}); ok {
						texts = append(texts, fmt.Sprint(e["error"]))
					}
				}
			}
			sort.Strings(texts)
			c["message"] = msg[:i] + " is invalid: " + strings.Join(texts, "\n")
		}
	}
	return c
}

func main() {
	checkFlag := flag.Bool("check", false, "run the embedded testdata/cases.jsonl and compare with testdata/expected.jsonl")
	flag.Parse()
	// The apiserver code logs (klog) things such as duplicate validation errors: not the oracle's
	// answer, and stdout is the protocol.
	klog.SetLogger(logr.Discard())
	if *checkFlag {
		if err := check(os.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "validation-oracle -check: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := newOracle().serve(os.Stdin, os.Stdout); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(os.Stderr, "validation-oracle: %v\n", err)
		os.Exit(1)
	}
}
