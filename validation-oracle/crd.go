package main

// The CustomResourceDefinition side: the CRD's own validation (as a CRD create is validated by the
// apiextensions-apiserver) and the per-version serving information (validators, structural schemas,
// CEL) built exactly as k8s.io/apiextensions-apiserver/pkg/apiserver/customresource_handler.go
// (*crdHandler).getOrCreateServingInfoFor builds its crdInfo. Cached per byte-equal CRD JSON.

import (
	"context"
	"errors"
	"fmt"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsinstall "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// crdScheme mirrors k8s.io/apiextensions-apiserver/pkg/apiserver/apiserver.go's Scheme and Codecs
// (install.Install + the unversioned meta types), which the CRD REST endpoint decodes with.
var (
	crdScheme = runtime.NewScheme()
	crdCodecs = serializer.NewCodecFactory(crdScheme)
	crdGVK    = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")
)

func init() {
	apiextensionsinstall.Install(crdScheme)
	metav1.AddToGroupVersion(crdScheme, schema.GroupVersion{Group: "", Version: "v1"})
}

// crdInfo is what the oracle keeps per CRD: the CRD's own verdict and, when it is valid, the
// serving information for each served or stored version.
type crdInfo struct {
	crdErrors   []string
	crdMessage  string
	crdWarnings []string
	crd         *apiextensionsv1.CustomResourceDefinition
	storage     string
	versions    map[string]*versionInfo
}

// versionInfo is the part of upstream's crdInfo the write path of one version needs.
type versionInfo struct {
	kind                  schema.GroupVersionKind
	resource              schema.GroupVersionResource
	namespaced            bool
	served                bool
	preserveUnknownFields bool
	structuralSchemas     map[string]*structuralschema.Structural // by version, shared by all versions
	strategy              rest.RESTCreateUpdateStrategy
	requestDecoder        runtime.Decoder // the StrictSerializer: fieldValidation=Warn is the default
	storageDecoder        runtime.Decoder
}

// loadCRD decodes, defaults and validates the CRD as a CRD create does, then builds the serving
// information. A CRD the server would refuse has crdErrors and no versions.
func loadCRD(raw []byte) (*crdInfo, error) {
	info := &crdInfo{crdErrors: []string{}}

	// The CRD REST endpoint's decode (endpoints/handlers/create.go createHandler): the strict JSON
	// serializer (fieldValidation=Warn) decoding into the internal hub version, which defaults the
	// v1 object (apis/apiextensions/v1/defaults.go) and converts it to internal.
	jsonInfo, ok := runtime.SerializerInfoForMediaType(crdCodecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		return nil, errors.New("no JSON serializer for CRDs")
	}
	decoder := crdCodecs.DecoderToVersion(jsonInfo.StrictSerializer, apiextensionsinternal.SchemeGroupVersion)
	obj, _, err := decoder.Decode(raw, &crdGVK, &apiextensionsinternal.CustomResourceDefinition{})
	var warnings []string
	if err != nil {
		strictErr, isStrict := runtime.AsStrictDecodingError(err)
		if !isStrict || obj == nil {
			return nil, fmt.Errorf("decoding the CRD: %v", err)
		}
		for _, e := range strictErr.Errors() {
			warnings = append(warnings, e.Error())
		}
	}
	internalCRD, ok := obj.(*apiextensionsinternal.CustomResourceDefinition)
	if !ok {
		return nil, fmt.Errorf("decoding the CRD: got %T", obj)
	}

	// registry/generic/registry/store.go (*Store).Create, then rest.BeforeCreate with the CRD strategy
	// (registry/customresourcedefinition/strategy.go: PrepareForCreate resets status and drops disabled
	// fields, Validate is validation.ValidateCustomResourceDefinition).
	rest.FillObjectMetaSystemFields(internalCRD)
	strategy := &recordingStrategy{RESTCreateUpdateStrategy: createOnlyStrategy{customresourcedefinition.NewStrategy(crdScheme)}}
	ctx := genericapirequest.WithNamespace(context.Background(), metav1.NamespaceNone)
	crdWarnings, err := withWarnings(ctx, func(ctx context.Context) error {
		return rest.BeforeCreate(strategy, ctx, internalCRD)
	})
	info.crdWarnings = append(warnings, crdWarnings...)
	if err != nil {
		info.crdMessage = err.Error()
		info.crdErrors = errorStrings(strategy.errs, err)
		return info, nil
	}

	// What the CR handler serves from: the stored v1 CRD (converted back from internal), with the
	// accepted names the naming controller (pkg/controller/status/naming_controller.go) sets when
	// nothing conflicts: the requested names.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := crdScheme.Convert(internalCRD, crd, nil); err != nil {
		return nil, fmt.Errorf("converting the CRD to v1: %v", err)
	}
	crd.Status.AcceptedNames = crd.Spec.Names
	info.crd = crd
	if err := info.buildServingInfo(); err != nil {
		return nil, err
	}
	return info, nil
}

