//go:build !linux

package child

import "errors"

// waitExited is Linux only; elsewhere the child is reaped first and its
// group signalled after.
func waitExited(int) error { return errors.New("not supported") }
