package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/spillway-dev/spillway/artifact/tracing"
)

// tracingFlush bounds how long exit waits for the last spans to reach the
// collector, after the servers' own shutdown grace.
const tracingFlush = 2 * time.Second

// tracingWanted reports whether the standard OpenTelemetry environment
// asks for traces: an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), OTEL_TRACES_EXPORTER is not "none"
// and OTEL_SDK_DISABLED is not true. It refuses what Spillway cannot
// export: an exporter other than otlp, and a protocol other than
// http/protobuf or http/json (grpc: the gRPC exporter is not built in).
func tracingWanted(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false, nil
	case "", "otlp":
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: Spillway exports traces over OTLP only (otlp, or none)", exp)
	}
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false, nil
	}
	proto := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch p := strings.TrimSpace(proto); p {
	case "", "http/protobuf", "http/json":
	default:
		return false, fmt.Errorf("OTLP protocol %q: Spillway exports traces over OTLP/HTTP only; set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf and point the endpoint at the collector's OTLP/HTTP port (4318)", p)
	}
	return true, nil
}

// startTracing turns tracing on when the environment asks for it (see
// tracingWanted): spans go through a batch processor (OTEL_BSP_*) to an
// OTLP/HTTP exporter, which reads the rest of OTEL_EXPORTER_OTLP_*
// (endpoint, headers, timeout, compression, certificates) itself. The
// service is OTEL_SERVICE_NAME, default spillway, with
// OTEL_RESOURCE_ATTRIBUTES. It installs the W3C trace context propagator
// globally. The returned stop flushes and shuts the exporter down within
// tracingFlush; with tracing off it does nothing.
func startTracing(ctx context.Context, getenv func(string) string, log *slog.Logger) (stop func(), err error) {
	on, err := tracingWanted(getenv)
	if !on || err != nil {
		return func() {}, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "spillway"), attribute.String("service.version", versionString())),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTextMapPropagator(tracing.Propagator())
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("exporting traces failed", "err", err)
	}))
	tracing.Enable(tp)
	log.Info("tracing on", "exporter", "otlp/http")
	return func() {
		tracing.Enable(nil)
		sctx, cancel := context.WithTimeout(context.Background(), tracingFlush)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("flushing the last traces failed", "err", err)
		}
	}, nil
}

// traceFetch is the fetch endpoint's tracing (artifact.HandlerOptions.Trace):
// a server span per fetch, child of the fetcher's traceparent if it sent
// one (or of the MCP request that streams the artifact), with the artifact id, the status and the bytes sent. The span
// records the path alone: the token (query or Authorization) never.
func traceFetch(r *http.Request, id string) (*http.Request, func(status int, bytes int64, err error)) {
	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		// A fetcher's own request; a resources/stream the proxy serves
		// through this handler is already under its MCP request's span.
		ctx = tracing.Extract(ctx, r.Header)
	}
	ctx, sp := tracing.Start(ctx, r.Method+" /a/{id}", trace.SpanKindServer,
		attribute.String(tracing.HTTPMethod, r.Method), attribute.String("http.route", "/a/{id}"),
		attribute.String(tracing.URLPath, "/a/"+id), attribute.String(tracing.ArtifactID, id))
	if sp == nil {
		return r, func(int, int64, error) {}
	}
	return r.WithContext(ctx), func(status int, bytes int64, _ error) {
		if status == 0 {
			status = http.StatusOK
		}
		sp.Set(attribute.Int(tracing.HTTPStatus, status), attribute.Int64(tracing.FetchBytes, bytes))
		if status >= 500 {
			sp.Fail(strconv.Itoa(status), http.StatusText(status))
		}
		// The error is not recorded: a refused link's may quote the token.
		sp.End(nil)
	}
}
