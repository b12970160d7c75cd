// Added by tests/data/cel/gen/generate.sh to a scratch copy of apiserver's pkg/cel/library
// tests (package library_test): the copied helpers testQuantity, testIP, testCIDR and
// testSemver first call dumpLibrary, which records the subtest's name, the expression and its
// expected result (as a CEL expression where it has one), runtime error or compile errors as
// one JSON line in $CEL_DUMP. Not part of fieldguard's build.
package library_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	apiservercel "k8s.io/apiserver/pkg/cel"
)

var (
	dumpMu    sync.Mutex
	dumpCalls = map[string]int{}
)

// celLiteral is a CEL expression equal to v, or "" when there is none to write.
func celLiteral(v ref.Val) string {
	switch x := v.(type) {
	case nil:
		return ""
	case types.Bool:
		return strconv.FormatBool(bool(x))
	case types.Int:
		return strconv.FormatInt(int64(x), 10)
	case types.Uint:
		return strconv.FormatUint(uint64(x), 10) + "u"
	case types.Double:
		f := strconv.FormatFloat(float64(x), 'g', -1, 64)
		if strings.ContainsAny(f, "IN") {
			return ""
		}
		if !strings.ContainsAny(f, ".e") {
			f += ".0"
		}
		return f
	case types.String:
		return strconv.Quote(string(x))
	case types.Null:
		return "null"
	case *types.Optional:
		if !x.HasValue() {
			return "optional.none()"
		}
		in := celLiteral(x.GetValue())
		if in == "" {
			return ""
		}
		return "optional.of(" + in + ")"
	case apiservercel.Quantity:
		return "quantity(" + strconv.Quote(x.Quantity.String()) + ")"
	case apiservercel.IP:
		return "ip(" + strconv.Quote(x.Addr.String()) + ")"
	case apiservercel.CIDR:
		return "cidr(" + strconv.Quote(x.Prefix.String()) + ")"
	case apiservercel.Semver:
		return "semver(" + strconv.Quote(x.Version.String()) + ")"
	}
	if l, ok := v.(traits.Lister); ok {
		n := int(l.Size().(types.Int))
		parts := make([]string, 0, n)
		for i := 0; i < n; i++ {
			p := celLiteral(l.Get(types.Int(i)))
			if p == "" {
				return ""
			}
			parts = append(parts, p)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return ""
}

func dumpLibrary(t *testing.T, expr string, expectResult ref.Val, expectRuntimeErr string, expectCompileErrs []string, extra ...interface{}) {
	dumpMu.Lock()
	defer dumpMu.Unlock()
	dumpCalls[t.Name()]++
	rec := map[string]interface{}{
		"test":                t.Name(),
		"call":                dumpCalls[t.Name()],
		"expr":                expr,
		"expect_literal":      celLiteral(expectResult),
		"expect_go":           fmt.Sprintf("%T %v", expectResult, expectResult),
		"expect_runtime_err":  expectRuntimeErr,
		"expect_compile_errs": expectCompileErrs,
	}
	if len(extra) > 0 {
		rec["library_version"] = extra[0]
	}
	line, _ := json.Marshal(rec)
	f, err := os.OpenFile(os.Getenv("CEL_DUMP"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "%s\n", line)
}
