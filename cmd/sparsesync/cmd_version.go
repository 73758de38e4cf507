package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCommand(g *globalOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the VCS revision sparsesync was built from",
		Long: `Print the module version, the VCS revision (with "+modified" when the tree
had uncommitted changes) and its time, and the Go version, as recorded by
the Go toolchain in the binary (runtime/debug.ReadBuildInfo). The same as
sparsesync --version.
` + exitCodesHelp,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(g.stdout, versionString())
			return err
		},
	}
}

// versionString is "sparsesync VERSION (revision REV[+modified], TIME, goX)"
// for this binary.
func versionString() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(bi)
}

// formatVersion renders the build information bi (nil: unknown).
func formatVersion(bi *debug.BuildInfo) string {
	version, revision, when, modified := "unknown", "unknown", "", false
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if modified {
		revision += "+modified"
	}
	if when != "" {
		revision += ", " + when
	}
	return fmt.Sprintf("sparsesync %s (revision %s, %s)", version, revision, runtime.Version())
}
