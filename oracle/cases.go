package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/merge"
)

// ---- input ----

type caseInput struct {
	Name          string                     `json:"name,omitempty"`
	Comment       string                     `json:"comment,omitempty"` // ignored
	Schema        json.RawMessage            `json:"schema"`
	TypeName      string                     `json:"typeName,omitempty"`
	Live          json.RawMessage            `json:"live,omitempty"`
	Managers      json.RawMessage            `json:"managers,omitempty"`
	KnownVersions []string                   `json:"knownVersions,omitempty"`
	IgnoredFields map[string]json.RawMessage `json:"ignoredFields,omitempty"`
	Now           string                     `json:"now,omitempty"`
	Op            string                     `json:"op,omitempty"`
	Apply         *stepInput                 `json:"apply,omitempty"`
	Update        *stepInput                 `json:"update,omitempty"`
	Steps         []stepInput                `json:"steps,omitempty"`
	Expect        *expectation               `json:"expect,omitempty"`
}

type stepInput struct {
	Comment     string          `json:"comment,omitempty"` // ignored
	Op          string          `json:"op,omitempty"`      // "apply" | "update"
	Manager     string          `json:"manager"`
	APIVersion  string          `json:"apiVersion,omitempty"`
	Subresource string          `json:"subresource,omitempty"`
	Config      json.RawMessage `json:"config,omitempty"` // apply
	Object      json.RawMessage `json:"object,omitempty"` // update
	Force       bool            `json:"force,omitempty"`
	Now         string          `json:"now,omitempty"`
	Expect      *expectation    `json:"expect,omitempty"`
}

// entryJSON is metav1.ManagedFieldsEntry in JSON (same field order).
type entryJSON struct {
	Manager     string          `json:"manager,omitempty"`
	Operation   string          `json:"operation,omitempty"`
	APIVersion  string          `json:"apiVersion,omitempty"`
	Time        *string         `json:"time,omitempty"`
	FieldsType  string          `json:"fieldsType,omitempty"`
	FieldsV1    json.RawMessage `json:"fieldsV1,omitempty"`
	Subresource string          `json:"subresource,omitempty"`
}

// ---- output ----

type conflictOut struct {
	Manager      string   `json:"manager"`
	Operation    string   `json:"operation,omitempty"`
	APIVersion   string   `json:"apiVersion,omitempty"`
	Subresource  string   `json:"subresource,omitempty"`
	ManagerKey   string   `json:"managerKey"`
	Path         string   `json:"path"`
	FieldsV1Path []string `json:"fieldsV1Path"`
}

type stepResult struct {
	Op              string        `json:"op"`
	Manager         string        `json:"manager"`
	Error           string        `json:"error,omitempty"`
	Conflicts       []conflictOut `json:"conflicts"`
	ConflictMessage string        `json:"conflictMessage,omitempty"`
	Object          interface{}   `json:"object"`
	ObjectChanged   bool          `json:"objectChanged"`
	Managers        []entryJSON   `json:"managers"`
	Check           *checkResult  `json:"check,omitempty"`
}

type caseResult struct {
	Name string `json:"name,omitempty"`
	stepResult
	Steps []stepResult `json:"steps,omitempty"`
}

type checkResult struct {
	Passed   bool     `json:"passed"`
	Failures []string `json:"failures,omitempty"`
}

// ---- times ----

// Without "now", touched entries get a synthetic, increasing time that is
// never printed (year >= 9000), so ordering stays right (newest last) and
// output stays deterministic.
var syntheticBase = time.Date(9000, 1, 1, 0, 0, 0, 0, time.UTC)

func isSynthetic(t *time.Time) bool { return t != nil && !t.Before(syntheticBase) }

func parseTime(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fmt.Errorf("bad time %q: %v", s, err)
	}
	t = t.UTC().Truncate(time.Second)
	return &t, nil
}

// ---- entries <-> JSON ----

