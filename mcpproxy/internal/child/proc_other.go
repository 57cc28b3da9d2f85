//go:build !unix

package child

import (
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

func signalGroup(p *os.Process, _ os.Signal) { _ = p.Kill() }
