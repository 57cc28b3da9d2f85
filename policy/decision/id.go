package decision

import (
	"context"
	"sync/atomic"
)

// A Recorder receives the id of the decision made under a context that
// carries it (WithRecorder): the decision_id of its decision log line, so
// that an audit line can name the decision that allowed what it records
// and be joined with the decision log. The evaluator (policy.Engine)
// makes an id for such a decision whether or not decisions are logged.
// A nil *Recorder records nothing. Safe for concurrent use; when several
// decisions are made under one context, ID returns the last.
type Recorder struct {
	id atomic.Pointer[string]
}

type recorderKey struct{}

// WithRecorder returns a context carrying a new Recorder, and the Recorder.
func WithRecorder(ctx context.Context) (context.Context, *Recorder) {
	r := &Recorder{}
	return context.WithValue(ctx, recorderKey{}, r), r
}

// RecorderFrom returns the Recorder ctx carries, or nil.
func RecorderFrom(ctx context.Context) *Recorder {
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	return r
}

// Set records id; the evaluator calls it once it has decided.
func (r *Recorder) Set(id string) {
	if r != nil {
		r.id.Store(&id)
	}
}

// ID returns the id recorded last, or "" when no decision was made.
func (r *Recorder) ID() string {
	if r == nil {
		return ""
	}
	if p := r.id.Load(); p != nil {
		return *p
	}
	return ""
}
