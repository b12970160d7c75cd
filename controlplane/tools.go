//go:build tools

// The commands built from this module (see setup.sh); this file keeps them in go.mod.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