// buildServingInfo mirrors (*crdHandler).getOrCreateServingInfoFor
// (pkg/apiserver/customresource_handler.go), keeping what the create/update path uses.
func (info *crdInfo) buildServingInfo() error {
	crd := info.crd
	storageVersion, err := apiextensionshelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return err
	}
	info.storage = storageVersion
	info.versions = map[string]*versionInfo{}

	// structuralSchemas: GetSchemaForVersion, Convert_v1_CustomResourceValidation_To_apiextensions_...,
	// structuralschema.NewStructural, DeepCopy and structuraldefaulting.PruneDefaults.
	structuralSchemas := map[string]*structuralschema.Structural{}
	for _, v := range crd.Spec.Versions {
		val, err := apiextensionshelpers.GetSchemaForVersion(crd, v.Name)
		if err != nil {
			return fmt.Errorf("the server could not properly serve the CR schema: %v", err)
		}
		if val == nil {
			continue
		}
		internalValidation := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internalValidation, nil); err != nil {
			return fmt.Errorf("failed converting CRD validation to internal version: %v", err)
		}
		s, err := structuralschema.NewStructural(internalValidation.OpenAPIV3Schema)
		if !crd.Spec.PreserveUnknownFields && err != nil {
			return fmt.Errorf("failed to convert schema to structural: %v", err)
		}
		if !crd.Spec.PreserveUnknownFields {
			s = s.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(s); err != nil {
				return fmt.Errorf("failed to prune defaults: %v", err)
			}
		}
		structuralSchemas[v.Name] = s
	}

	for _, v := range crd.Spec.Versions {
		// Do not construct storage if version is neither served nor stored
		if !v.Storage && !v.Served {
			continue
		}
		kind := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Status.AcceptedNames.Kind}
		subresources, err := apiextensionshelpers.GetSubresourcesForVersion(crd, v.Name)
		if err != nil {
			return fmt.Errorf("the server could not properly serve the CR subresources: %v", err)
		}

		// parameterScheme, typer, creator as upstream.
		parameterScheme := runtime.NewScheme()
		parameterScheme.AddUnversionedTypes(schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name},
			&metav1.ListOptions{},
			&metav1.GetOptions{},
			&metav1.DeleteOptions{},
		)
		typer := unstructuredObjectTyper{Delegate: parameterScheme, UnstructuredTyper: crdserverscheme.NewUnstructuredObjectTyper()}
		creator := unstructuredCreator{}

		// The schema validator: apiservervalidation.NewSchemaValidator on the internal schema.
		validationSchema, err := apiextensionshelpers.GetSchemaForVersion(crd, v.Name)
		if err != nil {
			return fmt.Errorf("the server could not properly serve the CR schema: %v", err)
		}
		var internalSchemaProps *apiextensionsinternal.JSONSchemaProps
		var internalValidationSchema *apiextensionsinternal.CustomResourceValidation
		if validationSchema != nil {
			internalValidationSchema = &apiextensionsinternal.CustomResourceValidation{}
			if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(validationSchema, internalValidationSchema, nil); err != nil {
				return fmt.Errorf("failed to convert CRD validation to internal version: %v", err)
			}
			internalSchemaProps = internalValidationSchema.OpenAPIV3Schema
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(internalSchemaProps)
		if err != nil {
			return err
		}

		// The status subresource: its internal spec and a validator of the status schema alone.
		var statusSpec *apiextensionsinternal.CustomResourceSubresourceStatus
		var statusValidator apiservervalidation.SchemaValidator
		if subresources != nil && subresources.Status != nil {
			statusSpec = &apiextensionsinternal.CustomResourceSubresourceStatus{}
			if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceStatus_To_apiextensions_CustomResourceSubresourceStatus(subresources.Status, statusSpec, nil); err != nil {
				return fmt.Errorf("failed converting CRD status subresource to internal version: %v", err)
			}
			if internalValidationSchema != nil && internalValidationSchema.OpenAPIV3Schema != nil && internalValidationSchema.OpenAPIV3Schema.Properties != nil {
				if statusSchema, ok := internalValidationSchema.OpenAPIV3Schema.Properties["status"]; ok {
					statusValidator, _, err = apiservervalidation.NewSchemaValidator(&statusSchema)
					if err != nil {
						return err
					}
				}
			}
		}

		// The scale subresource.
		var scaleSpec *apiextensionsinternal.CustomResourceSubresourceScale
		if subresources != nil && subresources.Scale != nil {
			scaleSpec = &apiextensionsinternal.CustomResourceSubresourceScale{}
			if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(subresources.Scale, scaleSpec, nil); err != nil {
				return fmt.Errorf("failed converting CRD status subresource to internal version: %v", err)
			}
		}

		// customresource.NewStrategy: it compiles the x-kubernetes-validations of the structural
		// schema itself (cel.NewValidator(structuralSchema, true, celconfig.PerCallLimit)) and its
		// Validate/ValidateUpdate run them with celconfig.RuntimeCELCostBudget.
		strategy := customresource.NewStrategy(
			typer,
			crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			kind,
			validator,
			statusValidator,
			structuralSchemas[v.Name],
			statusSpec,
			scaleSpec,
			v.SelectableFields,
		)

		info.versions[v.Name] = &versionInfo{
			kind:                  kind,
			resource:              schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Status.AcceptedNames.Plural},
			namespaced:            crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			served:                v.Served,
			preserveUnknownFields: crd.Spec.PreserveUnknownFields,
			structuralSchemas:     structuralSchemas,
			strategy:              strategy,
			// unstructuredNegotiatedSerializer's application/json StrictSerializer (the request
			// decoder under the default fieldValidation=Warn) and its non-strict Serializer
			// (standing in for the storage codec).
			requestDecoder: json.NewSerializerWithOptions(json.DefaultMetaFactory, creator, typer, json.SerializerOptions{Strict: true}),
			storageDecoder: json.NewSerializerWithOptions(json.DefaultMetaFactory, creator, typer, json.SerializerOptions{}),
		}
	}
	return nil
}

