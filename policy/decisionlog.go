package policy

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the decision log queue (Options.DecisionLogQueue and
// DecisionLogFlush); the queue also holds at most defaultLogBytes.
const (
	defaultLogQueue   = 4096
	defaultLogBytes   = 16 << 20
	defaultLogFlush   = 5 * time.Second
	logErrorEvery     = 10 * time.Second // at most one log line per period about failed writes
	decisionLogPrefix = "policy: decision log"
)

// decisionLog writes decision log lines on its own goroutine from a queue
// bounded in lines and bytes: a decision never waits for the writer. A
// line that does not fit is dropped and counted; a failed write is counted
// and logged at most once per logErrorEvery. Safe for concurrent use.
type decisionLog struct {
	w        io.Writer
	log      *slog.Logger
	q        chan []byte
	maxBytes int64
	flush    time.Duration

	queued                    atomic.Int64 // bytes in q
	dropped, errs             atomic.Int64
	closed                    atomic.Bool
	stop, done                chan struct{}
	stopOnce                  sync.Once
	lastErrLog, errsAtLastLog int64 // writer goroutine only
}

// newDecisionLog starts the goroutine that writes lines to w: at most
// lines wait (defaultLogQueue if ≤ 0); flush bounds how long Close waits
// for them (defaultLogFlush if ≤ 0).
func newDecisionLog(w io.Writer, lines int, flush time.Duration, log *slog.Logger) *decisionLog {
	if lines <= 0 {
		lines = defaultLogQueue
	}
	if flush <= 0 {
		flush = defaultLogFlush
	}
	d := &decisionLog{w: w, log: log, q: make(chan []byte, lines), maxBytes: defaultLogBytes, flush: flush,
		stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

// enqueue hands a line (ending in '\n') to the writer, or drops it.
func (d *decisionLog) enqueue(line []byte) {
	n := int64(len(line))
	if d.closed.Load() {
		d.dropped.Add(1)
		return
	}
	if d.queued.Add(n) > d.maxBytes {
		d.queued.Add(-n)
		d.dropped.Add(1)
		return
	}
	select {
	case d.q <- line:
	default:
		d.queued.Add(-n)
		d.dropped.Add(1)
	}
}

// run writes queued lines until stop is closed, then the lines still
// queued, and closes done.
func (d *decisionLog) run() {
	defer close(d.done)
	for {
		select {
		case line := <-d.q:
			d.write(line)
		case <-d.stop:
			for {
				select {
				case line := <-d.q:
					d.write(line)
				default:
					return
				}
			}
		}
	}
}

// write writes one line; a failure is counted and logged at most once
// per logErrorEvery.
func (d *decisionLog) write(line []byte) {
	d.queued.Add(-int64(len(line)))
	n, err := d.w.Write(line)
	if err == nil && n < len(line) {
		err = io.ErrShortWrite
	}
	if err == nil {
		return
	}
	total := d.errs.Add(1)
	if now := time.Now().UnixNano(); now-d.lastErrLog >= int64(logErrorEvery) {
		d.log.Error("decision log write failed; decisions go on unlogged", "err", err, "failed_since_last_report", total-d.errsAtLastLog)
		d.lastErrLog, d.errsAtLastLog = now, total
	}
}

// Close stops taking lines and writes those queued. A writer that does not
// finish within the flush bound is abandoned: the lines left are counted
// as dropped and reported in the error.
func (d *decisionLog) Close() error {
	d.closed.Store(true)
	d.stopOnce.Do(func() { close(d.stop) })
	select {
	case <-d.done:
		return nil
	case <-time.After(d.flush):
		left := len(d.q)
		d.dropped.Add(int64(left))
		return fmt.Errorf("%s: the writer did not finish within %v; %d queued line(s) not written", decisionLogPrefix, d.flush, left)
	}
}
