// Schema loading for the SSA oracle.
//
// A case's "schema" may be:
//   - "k8s" or "k8s-<version>" (e.g. "k8s-v1.30.1"): a Kubernetes OpenAPI v2
//     swagger.json from the fixtures directory, converted with kube-openapi's
//     util/proto + schemaconv (the same conversion kube-apiserver uses);
//   - a path to a file: an OpenAPI v2 document (JSON with "swagger"/"definitions")
//     or an smd schema in YAML/JSON form ({"types": [...]});
//   - an inline smd schema (YAML/JSON string, or a JSON object with "types").
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"
	"path/filepath"
	"sort"
	"strings"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	yamlv2 "gopkg.in/yaml.v2"
	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/util/proto"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/yaml"
)

// DefaultK8sVersion is the fixture version that "schema": "k8s" resolves to.
const DefaultK8sVersion = "v1.30.1"

type loadedSchema struct {
	source string
	parser *typed.Parser
	// gvk "group/version/Kind" (group empty for core) -> type name; only
	// for OpenAPI-derived schemas (x-kubernetes-group-version-kind).
	gvkIndex map[string]string
}

type schemaCache struct {
	openapiDir string
	byKey      map[string]*loadedSchema
}

func newSchemaCache(openapiDir string) *schemaCache {
	return &schemaCache{openapiDir: openapiDir, byKey: map[string]*loadedSchema{}}
}

// builtinFixturesDir is set at build time (-ldflags -X) to the fixtures/openapi
// directory beside the oracle's sources.
var builtinFixturesDir string

// defaultOpenAPIDir finds fixtures/openapi: $SSA_ORACLE_OPENAPI_DIR, the directory
// recorded at build time, or one relative to the binary or the working directory.
func defaultOpenAPIDir() string {
	if d := os.Getenv("SSA_ORACLE_OPENAPI_DIR"); d != "" {
		return d
	}
	var candidates []string
	if builtinFixturesDir != "" {
		candidates = append(candidates, builtinFixturesDir)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		// shared/oracle/bin/ssa-oracle -> shared/fixtures/openapi
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "..", "..", "fixtures", "openapi"))
	}
	candidates = append(candidates,
		filepath.Join("shared", "fixtures", "openapi"),
		filepath.Join("..", "shared", "fixtures", "openapi"),
		filepath.Join("fixtures", "openapi"),
	)
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			abs, _ := filepath.Abs(c)
			return abs
		}
	}
	return ""
}

func (c *schemaCache) k8sVersions() []string {
	var out []string
	if c.openapiDir == "" {
		return out
	}
	entries, err := ioutil.ReadDir(c.openapiDir)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(c.openapiDir, e.Name(), "swagger.json")); err == nil {
				out = append(out, e.Name())
			}
		}
	}
	sort.Strings(out)
	return out
}

// resolve returns the schema for a case's "schema" field.
func (c *schemaCache) resolve(raw json.RawMessage) (*loadedSchema, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fmt.Errorf("case has no \"schema\"")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		// Inline object (smd schema in JSON form).
		return c.inline(string(raw))
	}
	s = strings.TrimSpace(s)
	if s == "k8s" || strings.HasPrefix(s, "k8s-") || strings.HasPrefix(s, "k8s@") {
		version := DefaultK8sVersion
		if len(s) > 4 {
			version = s[4:]
			if !strings.HasPrefix(version, "v") {
				version = "v" + version
			}
		}
		if c.openapiDir == "" {
			return nil, fmt.Errorf("schema %q: no OpenAPI fixtures directory (set --openapi-dir or SSA_ORACLE_OPENAPI_DIR)", s)
		}
		path := filepath.Join(c.openapiDir, version, "swagger.json")
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("schema %q: %s not found (available: %s)", s, path, strings.Join(c.k8sVersions(), ", "))
		}
		return c.k8s(path, version)
	}
	if strings.Contains(s, "\n") || strings.HasPrefix(s, "types:") || strings.HasPrefix(s, "{") {
		return c.inline(s)
	}
	return c.file(s)
}