// unstructuredObjectTyper mirrors pkg/apiserver's UnstructuredObjectTyper (newUnstructuredObjectTyper).
type unstructuredObjectTyper struct {
	Delegate          runtime.ObjectTyper
	UnstructuredTyper runtime.ObjectTyper
}

func (t unstructuredObjectTyper) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	// Delegate for things other than Unstructured.
	if _, ok := obj.(runtime.Unstructured); !ok {
		return t.Delegate.ObjectKinds(obj)
	}
	return t.UnstructuredTyper.ObjectKinds(obj)
}

func (t unstructuredObjectTyper) Recognizes(gvk schema.GroupVersionKind) bool {
	return t.Delegate.Recognizes(gvk) || t.UnstructuredTyper.Recognizes(gvk)
}

// unstructuredCreator mirrors pkg/apiserver's unstructuredCreator.
type unstructuredCreator struct{}

func (c unstructuredCreator) New(kind schema.GroupVersionKind) (runtime.Object, error) {
	ret := &unstructured.Unstructured{}
	ret.SetGroupVersionKind(kind)
	return ret, nil
}

// createOnlyStrategy lets the CRD's create strategy stand where a create/update strategy is held.
type createOnlyStrategy struct {
	rest.RESTCreateStrategy
}

func (createOnlyStrategy) AllowCreateOnUpdate() bool                                        { return false }
func (createOnlyStrategy) AllowUnconditionalUpdate() bool                                   { return false }
func (createOnlyStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (createOnlyStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}
func (createOnlyStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// recordingStrategy passes every call to the real strategy and keeps the field errors its
// Validate/ValidateUpdate returned, so that the oracle can report them one by one (the 422 status
// only keeps their rendered text). rest.BeforeUpdate validates common metadata fields before the
// strategy (validateCommonFields); recordingStrategy recomputes those with the same exported
// functions at the moment the strategy is called, on the same objects.
type recordingStrategy struct {
	rest.RESTCreateUpdateStrategy
	errs field.ErrorList
}

func (s *recordingStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	s.errs = s.RESTCreateUpdateStrategy.Validate(ctx, obj)
	return s.errs
}

func (s *recordingStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	s.errs = append(commonFieldErrors(obj, old, s.NamespaceScoped()), s.RESTCreateUpdateStrategy.ValidateUpdate(ctx, obj, old)...)
	return s.errs
}

// errorStrings renders field errors as err.Error(); when the server's error came from somewhere
// other than the strategy (rest.BeforeCreate's second object-meta check), from its causes.
func errorStrings(errs field.ErrorList, err error) []string {
	out := []string{}
	if len(errs) > 0 {
		for _, e := range errs {
			out = append(out, e.Error())
		}
		return out
	}
	var statusErr *apierrors.StatusError
	if errors.As(err, &statusErr) && statusErr.ErrStatus.Details != nil {
		for _, c := range statusErr.ErrStatus.Details.Causes {
			out = append(out, fmt.Sprintf("%s: %s", c.Field, c.Message))
		}
	}
	if len(out) == 0 {
		out = append(out, err.Error())
	}
	return out
}
