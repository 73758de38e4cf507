package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// lineHandler renders a library's log records as the CLI's own lines,
// "sparsesync: MESSAGE (key value, ...): ERR", not slog's key=value text: a
// warning the user reads (replica rebuild's TCP fallback) looks like every
// other line of the tool.
type lineHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	level slog.Level
	attrs []slog.Attr
}

func newLineLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(&lineHandler{mu: new(sync.Mutex), w: w, level: level})
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var ctxs []string
	var errText string
	add := func(a slog.Attr) bool {
		if a.Key == "err" {
			errText = a.Value.String()
		} else {
			ctxs = append(ctxs, a.Key+" "+a.Value.String())
		}
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	line := "sparsesync: " + r.Message
	if len(ctxs) > 0 {
		line += " (" + strings.Join(ctxs, ", ") + ")"
	}
	if errText != "" {
		line += ": " + errText
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := fmt.Fprintln(h.w, strings.ReplaceAll(line, "\n", " "))
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *lineHandler) WithGroup(string) slog.Handler { return h }
