package ownmethods

import (
	"context"
	"net/http"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/policy"
	"github.com/spillway-dev/spillway/policy/decision"
)

// readAudit is the audit line of one read of an artifact's bytes on an
// MCP path (resources/read, resources/stream, the artifact tools), to be
// written once its outcome is known (done). A nil *readAudit (the store
// keeps no audit trail) writes nothing.
type readAudit struct {
	o   *Methods
	ctx context.Context
	rq  Request
	id  string
	via string
	a   artifact.Artifact
	rec *decision.Recorder
}

// authorizeRead is authorize for a read the audit trail records: the
// access rule's answer, and the audit line to finish with done. A
// refusal is written at once (the caller need not call done).
func (o *Methods) authorizeRead(ctx context.Context, rq Request, id, via string) (artifact.Artifact, policy.FetchDecision, *readAudit, error) {
	if o.o.Artifacts.Audit == nil {
		a, d, err := o.authorize(ctx, rq, id, via)
		return a, d, nil, err
	}
	actx, rec := o.recording(ctx)
	ra := &readAudit{o: o, ctx: ctx, rq: rq, id: id, via: via, rec: rec}
	a, d, err := o.authorize(actx, rq, id, via)
	if err != nil {
		ra.done(0, "", err)
		return a, d, nil, err
	}
	ra.a = a
	return a, d, ra, nil
}

// done writes the line: n bytes of the artifact sent (status 200, or the
// status the fetch endpoint gives err), for the link whose token's id is
// tokenID ("" without one).
func (ra *readAudit) done(n int64, tokenID string, err error) {
	if ra == nil {
		return
	}
	status := http.StatusOK
	if err != nil {
		status, n = artifact.HTTPError(err).Status, 0
	}
	ra.o.o.Artifacts.AuditFetch(ra.ctx, ra.a, artifact.FetchEvent{ID: ra.id, Via: ra.via, Source: ra.rq.Source,
		Status: status, Bytes: n, TokenID: tokenID, Decision: ra.rec.ID(), Err: err})
}

// auditRedirect writes the audit line of s answered with a redirect to a
// presigned storage URL for a (its bytes leave from the store, unseen),
// allowed by the fetch decision rec names.
func (o *Methods) auditRedirect(ctx context.Context, s *streamCall, a artifact.Artifact, rec *decision.Recorder) {
	o.o.Artifacts.AuditFetch(ctx, a, artifact.FetchEvent{ID: s.id, Via: artifact.ViaRedirect, Source: s.rq.Source,
		Status: http.StatusFound, Decision: rec.ID()})
}

// recording returns ctx carrying a decision recorder when the store keeps
// an audit trail, and ctx itself with a nil recorder otherwise.
func (o *Methods) recording(ctx context.Context) (context.Context, *decision.Recorder) {
	if o.o.Artifacts.Audit == nil {
		return ctx, nil
	}
	return decision.WithRecorder(ctx)
}
