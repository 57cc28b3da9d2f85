package arttools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/itchyny/gojq"

	"github.com/spillway-dev/spillway/artifact/scratch"
)

// jqRun answers jq: Program run over each JSON value of the artifact,
// each output one line of compact JSON.
//
// gojq bounds neither memory nor the time of one builtin; the bounds are
// the input's size, a timeout checked between instructions, the outputs
// counted, the runs at once (each holds a decoded input), and the
// process's heap, watched while the run lasts (`reduce range(40) as $i
// ("x"; . + .)` doubles a string to 1 TiB in 40 instructions, too few for
// a timeout). The environment is not given to the program ($ENV and env
// are empty), nor any module or input beyond the artifact.
//
// With long set, an answer past Limits.MaxAnswer is not cut: its outputs
// go on to a Long (a file), up to Limits.MaxJQAnswer bytes.
func (r *Runner) jqRun(ctx context.Context, c Call, src Source, long bool) (string, *Long, error) {
	code, err := compileJQ(c.Program)
	if err != nil {
		return "", nil, err
	}
	if src.Size > r.lim.MaxJQInput {
		return "", nil, invalid("the artifact is %d bytes; jq reads at most %d: use %s or %s on it", src.Size, r.lim.MaxJQInput, Grep, Read)
	}
	release, err := r.jqSlot(ctx, src.Tenant)
	if err != nil {
		return "", nil, err
	}
	defer release()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	ctx, cancel := context.WithTimeoutCause(ctx, r.lim.JQTimeout, errJQTimeout)
	defer cancel()
	defer r.watchHeap(stop)()
	inputs, err := r.decode(ctx, c.Format, src)
	if err != nil {
		return "", nil, err
	}
	a := &jqAnswer{answer: answer{max: r.lim.MaxAnswer}, long: long, limit: r.lim.MaxJQAnswer, dir: r.lim.TempDir}
	defer a.drop()
	outputs, more, err := r.runJQ(ctx, code, inputs, c.MaxOutputs, a)
	if err != nil {
		return "", nil, err
	}
	head := fmt.Sprintf("%s: jq %s over %d input value(s): %d output(s)", src.URI, truncate(c.Program, 200), len(inputs), outputs)
	switch {
	case more:
		head += fmt.Sprintf(" (stopped at maxOutputs=%d; more follow)", c.MaxOutputs)
	case a.full:
		head += fmt.Sprintf(" (stopped at %d bytes of output, the most an answer holds; more follow)", r.lim.MaxJQAnswer)
	}
	if a.file != nil {
		l := &Long{Head: head, f: a.file, n: a.n}
		a.file = nil // handed on: a.drop leaves it open
		return "", l, nil
	}
	return head + "\n" + a.String(), nil, nil
}

// compileJQ parses and compiles a jq program. Its errors wrap ErrInvalid.
func compileJQ(program string) (*gojq.Code, error) {
	q, err := gojq.Parse(program)
	if err != nil {
		return nil, invalid("jq program: %s", err)
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, invalid("jq program: %s", err)
	}
	return code, nil
}

// jqSlot waits for one of the slots of the jq runs at once, for tenant.
// A tenant runs one program at a time, so that it cannot hold every
// slot: while its first run holds or awaits a slot, a second is refused
// (and r.running holds at most the runs at once and those waiting). The
// wait ends with ctx's error when ctx ends first. release frees the slot
// and the tenant's turn.
func (r *Runner) jqSlot(ctx context.Context, tenant string) (release func(), err error) {
	r.mu.Lock()
	busy := r.running[tenant]
	r.running[tenant] = true
	r.mu.Unlock()
	if busy {
		return nil, invalid("another jq program of yours is running; run one at a time")
	}
	leave := func() {
		r.mu.Lock()
		delete(r.running, tenant)
		r.mu.Unlock()
	}
	select {
	case r.jq <- struct{}{}:
		return func() { <-r.jq; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// runJQ runs code over each input in turn and adds each output to a, as
// one line of compact JSON. It stops when the outputs end, when the
// program halts, when a is full, or at maxOutputs (more is then true:
// another output was on its way). outputs counts the outputs a holds.
func (r *Runner) runJQ(ctx context.Context, code *gojq.Code, inputs []any, maxOutputs int, a *jqAnswer) (outputs int, more bool, err error) {
	for _, in := range inputs {
		iter := code.RunWithContext(ctx, in)
		for {
			v, ok := iter.Next()
			if !ok {
				break
			}
			if err, ok := v.(error); ok {
				var halt *gojq.HaltError
				if errors.As(err, &halt) && halt.Value() == nil {
					return outputs, false, nil // halt: the run ends, its outputs stand
				}
				return outputs, false, r.jqError(ctx, err, outputs)
			}
			if outputs == maxOutputs {
				return outputs, true, nil
			}
			b, err := gojq.Marshal(v)
			if err != nil {
				return outputs, false, invalid("jq output: %s", err)
			}
			full, err := a.add(append(b, '\n'))
			if err != nil {
				return outputs, false, err
			}
			if !a.full { // an output past MaxJQAnswer is not in the answer
				outputs++
			}
			if full {
				return outputs, false, nil
			}
		}
	}
	return outputs, false, nil
}

// jqError is the error a jq run ends with when the program stops with
// err after outputs outputs: the run's time or the heap's cap was passed,
// its caller's context ended, or the program failed (halt_error, error,
// a type error).
func (r *Runner) jqError(ctx context.Context, err error, outputs int) error {
	switch {
	case errors.Is(context.Cause(ctx), errJQTimeout):
		return invalid("jq program ran past its %s limit (%d outputs so far)", r.lim.JQTimeout, outputs)
	case errors.Is(context.Cause(ctx), errJQMemory):
		return invalid("jq program stopped: the proxy's memory passed %d MiB while it ran (%d outputs so far)", r.lim.MaxJQHeap>>20, outputs)
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return invalid("jq: %s (after %d outputs)", err, outputs)
}

// Causes of a jq run's end: its time is up, the heap is over its cap.
var (
	errJQTimeout = errors.New("jq timeout")
	errJQMemory  = errors.New("jq memory")
)

// heapPoll is how often a jq run's watcher reads the heap: a string that
// doubles at each instruction takes longer than this to pass from the
// cap to several times it, as copying it takes time.
const heapPoll = 5 * time.Millisecond

// watchHeap cancels a jq run with errJQMemory once the process's heap
// objects pass Limits.MaxJQHeap; the run sees it at its next instruction.
// It returns the function that stops the watcher.
func (r *Runner) watchHeap(cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(heapPoll)
		defer t.Stop()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if metrics.Read(s); s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() > r.lim.MaxJQHeap {
				cancel(errJQMemory)
				return
			}
		}
	}()
	return func() { close(done) }
}

// decode reads the artifact as JSON values: format "json" one value,
// "ndjson" one value per non-blank line, "" any sequence of values
// (jq's own input: a document, NDJSON, concatenated values).
func (r *Runner) decode(ctx context.Context, format string, src Source) ([]any, error) {
	rc, err := src.Open(ctx, 0, src.Size)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, r.lim.MaxJQInput+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > r.lim.MaxJQInput {
		return nil, invalid("the artifact is over %d bytes, what jq reads at most", r.lim.MaxJQInput)
	}
	if format == "ndjson" {
		var vs []any
		for i, ln := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(ln)) == 0 {
				continue
			}
			v, err := values(ln, 1)
			if err != nil {
				return nil, invalid("not NDJSON: line %d: %s", i+1, err)
			}
			vs = append(vs, v[0])
		}
		return vs, nil
	}
	limit := -1
	if format == "json" {
		limit = 1
	}
	vs, err := values(data, limit)
	if err != nil {
		return nil, invalid("not JSON: %s", err)
	}
	if len(vs) == 0 {
		return nil, invalid("not JSON: the artifact holds no JSON value")
	}
	return vs, nil
}

