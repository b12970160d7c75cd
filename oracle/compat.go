

package main

// Helpers for structured-merge-diff v6 (the version Kubernetes 1.36 pins).
// Mirrors how kube-apiserver >= 1.27 calls smd:
// UpdaterBuilder with an IgnoreFilter, typed.AllowDuplicates for live objects.

import (
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/merge"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

const smdFlavor = "structured-merge-diff v6.3.3 (Go module, as Kubernetes 1.36 pins)"

// typeRefOverlay copies a field-level elementRelationship override (e.g.
// PersistentVolumeSpec.claimRef is granular although ObjectReference is atomic).
func typeRefOverlay(dst, src *smdschema.TypeRef) int {
	if dst.ElementRelationship == nil && src.ElementRelationship != nil {
		er := *src.ElementRelationship
		dst.ElementRelationship = &er
		return 1
	}
	return 0
}

func typedFrom(pt typed.ParseableType, obj map[string]interface{}, allowDuplicates bool) (*typed.TypedValue, error) {
	if allowDuplicates {
		return pt.FromUnstructured(obj, typed.AllowDuplicates)
	}
	return pt.FromUnstructured(obj)
}

func newUpdater(conv merge.Converter, ignored map[fieldpath.APIVersion]*fieldpath.Set) *merge.Updater {
	filters := map[fieldpath.APIVersion]fieldpath.Filter{}
	for v, s := range ignored {
		filters[v] = fieldpath.NewExcludeSetFilter(s)
	}
	b := merge.UpdaterBuilder{Converter: conv, IgnoreFilter: filters}
	return b.BuildUpdater()
}
