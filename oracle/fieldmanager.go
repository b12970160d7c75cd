// A re-statement of the kube-apiserver field-manager pipeline
// (k8s.io/apimachinery/pkg/util/managedfields/internal) on top of the real
// structured-merge-diff library (merge.Updater). The layering, outermost first,
// follows NewDefaultFieldManager:
//
//	FieldManager (decode/encode managedFields)
//	-> versionCheck -> lastAppliedUpdater -> lastAppliedManager
//	-> skipNonApplied (track on create with probability 1)
//	-> capManagers (max 10 update managers, "ancient-changes" buckets)
//	-> buildManagerInfo (manager identifier JSON)
//	-> managedFieldsUpdater (timestamps, "current-operation" merge)
//	-> stripMeta -> structuredMerge (smd merge.Updater Apply/Update)
//
// Not modelled: conversion between API versions (identity conversion; see
// idConverter), defaulting after apply, registry strategies, admission.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/merge"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

const (
	opApply  = "Apply"
	opUpdate = "Update"

	lastAppliedAnnotation    = "kubectl.kubernetes.io/last-applied-configuration"
	beforeFirstApplyManager  = "before-first-apply"
	currentOperationManager  = "current-operation"
	ancientChangesManager    = "ancient-changes"
	defaultMaxUpdateManagers = 10
	totalAnnotationSizeLimit = 256 * (1 << 10)
)

// mfEntry is metav1.ManagedFieldsEntry with a parsed time.
type mfEntry struct {
	Manager     string
	Operation   string
	APIVersion  string
	Time        *time.Time
	FieldsType  string
	FieldsV1    json.RawMessage
	Subresource string
}

// managerID mirrors metav1.ManagedFieldsEntry's JSON field order, minus the
// fields BuildManagerIdentifier clears (time, fieldsType, fieldsV1).
type managerID struct {
	Manager     string `json:"manager,omitempty"`
	Operation   string `json:"operation,omitempty"`
	APIVersion  string `json:"apiVersion,omitempty"`
	Subresource string `json:"subresource,omitempty"`
}

// buildManagerIdentifier mirrors BuildManagerIdentifier.
func buildManagerIdentifier(manager, operation, apiVersion, subresource string) (string, error) {
	id := managerID{Manager: manager, Operation: operation, APIVersion: apiVersion, Subresource: subresource}
	if operation == opApply {
		id.APIVersion = ""
	}
	b, err := json.Marshal(&id)
	if err != nil {
		return "", fmt.Errorf("error marshalling manager identifier: %v", err)
	}
	return string(b), nil
}

func parseManagerIdentifier(key string) (managerID, bool) {
	var id managerID
	if err := json.Unmarshal([]byte(key), &id); err != nil {
		return managerID{}, false
	}
	return id, true
}

type managed struct {
	fields fieldpath.ManagedFields
	times  map[string]*time.Time
}

func newEmptyManaged() *managed {
	return &managed{fields: fieldpath.ManagedFields{}, times: map[string]*time.Time{}}
}

func (m *managed) copy() *managed {
	out := newEmptyManaged()
	for k, v := range m.fields {
		out.fields[k] = v
	}
	for k, v := range m.times {
		out.times[k] = v
	}
	return out
}

// decodeManagedFields mirrors DecodeManagedFields.
func decodeManagedFields(entries []mfEntry) (*managed, error) {
	m := newEmptyManaged()
	for i, e := range entries {
		switch e.Operation {
		case opApply, opUpdate:
		default:
			return nil, fmt.Errorf("operation must be `Apply` or `Update`")
		}
		if len(e.APIVersion) < 1 {
			return nil, fmt.Errorf("apiVersion must not be empty")
		}
		switch e.FieldsType {
		case "FieldsV1":
		case "":
			return nil, fmt.Errorf("missing fieldsType in managed fields entry %d", i)
		default:
			return nil, fmt.Errorf("invalid fieldsType %q in managed fields entry %d", e.FieldsType, i)
		}
		key, err := buildManagerIdentifier(e.Manager, e.Operation, e.APIVersion, e.Subresource)
		if err != nil {
			return nil, err
		}
		raw := []byte(e.FieldsV1)
		if len(raw) == 0 || string(raw) == "null" {
			raw = []byte("{}")
		}
		var set fieldpath.Set
		if err := set.FromJSON(bytes.NewReader(raw)); err != nil {
			return nil, fmt.Errorf("error decoding versioned set for %s: error decoding set: %v", key, err)
		}
		m.fields[key] = fieldpath.NewVersionedSet(&set, fieldpath.APIVersion(e.APIVersion), e.Operation == opApply)
		m.times[key] = e.Time
	}
	return m, nil
}

