package artifact

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"

	"go.opentelemetry.io/otel/trace"

	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/policy/decision"
)

// The audit trail: one structured line on Service.Audit for every offload
// (AuditOffload) and every read of an artifact's bytes, allowed or
// refused, whatever the way (AuditFetch). The lines of one artifact share
// its id, and carry the call that produced it (Artifact.Call), so "who
// fetched the output of call X" is a filter on one attribute. No line
// carries a token, an Authorization header or a link: a link is named by
// its token's id, which Service.Revoke takes.

// Audit line messages.
const (
	AuditOffloadMsg = "audit: offload"
	AuditFetchMsg   = "audit: fetch"
)

// maxAuditRange bounds the Range header an audit line repeats: it is the
// client's to write.
const maxAuditRange = 64

// OffloadEvent is what an offload's audit line says beyond the artifact
// and its link.
type OffloadEvent struct {
	Kind string // the policy's kind of what was stored: text, image, audio, resource, structured
	// OffloadDecision and MintDecision are the ids of the decisions that
	// let it leave the result and minted its link (decision.Recorder);
	// "" when none was made.
	OffloadDecision, MintDecision string
}

// AuditOffload writes the audit line of artifact a, stored with its link
// l from a result of the call a.Call (msg AuditOffloadMsg). Nothing when
// Service.Audit is nil.
func (s *Service) AuditOffload(ctx context.Context, a Artifact, l Link, e OffloadEvent) {
	if s.Audit == nil {
		return
	}
	attrs := append(s.auditArtifact(a, ""),
		slog.String("kind", e.Kind),
		slog.Int64("size", a.Size),
		slog.String("sha256", a.SHA256),
		slog.String("offload_decision", e.OffloadDecision),
		slog.String("mint_decision", e.MintDecision),
		slog.String("token_id", l.TokenID),
		slog.Time("link_expires", l.Expires.UTC()),
	)
	s.Audit.LogAttrs(ctx, slog.LevelInfo, AuditOffloadMsg, attrs...)
}

// FetchEvent is one read of an artifact's bytes, for its audit line.
type FetchEvent struct {
	ID     string     // the artifact id asked for
	Via    string     // ViaLink, ViaRedirect, ViaRead or ViaStream
	Source netip.Addr // the client's address; zero when unknown (stdio)
	// Status is the HTTP status of the answer (on MCP paths, the status
	// the fetch endpoint gives the same outcome: 200, 403, 404…).
	Status int
	Bytes  int64  // bytes of the artifact sent
	Range  string // the Range header asked, "" for the whole
	// TokenID is the id of the link's token (never the token); "" when
	// the read had no link.
	TokenID string
	// Decision is the id of the fetch decision (decision.Recorder); ""
	// when the read was refused before the policy was asked.
	Decision string
	// Err is why the read was refused or failed; nil when it was served.
	Err error
}

// AuditFetch writes the audit line of a read of artifact a (msg
// AuditFetchMsg): its id and tenant, the call that produced it, the
// read's own trace id (from ctx's span, if any) and e. When a is zero
// (a read refused before the artifact was read), its metadata is taken
// from the cache if it is there, never from the store. Nothing when
// Service.Audit is nil.
func (s *Service) AuditFetch(ctx context.Context, a Artifact, e FetchEvent) {
	if s.Audit == nil {
		return
	}
	if a.ID == "" && ValidID(e.ID) {
		a, _ = s.Cache.meta(e.ID)
	}
	if a.ID == "" {
		a.ID = e.ID
		if !ValidID(a.ID) {
			a.ID = "" // the client's to write: not repeated
		}
	}
	traceID := ""
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		traceID = sc.TraceID().String()
	}
	rng := e.Range
	if len(rng) > maxAuditRange {
		rng = rng[:maxAuditRange]
	}
	attrs := append(s.auditArtifact(a, "call_"),
		slog.String("trace_id", traceID),
		slog.String("via", e.Via),
		slog.String("source", sourceString(e.Source)),
		slog.Int("status", e.Status),
		slog.Int64("bytes", e.Bytes),
		slog.String("range", rng),
		slog.String("token_id", e.TokenID),
		slog.String("decision", e.Decision),
		slog.String("denial", denial(e.Err)),
	)
	s.Audit.LogAttrs(ctx, slog.LevelInfo, AuditFetchMsg, attrs...)
}

