package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// registerAudit registers --audit-log (config key audit-log, environment
// SPILLWAY_AUDIT_LOG).
func (c *serveConfig) registerAudit(fs *flag.FlagSet) {
	fs.StringVar(&c.auditLog, "audit-log", "", "write the audit trail, one JSON line per offload and per read of an artifact, to `file` (appended, created mode 0600), - for stdout or stderr (default: off)")
}

// openAudit opens the audit trail --audit-log names: nil when it names
// none. A file is opened for appending only and created private (0600),
// closed by d.Close. A trail asked for that cannot be opened stops the
// server from starting: it never runs unaudited when told to audit.
func (c *serveConfig) openAudit(stdout, stderr io.Writer, d *deps) (*slog.Logger, error) {
	var w io.Writer
	switch c.auditLog {
	case "":
		return nil, nil
	case "-":
		if c.stdio {
			return nil, errors.New("--audit-log: --stdio owns stdout; write the audit trail to a file or stderr")
		}
		w = stdout
	case "stderr":
		w = stderr
	default:
		f, err := os.OpenFile(c.auditLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("--audit-log: %w", err)
		}
		d.close = append(d.close, f.Close)
		w = f
	}
	return slog.New(slog.NewJSONHandler(w, nil)), nil
}
