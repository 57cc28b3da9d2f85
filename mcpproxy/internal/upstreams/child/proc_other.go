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

func ownGroup(*exec.Cmd) {}

// runAs: another user's credentials are a Unix mechanism.
func runAs(_ *exec.Cmd, u *User) error {
	if u != nil {
		return errors.New("child: running an upstream as another user is supported on Unix only")
	}
	return nil
}

func signalGroup(p *os.Process, _ os.Signal) { _ = p.Kill() }
