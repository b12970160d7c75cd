package main

// The custom resource side: the write path of a CR create (POST) and update (PUT) through the
// apiserver, from the request body to the strategy's verdict.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/validate/content"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
)

// result is the verdict on one CR write.
type result struct {
	code     int
	errs     field.ErrorList
	message  string
	warnings []string
	object   map[string]interface{}
}

// coercer mirrors pkg/apiserver/customresource_handler.go's unstructuredSchemaCoercer.apply:
// ObjectMeta extraction, pruning with the structural schema, removal of non-nullable nulls
// without defaults, coercion of embedded ObjectMeta, and restoring apiVersion/kind/metadata.
type coercer struct {
	dropInvalidMetadata     bool
	repairGeneration        bool
	structuralSchemas       map[string]*structuralschema.Structural
	structuralSchemaGK      schema.GroupKind
	preserveUnknownFields   bool
	returnUnknownFieldPaths bool
}

func (v *coercer) apply(u *unstructured.Unstructured) (unknownFieldPaths []string, err error) {
	// save implicit meta fields that don't have to be specified in the validation spec
	kind, foundKind, err := unstructured.NestedString(u.UnstructuredContent(), "kind")
	if err != nil {
		return nil, err
	}
	apiVersion, foundApiVersion, err := unstructured.NestedString(u.UnstructuredContent(), "apiVersion")
	if err != nil {
		return nil, err
	}
	objectMeta, foundObjectMeta, metaUnknownFields, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields:     v.dropInvalidMetadata,
		ReturnUnknownFieldPaths: v.returnUnknownFieldPaths,
	})
	if err != nil {
		return nil, err
	}
	unknownFieldPaths = append(unknownFieldPaths, metaUnknownFields...)

	// compare group and kind because also other object like DeleteCollection options pass through here
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}

	if gv.Group == v.structuralSchemaGK.Group && kind == v.structuralSchemaGK.Kind {
		if !v.preserveUnknownFields {
			pruneOpts := structuralschema.UnknownFieldPathOptions{}
			if v.returnUnknownFieldPaths {
				pruneOpts.TrackUnknownFieldPaths = true
			}
			unknownFieldPaths = append(unknownFieldPaths, structuralpruning.PruneWithOptions(u.Object, v.structuralSchemas[gv.Version], true, pruneOpts)...)
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, v.structuralSchemas[gv.Version])
		}

		err, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, v.structuralSchemas[gv.Version], false, schemaobjectmeta.CoerceOptions{
			DropInvalidFields:       v.dropInvalidMetadata,
			ReturnUnknownFieldPaths: v.returnUnknownFieldPaths,
		})
		if err != nil {
			return nil, err
		}
		unknownFieldPaths = append(unknownFieldPaths, paths...)

		// fixup missing generation in very old CRs
		if v.repairGeneration && objectMeta.Generation == 0 {
			objectMeta.Generation = 1
		}
	}

	// restore meta fields, starting clean
	if foundKind {
		u.SetKind(kind)
	}
	if foundApiVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundObjectMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknownFieldPaths, nil
}

// defaultObject mirrors pkg/apiserver's unstructuredDefaulter.Default: only the CRD's own group
// and kind are defaulted, with the structural schema of the object's version.
func (vi *versionInfo) defaultObject(u *unstructured.Unstructured) {
	if u.GetObjectKind().GroupVersionKind().GroupKind() != vi.kind.GroupKind() {
		return
	}
	structuraldefaulting.Default(u.UnstructuredContent(), vi.structuralSchemas[u.GetObjectKind().GroupVersionKind().Version])
}

// decodeRequest mirrors what the create/update handlers' decoder does with the request body:
// unstructuredNegotiatedSerializer.DecoderToVersion(StrictSerializer, HubGroupVersion), i.e. the
// versioning codec (apimachinery runtime/serializer/versioning codec.Decode) around
// schemaCoercingDecoder around the strict JSON serializer, then the handler's treatment of strict
// decoding errors under fieldValidation=Warn (handlers/rest.go addStrictDecodingWarnings).
func (vi *versionInfo) decodeRequest(body []byte, warn func(string)) (*unstructured.Unstructured, *schema.GroupVersionKind, error) {
	defaultGVK := vi.kind
	var strictErrs []error
	// schemaCoercingDecoder.Decode
	obj, gvk, err := vi.requestDecoder.Decode(body, &defaultGVK, &unstructured.Unstructured{})
	if err != nil {
		strictErr, ok := runtime.AsStrictDecodingError(err)
		if !ok || obj == nil {
			return nil, gvk, err
		}
		strictErrs = strictErr.Errors()
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, gvk, fmt.Errorf("decoded %T", obj)
	}
	c := coercer{
		structuralSchemas:       vi.structuralSchemas,
		structuralSchemaGK:      vi.kind.GroupKind(),
		preserveUnknownFields:   vi.preserveUnknownFields,
		returnUnknownFieldPaths: true, // the strict serializer
	}
	unknownFields, err := c.apply(u)
	if err != nil {
		return nil, gvk, err
	}
	for _, f := range unknownFields {
		strictErrs = append(strictErrs, fmt.Errorf(`unknown field "%s"`, f))
	}
	// versioning codec: defaulting, then conversion into the hub version (unstructured to
	// unstructured is a straight copy of the content).
	vi.defaultObject(u)
	// handler: strict decoding errors become warnings under fieldValidation=Warn.
	for _, e := range strictErrs {
		warn(e.Error())
	}
	return u, gvk, nil
}

