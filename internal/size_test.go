package internal_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Size limits of the house style (docs/architecture.md): no non-test
// function over maxFuncLines lines anywhere, and no non-test file over
// maxFileLines lines in the packages that grew too large before.
const (
	maxFuncLines = 150
	maxFileLines = 500
)

// fileLimitDirs are the trees (with their subpackages) held to maxFileLines.
var fileLimitDirs = []string{"replica", "tcpsync", "localsync"}

// TestSizeLimits parses every non-test Go file of the module and reports
// each function longer than maxFuncLines (from its func line to its closing
// brace) and each file in fileLimitDirs longer than maxFileLines.
func TestSizeLimits(t *testing.T) {
	root := filepath.Join("..")
	problems, err := sizeProblems(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func sizeProblems(root string) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if lines := strings.Count(string(src), "\n"); lines > maxFileLines && underAny(rel, fileLimitDirs) {
			out = append(out, fmt.Sprintf("%s: %d lines (at most %d)", rel, lines, maxFileLines))
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var name string
			switch fn := n.(type) {
			case *ast.FuncDecl:
				name = fn.Name.Name
			case *ast.FuncLit:
				name = "func literal"
			default:
				return true
			}
			from, to := fset.Position(n.Pos()).Line, fset.Position(n.End()).Line
			if lines := to - from + 1; lines > maxFuncLines {
				out = append(out, fmt.Sprintf("%s:%d: %s: %d lines (at most %d)", rel, from, name, lines, maxFuncLines))
			}
			return true
		})
		return nil
	})
	return out, err
}

func underAny(rel string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}
