package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/artifact/token"
)

// mcpTenants returns who may use /mcp over HTTP. With inbound tokens, their
// tenants (OAuth access tokens are added to them later, when the public
// URL, the default resource, is known). Without, /mcp shares its listener with /a/, which sandboxes
// holding one link reach: an open /mcp would let them list and read every
// artifact and call every tool. So a local token guards it, read from
// --mcp-token-file or created there (mode 0600) on first start, like
// Jupyter's: the agent's config carries it, a link holder does not. Under
// --stdio there is no HTTP /mcp, and nothing to guard.
func (c *serveConfig) mcpTenants(configured *identity.Tenants, stderr io.Writer) (*identity.Tenants, string, error) {
	if configured.Required() || c.oauth.on() || c.stdio || (c.upstreamURL == "" && c.upstreamCmd == "" && c.servers == nil) {
		return configured, "", nil
	}
	path := c.mcpTokenFile
	if path == "" {
		path = filepath.Join(c.data, "mcp.token")
	}
	tok, err := loadOrCreateToken(path)
	if err != nil {
		return nil, "", fmt.Errorf("--mcp-token-file: %w", err)
	}
	t, err := identity.Local(tok)
	if err != nil {
		return nil, "", fmt.Errorf("--mcp-token-file %s: %w", path, err)
	}
	if isTerminal(stderr) {
		// For the person who just typed `make run`, as Jupyter prints its
		// URL; never into a log that is not a terminal.
		fmt.Fprintf(stderr, "\n  MCP clients connect with the header  Authorization: Bearer %s\n  (the token is kept in %s)\n\n", tok, path)
	}
	return t, path, nil
}

// loadOrCreateToken reads the token in path (one line, mode 0600), or
// creates the file with a fresh 256-bit token when it does not exist.
func loadOrCreateToken(path string) (string, error) {
	b, err := token.ReadSecretFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", err
		}
		tok := make([]byte, 32)
		rand.Read(tok)
		err = token.CreateSecretFile(path, []byte(base64.RawURLEncoding.EncodeToString(tok)+"\n"))
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return "", err
		}
		b, err = token.ReadSecretFile(path)
	}
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSpace(b)), nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