// decodeStored mirrors reading the existing object from storage through
// crdConversionRESTOptionsGetter's codec: schemaCoercingDecoder with dropInvalidMetadata and
// repairGeneration, defaulting, then schemaCoercingConverter (apply once more, not dropping).
func (vi *versionInfo) decodeStored(body []byte) (*unstructured.Unstructured, error) {
	obj, _, err := vi.storageDecoder.Decode(body, nil, &unstructured.Unstructured{})
	if err != nil {
		return nil, err
	}
	u := obj.(*unstructured.Unstructured)
	c := coercer{
		dropInvalidMetadata:   true,
		repairGeneration:      true,
		structuralSchemas:     vi.structuralSchemas,
		structuralSchemaGK:    vi.kind.GroupKind(),
		preserveUnknownFields: vi.preserveUnknownFields,
	}
	if _, err := c.apply(u); err != nil {
		return nil, err
	}
	vi.defaultObject(u)
	c = coercer{
		structuralSchemas:     vi.structuralSchemas,
		structuralSchemaGK:    vi.kind.GroupKind(),
		preserveUnknownFields: vi.preserveUnknownFields,
	}
	if _, err := c.apply(u); err != nil {
		return nil, err
	}
	return u, nil
}

// transformDecodeError mirrors endpoints/handlers/rest.go transformDecodeError for an
// unstructured target.
func (vi *versionInfo) transformDecodeError(baseErr error, gvk *schema.GroupVersionKind, body []byte) error {
	if gvk != nil && len(gvk.Kind) > 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, vi.kind.Kind, baseErr))
	}
	summary := string(body)
	if len(summary) > 30 {
		summary = summary[:30] + " ..."
	}
	return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", vi.kind.Kind, baseErr, summary))
}

// run judges one write: old == nil is a create (POST), otherwise an update (PUT) of old.
func (vi *versionInfo) run(newRaw, oldRaw []byte) (*result, error) {
	res := &result{}
	// Generated names (metadata.generateName) come from k8s.io/apimachinery/pkg/util/rand: seed it
	// so that the oracle's answers are reproducible.
	utilrand.Seed(1)
	warnings, err := withWarnings(context.Background(), func(ctx context.Context) error {
		if oldRaw == nil {
			return vi.create(ctx, newRaw, res)
		}
		return vi.update(ctx, newRaw, oldRaw, res)
	})
	res.warnings = warnings
	if ie, ok := err.(inputError); ok {
		return nil, ie
	}
	if err != nil {
		res.message = err.Error()
		res.code = http.StatusInternalServerError
		if status, ok := err.(apierrors.APIStatus); ok {
			res.code = int(status.Status().Code)
		}
		if len(res.errs) == 0 && res.code == http.StatusUnprocessableEntity {
			res.errs = causesAsErrors(err)
		}
		if res.code != http.StatusUnprocessableEntity {
			res.errs = nil
		}
	}
	return res, nil
}

// inputError is a case the oracle cannot judge (the stored object given as old is not an object of
// the CRD's kind).
type inputError struct{ error }

// create follows endpoints/handlers/create.go createHandler, registry/generic/registry/store.go
// (*Store).Create and rest.BeforeCreate.
func (vi *versionInfo) create(ctx context.Context, body []byte, res *result) error {
	warn := func(w string) { addWarning(ctx, w) }
	obj, gvk, err := vi.decodeRequest(body, warn)
	if err != nil {
		return vi.transformDecodeError(err, gvk, body)
	}
	if objGV := gvk.GroupVersion(); objGV != vi.kind.GroupVersion() {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%v)", objGV.String(), vi.kind.GroupVersion().String()))
	}
	res.object = obj.Object
	// The request namespace: the one a client puts in the URL (the object's, else "default").
	namespace := ""
	if vi.namespaced {
		namespace = obj.GetNamespace()
		if namespace == "" {
			namespace = metav1.NamespaceDefault
		}
	}
	ctx = genericapirequest.WithNamespace(ctx, namespace)
	rest.WipeObjectMetaSystemFields(obj)
	if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForScope(namespace, vi.namespaced), obj); err != nil {
		return err
	}
	// (*Store).Create: system fields and generated name, then rest.BeforeCreate.
	rest.FillObjectMetaSystemFields(obj)
	if len(obj.GetGenerateName()) > 0 && len(obj.GetName()) == 0 {
		obj.SetName(vi.strategy.GenerateName(obj.GetGenerateName()))
	}
	strategy := &recordingStrategy{RESTCreateUpdateStrategy: vi.strategy}
	err = rest.BeforeCreate(strategy, ctx, obj)
	res.errs = strategy.errs
	// The server assigns uid and creationTimestamp: not part of the oracle's answer.
	unstructured.RemoveNestedField(obj.Object, "metadata", "uid")
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	if err == nil {
		res.code = http.StatusCreated
	}
	return err
}

