// Added by tests/data/cel/gen/generate.sh to a scratch copy of apiextensions-apiserver's
// pkg/apiserver/schema/cel (package cel): every call of (*Validator).Validate in the copied
// validation_test.go is rewritten to dumpValidate, which records the subtest's name and the
// call's inputs (schema, object, old object, budget) as one JSON line in $CEL_DUMP, then runs
// the real call. Not part of fieldguard's build.
package cel

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	dumpMu    sync.Mutex
	dumpCalls = map[string]int{}
)

func dumpValidate(t testing.TB, v *Validator, ctx context.Context, p *field.Path, s *schema.Structural,
	obj, oldObj interface{}, budget int64, opts ...Option) (field.ErrorList, int64) {
	if v == nil {
		return nil, budget
	}
	errs, rem := v.Validate(ctx, p, s, obj, oldObj, budget, opts...)
	texts := []string{}
	for _, e := range errs {
		texts = append(texts, e.Error())
	}
	dumpMu.Lock()
	defer dumpMu.Unlock()
	dumpCalls[t.Name()]++
	rec := map[string]interface{}{
		"test":            t.Name(),
		"call":            dumpCalls[t.Name()],
		"schema":          s.ToKubeOpenAPI(),
		"obj":             obj,
		"oldObj":          oldObj,
		"budget":          budget,
		"isRoot":          v.isResourceRoot,
		"ratcheting":      len(opts) > 0,
		"upstream_errors": texts,
	}
	line, err := json.Marshal(rec)
	if err != nil {
		line, _ = json.Marshal(map[string]interface{}{"test": t.Name(), "call": dumpCalls[t.Name()], "unmarshalable": err.Error()})
	}
	f, err := os.OpenFile(os.Getenv("CEL_DUMP"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\n", line)
	return errs, rem
}