// auditArtifact is what every audit line says of a: its id and tenant,
// and the call that produced it with each name prefixed by prefix.
func (s *Service) auditArtifact(a Artifact, prefix string) []slog.Attr {
	c := a.Call
	return append(make([]slog.Attr, 0, 20),
		slog.String("artifact", a.ID),
		slog.String("tenant", a.Tenant),
		slog.String(prefix+"upstream", c.Upstream),
		slog.String(prefix+"tool", c.Tool),
		slog.String(prefix+"request_id", c.RequestID),
		slog.String(prefix+"session", c.Session),
		slog.String(prefix+"trace_id", c.TraceID),
		slog.String(prefix+"span_id", c.SpanID),
	)
}

// errRevoked is ErrLinkRefused for a link whose token was revoked.
var errRevoked = errors.New("the link was revoked")

// denial says in a few words why a read was refused, for its audit line:
// "" when err is nil; the policy's own reason for a denial; a fixed
// phrase otherwise. It never repeats err's text, which may quote the
// request.
func denial(err error) string {
	var de *DeniedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &de) && de.Err != nil:
		return "policy: no decision (evaluation failed)"
	case errors.As(err, &de) && de.Reason == "":
		return "policy: denied"
	case errors.As(err, &de):
		return "policy: " + de.Reason
	case errors.Is(err, errRevoked):
		return "link revoked"
	case errors.Is(err, token.ErrExpired):
		return "link expired"
	case errors.Is(err, ErrLinkRefused):
		return "link refused (malformed, tampered, retired key or bindings)"
	}
	return HTTPError(err).Code
}

// fetchNote is what the fetch endpoint notes of one fetch for its audit
// line: the artifact served and the fetch decision's recorder. A nil
// *fetchNote (no audit trail) notes nothing and costs nothing.
type fetchNote struct {
	a   Artifact
	rec *decision.Recorder
}

// fetchNote returns a note for one fetch; nil without an audit trail.
func (s *Service) fetchNote() *fetchNote {
	if s.Audit == nil {
		return nil
	}
	return &fetchNote{}
}

// watch returns ctx carrying n's decision recorder.
func (n *fetchNote) watch(ctx context.Context) context.Context {
	if n == nil {
		return ctx
	}
	ctx, n.rec = decision.WithRecorder(ctx)
	return ctx
}

// served notes the artifact the fetch was allowed to read.
func (n *fetchNote) served(a Artifact) {
	if n != nil {
		n.a = a
	}
}

type auditViaKey struct{}

// AuditAs returns ctx under which the fetch endpoint names the reads it
// serves via (ViaStream) in the audit trail instead of ViaLink: how
// resources/stream's direct mode, which the endpoint serves with a link
// minted for it, is told apart from a client's own fetch of a link.
func AuditAs(ctx context.Context, via string) context.Context {
	return context.WithValue(ctx, auditViaKey{}, via)
}

// auditServed writes the audit line of a fetch the endpoint answered
// with status after n bytes (err: why it refused), for the link whose
// token's id is tokenID.
func (s *Service) auditServed(r *http.Request, id, tokenID string, status int, bytes int64, n *fetchNote, err error) {
	if n == nil {
		return
	}
	ctx := r.Context()
	via, _ := ctx.Value(auditViaKey{}).(string)
	if via == "" {
		via = ViaLink
	}
	if status != http.StatusOK && status != http.StatusPartialContent {
		bytes = 0 // an error's body, not the artifact's
	}
	s.AuditFetch(ctx, n.a, FetchEvent{ID: id, Via: via, Source: remoteAddr(r), Status: status, Bytes: bytes,
		Range: r.Header.Get("Range"), TokenID: tokenID, Decision: n.rec.ID(), Err: err})
}