// encodeManagedFields mirrors encodeManagedFields + sortEncodedManagedFields.
func encodeManagedFields(m *managed) ([]mfEntry, error) {
	if len(m.fields) == 0 {
		return nil, nil
	}
	out := []mfEntry{}
	for key, vs := range m.fields {
		var e mfEntry
		id, ok := parseManagerIdentifier(key)
		if !ok {
			return nil, fmt.Errorf("error unmarshalling manager identifier %v", key)
		}
		e.Manager, e.Operation, e.APIVersion, e.Subresource = id.Manager, id.Operation, id.APIVersion, id.Subresource
		e.APIVersion = string(vs.APIVersion())
		if vs.Applied() {
			e.Operation = opApply
		}
		e.FieldsType = "FieldsV1"
		raw, err := vs.Set().ToJSON()
		if err != nil {
			return nil, fmt.Errorf("error encoding set: %v", err)
		}
		e.FieldsV1 = raw
		if t, ok := m.times[key]; ok {
			e.Time = t
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		p, q := out[i], out[j]
		if p.Operation != q.Operation {
			return p.Operation < q.Operation
		}
		ps, qs := int64(0), int64(0)
		if p.Time != nil {
			ps = p.Time.Unix()
		}
		if q.Time != nil {
			qs = q.Time.Unix()
		}
		if ps != qs {
			return ps < qs
		}
		if p.Manager != q.Manager {
			return p.Manager < q.Manager
		}
		if p.APIVersion != q.APIVersion {
			return p.APIVersion < q.APIVersion
		}
		return p.Subresource < q.Subresource
	})
	return out, nil
}

// idConverter is the merge.Converter: all versions share one schema, so
// conversion is the identity. If knownVersions is set, other versions behave
// like unregistered versions in kube-apiserver (IsMissingVersionError), which
// makes smd drop managers recorded at those versions.
type idConverter struct {
	known map[string]bool
}

type missingVersionError struct{ version string }

func (e missingVersionError) Error() string {
	return fmt.Sprintf("no corresponding type for version %q", e.version)
}

func (c idConverter) Convert(obj *typed.TypedValue, version fieldpath.APIVersion) (*typed.TypedValue, error) {
	if c.known != nil && !c.known[string(version)] {
		return nil, missingVersionError{string(version)}
	}
	return obj, nil
}

func (c idConverter) IsMissingVersionError(err error) bool {
	_, ok := err.(missingVersionError)
	return ok
}

// fieldManager holds what kube-apiserver fixes per request endpoint.
type fieldManager struct {
	pt          typed.ParseableType
	apiVersion  string // request group/version (kind.GroupVersion())
	kind        string
	subresource string
	updater     *merge.Updater
	now         time.Time
}

// ---- structuredMergeManager ----

// toTyped parses obj with the request's type. allowDuplicates mirrors the
// typed.AllowDuplicates option kube-apiserver (>= 1.27) passes for live
// objects and for the new object of an update (not for apply patches); it is
// a no-op with smd v4.1.
func (f *fieldManager) toTyped(obj map[string]interface{}, what string, allowDuplicates bool) (*typed.TypedValue, error) {
	tv, err := typedFrom(f.pt, obj, allowDuplicates)
	if err != nil {
		return nil, fmt.Errorf("failed to convert %s to smd typed: %v", what, err)
	}
	return tv, nil
}

func (f *fieldManager) structuredUpdate(live, newObj map[string]interface{}, m *managed, manager string) (map[string]interface{}, *managed, error) {
	newT, err := f.toTyped(newObj, "new object", true)
	if err != nil {
		return nil, nil, err
	}
	liveT, err := f.toTyped(live, "live object", true)
	if err != nil {
		return nil, nil, err
	}
	_, mf, err := f.updater.Update(liveT, newT, fieldpath.APIVersion(f.apiVersion), m.fields, manager)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to update ManagedFields: %v", err)
	}
	return newObj, &managed{fields: mf, times: m.times}, nil
}