func entriesFromJSON(raw json.RawMessage) ([]mfEntry, bool, error) {
	// returns entries, isReset (k8s isResetManagedFields), error
	if len(raw) == 0 || string(raw) == "null" {
		return nil, false, nil
	}
	var in []entryJSON
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, false, fmt.Errorf("managed fields: %v", err)
	}
	if len(in) == 0 {
		return []mfEntry{}, true, nil
	}
	if len(in) == 1 && reflect.DeepEqual(in[0], entryJSON{}) {
		return []mfEntry{}, true, nil
	}
	out := make([]mfEntry, 0, len(in))
	for _, e := range in {
		t, err := parseTime(derefString(e.Time))
		if err != nil {
			return nil, false, err
		}
		ft := e.FieldsType
		if ft == "" && !reflect.DeepEqual(e, entryJSON{}) {
			ft = "FieldsV1" // convenience: cases may omit fieldsType
		}
		fv := e.FieldsV1
		var s string
		if len(fv) > 0 && fv[0] == '"' && json.Unmarshal(fv, &s) == nil {
			fv = json.RawMessage(s) // fieldsV1 given as a JSON string
		}
		out = append(out, mfEntry{Manager: e.Manager, Operation: e.Operation, APIVersion: e.APIVersion,
			Time: t, FieldsType: ft, FieldsV1: fv, Subresource: e.Subresource})
	}
	return out, false, nil
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func entriesToJSON(entries []mfEntry) []entryJSON {
	out := []entryJSON{}
	for _, e := range entries {
		var ts *string
		if e.Time != nil && !isSynthetic(e.Time) {
			s := e.Time.UTC().Format(time.RFC3339)
			ts = &s
		}
		out = append(out, entryJSON{Manager: e.Manager, Operation: e.Operation, APIVersion: e.APIVersion,
			Time: ts, FieldsType: e.FieldsType, FieldsV1: e.FieldsV1, Subresource: e.Subresource})
	}
	return out
}

// ---- conflicts ----

func conflictsOut(cs merge.Conflicts) []conflictOut {
	out := []conflictOut{}
	for _, c := range cs {
		id, _ := parseManagerIdentifier(c.Manager)
		var fp []string
		for _, pe := range c.Path {
			s, err := fieldpath.SerializePathElement(pe)
			if err != nil {
				s = pe.String()
			}
			fp = append(fp, s)
		}
		out = append(out, conflictOut{Manager: id.Manager, Operation: id.Operation, APIVersion: id.APIVersion,
			Subresource: id.Subresource, ManagerKey: c.Manager, Path: c.Path.String(), FieldsV1Path: fp})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].ManagerKey != out[j].ManagerKey {
			return out[i].ManagerKey < out[j].ManagerKey
		}
		return out[i].Path < out[j].Path
	})
	return out
}

// printManager / conflictMessage mirror k8s' NewConflictError text.
func printManager(key string) string {
	id, ok := parseManagerIdentifier(key)
	if !ok {
		return fmt.Sprintf("%q", key)
	}
	s := fmt.Sprintf("%q", id.Manager)
	if id.Subresource != "" {
		s = fmt.Sprintf("%s with subresource %q", s, id.Subresource)
	}
	if id.Operation == opUpdate {
		return fmt.Sprintf("%s using %v", s, id.APIVersion)
	}
	return s
}

func conflictMessage(cs []conflictOut) string {
	if len(cs) == 1 {
		return fmt.Sprintf("Apply failed with 1 conflict: conflict with %v: %v", printManager(cs[0].ManagerKey), cs[0].Path)
	}
	byMgr := map[string][]string{}
	var keys []string
	for _, c := range cs {
		if _, ok := byMgr[c.ManagerKey]; !ok {
			keys = append(keys, c.ManagerKey)
		}
		byMgr[c.ManagerKey] = append(byMgr[c.ManagerKey], c.Path)
	}
	sort.Strings(keys)
	var msgs []string
	for _, k := range keys {
		msgs = append(msgs, fmt.Sprintf("conflicts with %v:", printManager(k)))
		for _, p := range byMgr[k] {
			msgs = append(msgs, fmt.Sprintf("- %v", p))
		}
	}
	return fmt.Sprintf("Apply failed with %d conflicts: %s", len(cs), strings.Join(msgs, "\n"))
}

