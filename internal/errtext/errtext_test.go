package errtext

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPackagesListsEverySentinel: every sentinel of the module (a
// package-level `ErrX = errors.New("pkg: ...")` outside tests and the CLI)
// carries a package name that is in Packages (internal/wire's carry
// "tcpsync", where they were first exported), so the
// CLI's line and a server's ERROR message leave it out (architecture.md,
// "Error prefixes"); every name in Packages has a sentinel.
func TestPackagesListsEverySentinel(t *testing.T) {
	root := filepath.Join("..", "..")
	sentinel := regexp.MustCompile(`(?m)^\s*(?:var\s+)?Err\w*\s*=\s*errors\.New\("([a-z]+): `)
	found := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "cmd") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range sentinel.FindAllSubmatch(b, -1) {
			name := string(m[1])
			require.Contains(t, Packages, name, "%s: errtext.Packages misses %q", p, name)
			found[name] = true
		}
		return nil
	})
	require.NoError(t, err)
	for _, p := range Packages {
		require.True(t, found[p], "errtext.Packages lists %q, which has no sentinel", p)
	}
	require.Len(t, found, len(Packages), "no name listed twice")
}