func (f *fieldManager) structuredApply(live, patch map[string]interface{}, m *managed, manager string, force bool) (map[string]interface{}, *managed, error) {
	if pv, _ := patch["apiVersion"].(string); pv != f.apiVersion {
		return nil, nil, fmt.Errorf("BadRequest: Incorrect version specified in apply patch. Specified patch version: %s, expected: %s", pv, f.apiVersion)
	}
	if md, ok := patch["metadata"].(map[string]interface{}); ok {
		if mfs, ok := md["managedFields"]; ok && mfs != nil {
			return nil, nil, fmt.Errorf("BadRequest: metadata.managedFields must be nil")
		}
	}
	patchT, err := f.toTyped(patch, "patch object", false)
	if err != nil {
		return nil, nil, err
	}
	liveT, err := f.toTyped(live, "live object", true)
	if err != nil {
		return nil, nil, err
	}
	newT, mf, err := f.updater.Apply(liveT, patchT, fieldpath.APIVersion(f.apiVersion), m.fields, manager, force)
	if err != nil {
		return nil, nil, err
	}
	m = &managed{fields: mf, times: m.times}
	if newT == nil {
		return nil, m, nil
	}
	obj, ok := newT.AsValue().Unstructured().(map[string]interface{})
	if !ok {
		return nil, nil, fmt.Errorf("failed to convert new typed object to object")
	}
	return obj, m, nil
}

// ---- stripMetaManager ----

var stripSet = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "clusterName"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
)

func stripFields(m *managed, manager string) {
	vs, ok := m.fields[manager]
	if !ok {
		return
	}
	newSet := vs.Set().Difference(stripSet)
	if newSet.Empty() {
		delete(m.fields, manager)
	} else {
		m.fields[manager] = fieldpath.NewVersionedSet(newSet, vs.APIVersion(), vs.Applied())
	}
}

func (f *fieldManager) stripUpdate(live, newObj map[string]interface{}, m *managed, manager string) (map[string]interface{}, *managed, error) {
	obj, m, err := f.structuredUpdate(live, newObj, m, manager)
	if err != nil {
		return nil, nil, err
	}
	stripFields(m, manager)
	return obj, m, nil
}

func (f *fieldManager) stripApply(live, patch map[string]interface{}, m *managed, manager string, force bool) (map[string]interface{}, *managed, error) {
	obj, m, err := f.structuredApply(live, patch, m, manager, force)
	if err != nil {
		return nil, nil, err
	}
	stripFields(m, manager)
	return obj, m, nil
}

// ---- managedFieldsUpdater ----

func (f *fieldManager) mfuUpdate(live, newObj map[string]interface{}, m *managed, manager string) (map[string]interface{}, *managed, error) {
	self := currentOperationManager
	obj, m, err := f.stripUpdate(live, newObj, m, self)
	if err != nil {
		return obj, m, err
	}
	if vs, ok := m.fields[self]; ok {
		delete(m.fields, self)
		if prev, ok := m.fields[manager]; ok {
			m.fields[manager] = fieldpath.NewVersionedSet(vs.Set().Union(prev.Set()), vs.APIVersion(), vs.Applied())
		} else {
			m.fields[manager] = vs
		}
		now := f.now
		m.times[manager] = &now
	}
	return obj, m, nil
}

func (f *fieldManager) mfuApply(live, patch map[string]interface{}, m *managed, manager string, force bool) (map[string]interface{}, *managed, error) {
	obj, m, err := f.stripApply(live, patch, m, manager, force)
	if err != nil {
		return obj, m, err
	}
	if obj != nil {
		now := f.now
		m.times[manager] = &now
	} else {
		obj = deepCopyMap(live)
		removeManagedFields(obj)
	}
	return obj, m, nil
}

// ---- buildManagerInfoManager ----

func (f *fieldManager) buildManagerInfo(name, operation string) (string, error) {
	if name == "" {
		name = "unknown"
	}
	return buildManagerIdentifier(name, operation, f.apiVersion, f.subresource)
}

func (f *fieldManager) bmiUpdate(live, newObj map[string]interface{}, m *managed, manager string) (map[string]interface{}, *managed, error) {
	key, err := f.buildManagerInfo(manager, opUpdate)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to build manager identifier: %v", err)
	}
	return f.mfuUpdate(live, newObj, m, key)
}

func (f *fieldManager) bmiApply(live, patch map[string]interface{}, m *managed, manager string, force bool) (map[string]interface{}, *managed, error) {
	key, err := f.buildManagerInfo(manager, opApply)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to build manager identifier: %v", err)
	}
	return f.mfuApply(live, patch, m, key, force)
}

// ---- capManagersManager ----