// ---- running a case ----

type state struct {
	live    map[string]interface{} // nil: object does not exist; never holds managedFields
	entries []mfEntry
}

func runCase(sc *schemaCache, line []byte) caseResult {
	var in caseInput
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return caseResult{stepResult: stepResult{Error: fmt.Sprintf("bad case JSON: %v", err), Conflicts: []conflictOut{}, Managers: []entryJSON{}}}
	}
	res := caseResult{Name: in.Name}
	fail := func(err error) caseResult {
		res.Error = err.Error()
		res.Conflicts = []conflictOut{}
		res.Managers = []entryJSON{}
		if in.Expect != nil {
			res.Check = in.Expect.check(&res.stepResult)
		}
		return res
	}

	ls, err := sc.resolve(in.Schema)
	if err != nil {
		return fail(err)
	}
	st := state{}
	if len(in.Live) > 0 && string(in.Live) != "null" {
		st.live, err = decodeJSONObject(in.Live)
		if err != nil {
			return fail(fmt.Errorf("live: %v", err))
		}
	}
	if len(in.Managers) > 0 && string(in.Managers) != "null" {
		st.entries, _, err = entriesFromJSON(in.Managers)
	} else if st.live != nil {
		var raw []byte
		if md, ok := st.live["metadata"].(map[string]interface{}); ok && md["managedFields"] != nil {
			raw, _ = json.Marshal(md["managedFields"])
		}
		st.entries, _, err = entriesFromJSON(raw)
	}
	if err != nil {
		return fail(err)
	}
	if st.live != nil {
		removeManagedFields(st.live)
	}

	ignored := map[fieldpath.APIVersion]*fieldpath.Set{}
	for v, raw := range in.IgnoredFields {
		var s fieldpath.Set
		if err := s.FromJSON(bytes.NewReader(raw)); err != nil {
			return fail(fmt.Errorf("ignoredFields[%s]: %v", v, err))
		}
		ignored[fieldpath.APIVersion(v)] = &s
	}

	steps := in.Steps
	single := len(steps) == 0
	if single {
		op := strings.ToLower(in.Op)
		switch {
		case op == "update" || (op == "" && in.Update != nil && in.Apply == nil):
			if in.Update == nil {
				return fail(fmt.Errorf("op \"update\" needs an \"update\" object"))
			}
			s := *in.Update
			s.Op = "update"
			steps = []stepInput{s}
		case op == "apply" || op == "":
			if in.Apply == nil {
				return fail(fmt.Errorf("case needs \"apply\", \"update\" or \"steps\""))
			}
			s := *in.Apply
			s.Op = "apply"
			steps = []stepInput{s}
		default:
			return fail(fmt.Errorf("unknown op %q", in.Op))
		}
	}

	var results []stepResult
	for i, step := range steps {
		now := syntheticBase.Add(time.Duration(i+1) * time.Second)
		nowStr := step.Now
		if nowStr == "" {
			nowStr = in.Now
		}
		if t, err := parseTime(nowStr); err != nil {
			return fail(err)
		} else if t != nil {
			now = *t
		}
		r := runStep(ls, &in, ignored, &st, step, now)
		if step.Expect != nil {
			r.Check = step.Expect.check(&r)
		}
		results = append(results, r)
	}
	res.stepResult = results[len(results)-1]
	res.stepResult.Check = nil
	if !single {
		res.Steps = results
	}
	if in.Expect != nil {
		res.Check = in.Expect.check(&res.stepResult)
	}
	// Roll step checks into the case check.
	if !single {
		for i, r := range results {
			if r.Check != nil && !r.Check.Passed {
				if res.Check == nil {
					res.Check = &checkResult{Passed: true}
				}
				res.Check.Passed = false
				for _, f := range r.Check.Failures {
					res.Check.Failures = append(res.Check.Failures, fmt.Sprintf("step %d: %s", i+1, f))
				}
			} else if r.Check != nil && res.Check == nil {
				res.Check = &checkResult{Passed: true}
			}
		}
	}
	return res
}

