// The reference oracle (../shared/oracle's program) built from Go modules at the versions
// Kubernetes 1.36.5 pins: structured-merge-diff v6 and kube-openapi.
module fieldguard.dev/oracle

go 1.26.0

require (
	github.com/google/gnostic-models v0.7.0
	gopkg.in/yaml.v2 v2.4.0
	k8s.io/kube-openapi v0.0.0-20260317180543-43fb72c5454a
	sigs.k8s.io/structured-merge-diff/v6 v6.3.3
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/go-openapi/jsonpointer v0.21.0 // indirect
	github.com/go-openapi/jsonreference v0.20.1 // indirect
	github.com/go-openapi/swag v0.23.0 // indirect
	github.com/josharian/intern v1.0.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/mailru/easyjson v0.7.7 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	go.yaml.in/yaml/v3 v3.0.3 // indirect
	google.golang.org/protobuf v1.35.1 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
