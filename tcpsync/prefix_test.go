package tcpsync

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlySentinelsCarryThePackageName holds the house rule on error
// texts: a package-level sentinel (var ErrX = errors.New("tcpsync: ..."))
// names the package; every other error says what failed without it, so a
// wrapped chain never repeats "tcpsync: " in the middle of a line.
func TestOnlySentinelsCarryThePackageName(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
				continue // package-level sentinels
			}
			ast.Inspect(d, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok || !(pkg.Name == "fmt" && sel.Sel.Name == "Errorf" || pkg.Name == "errors" && sel.Sel.Name == "New") {
					return true
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				checked++
				if strings.HasPrefix(s, "tcpsync: ") {
					t.Errorf("%s: a non-sentinel error starts with the package name: %q", fset.Position(lit.Pos()), s)
				}
				return true
			})
		}
	}
	if checked < 40 {
		t.Fatalf("checked only %d error texts: the scan no longer sees the package's errors", checked)
	}
}