// k8s loads <openapiDir>/<version>/swagger.json converted like kube-apiserver
// does, then overlays what the published v2 document cannot carry but
// kube-apiserver's in-process schema has: struct-field defaults (e.g.
// ContainerPort.protocol=TCP, needed for list-map keys) and, where the smd
// library supports it, per-field elementRelationship overrides. The overlay
// comes from the smd schema Kubernetes generates for the same version
// (<openapiDir>/../smd-schema/k8s-<version>.yaml), if present.
func (c *schemaCache) k8s(path, version string) (*loadedSchema, error) {
	key := "k8s:" + path
	if ls, ok := c.byKey[key]; ok {
		return ls, nil
	}
	data, err := ioutil.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading schema: %v", err)
	}
	ls, err := loadOpenAPIv2(data, path)
	if err != nil {
		return nil, err
	}
	overlayPath := filepath.Join(c.openapiDir, "..", "smd-schema", "k8s-"+version+".yaml")
	if od, err := ioutil.ReadFile(overlayPath); err == nil {
		var overlay smdschema.Schema
		if err := yamlv2.Unmarshal(od, &overlay); err != nil {
			return nil, fmt.Errorf("reading overlay %s: %v", overlayPath, err)
		}
		n := overlaySchema(&ls.parser.Schema, &overlay)
		ls.source = fmt.Sprintf("%s (+%d field attributes from %s)", path, n, overlayPath)
	}
	c.byKey[key] = ls
	return ls, nil
}

// overlaySchema copies struct-field defaults (and, via typeRefOverlay,
// TypeRef-level attributes the smd version knows) from overlay into s for
// types and fields present in both. Returns how many attributes were copied.
func overlaySchema(s, overlay *smdschema.Schema) int {
	byName := map[string]*smdschema.TypeDef{}
	for i := range overlay.Types {
		byName[overlay.Types[i].Name] = &overlay.Types[i]
	}
	n := 0
	for i := range s.Types {
		td := &s.Types[i]
		o, ok := byName[td.Name]
		if !ok || td.Map == nil || o.Map == nil {
			continue
		}
		of := map[string]*smdschema.StructField{}
		for j := range o.Map.Fields {
			of[o.Map.Fields[j].Name] = &o.Map.Fields[j]
		}
		for j := range td.Map.Fields {
			f := &td.Map.Fields[j]
			src, ok := of[f.Name]
			if !ok {
				continue
			}
			if f.Default == nil && src.Default != nil {
				f.Default = src.Default
				n++
			}
			n += typeRefOverlay(&f.Type, &src.Type)
		}
	}
	return n
}

func (c *schemaCache) inline(text string) (*loadedSchema, error) {
	sum := sha256.Sum256([]byte(text))
	key := "inline:" + hex.EncodeToString(sum[:])
	if ls, ok := c.byKey[key]; ok {
		return ls, nil
	}
	ls, err := loadSMDSchema([]byte(text), "inline")
	if err != nil {
		return nil, err
	}
	c.byKey[key] = ls
	return ls, nil
}

func (c *schemaCache) file(path string) (*loadedSchema, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	key := "file:" + abs
	if ls, ok := c.byKey[key]; ok {
		return ls, nil
	}
	data, err := ioutil.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("reading schema: %v", err)
	}
	var ls *loadedSchema
	if looksLikeOpenAPIv2(data) {
		ls, err = loadOpenAPIv2(data, abs)
	} else {
		ls, err = loadSMDSchema(data, abs)
	}
	if err != nil {
		return nil, err
	}
	c.byKey[key] = ls
	return ls, nil
}

func looksLikeOpenAPIv2(data []byte) bool {
	head := data
	if len(head) > 4096 {
		head = head[:4096]
	}
	h := string(head)
	if strings.Contains(h, "\"swagger\"") {
		return true
	}
	// k8s swagger.json starts with "definitions"; smd schemas start with "types".
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err == nil {
		_, hasDefs := probe["definitions"]
		_, hasSwagger := probe["swagger"]
		_, hasTypes := probe["types"]
		return (hasDefs || hasSwagger) && !hasTypes
	}
	return false
}