func (f *fieldManager) capUpdate(live, newObj map[string]interface{}, m *managed, manager string) (map[string]interface{}, *managed, error) {
	obj, m, err := f.bmiUpdate(live, newObj, m, manager)
	if err != nil {
		return obj, m, err
	}
	if err := capUpdateManagers(m, defaultMaxUpdateManagers); err != nil {
		return nil, nil, fmt.Errorf("failed to cap update managers: %v", err)
	}
	return obj, m, nil
}

func capUpdateManagers(m *managed, max int) error {
	updaters := []string{}
	for key, vs := range m.fields {
		if !vs.Applied() {
			updaters = append(updaters, key)
		}
	}
	if len(updaters) <= max {
		return nil
	}
	secs := func(k string) int64 {
		if t := m.times[k]; t != nil {
			return t.Unix()
		}
		return 0
	}
	sort.Slice(updaters, func(i, j int) bool {
		if si, sj := secs(updaters[i]), secs(updaters[j]); si != sj {
			return si < sj
		}
		return updaters[i] < updaters[j]
	})
	versionToFirst := map[string]string{}
	for i, length := 0, len(updaters); i < len(updaters) && length > max; i++ {
		key := updaters[i]
		vs := m.fields[key]
		t := m.times[key]
		version := string(vs.APIVersion())
		bucket, err := buildManagerIdentifier(ancientChangesManager, opUpdate, version, "")
		if err != nil {
			return fmt.Errorf("failed to create bucket manager for version %v: %v", version, err)
		}
		if first, ok := versionToFirst[version]; ok {
			if _, ok := m.fields[bucket]; !ok {
				s := m.fields[first]
				delete(m.fields, first)
				m.fields[bucket] = s
			}
			m.fields[bucket] = fieldpath.NewVersionedSet(vs.Set().Union(m.fields[bucket].Set()), vs.APIVersion(), vs.Applied())
			delete(m.fields, key)
			length--
			m.times[bucket] = t
		} else {
			versionToFirst[version] = key
		}
	}
	return nil
}

// ---- skipNonAppliedManager (probability 1: track from creation) ----

func (f *fieldManager) skipUpdate(live, newObj map[string]interface{}, m *managed, manager string) (map[string]interface{}, *managed, error) {
	if len(m.fields) == 0 {
		if uid := nestedString(live, "metadata", "uid"); uid != "" {
			// Existing object without managedFields: updates don't start tracking.
			return newObj, m, nil
		}
	}
	return f.capUpdate(live, newObj, m, manager)
}

func (f *fieldManager) skipApply(live, patch map[string]interface{}, m *managed, manager string, force bool) (map[string]interface{}, *managed, error) {
	if len(m.fields) == 0 {
		emptyObj := map[string]interface{}{}
		if av, ok := patch["apiVersion"]; ok {
			emptyObj["apiVersion"] = av
		}
		if k, ok := patch["kind"]; ok {
			emptyObj["kind"] = k
		}
		var err error
		live, m, err = f.capUpdate(emptyObj, live, m, beforeFirstApplyManager)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to create manager for existing fields: %v", err)
		}
	}
	return f.bmiApply(live, patch, m, manager, force)
}

// ---- lastAppliedManager ----

func (f *fieldManager) lamApply(live, patch map[string]interface{}, m *managed, manager string, force bool) (map[string]interface{}, *managed, error) {
	obj, newM, err := f.skipApply(live, patch, m.copy(), manager, force)
	if manager != "kubectl" || err == nil {
		return obj, newM, err
	}
	conflicts, ok := err.(merge.Conflicts)
	if !ok {
		return obj, newM, err
	}
	conflictSet := conflicts.ToSet()
	allowed, aerr := f.allowedConflictsFromLastApplied(live)
	if aerr != nil {
		return obj, newM, err
	}
	if !conflictSet.Difference(allowed).Empty() {
		remaining := merge.Conflicts{}
		for _, c := range conflicts {
			if !allowed.Has(c.Path) {
				remaining = append(remaining, c)
			}
		}
		return obj, newM, remaining
	}
	return f.skipApply(live, patch, m.copy(), manager, true)
}

func (f *fieldManager) allowedConflictsFromLastApplied(live map[string]interface{}) (*fieldpath.Set, error) {
	annotations := nestedStringMap(live, "metadata", "annotations")
	lastApplied, ok := annotations[lastAppliedAnnotation]
	if !ok || lastApplied == "" {
		return nil, fmt.Errorf("no last applied annotation")
	}
	liveT, err := f.toTyped(live, "live object", false)
	if err != nil {
		return nil, err
	}
	lastObj, err := decodeJSONObject([]byte(lastApplied))
	if err != nil {
		return nil, fmt.Errorf("failed to decode last applied obj: %v", err)
	}
	if av, _ := lastObj["apiVersion"].(string); av != f.apiVersion {
		return nil, fmt.Errorf("expected version of last applied to match live object")
	}
	lastT, err := f.toTyped(lastObj, "last applied", false)
	if err != nil {
		return nil, err
	}
	set, err := lastT.ToFieldSet()
	if err != nil {
		return nil, err
	}
	cmp, err := lastT.Compare(liveT)
	if err != nil {
		return nil, err
	}
	return set.Difference(cmp.Modified).Difference(cmp.Added).Difference(cmp.Removed), nil
}

