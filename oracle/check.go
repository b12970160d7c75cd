package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// expectation is an optional "expect" block in a case or step; every given
// field is checked against the oracle's result (used by the hand-written cases).
type expectation struct {
	// Exact multiset of conflicts; "manager" is the plain manager name (or the
	// full manager key if it starts with "{"), "path" the smd path string.
	Conflicts *[]struct {
		Manager string `json:"manager"`
		Path    string `json:"path"`
	} `json:"conflicts,omitempty"`
	// Resulting object (without managedFields); JSON null means "no object".
	Object json.RawMessage `json:"object,omitempty"`
	// Resulting managedFields, order-insensitive; fieldsV1 compared as sets.
	Managers      *[]entryJSON `json:"managers,omitempty"`
	ObjectChanged *bool        `json:"objectChanged,omitempty"`
	// Substring of the error; if unset, an error fails the check unless
	// conflicts are expected.
	ErrorContains string `json:"errorContains,omitempty"`
}

func (e *expectation) check(r *stepResult) *checkResult {
	var fails []string
	expectConflicts := e.Conflicts != nil && len(*e.Conflicts) > 0
	if e.ErrorContains != "" {
		if !strings.Contains(r.Error, e.ErrorContains) {
			fails = append(fails, fmt.Sprintf("error %q does not contain %q", r.Error, e.ErrorContains))
		}
	} else if r.Error != "" && !expectConflicts {
		fails = append(fails, fmt.Sprintf("unexpected error: %s", r.Error))
	}
	if e.Conflicts != nil {
		var want, got []string
		for _, c := range *e.Conflicts {
			want = append(want, c.Manager+" "+c.Path)
		}
		for _, c := range r.Conflicts {
			m := c.Manager
			for _, w := range *e.Conflicts {
				if strings.HasPrefix(w.Manager, "{") {
					m = c.ManagerKey
					break
				}
			}
			got = append(got, m+" "+c.Path)
		}
		sort.Strings(want)
		sort.Strings(got)
		if strings.Join(want, "\n") != strings.Join(got, "\n") {
			fails = append(fails, fmt.Sprintf("conflicts: want %q, got %q", want, got))
		}
	}
	if len(e.Object) > 0 {
		want, err := decodeJSON(e.Object)
		if err != nil {
			fails = append(fails, fmt.Sprintf("bad expected object: %v", err))
		} else {
			b, _ := json.Marshal(r.Object)
			got, _ := decodeJSON(b)
			if !reflect.DeepEqual(want, got) {
				wb, _ := json.Marshal(want)
				fails = append(fails, fmt.Sprintf("object: want %s, got %s", wb, b))
			}
		}
	}
	if e.ObjectChanged != nil && *e.ObjectChanged != r.ObjectChanged {
		fails = append(fails, fmt.Sprintf("objectChanged: want %v, got %v", *e.ObjectChanged, r.ObjectChanged))
	}
	if e.Managers != nil {
		fails = append(fails, compareManagers(*e.Managers, r.Managers)...)
	}
	return &checkResult{Passed: len(fails) == 0, Failures: fails}
}

func parseSet(raw json.RawMessage) (*fieldpath.Set, error) {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	var set fieldpath.Set
	if err := set.FromJSON(bytes.NewReader(raw)); err != nil {
		return nil, err
	}
	return &set, nil
}

func compareManagers(want, got []entryJSON) []string {
	var fails []string
	used := make([]bool, len(got))
	for _, w := range want {
		ws, err := parseSet(w.FieldsV1)
		if err != nil {
			fails = append(fails, fmt.Sprintf("bad expected fieldsV1 for %s: %v", w.Manager, err))
			continue
		}
		found := false
		for i, g := range got {
			if used[i] || g.Manager != w.Manager || g.Operation != w.Operation || g.Subresource != w.Subresource {
				continue
			}
			if w.APIVersion != "" && g.APIVersion != w.APIVersion {
				continue
			}
			gs, err := parseSet(g.FieldsV1)
			if err != nil {
				continue
			}
			if !ws.Equals(gs) {
				fails = append(fails, fmt.Sprintf("manager %s/%s fieldsV1: want %s, got %s", w.Manager, w.Operation, string(w.FieldsV1), string(g.FieldsV1)))
			}
			used[i] = true
			found = true
			break
		}
		if !found {
			fails = append(fails, fmt.Sprintf("manager %s/%s/%s not found in result", w.Manager, w.Operation, w.APIVersion))
		}
	}
	for i, g := range got {
		if !used[i] {
			fails = append(fails, fmt.Sprintf("unexpected manager entry %s/%s/%s: %s", g.Manager, g.Operation, g.APIVersion, string(g.FieldsV1)))
		}
	}
	return fails
}