// loadSMDSchema parses an smd schema (YAML, or JSON which is YAML) and validates it.
func loadSMDSchema(data []byte, source string) (*loadedSchema, error) {
	text := string(data)
	// sigs.k8s.io/yaml round trip normalises JSON objects into YAML the
	// smd parser (gopkg.in/yaml.v2) reads identically; plain YAML passes as is.
	p, err := typed.NewParser(typed.YAMLObject(text))
	if err != nil {
		if y, yerr := yaml.JSONToYAML(data); yerr == nil {
			if p2, err2 := typed.NewParser(typed.YAMLObject(y)); err2 == nil {
				return &loadedSchema{source: source, parser: p2}, nil
			}
		}
		return nil, fmt.Errorf("invalid smd schema (%s): %v", source, err)
	}
	return &loadedSchema{source: source, parser: p}, nil
}

// loadOpenAPIv2 converts an OpenAPI v2 document into an smd schema the way
// kube-apiserver does (util/proto models -> schemaconv).
func loadOpenAPIv2(data []byte, source string) (*loadedSchema, error) {
	models, err := openAPIModels(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	s, err := schemaconv.ToSchema(models)
	if err != nil {
		return nil, fmt.Errorf("%s: converting OpenAPI to smd schema: %v", source, err)
	}
	p := &typed.Parser{Schema: smdschema.Schema{Types: s.Types}}
	return &loadedSchema{source: source, parser: p, gvkIndex: gvkIndex(models)}, nil
}

func openAPIModels(data []byte) (proto.Models, error) {
	doc, err := openapi_v2.ParseDocument(data)
	if err != nil {
		return nil, fmt.Errorf("parsing OpenAPI v2 document: %v", err)
	}
	models, err := proto.NewOpenAPIData(doc)
	if err != nil {
		return nil, fmt.Errorf("building OpenAPI models: %v", err)
	}
	return models, nil
}

func gvkKey(group, version, kind string) string {
	return group + "/" + version + "/" + kind
}

// gvkIndex mirrors k8s' indexModels: x-kubernetes-group-version-kind -> model name.
func gvkIndex(models proto.Models) map[string]string {
	out := map[string]string{}
	for _, name := range models.ListModels() {
		m := models.LookupModel(name)
		if m == nil {
			continue
		}
		ext, ok := m.GetExtensions()["x-kubernetes-group-version-kind"]
		if !ok {
			continue
		}
		list, ok := ext.([]interface{})
		if !ok {
			continue
		}
		for _, item := range list {
			get := func(k string) (string, bool) {
				switch mm := item.(type) {
				case map[interface{}]interface{}:
					v, ok := mm[k].(string)
					return v, ok
				case map[string]interface{}:
					v, ok := mm[k].(string)
					return v, ok
				}
				return "", false
			}
			g, ok1 := get("group")
			v, ok2 := get("version")
			k, ok3 := get("kind")
			if ok1 && ok2 && ok3 && k != "" {
				out[gvkKey(g, v, k)] = name
			}
		}
	}
	return out
}

// typeNameFor picks the type: explicit typeName, else the GVK index.
func (ls *loadedSchema) typeNameFor(explicit, apiVersion, kind string) (string, error) {
	if explicit != "" {
		if _, ok := ls.parser.Schema.FindNamedType(explicit); !ok {
			return "", fmt.Errorf("type %q not found in schema %s", explicit, ls.source)
		}
		return explicit, nil
	}
	if ls.gvkIndex == nil {
		return "", fmt.Errorf("case has no \"typeName\" (required for smd schemas)")
	}
	group, version := splitAPIVersion(apiVersion)
	if name, ok := ls.gvkIndex[gvkKey(group, version, kind)]; ok {
		return name, nil
	}
	return "", fmt.Errorf("no type for apiVersion=%q kind=%q in %s; give \"typeName\"", apiVersion, kind, ls.source)
}

func splitAPIVersion(apiVersion string) (group, version string) {
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		return apiVersion[:i], apiVersion[i+1:]
	}
	return "", apiVersion
}

// convertOpenAPIToSMDYAML is the "convert" subcommand: OpenAPI v2 -> smd schema YAML.
func convertOpenAPIToSMDYAML(path string) ([]byte, error) {
	data, err := ioutil.ReadFile(path)
	if err != nil {
		return nil, err
	}
	models, err := openAPIModels(data)
	if err != nil {
		return nil, err
	}
	s, err := schemaconv.ToSchema(models)
	if err != nil {
		return nil, err
	}
	return yamlv2.Marshal(s)
}