// ---- lastAppliedUpdater ----

func (f *fieldManager) lauApply(live, patch map[string]interface{}, m *managed, manager string, force bool) (map[string]interface{}, *managed, error) {
	obj, m, err := f.lamApply(live, patch, m, manager, force)
	if err != nil {
		return obj, m, err
	}
	if manager == "kubectl" && nestedStringMap(obj, "metadata", "annotations")[lastAppliedAnnotation] != "" {
		value, err := buildLastApplied(patch)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to build last-applied annotation: %v", err)
		}
		setLastApplied(obj, value)
	}
	return obj, m, nil
}

func buildLastApplied(patch map[string]interface{}) (string, error) {
	obj := deepCopyMap(patch)
	if ann, ok := getNestedMap(obj, "metadata", "annotations"); ok && ann != nil {
		delete(ann, lastAppliedAnnotation)
	}
	var buf bytes.Buffer
	// unstructured.UnstructuredJSONScheme encodes with json.NewEncoder(w).Encode.
	if err := json.NewEncoder(&buf).Encode(obj); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func setLastApplied(obj map[string]interface{}, value string) {
	md, _ := obj["metadata"].(map[string]interface{})
	if md == nil {
		md = map[string]interface{}{}
		obj["metadata"] = md
	}
	ann, _ := md["annotations"].(map[string]interface{})
	if ann == nil {
		ann = map[string]interface{}{}
	}
	ann[lastAppliedAnnotation] = value
	total := 0
	for k, v := range ann {
		s, _ := v.(string)
		total += len(k) + len(s)
	}
	if total > totalAnnotationSizeLimit {
		delete(ann, lastAppliedAnnotation)
	}
	md["annotations"] = ann
}

// ---- versionCheckManager + FieldManager ----

// Apply mirrors FieldManager.Apply. live must be non-nil (for a create, the
// caller passes {"apiVersion","kind"} like objectCreater.New for unstructured).
func (f *fieldManager) Apply(live, patch map[string]interface{}, liveEntries []mfEntry, manager string, force bool) (map[string]interface{}, []mfEntry, error) {
	m, err := decodeManagedFields(liveEntries)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to decode managed fields: %v", err)
	}
	pav, _ := patch["apiVersion"].(string)
	pk, _ := patch["kind"].(string)
	if pav != f.apiVersion || pk != f.kind {
		g, v := splitAPIVersion(pav)
		return nil, nil, fmt.Errorf("BadRequest: invalid object type: %s/%s, Kind=%s", g, v, pk)
	}
	obj, m, err := f.lauApply(live, patch, m, manager, force)
	if err != nil {
		return nil, nil, err
	}
	entries, err := encodeManagedFields(m)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to encode managed fields: %v", err)
	}
	return obj, entries, nil
}

// Update mirrors FieldManager.Update. newEntries is newObj's
// metadata.managedFields (nil when absent, non-nil empty for "[]").
func (f *fieldManager) Update(live, newObj map[string]interface{}, liveEntries, newEntries []mfEntry, newHasReset bool, manager string) (map[string]interface{}, []mfEntry, error) {
	var m *managed
	if f.subresource != "" {
		m = decodeOrEmpty(liveEntries)
	} else if newHasReset {
		m = newEmptyManaged()
	} else {
		dm, err := decodeManagedFields(newEntries)
		if err != nil || len(dm.fields) == 0 {
			m = decodeOrEmpty(liveEntries)
		} else {
			m = dm
		}
	}
	removeManagedFields(newObj)
	obj, m, err := f.skipUpdate(live, newObj, m, manager)
	if err != nil {
		return nil, nil, err
	}
	entries, err := encodeManagedFields(m)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to encode managed fields: %v", err)
	}
	return obj, entries, nil
}

func decodeOrEmpty(entries []mfEntry) *managed {
	m, err := decodeManagedFields(entries)
	if err != nil {
		return newEmptyManaged()
	}
	return m
}