// values decodes the JSON values in b, numbers kept exact; limit > 0
// requires exactly that many.
func values(b []byte, limit int) ([]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var vs []any
	for {
		var v any
		err := d.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) {
				return nil, fmt.Errorf("%s at byte %d", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
			}
			return nil, err
		}
		if limit > 0 && len(vs) == limit {
			return nil, fmt.Errorf("more than %d value(s) (at byte %d; format \"ndjson\" or \"auto\" reads a sequence)", limit, d.InputOffset())
		}
		vs = append(vs, v)
	}
	if limit > 0 && len(vs) < limit {
		return nil, errors.New("no JSON value")
	}
	return vs, nil
}

// jqAnswer collects a jq run's outputs in memory, up to its answer's cap.
// Past the cap, a long answer moves to an unlinked temporary file and
// takes whole outputs up to limit bytes (then full is set and the run
// stops); any other answer is cut, as answer cuts.
type jqAnswer struct {
	answer
	long  bool
	limit int64
	dir   string
	file  *os.File
	n     int64 // bytes in file
	full  bool
}

// add takes one output line; full reports that the answer takes no more.
// An error is the temporary file's.
func (a *jqAnswer) add(line []byte) (full bool, err error) {
	switch {
	case a.file == nil && (!a.long || a.b.Len()+len(line) <= a.max):
		return !a.answer.add(string(line)), nil
	case a.file == nil:
		if a.file, err = tempFile(a.dir); err != nil {
			return true, err
		}
		var n int
		n, err = io.WriteString(a.file, a.b.String())
		a.n = int64(n)
		a.b.Reset()
		if err != nil {
			return true, fmt.Errorf("jq answer: %w", err)
		}
	}
	if a.n+int64(len(line)) > a.limit {
		a.full = true
		return true, nil
	}
	n, err := a.file.Write(line)
	a.n += int64(n)
	if err != nil {
		return true, fmt.Errorf("jq answer: %w", err)
	}
	return false, nil
}

// drop closes, and so removes, the file of an answer that was not handed
// on as a Long.
func (a *jqAnswer) drop() {
	if a.file != nil {
		a.file.Close()
	}
}

// tempFile creates a file in dir ("": os.TempDir()) and unlinks it at
// once (scratch.Create): it is gone with its last descriptor, whatever
// happens to the process.
func tempFile(dir string) (*os.File, error) {
	f, err := scratch.Create(dir, "spillway-jq-*")
	if err != nil {
		return nil, fmt.Errorf("jq answer: %w", err)
	}
	return f, nil
}

// Long is a jq answer past Limits.MaxAnswer, for a caller that stores it
// whole rather than cutting it (RunLong): its header line, and its
// outputs (one line of compact JSON each, as in a short answer's body)
// in an unlinked temporary file. Close frees the file; a Long is not safe
// for concurrent use.
type Long struct {
	// Head is the answer's header line, without its newline: what ran,
	// over what, how many outputs, and where it stopped.
	Head string
	f    *os.File
	n    int64
}

// Size is the outputs' length in bytes.
func (l *Long) Size() int64 { return l.n }

// Body reads the outputs from their start.
func (l *Long) Body() io.Reader { return io.NewSectionReader(l.f, 0, l.n) }

// Close frees the outputs' file.
func (l *Long) Close() error { return l.f.Close() }
