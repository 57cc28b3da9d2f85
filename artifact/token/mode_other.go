//go:build !unix

package token

import "io/fs"

// checkSecretMode has nothing to check where permission bits are not the
// access control (Windows uses ACLs).
func checkSecretMode(string, fs.FileInfo) error { return nil }