// update follows endpoints/handlers/update.go UpdateResource, (*Store).Update and
// rest.BeforeUpdate; the existing object is old, read as from storage.
func (vi *versionInfo) update(ctx context.Context, body, oldBody []byte, res *result) error {
	old, err := vi.decodeStored(oldBody)
	if err != nil {
		return inputError{fmt.Errorf("old: not a storable %s: %v", vi.kind.Kind, err)}
	}
	warn := func(w string) { addWarning(ctx, w) }
	obj, gvk, err := vi.decodeRequest(body, warn)
	if err != nil {
		return vi.transformDecodeError(err, gvk, body)
	}
	if objGV := gvk.GroupVersion(); objGV != vi.kind.GroupVersion() {
		return apierrors.NewBadRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", objGV, vi.kind.GroupVersion()))
	}
	res.object = obj.Object
	// The URL names the existing object, in its namespace (a stored namespaced object always has
	// one: an empty one is taken to be the request's, the object's or "default"; a stored
	// cluster-scoped object has none).
	name, namespace := old.GetName(), ""
	if vi.namespaced {
		namespace = old.GetNamespace()
		if namespace == "" {
			namespace = obj.GetNamespace()
		}
		if namespace == "" {
			namespace = metav1.NamespaceDefault
		}
	}
	old.SetNamespace(namespace)
	ctx = genericapirequest.WithNamespace(ctx, namespace)
	if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForScope(namespace, vi.namespaced), obj); err != nil {
		return err
	}
	// handlers/rest.go checkName
	if obj.GetName() != name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", obj.GetName(), name))
	}
	if len(namespace) > 0 && len(obj.GetNamespace()) > 0 && obj.GetNamespace() != namespace {
		return apierrors.NewBadRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", obj.GetNamespace(), namespace))
	}
	// (*Store).Update's optimistic concurrency. A stored object always has a resourceVersion: an
	// empty one is taken to be "1". The oracle models a conditional update: an empty
	// resourceVersion in the new object is taken to be the stored one (a real PUT without one is
	// refused with "metadata.resourceVersion: Invalid value: 0x0: must be specified for an
	// update"); a different one is the server's 409 Conflict.
	if old.GetResourceVersion() == "" {
		old.SetResourceVersion("1")
	}
	if obj.GetResourceVersion() == "" {
		obj.SetResourceVersion(old.GetResourceVersion())
	}
	versioner := storage.APIObjectVersioner{}
	existingResourceVersion, err := versioner.ObjectResourceVersion(old)
	if err != nil {
		return inputError{fmt.Errorf("old: %v", err)}
	}
	newResourceVersion, err := versioner.ObjectResourceVersion(obj)
	if err != nil {
		return err
	}
	if newResourceVersion != existingResourceVersion {
		return apierrors.NewConflict(vi.resource.GroupResource(), name, errors.New(genericregistry.OptimisticLockErrorMsg))
	}
	// (*Store).Update: rest.DefaultUpdatedObjectInfo hands the request object to rest.BeforeUpdate
	// with the existing object.
	strategy := &recordingStrategy{RESTCreateUpdateStrategy: vi.strategy}
	err = rest.BeforeUpdate(strategy, ctx, obj, old)
	res.errs = strategy.errs
	if err == nil {
		res.code = http.StatusOK
	}
	return err
}

// commonFieldErrors mirrors registry/rest/update.go validateCommonFields (with create.go's
// validatePathSegment).
func commonFieldErrors(obj, old runtime.Object, namespaceScoped bool) field.ErrorList {
	objectMeta, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	oldObjectMeta, err := meta.Accessor(old)
	if err != nil {
		return nil
	}
	validatePathSegment := func(name string, prefix bool) []string {
		if prefix {
			return content.IsPathSegmentPrefix(name)
		}
		return content.IsPathSegmentName(name)
	}
	allErrs := field.ErrorList{}
	allErrs = append(allErrs, genericvalidation.ValidateObjectMetaAccessor(objectMeta, namespaceScoped, validatePathSegment, field.NewPath("metadata"))...)
	allErrs = append(allErrs, genericvalidation.ValidateObjectMetaAccessorUpdate(objectMeta, oldObjectMeta, field.NewPath("metadata"))...)
	return allErrs
}

// causesAsErrors rebuilds field errors from a 422's causes when they did not come from the
// strategy (rest.BeforeCreate's second object-meta check); detail and bad value are not known.
func causesAsErrors(err error) field.ErrorList {
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		return nil
	}
	var out field.ErrorList
	for _, c := range status.Status().Details.Causes {
		out = append(out, &field.Error{Type: field.ErrorType(c.Type), Field: c.Field, BadValue: field.OmitValueType{}, Detail: c.Message})
	}
	return out
}
