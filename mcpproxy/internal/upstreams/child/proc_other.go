//go:build !unix

package child

import (
	"errors"
	"os"
	"os/exec"
)

// Without process groups, the child alone is signalled, and both signals
// kill it.
var (
	termSignal = os.Kill
	killSignal = os.Kill
)

// ownGroup does nothing: process groups are a Unix mechanism.
func ownGroup(*exec.Cmd) {}

// runAs fails unless u is nil: running a child as another user needs
// Unix credentials.
func runAs(_ *exec.Cmd, u *User) error {
	if u != nil {
		return errors.New("child: running an upstream as another user is supported on Unix only")
	}
	return nil
}

// signalGroup kills the child, whatever the signal (see termSignal).
func signalGroup(p *os.Process, _ os.Signal) { _ = p.Kill() }
