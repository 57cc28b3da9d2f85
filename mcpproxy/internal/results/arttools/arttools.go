// Package arttools runs the artifact tools, the tools Spillway offers an
// agent for reading an artifact when the agent has no sandbox to fetch
// it into: read returns a window of it by lines or bytes, grep the lines
// that match a regular expression (with context lines), and jq the
// outputs of a jq program run over it as JSON or NDJSON (by gojq).
//
// Without them, an agent whose host gives it neither code execution nor
// resources/read would see only an offloaded result's preview. The
// package knows nothing of MCP sessions, tenants or policy: its caller
// (package ownmethods) authorizes the artifact, hands Run a Source that
// opens its bytes, and bounds the answer further (offloading it in
// turn). Every input comes from the agent, so every size an attacker
// could grow is bounded here: window sizes, pattern and program lengths,
// matches and outputs, the bytes jq decodes, jq's time and memory, and
// how many jq programs run at once. An answer is cut at
// Limits.MaxAnswer, except a jq answer the caller stores (RunLong),
// which is kept whole in a file up to Limits.MaxJQAnswer.
package arttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// The tools' names, prefixed so that they do not collide with an
// upstream's tools (where one does, the upstream's wins: see package
// ownmethods).
const (
	Read = "spillway_artifact_read"
	Grep = "spillway_artifact_grep"
	JQ   = "spillway_artifact_jq"
)

// Names lists the tools in the order tools/list shows them.
var Names = []string{Read, Grep, JQ}

// Is reports whether name is one of the tools.
func Is(name string) bool { return name == Read || name == Grep || name == JQ }

// ErrInvalid is returned (wrapped, with a message safe to show the
// caller) for input the caller can correct: bad arguments, a window out of
// range, a bad pattern or program, an artifact that is not JSON, a jq
// program over its time.
var ErrInvalid = errors.New("invalid request")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Bounds of the arguments.
const (
	DefaultLines      = 200
	MaxLines          = 5000
	DefaultByteLength = 16 << 10
	MaxByteLength     = 1 << 20
	MaxPattern        = 4096
	MaxContext        = 20
	DefaultMatches    = 50
	MaxMatches        = 1000
	MaxProgram        = 16 << 10
	DefaultOutputs    = 100
	MaxOutputs        = 10_000
)

// Call is one parsed tool call. Parse fills it; the fields of the other
// tools stay zero.
type Call struct {
	Tool string
	ID   string // the artifact's id, from the uri argument

	// read: by lines (Offset 1-based, Limit) or, when Bytes, by bytes.
	Offset, Limit          int
	Bytes                  bool
	ByteOffset, ByteLength int64

	// grep
	Pattern    string
	IgnoreCase bool
	Context    int
	MaxMatches int

	// jq
	Program    string
	Format     string // "" (any stream of JSON values), "json" or "ndjson"
	MaxOutputs int
}

// args holds the arguments of all the tools; a pointer tells an absent
// argument from a zero one.
type args struct {
	URI        *string `json:"uri"`
	Offset     *int    `json:"offset"`
	Limit      *int    `json:"limit"`
	ByteOffset *int64  `json:"byteOffset"`
	ByteLength *int64  `json:"byteLength"`
	Pattern    *string `json:"pattern"`
	IgnoreCase *bool   `json:"ignoreCase"`
	Context    *int    `json:"context"`
	MaxMatches *int    `json:"maxMatches"`
	Program    *string `json:"program"`
	Format     *string `json:"format"`
	MaxOutputs *int    `json:"maxOutputs"`
}

// Parse checks a tools/call's arguments (a JSON object; nil or null reads
// as {}) for tool, filling in defaults. Errors wrap ErrInvalid.
func Parse(tool string, arguments []byte) (Call, error) {
	if !Is(tool) {
		return Call{}, invalid("unknown tool %q", tool)
	}
	var a args
	if len(arguments) > 0 && string(arguments) != "null" {
		if err := json.Unmarshal(arguments, &a); err != nil {
			return Call{}, invalid("arguments: %s", jsonError(err))
		}
	}
	c := Call{Tool: tool}
	if a.URI == nil {
		return Call{}, invalid("uri is required (the spillway://artifacts/… URI of an offloaded result's resource_link)")
	}
	// A malformed id under the prefix is left to the store to not find,
	// as resources/read leaves it: the answer is the same as for an
	// unknown artifact.
	id, ok := strings.CutPrefix(*a.URI, artifact.URIPrefix)
	if !ok {
		return Call{}, invalid("uri %q is not a spillway://artifacts/… URI", truncate(*a.URI, 200))
	}
	c.ID = id
	var err error
	switch tool {
	case Read:
		err = c.parseRead(a)
	case Grep:
		err = c.parseGrep(a)
	case JQ:
		err = c.parseJQ(a)
	}
	if err != nil {
		return Call{}, err
	}
	return c, nil
}

