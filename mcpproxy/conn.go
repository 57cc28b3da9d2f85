package mcpproxy

import (
	"context"
	"log/slog"

	"github.com/spillway-dev/spillway/mcpproxy/internal/child"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
)

// conn is one JSON-RPC connection to a peer: a stdio child, a stdio
// client, or an HTTP upstream spoken to as a client.
type conn interface {
	// Send writes one message.
	Send(ctx context.Context, m *jsonrpc.Message) error
	// Recv delivers messages from the peer; it is closed when the peer is
	// gone, after which Err says why.
	Recv() <-chan *jsonrpc.Message
	Err() error
	Close() error
}

// CommandUpstream is a tool server run as a child process speaking stdio
// (package child: own process group, bounded Close, an environment
// allow-list).
type CommandUpstream struct {
	Command string   // program
	Args    []string // its arguments
	// Env configures the child's environment beyond the allow-list of
	// child.Env (PATH, HOME, locale…): NAME passes Spillway's value of
	// NAME, NAME=VALUE sets it. Nothing else of Spillway's environment
	// reaches the child.
	Env []string
	Dir string
	// MaxMessage caps one message from the child; default 1 GiB.
	MaxMessage int64
	Logger     *slog.Logger // the child's stderr goes here, line by line
}

func (*CommandUpstream) upstream() {}

// ParseCommand splits a command line on spaces, honouring single and
// double quotes, for --upstream-cmd.
func ParseCommand(s string) (*CommandUpstream, error) {
	c, err := child.ParseCommand(s)
	if err != nil {
		return nil, err
	}
	return &CommandUpstream{Command: c.Path, Args: c.Args}, nil
}

// start runs one child and connects to its stdio.
func (u *CommandUpstream) start(log *slog.Logger) (conn, error) {
	if u.Logger != nil {
		log = u.Logger
	}
	return child.Start(child.Command{Path: u.Command, Args: u.Args, Dir: u.Dir, Env: u.Env},
		child.Options{MaxMessage: u.MaxMessage, Logger: log})
}