func runStep(ls *loadedSchema, in *caseInput, ignored map[fieldpath.APIVersion]*fieldpath.Set, st *state, step stepInput, now time.Time) stepResult {
	op := strings.ToLower(step.Op)
	r := stepResult{Op: op, Manager: step.Manager, Conflicts: []conflictOut{}}
	unchanged := func() {
		r.Object = nil
		r.Managers = entriesToJSON(st.entries)
	}
	fail := func(err error) stepResult {
		r.Error = err.Error()
		unchanged()
		return r
	}

	var body map[string]interface{}
	var err error
	switch op {
	case "apply":
		body, err = decodeJSONObject(step.Config)
		if err == nil && body == nil {
			err = fmt.Errorf("apply step needs \"config\"")
		}
	case "update":
		body, err = decodeJSONObject(step.Object)
		if err == nil && body == nil {
			err = fmt.Errorf("update step needs \"object\"")
		}
	default:
		err = fmt.Errorf("unknown step op %q (want apply or update)", step.Op)
	}
	if err != nil {
		return fail(err)
	}

	apiVersion := step.APIVersion
	if apiVersion == "" {
		apiVersion, _ = body["apiVersion"].(string)
	}
	if apiVersion == "" && st.live != nil {
		apiVersion, _ = st.live["apiVersion"].(string)
	}
	kind := ""
	if st.live != nil {
		kind, _ = st.live["kind"].(string)
	}
	if kind == "" {
		kind, _ = body["kind"].(string)
	}
	typeName, err := ls.typeNameFor(in.TypeName, apiVersion, kind)
	if err != nil {
		return fail(err)
	}

	var known map[string]bool
	if len(in.KnownVersions) > 0 {
		known = map[string]bool{apiVersion: true}
		for _, v := range in.KnownVersions {
			known[v] = true
		}
	}
	fm := &fieldManager{
		pt:          ls.parser.Type(typeName),
		apiVersion:  apiVersion,
		kind:        kind,
		subresource: step.Subresource,
		updater:     newUpdater(idConverter{known: known}, ignored),
		now:         now,
	}

	live := st.live
	if live == nil {
		// objectCreater.New(gvk) for unstructured: only apiVersion/kind set.
		live = map[string]interface{}{"apiVersion": apiVersion, "kind": kind}
	} else {
		live = deepCopyMap(live)
	}
	before := st.live

	var obj map[string]interface{}
	var entries []mfEntry
	switch op {
	case "apply":
		if step.Manager == "" {
			return fail(fmt.Errorf("BadRequest: fieldManager must be set for apply requests"))
		}
		obj, entries, err = fm.Apply(live, body, st.entries, step.Manager, step.Force)
	case "update":
		var newEntries []mfEntry
		var reset bool
		if md, ok := body["metadata"].(map[string]interface{}); ok {
			if v, present := md["managedFields"]; present && v != nil {
				raw, _ := json.Marshal(v)
				newEntries, reset, err = entriesFromJSON(raw)
				if err != nil {
					return fail(err)
				}
			}
		}
		obj, entries, err = fm.Update(live, body, st.entries, newEntries, reset, step.Manager)
	}
	if err != nil {
		if cs, ok := err.(merge.Conflicts); ok {
			r.Conflicts = conflictsOut(cs)
			r.ConflictMessage = conflictMessage(r.Conflicts)
			r.Error = r.ConflictMessage
			unchanged()
			return r
		}
		return fail(err)
	}
	removeManagedFields(obj)
	st.live = obj
	st.entries = entries
	r.Object = obj
	r.ObjectChanged = before == nil || !reflect.DeepEqual(before, obj)
	r.Managers = entriesToJSON(entries)
	return r
}