func (c *Call) parseRead(a args) error {
	lines, bytes := a.Offset != nil || a.Limit != nil, a.ByteOffset != nil || a.ByteLength != nil
	if lines && bytes {
		return invalid("give a window by lines (offset, limit) or by bytes (byteOffset, byteLength), not both")
	}
	if bytes {
		c.Bytes, c.ByteLength = true, DefaultByteLength
		return errors.Join(bounded("byteOffset", a.ByteOffset, &c.ByteOffset, 0, 1<<53-1),
			bounded("byteLength", a.ByteLength, &c.ByteLength, 1, MaxByteLength))
	}
	c.Offset, c.Limit = 1, DefaultLines
	return errors.Join(bounded("offset (a line number)", a.Offset, &c.Offset, 1, 1<<31-1),
		bounded("limit", a.Limit, &c.Limit, 1, MaxLines))
}

func (c *Call) parseGrep(a args) error {
	if a.Pattern == nil || *a.Pattern == "" {
		return invalid("pattern is required (a Go RE2 regular expression)")
	}
	if c.Pattern = *a.Pattern; len(c.Pattern) > MaxPattern {
		return invalid("pattern is %d bytes; at most %d", len(c.Pattern), MaxPattern)
	}
	c.IgnoreCase = a.IgnoreCase != nil && *a.IgnoreCase
	c.MaxMatches = DefaultMatches
	return errors.Join(bounded("context", a.Context, &c.Context, 0, MaxContext),
		bounded("maxMatches", a.MaxMatches, &c.MaxMatches, 1, MaxMatches))
}

func (c *Call) parseJQ(a args) error {
	if a.Program == nil || strings.TrimSpace(*a.Program) == "" {
		return invalid("program is required (a jq program, e.g. .[0] or map(.id))")
	}
	if c.Program = *a.Program; len(c.Program) > MaxProgram {
		return invalid("program is %d bytes; at most %d", len(c.Program), MaxProgram)
	}
	if a.Format != nil {
		switch c.Format = *a.Format; c.Format {
		case "auto":
			c.Format = ""
		case "", "json", "ndjson":
		default:
			return invalid(`format must be "auto", "json" or "ndjson"`)
		}
	}
	c.MaxOutputs = DefaultOutputs
	return bounded("maxOutputs", a.MaxOutputs, &c.MaxOutputs, 1, MaxOutputs)
}

// bounded sets *dst to *v when the argument is given, refusing a value
// outside lo to hi.
func bounded[T int | int64](name string, v, dst *T, lo, hi T) error {
	if v == nil {
		return nil
	}
	if *v < lo || *v > hi {
		return invalid("%s must be from %d to %d", name, lo, hi)
	}
	*dst = *v
	return nil
}

// jsonError says what is wrong with arguments without echoing Go types.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s must be a %s, not a %s", te.Field, te.Type.Kind(), te.Value)
	}
	return err.Error()
}

// Source is the artifact a tool reads: its size, and a way to open a
// range of its bytes (length < 0: to the end) as artifact.Store.Open
// does.
type Source struct {
	URI    string // its spillway:// URI, for the answer's header
	Tenant string // whose it is (and who asks: the caller may read only its own)
	Size   int64
	Open   func(ctx context.Context, offset, length int64) (io.ReadCloser, error)
}

// Limits bound what Run does. Zero values take the defaults.
type Limits struct {
	// MaxAnswer caps an answer's bytes; beyond it the answer is cut, and
	// says so. Default 1 MiB.
	MaxAnswer int
	// MaxJQInput caps the artifact jq decodes (decoded JSON takes several
	// times its bytes in memory). Default 64 MiB.
	MaxJQInput int64
	// JQTimeout bounds one jq run, decoding included. Default 10 s.
	JQTimeout time.Duration
	// JQConcurrent bounds the jq runs at once; a call waits for a slot
	// until its context ends. A tenant runs one at a time (Source.Tenant):
	// its second is refused. Default 2.
	JQConcurrent int
	// Timeout bounds one read or grep (its scan of the artifact).
	// Default 30 s.
	Timeout time.Duration
	// MaxJQHeap stops the jq runs in flight when the process's heap
	// objects pass it, whoever holds them (a proxy that needs more for
	// other work refuses jq: it fails closed). Default 1 GiB.
	MaxJQHeap uint64
	// MaxJQAnswer bounds the outputs of a jq answer taken whole
	// (RunLong): past it the run stops at the last whole output, and its
	// header says so. Default 64 MiB.
	MaxJQAnswer int64
	// TempDir holds a long jq answer's outputs while it runs, in a file
	// unlinked at once ("": os.TempDir()).
	TempDir string
}

