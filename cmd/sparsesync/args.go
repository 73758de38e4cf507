package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// argCountError is a command given the wrong number of positional
// arguments. Unlike cobra's own count errors it names the command.
type argCountError struct {
	cmd      string // "push: ", as commandName gives it
	want     int
	atLeast  bool
	received int
}

func (e *argCountError) Error() string {
	if e.atLeast {
		return fmt.Sprintf("%srequires at least %d arg(s), only received %d", e.cmd, e.want, e.received)
	}
	return fmt.Sprintf("%saccepts %d arg(s), received %d", e.cmd, e.want, e.received)
}

// exactArgs is cobra.ExactArgs with an error that names the command.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return &argCountError{cmd: commandName(cmd), want: n, received: len(args)}
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs with an error that names the command.
func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return &argCountError{cmd: commandName(cmd), want: n, atLeast: true, received: len(args)}
		}
		return nil
	}
}