// Runner runs the tools. Create it with New; it is safe for concurrent
// use.
type Runner struct {
	lim Limits
	jq  chan struct{} // slots of the jq runs at once

	mu      sync.Mutex
	running map[string]bool // tenants with a jq run holding or awaiting a slot
}

// New returns a Runner bounded by lim, each field of it zero or less
// replaced by its default.
func New(lim Limits) *Runner {
	lim.MaxAnswer = orDefault(lim.MaxAnswer, 1<<20)
	lim.MaxJQInput = orDefault(lim.MaxJQInput, 64<<20)
	lim.JQTimeout = orDefault(lim.JQTimeout, 10*time.Second)
	lim.JQConcurrent = orDefault(lim.JQConcurrent, 2)
	lim.Timeout = orDefault(lim.Timeout, 30*time.Second)
	lim.MaxJQHeap = orDefault(lim.MaxJQHeap, 1<<30)
	lim.MaxJQAnswer = orDefault(lim.MaxJQAnswer, 64<<20)
	return &Runner{lim: lim, jq: make(chan struct{}, lim.JQConcurrent), running: map[string]bool{}}
}

// orDefault returns v, or def when v is zero or less (a limit left unset).
func orDefault[T int | int64 | uint64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Run answers c over src with the answer's text. Errors wrapping
// ErrInvalid are the caller's to correct (their text is safe to show);
// others come from src.Open or reading it (artifact errors) or ctx.
func (r *Runner) Run(ctx context.Context, c Call, src Source) (string, error) {
	if c.Tool == JQ {
		text, _, err := r.jqRun(ctx, c, src, false)
		return text, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, r.lim.Timeout, errTimeout)
	defer cancel()
	var out string
	var err error
	switch {
	case c.Tool == Grep:
		out, err = r.grep(ctx, c, src)
	case c.Tool == Read && c.Bytes:
		out, err = r.readBytes(ctx, c, src)
	case c.Tool == Read:
		out, err = r.readLines(ctx, c, src)
	default:
		return "", invalid("unknown tool %q", c.Tool)
	}
	if err != nil && errors.Is(context.Cause(ctx), errTimeout) {
		return "", invalid("%s ran past its %s limit: ask for a window nearer the start, or search a smaller artifact", c.Tool, r.lim.Timeout)
	}
	return out, err
}

// RunLong is Run for a caller that stores a long answer instead of
// cutting it (the proxy offloads it): a jq answer past Limits.MaxAnswer
// comes back as a Long (text is then ""), which the caller must Close.
// Its outputs are bounded by the jq run's own limits (JQTimeout,
// MaxJQHeap, maxOutputs) and by Limits.MaxJQAnswer bytes, where the run
// stops and its header says so. Other answers are Run's.
func (r *Runner) RunLong(ctx context.Context, c Call, src Source) (text string, long *Long, err error) {
	if c.Tool == JQ {
		return r.jqRun(ctx, c, src, true)
	}
	text, err = r.Run(ctx, c, src)
	return text, nil, err
}

// errTimeout is the cause a read's or grep's context ends with when its
// time is up.
var errTimeout = errors.New("scan timeout")

// answer builds an answer of at most max bytes; past that, what is
// added is dropped, and the answer ends with a note saying so.
type answer struct {
	b   strings.Builder
	max int
	cut bool
}

// add appends s; it reports false once the answer is full.
func (a *answer) add(s string) bool {
	if a.cut {
		return false
	}
	if a.b.Len()+len(s) > a.max {
		a.b.WriteString(truncate(s, a.max-a.b.Len()))
		a.cut = true
		return false
	}
	a.b.WriteString(s)
	return true
}

// String returns the answer, with a note when it was cut.
func (a *answer) String() string {
	if a.cut {
		return a.b.String() + fmt.Sprintf("\n[answer cut at %d bytes: ask for a smaller window or fewer results]", a.max)
	}
	return a.b.String()
}

// truncate cuts s to at most n bytes, on a UTF-8 boundary.
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
